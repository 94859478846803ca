//! The drives of an erasure-coded pool: each drive directory with its metadata namespace (a
//! `PosixStore` holding the buckets and one manifest file per object), its state (online,
//! rebuilding after replacement, offline), its latency, and the I/O threads that read and write
//! shards of many drives in parallel.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, mpsc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::latency::Latency;
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::error::{StoreError, StoreResult};

const FORMAT_FILE: &str = ".isthmus/ec/drive.json";
/// Shard files: `data/<bucket>/<data id>`.
pub(crate) const DATA_DIR: &str = ".isthmus/ec/data";
/// Multipart uploads: `uploads/<bucket>/<upload id>/{upload.json, part.NNNNN.json}`.
pub(crate) const UPLOADS_DIR: &str = ".isthmus/ec/uploads";
const LOCKS_DIR: &str = ".isthmus/ec/locks";
/// How long a drive's state is trusted before it is looked at again.
const RECHECK: Duration = Duration::from_secs(1);
/// Striped key locks: a key's writers serialize on one of these files.
const LOCK_STRIPES: u64 = 1024;

/// What every drive of a pool records about itself, so a drive is never taken for another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DriveFormat {
    pool: String,
    index: usize,
    drives: usize,
    /// The drive was found empty (replaced) and `isthmus heal` has not yet rebuilt it.
    #[serde(default)]
    rebuilding: bool,
}

/// What a drive of a pool is doing, as `isthmus pool status`, the console and the metrics
/// show it. Only `Online` serves reads and writes; a drive in any other state is never taken
/// for another and never written as if it were its slot's drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriveState {
    /// Formatted into its slot: serves reads and takes writes.
    Online,
    /// A replaced (blank) drive formatted into its slot: takes writes, serves no reads until
    /// the healer has rebuilt it.
    Rebuilding,
    /// Serves reads, takes no writes (its file system answered EROFS: remounted read-only).
    ReadOnly,
    /// Missing, unreachable or failing.
    Offline,
    /// Present but carrying no format and not accepted as a replacement (an unmounted mount
    /// point: an empty directory on the parent's disk): never written.
    Unformatted,
    /// Carries another pool's or another slot's format (a drive moved between slots or
    /// pools): never written until the operator formats it into this slot.
    Foreign,
}

impl DriveState {
    /// The state's name in status output and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Rebuilding => "healing",
            Self::ReadOnly => "read-only",
            Self::Offline => "offline",
            Self::Unformatted => "unformatted",
            Self::Foreign => "foreign",
        }
    }
}

const ONLINE: u8 = 0;
const REBUILDING: u8 = 1;
const OFFLINE: u8 = 2;

/// One drive directory of the pool.
pub(crate) struct Drive {
    pub(crate) index: usize,
    pub(crate) path: PathBuf,
    pool: String,
    drives: usize,
    options: StoreOptions,
    store: RwLock<Option<Arc<PosixStore>>>,
    state: AtomicU8,
    checked: Mutex<Option<Instant>>,
    pub(crate) latency: Latency,
    pub(crate) errors: AtomicU64,
    /// A delay added to every I/O (`ISTHMUS_EC_SLOW_DRIVES`, for fault tests).
    delay: Option<Duration>,
    /// Since when the drive has been judged slow without a break, and when it was last
    /// reported slow in the log.
    slow_since: Mutex<Option<Instant>>,
    reported_slow: Mutex<Option<Instant>>,
    /// The drive's own I/O threads for shard reads and writes: a slow drive queues its own
    /// jobs and holds no thread another drive's shards need.
    pub(crate) lane: IoPool,
}

/// The smallest I/O size latencies are reckoned by: below it an I/O's fixed cost dominates.
const LATENCY_FLOOR: usize = 256 << 10;

/// How long a drive must stay much slower than its peers before the log says so.
const SUSTAINED_SLOW: Duration = Duration::from_secs(2);

/// I/O threads per drive: two, so one shard's write overlaps the next one's on each drive.
const LANE_THREADS: usize = 2;

