//! Writing to an erasure-coded pool: a segment writer cuts the stream into blocks, encodes each
//! into k + m shards and hands them to their drives' lanes, pipelined and waiting only for the
//! write quorum (a drive that fails or falls too far behind is left out, within the quorum,
//! for heal); the object writer keeps small objects inline and commits the
//! manifest under the key's lock, checking the write's conditions against the current object.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use md5::{Digest, Md5};

use super::Inner;
use super::codec;
use super::manifest::{Manifest, Segment, Stored, now_ns, random_id};
use isthmus_store::checksum::Hasher;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::{Digests, ETagMatch, ObjectInfo, ObjectWrite, PutRequest};

/// Blocks each drive may have queued before the writer waits for it: the next block is
/// encoded while the drives write the ones queued.
const WINDOW: usize = 2;
/// Bytes of shards a drive may have queued behind the write quorum before, if it is slow or
/// stalled, it is left out of the object (its shard then waits for heal).
const MAX_LAG_BYTES: usize = 16 << 20;
/// How many times the lag bound a drive that is not (yet) known slow may fall behind before
/// the writer waits for it: the memory bound.
const HARD_LAG: usize = 4;
/// A drive that finished no write for this long while behind is stalled.
const STALL: Duration = Duration::from_secs(1);

/// Whether a failed write found its drive full (or over its quota).
fn is_no_space(err: &std::io::Error) -> bool {
    [rustix::io::Errno::NOSPC, rustix::io::Errno::DQUOT].iter().any(|e| err.raw_os_error() == Some(e.raw_os_error()))
}

/// What a drive's I/O lane reports back to the segment writer.
enum Done {
    Wrote(usize, std::io::Result<()>),
    Synced(usize, std::io::Result<()>),
}

/// A shard's writes in flight, shared with the jobs that run them: with strict durability the
/// last write of a finished segment syncs its file, also after the writer has returned.
#[derive(Default)]
struct LaneState {
    pending: AtomicUsize,
    finished: AtomicBool,
}

/// One segment being written: shard files on its drives, blocks encoded as they fill and
/// handed to each drive's own I/O lane without waiting, so encoding overlaps the writes. The
/// writer waits for the write quorum: a slow or stalled drive that falls behind it by more than
/// `MAX_LAG_BYTES` is left out (heal rebuilds its shard); drives merely late finish in the
/// background.
pub(crate) struct SegmentWriter {
    inner: Arc<Inner>,
    bucket: String,
    segment: Segment,
    /// Shard i's file (`None` once its drive failed or fell too far behind).
    files: Vec<Option<Arc<File>>>,
    lanes: Vec<Arc<LaneState>>,
    /// Writes of shard i not yet reported back.
    pending: Vec<usize>,
    /// When shard i's drive last finished a write (or the segment began).
    progress: Vec<Instant>,
    synced: Vec<bool>,
    /// Shards left out because their drive fell behind.
    left_behind: usize,
    /// A drive was full: a write that loses its quorum so is refused as InsufficientStorage.
    no_space: bool,
    /// The bucket and data id, for lanes that remove a shard whose write failed.
    names: Arc<(String, String)>,
    done_tx: mpsc::Sender<Done>,
    done_rx: mpsc::Receiver<Done>,
    buffer: Vec<u8>,
    blocks: u64,
}

impl SegmentWriter {
    pub(crate) fn create(inner: &Arc<Inner>, bucket: &str, drives: Vec<usize>) -> StoreResult<Self> {
        let data_id = random_id();
        let mut no_space = false;
        let files: Vec<Option<Arc<File>>> = drives
            .iter()
            .map(|&d| {
                let drive = &inner.drives[d];
                match drive.create_shard(bucket, &data_id) {
                    Ok(file) => Some(Arc::new(file)),
                    Err(err) => {
                        no_space |= is_no_space(&err);
                        if drive.writable().is_some() {
                            drive.failed("create a shard file", &err);
                        }
                        None
                    }
                }
            })
            .collect();
        let block_size = inner.config.block_size;
        let layout = inner.layout;
        let shards = drives.len();
        let (done_tx, done_rx) = mpsc::channel();
        let mut writer = Self {
            inner: inner.clone(),
            bucket: bucket.to_string(),
            names: Arc::new((bucket.to_string(), data_id.clone())),
            segment: Segment {
                data_id,
                size: 0,
                block_size,
                data: layout.data,
                parity: layout.parity,
                drives,
                framing: codec::Framing::Chunked,
            },
            files,
            lanes: (0..shards).map(|_| Arc::default()).collect(),
            pending: vec![0; shards],
            progress: vec![Instant::now(); shards],
            synced: vec![false; shards],
            left_behind: 0,
            no_space,
            done_tx,
            done_rx,
            buffer: Vec::with_capacity(block_size as usize),
            blocks: 0,
        };
        writer.check_quorum()?;
        Ok(writer)
    }

