//! `PosixStore`: the engine over a plain directory. Bucket = top-level directory, key = relative
//! path, object bytes = the file's bytes, metadata in one xattr (or a sidecar, `meta`). This
//! file holds the store itself, its open buckets and its `Store`, `MultipartStore` and
//! `ObjectFiles` implementations; each concern has its file. `resolve` (opening beneath a
//! directory) and `writer_names` (unique internal names) are what the erasure backend, whose
//! drives are posix stores, uses of it too.

mod bucket_records;
mod buckets;
mod completed;
pub(crate) mod current;
mod derived;
mod file_ops;
mod head_cache;
pub(crate) mod list;
mod locks;
pub mod meta;
pub mod meta_codec;
pub mod multipart;
mod options;
mod overflow;
pub mod part_rules;
pub(crate) mod read;
mod record;
pub(crate) mod recovery;
pub mod resolve;
pub(crate) mod staging;
pub mod upload_list;
mod version_list;
mod versions;
mod write;
pub mod writer_names;

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

pub use list::KeyPage;
pub use options::{DEFAULT_ETAG_MD5_LIMIT, StoreOptions};
pub use read::PosixReader;
pub use write::PosixWriter;

use crate::meta::MetaStore;
use crate::resolve::create_dirs_beneath;
use isthmus_store::MetadataMode;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::{INTERNAL_DIR, validate_bucket_name};
use isthmus_store::seal_key::SealKey;
use isthmus_store::state_dir::StateDir;
use isthmus_store::{
    BoxedWriter, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteRequest, Durability, FileSystemKind,
    GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest, MultipartStore, ObjectChange,
    ObjectFiles, ObjectInfo, PartRequest, PutRequest, RequestContext, Store, UpdateFile,
};
use list::DirCache;

/// The engine over a directory on a POSIX file system.
pub struct PosixStore {
    root: PathBuf,
    root_fd: Arc<OwnedFd>,
    /// The gateway's state directory (`ROOT/.isthmus`), opened and checked once.
    state: StateDir,
    /// Seals the object ACLs this store records (`meta`); `None` where this process may not
    /// read the key (an in-process door as another user).
    seal: Option<SealKey>,
    options: StoreOptions,
    /// The metadata mode of the data root's file system (auto resolved by probing).
    metadata: MetadataMode,
    /// Metadata modes probed per file system (device number): a bucket that is a symlink to
    /// another file system gets the mode that file system supports.
    probed_modes: quick_cache::sync::Cache<u64, MetadataMode>,
    list_cache: DirCache,
    /// Recently opened bucket directories (see `bucket_fd`).
    bucket_fds: quick_cache::sync::Cache<String, OpenBucket>,
    /// Counts the settings writes this store attempted: an open bucket whose settings were read
    /// before the latest one is opened again (a reader that read just before a write may put
    /// its entry back after the write removed the old one).
    settings_writes: std::sync::atomic::AtomicU64,
    /// Descriptions of unchanged objects (see `head_cache`).
    heads: Arc<head_cache::HeadCache>,
}

/// An open bucket directory and what was learned of it when it was opened.
#[derive(Clone)]
pub(crate) struct OpenBucket {
    pub(crate) name: Arc<str>,
    pub(crate) fd: Arc<OwnedFd>,
    /// Where this bucket keeps metadata (auto resolved for the bucket's own file system).
    pub(crate) metadata: MetadataMode,
    /// The bucket's versioning state when it was opened (`None`: never versioned).
    pub(crate) versioning: Option<isthmus_store::Versioning>,
    /// The bucket's settings when it was opened, with their version (authorization asks for
    /// them on most calls, so they are not read from the file system each time).
    pub(crate) config: Arc<isthmus_store::BucketConfig>,
    /// `PosixStore::settings_writes` when the settings were read.
    settings_read_at: u64,
    opened: Instant,
    /// Whether the bucket has records too large for their attributes (`overflow`).
    pub(crate) overflow: Arc<overflow::Overflow>,
}

