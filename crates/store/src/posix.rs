//! `PosixStore`: the engine over a plain directory. Bucket = top-level directory, key = relative
//! path, object bytes = the file's bytes, metadata in one xattr (or a sidecar). Writes go to a
//! temporary file in the bucket's hidden `.isthmus/tmp` and are renamed into place.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::conditions::{Conditions, ETagMatch};
use crate::error::{StoreError, StoreResult};
use crate::key::{INTERNAL_DIR, ObjectPath, validate_bucket_name};
use crate::list::DirCache;
use crate::meta::{EMPTY_ETAG, FileIdentity, MetaRecord, MetaStore, MetadataMode, compute_etag};
use crate::resolve::{create_dirs_beneath, open_beneath, open_dir_beneath};
use crate::staging::StagedFile;
use crate::{
    BucketInfo, CopyRequest, GetRequest, GetResponse, ListPage, ListRequest, ObjectInfo, ObjectRead, ObjectWrite,
    PutRequest, Store,
};

/// When a write counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Data, metadata and the directory entry are fsynced before a write is acknowledged.
    #[default]
    Strict,
    /// Acknowledged once the file system has the data in its cache; the file system decides
    /// when it reaches stable storage. Atomicity (old or new object, never torn) still holds.
    Relaxed,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "strict" => Ok(Self::Strict),
            "relaxed" => Ok(Self::Relaxed),
            other => Err(format!("unknown durability {other:?}: use strict or relaxed")),
        }
    }
}

impl std::str::FromStr for MetadataMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "xattr" => Ok(Self::Xattr),
            "sidecar" => Ok(Self::Sidecar),
            other => Err(format!("unknown metadata mode {other:?}: use auto, xattr or sidecar")),
        }
    }
}

/// Where the data root lives: on a local file system, whose metadata calls answer in
/// microseconds from the page cache, or on a shared (network or parallel) one, where a call can
/// wait on a server. Doors use it to decide whether to run short calls inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSystemKind {
    Local(&'static str),
    Shared(&'static str),
}

impl FileSystemKind {
    pub fn from_magic(magic: u64) -> Self {
        match magic {
            0xEF53 => Self::Local("ext4"),
            0x5846_5342 => Self::Local("xfs"),
            0x9123_683E => Self::Local("btrfs"),
            0x0102_1994 => Self::Local("tmpfs"),
            0x2FC1_2FC1 => Self::Local("zfs"),
            0x794C_7630 => Self::Local("overlayfs"),
            0xF2F5_2010 => Self::Local("f2fs"),
            0x0BD0_0BD0 => Self::Shared("lustre"),
            0x4750_4653 => Self::Shared("gpfs"),
            0x00C3_6400 => Self::Shared("cephfs"),
            0x6969 => Self::Shared("nfs"),
            0xFE53_4D42 | 0xFF53_4D42 | 0x517B => Self::Shared("smb"),
            0x1983_0326 => Self::Shared("beegfs"),
            0x2003_0528 => Self::Shared("orangefs"),
            0x6573_5546 => Self::Shared("fuse"),
            _ => Self::Shared("unknown"),
        }
    }

    pub fn is_local(self) -> bool {
        matches!(self, Self::Local(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Local(name) | Self::Shared(name) => name,
        }
    }
}

/// How a `PosixStore` behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreOptions {
    pub durability: Durability,
    pub metadata: MetadataMode,
    /// Upper bound on the directory entries kept in the sorted-listing cache.
    pub list_cache_entries: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self { durability: Durability::Strict, metadata: MetadataMode::Auto, list_cache_entries: 2_000_000 }
    }
}

/// The engine over a directory on a POSIX file system.
pub struct PosixStore {
    root: PathBuf,
    root_fd: OwnedFd,
    options: StoreOptions,
    /// The metadata mode in effect (auto resolved by probing the root).
    metadata: MetadataMode,
    list_cache: DirCache,
    /// Recently opened bucket directories (see `bucket_fd`).
    bucket_fds: quick_cache::sync::Cache<String, (Arc<OwnedFd>, Instant)>,
}

/// How long an open bucket directory is reused.
const BUCKET_FD_TTL: Duration = Duration::from_secs(1);

const TMP_DIR: &str = ".isthmus/tmp";
/// Who created a bucket, as the door that created it names users.
const OWNER_FILE: &str = ".isthmus/owner";
const IO_CHUNK: usize = 1 << 20;