impl Drive {
    pub(crate) fn new(index: usize, path: PathBuf, pool: &str, drives: usize, options: StoreOptions) -> Self {
        let delay = injected_delay(&path);
        Self {
            index,
            path,
            pool: pool.to_string(),
            drives,
            options,
            store: RwLock::new(None),
            state: AtomicU8::new(OFFLINE),
            checked: Mutex::new(None),
            latency: Latency::default(),
            errors: AtomicU64::new(0),
            delay,
            slow_since: Mutex::new(None),
            reported_slow: Mutex::new(None),
            lane: IoPool::named(LANE_THREADS, &format!("isthmus-ec-d{index}")),
        }
    }

    fn format(&self, rebuilding: bool) -> DriveFormat {
        DriveFormat { pool: self.pool.clone(), index: self.index, drives: self.drives, rebuilding }
    }

    /// Whether the drive carries this pool's format (false: empty or missing).
    pub(crate) fn is_formatted(&self) -> StoreResult<bool> {
        match std::fs::read(self.path.join(FORMAT_FILE)) {
            Ok(bytes) => {
                let found: DriveFormat = serde_json::from_slice(&bytes).map_err(|e| {
                    StoreError::InvalidArgument(format!("{}: unreadable drive format: {e}", self.path.display()))
                })?;
                if found.pool != self.pool || found.index != self.index || found.drives != self.drives {
                    return Err(StoreError::InvalidArgument(format!(
                        "{} is drive {} of {} of pool {:?}, not drive {} of {} of pool {:?}: check the pool's drive list",
                        self.path.display(),
                        found.index,
                        found.drives,
                        found.pool,
                        self.index,
                        self.drives,
                        self.pool
                    )));
                }
                Ok(true)
            }
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(false),
            Err(err) => Err(StoreError::io("read the drive format", &self.path, err)),
        }
    }

    /// Writes the drive's format (creating the directory's internal area).
    pub(crate) fn write_format(&self, rebuilding: bool) -> StoreResult<()> {
        let path = self.path.join(FORMAT_FILE);
        let dir = path.parent().expect("the format file has a parent");
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create the pool's area", dir, e))?;
        let bytes = serde_json::to_vec_pretty(&self.format(rebuilding)).expect("the format serializes");
        write_atomically(&path, &bytes, true)
    }

    /// Looks at the drive again (at most once per `RECHECK` unless `force`): online when it
    /// carries the pool's format; an existing empty directory is a replaced drive, formatted
    /// as rebuilding; a missing one is offline.
    pub(crate) fn refresh(&self, force: bool) {
        {
            let mut checked = self.checked.lock().expect("drive check lock");
            if !force && checked.is_some_and(|at| at.elapsed() < RECHECK) {
                return;
            }
            *checked = Some(Instant::now());
        }
        let state = match self.look() {
            Ok(state) => state,
            Err(err) => {
                tracing::warn!(drive = %self.path.display(), error = %err, "erasure drive unusable");
                OFFLINE
            }
        };
        if state == OFFLINE {
            *self.store.write().expect("drive store lock") = None;
        }
        let before = self.state.swap(state, Ordering::Relaxed);
        if before != state {
            tracing::info!(pool = %self.pool, drive = %self.path.display(), state = ?self.state(), "erasure drive state");
        }
    }

    fn look(&self) -> StoreResult<u8> {
        if !self.path.is_dir() {
            return Ok(OFFLINE);
        }
        if !self.is_formatted()? {
            self.write_format(true)?;
        }
        let format: DriveFormat = serde_json::from_slice(
            &std::fs::read(self.path.join(FORMAT_FILE))
                .map_err(|e| StoreError::io("read the drive format", &self.path, e))?,
        )
        .map_err(|e| StoreError::InvalidArgument(format!("{}: {e}", self.path.display())))?;
        if self.store.read().expect("drive store lock").is_none() {
            let options =
                StoreOptions { list_cache_entries: self.options.list_cache_entries.min(200_000), ..self.options };
            let store = PosixStore::open(&self.path, options)?;
            *self.store.write().expect("drive store lock") = Some(Arc::new(store));
        }
        Ok(if format.rebuilding { REBUILDING } else { ONLINE })
    }

    pub(crate) fn state(&self) -> DriveState {
        self.refresh(false);
        match self.state.load(Ordering::Relaxed) {
            ONLINE => DriveState::Online,
            REBUILDING => DriveState::Rebuilding,
            _ => DriveState::Offline,
        }
    }