/// How long an open bucket directory is reused.
const BUCKET_FD_TTL: Duration = Duration::from_secs(1);

pub(crate) const TMP_DIR: &str = ".isthmus/tmp";
/// Where DeleteBucket moves a bucket directory before removing it (in the data root's state
/// directory, so the move is one atomic rename on the same file system).
pub(crate) const TRASH_DIR: &str = "trash";
pub(crate) const IO_CHUNK: usize = 1 << 20;

pub(crate) fn system_time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs())
    }
}

pub(crate) fn modified(stat: &rustix::fs::Stat) -> SystemTime {
    system_time(stat.st_mtime, stat.st_mtime_nsec as i64)
}

pub(crate) fn is_dir(stat: &rustix::fs::Stat) -> bool {
    rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory
}

pub(crate) fn is_file(stat: &rustix::fs::Stat) -> bool {
    rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile
}

impl PosixStore {
    /// Opens (and creates if needed) the data root.
    pub fn open(root: impl AsRef<Path>, options: StoreOptions) -> StoreResult<Self> {
        let root = root.as_ref().to_path_buf();
        std::fs::create_dir_all(&root).map_err(|e| StoreError::io("create the data root", &root, e))?;
        let root_fd = rustix::fs::open(&root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| StoreError::io("open the data root", &root, e.into()))?;
        let state = StateDir::open(root_fd.as_fd(), &root, options.state_trust)?;
        let seal = SealKey::load_or_create(&state)?;
        let metadata = match options.metadata {
            MetadataMode::Auto => buckets::probe_xattr_support(root_fd.as_fd()),
            explicit => explicit,
        };
        let probed_modes = quick_cache::sync::Cache::new(64);
        if let Ok(stat) = rustix::fs::fstat(&root_fd) {
            probed_modes.insert(stat.st_dev, metadata);
        }
        Ok(Self {
            root,
            root_fd: Arc::new(root_fd),
            state,
            seal,
            options,
            metadata,
            probed_modes,
            list_cache: DirCache::new(options.list_cache_entries),
            bucket_fds: quick_cache::sync::Cache::new(1024),
            settings_writes: Default::default(),
            heads: Arc::new(head_cache::HeadCache::new(options.head_cache_entries)),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root's hidden directory for internal state (credentials, probes): its path, for
    /// messages and for state no authorization reads (see `state_dir` for the rest).
    pub fn internal_dir(&self) -> PathBuf {
        self.root.join(INTERNAL_DIR)
    }

    /// The gateway's state directory, opened and checked once: where everything the gateway
    /// believes about users, keys and buckets is read.
    pub fn state_dir(&self) -> &StateDir {
        &self.state
    }

    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The kind of file system under the data root, from its statfs magic number.
    pub fn filesystem(&self) -> FileSystemKind {
        FileSystemKind::of(self.root_fd.as_fd())
    }

    /// The metadata mode of the data root's file system, after probing.
    pub fn metadata_mode(&self) -> MetadataMode {
        self.metadata
    }

    pub(crate) fn strict(&self) -> bool {
        self.options.durability == Durability::Strict
    }

    /// Opens a bucket directory. A bucket may be a symlink placed by the administrator (for
    /// example to a project directory on another file system); keys never leave the directory
    /// it resolves to, and its metadata mode is the one its own file system supports.
    ///
    /// Open bucket directories are kept for `BUCKET_FD_TTL`, which saves a path lookup on every
    /// call. A kept directory is used only while it still has a name (a bucket directory that
    /// POSIX tools removed and re-created is opened again at once); one renamed away and
    /// replaced is seen within the TTL.
    /// A page of `bucket`'s listing by names alone (`KeyPage`), as the gateway's identity
    /// reads it.
    pub fn list_keys(&self, bucket: &str, request: &ListRequest) -> StoreResult<KeyPage> {
        let open = self.bucket_fd(bucket)?;
        list::list_keys(self.meta_store(&open, &RequestContext::process()), &self.list_cache, request)
    }

    pub(crate) fn bucket_fd(&self, bucket: &str) -> StoreResult<OpenBucket> {
        if let Some(open) = self.recent_bucket(bucket)
            && rustix::fs::fstat(&*open.fd).is_ok_and(|stat| stat.st_nlink > 0)
        {
            return Ok(open);
        }
        if validate_bucket_name(bucket).is_err() {
            return Err(StoreError::NoSuchBucket);
        }
        // Opened (and cached for every user) with the gateway's identity: the descriptor only
        // names the directory; every lookup through it is checked for the calling thread's
        // identity, and listings open the directory again to read it.
        isthmus_store::identity::as_gateway(|| self.open_bucket(bucket))
    }

    /// The bucket as opened within the TTL, without asking whether its directory still has a
    /// name (`bucket_fd` asks): for a lookup beneath it that fails by itself in a removed
    /// directory, such as a kept description's `statx`, where the question would be a second
    /// system call.
    pub(crate) fn recent_bucket(&self, bucket: &str) -> Option<OpenBucket> {
        self.bucket_fds.get(bucket).filter(|open| {
            open.opened.elapsed() < BUCKET_FD_TTL
                && open.settings_read_at == self.settings_writes.load(std::sync::atomic::Ordering::Acquire)
        })
    }

    /// The bucket directory `bucket` (a symlink placed by the administrator is followed).
    fn open_bucket_dir(&self, bucket: &str) -> StoreResult<OwnedFd> {
        match rustix::fs::openat(
            &*self.root_fd,
            bucket,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(fd),
            Err(Errno::NOENT | Errno::NOTDIR) => Err(StoreError::NoSuchBucket),
            Err(err) => Err(StoreError::io_at("open the bucket directory", bucket, err)),
        }
    }

    fn open_bucket(&self, bucket: &str) -> StoreResult<OpenBucket> {
        let fd = self.open_bucket_dir(bucket)?;
        let metadata = self.metadata_mode_of(fd.as_fd());
        let settings_read_at = self.settings_writes.load(std::sync::atomic::Ordering::Acquire);
        let config = bucket_records::read(&self.state, bucket, fd.as_fd())?.versioned();
        let overflow = Arc::new(overflow::Overflow::of(fd.as_fd()));
        let open = OpenBucket {
            name: bucket.into(),
            fd: Arc::new(fd),
            metadata,
            versioning: config.versioning,
            config: Arc::new(config),
            settings_read_at,
            opened: Instant::now(),
            overflow,
        };
        self.bucket_fds.insert(bucket.to_string(), open.clone());
        Ok(open)
    }

    /// The metadata mode for a bucket directory: the configured one, or in auto mode the one
    /// probed (once per file system) in the bucket's internal directory.
    fn metadata_mode_of(&self, bucket: std::os::fd::BorrowedFd<'_>) -> MetadataMode {
        if self.options.metadata != MetadataMode::Auto {
            return self.options.metadata;
        }
        let Ok(stat) = rustix::fs::fstat(bucket) else { return self.metadata };
        if let Some(mode) = self.probed_modes.get(&stat.st_dev) {
            return mode;
        }
        let mode = match create_dirs_beneath(bucket, INTERNAL_DIR, false) {
            Ok(_) => buckets::probe_xattr_support(bucket),
            Err(err) => {
                tracing::warn!(error = %err, "cannot probe a bucket's file system for xattrs; using the root's mode");
                return self.metadata;
            }
        };
        self.probed_modes.insert(stat.st_dev, mode);
        mode
    }

    /// How metadata records of `bucket` are read and written for a request in `cx`.
    pub(crate) fn meta_store<'a>(&'a self, bucket: &'a OpenBucket, cx: &RequestContext) -> MetaStore<'a> {
        MetaStore {
            mode: bucket.metadata,
            bucket: bucket.fd.as_fd(),
            etag_md5_limit: self.options.etag_md5_limit,
            may_block: cx.may_block,
            seal: self.seal.as_ref(),
            overflow: &bucket.overflow,
        }
    }
}

impl Store for PosixStore {
    fn list_buckets(&self, _cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        self.bucket_list()
    }

    fn create_bucket(&self, _cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        self.make_bucket(bucket, request)
    }

    fn head_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        let open = self.bucket_fd(bucket)?;
        if buckets::may_enter(open.fd.as_fd()) { Ok(()) } else { Err(StoreError::AccessDenied) }
    }

    fn bucket_facts(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        let open = self.bucket_fd(bucket)?;
        Ok(BucketFacts {
            filesystem: FileSystemKind::of(open.fd.as_fd()),
            metadata: open.metadata,
            durability: self.options.durability,
            access: isthmus_store::AccessJudge::Kernel,
            pool: None,
        })
    }

    fn delete_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.remove_bucket(bucket)
    }

    fn bucket_config(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<isthmus_store::BucketConfig> {
        self.config_of(bucket)
    }

    fn set_bucket_config(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        config: &isthmus_store::BucketConfig,
    ) -> StoreResult<()> {
        self.record_config(bucket, config)
    }

    fn put_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        Ok(Box::new(self.new_writer(bucket, key, request)?))
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        self.read_object(cx, bucket, key, request)
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        self.describe_object(cx, bucket, key, request)
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<isthmus_store::DeleteOutcome> {
        let open = self.bucket_fd(bucket)?;
        if request.version_id.is_none() && open.versioning.is_none() {
            self.remove_object(cx, &open, key)?;
            return Ok(isthmus_store::DeleteOutcome::default());
        }
        self.delete_versioned(cx, &open, key, request.version_id.as_deref())
    }

    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        self.copy(cx, source, destination, request)
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        let open = self.bucket_fd(bucket)?;
        list::list_objects(self.meta_store(&open, cx), &self.list_cache, request)
    }

    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &isthmus_store::ListVersionsRequest,
    ) -> StoreResult<isthmus_store::VersionsPage> {
        let open = self.bucket_fd(bucket)?;
        version_list::list_versions(self.meta_store(&open, cx), &self.list_cache, request)
    }

