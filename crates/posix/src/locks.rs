//! The locks of a posix pool: an advisory file lock (`FileLock`), the lock on a bucket's
//! existence that writes hold shared and DeleteBucket exclusive, and the per-key stripes that
//! serialise conditional writers of one key.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::OpenBucket;
use crate::resolve::create_dirs_beneath;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::INTERNAL_DIR;

/// The lock on a bucket's existence (see `BucketLock`).
const BUCKET_LOCK_FILE: &str = "bucket.lock";

/// An advisory lock (flock) on a file, created if missing. Released when dropped. flock
/// serialises across threads and processes (and across hosts where the file system supports
/// it, such as NFSv4 or Lustre mounted with `-o flock`).
pub(crate) struct FileLock {
    /// Held open for the lock's lifetime; closing it releases the flock.
    _file: OwnedFd,
}

impl FileLock {
    pub(crate) fn acquire(dir: BorrowedFd<'_>, name: &str, operation: FlockOperation) -> Result<Self, Errno> {
        let file = rustix::fs::openat(
            dir,
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )?;
        loop {
            match rustix::fs::flock(&file, operation) {
                Ok(()) => return Ok(Self { _file: file }),
                Err(Errno::INTR) => {}
                Err(err) => return Err(err),
            }
        }
    }
}

/// The exclusive lock of one of 256 lock files per bucket, chosen by a hash of the key: it
/// serialises conditional writers of a key.
pub(crate) fn lock_key(bucket: BorrowedFd<'_>, key: &str) -> StoreResult<FileLock> {
    let stripe = crate::meta::key_hash(key)[..2].to_string();
    let locks = ".isthmus/locks";
    isthmus_store::identity::as_gateway(|| {
        let dir = create_dirs_beneath(bucket, locks, false).map_err(|e| StoreError::io_at("create", locks, e))?;
        FileLock::acquire(dir.as_fd(), &stripe, FlockOperation::LockExclusive)
            .map_err(|e| StoreError::io_at("lock the key", key, e))
    })
}

/// The lock on a bucket's existence. A write that makes an object visible holds it shared from
/// its last check to its rename; DeleteBucket holds it exclusive from its emptiness check until
/// the bucket is gone. So a write either lands before the check (and the delete answers
/// BucketNotEmpty, touching nothing) or finds the bucket gone (and answers NoSuchBucket): never
/// an acknowledged object in a deleted bucket, never a surviving bucket without its owner or
/// uploads.
pub(crate) fn lock_bucket(bucket: BorrowedFd<'_>, operation: FlockOperation) -> StoreResult<FileLock> {
    isthmus_store::identity::as_gateway(|| lock_bucket_now(bucket, operation))
}

fn lock_bucket_now(bucket: BorrowedFd<'_>, operation: FlockOperation) -> StoreResult<FileLock> {
    let dir = match create_dirs_beneath(bucket, INTERNAL_DIR, false) {
        Ok(dir) => dir,
        // The bucket directory was removed under us.
        Err(Errno::NOENT) => return Err(StoreError::NoSuchBucket),
        Err(err) => return Err(StoreError::io_at("open the bucket's internal directory", INTERNAL_DIR, err)),
    };
    match FileLock::acquire(dir.as_fd(), BUCKET_LOCK_FILE, operation) {
        Ok(lock) => Ok(lock),
        Err(Errno::NOENT) => Err(StoreError::NoSuchBucket),
        Err(err) => Err(StoreError::io_at("lock the bucket", BUCKET_LOCK_FILE, err)),
    }
}

/// Takes the shared lock on a bucket's existence for a write about to become visible, and
/// checks that the directory the write has open is still the bucket of that name.
pub(crate) fn lock_bucket_for_write(root: BorrowedFd<'_>, bucket: &OpenBucket) -> StoreResult<FileLock> {
    let lock = lock_bucket(bucket.fd.as_fd(), FlockOperation::LockShared)?;
    check_still_named(root, bucket)?;
    Ok(lock)
}

/// NoSuchBucket unless the open bucket directory is still the one named `bucket.name` in the
/// root (a DeleteBucket moved it away, or the name was re-created meanwhile).
pub(crate) fn check_still_named(root: BorrowedFd<'_>, bucket: &OpenBucket) -> StoreResult<()> {
    let open = rustix::fs::fstat(&*bucket.fd).map_err(|e| StoreError::io_at("stat the bucket", &bucket.name, e))?;
    match rustix::fs::statat(root, &*bucket.name, AtFlags::empty()) {
        Ok(named) if (named.st_dev, named.st_ino) == (open.st_dev, open.st_ino) => Ok(()),
        Ok(_) | Err(Errno::NOENT | Errno::NOTDIR) => Err(StoreError::NoSuchBucket),
        Err(err) => Err(StoreError::io_at("stat the bucket", &bucket.name, err)),
    }
}
