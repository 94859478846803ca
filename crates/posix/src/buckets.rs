//! Buckets of a `PosixStore`: listing, creation, deletion (which must never race a write into
//! a losing state), the recorded owner, the metadata probe, and the lock on a bucket's existence.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::locks::{FileLock, check_still_named, lock_bucket};
use super::staging::StagedFile;
use super::{PosixStore, TRASH_DIR, is_dir, system_time};
use crate::resolve::{create_dirs_beneath, open_dir_beneath};
use crate::writer_names::unique_suffix;
use isthmus_store::MetadataMode;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::{INTERNAL_DIR, validate_bucket_name};
use isthmus_store::{BucketConfig, BucketInfo, CreateBucketRequest, Versioning};

/// Who created the bucket (a door's user name), in the bucket's internal area.
const OWNER_FILE: &str = "owner";
/// The bucket's ACL (a canned name, or JSON with grants), in the bucket's internal area; none
/// means private.
const ACL_FILE: &str = "acl";
/// The bucket's policy (the JSON document as put), in the bucket's internal area.
const POLICY_FILE: &str = "policy.json";
/// The bucket's PublicAccessBlock (JSON), in the bucket's internal area.
const PUBLIC_ACCESS_BLOCK_FILE: &str = "public-access-block.json";
/// The bucket's tags (JSON), in the bucket's internal area.
const TAGS_FILE: &str = "tags.json";
/// The bucket's versioning state (`Enabled` or `Suspended`), in the bucket's internal area.
const VERSIONING_FILE: &str = "versioning";
/// Held exclusive while the settings are compared with the version a write read and replaced.
const CONFIG_LOCK_FILE: &str = "config.lock";

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
            let trash = create_dirs_beneath(self.root_fd.as_fd(), TRASH_DIR, false)
                .map_err(|e| StoreError::io_at("create the trash", TRASH_DIR, e))?;
            let trashed = format!("{bucket}.{}", unique_suffix());
            rustix::fs::renameat(&*self.root_fd, bucket, &trash, trashed.as_str())
                .map_err(|e| StoreError::io_at("move the bucket to the trash", bucket, e))?;
            remove_tree_logged(&self.root.join(TRASH_DIR).join(&trashed));
        }
        if self.strict() {
            rustix::fs::fsync(&*self.root_fd)
                .map_err(|e| StoreError::io("fsync the data root", &self.root, e.into()))?;
        }
        Ok(())
    }

    /// Replaces (`Some`) or removes (`None`) a small file of the bucket's internal area (`dir`),
    /// atomically, durably in strict mode. Every gateway on the file system reads the same.
    /// Bucket settings are the gateway's state: written with its identity (who may change them
    /// is the authorization layer's decision).
    fn write_setting(&self, dir: &OwnedFd, name: &str, bytes: Option<&[u8]>) -> StoreResult<()> {
        match bytes {
            Some(bytes) => {
                let mut staged = StagedFile::create(dir.try_clone()?)?;
                staged.write_all(bytes)?;
                if self.strict() {
                    rustix::fs::fsync(&staged.file)?;
                }
                staged.rename_into(dir.as_fd(), name, RenameFlags::empty())?;
            }
            None => match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(err) => return Err(StoreError::io_at("remove a bucket setting", name, err)),
            },
        }
        if self.strict() {
            rustix::fs::fsync(dir)?;
        }
        Ok(())
    }

    /// The bucket's settings as read when its directory was opened (see `OpenBucket::config`).
    pub(super) fn config_of(&self, bucket: &str) -> StoreResult<BucketConfig> {
        Ok((*self.bucket_fd(bucket)?.config).clone())
    }

    /// Replaces the bucket's settings under its settings lock, if they are still the version
    /// the write names; only the files of settings that changed are rewritten, each atomically.
    /// This gateway sees the change at once; others within the bucket cache's second.
    pub(super) fn record_config(&self, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        isthmus_store::object_meta::validate_bucket_tags(&config.tags)?;
        let written = isthmus_store::identity::as_gateway(|| {
            let open = self.bucket_fd(bucket)?;
            let dir = create_dirs_beneath(open.fd.as_fd(), INTERNAL_DIR, self.strict())?;
            let _lock = FileLock::acquire(dir.as_fd(), CONFIG_LOCK_FILE, FlockOperation::LockExclusive)
                .map_err(|e| StoreError::io_at("lock the bucket settings", CONFIG_LOCK_FILE, e))?;
            let current = read_config(open.fd.as_fd())?;
            config.check_replaces(&current)?;
            for ((name, old), (_, new)) in setting_files(&current).into_iter().zip(setting_files(config)) {
                if old != new {
                    self.write_setting(&dir, name, new.as_deref())?;
                }
            }
            Ok(())
        });
        // After a conflict too: the retry must read what the other writer left, not this cache.
        self.settings_writes.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.bucket_fds.remove(bucket);
        written
    }
}

