//! Object versions of a `PosixStore` bucket. The current version of a key stays the plain file
//! at the key's path (POSIX programs see and change it as before); older versions and delete
//! markers live in the bucket's hidden tree `.isthmus/versions/<key path>/.isthmus/`, one pair
//! of files per version: `<id>` (the bytes: a hard link to the inode that was current, so
//! keeping a version copies nothing) and `<id>.json` (its record). A record without its bytes
//! file is a delete marker or a crash leftover (ignored). The tree mirrors key paths, so
//! ListObjectVersions walks it in key order with prefix and marker pruning. The bucket's state
//! (`Enabled`/`Suspended`) is a bucket setting (`bucket_records`); a bucket without it is
//! unversioned and pays nothing: no lock, no extra call.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::current::{current_record, head, open_object};
use super::{PosixStore, TMP_DIR, modified, system_time};
use crate::file_ops::write_all;
use crate::meta::{MetaRecord, MetaStore};
use crate::resolve::{create_dirs_beneath, open_dir_beneath};
use crate::writer_names::unique_suffix;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::{INTERNAL_DIR, ObjectPath};
use isthmus_store::versioning::{NULL_VERSION, Versioning};
use isthmus_store::{ObjectInfo, ObjectVersion, RequestContext};

/// The bucket-relative root of the versions tree.
pub(crate) const VERSIONS_DIR: &str = ".isthmus/versions";
/// The bucket setting that holds the versioning state.
const RECORD_SUFFIX: &str = ".json";

/// What is kept per archived version or delete marker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct VersionRecord {
    pub(crate) key: String,
    pub(crate) version_id: String,
    #[serde(default)]
    pub(crate) delete_marker: bool,
    /// When the version was written (for a delete marker: when the delete happened).
    pub(crate) last_modified_ns: i128,
    /// The object's record (none for a delete marker).
    #[serde(default)]
    pub(crate) record: Option<MetaRecord>,
}

impl VersionRecord {
    fn info(&self) -> ObjectInfo {
        let time = system_time(
            (self.last_modified_ns.div_euclid(1_000_000_000)) as i64,
            self.last_modified_ns.rem_euclid(1_000_000_000) as i64,
        );
        let record = self.record.clone();
        ObjectInfo {
            key: self.key.clone(),
            size: record.as_ref().map_or(0, |r| r.identity.size),
            last_modified: time,
            etag: record.as_ref().map(|r| r.etag.clone()).unwrap_or_default(),
            meta: record.as_ref().map(|r| r.meta.clone()).unwrap_or_default(),
            checksum: record.as_ref().and_then(|r| r.checksum.clone()),
            parts: record.map(|r| r.parts).unwrap_or_default(),
            version_id: Some(self.version_id.clone()),
        }
    }

    fn version(&self, is_latest: bool) -> ObjectVersion {
        ObjectVersion { info: self.info(), is_latest, delete_marker: self.delete_marker }
    }
}

fn time_ns(time: std::time::SystemTime) -> i128 {
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The version id of the current object as stored (none: the null version).
pub(crate) fn id_of(version_id: Option<&str>) -> &str {
    version_id.unwrap_or(NULL_VERSION)
}

/// The directory of one key's kept versions, relative to the bucket.
fn key_dir(path: &ObjectPath<'_>) -> String {
    format!("{VERSIONS_DIR}/{}/{INTERNAL_DIR}", path.relative())
}

/// One key's kept versions and delete markers, newest first.
pub(crate) fn kept_versions(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) -> StoreResult<Vec<VersionRecord>> {
    let dir = match open_dir_beneath(bucket, &key_dir(path)) {
        Ok(dir) => dir,
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(Vec::new()),
        Err(err) => return Err(StoreError::io_at("open the versions of", path.key(), err)),
    };
    read_kept(dir.as_fd(), path.key())
}

fn read_kept(dir: BorrowedFd<'_>, key: &str) -> StoreResult<Vec<VersionRecord>> {
    let mut kept = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir).map_err(|e| StoreError::io_at("list the versions of", key, e))? {
        let entry = entry.map_err(|e| StoreError::io_at("list the versions of", key, e))?;
        let Some(id) = entry.file_name().to_str().ok().and_then(|n| n.strip_suffix(RECORD_SUFFIX)) else {
            continue;
        };
        let Some(record) = read_record(dir, id) else { continue };
        // Bytes gone (a crash between the two files): not a version anyone can read.
        if record.delete_marker || rustix::fs::statat(dir, id, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            kept.push(record);
        }
    }
    kept.sort_by(|a, b| (b.last_modified_ns, &b.version_id).cmp(&(a.last_modified_ns, &a.version_id)));
    Ok(kept)
}