/// A name part unique across processes and hosts sharing one file system.
/// It ends in `<host tag>.<pid>.<random>.<counter>`, so a restarted gateway can tell which
/// leftovers belong to dead writers of its own host (see `left_by_dead_writer`).
pub(crate) fn unique_suffix() -> String {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the OS random source works");
        u64::from_le_bytes(bytes)
    });
    format!("{}.{:x}.{process:016x}.{:x}", host_tag(), std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A short, dot-free tag of this host's name.
fn host_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        crate::meta::key_hash(name.trim())[..8].to_string()
    })
}

/// Whether an internal file or directory name made by `unique_suffix` belongs to a process of
/// this host that no longer runs: what a crash (kill -9, power loss) leaves behind.
pub(crate) fn left_by_dead_writer(name: &str) -> bool {
    let fields: Vec<&str> = name.rsplitn(5, '.').collect();
    // rsplitn yields counter, random, pid, host, rest.
    let (Some(pid), Some(host)) = (fields.get(2), fields.get(3)) else { return false };
    let Some(host) = host.rsplit('.').next() else { return false };
    if host != host_tag() {
        return false;
    }
    let Some(pid) = u32::from_str_radix(pid, 16).ok().and_then(|p| rustix::process::Pid::from_raw(p as i32)) else {
        return false;
    };
    if pid.as_raw_nonzero().get() as u32 == std::process::id() {
        return false;
    }
    matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

fn system_time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs())
    }
}

pub(crate) fn modified(stat: &rustix::fs::Stat) -> SystemTime {
    system_time(stat.st_mtime, stat.st_mtime_nsec as i64)
}

fn is_dir(stat: &rustix::fs::Stat) -> bool {
    rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory
}

fn is_file(stat: &rustix::fs::Stat) -> bool {
    rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile
}

/// Flags for opening an object for reading: never block on a FIFO a POSIX user planted.
const READ_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::NOCTTY);