    fn alive(&self) -> usize {
        self.files.iter().filter(|f| f.is_some()).count()
    }

    fn check_quorum(&mut self) -> StoreResult<()> {
        let alive = self.alive();
        if alive >= self.inner.shard_write_quorum() {
            return Ok(());
        }
        self.discard();
        if self.no_space {
            tracing::warn!(pool = %self.inner.name, alive, needed = self.inner.shard_write_quorum(),
                "too few of an object's drives have room for its shards: the write is refused");
            return Err(StoreError::InsufficientStorage);
        }
        Err(StoreError::InsufficientShards(format!(
            "pool {:?}: {alive} of the {} drives of the object's stripe take writes; {} are needed",
            self.inner.name,
            self.segment.drives.len(),
            self.inner.shard_write_quorum()
        )))
    }

    pub(crate) fn write(&mut self, mut bytes: &[u8]) -> StoreResult<()> {
        let block_size = self.segment.block_size as usize;
        while !bytes.is_empty() {
            let take = (block_size - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            self.segment.size += take as u64;
            if self.buffer.len() == block_size {
                self.flush_block()?;
            }
        }
        Ok(())
    }

    /// Encodes the buffered block, hands its shards to the drives' lanes, and waits until the
    /// write quorum has room for the next one.
    fn flush_block(&mut self) -> StoreResult<()> {
        let shards = codec::encode(self.inner.layout, &self.buffer, self.segment.framing)?;
        self.buffer.clear();
        let offset = self.segment.shard_offset(self.blocks);
        for (i, shard) in shards.into_iter().enumerate() {
            if self.files[i].is_some() {
                self.submit_write(i, shard, offset);
            }
        }
        self.blocks += 1;
        self.keep_up()
    }

    fn submit_write(&mut self, i: usize, shard: Vec<u8>, offset: u64) {
        let file = self.files[i].clone().expect("only live shards are written");
        let (lane, tx, inner, names) =
            (self.lanes[i].clone(), self.done_tx.clone(), self.inner.clone(), self.names.clone());
        let (drive, strict) = (self.segment.drives[i], self.inner.strict());
        self.pending[i] += 1;
        lane.pending.fetch_add(1, Ordering::SeqCst);
        self.inner.drives[drive].lane.spawn(move || {
            let wrote = inner.drives[drive].timed_io(shard.len(), || file.write_all_at(&shard, offset));
            drop(shard);
            if let Err(err) = &wrote {
                inner.drives[drive].failed("write a shard", err);
                // No partial shard stays (a full drive's, say): the shard is missing, for heal.
                inner.drives[drive].discard_shard(&names.0, &names.1);
            }
            let ok = wrote.is_ok();
            let _ = tx.send(Done::Wrote(i, wrote));
            if lane.pending.fetch_sub(1, Ordering::SeqCst) == 1 && ok && strict && lane.finished.load(Ordering::SeqCst)
            {
                sync_shard(&inner, drive, &file, i, &tx);
            }
        });
    }

    fn submit_sync(&self, i: usize) {
        let Some(file) = self.files[i].clone() else { return };
        let (tx, inner, drive) = (self.done_tx.clone(), self.inner.clone(), self.segment.drives[i]);
        self.inner.drives[drive].lane.spawn(move || sync_shard(&inner, drive, &file, i, &tx));
    }

    fn absorb(&mut self, done: Done) {
        let failed = match done {
            Done::Wrote(i, result) => {
                self.pending[i] -= 1;
                self.progress[i] = Instant::now();
                result.err().map(|err| (i, err))
            }
            Done::Synced(i, Ok(())) => {
                self.synced[i] = true;
                None
            }
            Done::Synced(i, Err(err)) => Some((i, err)),
        };
        if let Some((i, err)) = failed {
            self.no_space |= is_no_space(&err);
            if self.files[i].take().is_some() {
                self.inner.drives[self.segment.drives[i]].discard_shard(&self.bucket, &self.segment.data_id);
            }
        }
    }

    /// Waits until `ready` holds for a write quorum of live shards, absorbing what the lanes
    /// report; fails when too few shards are left to make a quorum.
    fn wait_for_quorum(&mut self, ready: impl Fn(&Self, usize) -> bool) -> StoreResult<()> {
        let quorum = self.inner.shard_write_quorum();
        loop {
            while let Ok(done) = self.done_rx.try_recv() {
                self.absorb(done);
            }
            let live = (0..self.files.len()).filter(|&i| self.files[i].is_some());
            if live.filter(|&i| ready(self, i)).count() >= quorum {
                return Ok(());
            }
            self.check_quorum()?;
            let done = self.done_rx.recv().expect("the writer holds a sender");
            self.absorb(done);
        }
    }

    /// Back-pressure after a block: the quorum must have room for the next one, and no drive
    /// may hold more than `HARD_LAG` times the lag bound. A drive past the lag bound that is
    /// slow against its peers, or has finished nothing for `STALL`, is left out of this object
    /// (heal rebuilds its shard); one merely busy, like its peers, is waited for.
    fn keep_up(&mut self) -> StoreResult<()> {
        let quorum = self.inner.shard_write_quorum();
        let shard_bytes = self.segment.framed_len(0).max(1);
        let max_lag = (MAX_LAG_BYTES / shard_bytes).max(WINDOW + 2);
        loop {
            while let Ok(done) = self.done_rx.try_recv() {
                self.absorb(done);
            }
            let median = self.inner.median_latency_us();
            for i in 0..self.files.len() {
                if self.files[i].is_none() || self.pending[i] < max_lag {
                    continue;
                }
                let drive = &self.inner.drives[self.segment.drives[i]];
                if self.inner.is_slow(drive, median) || self.progress[i].elapsed() > STALL {
                    tracing::info!(pool = %self.inner.name, drive = %drive.path.display(), behind = self.pending[i],
                        "a drive fell behind a write; its shard is left for heal");
                    self.files[i] = None;
                    self.left_behind += 1;
                }
            }
            self.check_quorum()?;
            let live: Vec<usize> = (0..self.files.len()).filter(|&i| self.files[i].is_some()).collect();
            let room = live.iter().filter(|&&i| self.pending[i] < WINDOW).count() >= quorum;
            if room && live.iter().all(|&i| self.pending[i] < HARD_LAG * max_lag) {
                return Ok(());
            }
            if let Ok(done) = self.done_rx.recv_timeout(Duration::from_millis(100)) {
                self.absorb(done);
            }
        }
    }

    /// Writes the last block and waits until a write quorum of shards is written (and, with
    /// strict durability, synced); the segment as the manifest records it, and whether shards
    /// were left out for heal. Shards still being written finish in the background.
    pub(crate) fn finish(mut self) -> StoreResult<(Segment, bool)> {
        if !self.buffer.is_empty() {
            self.flush_block()?;
        }
        let strict = self.inner.strict();
        for i in 0..self.files.len() {
            if self.files[i].is_some() {
                self.lanes[i].finished.store(true, Ordering::SeqCst);
                if strict && self.lanes[i].pending.load(Ordering::SeqCst) == 0 {
                    self.submit_sync(i);
                }
            }
        }
        self.wait_for_quorum(|w, i| w.pending[i] == 0 && (!strict || w.synced[i]))?;
        let left_behind = self.left_behind > 0;
        self.files.clear();
        Ok((std::mem::replace(&mut self.segment, Segment::empty()), left_behind))
    }

    /// Removes what was written (an abandoned write).
    fn discard(&mut self) {
        for &d in &self.segment.drives {
            self.inner.drives[d].discard_shard(&self.bucket, &self.segment.data_id);
        }
        self.files.clear();
    }
}

/// Syncs a shard file on its drive's lane and reports it.
fn sync_shard(inner: &Inner, drive: usize, file: &File, i: usize, tx: &mpsc::Sender<Done>) {
    let synced = inner.drives[drive].timed(|| file.sync_all());
    if let Err(err) = &synced {
        inner.drives[drive].failed("sync a shard", err);
    }
    let _ = tx.send(Done::Synced(i, synced));
}

impl Drop for SegmentWriter {
    fn drop(&mut self) {
        if !self.files.is_empty() {
            self.discard();
        }
    }
}

impl Segment {
    fn empty() -> Self {
        Self {
            data_id: String::new(),
            size: 0,
            block_size: 1,
            data: 0,
            parity: 0,
            drives: Vec::new(),
            framing: codec::Framing::Whole,
        }
    }
}

/// Hashes what a writer receives: the MD5 for the ETag (unless not wanted) and the checksum
/// the client asked for.
pub(crate) struct StreamHashes {
    md5: Option<Md5>,
    checksum: Option<Hasher>,
}

/// Writes at least this large are hashed on a second thread while the writer encodes them.
const HASH_ASIDE: usize = 256 << 10;

impl StreamHashes {
    pub(crate) fn new(md5: bool, algorithm: Option<isthmus_store::ChecksumAlgorithm>) -> Self {
        Self { md5: md5.then(Md5::new), checksum: algorithm.map(Hasher::new) }
    }