    /// The drive's metadata store, if the drive takes writes (online or rebuilding).
    pub(crate) fn writable(&self) -> Option<Arc<PosixStore>> {
        match self.state() {
            DriveState::Offline => None,
            _ => self.store.read().expect("drive store lock").clone(),
        }
    }

    /// The drive's metadata store, if the drive serves reads (online).
    pub(crate) fn readable(&self) -> Option<Arc<PosixStore>> {
        match self.state() {
            DriveState::Online => self.store.read().expect("drive store lock").clone(),
            _ => None,
        }
    }

    /// An I/O on this drive failed: count it and look at the drive again on next use.
    pub(crate) fn failed(&self, what: &str, err: &dyn std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(pool = %self.pool, drive = %self.path.display(), error = %err, "erasure drive failed to {what}");
        *self.checked.lock().expect("drive check lock") = None;
    }

    /// Runs one I/O on the drive (with the injected delay, if any), not counted in its latency
    /// but in what it has under way (`Latency::stalled`).
    pub(crate) fn timed<T>(&self, io: impl FnOnce() -> T) -> T {
        let _running = self.latency.begin();
        if let Some(delay) = self.delay {
            std::thread::sleep(delay);
        }
        io()
    }

    /// Runs one shard read or write of `bytes` on the drive and counts its time in the drive's
    /// latency, per MiB (I/Os under `LATENCY_FLOOR` count as that much): drives compare on the
    /// speed of their bytes, not on which happened to serve the larger shards.
    pub(crate) fn timed_io<T>(&self, bytes: usize, io: impl FnOnce() -> T) -> T {
        self.timed_io_since(Instant::now(), bytes, io)
    }

    /// As `timed_io`, with the wait counted from `asked` (when the I/O was queued on the
    /// drive's lane): what a reader waits, queue included, so hedging compares a late answer
    /// with typical answers, not with typical service times; the service time (from the I/O's
    /// start) judges the drive slow or not.
    pub(crate) fn timed_io_since<T>(&self, asked: Instant, bytes: usize, io: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = self.timed(io);
        let per_mib = |took: Duration| took.mul_f64(f64::from(1 << 20) / bytes.max(LATENCY_FLOOR) as f64);
        self.latency.record(per_mib(started.elapsed()), per_mib(asked.elapsed()));
        out
    }

    /// Notes a judgment of whether this drive is much slower than its peers (mean `mean_us`
    /// per MiB against their median `peers_us`). Reads go around a slow drive at once; the log
    /// says so (at most once a minute) only once the drive has been slow without a break for
    /// `SUSTAINED_SLOW`: under many streams a busy healthy drive is slow for a moment now and
    /// then (its queue), which is no news to an operator.
    pub(crate) fn judged_slow(&self, slow: bool, mean_us: u64, peers_us: u64) {
        let since = {
            let mut since = self.slow_since.lock().expect("slow judgment lock");
            match (slow, *since) {
                (false, _) => {
                    *since = None;
                    return;
                }
                (true, None) => {
                    *since = Some(Instant::now());
                    return;
                }
                (true, Some(at)) => at,
            }
        };
        if since.elapsed() < SUSTAINED_SLOW {
            return;
        }
        let mut reported = self.reported_slow.lock().expect("slow report lock");
        if reported.is_some_and(|at| at.elapsed() < Duration::from_secs(60)) {
            return;
        }
        *reported = Some(Instant::now());
        tracing::warn!(
            pool = %self.pool,
            drive = %self.path.display(),
            mean_ms = mean_us as f64 / 1000.0,
            peers_ms = peers_us as f64 / 1000.0,
            slow_for_s = since.elapsed().as_secs_f64(),
            "erasure drive is much slower than its peers: reads go around it (see `isthmus pool status`)"
        );
    }

    pub(crate) fn data_file(&self, bucket: &str, data_id: &str) -> PathBuf {
        self.path.join(DATA_DIR).join(bucket).join(data_id)
    }

    /// Opens a shard file for reading.
    pub(crate) fn open_shard(&self, bucket: &str, data_id: &str) -> std::io::Result<File> {
        File::open(self.data_file(bucket, data_id))
    }