impl PosixStore {
    /// Opens (and creates if needed) the data root.
    pub fn open(root: impl AsRef<Path>, options: StoreOptions) -> StoreResult<Self> {
        let root = root.as_ref().to_path_buf();
        std::fs::create_dir_all(&root)?;
        let root_fd = rustix::fs::open(&root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        create_dirs_beneath(root_fd.as_fd(), INTERNAL_DIR, false)?;
        let metadata = match options.metadata {
            MetadataMode::Auto => probe_xattr_support(root_fd.as_fd()),
            explicit => explicit,
        };
        Ok(Self {
            root,
            root_fd,
            options,
            metadata,
            list_cache: DirCache::new(options.list_cache_entries),
            bucket_fds: quick_cache::sync::Cache::new(1024),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root's hidden directory for internal state (credentials, probes).
    pub fn internal_dir(&self) -> PathBuf {
        self.root.join(INTERNAL_DIR)
    }

    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The kind of file system under the data root, from its statfs magic number.
    pub fn filesystem(&self) -> FileSystemKind {
        match rustix::fs::fstatfs(&self.root_fd) {
            Ok(stat) => FileSystemKind::from_magic(stat.f_type as u64),
            Err(_) => FileSystemKind::Shared("unknown"),
        }
    }

    /// The metadata mode in effect after probing.
    pub fn metadata_mode(&self) -> MetadataMode {
        self.metadata
    }

    pub(crate) fn strict(&self) -> bool {
        self.options.durability == Durability::Strict
    }

    /// Opens a bucket directory. A bucket may be a symlink placed by the administrator (for
    /// example to a project directory); keys never leave the directory it resolves to.
    ///
    /// Open bucket directories are kept for `BUCKET_FD_TTL`, which saves a path lookup on every
    /// call. A kept directory is used only while it still has a name (a bucket directory that
    /// POSIX tools removed and re-created is opened again at once); one renamed away and
    /// replaced is seen within the TTL.
    pub(crate) fn bucket_fd(&self, bucket: &str) -> StoreResult<Arc<OwnedFd>> {
        if let Some((fd, opened)) = self.bucket_fds.get(bucket)
            && opened.elapsed() < BUCKET_FD_TTL
            && rustix::fs::fstat(&*fd).is_ok_and(|stat| stat.st_nlink > 0)
        {
            return Ok(fd);
        }
        if validate_bucket_name(bucket).is_err() {
            return Err(StoreError::NoSuchBucket);
        }
        match rustix::fs::openat(
            &self.root_fd,
            bucket,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let fd = Arc::new(fd);
                self.bucket_fds.insert(bucket.to_string(), (fd.clone(), Instant::now()));
                Ok(fd)
            }
            Err(Errno::NOENT | Errno::NOTDIR) => Err(StoreError::NoSuchBucket),
            Err(err) => Err(err.into()),
        }
    }

    pub(crate) fn meta_store<'a>(&self, bucket: BorrowedFd<'a>) -> MetaStore<'a> {
        MetaStore { mode: self.metadata, bucket }
    }

    /// Removes temporary files older than `max_age` left in buckets by crashed writers.
    /// Returns how many were removed. Other gateways on the same file system may have writes in
    /// flight, so only files older than any upload could take are touched.
    /// Leftovers of writers on this host that no longer run go at once, whatever their age.
    pub fn clean_stale_temporaries(&self, max_age: Duration) -> StoreResult<usize> {
        let mut removed = 0;
        let now = SystemTime::now();
        for bucket in self.list_buckets()? {
            let Ok(bucket_fd) = self.bucket_fd(&bucket.name) else {
                continue;
            };
            removed += self.clean_claimed_uploads(bucket_fd.as_fd(), now - max_age);
            let Ok(tmp) = open_dir_beneath(bucket_fd.as_fd(), TMP_DIR) else {
                continue;
            };
            let names: Vec<_> = rustix::fs::Dir::read_from(&tmp)?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_owned())
                .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
                .collect();
            for name in names {
                let Ok(stat) = rustix::fs::statat(&tmp, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                    continue;
                };
                let age = now.duration_since(modified(&stat)).unwrap_or_default();
                let dead = name.to_str().is_ok_and(left_by_dead_writer);
                if (dead || age >= max_age) && rustix::fs::unlinkat(&tmp, name.as_c_str(), AtFlags::empty()).is_ok() {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Removes empty parent directories of a deleted key, up to the bucket, except directory
    /// objects, so that a prefix disappears with its last object as it does in S3.
    fn prune_empty_parents(&self, bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) {
        let segments = path.segments();
        let meta = self.meta_store(bucket);
        for depth in (1..segments.len()).rev() {
            let dir_rel = segments[..depth].join("/");
            let dir_key = format!("{dir_rel}/");
            if let Ok(dir_fd) = open_dir_beneath(bucket, &dir_rel)
                && meta.load(dir_fd.as_fd(), &dir_key).is_some()
            {
                return;
            }
            let parent = if depth == 1 {
                open_dir_beneath(bucket, ".")
            } else {
                open_dir_beneath(bucket, &segments[..depth - 1].join("/"))
            };
            let Ok(parent) = parent else { return };
            if rustix::fs::unlinkat(&parent, segments[depth - 1], AtFlags::REMOVEDIR).is_err() {
                return;
            }
        }
    }

    pub(crate) fn new_writer(&self, bucket: &str, key: &str, request: PutRequest) -> StoreResult<PosixWriter> {
        let bucket_fd = self.bucket_fd(bucket)?;
        ObjectPath::parse(key)?;
        crate::meta::validate_tags(&request.meta.tags)?;
        crate::meta::validate_user_metadata(&request.meta.user)?;
        let staged = StagedFile::create(create_dirs_beneath(bucket_fd.as_fd(), TMP_DIR, false)?)?
            .with_checksum(request.checksum_algorithm)
            .with_early_writeback(self.strict());
        Ok(PosixWriter {
            bucket_fd,
            staged,
            key: key.to_string(),
            request,
            known_etag: None,
            known_checksum: None,
            known_parts: Vec::new(),
            strict: self.strict(),
            metadata: self.metadata,
        })
    }
}

/// Opens an existing object for reading, with its stat. Anything that is not a regular
/// file (or a directory object for keys ending in `/`) is "no such key".
fn open_object(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) -> StoreResult<(OwnedFd, rustix::fs::Stat)> {
    let flags = if path.is_dir() { READ_FLAGS | OFlags::DIRECTORY } else { READ_FLAGS };
    let fd = match open_beneath(bucket, &path.relative(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::NOTDIR | Errno::XDEV | Errno::LOOP | Errno::NXIO | Errno::ISDIR) => {
            return Err(StoreError::NoSuchKey);
        }
        Err(err) => return Err(err.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    let ok = if path.is_dir() { is_dir(&stat) } else { is_file(&stat) };
    if !ok {
        return Err(StoreError::NoSuchKey);
    }
    Ok((fd, stat))
}

/// The object's metadata record, with the ETag recomputed (and stored again) when the file
/// changed since it was recorded. A directory object without a record is no object.
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
    if let Some(record) = &stored
        && record.identity == identity
    {
        return Ok(stored.expect("checked above"));
    }
    // Written or changed outside the gateway: recompute, and keep the headers it had.
    let etag = compute_etag(fd)?;
    let after = rustix::fs::fstat(fd)?;
    if FileIdentity::of(&after) != identity {
        // Still being written by a POSIX program: report it, do not cache a guess.
        return Ok(MetaRecord {
            etag,
            identity: FileIdentity::of(&after),
            checksum: None,
            parts: Vec::new(),
            meta: stored.map(|r| r.meta).unwrap_or_default(),
        });
    }
    // The client's checksum described the old content: it is dropped, not served stale.
    let record = MetaRecord {
        etag,
        identity,
        checksum: None,
        parts: Vec::new(),
        meta: stored.map(|r| r.meta).unwrap_or_default(),
    };
    // Best effort: a read-only file or file system still serves the right ETag.
    let _ = meta.save(fd, key, &record);
    Ok(record)
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
fn current_etag(meta: &MetaStore<'_>, path: &ObjectPath<'_>) -> StoreResult<Option<String>> {
    match head(meta, path) {
        Ok((_, _, info)) => Ok(Some(info.etag)),
        Err(StoreError::NoSuchKey) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Decides auto metadata mode: xattrs if the root's file system takes a `user.` attribute.
fn probe_xattr_support(root: BorrowedFd<'_>) -> MetadataMode {
    let probe = format!("{INTERNAL_DIR}/xattr-probe.{}", unique_suffix());
    let Ok(fd) = rustix::fs::openat(
        root,
        &probe,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) else {
        return MetadataMode::Sidecar;
    };
    let supported = rustix::fs::fsetxattr(&fd, crate::meta::XATTR_NAME, b"{}", rustix::fs::XattrFlags::empty()).is_ok();
    let _ = rustix::fs::unlinkat(root, &probe, AtFlags::empty());
    if supported { MetadataMode::Xattr } else { MetadataMode::Sidecar }
}

/// A PUT in progress: bytes go to a temporary file, MD5 is computed as they pass.
pub struct PosixWriter {
    bucket_fd: Arc<OwnedFd>,
    pub(crate) staged: StagedFile,
    key: String,
    request: PutRequest,
    /// Set by copies and multipart completion, which know the ETag without hashing.
    pub(crate) known_etag: Option<String>,
    /// With `known_etag`: the checksum the object carries over (copies) or derives from its
    /// parts (multipart).
    pub(crate) known_checksum: Option<crate::Checksum>,
    /// Set by multipart completion: the part sizes, run-length encoded.
    pub(crate) known_parts: Vec<(u64, u32)>,
    strict: bool,
    metadata: MetadataMode,
}

impl PosixWriter {
    /// Installs the temporary file as `path`, honouring the write conditions.
    fn install(&mut self, path: &ObjectPath<'_>) -> StoreResult<()> {
        let parent = match path.parent() {
            None => rustix::fs::openat(
                &self.bucket_fd,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?,
            Some(parent) => match create_dirs_beneath(self.bucket_fd.as_fd(), &parent, self.strict) {
                Ok(fd) => fd,
                Err(Errno::NOTDIR | Errno::EXIST) => {
                    return Err(StoreError::ParentIsObject(path.key().to_string()));
                }
                Err(Errno::XDEV | Errno::LOOP) => {
                    return Err(StoreError::InvalidKey(format!(
                        "{:?}: a parent is a symlink leading out of the bucket",
                        path.key()
                    )));
                }
                Err(err) => return Err(err.into()),
            },
        };
        let exclusive = matches!(self.request.if_none_match, Some(ETagMatch::Any));
        let flags = if exclusive { RenameFlags::NOREPLACE } else { RenameFlags::empty() };
        match self.staged.rename_into(parent.as_fd(), path.leaf(), flags) {
            Ok(()) => {}
            Err(Errno::EXIST) if exclusive => return Err(StoreError::PreconditionFailed),
            Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
                return Err(StoreError::ObjectIsDirectory(path.key().to_string()));
            }
            Err(Errno::NOTDIR) => return Err(StoreError::ParentIsObject(path.key().to_string())),
            Err(err) => return Err(err.into()),
        }
        if self.strict {
            rustix::fs::fsync(&parent)?;
        }
        Ok(())
    }

    fn commit_dir_object(mut self, path: &ObjectPath<'_>) -> StoreResult<ObjectInfo> {
        if self.staged.written > 0 {
            return Err(StoreError::InvalidKey(format!(
                "{:?}: a key ending in '/' is a directory and cannot hold data",
                path.key()
            )));
        }
        let dir = match create_dirs_beneath(self.bucket_fd.as_fd(), &path.relative(), self.strict) {
            Ok(fd) => fd,
            Err(Errno::NOTDIR | Errno::EXIST) => {
                return Err(StoreError::ParentIsObject(path.key().to_string()));
            }
            Err(err) => return Err(err.into()),
        };
        let stat = rustix::fs::fstat(&dir)?;
        let record = MetaRecord {
            etag: EMPTY_ETAG.to_string(),
            identity: FileIdentity::of(&stat),
            checksum: self.staged.digests().checksum,
            parts: Vec::new(),
            meta: std::mem::take(&mut self.request.meta),
        };
        MetaStore { mode: self.metadata, bucket: self.bucket_fd.as_fd() }.save(dir.as_fd(), path.key(), &record)?;
        if self.strict {
            rustix::fs::fsync(&dir)?;
        }
        Ok(object_info(path.key(), &stat, record))
    }

    fn check_if_match(&self, path: &ObjectPath<'_>) -> StoreResult<()> {
        let Some(condition) = &self.request.if_match else {
            return Ok(());
        };
        let meta = MetaStore { mode: self.metadata, bucket: self.bucket_fd.as_fd() };
        match current_etag(&meta, path)? {
            Some(etag) if condition.matches(&etag) => Ok(()),
            // If-Match on a missing object fails, as in S3.
            _ => Err(StoreError::PreconditionFailed),
        }
    }
}

impl ObjectWrite for PosixWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        self.staged.write_all(bytes)
    }

    fn digests(&self) -> crate::Digests {
        if self.known_etag.is_some() {
            return crate::Digests { md5: None, checksum: self.known_checksum.clone() };
        }
        self.staged.digests()
    }

    fn commit(mut self) -> StoreResult<ObjectInfo> {
        let key = std::mem::take(&mut self.key);
        let path = ObjectPath::parse(&key)?;
        // If-Match is check-then-replace: writers that depend on the current ETag hold the
        // key's lock from the check to the rename, so of two racing ones only one can win.
        let _lock = match self.request.if_match {
            Some(_) => Some(KeyLock::acquire(self.bucket_fd.as_fd(), &key)?),
            None => None,
        };
        self.check_if_match(&path)?;
        if path.is_dir() {
            return self.commit_dir_object(&path);
        }
        let (etag, checksum) = match self.known_etag.take() {
            Some(etag) => (etag, self.known_checksum.take()),
            None => {
                let checksum = self.staged.digests().checksum;
                (self.staged.md5_hex(), checksum)
            }
        };
        let stat = rustix::fs::fstat(&self.staged.file)?;
        let record = MetaRecord {
            etag,
            identity: FileIdentity::of(&stat),
            checksum,
            parts: std::mem::take(&mut self.known_parts),
            meta: std::mem::take(&mut self.request.meta),
        };
        MetaStore { mode: self.metadata, bucket: self.bucket_fd.as_fd() }.save(
            self.staged.file.as_fd(),
            &key,
            &record,
        )?;
        if self.strict {
            rustix::fs::fsync(&self.staged.file)?;
        }
        self.install(&path)?;
        Ok(object_info(&key, &stat, record))
    }
}

/// An exclusive advisory lock (flock) on one of 256 lock files per bucket, chosen by a hash of
/// the key. It serialises conditional writers of a key across threads and processes (and
/// across hosts where the file system supports flock, such as NFSv4 or Lustre mounted with
/// `-o flock`). Released when dropped.
struct KeyLock {
    /// Held open for the lock's lifetime; closing it releases the flock.
    _file: OwnedFd,
}

impl KeyLock {
    fn acquire(bucket: BorrowedFd<'_>, key: &str) -> StoreResult<Self> {
        let stripe = crate::meta::key_hash(key)[..2].to_string();
        let dir = create_dirs_beneath(bucket, ".isthmus/locks", false)?;
        let fd = rustix::fs::openat(
            &dir,
            stripe.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        loop {
            match rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => return Ok(Self { _file: fd }),
                Err(Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
}

/// Reads an object's bytes from an offset, up to a limit.
pub struct PosixReader {
    file: File,
    offset: u64,
    remaining: u64,
}

impl Read for PosixReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = loop {
            match rustix::io::pread(&self.file, &mut buf[..want], self.offset) {
                Err(Errno::INTR) => continue,
                other => break other?,
            }
        };
        if n == 0 {
            // The file shrank under us (a POSIX writer truncated it).
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "object was truncated while being read"));
        }
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(n)
    }
}

impl ObjectRead for PosixReader {
    fn remaining(&self) -> u64 {
        self.remaining
    }
}

impl Store for PosixStore {
    type Reader = PosixReader;
    type Writer = PosixWriter;
    type PartWriter = crate::multipart::PosixPartWriter;

    fn list_buckets(&self) -> StoreResult<Vec<BucketInfo>> {
        let mut buckets = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.root_fd)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if validate_bucket_name(name).is_err() {
                continue;
            }
            // Follows a symlinked bucket; skips anything that is not a directory.
            let Ok(stat) = rustix::fs::statat(&self.root_fd, name, AtFlags::empty()) else {
                continue;
            };
            if !is_dir(&stat) {
                continue;
            }
            let created = rustix::fs::statx(&self.root_fd, name, AtFlags::empty(), rustix::fs::StatxFlags::BTIME)
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

    fn create_bucket(&self, bucket: &str) -> StoreResult<()> {
        validate_bucket_name(bucket)?;
        self.bucket_fds.remove(bucket);
        match rustix::fs::mkdirat(&self.root_fd, bucket, Mode::from_raw_mode(0o777)) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(StoreError::BucketAlreadyOwnedByYou),
            Err(err) => return Err(err.into()),
        }
        if self.strict() {
            rustix::fs::fsync(&self.root_fd)?;
        }
        Ok(())
    }

    fn head_bucket(&self, bucket: &str) -> StoreResult<()> {
        self.bucket_fd(bucket).map(drop)
    }

    fn delete_bucket(&self, bucket: &str) -> StoreResult<()> {
        let fd = self.bucket_fd(bucket)?;
        self.bucket_fds.remove(bucket);
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." && name != INTERNAL_DIR.as_bytes() {
                return Err(StoreError::BucketNotEmpty);
            }
        }
        // remove_dir_all does not follow symlinks.
        let bucket_path = self.root.join(bucket);
        match std::fs::remove_dir_all(bucket_path.join(INTERNAL_DIR)) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err.into()),
        }
        match rustix::fs::unlinkat(&self.root_fd, bucket, AtFlags::REMOVEDIR) {
            Ok(()) => {}
            Err(Errno::NOTEMPTY | Errno::EXIST) => return Err(StoreError::BucketNotEmpty),
            Err(Errno::NOTDIR) => {
                // A symlinked bucket: remove the link, keep what it points to.
                rustix::fs::unlinkat(&self.root_fd, bucket, AtFlags::empty())?;
            }
            Err(err) => return Err(err.into()),
        }
        if self.strict() {
            rustix::fs::fsync(&self.root_fd)?;
        }
        Ok(())
    }

    fn bucket_owner(&self, bucket: &str) -> StoreResult<Option<String>> {
        let bucket_fd = self.bucket_fd(bucket)?;
        let fd = match rustix::fs::openat(
            &bucket_fd,
            OWNER_FILE,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let mut owner = String::new();
        File::from(fd).read_to_string(&mut owner)?;
        Ok(Some(owner.trim().to_string()).filter(|o| !o.is_empty()))
    }

    fn set_bucket_owner(&self, bucket: &str, owner: &str) -> StoreResult<()> {
        let bucket_fd = self.bucket_fd(bucket)?;
        let dir = create_dirs_beneath(bucket_fd.as_fd(), INTERNAL_DIR, self.strict())?;
        let mut staged = StagedFile::create(dir.try_clone()?)?;
        staged.write_all(owner.as_bytes())?;
        if self.strict() {
            rustix::fs::fsync(&staged.file)?;
        }
        staged.rename_into(dir.as_fd(), "owner", RenameFlags::empty())?;
        if self.strict() {
            rustix::fs::fsync(&dir)?;
        }
        Ok(())
    }

    fn put_object(&self, bucket: &str, key: &str, request: PutRequest) -> StoreResult<PosixWriter> {
        self.new_writer(bucket, key, request)
    }

    fn get_object(&self, bucket: &str, key: &str, request: &GetRequest) -> StoreResult<GetResponse<PosixReader>> {
        let bucket_fd = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let (fd, _stat, info) = head(&self.meta_store(bucket_fd.as_fd()), &path)?;
        request.conditions.check(&info.etag, info.last_modified)?;
        let range = match (request.part_number, request.range) {
            (Some(_), Some(_)) => {
                return Err(StoreError::InvalidArgument(
                    "Cannot specify both Range header and partNumber query parameter".into(),
                ));
            }
            // Part 1 of an object written in one piece is the whole object.
            (Some(1), None) if info.parts.is_empty() => None,
            (Some(n), None) => Some(info.part_range(n).ok_or(StoreError::InvalidPartNumber)?),
            (None, Some(r)) => Some(r.resolve(info.size)?),
            (None, None) => None,
        };
        let (offset, remaining) = match range {
            None => (0, info.size),
            Some((first, last)) => (first, last - first + 1),
        };
        let file = File::from(fd);
        Ok(GetResponse { info, body: PosixReader { file, offset, remaining }, range })
    }

    fn head_object(&self, bucket: &str, key: &str, conditions: &Conditions) -> StoreResult<ObjectInfo> {
        let bucket_fd = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let (_, _, info) = head(&self.meta_store(bucket_fd.as_fd()), &path)?;
        conditions.check(&info.etag, info.last_modified)?;
        Ok(info)
    }

    fn delete_object(&self, bucket: &str, key: &str) -> StoreResult<()> {
        let bucket_fd = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key)?;
        let parent = match path.parent() {
            None => open_dir_beneath(bucket_fd.as_fd(), "."),
            Some(parent) => open_dir_beneath(bucket_fd.as_fd(), &parent),
        };
        let parent = match parent {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::XDEV | Errno::LOOP) => return Ok(()),
            Err(err) => return Err(err.into()),
        };
        let meta = self.meta_store(bucket_fd.as_fd());
        if path.is_dir() {
            match rustix::fs::unlinkat(&parent, path.leaf(), AtFlags::REMOVEDIR) {
                Ok(()) => {}
                Err(Errno::NOTEMPTY | Errno::EXIST) => {
                    // Still holds objects: it stops being a directory object, its children stay.
                    if let Ok(dir) = open_dir_beneath(bucket_fd.as_fd(), &path.relative()) {
                        let _ = rustix::fs::fremovexattr(&dir, crate::meta::XATTR_NAME);
                    }
                }
                Err(Errno::NOENT | Errno::NOTDIR) => return Ok(()),
                Err(err) => return Err(err.into()),
            }
        } else {
            match rustix::fs::unlinkat(&parent, path.leaf(), AtFlags::empty()) {
                Ok(()) => {}
                // A directory is not the object `key` (that would be `key/`): nothing to delete.
                Err(Errno::NOENT | Errno::ISDIR | Errno::PERM) if !matches!(rustix::fs::statat(&parent, path.leaf(), AtFlags::SYMLINK_NOFOLLOW), Ok(ref s) if is_file(s)) =>
                {
                    return Ok(());
                }
                Err(err) => return Err(err.into()),
            }
        }
        meta.remove_sidecar(key);
        if self.strict() {
            rustix::fs::fsync(&parent)?;
        }
        drop(parent);
        self.prune_empty_parents(bucket_fd.as_fd(), &path);
        Ok(())
    }

