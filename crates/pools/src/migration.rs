//! Online migration of a bucket from one pool to another (`isthmus pool migrate`): the
//! migration record every gateway routes by, and the migrator that moves the objects.
//!
//! The record (`ROOT/.isthmus/migrations/BUCKET.json`) is the one piece of shared state. While
//! it says `copying`, every door sharing the root routes the bucket's writes to the target pool
//! and looks for an object in the target first, then in the source; a delete removes both. So
//! the target is authoritative for every key it holds: the migrator copies a key only when the
//! target lacks it (`If-None-Match: *`), and removes a source copy only once the target holds
//! the key. Every step is idempotent, so a migrator killed at any point is resumed by running
//! the command again:
//!
//! 1. `preparing`: record written, target bucket created with the source's settings (owner,
//!    ACL, policy, public access block, tags). Doors still route to the source.
//! 2. `copying`: doors route as above; the migrator waits until every door has seen the record
//!    (two routing refreshes), then passes over the source until it is empty: copy, verify the
//!    copy against the source's bytes (MD5 of what was read and of what the target reads back,
//!    and the source's stored checksum when it has one), then remove the source copy if it is
//!    unchanged. A key deleted or rewritten in the source meanwhile is not copied over.
//! 3. Multipart uploads begun in the source before the migration complete there and are moved
//!    by a later pass; the migrator finishes only when none is left (`--abort-uploads` aborts
//!    them instead).
//! 4. The empty source bucket is deleted, then the record: the bucket now lives in the target.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use super::{PLACEMENT_TTL, Pools};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::multipart::ListUploadsRequest;
use isthmus_store::{
    CreateBucketRequest, DeleteRequest, ETagMatch, GetRequest, HeadRequest, ListRequest, ObjectInfo, PutRequest,
    RequestContext, Store,
};

/// Where migration records live, relative to the data root.
pub const MIGRATIONS_DIR: &str = ".isthmus/migrations";

/// Where a migration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The target bucket is being made; the bucket is still served from the source alone.
    Preparing,
    /// Writes go to the target; reads look in the target, then in the source.
    Copying,
}

/// A bucket being moved: what every door routes by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationRecord {
    pub bucket: String,
    pub from: String,
    pub to: String,
    pub phase: Phase,
    pub started_unix: u64,
}

/// The records by bucket, as read at an instant (`None`: never read, or to read again).
type RecordCache = (Option<Instant>, Arc<HashMap<String, MigrationRecord>>);

/// The migration records of a data root, read again at most every `PLACEMENT_TTL`.
pub(super) struct Migrations {
    dir: Option<PathBuf>,
    cache: RwLock<RecordCache>,
}

impl Migrations {
    /// The records in `dir` (`None`: no migrations, a data root without pools).
    pub(super) fn new(dir: Option<PathBuf>) -> Self {
        Self { dir, cache: RwLock::new((None, Arc::default())) }
    }

    /// The record of `bucket`'s migration, if one is under way.
    pub(super) fn get(&self, bucket: &str) -> Option<MigrationRecord> {
        let dir = self.dir.as_ref()?;
        {
            let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
            if cache.0.is_some_and(|at| at.elapsed() < PLACEMENT_TTL) {
                return cache.1.get(bucket).cloned();
            }
        }
        let records = Arc::new(read_records(dir));
        let found = records.get(bucket).cloned();
        *self.cache.write().unwrap_or_else(|e| e.into_inner()) = (Some(Instant::now()), records);
        found
    }

    /// Forgets what was read, so the next call reads the records again.
    pub(super) fn refresh(&self) {
        self.cache.write().unwrap_or_else(|e| e.into_inner()).0 = None;
    }

    fn path(&self, bucket: &str) -> StoreResult<PathBuf> {
        let dir = self.dir.as_ref().ok_or_else(|| {
            StoreError::InvalidArgument("a migration needs pools declared in the data root's pool table".into())
        })?;
        Ok(dir.join(format!("{bucket}.json")))
    }

    fn write(&self, record: &MigrationRecord) -> StoreResult<()> {
        let path = self.path(&record.bucket)?;
        let dir = path.parent().expect("a record path has a directory");
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create the migrations directory", dir, e))?;
        let text = serde_json::to_vec_pretty(record).expect("a record serializes");
        isthmus_erasure::write_atomically(&path, &text, true)?;
        self.refresh();
        Ok(())
    }

