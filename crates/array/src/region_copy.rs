//! Moving a region of an array between two locations (this engine and another site's S3
//! endpoint, either way): only the chunks the region intersects are copied, encoded as they
//! are (no decode), in parallel, each verified on arrival (its MD5 travels with it) and tagged
//! with its source's version, so a copy run again after an interruption skips every chunk
//! already there from the same source version. The array's `zarr.json` goes first: the copy is
//! at once an array whose other chunks read as the fill value. Or, with `AsNewArray`, the region
//! becomes an array of its own shape, decoded and written through the transfer machinery.
//! Each copy times its phases (PDC-XF's Figure 9 breakdown of a migration).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use zarrs::storage::StoreKey;

use crate::array::ZarrArray;
use crate::chunks;
use crate::spec::{ArraySpec, Codec};
use crate::{ArrayError, Location, Region};

/// How the region lands on the other side.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyMode {
    /// The intersecting chunks, as they are, under the same array metadata.
    Chunks,
    /// A new array holding only the region, chunked `chunks` (default: the source's, clipped),
    /// sharded into `inner_chunks` if given, and encoded with `codecs`.
    AsNewArray { chunks: Option<Vec<u64>>, inner_chunks: Option<Vec<u64>>, codecs: Vec<Codec> },
}

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Chunks (objects) the region intersects.
    pub chunks: u64,
    /// Chunks sent in this run.
    pub sent: u64,
    /// Chunks already there from the same source version (a resumed copy), not sent again.
    pub skipped: u64,
    /// Chunks the source does not have (they read as the fill value on both sides).
    pub absent: u64,
    /// Bytes sent (encoded chunks and metadata).
    pub bytes: u64,
    /// Where the time went.
    pub times: CopyTimes,
}

/// A copy's time by phase. Chunks move `threads` at a time, so `read`, `check` and `write` are
/// thread time summed over the chunks (their sum can pass `wall`); `plan` and `metadata` run
/// alone. Reading the source, or writing the destination, includes the network when that side
/// is a remote endpoint (a push's writes are the upload and the other site's commit, a pull's
/// reads the download).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CopyTimes {
    /// Opening the source array and cutting the region into chunks (or making the new array).
    pub plan: Duration,
    /// Writing the array's `zarr.json` at the destination.
    pub metadata: Duration,
    /// Reading chunks from the source (with a new array: reading and decoding the region).
    pub read: Duration,
    /// Asking the destination which chunks it already has from the same source version.
    pub check: Duration,
    /// Writing chunks at the destination, verified (with a new array: encoding them too).
    pub write: Duration,
    /// The whole copy.
    pub wall: Duration,
}

/// Thread time summed across a pool.
#[derive(Default)]
struct Summed(AtomicU64);