    /// Whether a write computes the MD5: when the door verifies one, or when the ETag is the
    /// MD5 (the pool's policy, unless the writer wants no MD5 ETag).
    pub(crate) fn wants_md5(policy: crate::EtagPolicy, md5_required: bool, etag_without_md5: bool) -> bool {
        md5_required || (policy == crate::EtagPolicy::Md5 && !etag_without_md5)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        if let Some(md5) = &mut self.md5 {
            md5.update(bytes);
        }
        if let Some(checksum) = &mut self.checksum {
            checksum.update(bytes);
        }
    }

    /// Hashes `bytes` while `write` runs: on a second thread for a large buffer (MD5 alone
    /// costs about what encoding does; the two overlap instead of adding up), inline otherwise.
    pub(crate) fn update_while<R: Send>(&mut self, bytes: &[u8], write: impl FnOnce() -> R + Send) -> R {
        if bytes.len() < HASH_ASIDE || (self.md5.is_none() && self.checksum.is_none()) {
            self.update(bytes);
            return write();
        }
        std::thread::scope(|scope| {
            let hasher = scope.spawn(|| self.update(bytes));
            let result = write();
            hasher.join().expect("hashing does not panic");
            result
        })
    }

    pub(crate) fn digests(&self) -> Digests {
        Digests {
            md5: self.md5.as_ref().map(|m| m.clone().finalize().into()),
            checksum: self.checksum.as_ref().map(Hasher::checksum),
        }
    }