    /// Creates a shard file for writing (its bucket's directory as needed).
    pub(crate) fn create_shard(&self, bucket: &str, data_id: &str) -> std::io::Result<File> {
        if self.state() == DriveState::Offline {
            return Err(std::io::Error::new(ErrorKind::NotFound, "the drive is offline"));
        }
        let path = self.data_file(bucket, data_id);
        let create = || std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
        match create() {
            Err(err) if err.kind() == ErrorKind::NotFound => {
                std::fs::create_dir_all(path.parent().expect("a shard file has a parent"))?;
                create()
            }
            other => other,
        }
    }

    /// Removes a replaced or deleted object's shard file. Reads under way hold their shard
    /// files open and finish with the old bytes (see `read::EcReader`).
    pub(crate) fn discard_shard(&self, bucket: &str, data_id: &str) {
        if let Err(err) = std::fs::remove_file(self.data_file(bucket, data_id))
            && err.kind() != ErrorKind::NotFound
        {
            tracing::debug!(drive = %self.path.display(), data_id, error = %err, "shard not removed");
        }
    }

    /// Takes the lock of `bucket/name` of `kind` (a stripe of `LOCK_STRIPES` files per kind on
    /// this drive): every gateway serving the pool serializes on it. Kinds keep locks taken
    /// one inside the other (an upload's, then its key's) on different files.
    pub(crate) fn lock(&self, kind: LockKind, bucket: &str, name: &str) -> StoreResult<KeyLock> {
        let stripe =
            crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, format!("{bucket}/{name}").as_bytes()) % LOCK_STRIPES;
        let dir = self.path.join(LOCKS_DIR);
        let prefix = match kind {
            LockKind::Key => "k",
            LockKind::Upload => "u",
        };
        let path = dir.join(format!("{prefix}{stripe:04}"));
        let open = || std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
        let file = match open() {
            Err(err) if err.kind() == ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create the lock directory", &dir, e))?;
                open()
            }
            other => other,
        }
        .map_err(|e| StoreError::io("open a key lock", &path, e))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| StoreError::io("take a key lock", &path, e.into()))?;
        Ok(KeyLock { _file: file })
    }
}

/// What a lock serializes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockKind {
    /// Commits of an object.
    Key,
    /// Parts, completion and abort of a multipart upload.
    Upload,
}

/// A held lock (released when dropped: the file is closed).
pub(crate) struct KeyLock {
    _file: File,
}

/// The delay `ISTHMUS_EC_SLOW_DRIVES` (`PATH=MS,...`) injects into a drive's I/O: a test aid
/// standing in for a failing disk, named in docs/operator/pools.md.
fn injected_delay(path: &Path) -> Option<Duration> {
    let spec = std::env::var("ISTHMUS_EC_SLOW_DRIVES").ok()?;
    spec.split(',').find_map(|entry| {
        let (drive, ms) = entry.rsplit_once('=')?;
        (Path::new(drive) == path).then(|| ms.parse().ok().map(Duration::from_millis))?
    })
}

/// Writes a small file atomically (temporary name, optional fsync, rename).
pub fn write_atomically(path: &Path, bytes: &[u8], sync: bool) -> StoreResult<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp.{}", isthmus_posix::writer_names::unique_suffix()));
    let result = (|| -> std::io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        if sync {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| StoreError::io("write", path, e))
}

type Job = Box<dyn FnOnce() + Send>;

/// Threads that run one drive's I/O (its lane: shard reads and writes, manifest reads and
/// writes): the k + m drives of a block work at once and a slow drive holds up only its own
/// jobs.
pub(crate) struct IoPool {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
}

impl IoPool {
    /// `threads` threads named `name-N`.
    pub(crate) fn named(threads: usize, name: &str) -> Self {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..threads.max(1) {
            let receiver = receiver.clone();
            // Shard I/O is the gateway's: the drives are its own files.
            isthmus_store::identity::spawn_gateway_thread(&format!("{name}-{n}"), move || {
                loop {
                    let job = receiver.lock().expect("io queue lock").recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            })
            .expect("the I/O thread starts");
        }
        Self { sender: Mutex::new(Some(sender)) }
    }

    /// Runs `job` on an I/O thread.
    pub(crate) fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        let sender = self.sender.lock().expect("io pool lock");
        if let Some(sender) = sender.as_ref() {
            let _ = sender.send(Box::new(job));
        }
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        // Closing the queue ends the threads once they finish what they run.
        self.sender.lock().expect("io pool lock").take();
    }
}
