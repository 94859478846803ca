//! The drives of an erasure-coded pool: each drive directory with its metadata namespace (a
//! `PosixStore` holding the buckets and one manifest file per object), its state as the drive
//! state machine finds it (`look`: online, healing after replacement, read-only, offline,
//! unformatted, foreign; the identity rules are in `format`), its latency, and the I/O threads
//! that read and write shards of many drives in parallel.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::format::{self, DriveFormat, FormatError, Judgment, PoolIdentity};
use super::lanes::IoPool;
use super::latency::Latency;
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::error::{StoreError, StoreResult};

/// Shard files: `data/<bucket>/<data id>`.
pub(crate) const DATA_DIR: &str = ".isthmus/ec/data";
/// Multipart uploads: `uploads/<bucket>/<upload id>/{upload.json, part.NNNNN.json}`.
pub(crate) const UPLOADS_DIR: &str = ".isthmus/ec/uploads";
/// How long a drive's state is trusted before it is looked at again (also the bound on how
/// often a read-only drive is probed for writes).
const RECHECK: Duration = Duration::from_secs(1);

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

/// A drive's state as kept: `DriveState`, with a read-only drive's rebuilding kept apart (a
/// read-only drive serves reads only if it was rebuilt).
const ONLINE: u8 = 0;
const REBUILDING: u8 = 1;
const READ_ONLY: u8 = 2;
const READ_ONLY_REBUILDING: u8 = 3;
const OFFLINE: u8 = 4;
const UNFORMATTED: u8 = 5;
const FOREIGN: u8 = 6;

fn public_state(code: u8) -> DriveState {
    match code {
        ONLINE => DriveState::Online,
        REBUILDING => DriveState::Rebuilding,
        READ_ONLY | READ_ONLY_REBUILDING => DriveState::ReadOnly,
        UNFORMATTED => DriveState::Unformatted,
        FOREIGN => DriveState::Foreign,
        _ => DriveState::Offline,
    }
}

/// The directory a drive's metadata store was opened on (device, inode): a different
/// directory at the drive's path gets a store of its own.
type DirId = (u64, u64);

