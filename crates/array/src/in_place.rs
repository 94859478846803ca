//! Uncompressed shards written in place. A sharded array whose inner chunks are stored as raw
//! little-endian bytes (`sharding_indexed` with the `bytes` codec alone, its index `bytes` +
//! `crc32c` at the end) has a layout its shape fixes: inner chunk i of a shard (C order) at i
//! times an inner chunk's size, then the index. Once such a shard exists, a region's write is a
//! `pwrite` of each inner chunk it touches into the shard's open file
//! (`ObjectFiles::object_file_for_update`) instead of a new object per chunk, so a small region
//! costs what a write into an HDF5 file costs. Readers (zarr-python, zarrs, this crate) see a
//! valid shard at every moment: its index never changes in place.
//!
//! A missing shard is created whole (fill values, the fixed index; one atomic write if still
//! absent; a fill value of zeros is a hole, so creating costs the index alone); a shard in another layout (zarr-python omits inner chunks of fill values) is
//! rewritten in the fixed one first (read, merge, write if unchanged); a store that cannot write
//! in place (a remote endpoint, an erasure pool, a versioned bucket) gets the whole shard
//! rewritten, as chunks are. What in place gives up: a reader concurrent with a write may see
//! part of it, as with a POSIX program's write; when a write is visible (a transfer's
//! consistency point) does not change, and strict durability syncs the file before it returns.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use isthmus_store::UpdateFile;
use serde_json::Value;
use zarrs::storage::StoreKey;

use crate::ArrayError;
use crate::backend::{ChunkStore, InPlace, WriteCondition};
use crate::chunks::{self, CONFLICT_RETRIES, Source, ZArray};

/// The most inner chunks a shard may have to be written in place: its index (16 bytes each)
/// is kept in memory to compare against.
const MAX_INNER_CHUNKS: u64 = 1 << 16;

/// Shard files kept open for the next writes, per array: opening a file and checking its index
/// costs more than writing a small region.
const OPEN_FILES: usize = 8;

/// How long a shard file is kept open: a permission or policy change (checked when a file is
/// opened) reaches in-place writes within this time, as bucket settings reach every request. A
/// kept file is dropped at once when the shard is replaced, deleted or truncated; a shard's
/// index rewritten in place by another program is seen when the file is opened again.
const OPEN_TTL: Duration = Duration::from_secs(1);

/// A shard file open for in-place writes, its layout checked.
type OpenShard = (StoreKey, Arc<UpdateFile>, Instant);

/// The fixed layout of an array's uncompressed shards.
#[derive(Debug)]
pub(crate) struct FixedShards {
    shard: Vec<u64>,
    inner: Vec<u64>,
    /// Inner chunks per shard along each dimension.
    grid: Vec<u64>,
    count: u64,
    element: usize,
    inner_bytes: u64,
    /// The index every shard in this layout ends with, checksum included.
    index: Vec<u8>,
    /// Shard files open for writes, most recently used last. They belong to the identity
    /// the array was opened as (an array is opened at a location, with its request context).
    open: Mutex<Vec<OpenShard>>,
}

/// An inner chunk a write touches: its place in the shard and the parts of the sources in it.
struct Touched<'a> {
    index: u64,
    sources: Vec<Source<'a>>,
}

fn shape_of(value: &Value) -> Option<Vec<u64>> {
    value.as_array()?.iter().map(Value::as_u64).collect()
}

/// Whether a codec entry is `bytes` in little-endian order (or with no order, for one-byte
/// elements).
fn little_endian_bytes(codec: &Value, element: usize) -> bool {
    codec["name"] == "bytes"
        && match codec["configuration"]["endian"].as_str() {
            Some(endian) => endian == "little",
            None => element == 1,
        }
}

