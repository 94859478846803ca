//! Reading an erasure-coded object: a range within fewer than k data shards of a block from
//! those shards alone; otherwise each block from k good shards, asked of the fastest drives
//! first (data shards preferred: no decoding), with one more shard asked whenever a drive is
//! late against its peers' recent latency (a hedged read), and any shard that was missing or
//! rotten reported to the healer. Fewer than k good shards is an error, never wrong bytes.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Inner;
use super::codec::{self, Framing, unframe};
use super::manifest::{Segment, Stored};
use isthmus_store::ObjectRead;
use isthmus_store::error::{StoreError, StoreResult};

/// The shortest wait before a hedged read: below this, a drive is never called late.
const MIN_HEDGE_WAIT: Duration = Duration::from_millis(2);
/// The shortest wait for the shards of a ranged read before the whole block is read instead.
const SPAN_WAIT: Duration = Duration::from_millis(100);
/// A drive that reads go around still gets a read (a probe) this often, one at a time, so its
/// latency is known again when it recovers.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// A block as read: its bytes and which of its shards were bad (to heal).
pub(crate) struct BlockRead {
    pub(crate) block: Vec<u8>,
    pub(crate) bad: Vec<usize>,
}

/// A segment's shard files, opened (`None`: its drive is offline or the file is missing).
pub(crate) type ShardFiles = Vec<Option<Arc<std::fs::File>>>;

/// A reader opens at most this many shard files up front (all of an object's segments); an
/// object with more segments (a multipart upload of many parts) has each segment's opened when
/// the read reaches it.
const OPEN_UP_FRONT: usize = 512;

impl Inner {
    /// Opens the shard files of `segment` on the drives that serve reads.
    pub(crate) fn open_segment(&self, bucket: &str, segment: &Segment) -> ShardFiles {
        segment
            .drives
            .iter()
            .map(|&d| {
                let drive = &self.drives[d];
                drive.readable()?;
                drive.open_shard(bucket, &segment.data_id).ok().map(Arc::new)
            })
            .collect()
    }

    /// How long a read of `bytes` may take before one more shard is asked for: three times
    /// the pool's typical latency for that many bytes (latencies are kept per MiB), at least
    /// `MIN_HEDGE_WAIT`.
    fn hedge_wait(&self, median_us_per_mib: Option<u64>, bytes: usize) -> Duration {
        let typical = median_us_per_mib.unwrap_or(0) as f64 * bytes as f64 / f64::from(1 << 20);
        Duration::from_micros((3.0 * typical) as u64).max(MIN_HEDGE_WAIT)
    }