    fn remove(&self, bucket: &str) -> StoreResult<()> {
        let path = self.path(bucket)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove the migration record", &path, e)),
        }
        self.refresh();
        Ok(())
    }
}

/// Every readable record in `dir` (a record that does not parse is skipped and reported: a
/// half-written one cannot exist, records are written by rename).
fn read_records(dir: &Path) -> HashMap<String, MigrationRecord> {
    let mut records = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return records };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        match std::fs::read(&path).map(|bytes| serde_json::from_slice::<MigrationRecord>(&bytes)) {
            Ok(Ok(record)) => {
                records.insert(record.bucket.clone(), record);
            }
            Ok(Err(err)) => tracing::warn!(path = %path.display(), "unreadable migration record: {err}"),
            Err(_) => {}
        }
    }
    records
}

/// What `migrate` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    pub bucket: String,
    pub from: String,
    pub to: String,
    /// Objects copied, verified and removed from the source by this run.
    pub moved: u64,
    pub bytes: u64,
    /// Source copies removed because the target already held the key (copied before a
    /// restart, or written during the migration).
    pub superseded: u64,
    /// Multipart uploads of the source aborted (`--abort-uploads`).
    pub uploads_aborted: u64,
    /// The migration had been started before (this run resumed it).
    pub resumed: bool,
}

/// How far a migration is: objects handled of those counted in the source, and bytes moved.
#[derive(Debug, Clone, Copy, Default)]
pub struct MigrationProgress {
    pub done: u64,
    pub total: u64,
    pub bytes: u64,
}

/// What happened to one key.
enum KeyOutcome {
    Moved(u64),
    Superseded,
    /// Deleted or rewritten in the source while being copied: looked at again next pass.
    Changed,
}

impl Pools {
    /// Moves `bucket` to pool `to` while it stays readable and writable (see the module
    /// comment); resumes a migration a crash or a kill interrupted.
    pub fn migrate(
        &self,
        bucket: &str,
        to: &str,
        abort_uploads: bool,
        mut progress: impl FnMut(MigrationProgress),
    ) -> StoreResult<MigrationReport> {
        let cx = RequestContext::process();
        let target_index = self.pools.iter().position(|p| p.name == to).ok_or_else(|| {
            let names: Vec<&str> = self.pools.iter().map(|p| p.name.as_str()).collect();
            StoreError::InvalidArgument(format!("{to:?} is not a pool (pools: {})", names.join(", ")))
        })?;
        let mut report = MigrationReport { bucket: bucket.into(), to: to.into(), ..Default::default() };
        self.migrations.refresh();
        let record = match self.migrations.get(bucket) {
            Some(record) if record.to != to => {
                return Err(StoreError::InvalidArgument(format!(
                    "bucket {bucket:?} is being moved to pool {:?}: finish that first (isthmus pool migrate \
                     {bucket} --to {})",
                    record.to, record.to
                )));
            }
            Some(record) => {
                report.resumed = true;
                record
            }
            None => {
                let from = self.find(&cx, bucket)?;
                if from == target_index {
                    return Err(StoreError::InvalidArgument(format!("bucket {bucket:?} is already in pool {to:?}")));
                }
                if let Some(state) = self.pools[from].store.bucket_config(&cx, bucket)?.versioning {
                    return Err(StoreError::InvalidRequest(format!(
                        "bucket {bucket:?} has versioning ({state:?}): its older versions cannot be moved, only \
                         unversioned buckets migrate"
                    )));
                }
                MigrationRecord {
                    bucket: bucket.into(),
                    from: self.pools[from].name.clone(),
                    to: to.into(),
                    phase: Phase::Preparing,
                    started_unix: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
                }
            }
        };
        report.from = record.from.clone();
        let source_index = self.pool_index(&record.from)?;
        let source = &*self.pools[source_index].store;
        let target = &*self.pools[target_index].store;
        if record.phase == Phase::Preparing {
            self.migrations.write(&record)?;
            prepare_target(&cx, source, target, bucket, to)?;
            self.migrations.write(&MigrationRecord { phase: Phase::Copying, ..record.clone() })?;
            // Every door reads the records again within PLACEMENT_TTL: after two, all of them
            // write to the target, so the source only shrinks from here on.
            std::thread::sleep(PLACEMENT_TTL * 2 + Duration::from_millis(200));
        }
        let mut state = MigrationProgress::default();
        loop {
            state.total = state.done + count_objects(&cx, source, bucket)?;
            progress(state);
            // Passes until one finds the source empty: objects completed or written there
            // meanwhile (uploads begun before, POSIX tools) are moved by the next.
            if self.move_pass(&cx, source, target, bucket, &mut report, &mut state)? {
                progress(state);
                continue;
            }
            let uploads = source_uploads(&cx, source, bucket)?;
            if uploads.is_empty() {
                break;
            }
            if !abort_uploads {
                return Err(StoreError::InvalidRequest(format!(
                    "{} multipart uploads begun before the migration are still open in pool {:?} (first: key {:?}, \
                     upload {}): complete or abort them and run the migration again, or pass --abort-uploads; the \
                     bucket stays readable and writable meanwhile",
                    uploads.len(),
                    record.from,
                    uploads[0].0,
                    uploads[0].1
                )));
            }
            for (key, upload_id) in uploads {
                match source.abort_multipart_upload(&cx, bucket, &key, &upload_id) {
                    Ok(()) | Err(StoreError::NoSuchUpload) => report.uploads_aborted += 1,
                    Err(err) => return Err(err),
                }
            }
        }
        let mut deleted = source.delete_bucket(&cx, bucket);
        if matches!(deleted, Err(StoreError::BucketNotEmpty)) && self.pools[source_index].kind == "posix" {
            // Directories that held the moved files (a migrator killed between a file's unlink
            // and its parent's pruning leaves them; POSIX users make them): not objects, and
            // the bucket is leaving this file system.
            remove_empty_dirs(&self.pools[source_index].path.join(bucket), true);
            deleted = source.delete_bucket(&cx, bucket);
        }
        match deleted {
            Ok(()) | Err(StoreError::NoSuchBucket) => {}
            Err(StoreError::BucketNotEmpty) => {
                return Err(StoreError::InvalidRequest(format!(
                    "bucket {bucket:?} in pool {:?} lists no object but is not empty (files the pool does not \
                     serve as objects?): look at it, then run the migration again",
                    record.from
                )));
            }
            Err(err) => return Err(err),
        }
        self.migrations.remove(bucket)?;
        self.placed.insert(bucket.to_string(), (target_index, Instant::now()));
        progress(state);
        Ok(report)
    }