    fn update_object(&self, cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()> {
        self.change_object(cx, bucket, key, change)
    }

    fn files(&self) -> Option<&dyn ObjectFiles> {
        Some(self)
    }
}

impl MultipartStore for PosixStore {
    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.create_upload(bucket, key, request, cx.user_name().map(str::to_string))
    }

    fn upload_part(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        Ok(Box::new(self.part_writer(bucket, key, upload_id, request)?))
    }

    fn complete_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[isthmus_store::CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        self.complete_upload(bucket, key, upload_id, parts, request)
    }

    fn abort_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> StoreResult<()> {
        self.abort_upload(bucket, key, upload_id)
    }

    fn list_parts(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<isthmus_store::PartsPage> {
        self.parts_of(bucket, key, upload_id, request.after_part, request.max_parts)
    }

    fn list_multipart_uploads(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        request: &isthmus_store::ListUploadsRequest,
    ) -> StoreResult<isthmus_store::UploadsPage> {
        self.uploads_of(bucket, request)
    }
}

impl ObjectFiles for PosixStore {
    fn object_file(&self, _cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        self.file_of(bucket, key)
    }

    fn object_file_for_update(&self, _cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>> {
        self.file_for_update(bucket, key)
    }

    fn read_derived(&self, _cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        self.derived_record(bucket, key, kind)
    }

    fn write_derived(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        kind: &str,
        bytes: &[u8],
    ) -> StoreResult<()> {
        self.keep_derived_record(bucket, key, kind, bytes)
    }
}
