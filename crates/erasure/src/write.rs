//! Writing to an erasure-coded pool: a segment writer cuts the stream into blocks, encodes each
//! into k + m shards and writes them to their drives in parallel (a drive that fails is left
//! out, within the write quorum); the object writer keeps small objects inline and commits the
//! manifest under the key's lock, checking the write's conditions against the current object.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use md5::{Digest, Md5};

use super::Inner;
use super::codec;
use super::drives::IoJob;
use super::manifest::{Manifest, Segment, Stored, now_ns, random_id};
use isthmus_store::checksum::Hasher;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::{Digests, ETagMatch, ObjectInfo, ObjectWrite, PutRequest};

/// One segment being written: shard files on its drives, blocks encoded as they fill.
pub(crate) struct SegmentWriter {
    inner: Arc<Inner>,
    bucket: String,
    segment: Segment,
    /// Shard i's file (`None` once its drive failed).
    files: Vec<Option<Arc<File>>>,
    buffer: Vec<u8>,
    blocks: u64,
}

impl SegmentWriter {
    pub(crate) fn create(inner: &Arc<Inner>, bucket: &str, drives: Vec<usize>) -> StoreResult<Self> {
        let data_id = random_id();
        let files: Vec<Option<Arc<File>>> = drives
            .iter()
            .map(|&d| {
                let drive = &inner.drives[d];
                match drive.create_shard(bucket, &data_id) {
                    Ok(file) => Some(Arc::new(file)),
                    Err(err) => {
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
        let mut writer = Self {
            inner: inner.clone(),
            bucket: bucket.to_string(),
            segment: Segment { data_id, size: 0, block_size, data: layout.data, parity: layout.parity, drives },
            files,
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

    /// Encodes the buffered block and writes its shards, one job per drive.
    fn flush_block(&mut self) -> StoreResult<()> {
        let shards = codec::encode(self.inner.layout, &self.buffer)?;
        self.buffer.clear();
        let offset = self.segment.shard_offset(self.blocks);
        let mut shards: Vec<Option<Vec<u8>>> = shards.into_iter().map(Some).collect();
        self.on_every_file("write a shard", |i, file| {
            let shard = shards[i].take().expect("one job per shard");
            Box::new(move || file.write_all_at(&shard, offset))
        });
        self.blocks += 1;
        self.check_quorum()
    }

    /// Writes the last block and makes the shards durable; the segment as the manifest
    /// records it.
    pub(crate) fn finish(mut self) -> StoreResult<Segment> {
        if !self.buffer.is_empty() {
            self.flush_block()?;
        }
        if self.inner.strict() {
            self.on_every_file("sync a shard", |_, file| Box::new(move || file.sync_all()));
            self.check_quorum()?;
        }
        self.files.clear();
        Ok(std::mem::replace(&mut self.segment, Segment::empty()))
    }

    /// Runs one job per live shard file on the I/O threads (timed on its drive); a file whose
    /// job fails is dropped, its drive reported.
    fn on_every_file(&mut self, what: &str, mut job: impl FnMut(usize, Arc<File>) -> IoJob<std::io::Result<()>>) {
        let jobs: Vec<IoJob<(usize, std::io::Result<()>)>> = (0..self.files.len())
            .filter_map(|i| self.files[i].clone().map(|file| (i, file)))
            .map(|(i, file)| {
                let run = job(i, file);
                let inner = self.inner.clone();
                let drive = self.segment.drives[i];
                Box::new(move || (i, inner.drives[drive].timed(run))) as IoJob<(usize, std::io::Result<()>)>
            })
            .collect();
        for (i, result) in self.inner.io.run_all(jobs) {
            if let Err(err) = result {
                self.inner.drives[self.segment.drives[i]].failed(what, &err);
                self.files[i] = None;
            }
        }
    }

    /// Removes what was written (an abandoned write).
    fn discard(&mut self) {
        for &d in &self.segment.drives {
            let _ = std::fs::remove_file(self.inner.drives[d].data_file(&self.bucket, &self.segment.data_id));
        }
        self.files.clear();
    }
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
        Self { data_id: String::new(), size: 0, block_size: 1, data: 0, parity: 0, drives: Vec::new() }
    }
}

/// Hashes what a writer receives: the MD5 for the ETag (unless not wanted) and the checksum
/// the client asked for.
pub(crate) struct StreamHashes {
    md5: Option<Md5>,
    checksum: Option<Hasher>,
}

impl StreamHashes {
    pub(crate) fn new(md5: bool, algorithm: Option<isthmus_store::ChecksumAlgorithm>) -> Self {
        Self { md5: md5.then(Md5::new), checksum: algorithm.map(Hasher::new) }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        if let Some(md5) = &mut self.md5 {
            md5.update(bytes);
        }
        if let Some(checksum) = &mut self.checksum {
            checksum.update(bytes);
        }
    }

    pub(crate) fn digests(&self) -> Digests {
        Digests {
            md5: self.md5.as_ref().map(|m| m.clone().finalize().into()),
            checksum: self.checksum.as_ref().map(Hasher::checksum),
        }
    }

    /// The ETag: the MD5 in hex, or (without MD5) a tag unique to this write.
    pub(crate) fn etag(&self) -> String {
        match &self.md5 {
            Some(md5) => hex::encode(md5.clone().finalize()),
            None => format!("{}-1", random_id()),
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
        let hashes = StreamHashes::new(!request.etag_without_md5, request.checksum_algorithm);
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
        self.hashes.update(bytes);
        if let Some(segment) = &mut self.segment {
            return segment.write(bytes);
        }
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
        let (segments, inline) = match this.segment {
            Some(segment) => (vec![segment.finish()?], Vec::new()),
            None => (Vec::new(), this.inline),
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
            },
            inline,
        };
        this.inner.commit(&this.bucket, &this.key, stored, &this.request, true)
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
            self.write_manifests(bucket, key, &stored)?;
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
            for segment in &stored.manifest.segments {
                for &d in &segment.drives {
                    let _ = std::fs::remove_file(self.drives[d].data_file(bucket, &segment.data_id));
                }
            }
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