fn read_record(dir: BorrowedFd<'_>, id: &str) -> Option<VersionRecord> {
    let fd = rustix::fs::openat(
        dir,
        format!("{id}{RECORD_SUFFIX}"),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .ok()?;
    let mut bytes = Vec::with_capacity(512);
    std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The bucket's temporaries and a fresh name there: versions are staged beside other writes,
/// so the stale-temporary cleanup removes what a crash leaves.
fn staging_name(bucket: BorrowedFd<'_>) -> StoreResult<(OwnedFd, String)> {
    let tmp_dir = create_dirs_beneath(bucket, TMP_DIR, false).map_err(|e| StoreError::io_at("create", TMP_DIR, e))?;
    Ok((tmp_dir, format!("version.{}", unique_suffix())))
}

fn create_staged(tmp_dir: BorrowedFd<'_>, tmp: &str) -> Result<OwnedFd, rustix::io::Errno> {
    rustix::fs::openat(
        tmp_dir,
        tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
}

/// Writes `record` as `<id>.json` in `dir`, atomically (staged in the bucket's temporaries).
fn write_record(bucket: BorrowedFd<'_>, dir: BorrowedFd<'_>, record: &VersionRecord, sync: bool) -> StoreResult<()> {
    let (tmp_dir, tmp) = staging_name(bucket)?;
    let fd = create_staged(tmp_dir.as_fd(), &tmp)?;
    let bytes = serde_json::to_vec(record).expect("version records serialize");
    let written = write_all(fd.as_fd(), &bytes).and_then(|()| {
        if sync {
            rustix::fs::fsync(&fd)?;
        }
        let name = format!("{}{RECORD_SUFFIX}", record.version_id);
        Ok(rustix::fs::renameat(&tmp_dir, tmp.as_str(), dir, name.as_str())?)
    });
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&tmp_dir, tmp.as_str(), AtFlags::empty());
    }
    written
}

fn open_key_dir(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>, sync: bool) -> StoreResult<OwnedFd> {
    create_dirs_beneath(bucket, &key_dir(path), sync)
        .map_err(|e| StoreError::io_at("create the versions of", path.key(), e))
}

/// Keeps the open file `file` (the current object, described by `record`) as version `id`:
/// a hard link to its inode, and its record.
fn keep(
    meta: &MetaStore<'_>,
    path: &ObjectPath<'_>,
    file: BorrowedFd<'_>,
    stat: &rustix::fs::Stat,
    record: MetaRecord,
    sync: bool,
) -> StoreResult<()> {
    let bucket = meta.bucket;
    let id = id_of(record.version_id.as_deref()).to_string();
    let dir = open_key_dir(bucket, path, sync)?;
    let (tmp_dir, tmp) = staging_name(bucket)?;
    // Linking through /proc links the very inode read above, whatever now has its name.
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    match rustix::fs::linkat(rustix::fs::CWD, proc_path.as_str(), &tmp_dir, tmp.as_str(), AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => {}
        // A file system without hard links (or no /proc): keep a copy instead. Copying is long
        // work: a request that may not block moves to a thread that may, before any change.
        Err(_) if !meta.may_block => return Err(StoreError::WouldBlock),
        Err(_) => {
            let copy = create_staged(tmp_dir.as_fd(), &tmp)
                .map_err(|e| StoreError::io_at("keep a version of", path.key(), e))?;
            let copied = super::file_ops::copy_file_contents(file, copy.as_fd(), 0, stat.st_size as u64);
            if let Err(err) = copied {
                let _ = rustix::fs::unlinkat(&tmp_dir, tmp.as_str(), AtFlags::empty());
                return Err(err);
            }
        }
    }
    if let Err(err) = rustix::fs::renameat(&tmp_dir, tmp.as_str(), &dir, id.as_str()) {
        let _ = rustix::fs::unlinkat(&tmp_dir, tmp.as_str(), AtFlags::empty());
        return Err(StoreError::io_at("keep a version of", path.key(), err));
    }
    let kept = VersionRecord {
        key: path.key().to_string(),
        version_id: id,
        delete_marker: false,
        last_modified_ns: time_ns(modified(stat)),
        record: Some(record),
    };
    write_record(bucket, dir.as_fd(), &kept, sync)?;
    if sync {
        rustix::fs::fsync(&dir).map_err(|e| StoreError::io_at("fsync the versions of", path.key(), e))?;
    }
    Ok(())
}

/// Removes kept version `id` of a key (its record first, so no reader sees a record without
/// bytes), and the key's directories in the versions tree once they are empty. Returns what it
/// removed.
fn forget(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>, id: &str) -> StoreResult<Option<VersionRecord>> {
    isthmus_store::identity::as_gateway(|| forget_now(bucket, path, id))
}

fn forget_now(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>, id: &str) -> StoreResult<Option<VersionRecord>> {
    let Ok(dir) = open_dir_beneath(bucket, &key_dir(path)) else { return Ok(None) };
    let Some(record) = read_record(dir.as_fd(), id) else { return Ok(None) };
    match rustix::fs::unlinkat(&dir, format!("{id}{RECORD_SUFFIX}"), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(err) => return Err(StoreError::io_at("remove a version of", path.key(), err)),
    }
    let _ = rustix::fs::unlinkat(&dir, id, AtFlags::empty());
    drop(dir);
    prune_key_dirs(bucket, path);
    Ok(Some(record))
}

/// Removes the key's directories of the versions tree that became empty, deepest first.
fn prune_key_dirs(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) {
    let mut dirs = vec![key_dir(path)];
    let segments = path.segments();
    for depth in (1..=segments.len()).rev() {
        dirs.push(format!("{VERSIONS_DIR}/{}", segments[..depth].join("/")));
    }
    for dir in dirs {
        // Not empty (other versions, other keys beneath): stop there.
        if rustix::fs::unlinkat(bucket, dir.as_str(), AtFlags::REMOVEDIR).is_err() {
            return;
        }
    }
}

/// Before the current object of `path` is replaced or deleted in a bucket in `state`: keeps it
/// as a version when versioning keeps it (always when enabled; when suspended, unless it is
/// the null version, which the write replaces). A null version kept earlier is dropped when the
/// write makes a new null version. Call with the key's lock held.
pub(crate) fn keep_current(
    meta: &MetaStore<'_>,
    path: &ObjectPath<'_>,
    state: Versioning,
    sync: bool,
) -> StoreResult<()> {
    let current = match open_object(meta.bucket, path) {
        Ok((fd, stat)) => {
            // First, as it may ask to move to a thread that may block (before any change).
            let record = current_record(meta, fd.as_fd(), path.key(), &stat)?;
            Some((fd, stat, record))
        }
        Err(StoreError::NoSuchKey) => None,
        Err(err) => return Err(err),
    };
    if state == Versioning::Suspended {
        forget(meta.bucket, path, NULL_VERSION)?;
    }
    let Some((fd, stat, record)) = current else { return Ok(()) };
    if state == Versioning::Suspended && record.version_id.is_none() {
        return Ok(());
    }
    // The versions tree is the gateway's: changed with its identity, after the request's own
    // identity has opened the current file (and will replace or remove it).
    isthmus_store::identity::as_gateway(|| keep(meta, path, fd.as_fd(), &stat, record, sync))
}

/// Records a delete marker `id` for `path` (the latest version from now on).
pub(crate) fn mark_deleted(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>, id: &str, sync: bool) -> StoreResult<()> {
    isthmus_store::identity::as_gateway(|| mark_deleted_now(bucket, path, id, sync))
}

fn mark_deleted_now(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>, id: &str, sync: bool) -> StoreResult<()> {
    let dir = open_key_dir(bucket, path, sync)?;
    let marker = VersionRecord {
        key: path.key().to_string(),
        version_id: id.to_string(),
        delete_marker: true,
        last_modified_ns: time_ns(std::time::SystemTime::now()),
        record: None,
    };
    write_record(bucket, dir.as_fd(), &marker, sync)?;
    if sync {
        rustix::fs::fsync(&dir).map_err(|e| StoreError::io_at("fsync the versions of", path.key(), e))?;
    }
    Ok(())
}

/// When a key has no current file and its newest kept entry is a version (not a delete
/// marker), makes that version the current file again, as S3 does when the latest version or
/// delete marker is deleted.
pub(crate) fn restore_latest(meta: &MetaStore<'_>, path: &ObjectPath<'_>, sync: bool) -> StoreResult<()> {
    // Moving a kept version back is the gateway's work, done for a request whose identity
    // removed the key's current file or a version of it (see `delete_versioned`).
    isthmus_store::identity::as_gateway(|| restore_latest_now(meta, path, sync))
}

fn restore_latest_now(meta: &MetaStore<'_>, path: &ObjectPath<'_>, sync: bool) -> StoreResult<()> {
    match open_object(meta.bucket, path) {
        Err(StoreError::NoSuchKey) => {}
        Ok(_) => return Ok(()),
        Err(err) => return Err(err),
    }
    let Some(newest) = kept_versions(meta.bucket, path)?.into_iter().next() else { return Ok(()) };
    let Some(record) = newest.record.clone().filter(|_| !newest.delete_marker) else { return Ok(()) };
    let dir = open_dir_beneath(meta.bucket, &key_dir(path))
        .map_err(|e| StoreError::io_at("open the versions of", path.key(), e))?;
    let parent = match path.parent() {
        None => open_dir_beneath(meta.bucket, "."),
        Some(parent) => create_dirs_beneath(meta.bucket, &parent, sync),
    }
    .map_err(|e| StoreError::io_at("create the object's directories", path.key(), e))?;
    match super::staging::rename_noreplace(dir.as_fd(), newest.version_id.as_str(), parent.as_fd(), path.leaf()) {
        Ok(()) => {}
        // A POSIX program made a new current file meanwhile: it is the latest.
        Err(Errno::EXIST) => return Ok(()),
        Err(err) => return Err(StoreError::io_at("restore a version of", path.key(), err)),
    }
    let (fd, _) = open_object(meta.bucket, path)?;
    meta.save(fd.as_fd(), path.key(), &record)?;
    if sync {
        rustix::fs::fsync(&parent).map_err(|e| StoreError::io_at("fsync the object's directory", path.key(), e))?;
    }
    drop(dir);
    forget(meta.bucket, path, &newest.version_id)?;
    Ok(())
}

/// Removes kept version `id` (a version or a delete marker) and restores the latest version
/// if it was the newest. Returns what was removed.
pub(crate) fn remove_kept(
    meta: &MetaStore<'_>,
    path: &ObjectPath<'_>,
    id: &str,
    sync: bool,
) -> StoreResult<Option<VersionRecord>> {
    let removed = forget(meta.bucket, path, id)?;
    if removed.is_some() {
        restore_latest(meta, path, sync)?;
    }
    Ok(removed)
}

/// The object `path` as a read with `version_id` sees it: the current file when it is that
/// version (or no version was asked), else the kept version. Returns the open file and its
/// description; `version_id` of the description is set in versioned buckets.
pub(crate) fn head_version(
    meta: &MetaStore<'_>,
    state: Option<Versioning>,
    path: &ObjectPath<'_>,
    version_id: Option<&str>,
) -> StoreResult<(OwnedFd, ObjectInfo)> {
    let current = head(meta, path).map(|(fd, _, mut info)| {
        if state.is_some() && info.version_id.is_none() {
            info.version_id = Some(NULL_VERSION.to_string());
        }
        (fd, info)
    });
    let Some(wanted) = version_id else {
        return match current {
            Err(StoreError::NoSuchKey) if state.is_some() && !path.is_dir() => {
                match kept_versions(meta.bucket, path)?.into_iter().next() {
                    Some(newest) if newest.delete_marker => {
                        Err(StoreError::LatestIsDeleteMarker { version_id: newest.version_id })
                    }
                    _ => Err(StoreError::NoSuchKey),
                }
            }
            other => other,
        };
    };
    isthmus_store::validate_version_id(wanted)?;
    match current {
        Ok((fd, info)) if id_of(info.version_id.as_deref()) == wanted => return Ok((fd, info)),
        Ok(_) | Err(StoreError::NoSuchKey) => {}
        Err(err) => return Err(err),
    }
    if path.is_dir() {
        return Err(StoreError::NoSuchVersion);
    }
    let dir = match open_dir_beneath(meta.bucket, &key_dir(path)) {
        Ok(dir) => dir,
        Err(Errno::NOENT | Errno::NOTDIR) => return Err(StoreError::NoSuchVersion),
        Err(err) => return Err(StoreError::io_at("open the versions of", path.key(), err)),
    };
    let kept = read_record(dir.as_fd(), wanted).ok_or(StoreError::NoSuchVersion)?;
    if kept.delete_marker {
        return Err(StoreError::VersionIsDeleteMarker { version_id: kept.version_id });
    }
    let fd = match rustix::fs::openat(&dir, wanted, OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW, Mode::empty())
    {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(StoreError::NoSuchVersion),
        Err(err) => return Err(StoreError::io_at("open a version of", path.key(), err)),
    };
    Ok((fd, kept.info()))
}

/// Every version of one key, newest first, `current` (the plain file, if any) on top.
/// `keeps_any`: whether the bucket has a versions tree at all (a bucket never versioned has
/// none, and its listing then looks up nothing per key).
pub(crate) fn versions_of(
    bucket: BorrowedFd<'_>,
    key: &str,
    current: Option<ObjectInfo>,
    keeps_any: bool,
) -> StoreResult<Vec<ObjectVersion>> {
    let mut versions = Vec::new();
    if let Some(mut info) = current {
        info.version_id.get_or_insert_with(|| NULL_VERSION.to_string());
        versions.push(ObjectVersion { info, is_latest: true, delete_marker: false });
    }
    if let Ok(path) = ObjectPath::parse(key)
        && keeps_any
        && !path.is_dir()
    {
        for kept in kept_versions(bucket, &path)? {
            let is_latest = versions.is_empty();
            versions.push(kept.version(is_latest));
        }
    }
    Ok(versions)
}

impl PosixStore {
    /// DeleteObject in a bucket with a versioning state, or with a version id.
    pub(super) fn delete_versioned(
        &self,
        cx: &RequestContext,
        open: &super::OpenBucket,
        key: &str,
        version_id: Option<&str>,
    ) -> StoreResult<isthmus_store::DeleteOutcome> {
        if let Some(id) = version_id {
            isthmus_store::validate_version_id(id)?;
        }
        let path = ObjectPath::parse(key)?;
        let sync = self.strict();
        let _bucket_lock = super::locks::lock_bucket_for_write(self.root_fd.as_fd(), open)?;
        let _key_lock = super::locks::lock_key(open.fd.as_fd(), key)?;
        let meta = self.meta_store(open, cx);
        let Some(id) = version_id else {
            // No version named: the key gets a delete marker (in a versioned bucket).
            let Some(state) = open.versioning.filter(|_| !path.is_dir()) else {
                self.remove_object(cx, open, key)?;
                return Ok(isthmus_store::DeleteOutcome::default());
            };
            keep_current(&meta, &path, state, sync)?;
            self.remove_object(cx, open, key)?;
            let marker = state.next_version_id();
            mark_deleted(open.fd.as_fd(), &path, &marker, sync)?;
            return Ok(isthmus_store::DeleteOutcome { version_id: Some(marker), delete_marker: true });
        };
        let outcome = |delete_marker| isthmus_store::DeleteOutcome { version_id: Some(id.to_string()), delete_marker };
        let current = match head(&meta, &path) {
            Ok((_, _, info)) => Some(info),
            Err(StoreError::NoSuchKey) => None,
            Err(err) => return Err(err),
        };
        if current.is_some_and(|info| id_of(info.version_id.as_deref()) == id) {
            self.remove_object(cx, open, key)?;
            if !path.is_dir() {
                restore_latest(&meta, &path, sync)?;
            }
            return Ok(outcome(false));
        }
        if path.is_dir() {
            return Ok(outcome(false));
        }
        // Removing a kept version changes the key as removing its file would: the request's
        // identity must be allowed to change the key's directory.
        super::file_ops::check_may_change_entries(open.fd.as_fd(), &path)?;
        let removed = remove_kept(&meta, &path, id, sync)?;
        Ok(outcome(removed.is_some_and(|r| r.delete_marker)))
    }
}

/// Whether the bucket keeps any version or delete marker (DeleteBucket refuses then, as S3).
pub(crate) fn keeps_versions(bucket: BorrowedFd<'_>) -> bool {
    open_dir_beneath(bucket, VERSIONS_DIR).is_ok_and(|dir| has_entries_besides(dir.as_fd(), &[]))
}

/// Whether a directory has entries other than `.`, `..` and those named in `besides`.
pub(crate) fn has_entries_besides(dir: BorrowedFd<'_>, besides: &[&str]) -> bool {
    rustix::fs::Dir::read_from(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let name = e.file_name().to_bytes();
            name != b"." && name != b".." && !besides.iter().any(|b| b.as_bytes() == name)
        })
    })
}