    fn pool_index(&self, name: &str) -> StoreResult<usize> {
        self.pools.iter().position(|p| p.name == name).ok_or_else(|| {
            StoreError::InvalidArgument(format!("the migration record names pool {name:?}, which is not declared"))
        })
    }

    /// One pass over the source: every key moved (or found superseded). Answers whether the
    /// source held any object.
    fn move_pass(
        &self,
        cx: &RequestContext,
        source: &dyn Store,
        target: &dyn Store,
        bucket: &str,
        report: &mut MigrationReport,
        state: &mut MigrationProgress,
    ) -> StoreResult<bool> {
        let mut any = false;
        let mut request = ListRequest { max_keys: 1000, ..Default::default() };
        loop {
            let page = match source.list_objects(cx, bucket, &request) {
                Err(StoreError::NoSuchBucket) => return Ok(any),
                page => page?,
            };
            for object in &page.objects {
                any = true;
                match move_key(cx, source, target, bucket, &object.key)? {
                    KeyOutcome::Moved(bytes) => {
                        report.moved += 1;
                        report.bytes += bytes;
                        state.bytes += bytes;
                        state.done += 1;
                    }
                    KeyOutcome::Superseded => {
                        report.superseded += 1;
                        state.done += 1;
                    }
                    KeyOutcome::Changed => {}
                }
                state.total = state.total.max(state.done);
            }
            if !page.is_truncated {
                return Ok(any);
            }
            request.start_after = page.next_marker;
        }
    }
}

/// Creates the bucket in the target with the source's settings (again, on a resumed run).
fn prepare_target(
    cx: &RequestContext,
    source: &dyn Store,
    target: &dyn Store,
    bucket: &str,
    to: &str,
) -> StoreResult<()> {
    let create = CreateBucketRequest { location: Some(to.to_string()) };
    match target.create_bucket(cx, bucket, &create) {
        // Made by the run this one resumes (a bucket's name is one across the pools, so the
        // target holds no other bucket of this name): backends answer either error.
        Ok(()) | Err(StoreError::BucketAlreadyOwnedByYou | StoreError::BucketAlreadyExists) => {}
        Err(err) => return Err(err),
    }
    let settings = isthmus_store::BucketConfig { version: None, ..source.bucket_config(cx, bucket)? };
    target.set_bucket_config(cx, bucket, &settings)
}