    fn copy_object(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        let src_bucket_fd = self.bucket_fd(src_bucket)?;
        let src_path = ObjectPath::parse(src_key).map_err(|_| StoreError::NoSuchKey)?;
        let (src_fd, src_stat, src_info) = head(&self.meta_store(src_bucket_fd.as_fd()), &src_path)?;
        request.source_conditions.check(&src_info.etag, src_info.last_modified).map_err(|e| match e {
            StoreError::NotModified => StoreError::PreconditionFailed,
            other => other,
        })?;
        let mut meta = request.replace_meta.clone().unwrap_or_else(|| src_info.meta.clone());
        meta.tags = request.replace_tags.clone().unwrap_or_else(|| src_info.meta.tags.clone());
        let mut writer = self.new_writer(dst_bucket, dst_key, PutRequest { meta, ..PutRequest::default() })?;
        if !src_path.is_dir() {
            copy_file_contents(src_fd.as_fd(), writer.staged.file.as_fd(), 0, src_info.size)?;
            if FileIdentity::of(&rustix::fs::fstat(&src_fd)?) != FileIdentity::of(&src_stat) {
                return Err(StoreError::SourceChanged);
            }
        }
        writer.staged.written = src_info.size;
        writer.known_etag = Some(src_info.etag);
        writer.known_checksum = src_info.checksum;
        writer.commit()
    }