/// The files a bucket's settings are kept in (`BUCKET/.isthmus/NAME`), each with its bytes
/// (`None`: no file, the setting's default).
fn setting_files(config: &BucketConfig) -> [(&'static str, Option<Vec<u8>>); 6] {
    let acl = &config.acl;
    let acl = if acl.grants.is_empty() {
        // The canned name alone, as before grants existed.
        (acl.canned != isthmus_store::CannedAcl::Private).then(|| acl.canned.name().as_bytes().to_vec())
    } else {
        Some(serde_json::to_vec(acl).expect("ACLs serialize"))
    };
    [
        (OWNER_FILE, config.owner.as_ref().map(|o| o.as_bytes().to_vec())),
        (ACL_FILE, acl),
        (POLICY_FILE, config.policy.as_ref().map(|p| p.as_bytes().to_vec())),
        (
            PUBLIC_ACCESS_BLOCK_FILE,
            config.public_access_block.map(|b| serde_json::to_vec(&b).expect("settings serialize")),
        ),
        (TAGS_FILE, (!config.tags.is_empty()).then(|| serde_json::to_vec(&config.tags).expect("tags serialize"))),
        (VERSIONING_FILE, config.versioning.map(|v| v.as_str().as_bytes().to_vec())),
    ]
}

/// A bucket's settings, read from the files of its internal area.
pub(super) fn read_config(bucket: BorrowedFd<'_>) -> StoreResult<BucketConfig> {
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).trim().to_string();
    let parsed = |name: &'static str, what: &'static str| -> StoreResult<Option<Vec<u8>>> {
        read_setting(bucket, name).map_err(|e| e.context(what, name))
    };
    let json_error = |what: &'static str, name: &'static str| {
        move |e: serde_json::Error| StoreError::io(what, std::path::Path::new(name), e.into())
    };
    let acl = match parsed(ACL_FILE, "read the bucket ACL")? {
        None => isthmus_store::Acl::default(),
        Some(bytes) if bytes.first() == Some(&b'{') => {
            serde_json::from_slice(&bytes).map_err(json_error("read the bucket ACL", ACL_FILE))?
        }
        Some(bytes) => isthmus_store::Acl::canned(text(bytes).parse()?),
    };
    let public_access_block = match parsed(PUBLIC_ACCESS_BLOCK_FILE, "read the public access block")? {
        Some(bytes) => Some(
            serde_json::from_slice(&bytes)
                .map_err(json_error("parse the public access block", PUBLIC_ACCESS_BLOCK_FILE))?,
        ),
        None => None,
    };
    let tags = match parsed(TAGS_FILE, "read the bucket tags")? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(json_error("parse the bucket tags", TAGS_FILE))?,
        None => BTreeMap::new(),
    };
    Ok(BucketConfig {
        owner: parsed(OWNER_FILE, "read the bucket owner")?.map(text).filter(|o| !o.is_empty()),
        acl,
        policy: parsed(POLICY_FILE, "read the bucket policy")?.map(|b| String::from_utf8_lossy(&b).into_owned()),
        public_access_block,
        tags,
        versioning: parsed(VERSIONING_FILE, "read the versioning state")?.and_then(|b| Versioning::parse(&text(b))),
        version: None,
    })
}

/// A small file of a bucket's internal area (`BUCKET/.isthmus/NAME`), if it exists.
pub(super) fn read_setting(bucket: BorrowedFd<'_>, name: &str) -> StoreResult<Option<Vec<u8>>> {
    let path = format!("{INTERNAL_DIR}/{name}");
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let fd = match rustix::fs::openat(bucket, path.as_str(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(err) => return Err(StoreError::io_at("open a bucket setting", &path, err)),
    };
    let mut bytes = Vec::new();
    File::from(fd)
        .take(1 << 20)
        .read_to_end(&mut bytes)
        .map_err(|e| StoreError::io("read a bucket setting", std::path::Path::new(&path), e))?;
    Ok(Some(bytes))
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