/// One drive directory of the pool.
pub(crate) struct Drive {
    pub(crate) index: usize,
    pub(crate) path: PathBuf,
    identity: Arc<PoolIdentity>,
    options: StoreOptions,
    store: RwLock<Option<(Arc<PosixStore>, DirId)>>,
    /// The drive's `.isthmus/ec`, opened when its format was last read and found to be this
    /// slot's: shards, locks and uploads are written beneath it (`drive_files`), never through
    /// the drive's path. `None` unless the drive is online, healing or read-only.
    anchor: RwLock<Option<Arc<OwnedFd>>>,
    state: AtomicU8,
    /// Why the drive is in its state, when that is not online.
    why: Mutex<String>,
    /// One look at a time (a blank drive is formatted once).
    looking: Mutex<()>,
    checked: Mutex<Option<Instant>>,
    /// A write answered EROFS: the drive is read-only until a probe write succeeds (at most one
    /// probe per `RECHECK`).
    refused_writes: AtomicBool,
    /// The id of the disk last found in the slot.
    drive_id: Mutex<Option<String>>,
    pub(crate) latency: Latency,
    pub(crate) errors: AtomicU64,
    /// A delay added to every I/O (`ISTHMUS_EC_SLOW_DRIVES`, for fault tests).
    delay: Option<Duration>,
    /// Shard reads fail with EIO (`ISTHMUS_EC_EIO_DRIVES`, for fault tests).
    eio: bool,
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

/// Whether `err` (an I/O error, or a store error holding one) is EROFS.
fn is_read_only_error(err: &(dyn std::error::Error + 'static)) -> bool {
    let io = match err.downcast_ref::<StoreError>() {
        Some(StoreError::Io(source) | StoreError::IoAt { source, .. }) => Some(source),
        _ => err.downcast_ref::<std::io::Error>(),
    };
    io.and_then(std::io::Error::raw_os_error) == Some(Errno::ROFS.raw_os_error())
}

/// A value an injected read error stands for (`ISTHMUS_EC_EIO_DRIVES`).
pub(crate) trait InjectedEio {
    fn eio() -> Self;
}

impl<T> InjectedEio for std::io::Result<T> {
    fn eio() -> Self {
        Err(Errno::IO.into())
    }
}

impl Drive {
    pub(crate) fn new(index: usize, path: PathBuf, identity: Arc<PoolIdentity>, options: StoreOptions) -> Self {
        let delay = injected_delay(&path);
        let eio = injected_eio(&path);
        Self {
            index,
            path,
            identity,
            options,
            store: RwLock::new(None),
            anchor: RwLock::new(None),
            state: AtomicU8::new(OFFLINE),
            why: Mutex::new("not looked at yet".into()),
            looking: Mutex::new(()),
            checked: Mutex::new(None),
            refused_writes: AtomicBool::new(false),
            drive_id: Mutex::new(None),
            latency: Latency::default(),
            errors: AtomicU64::new(0),
            delay,
            eio,
            slow_since: Mutex::new(None),
            reported_slow: Mutex::new(None),
            lane: IoPool::named(LANE_THREADS, &format!("isthmus-ec-d{index}")),
        }
    }

    /// The drive's `.isthmus/ec` as last verified (online, healing or read-only).
    pub(crate) fn anchor(&self) -> Option<Arc<OwnedFd>> {
        self.anchor.read().expect("drive anchor lock").clone()
    }

    /// Whether the drive carries this slot's format (a small read, timed by `probe_drives`).
    pub(crate) fn is_formatted(&self) -> StoreResult<bool> {
        let Some(ec) = self.anchor() else { return Ok(false) };
        match format::read_format(ec.as_fd()) {
            Ok(found) => Ok(matches!(self.identity.judge(&found, self.index), Judgment::Ours { .. })),
            Err(FormatError::Unreadable(err)) => Err(StoreError::io("read the drive format", &self.path, err)),
            Err(_) => Ok(false),
        }
    }

    /// Rewrites the drive's format with the pool's identity (`rebuilding`: not yet rebuilt).
    /// Only a drive that carries this slot's format and takes writes is written.
    pub(crate) fn write_format(&self, rebuilding: bool) -> StoreResult<()> {
        let path = self.path.join(format::EC_DIR).join(format::FORMAT_NAME);
        let ec = self.anchor().ok_or_else(|| {
            StoreError::InvalidArgument(format!("{}: the drive is {}", self.path.display(), self.state().name()))
        })?;
        let drive_id = self.drive_id.lock().expect("drive id lock").clone();
        format::write_format(ec.as_fd(), &self.identity.format(self.index, drive_id, rebuilding))
            .map_err(|e| StoreError::io("write the drive format", &path, e))
    }

    /// Looks at the drive again (at most once per `RECHECK` unless `force`) and notes its state;
    /// a change is logged with what the operator does about it.
    pub(crate) fn refresh(&self, force: bool) {
        {
            let mut checked = self.checked.lock().expect("drive check lock");
            if !force && checked.is_some_and(|at| at.elapsed() < RECHECK) {
                return;
            }
            *checked = Some(Instant::now());
        }
        let _looking = self.looking.lock().expect("drive look lock");
        let (state, why) = self.look();
        if !matches!(state, ONLINE | REBUILDING | READ_ONLY | READ_ONLY_REBUILDING) {
            *self.store.write().expect("drive store lock") = None;
            *self.anchor.write().expect("drive anchor lock") = None;
        }
        let before = self.state.swap(state, Ordering::Relaxed);
        let changed = std::mem::replace(&mut *self.why.lock().expect("drive why lock"), why.clone()) != why;
        if before == state && !changed {
            return;
        }
        let (pool, drive, state) = (&self.identity.name, self.path.display(), public_state(state).name());
        match public_state(self.state.load(Ordering::Relaxed)) {
            DriveState::Online => tracing::info!(pool, %drive, state, "erasure drive state"),
            DriveState::Rebuilding => tracing::info!(pool, %drive, state, what = %why, "erasure drive state"),
            _ => tracing::warn!(pool, %drive, state, what = %why, "erasure drive state"),
        }
    }

    /// The drive's state as found now, and why (for the log): the state machine.
    fn look(&self) -> (u8, String) {
        let dir =
            match rustix::fs::open(&self.path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
                Ok(dir) => dir,
                Err(Errno::NOENT | Errno::NOTDIR) => {
                    return (OFFLINE, "the drive directory is missing: mount or replace the disk".into());
                }
                Err(err) => return (OFFLINE, format!("the drive directory cannot be opened: {err}")),
            };
        let ec = match isthmus_posix::resolve::open_dir_beneath(dir.as_fd(), format::EC_DIR) {
            Ok(ec) => Some(ec),
            Err(Errno::NOENT) => None,
            Err(Errno::NOTDIR | Errno::LOOP) => {
                return (FOREIGN, format!("{} is not a directory: {}", format::EC_DIR, self.reuse_hint()));
            }
            Err(err) => return (OFFLINE, format!("the drive cannot be read: {err}")),
        };
        let found = match &ec {
            Some(ec) => format::read_format(ec.as_fd()),
            None => Err(FormatError::Missing),
        };
        match (found, ec) {
            (Ok(found), Some(ec)) => match self.identity.judge(&found, self.index) {
                Judgment::Ours { rebuilding, current } => self.take(&dir, ec, &found, rebuilding, current),
                Judgment::Foreign(why) => (FOREIGN, format!("{why}; it is not written: {}", self.reuse_hint())),
            },
            (Err(FormatError::Damaged(why)), _) => {
                (FOREIGN, format!("its format is damaged ({why}); it is not written: {}", self.reuse_hint()))
            }
            (Err(FormatError::Unreadable(err)), _) => (OFFLINE, format!("its format cannot be read: {err}")),
            _ => self.take_blank(&dir),
        }
    }

    fn reuse_hint(&self) -> String {
        format!(
            "put the drive back where it belongs, or empty it to have it formatted into slot {} and rebuilt",
            self.index
        )
    }

    /// A drive with this slot's format: its anchor set, its format brought up to date and its
    /// store opened (unless read-only). Online, healing or read-only.
    fn take(&self, dir: &OwnedFd, ec: OwnedFd, found: &DriveFormat, rebuilding: bool, current: bool) -> (u8, String) {
        let mut read_only = self.is_read_only(&ec);
        if !read_only {
            let upgraded = if current {
                Ok(())
            } else {
                format::write_format(ec.as_fd(), &self.identity.format(self.index, found.drive_id.clone(), rebuilding))
            };
            if let Err(err) = upgraded.and_then(|()| format::make_areas(ec.as_fd())) {
                if err.raw_os_error() != Some(Errno::ROFS.raw_os_error()) {
                    return (OFFLINE, format!("its format cannot be brought up to date: {err}"));
                }
                read_only = true;
            }
        }
        let previous = std::mem::replace(&mut *self.drive_id.lock().expect("drive id lock"), found.drive_id.clone());
        if previous.is_some() && previous != found.drive_id {
            tracing::info!(pool = %self.identity.name, drive = %self.path.display(), id = ?found.drive_id, "another disk of this slot is in the drive");
        }
        let Ok(stat) = rustix::fs::fstat(dir) else {
            return (OFFLINE, "the drive directory cannot be read".into());
        };
        let dir_id = (stat.st_dev, stat.st_ino);
        let opened = self.store.read().expect("drive store lock").as_ref().is_some_and(|(_, on)| *on == dir_id);
        if !opened {
            let options =
                StoreOptions { list_cache_entries: self.options.list_cache_entries.min(200_000), ..self.options };
            match PosixStore::open(&self.path, options) {
                Ok(store) => *self.store.write().expect("drive store lock") = Some((Arc::new(store), dir_id)),
                Err(err) => return (OFFLINE, format!("its metadata cannot be opened: {err}")),
            }
        }
        *self.anchor.write().expect("drive anchor lock") = Some(Arc::new(ec));
        match (read_only, rebuilding) {
            (false, false) => (ONLINE, String::new()),
            (false, true) => (REBUILDING, "a replaced drive: it takes writes and serves reads once rebuilt".into()),
            (true, rebuilt) => (
                if rebuilt { READ_ONLY_REBUILDING } else { READ_ONLY },
                "its file system is read-only (EROFS): it serves reads and takes no writes; check the disk and \
                 remount it read-write (it is used for writes again within a second)"
                    .into(),
            ),
        }
    }

    /// Whether the drive takes no writes: its file system is mounted read-only, or a write
    /// answered EROFS and a probe write still does.
    fn is_read_only(&self, ec: &OwnedFd) -> bool {
        if rustix::fs::fstatvfs(ec).is_ok_and(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)) {
            return true;
        }
        if !self.refused_writes.load(Ordering::Relaxed) {
            return false;
        }
        let probe = format!("probe.tmp.{}", isthmus_posix::writer_names::unique_suffix());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        match rustix::fs::openat(ec, probe.as_str(), flags, Mode::from_raw_mode(0o644)) {
            Err(Errno::ROFS) => true,
            other => {
                drop(other);
                let _ = rustix::fs::unlinkat(ec, probe.as_str(), rustix::fs::AtFlags::empty());
                self.refused_writes.store(false, Ordering::Relaxed);
                false
            }
        }
    }

    /// A drive without a format: formatted into its slot as a replacement (healing) if it is
    /// blank and either a mount point or in a slot whose drive never was one; else never
    /// written (an unmounted disk's empty mount point, or a directory holding other files).
    fn take_blank(&self, dir: &OwnedFd) -> (u8, String) {
        let slot = self.index;
        match format::is_blank(dir.as_fd()) {
            Ok(true) => {}
            Ok(false) => {
                return (
                    UNFORMATTED,
                    format!(
                        "it holds files but no drive format, so it is not taken for slot {slot}'s replacement: \
                         restore its {}/{} or empty it to have it formatted into the slot",
                        format::EC_DIR,
                        format::FORMAT_NAME
                    ),
                );
            }
            Err(err) => return (OFFLINE, format!("the drive cannot be read: {err}")),
        }
        let mount = match format::is_mount_point(dir.as_fd()) {
            Ok(mount) => mount,
            Err(err) => return (OFFLINE, format!("the drive cannot be read: {err}")),
        };
        if !mount && self.identity.was_mount_point(slot) {
            return (
                UNFORMATTED,
                format!(
                    "an empty directory on its parent's disk where slot {slot}'s drive was a mount point: the disk \
                     is not mounted, and nothing is written here; mount it (or mount a new disk here: it is \
                     formatted and rebuilt)"
                ),
            );
        }
        if mount && self.identity.learn_mount_point(slot) {
            tracing::info!(pool = %self.identity.name, drive = %self.path.display(), "slot's drive is a mount point now");
        }
        let format = self.identity.format(slot, None, true);
        match format::format_blank(dir.as_fd(), &format) {
            Ok(ec) => {
                tracing::warn!(pool = %self.identity.name, drive = %self.path.display(), slot,
                    "a blank drive is formatted into its slot as a replacement: it takes writes now and serves reads once rebuilt (the background healer, or `isthmus heal POOL`)");
                self.take(dir, ec, &format, true, true)
            }
            Err(err) => (OFFLINE, format!("the blank drive cannot be formatted: {err}")),
        }
    }

    pub(crate) fn state(&self) -> DriveState {
        self.refresh(false);
        public_state(self.state.load(Ordering::Relaxed))
    }

    /// Why the drive is in its state, when it is not online (empty when it is).
    pub(crate) fn why(&self) -> String {
        self.why.lock().expect("drive why lock").clone()
    }

    fn store_if(&self, states: &[u8]) -> Option<Arc<PosixStore>> {
        self.refresh(false);
        if !states.contains(&self.state.load(Ordering::Relaxed)) {
            return None;
        }
        self.store.read().expect("drive store lock").as_ref().map(|(store, _)| store.clone())
    }

    /// The drive's metadata store, if the drive takes writes (online or healing).
    pub(crate) fn writable(&self) -> Option<Arc<PosixStore>> {
        self.store_if(&[ONLINE, REBUILDING])
    }

    /// The drive's metadata store, if the drive serves reads (online, or read-only after it
    /// was rebuilt).
    pub(crate) fn readable(&self) -> Option<Arc<PosixStore>> {
        self.store_if(&[ONLINE, READ_ONLY])
    }

    /// An I/O on this drive failed: count it and look at the drive again on next use (an
    /// EROFS makes it read-only until writes work again).
    pub(crate) fn failed(&self, what: &str, err: &(dyn std::error::Error + 'static)) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if is_read_only_error(err) {
            self.refused_writes.store(true, Ordering::Relaxed);
        }
        tracing::warn!(pool = %self.identity.name, drive = %self.path.display(), error = %err, "erasure drive failed to {what}");
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

    /// Runs one shard write of `bytes` on the drive and counts its time in the drive's
    /// latency, per MiB (I/Os under `LATENCY_FLOOR` count as that much): drives compare on the
    /// speed of their bytes, not on which happened to serve the larger shards.
    pub(crate) fn timed_io<T>(&self, bytes: usize, io: impl FnOnce() -> T) -> T {
        self.measured(Instant::now(), bytes, io)
    }

    /// A shard read as `timed_io`, with the wait counted from `asked` (when the I/O was queued
    /// on the drive's lane): what a reader waits, queue included, so hedging compares a late
    /// answer with typical answers, not with typical service times; the service time (from the
    /// I/O's start) judges the drive slow or not. A drive named in `ISTHMUS_EC_EIO_DRIVES`
    /// answers EIO.
    pub(crate) fn timed_io_since<T: InjectedEio>(&self, asked: Instant, bytes: usize, io: impl FnOnce() -> T) -> T {
        if self.eio {
            return self.measured(asked, bytes, T::eio);
        }
        self.measured(asked, bytes, io)
    }

    fn measured<T>(&self, asked: Instant, bytes: usize, io: impl FnOnce() -> T) -> T {
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
            pool = %self.identity.name,
            drive = %self.path.display(),
            mean_ms = mean_us as f64 / 1000.0,
            peers_ms = peers_us as f64 / 1000.0,
            slow_for_s = since.elapsed().as_secs_f64(),
            "erasure drive is much slower than its peers: reads go around it (see `isthmus pool status`)"
        );
    }
}

/// Drives named in `ISTHMUS_EC_EIO_DRIVES` (`PATH,PATH,...`) answer EIO to every shard read: a
/// test aid standing in for unreadable sectors, named in docs/operator/pools.md.
fn injected_eio(path: &Path) -> bool {
    std::env::var("ISTHMUS_EC_EIO_DRIVES").is_ok_and(|spec| spec.split(',').any(|drive| Path::new(drive) == path))
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
