//! The current file of an object: opening it beneath its bucket, its metadata record with an
//! ETag that is never stale (and never costs a large file's hash on a request), its description.
//! What the read, write and version paths all build on.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::{is_dir, is_file, modified};
use crate::meta::{EMPTY_ETAG, FileIdentity, MetaRecord, MetaStore, compute_etag, identity_etag};
use crate::resolve::open_beneath;
use isthmus_store::ObjectInfo;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;

/// Flags for opening an object for reading: never block on a FIFO a POSIX user planted.
const READ_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::NOCTTY);

/// Opens an existing object for reading, with its stat. Anything that is not a regular
/// file (or a directory object for keys ending in `/`) is "no such key".
pub(crate) fn open_object(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) -> StoreResult<(OwnedFd, rustix::fs::Stat)> {
    let flags = if path.is_dir() { READ_FLAGS | OFlags::DIRECTORY } else { READ_FLAGS };
    let fd = match open_beneath(bucket, &path.relative(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR | Errno::XDEV | Errno::LOOP | Errno::NXIO | Errno::ISDIR) => {
            return Err(StoreError::NoSuchKey);
        }
        Err(err) => return Err(StoreError::io_at("open the object", path.key(), err)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| StoreError::io_at("stat the object", path.key(), e))?;
    let ok = if path.is_dir() { is_dir(&stat) } else { is_file(&stat) };
    if !ok {
        return Err(StoreError::NoSuchKey);
    }
    Ok((fd, stat))
}

/// The object's metadata record, with the ETag made anew when the file changed since it was
/// recorded (written or modified by a POSIX program). A directory object without a record is
/// no object.
///
/// A changed file up to `MetaStore::etag_md5_limit` bytes gets the MD5 of its content, stored
/// for next time; hashing it is long work, so a request that may not block gets `WouldBlock`
/// before it starts. A larger file gets `identity_etag`, derived from its inode, size and
/// mtime: no request ever reads a large file to answer with its ETag.
pub(crate) fn current_record(
    meta: &MetaStore<'_>,
    fd: BorrowedFd<'_>,
    key: &str,
    stat: &rustix::fs::Stat,
) -> StoreResult<MetaRecord> {
    let stored = meta.load(fd, key);
    if is_dir(stat) {
        // Directory objects are always empty; their mtime moves with their children.
        return match stored {
            Some(mut record) => {
                record.etag = EMPTY_ETAG.to_string();
                Ok(record)
            }
            None => Err(StoreError::NoSuchKey),
        };
    }
    let identity = FileIdentity::of(stat);
    if let Some(record) = stored.as_ref().filter(|r| r.identity == identity) {
        return Ok(record.clone());
    }
    // The client's checksum and part sizes described the old content: dropped, not served stale.
    // A POSIX program that changed the file changed the current version: its id stays.
    let (headers, version_id) = stored.map(|r| (r.meta, r.version_id)).unwrap_or_default();
    let record = |etag: String, identity: FileIdentity| MetaRecord {
        etag,
        identity,
        checksum: None,
        parts: Vec::new(),
        meta: headers.clone(),
        version_id: version_id.clone(),
        acl_seal: None,
    };
    if identity.size > meta.etag_md5_limit {
        return Ok(record(identity_etag(&identity), identity));
    }
    if !meta.may_block {
        return Err(StoreError::WouldBlock);
    }
    let etag = compute_etag(fd).map_err(|e| e.context("hash a file written outside the gateway", key))?;
    let after = rustix::fs::fstat(fd).map_err(|e| StoreError::io_at("stat the object", key, e))?;
    if FileIdentity::of(&after) != identity {
        // Still being written by a POSIX program: report it, do not store a guess.
        return Ok(record(etag, FileIdentity::of(&after)));
    }
    let fresh = record(etag, identity);
    // Best effort: a read-only file or file system still serves the right ETag.
    if let Err(err) = meta.save(fd, key, &fresh) {
        tracing::debug!(key, error = %err, "could not store the ETag of a file written outside the gateway");
    }
    Ok(fresh)
}

pub(crate) fn object_info(key: &str, stat: &rustix::fs::Stat, record: MetaRecord) -> ObjectInfo {
    ObjectInfo {
        key: key.to_string(),
        size: if is_dir(stat) { 0 } else { stat.st_size as u64 },
        last_modified: modified(stat),
        etag: record.etag,
        meta: record.meta,
        checksum: record.checksum,
        parts: record.parts,
        version_id: record.version_id,
    }
}

/// HEAD of an open bucket: stat and validated metadata.
pub(crate) fn head(
    meta: &MetaStore<'_>,
    path: &ObjectPath<'_>,
) -> StoreResult<(OwnedFd, rustix::fs::Stat, ObjectInfo)> {
    let (fd, stat) = open_object(meta.bucket, path)?;
    let record = current_record(meta, fd.as_fd(), path.key(), &stat)?;
    let info = object_info(path.key(), &stat, record);
    Ok((fd, stat, info))
}

/// The ETag of the object currently stored under `path`, if any (for conditional writes).
pub(crate) fn current_etag(meta: &MetaStore<'_>, path: &ObjectPath<'_>) -> StoreResult<Option<String>> {
    match head(meta, path) {
        Ok((_, _, info)) => Ok(Some(info.etag)),
        Err(StoreError::NoSuchKey) => Ok(None),
        Err(err) => Err(err),
    }
}