    /// Block `b` of `segment` from its open shard `files`: k good shards, asked in the best
    /// order, hedged; `skip` names a shard not to ask for (being rebuilt).
    pub(crate) fn read_block(
        self: &Arc<Self>,
        segment: &Segment,
        files: &ShardFiles,
        b: u64,
        skip: Option<usize>,
        object: &ReadFor,
    ) -> StoreResult<BlockRead> {
        let layout = segment.layout();
        let block_len = segment.block_len(b);
        let framed_len = segment.framed_len(b);
        let offset = segment.shard_offset(b);
        let (framing, shard_len) = (segment.framing, segment.shard_len(b));
        // Data shards first (no decoding), then parity; drives offline are not asked; slow
        // drives go last, except for a probe now and then.
        let mut order: Vec<usize> = (0..layout.shards()).filter(|&i| Some(i) != skip && files[i].is_some()).collect();
        // A shard file missing on a drive that serves reads is a shard to heal.
        let mut bad: Vec<usize> = (0..layout.shards())
            .filter(|&i| Some(i) != skip && files[i].is_none() && self.drives[segment.drives[i]].readable().is_some())
            .collect();
        let median = self.median_latency_us();
        let wait = self.hedge_wait(self.median_wait_us(), framed_len);
        let slow: Vec<bool> = segment.drives.iter().map(|&d| self.is_slow(&self.drives[d], median)).collect();
        order.sort_by_key(|&i| slow[i]);
        let probed =
            order.iter().copied().find(|&i| slow[i] && self.drives[segment.drives[i]].latency.claim_probe(PROBE_EVERY));
        let (tx, rx) = mpsc::channel::<(usize, Option<Vec<u8>>)>();
        // Asks still queued once the block is read (or given up) are dropped unrun: a slow
        // drive's lane is not kept busy with reads nobody waits for.
        let wanted = Wanted::default();
        let ask = |i: usize| {
            let drive_index = segment.drives[i];
            let is_probe = Some(i) == probed;
            let (tx, file) = (tx.clone(), files[i].clone().expect("only open shards are asked"));
            let (pool, asked, object, wanted) = (self.clone(), Instant::now(), object.clone(), wanted.token());
            self.drives[drive_index].latency.ask();
            self.drives[drive_index].lane.spawn(move || {
                let drive = &pool.drives[drive_index];
                // A probe runs whatever: it is how the drive's latency is known again.
                if !is_probe && !wanted.still() {
                    return;
                }
                let read = drive.timed_io_since(asked, framed_len, || read_at(&file, framed_len, offset));
                if is_probe {
                    drive.latency.probed();
                }
                let good = match read {
                    Ok(shard) if unframe(framing, &shard, shard_len).is_some() => Some(shard),
                    Ok(_) => {
                        report_rot(&pool, &object);
                        None
                    }
                    Err(err) => {
                        if err.kind() != std::io::ErrorKind::NotFound && err.kind() != std::io::ErrorKind::UnexpectedEof
                        {
                            drive.failed("read a shard", &err);
                        }
                        None
                    }
                };
                let _ = tx.send((i, good));
            });
        };
        let mut probe = probed;
        if let Some(i) = probe {
            // The probe's answer is used if it comes in time; nobody waits for it.
            ask(i);
            order.retain(|&j| j != i);
        }
        let mut next = 0;
        let mut in_flight = 0;
        while next < order.len() && in_flight < layout.data {
            ask(order[next]);
            next += 1;
            in_flight += 1;
        }
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; layout.shards()];
        let mut good = 0;
        let hedge = self.config.hedged_reads;
        let mut deadline = Instant::now() + wait;
        while good < layout.data {
            if in_flight == 0 && next >= order.len() && probe.is_none() {
                break;
            }
            let timeout = if hedge && next < order.len() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::from_secs(3600)
            };
            match rx.recv_timeout(timeout) {
                Ok((i, shard)) => {
                    let was_probe = Some(i) == probe;
                    if was_probe {
                        probe = None;
                    } else {
                        in_flight -= 1;
                    }
                    match shard {
                        Some(shard) if shards[i].is_none() => {
                            shards[i] = Some(shard);
                            good += 1;
                        }
                        Some(_) => {}
                        None => {
                            bad.push(i);
                            // A shard lost: ask the next drive at once (a probe lost is no
                            // shard the read was waiting for).
                            if !was_probe && next < order.len() {
                                ask(order[next]);
                                next += 1;
                                in_flight += 1;
                            }
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // A drive is late: ask one more (a hedged read) and wait again.
                    if next < order.len() {
                        ask(order[next]);
                        next += 1;
                        in_flight += 1;
                    }
                    deadline = Instant::now() + wait;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // Shards never asked for count as missing for the decoder, not as bad.
        let decoded = codec::decode_verified(layout, &shards, block_len, framing);
        if !bad.is_empty() {
            tracing::debug!(pool = %self.name, data_id = %segment.data_id, block = b, ?bad, "bad shards found on read");
        }
        match decoded {
            Ok(d) => Ok(BlockRead { block: d.block, bad }),
            Err(StoreError::InsufficientShards(why)) => Err(StoreError::InsufficientShards(format!(
                "pool {:?}: a block of the object cannot be rebuilt: {why}",
                self.name
            ))),
            Err(err) => Err(err),
        }
    }
}

impl Inner {
    /// Bytes `from..to` of block `b` from only the data shards that hold them, when that is
    /// fewer than k shards and each is on a drive that serves reads: a ranged
    /// read fetches what it needs, not the whole block. With chunked frames only the 64 KiB
    /// chunks holding the range are read and checked; with whole-shard frames each needed
    /// shard is read whole. `None` (read the whole block, hedged, decoding around what is bad)
    /// when a shard is missing, late, slow or rotten.
    pub(crate) fn read_span(
        self: &Arc<Self>,
        segment: &Segment,
        files: &ShardFiles,
        b: u64,
        (from, to): (usize, usize),
        object: &ReadFor,
    ) -> Option<Vec<u8>> {
        let layout = segment.layout();
        let block_len = segment.block_len(b);
        let shard_len = segment.shard_len(b);
        if from >= to || to > block_len {
            return None;
        }
        let (first, last) = (from / shard_len, (to - 1) / shard_len);
        if last + 1 - first >= layout.data {
            return None;
        }
        // A drive taken for slow is not asked: the whole block is read around it. (Drives are
        // judged on their service times: busy healthy drives, whose queues are long now and
        // then, are not taken for slow.) A drive late all the same is waited for up to a bound,
        // then the whole block is read, hedged.
        let median = self.median_latency_us();
        if files[first..=last].iter().any(Option::is_none)
            || segment.drives[first..=last].iter().any(|&d| self.is_slow(&self.drives[d], median))
        {
            return None;
        }
        let (framing, header, offset) = (segment.framing, segment.header_len(b), segment.shard_offset(b));
        let chunk = match framing {
            Framing::Chunked => codec::CHUNK,
            Framing::Whole => shard_len,
        };
        let (tx, rx) = mpsc::channel::<(usize, Option<Vec<u8>>)>();
        let wanted = Wanted::default();
        for (i, file) in files.iter().enumerate().take(last + 1).skip(first) {
            // The shard's bytes the range needs, widened to whole chunks.
            let (lo, hi) = (from.max(i * shard_len) - i * shard_len, to.min((i + 1) * shard_len) - i * shard_len);
            let (c0, c1) = (lo / chunk, (hi - 1) / chunk);
            let data_at = c0 * chunk;
            let data_len = ((c1 + 1) * chunk).min(shard_len) - data_at;
            let (tx, file, pool, drive_index) = (tx.clone(), file.clone()?, self.clone(), segment.drives[i]);
            let (object, wanted) = (object.clone(), wanted.token());
            let asked = Instant::now();
            self.drives[drive_index].latency.ask();
            self.drives[drive_index].lane.spawn(move || {
                if !wanted.still() {
                    return;
                }
                let read = pool.drives[drive_index].timed_io_since(asked, data_len, || -> std::io::Result<Vec<u8>> {
                    let crcs = read_at(&file, 4 * (c1 + 1 - c0), offset + 4 * c0 as u64)?;
                    let data = read_at(&file, data_len, offset + (header + data_at) as u64)?;
                    // A piece that fails its check is answered empty: not good.
                    Ok(if framing.verify(&crcs, &data, shard_len) {
                        data[lo - data_at..hi - data_at].to_vec()
                    } else {
                        report_rot(&pool, &object);
                        Vec::new()
                    })
                });
                let _ = tx.send((i, read.ok().filter(|bytes| !bytes.is_empty())));
            });
        }
        drop(tx);
        // A late shard costs a whole-block read after this, so the wait is long (queued reads
        // of busy drives are late by the hedging measure); it only bounds a stalled drive.
        let deadline = Instant::now() + (8 * self.hedge_wait(self.median_wait_us(), to - from)).max(SPAN_WAIT);
        let mut pieces: Vec<Option<Vec<u8>>> = vec![None; last + 1 - first];
        for _ in first..=last {
            let (i, piece) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()?;
            pieces[i - first] = Some(piece?);
        }
        let mut bytes = Vec::with_capacity(to - from);
        for piece in pieces {
            bytes.extend_from_slice(&piece?);
        }
        Some(bytes)
    }
}

/// Whether a read still wants the answers of the jobs it queued on drives' lanes: a job whose
/// reader has what it needs (or gave up) is dropped before its I/O, so a slow drive's lane is
/// not kept busy with reads nobody waits for. Dropping the `Wanted` withdraws its tokens.
pub(crate) struct Wanted(Arc<AtomicBool>);

/// A queued job's view of its reader's `Wanted`.
pub(crate) struct WantedToken(Arc<AtomicBool>);

impl Default for Wanted {
    fn default() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }
}

impl Wanted {
    pub(crate) fn token(&self) -> WantedToken {
        WantedToken(self.0.clone())
    }
}

impl Drop for Wanted {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

impl WantedToken {
    pub(crate) fn still(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The object a read is for (bucket, key): a lane that finds a rotten shard asks the healer
/// itself, also when the reader no longer waits for that lane's answer (a hedged read that
/// had k good shards first, a span read past its deadline). `None` for the healer's own reads.
pub(crate) type ReadFor = Option<Arc<(String, String)>>;

/// `len` bytes of `file` from `offset`, read into a new buffer without zeroing it first (a
/// shard read is mostly copies: zeroing 256 KiB before the kernel overwrites it cost as much
/// as a tenth of a read). A file that ends first is `UnexpectedEof`.
fn read_at(file: &std::fs::File, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(len);
    while bytes.len() < len {
        let at = offset + bytes.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut bytes), at) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    // The buffer may hold more than asked (its capacity rounded up): what follows is not ours.
    bytes.truncate(len);
    Ok(bytes)
}

fn report_rot(pool: &Inner, object: &ReadFor) {
    if let Some(object) = object {
        pool.healer.request(&object.0, &object.1);
    }
}

/// The bytes `first..=last` of an erasure-coded object.
pub(crate) struct EcReader {
    inner: Arc<Inner>,
    bucket: String,
    key: String,
    stored: Stored,
    /// The next byte to serve and one past the last.
    position: u64,
    end: u64,
    /// The block read last: its first byte's offset in the object and its bytes.
    block: Option<(u64, Vec<u8>)>,
    /// Each segment's shard files, once opened: open files keep a replaced object's bytes
    /// readable to the end of this read.
    files: Vec<Option<ShardFiles>>,
    reported: bool,
    /// `bucket/key`, for the lanes to report rot with.
    object: ReadFor,
}

impl EcReader {
    /// A reader of `range` (all when `None`); the first block is read at once, so an object
    /// that cannot be read fails here with its error rather than in the middle of a response.
    pub(crate) fn open(
        inner: Arc<Inner>,
        bucket: &str,
        key: &str,
        stored: Stored,
        range: Option<(u64, u64)>,
    ) -> StoreResult<Self> {
        let (position, end) = match range {
            Some((first, last)) => (first, last + 1),
            None => (0, stored.manifest.size),
        };
        let segments = &stored.manifest.segments;
        let up_front = segments.iter().map(|s| s.drives.len()).sum::<usize>() <= OPEN_UP_FRONT;
        let files = segments.iter().map(|s| up_front.then(|| inner.open_segment(bucket, s))).collect();
        let mut reader = Self {
            inner,
            bucket: bucket.to_string(),
            key: key.to_string(),
            stored,
            position,
            end,
            block: None,
            files,
            reported: false,
            object: Some(Arc::new((bucket.to_string(), key.to_string()))),
        };
        if position < end && !reader.stored.manifest.inline {
            reader.load()?;
        }
        Ok(reader)
    }

    /// Reads the bytes of the block holding `self.position` that the read still wants: from
    /// the data shards holding them alone when it can (`read_span`), else the whole block.
    fn load(&mut self) -> StoreResult<()> {
        let mut start = 0u64;
        for (index, segment) in self.stored.manifest.segments.iter().enumerate() {
            if self.position < start + segment.size {
                let b = (self.position - start) / segment.block_size;
                let files = self.files[index].get_or_insert_with(|| self.inner.open_segment(&self.bucket, segment));
                let block_start = start + b * segment.block_size;
                let wanted = (
                    (self.position - block_start) as usize,
                    (self.end.min(block_start + segment.block_len(b) as u64) - block_start) as usize,
                );
                if let Some(bytes) = self.inner.read_span(segment, files, b, wanted, &self.object) {
                    self.block = Some((self.position, bytes));
                    return Ok(());
                }
                let read = self.inner.read_block(segment, files, b, None, &self.object)?;
                if !read.bad.is_empty() && !self.reported {
                    self.reported = true;
                    self.inner.healer.request(&self.bucket, &self.key);
                }
                self.block = Some((start + b * segment.block_size, read.block));
                return Ok(());
            }
            start += segment.size;
        }
        Err(StoreError::InsufficientShards("the object's record does not cover its size".into()))
    }
}

impl Read for EcReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.position >= self.end || buf.is_empty() {
            return Ok(0);
        }
        if self.stored.manifest.inline {
            let from = self.position as usize;
            let n = buf.len().min((self.end - self.position) as usize);
            buf[..n].copy_from_slice(&self.stored.inline[from..from + n]);
            self.position += n as u64;
            return Ok(n);
        }
        let held = |block: &Option<(u64, Vec<u8>)>, position: u64| {
            block.as_ref().is_some_and(|(start, bytes)| position >= *start && position < start + bytes.len() as u64)
        };
        if !held(&self.block, self.position) {
            self.load().map_err(std::io::Error::other)?;
        }
        let (start, bytes) = self.block.as_ref().expect("a block was loaded");
        let from = (self.position - start) as usize;
        let n = buf.len().min(bytes.len() - from).min((self.end - self.position) as usize);
        buf[..n].copy_from_slice(&bytes[from..from + n]);
        self.position += n as u64;
        Ok(n)
    }
}

impl ObjectRead for EcReader {
    fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.position)
    }
}

#[cfg(test)]
mod tests;