/// Removes the empty directories under `dir` (not `dir`, not the bucket's internal area, no
/// symbolic link followed); answers whether `dir` is now empty.
fn remove_empty_dirs(dir: &Path, top: bool) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut empty = true;
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let internal = top && entry.file_name() == isthmus_store::key::INTERNAL_DIR;
        if is_dir && !internal && remove_empty_dirs(&entry.path(), false) && std::fs::remove_dir(entry.path()).is_ok() {
            continue;
        }
        empty = false;
    }
    empty
}

fn count_objects(cx: &RequestContext, store: &dyn Store, bucket: &str) -> StoreResult<u64> {
    let mut count = 0;
    let mut request = ListRequest { max_keys: 1000, ..Default::default() };
    loop {
        let page = match store.list_objects(cx, bucket, &request) {
            Err(StoreError::NoSuchBucket) => return Ok(count),
            page => page?,
        };
        count += page.objects.len() as u64;
        if !page.is_truncated {
            return Ok(count);
        }
        request.start_after = page.next_marker;
    }
}

/// The source's open multipart uploads: (key, upload id).
fn source_uploads(cx: &RequestContext, store: &dyn Store, bucket: &str) -> StoreResult<Vec<(String, String)>> {
    let mut uploads = Vec::new();
    let mut request = ListUploadsRequest { max_uploads: 1000, ..Default::default() };
    loop {
        let page = match store.list_multipart_uploads(cx, bucket, &request) {
            Err(StoreError::NoSuchBucket) => return Ok(uploads),
            page => page?,
        };
        uploads.extend(page.uploads.into_iter().map(|u| (u.key, u.upload_id)));
        if !page.is_truncated {
            return Ok(uploads);
        }
        request.key_marker = page.next_key_marker;
        request.upload_id_marker = page.next_upload_id_marker;
    }
}

fn head(cx: &RequestContext, store: &dyn Store, bucket: &str, key: &str) -> StoreResult<Option<ObjectInfo>> {
    match store.head_object(cx, bucket, key, &HeadRequest::default()) {
        Ok(info) => Ok(Some(info)),
        Err(StoreError::NoSuchKey | StoreError::NoSuchBucket) => Ok(None),
        Err(err) => Err(err),
    }
}

/// The same stored object: same ETag and modification time.
fn unchanged(now: &ObjectInfo, before: &ObjectInfo) -> bool {
    now.etag == before.etag && now.last_modified == before.last_modified
}

/// Removes `key` from `store` if it is still the object `expected` describes.
fn remove_if_unchanged(
    cx: &RequestContext,
    store: &dyn Store,
    bucket: &str,
    key: &str,
    expected: &ObjectInfo,
) -> StoreResult<()> {
    match head(cx, store, bucket, key)? {
        Some(now) if unchanged(&now, expected) => match store.delete_object(cx, bucket, key, &DeleteRequest::default())
        {
            Ok(_) | Err(StoreError::NoSuchKey | StoreError::NoSuchBucket) => Ok(()),
            Err(err) => Err(err),
        },
        _ => Ok(()),
    }
}

/// Moves one key: copy to the target unless it holds the key, verify, remove the source copy.
fn move_key(
    cx: &RequestContext,
    source: &dyn Store,
    target: &dyn Store,
    bucket: &str,
    key: &str,
) -> StoreResult<KeyOutcome> {
    let Some(original) = head(cx, source, bucket, key)? else { return Ok(KeyOutcome::Changed) };
    if head(cx, target, bucket, key)?.is_some() {
        remove_if_unchanged(cx, source, bucket, key, &original)?;
        return Ok(KeyOutcome::Superseded);
    }
    let copied = match copy_across(cx, source, target, bucket, key, Some(&original)) {
        Ok(copied) => copied,
        // The target got the key meanwhile (a client's write), or the source changed.
        Err(StoreError::PreconditionFailed | StoreError::NoSuchKey) => {
            if head(cx, target, bucket, key)?.is_some() {
                remove_if_unchanged(cx, source, bucket, key, &original)?;
                return Ok(KeyOutcome::Superseded);
            }
            return Ok(KeyOutcome::Changed);
        }
        Err(err) => return Err(err),
    };
    if let Err(err) = verify(cx, target, bucket, key, &copied) {
        remove_if_unchanged(cx, target, bucket, key, &copied.info)?;
        return Err(err);
    }
    match head(cx, source, bucket, key)? {
        Some(now) if unchanged(&now, &original) => {
            remove_if_unchanged(cx, source, bucket, key, &original)?;
            Ok(KeyOutcome::Moved(copied.info.size))
        }
        // Deleted while copied (the copy must not bring it back) or rewritten by a POSIX tool
        // in the source (the next pass copies the new bytes).
        _ => {
            remove_if_unchanged(cx, target, bucket, key, &copied.info)?;
            Ok(KeyOutcome::Changed)
        }
    }
}