    fn set_object_tags(
        &self,
        bucket: &str,
        key: &str,
        tags: std::collections::BTreeMap<String, String>,
    ) -> StoreResult<()> {
        crate::meta::validate_tags(&tags)?;
        let bucket_fd = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let meta = self.meta_store(bucket_fd.as_fd());
        let (fd, stat) = open_object(bucket_fd.as_fd(), &path)?;
        let mut record = current_record(&meta, fd.as_fd(), key, &stat)?;
        record.meta.tags = tags;
        meta.save(fd.as_fd(), key, &record)?;
        if self.strict() {
            rustix::fs::fsync(&fd)?;
        }
        Ok(())
    }

    fn create_multipart_upload(&self, bucket: &str, key: &str, request: PutRequest) -> StoreResult<String> {
        self.create_upload(bucket, key, request)
    }

    fn upload_part(&self, bucket: &str, key: &str, upload_id: &str, part_number: u32) -> StoreResult<Self::PartWriter> {
        self.part_writer(bucket, key, upload_id, part_number)
    }

    fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[crate::CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        self.complete_upload(bucket, key, upload_id, parts, request)
    }

    fn abort_multipart_upload(&self, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        self.abort_upload(bucket, key, upload_id)
    }

    fn list_parts(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        after_part: u32,
        max_parts: usize,
    ) -> StoreResult<crate::PartsPage> {
        self.parts_of(bucket, key, upload_id, after_part, max_parts)
    }