impl FixedShards {
    /// The layout of an array with this `zarr.json`, if its shards are uncompressed (and this
    /// machine stores elements little-endian, as the layout does).
    pub(crate) fn of(metadata: &Value, element: usize) -> Option<Self> {
        if !cfg!(target_endian = "little") || metadata["chunk_grid"]["name"] != "regular" {
            return None;
        }
        let [sharding] = metadata["codecs"].as_array()?.as_slice() else { return None };
        let config = &sharding["configuration"];
        let [inner_codec] = config["codecs"].as_array()?.as_slice() else { return None };
        let [index_bytes, index_crc] = config["index_codecs"].as_array()?.as_slice() else { return None };
        let location = config["index_location"].as_str().unwrap_or("end");
        if sharding["name"] != "sharding_indexed"
            || !little_endian_bytes(inner_codec, element)
            || !little_endian_bytes(index_bytes, 8)
            || index_crc["name"] != "crc32c"
            || location != "end"
        {
            return None;
        }
        let shard = shape_of(&metadata["chunk_grid"]["configuration"]["chunk_shape"])?;
        let inner = shape_of(&config["chunk_shape"])?;
        if shard.len() != inner.len() || inner.contains(&0) || shard.iter().zip(&inner).any(|(s, i)| s % i != 0) {
            return None;
        }
        let grid: Vec<u64> = shard.iter().zip(&inner).map(|(s, i)| s / i).collect();
        let count = grid.iter().try_fold(1u64, |n, &g| n.checked_mul(g))?;
        let inner_elements = inner.iter().try_fold(1u64, |n, &i| n.checked_mul(i))?;
        let inner_bytes = inner_elements.checked_mul(element as u64)?;
        // The shard's decoded size is bounded when the array is opened; the index is bounded here.
        if count > MAX_INNER_CHUNKS || inner_bytes.checked_mul(count)? > crate::size::MAX_CHUNK_BYTES {
            return None;
        }
        let mut index = Vec::with_capacity(count as usize * 16 + 4);
        for i in 0..count {
            index.extend_from_slice(&(i * inner_bytes).to_le_bytes());
            index.extend_from_slice(&inner_bytes.to_le_bytes());
        }
        let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &index) as u32;
        index.extend_from_slice(&crc.to_le_bytes());
        Some(Self { shard, inner, grid, count, element, inner_bytes, index, open: Mutex::default() })
    }

    /// A shard's size in this layout.
    fn shard_bytes(&self) -> u64 {
        self.count * self.inner_bytes + self.index.len() as u64
    }

    /// The inner chunk at `coords` (per dimension, in the shard's inner grid), in C order.
    fn inner_index(&self, coords: &[u64]) -> u64 {
        coords.iter().zip(&self.grid).fold(0, |n, (&c, &g)| n * g + c)
    }

    /// A shard's decoded values (C order over the shard's shape) in this layout.
    fn encode(&self, decoded: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; self.shard_bytes() as usize];
        let ones = vec![1; self.inner.len()];
        let zeros = vec![0; self.inner.len()];
        for coords in chunks::cartesian(&self.grid.iter().map(|&g| (0..g).collect()).collect::<Vec<_>>()) {
            let at = (self.inner_index(&coords) * self.inner_bytes) as usize;
            let start: Vec<u64> = coords.iter().zip(&self.inner).map(|(c, i)| c * i).collect();
            let target = &mut out[at..at + self.inner_bytes as usize];
            chunks::copy_box(
                self.element,
                &self.inner,
                decoded,
                &self.shard,
                &start,
                &ones,
                target,
                &self.inner,
                &zeros,
                &ones,
            );
        }
        let at = (self.count * self.inner_bytes) as usize;
        out[at..].copy_from_slice(&self.index);
        out
    }

    /// The inner chunks the sources touch, in index order, each with the sources' parts in it
    /// (placed relative to the inner chunk).
    fn touched<'a>(&self, sources: &[Source<'a>]) -> Vec<Touched<'a>> {
        let mut parts: Vec<(u64, Source<'a>)> = Vec::new();
        for source in sources {
            for mut piece in chunks::split(&source.piece, &self.inner) {
                let coords: Vec<u64> = piece.local_start.iter().zip(&self.inner).map(|(s, i)| s / i).collect();
                for (start, (c, i)) in piece.local_start.iter_mut().zip(coords.iter().zip(&self.inner)) {
                    *start -= c * i;
                }
                parts.push((self.inner_index(&coords), Source { piece, data: source.data, shape: source.shape }));
            }
        }
        parts.sort_by_key(|(index, _)| *index);
        let mut touched: Vec<Touched<'a>> = Vec::new();
        for (index, part) in parts {
            match touched.last_mut() {
                Some(last) if last.index == index => last.sources.push(part),
                _ => touched.push(Touched { index, sources: vec![part] }),
            }
        }
        touched
    }

    /// Whether `file` is a shard in this layout: its size and its whole index.
    fn holds(&self, file: &UpdateFile) -> Result<bool, ArrayError> {
        if file.size() != self.shard_bytes() {
            return Ok(false);
        }
        let mut stored = vec![0u8; self.index.len()];
        match file.read_at(self.count * self.inner_bytes, &mut stored) {
            Ok(()) => Ok(stored == self.index),
            // Changed since it was opened (a remote handle learns it here).
            Err(isthmus_store::StoreError::PreconditionFailed) => Ok(false),
            Err(err) => Err(store_error(err)),
        }
    }

    fn open_files(&self) -> MutexGuard<'_, Vec<OpenShard>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shard file under `key` kept open, if it is recent and still the shard's file.
    fn kept(&self, key: &StoreKey) -> Option<Arc<UpdateFile>> {
        let mut open = self.open_files();
        open.retain(|(_, _, opened)| opened.elapsed() < OPEN_TTL);
        let at = open.iter().position(|(kept, _, _)| kept == key)?;
        let entry = open.remove(at);
        if !entry.1.still_current() {
            return None;
        }
        let file = entry.1.clone();
        open.push(entry);
        Some(file)
    }

    /// Drops the shard file kept under `key`.
    fn forget(&self, key: &StoreKey) {
        self.open_files().retain(|(kept, _, _)| kept != key);
    }

    /// Keeps a checked shard file open for the next writes (the least recently used goes).
    fn keep(&self, key: StoreKey, file: Arc<UpdateFile>) {
        let mut open = self.open_files();
        open.retain(|(kept, _, _)| *kept != key);
        if open.len() >= OPEN_FILES {
            open.remove(0);
        }
        open.push((key, file, Instant::now()));
    }

    /// The bytes of an inner chunk that one source covers whole and holds contiguously.
    fn whole_bytes<'a>(&self, chunk: &Touched<'a>) -> Option<&'a [u8]> {
        match &chunk.sources[..] {
            [single] => chunks::whole_chunk_bytes(self.element, &self.inner, single),
            _ => None,
        }
    }

    /// How many of an inner chunk's elements the sources cover.
    fn covered(chunk: &Touched<'_>) -> u64 {
        chunk.sources.iter().map(|s| s.piece.elements()).sum()
    }

    /// Writes the touched inner chunks into the shard's file; false when the file is no
    /// longer the shard's (replaced, deleted or truncated since it was opened: the caller opens
    /// it again). Inner chunks all covered whole are written in one call (through the local
    /// socket, one request); otherwise those covered in part are read, merged and written
    /// back, all under the file's lock. Synced if the store is strictly durable.
    fn write_inner(&self, file: &UpdateFile, touched: &[Touched<'_>]) -> Result<bool, ArrayError> {
        let inner_elements = self.inner_bytes / self.element as u64;
        let written = if touched.iter().all(|chunk| Self::covered(chunk) == inner_elements) {
            let merged: Vec<Option<Vec<u8>>> = touched
                .iter()
                .map(|chunk| {
                    self.whole_bytes(chunk).is_none().then(|| {
                        let mut buffer = vec![0u8; self.inner_bytes as usize];
                        chunks::merge(self.element, &self.inner, &mut buffer, &chunk.sources);
                        buffer
                    })
                })
                .collect();
            let pieces: Vec<(u64, &[u8])> = touched
                .iter()
                .zip(&merged)
                .map(|(chunk, buffer)| {
                    let bytes = buffer.as_deref().or_else(|| self.whole_bytes(chunk)).unwrap_or_default();
                    (chunk.index * self.inner_bytes, bytes)
                })
                .collect();
            file.write(&pieces)
        } else {
            self.merge_inner(file, touched, inner_elements)
        };
        match written {
            Ok(()) => Ok(true),
            Err(isthmus_store::StoreError::PreconditionFailed) => Ok(false),
            Err(err) => Err(store_error(err)),
        }
    }

    /// `write_inner` where some inner chunk is covered in part: read, merge, write back.
    fn merge_inner(
        &self,
        file: &UpdateFile,
        touched: &[Touched<'_>],
        inner_elements: u64,
    ) -> isthmus_store::StoreResult<()> {
        let lock = file.lock()?;
        if !file.still_current() {
            return Err(isthmus_store::StoreError::PreconditionFailed);
        }
        let mut buffer = Vec::new();
        for chunk in touched {
            let offset = chunk.index * self.inner_bytes;
            if let Some(bytes) = self.whole_bytes(chunk) {
                lock.write_at(offset, bytes)?;
                continue;
            }
            buffer.resize(self.inner_bytes as usize, 0);
            if Self::covered(chunk) < inner_elements {
                lock.read_at(offset, &mut buffer)?;
            }
            chunks::merge(self.element, &self.inner, &mut buffer, &chunk.sources);
            lock.write_at(offset, &buffer)?;
        }
        drop(lock);
        file.commit()
    }

    /// Writes one shard's sources (disjoint pieces): in place when the shard is in this layout
    /// and the store can, else the whole shard in this layout (created if absent, rewritten if
    /// unchanged since read, retried otherwise).
    pub(crate) fn write_shard(
        &self,
        array: &ZArray,
        store: &dyn ChunkStore,
        chunk: &[u64],
        sources: &[Source<'_>],
    ) -> Result<(), ArrayError> {
        let key = array.chunk_key(chunk);
        let covered: u64 = sources.iter().map(|s| s.piece.elements()).sum();
        let whole = covered == array.chunk_subset_bounded(chunk)?.num_elements();
        let touched = if whole { Vec::new() } else { self.touched(sources) };
        let zero_fill = array.fill_value().as_ne_bytes().iter().all(|&b| b == 0);
        if !whole && let Some(file) = self.kept(&key) {
            if self.write_inner(&file, &touched)? {
                return Ok(());
            }
            self.forget(&key);
        }
        for _ in 0..CONFLICT_RETRIES {
            let (current, condition) = if whole {
                (None, WriteCondition::Always)
            } else {
                match store.update_in_place(&key)? {
                    InPlace::File(file) if self.holds(&file)? => {
                        let file = Arc::new(file);
                        if self.write_inner(&file, &touched)? {
                            self.keep(key, file);
                            return Ok(());
                        }
                        continue;
                    }
                    // A shard of zeros is created with its data a hole, then written in place.
                    InPlace::Missing if zero_fill => {
                        store.create_zeroed(&key, self.count * self.inner_bytes, &self.index)?;
                        continue;
                    }
                    InPlace::Missing => (None, WriteCondition::IfAbsent),
                    InPlace::File(_) | InPlace::Unsupported => match store.get_tagged(&key)? {
                        Some((encoded, tag)) => {
                            (Some(chunks::decode_chunk(array, chunk, &encoded)?), WriteCondition::IfTag(tag))
                        }
                        None => (None, WriteCondition::IfAbsent),
                    },
                }
            };
            let elements = self.shard.iter().product();
            let mut decoded = current.unwrap_or_else(|| chunks::filled_chunk(array, elements));
            chunks::merge(self.element, &self.shard, &mut decoded, sources);
            if store.set_if(&key, &self.encode(&decoded), condition)? {
                return Ok(());
            }
        }
        Err(ArrayError::Conflict { key: key.to_string() })
    }
}

impl FixedShards {
    /// Creates every shard of `array` that does not exist yet, in this layout (a hole where
    /// the fill value is zeros); answers how many it created.
    pub(crate) fn allocate(&self, array: &ZArray, store: &dyn ChunkStore) -> Result<u64, ArrayError> {
        let grid = array.chunk_grid_shape().to_vec();
        crate::size::chunk_count(&grid)?;
        let zero_fill = array.fill_value().as_ne_bytes().iter().all(|&b| b == 0);
        let mut created = 0;
        for chunk in chunks::cartesian(&grid.iter().map(|&n| (0..n).collect()).collect::<Vec<_>>()) {
            let key = array.chunk_key(&chunk);
            let made = if zero_fill {
                store.create_zeroed(&key, self.count * self.inner_bytes, &self.index)?
            } else {
                let filled = chunks::filled_chunk(array, self.shard.iter().product());
                store.set_if(&key, &self.encode(&filled), WriteCondition::IfAbsent)?
            };
            created += u64::from(made);
        }
        Ok(created)
    }
}

fn store_error(err: isthmus_store::StoreError) -> ArrayError {
    ArrayError::Storage(crate::engine_storage_error(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metadata(inner_codecs: Value, location: &str) -> Value {
        json!({
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [2, 3],
                "codecs": inner_codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": location
            }}]
        })
    }

    #[test]
    fn only_uncompressed_shards_with_the_index_at_the_end_have_a_fixed_layout() {
        let bytes = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
        let layout = FixedShards::of(&metadata(bytes.clone(), "end"), 4).expect("a fixed layout");
        assert_eq!((layout.count, layout.inner_bytes), (4, 24));
        assert_eq!(layout.shard_bytes(), 4 * 24 + 4 * 16 + 4);
        // Entry 2: offset 48, 24 bytes.
        assert_eq!(layout.index[32..40], 48u64.to_le_bytes());
        assert_eq!(layout.index[40..48], 24u64.to_le_bytes());
        let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &layout.index[..64]) as u32;
        assert_eq!(layout.index[64..], crc.to_le_bytes());
        assert!(FixedShards::of(&metadata(bytes, "start"), 4).is_none());
        let compressed = json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}]);
        assert!(FixedShards::of(&metadata(compressed, "end"), 4).is_none());
        let big_endian = json!([{"name": "bytes", "configuration": {"endian": "big"}}]);
        assert!(FixedShards::of(&metadata(big_endian, "end"), 4).is_none());
        let unsharded = json!({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]});
        assert!(FixedShards::of(&unsharded, 4).is_none());
    }

    #[test]
    fn encoding_places_each_inner_chunk_at_its_fixed_offset() {
        let bytes = json!([{"name": "bytes"}]);
        let layout = FixedShards::of(&metadata(bytes, "end"), 1).unwrap();
        // A 4x6 shard of bytes 0..24: inner chunk (1, 0) holds rows 2-3, columns 0-2.
        let decoded: Vec<u8> = (0..24).collect();
        let encoded = layout.encode(&decoded);
        assert_eq!(encoded[..6], [0, 1, 2, 6, 7, 8]);
        assert_eq!(encoded[6..12], [3, 4, 5, 9, 10, 11]);
        assert_eq!(encoded[12..18], [12, 13, 14, 18, 19, 20]);
        assert_eq!(encoded[24..], layout.index[..]);
    }
}
