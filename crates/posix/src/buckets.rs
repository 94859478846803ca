//! Buckets of a `PosixStore`: listing, creation, deletion (which must never race a write into
//! a losing state), the recorded owner, the metadata probe, and the lock on a bucket's existence.

use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::bucket_records;
use super::locks::{check_still_named, lock_bucket};
use super::{PosixStore, TRASH_DIR, is_dir, system_time};
use crate::resolve::{create_dirs_beneath, open_dir_beneath};
use crate::writer_names::unique_suffix;
use isthmus_store::MetadataMode;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::{INTERNAL_DIR, validate_bucket_name};
use isthmus_store::{BucketConfig, BucketInfo, CreateBucketRequest};

/// Whether the calling thread's identity may enter the directory `dir` (search permission,
/// as `cd` needs). The gateway itself always may; a user's identity is asked of the kernel.
pub(crate) fn may_enter(dir: BorrowedFd<'_>) -> bool {
    !isthmus_store::identity::is_switched()
        || rustix::fs::accessat(dir, ".", rustix::fs::Access::EXEC_OK, AtFlags::EACCESS).is_ok()
}

impl PosixStore {
    /// The buckets, each only if the calling thread's identity may enter it.
    pub(super) fn bucket_list(&self) -> StoreResult<Vec<BucketInfo>> {
        let switched = isthmus_store::identity::is_switched();
        let buckets = isthmus_store::identity::as_gateway(|| self.bucket_list_now())?;
        if !switched {
            return Ok(buckets);
        }
        let enter = rustix::fs::Access::EXEC_OK;
        Ok(buckets
            .into_iter()
            .filter(|b| rustix::fs::accessat(&*self.root_fd, b.name.as_str(), enter, AtFlags::EACCESS).is_ok())
            .collect())
    }