    fn list_multipart_uploads(
        &self,
        bucket: &str,
        request: &crate::ListUploadsRequest,
    ) -> StoreResult<crate::UploadsPage> {
        self.uploads_of(bucket, request)
    }

    fn list_objects(&self, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        let bucket_fd = self.bucket_fd(bucket)?;
        crate::list::list_objects(self, bucket_fd.as_fd(), &self.list_cache, request)
    }
}

/// Copies the first `len` bytes of `src` to `dst` at `dst_start` with copy_file_range
/// (reflinks or server-side copies where the file system offers them), falling back to
/// pread/pwrite. A source shorter than `len` is reported as changed.
pub(crate) fn copy_file_contents(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    dst_start: u64,
    len: u64,
) -> StoreResult<()> {
    let mut src_off = 0u64;
    let mut dst_off = dst_start;
    let mut kernel_copy = true;
    let mut buf = Vec::new();
    while src_off < len {
        let chunk = usize::try_from(len - src_off).unwrap_or(usize::MAX).min(1 << 30);
        if kernel_copy {
            match rustix::fs::copy_file_range(src, Some(&mut src_off), dst, Some(&mut dst_off), chunk) {
                Ok(0) => return Err(StoreError::SourceChanged),
                Ok(_) | Err(Errno::INTR) => {}
                Err(Errno::XDEV | Errno::NOSYS | Errno::OPNOTSUPP | Errno::INVAL) => kernel_copy = false,
                Err(err) => return Err(err.into()),
            }
            continue;
        }
        buf.resize(IO_CHUNK, 0);
        let want = chunk.min(IO_CHUNK);
        let n = rustix::io::pread(src, &mut buf[..want], src_off)?;
        if n == 0 {
            return Err(StoreError::SourceChanged);
        }
        let mut done = 0;
        while done < n {
            done += rustix::io::pwrite(dst, &buf[done..n], dst_off + done as u64)?;
        }
        src_off += n as u64;
        dst_off += n as u64;
    }
    Ok(())
}