    /// An object's ETag: the MD5 in hex, or (without MD5) a tag unique to this write, marked
    /// "-1" like a multipart ETag so that clients do not take it for an MD5.
    pub(crate) fn etag(&self) -> String {
        match &self.md5 {
            Some(md5) => hex::encode(md5.clone().finalize()),
            None => format!("{}-1", random_id()),
        }
    }

    /// A part's ETag: the MD5 in hex, or 32 random hex digits (a multipart upload's ETag is
    /// the MD5 of its parts' ETags as bytes, so a part's must be 16 bytes of hex).
    pub(crate) fn part_etag(&self) -> String {
        match &self.md5 {
            Some(md5) => hex::encode(md5.clone().finalize()),
            None => random_id(),
        }
    }
}

/// A PUT to an erasure-coded pool.
pub(crate) struct EcWriter {
    inner: Arc<Inner>,
    bucket: String,
    key: String,
    request: PutRequest,
    hashes: StreamHashes,
    inline: Vec<u8>,
    segment: Option<SegmentWriter>,
}

impl EcWriter {
    pub(crate) fn new(inner: &Arc<Inner>, bucket: &str, key: &str, request: PutRequest) -> Self {
        let md5 = StreamHashes::wants_md5(inner.config.etag, request.md5_required, request.etag_without_md5);
        let hashes = StreamHashes::new(md5, request.checksum_algorithm);
        Self {
            inner: inner.clone(),
            bucket: bucket.to_string(),
            key: key.to_string(),
            request,
            hashes,
            inline: Vec::new(),
            segment: None,
        }
    }
}

impl ObjectWrite for EcWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        if let Some(segment) = &mut self.segment {
            return self.hashes.update_while(bytes, || segment.write(bytes));
        }
        self.hashes.update(bytes);
        if (self.inline.len() + bytes.len()) as u64 <= self.inner.config.inline_limit {
            self.inline.extend_from_slice(bytes);
            return Ok(());
        }
        let drives = self.inner.placement(&self.bucket, &self.key, 0);
        let mut segment = SegmentWriter::create(&self.inner, &self.bucket, drives)?;
        segment.write(&std::mem::take(&mut self.inline))?;
        segment.write(bytes)?;
        self.segment = Some(segment);
        Ok(())
    }

    fn digests(&self) -> Digests {
        self.hashes.digests()
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        let this = *self;
        let (segments, inline, left_behind) = match this.segment {
            Some(segment) => {
                let (segment, left_behind) = segment.finish()?;
                (vec![segment], Vec::new(), left_behind)
            }
            None => (Vec::new(), this.inline, false),
        };
        let size = segments.iter().map(|s| s.size).sum::<u64>() + inline.len() as u64;
        let stored = Stored {
            manifest: Manifest {
                written_ns: 0,
                write_id: random_id(),
                size,
                etag: this.hashes.etag(),
                meta: this.request.meta.clone(),
                checksum: this.hashes.digests().checksum,
                parts: Vec::new(),
                inline: segments.is_empty(),
                segments,
                deleted: false,
            },
            inline,
        };
        let info = this.inner.commit(&this.bucket, &this.key, stored, &this.request, true)?;
        if left_behind {
            this.inner.healer.request(&this.bucket, &this.key);
        }
        Ok(info)
    }
}