impl Summed {
    fn time<T>(&self, work: impl FnOnce() -> T) -> T {
        let began = Instant::now();
        let out = work();
        self.0.fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    fn total(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// Copies `selection` of the array at `source`/`source_path` to `target`/`target_path`, with
/// `threads` in parallel; `progress(done, total)` is called as chunks finish.
#[allow(clippy::too_many_arguments)]
pub fn copy_region(
    source: &Location,
    source_path: &str,
    target: &Location,
    target_path: &str,
    region: &Region,
    mode: &CopyMode,
    threads: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<CopyReport, ArrayError> {
    let began = Instant::now();
    let array = ZarrArray::open(source, source_path)?;
    let opened = began.elapsed();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .start_handler(|_| crate::reset_thread_identity())
        .build()
        .map_err(|e| ArrayError::Transfer(format!("cannot start the copy pool: {e}")))?;
    let mut report = match mode {
        CopyMode::Chunks => pool.install(|| copy_chunks(&array, target, target_path, region, progress)),
        CopyMode::AsNewArray { chunks, inner_chunks, codecs } => pool.install(|| {
            let layout = (chunks.clone(), inner_chunks.clone(), codecs.clone());
            copy_as_new_array(&array, target, target_path, region, layout, progress)
        }),
    }?;
    report.times.plan += opened;
    report.times.wall = began.elapsed();
    Ok(report)
}

fn copy_chunks(
    array: &ZarrArray,
    target: &Location,
    target_path: &str,
    region: &Region,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<CopyReport, ArrayError> {
    let mut times = CopyTimes::default();
    let began = Instant::now();
    let extent = array.checked(region, array.region_bytes(region)?)?;
    let pieces = chunks::pieces(array.inner(), &extent)?;
    let destination = target.chunk_store()?;
    times.plan = began.elapsed();
    // The metadata first, as the source has it (a resumed copy writes it again: it is small).
    let began = Instant::now();
    let metadata = serde_json::to_vec_pretty(&array.metadata()).map_err(|e| ArrayError::Spec(e.to_string()))?;
    let metadata_key = StoreKey::new(format!("{}/zarr.json", target_path.trim_matches('/')))?;
    destination.put_copy(&metadata_key, &metadata, "metadata")?;
    times.metadata = began.elapsed();
    let (read, check, write) = (Summed::default(), Summed::default(), Summed::default());
    let total = pieces.len() as u64;
    let (sent, skipped, absent, bytes, done) = (
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(metadata.len() as u64),
        AtomicU64::new(0),
    );
    let source_prefix = array.path().trim_matches('/').to_string();
    let target_prefix = target_path.trim_matches('/').to_string();
    pieces.par_iter().try_for_each(|piece| -> Result<(), ArrayError> {
        let key = array.inner().chunk_key(&piece.chunk);
        // The chunk key relative to the array, then placed under the target's path.
        let relative = key.as_str().strip_prefix(&source_prefix).unwrap_or(key.as_str()).trim_start_matches('/');
        let target_key = StoreKey::new(format!("{target_prefix}/{relative}"))?;
        match read.time(|| array.store().get_tagged(&key))? {
            None => {
                absent.fetch_add(1, Ordering::Relaxed);
            }
            Some((value, tag)) => {
                if check.time(|| destination.copied_from(&target_key))?.as_deref() == Some(tag.as_str()) {
                    skipped.fetch_add(1, Ordering::Relaxed);
                } else {
                    write.time(|| destination.put_copy(&target_key, &value, &tag))?;
                    sent.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(value.len() as u64, Ordering::Relaxed);
                }
            }
        }
        progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
        Ok(())
    })?;
    Ok(CopyReport {
        chunks: total,
        sent: sent.into_inner(),
        skipped: skipped.into_inner(),
        absent: absent.into_inner(),
        bytes: bytes.into_inner(),
        times: CopyTimes { read: read.total(), check: check.total(), write: write.total(), ..times },
    })
}

fn copy_as_new_array(
    array: &ZarrArray,
    target: &Location,
    target_path: &str,
    region: &Region,
    (chunks, inner_chunks, codecs): (Option<Vec<u64>>, Option<Vec<u64>>, Vec<Codec>),
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<CopyReport, ArrayError> {
    let shape = region.shape();
    let chunk_shape =
        chunks.unwrap_or_else(|| array.chunk_shape().iter().zip(&shape).map(|(&c, &s)| c.min(s.max(1))).collect());
    let stored = array.metadata();
    let mut spec = ArraySpec::new(shape.clone(), array.data_type(), chunk_shape.clone());
    spec.attributes = array.attributes().clone();
    spec.codecs = codecs;
    spec.inner_chunks = inner_chunks;
    spec.dimension_names = stored["dimension_names"]
        .as_array()
        .map(|names| names.iter().map(|n| n.as_str().unwrap_or_default().to_string()).collect());
    let began = Instant::now();
    let copy = match ZarrArray::open(target, target_path) {
        Ok(existing) if existing.shape() == shape.as_slice() => existing,
        Ok(_) => return Err(ArrayError::Exists(format!("{target_path} (with another shape)"))),
        Err(ArrayError::NotFound(_)) => ZarrArray::create(target, target_path, &spec)?,
        Err(err) => return Err(err),
    };
    let metadata = began.elapsed();
    // Slab by slab along the first dimension, a chunk row of the new array at a time.
    let rows = shape.first().copied().unwrap_or(0);
    let step = chunk_shape.first().copied().unwrap_or(1).max(1);
    let total = rows.div_ceil(step);
    let mut report = CopyReport { chunks: total, ..CopyReport::default() };
    report.times.metadata = metadata;
    let stride = region.stride.clone().unwrap_or_else(|| vec![1; shape.len()]);
    for (index, first) in (0..rows).step_by(step as usize).enumerate() {
        let take = step.min(rows - first);
        let mut slab = region.clone();
        slab.offset[0] += first * stride[0];
        slab.count[0] = take;
        let began = Instant::now();
        let data = array.read_vec(&slab)?;
        report.times.read += began.elapsed();
        let mut at = Region::new(vec![0; shape.len()], shape.clone());
        at.offset[0] = first;
        at.count[0] = take;
        let began = Instant::now();
        copy.write(&at, &data)?;
        report.times.write += began.elapsed();
        report.sent += 1;
        report.bytes += data.len() as u64;
        progress(index as u64 + 1, total);
    }
    Ok(report)
}