/// A copy made by `copy_across`: what the target reports, and the MD5 of the bytes read.
pub(super) struct Copied {
    pub(super) info: ObjectInfo,
    md5: [u8; 16],
}

/// Streams `key` from `source` to `target`, created only if the target lacks the key, with
/// all of its metadata (tags and ACL too: this is a move, not an S3 copy) and its checksum
/// algorithm. With `expected`, only if the source is still that object. The bytes the target
/// received must hash as the bytes read, and a full-object checksum must come out as stored.
pub(super) fn copy_across(
    cx: &RequestContext,
    source: &dyn Store,
    target: &dyn Store,
    bucket: &str,
    key: &str,
    expected: Option<&ObjectInfo>,
) -> StoreResult<Copied> {
    let mut get = GetRequest::default();
    if let Some(expected) = expected {
        get.conditions.if_match = Some(ETagMatch::Tags(vec![expected.etag.clone()]));
    }
    let mut response = source.get_object(cx, bucket, key, &get)?;
    let full_checksum = response.info.checksum.clone().filter(|c| c.kind == isthmus_store::ChecksumType::FullObject);
    let put = PutRequest {
        meta: response.info.meta.clone(),
        if_none_match: Some(ETagMatch::Any),
        checksum_algorithm: full_checksum.as_ref().map(|c| c.algorithm),
        ..PutRequest::default()
    };
    let mut writer = target.put_object(cx, bucket, key, put)?;
    let mut reader = Md5Reader::new(&mut response.body);
    isthmus_store::copy_stream(&mut reader, &mut *writer)?;
    let md5 = reader.finish();
    let digests = writer.digests();
    if digests.md5.is_some_and(|received| received != md5) {
        return Err(StoreError::BadDigest(format!(
            "{bucket}/{key}: the target pool received other bytes than were read"
        )));
    }
    if let (Some(stored), Some(computed)) = (&full_checksum, &digests.checksum)
        && stored.value != computed.value
    {
        return Err(StoreError::BadDigest(format!(
            "{bucket}/{key}: its bytes do not match its stored {:?} checksum: not moved",
            stored.algorithm
        )));
    }
    Ok(Copied { info: writer.commit()?, md5 })
}

/// Reads the target's copy back: the bytes it serves hash as the bytes that were read.
fn verify(cx: &RequestContext, target: &dyn Store, bucket: &str, key: &str, copied: &Copied) -> StoreResult<()> {
    let mut get = GetRequest::default();
    get.conditions.if_match = Some(ETagMatch::Tags(vec![copied.info.etag.clone()]));
    let mut response = match target.get_object(cx, bucket, key, &get) {
        Ok(response) => response,
        // Replaced by a client already: that write is the object now, nothing to verify.
        Err(StoreError::PreconditionFailed | StoreError::NoSuchKey) => return Ok(()),
        Err(err) => return Err(err),
    };
    let mut reader = Md5Reader::new(&mut response.body);
    std::io::copy(&mut reader, &mut std::io::sink()).map_err(StoreError::Io)?;
    if reader.finish() != copied.md5 {
        return Err(StoreError::BadDigest(format!(
            "{bucket}/{key}: the copy in the target pool reads back different bytes: not moved"
        )));
    }
    Ok(())
}

/// A reader that hashes what passes through it.
struct Md5Reader<'a> {
    inner: &'a mut dyn Read,
    hasher: Md5,
}

impl<'a> Md5Reader<'a> {
    fn new(inner: &'a mut dyn Read) -> Self {
        Self { inner, hasher: Md5::new() }
    }

    fn finish(self) -> [u8; 16] {
        self.hasher.finalize().into()
    }
}

impl Read for Md5Reader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buffer)?;
        self.hasher.update(&buffer[..n]);
        Ok(n)
    }
}