impl Inner {
    /// Makes `stored` the object under `bucket/key`: under the key's lock, checks the write's
    /// conditions against the current object, writes the manifest by quorum and moves the
    /// replaced object's shards aside. On failure the new shards are removed if
    /// `remove_on_failure` (not a multipart upload's parts, which a retry needs).
    pub(crate) fn commit(
        &self,
        bucket: &str,
        key: &str,
        mut stored: Stored,
        request: &PutRequest,
        remove_on_failure: bool,
    ) -> StoreResult<ObjectInfo> {
        let result = (|| {
            let _lock = self.lock_key(bucket, key)?;
            let current = self.current(bucket, key)?;
            check_put_conditions(request, current.as_ref())?;
            // Later than the object it replaces, even if clocks of two gateways differ.
            stored.manifest.written_ns =
                now_ns().max(current.as_ref().map_or(0, |c| c.manifest.written_ns.saturating_add(1)));
            if let Err(failed) = self.write_manifests_to(bucket, key, &stored) {
                // Refused: the drives that took the record give it back (never torn).
                self.undo_manifests(bucket, key, &failed.written, current.as_ref());
                return Err(failed.error);
            }
            if let Some(old) = current {
                let replaced: Vec<Segment> = old
                    .manifest
                    .segments
                    .into_iter()
                    .filter(|s| !stored.manifest.segments.iter().any(|n| n.data_id == s.data_id))
                    .collect();
                self.discard_segments(bucket, &replaced);
            }
            Ok(stored.info(key))
        })();
        if result.is_err() && remove_on_failure {
            self.discard_segments(bucket, &stored.manifest.segments);
        }
        result
    }
}

/// If-Match (replace only that object) and If-None-Match: * (create only).
pub(crate) fn check_put_conditions(request: &PutRequest, current: Option<&Stored>) -> StoreResult<()> {
    if let Some(condition) = &request.if_match {
        match current {
            Some(c) if condition.matches(&c.manifest.etag) => {}
            // S3 answers a conditional write on a missing key with NoSuchKey.
            None => return Err(StoreError::NoSuchKey),
            Some(_) => return Err(StoreError::PreconditionFailed),
        }
    }
    if let Some(condition) = &request.if_none_match {
        let exists = match (condition, current) {
            (_, None) => false,
            (ETagMatch::Any, Some(_)) => true,
            (ETagMatch::Tags(_), Some(c)) => condition.matches(&c.manifest.etag),
        };
        if exists {
            return Err(StoreError::PreconditionFailed);
        }
    }
    Ok(())
}