    fn bucket_list_now(&self) -> StoreResult<Vec<BucketInfo>> {
        let mut buckets = Vec::new();
        let entries = rustix::fs::Dir::read_from(&*self.root_fd)
            .map_err(|e| StoreError::io("list the data root", &self.root, e.into()))?;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("list the data root", &self.root, e.into()))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if validate_bucket_name(name).is_err() {
                continue;
            }
            // Follows a symlinked bucket; skips anything that is not a directory.
            let Ok(stat) = rustix::fs::statat(&*self.root_fd, name, AtFlags::empty()) else {
                continue;
            };
            if !is_dir(&stat) {
                continue;
            }
            let created = rustix::fs::statx(&*self.root_fd, name, AtFlags::empty(), rustix::fs::StatxFlags::BTIME)
                .ok()
                .filter(|s| s.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0)
                .map_or_else(
                    || system_time(stat.st_ctime, stat.st_ctime_nsec as i64),
                    |s| system_time(s.stx_btime.tv_sec, i64::from(s.stx_btime.tv_nsec)),
                );
            buckets.push(BucketInfo { name: name.to_string(), created });
        }
        buckets.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(buckets)
    }

    /// CreateBucket. A `PosixStore` is one place: any location name is accepted, as before
    /// pools existed, so clients configured for another region keep working.
    /// With a user's identity the directory is made with it (the kernel decides whether the
    /// user may create directories in the data root, and the bucket belongs to the user).
    pub(super) fn make_bucket(&self, bucket: &str, _request: &CreateBucketRequest) -> StoreResult<()> {
        validate_bucket_name(bucket)?;
        self.bucket_fds.remove(bucket);
        match rustix::fs::mkdirat(&*self.root_fd, bucket, Mode::from_raw_mode(0o777)) {
            Ok(()) => {}
            // Whether the requester owns it is for the authorization layer to say.
            Err(Errno::EXIST) => return Err(StoreError::BucketAlreadyExists),
            Err(err) => return Err(StoreError::io_at("create the bucket directory", bucket, err)),
        }
        // A bucket of that name deleted by POSIX tools left settings bound to its directory;
        // this one starts with none (a process that may not write the state directory relies
        // on that binding alone).
        if let Ok(dir) = self.open_bucket_dir(bucket)
            && let Err(err) =
                isthmus_store::identity::as_gateway(|| bucket_records::start(&self.state, bucket, dir.as_fd()))
        {
            tracing::debug!(bucket, error = %err, "cannot record a new bucket's settings");
        }
        if self.strict() {
            rustix::fs::fsync(&*self.root_fd)
                .map_err(|e| StoreError::io("fsync the data root", &self.root, e.into()))?;
        }
        Ok(())
    }

    /// DeleteBucket: under the bucket's exclusive lock, checks that it holds no object, moves
    /// the directory into the root's trash with one rename (a symlinked bucket: removes the
    /// link) and removes what it held (internal state: owner, unfinished uploads, temporaries).
    pub(super) fn remove_bucket(&self, bucket: &str) -> StoreResult<()> {
        // A user's identity must be allowed to remove the directory as `rmdir` would (write
        // access to the data root, and the sticky bit's ownership rule); the gateway then
        // removes it, with what its internal area holds.
        if isthmus_store::identity::is_switched() {
            let write = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
            let root = rustix::fs::fstat(&*self.root_fd)?;
            let sticky_owner_ok = root.st_mode & 0o1000 == 0
                || rustix::fs::statat(&*self.root_fd, bucket, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|b| {
                    isthmus_store::identity::switched_owner()
                        .is_some_and(|(uid, _)| uid == b.st_uid || uid == root.st_uid)
                });
            if rustix::fs::accessat(&*self.root_fd, ".", write, AtFlags::EACCESS).is_err() || !sticky_owner_ok {
                return Err(StoreError::AccessDenied);
            }
        }
        isthmus_store::identity::as_gateway(|| self.remove_bucket_now(bucket))
    }

    fn remove_bucket_now(&self, bucket: &str) -> StoreResult<()> {
        let open = self.bucket_fd(bucket)?;
        let _lock = lock_bucket(open.fd.as_fd(), FlockOperation::LockExclusive)?;
        self.bucket_fds.remove(bucket);
        // The name may have been deleted or re-created while we waited for the lock.
        check_still_named(self.root_fd.as_fd(), &open)?;
        let entries =
            rustix::fs::Dir::read_from(&*open.fd).map_err(|e| StoreError::io_at("list the bucket", bucket, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io_at("list the bucket", bucket, e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." && name != INTERNAL_DIR.as_bytes() {
                return Err(StoreError::BucketNotEmpty);
            }
        }
        if super::versions::keeps_versions(open.fd.as_fd()) {
            return Err(StoreError::BucketNotEmpty);
        }
        let is_link = rustix::fs::statat(&*self.root_fd, bucket, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Symlink);
        if is_link {
            // Remove the link, keep what it points to (minus the gateway's internal state).
            rustix::fs::unlinkat(&*self.root_fd, bucket, AtFlags::empty())
                .map_err(|e| StoreError::io_at("remove the bucket link", bucket, e))?;
            let internal = format!("/proc/self/fd/{}/{INTERNAL_DIR}", std::os::fd::AsRawFd::as_raw_fd(&*open.fd));
            remove_tree_logged(std::path::Path::new(&internal));
        } else {
            let trash = create_dirs_beneath(self.state.fd(), TRASH_DIR, false)
                .map_err(|e| StoreError::io_at("create the trash", TRASH_DIR, e))?;
            let trashed = format!("{bucket}.{}", unique_suffix());
            rustix::fs::renameat(&*self.root_fd, bucket, &trash, trashed.as_str())
                .map_err(|e| StoreError::io_at("move the bucket to the trash", bucket, e))?;
            // Through the descriptor held, never the path a user could have swapped.
            let trashed = format!("/proc/self/fd/{}/{trashed}", std::os::fd::AsRawFd::as_raw_fd(&trash));
            remove_tree_logged(std::path::Path::new(&trashed));
        }
        bucket_records::remove(&self.state, bucket);
        if self.strict() {
            rustix::fs::fsync(&*self.root_fd)
                .map_err(|e| StoreError::io("fsync the data root", &self.root, e.into()))?;
        }
        Ok(())
    }

    /// The bucket's settings as read when its directory was opened (see `OpenBucket::config`).
    pub(super) fn config_of(&self, bucket: &str) -> StoreResult<BucketConfig> {
        Ok((*self.bucket_fd(bucket)?.config).clone())
    }

    /// Replaces the bucket's settings if they are still the version the write names (kept by
    /// the gateway, out of users' reach: `bucket_records`). This gateway sees the change at
    /// once; others within the bucket cache's second.
    pub(super) fn record_config(&self, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        isthmus_store::object_meta::validate_bucket_tags(&config.tags)?;
        let written = isthmus_store::identity::as_gateway(|| {
            let open = self.bucket_fd(bucket)?;
            bucket_records::replace(&self.state, bucket, open.fd.as_fd(), config)
        });
        // After a conflict too: the retry must read what the other writer left, not this cache.
        self.settings_writes.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.bucket_fds.remove(bucket);
        written
    }
}

/// Removes a directory tree; what cannot be removed is logged (the trash is emptied again at
/// the next start).
fn remove_tree_logged(path: &std::path::Path) {
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => tracing::warn!(path = %path.display(), error = %err, "could not remove a deleted bucket's files"),
    }
}

/// Decides auto metadata mode for the file system holding `dir` (the data root or a bucket):
/// xattrs if it takes a `user.` attribute on a new file in its internal directory.
pub(super) fn probe_xattr_support(dir: BorrowedFd<'_>) -> MetadataMode {
    let probe = format!("xattr-probe.{}", unique_suffix());
    let Ok(internal) = open_dir_beneath(dir, INTERNAL_DIR) else {
        return MetadataMode::Sidecar;
    };
    let base = internal.as_fd();
    let Ok(fd) = rustix::fs::openat(
        base,
        &probe,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) else {
        return MetadataMode::Sidecar;
    };
    let supported = rustix::fs::fsetxattr(&fd, crate::meta::XATTR_NAME, b"{}", rustix::fs::XattrFlags::empty()).is_ok();
    let _ = rustix::fs::unlinkat(base, &probe, AtFlags::empty());
    if supported { MetadataMode::Xattr } else { MetadataMode::Sidecar }
}
