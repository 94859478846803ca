//! The kernel watcher for local file systems: one inotify instance and one thread, a watch per
//! directory of every bucket with rules, turning close-after-write, renames and unlinks into
//! `Change`s (coalesced per key over a settle time).
//!
//! Decisions: a directory that appears (created, moved in, or a new bucket) is listed when its
//! watch is added and its files are announced as written, so a file written before the watch
//! existed is not missed. A directory renamed within the watched tree announces `Removed` for
//! each old key and `Written` for each new one. A directory moved out of the watched tree (to
//! another file system, out of the data root, or to a bucket without rules) and a bucket
//! renamed away announce nothing for the keys beneath it: the watcher keeps no per-file state
//! (its memory is a watch per directory plus the keys closed within the last settle time).
//! Deleting a symlink announces `Removed` for its name (the kernel no longer says what it
//! was). Hard links made with `link()` are not seen. On a queue overflow the watched buckets are
//! listed again and files modified since the last read before it (less the settle time) are
//! announced; removals lost in the overflow are not.
//!
//! An unnamed file (`O_TMPFILE`, as the gateway writes every object) closes under the name the
//! kernel gives it, `#` and its inode number, which is in no directory: such a close is not
//! looked up. Looking it up found nothing, and took the directory's lock to find it: a request
//! linking its next file into that directory waited, for milliseconds when the watcher's CPU
//! was busy and it was descheduled holding the lock (20 to 49 times in 3 s of 4 KiB PUTs). A
//! user's file really named so (`#` and digits only) is announced when it was created while
//! watched (the kernel says so); rewriting such a file made earlier is not seen here (a scan
//! sees it).

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use rustix::event::{PollFd, PollFlags};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::tree::{self, Kind};
use super::{BucketFilter, Change, MAX_DEPTH, Sink, child_key, is_bucket_name, segment};

/// Whether a settled file (bucket, key, size, mtime) is one the caller already knows about
/// (the gateway's own write): then no `Written` is sent, and the file is not opened again.
pub type Known = Arc<dyn Fn(&str, &str, u64, SystemTime) -> bool + Send + Sync>;

/// A regular file appeared at (bucket, key): created by open(2), and then announced at its
/// close, or linked into place, which shows no close under its name (the gateway's own new
/// keys land so, from an unnamed file). The caller may settle what it remembers of the key.
pub type Created = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Every event queued before this instant has been handled (new directories listed).
pub type CaughtUp = Arc<dyn Fn(Instant) + Send + Sync>;

/// How the watcher behaves.
#[derive(Clone)]
pub struct WatchOptions {
    /// How long a closed file must stay quiet before its `Written` is sent; closes of one key
    /// within it make one change.
    pub settle: Duration,
    /// Files the caller already knows about (none by default).
    pub known: Option<Known>,
    /// Told of every regular file that appears (none by default).
    pub created: Option<Created>,
    /// Told how far the watcher has read its events, after each read (none by default).
    pub caught_up: Option<CaughtUp>,
    /// The most directories watched (`None`: as many as the kernel allows, which is
    /// `fs.inotify.max_user_watches`, shared by every process of the user). Directories past
    /// either limit are not watched: `Watcher::over_limit` names their buckets, for a scanner.
    pub max_watches: Option<usize>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self { settle: Duration::from_millis(200), known: None, created: None, caught_up: None, max_watches: None }
    }
}

/// Counters of a running watcher.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Directories watched now.
    pub watches: u64,
    /// Watches refused because `fs.inotify.max_user_watches` was reached (those directories
    /// are not watched: changes in them are missed).
    pub watch_limit_hits: u64,
    /// Kernel queue overflows (each followed by a rescan).
    pub overflows: u64,
    pub written: u64,
    pub removed: u64,
}

#[derive(Default)]
struct Counters {
    watches: AtomicU64,
    watch_limit_hits: AtomicU64,
    overflows: AtomicU64,
    written: AtomicU64,
    removed: AtomicU64,
    over_limit: Mutex<BTreeSet<String>>,
    /// Buckets whose directory is watched, added once their files were listed.
    watched_buckets: Mutex<std::collections::HashSet<String>>,
}

/// A running kernel watcher; stopped by `stop` or when dropped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl Watcher {
    /// Watches the buckets of the data root `root` for which `buckets` says yes (and any bucket
    /// directory that appears later, if it says yes then). When this returns, the existing
    /// buckets are watched; their existing files are not announced.
    pub fn start(root: &Path, buckets: BucketFilter, options: WatchOptions, sink: Sink) -> io::Result<Watcher> {
        let state = State::new(root, buckets, options, sink)?;
        let counters = state.counters.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("notify-watch".into()).spawn(move || {
            crate::background::yield_to_requests();
            state.run(&flag)
        })?;
        Ok(Watcher { stop, thread: Some(thread), counters })
    }

    /// Buckets with directories left unwatched because the inotify watch limit was reached
    /// (writes there are missed: raise `fs.inotify.max_user_watches`, or run a `Scanner` on
    /// them).
    pub fn buckets_over_limit(&self) -> Vec<String> {
        self.counters.over_limit.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect()
    }

    /// Whether a bucket has directories left unwatched at the limit, asked as it stands then:
    /// the filter of a scanner that covers what the watcher cannot.
    pub fn over_limit(&self) -> BucketFilter {
        let counters = self.counters.clone();
        Arc::new(move |bucket| counters.over_limit.lock().unwrap_or_else(|e| e.into_inner()).contains(bucket))
    }

    /// Whether a bucket is watched whole, asked as it stands then: its directory watched and
    /// listed, and none of its directories left unwatched at the limit (so no scanner covers
    /// it). Then a file linked into one of its watched directories under a new name shows this
    /// watcher only the name appearing (`WatchOptions::created`), which it does not announce:
    /// the gateway need not remember such a write of its own. Files modified shortly before an
    /// overflow are listed again and announced, the gateway's own among them.
    pub fn watches_whole(&self) -> BucketFilter {
        watched_whole(self.counters.clone())
    }

    pub fn stats(&self) -> WatchStats {
        let c = &self.counters;
        WatchStats {
            watches: c.watches.load(Ordering::Relaxed),
            watch_limit_hits: c.watch_limit_hits.load(Ordering::Relaxed),
            overflows: c.overflows.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            removed: c.removed.load(Ordering::Relaxed),
        }
    }

    /// Stops the thread (within about 100 ms) and waits for it. Changes still settling are
    /// dropped.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the notification watcher's thread panicked");
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.halt();
    }
}

const ROOT_MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::DELETE)
    .union(WatchMask::ONLYDIR);
const DIR_MASK: WatchMask = ROOT_MASK.union(WatchMask::CLOSE_WRITE);
/// How long a directory moved away waits for the matching arrival (same cookie) before it is
/// taken as gone from the tree; the kernel queues both halves of a rename together.
const MOVE_WAIT: Duration = Duration::from_millis(50);
const TICK: Duration = Duration::from_millis(100);
/// The most files named like unnamed ones (`unnamed_like`) remembered between their creation
/// and their close; past it all are forgotten (their closes go unannounced; a scan sees them).
const UNNAMED_LIKE_KEPT: usize = 4096;
/// After events were read, how long the watcher lets more gather before it reads again.
const COALESCE: Duration = Duration::from_millis(10);
/// How often the filter is asked again about buckets not watched (a bucket that got rules
/// since): files written there since the previous look are announced when it is added.
const BUCKETS_AGAIN: Duration = Duration::from_secs(2);

/// A watched directory: `rel` beneath `bucket`, `depth` segments deep.
#[derive(Debug, Clone)]
struct WatchedDir {
    bucket: String,
    rel: String,
    depth: usize,
}

/// A directory renamed within the tree: it was `from` in `bucket` and is now `to` (in the
/// bucket being walked).
struct Moved {
    bucket: String,
    from: String,
    to: String,
}

/// What to do with the files of a directory being watched now.
#[derive(Debug, Clone, Copy)]
enum Announce {
    Nothing,
    All,
    ModifiedSince(SystemTime),
}

struct State {
    inotify: Inotify,
    root: OwnedFd,
    root_path: PathBuf,
    root_wd: WatchDescriptor,
    dirs: HashMap<WatchDescriptor, WatchedDir>,
    /// Keys closed after a write, with when they were last closed.
    pending: HashMap<(String, String), Instant>,
    /// Files created while watched whose names look like an unnamed file's (`unnamed_like`):
    /// their closes are real ones (see the module comment).
    created_unnamed_like: std::collections::HashSet<(String, String)>,
    /// Directories moved away, by cookie, waiting for their arrival: (cookie, when, bucket, rel).
    moved: Vec<(u32, Instant, String, String)>,
    buckets: BucketFilter,
    sink: Sink,
    settle: Duration,
    known: Option<Known>,
    created: Option<Created>,
    caught_up: Option<CaughtUp>,
    counters: Arc<Counters>,
    last_read: SystemTime,
    limit_logged: bool,
    max_watches: usize,
}

impl State {
    /// Watches the root and its buckets with rules (their files are not announced).
    fn new(root: &Path, buckets: BucketFilter, options: WatchOptions, sink: Sink) -> io::Result<State> {
        let inotify = Inotify::init()?;
        let root_fd = rustix::fs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let root_wd = inotify.watches().add(root, ROOT_MASK)?;
        let mut state = State {
            inotify,
            root: root_fd,
            root_path: root.to_path_buf(),
            root_wd,
            dirs: HashMap::new(),
            pending: HashMap::new(),
            created_unnamed_like: Default::default(),
            moved: Vec::new(),
            buckets,
            sink,
            settle: options.settle,
            known: options.known,
            created: options.created,
            caught_up: options.caught_up,
            counters: Arc::new(Counters::default()),
            last_read: SystemTime::now(),
            limit_logged: false,
            max_watches: options.max_watches.unwrap_or(usize::MAX),
        };
        state.add_buckets(Announce::Nothing, false);
        Ok(state)
    }

    fn run(mut self, stop: &AtomicBool) {
        let mut buffer = vec![0u8; 64 << 10];
        let mut looked = (Instant::now(), SystemTime::now());
        while !stop.load(Ordering::Relaxed) {
            if looked.0.elapsed() >= BUCKETS_AGAIN {
                let since = std::mem::replace(&mut looked, (Instant::now(), SystemTime::now())).1;
                self.add_buckets(Announce::ModifiedSince(since), false);
            }
            let wait =
                if self.pending.is_empty() { TICK } else { (self.settle / 4).clamp(Duration::from_millis(5), TICK) };
            let timeout = rustix::fs::Timespec { tv_sec: 0, tv_nsec: wait.as_nanos() as i64 };
            let mut fds = [PollFd::new(&self.inotify, PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(err) => tracing::warn!(%err, "polling the inotify descriptor failed"),
            }
            let reading = Instant::now();
            let any = self.drain(&mut buffer);
            if let Some(caught_up) = &self.caught_up {
                caught_up(reading);
            }
            if any {
                // Events arrive one or two per file written: waking for each one (the gateway
                // writes thousands of files a second) cost more than handling them. What comes
                // within COALESCE is read at once (the kernel queues it meanwhile).
                std::thread::sleep(COALESCE);
            }
            self.flush(Instant::now());
            self.expire_moves(Instant::now());
        }
    }

    /// Reads and handles every event queued; whether there was any.
    fn drain(&mut self, buffer: &mut [u8]) -> bool {
        let mut any = false;
        loop {
            let events: Vec<_> = match self.inotify.read_events(buffer) {
                Ok(events) => events.map(|e| (e.wd, e.mask, e.cookie, e.name.map(|n| n.to_os_string()))).collect(),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return any,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    tracing::warn!(%err, "reading inotify events failed");
                    return any;
                }
            };
            any |= !events.is_empty();
            let previous = std::mem::replace(&mut self.last_read, SystemTime::now());
            for (wd, mask, cookie, name) in events {
                self.handle(wd, mask, cookie, name.as_deref(), previous);
            }
        }
    }

    fn handle(
        &mut self,
        wd: WatchDescriptor,
        mask: EventMask,
        cookie: u32,
        name: Option<&std::ffi::OsStr>,
        previous: SystemTime,
    ) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            self.overflow(previous);
            return;
        }
        if mask.contains(EventMask::IGNORED) {
            if let Some(dir) = self.dirs.remove(&wd) {
                self.counters.watches.fetch_sub(1, Ordering::Relaxed);
                if dir.rel.is_empty() {
                    self.counters.watched_buckets.lock().unwrap_or_else(|e| e.into_inner()).remove(&dir.bucket);
                }
            }
            return;
        }
        let Some(name) = name.and_then(segment) else { return };
        let is_dir = mask.contains(EventMask::ISDIR);
        if wd == self.root_wd {
            if is_dir && is_bucket_name(name) {
                self.directory_event(mask, cookie, name, "", 0);
            }
            return;
        }
        let Some(dir) = self.dirs.get(&wd).cloned() else { return };
        let Some(key) = child_key(&dir.rel, name) else { return };
        if is_dir {
            self.directory_event(mask, cookie, &dir.bucket, &key, dir.depth + 1);
        } else if mask.contains(EventMask::CLOSE_WRITE) {
            let id = (dir.bucket, key);
            if !unnamed_like(name) || self.created_unnamed_like.contains(&id) {
                self.pending.insert(id, Instant::now());
            }
        } else if mask.contains(EventMask::MOVED_TO) {
            self.pending.remove(&(dir.bucket.clone(), key.clone()));
            if let Some(stat) = self.regular_file(&dir.bucket, &key)
                && !self.is_known(&dir.bucket, &key, &stat)
            {
                self.emit(Change::Written { bucket: dir.bucket, key });
            }
        } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
            let id = (dir.bucket, key);
            self.pending.remove(&id);
            self.created_unnamed_like.remove(&id);
            let (bucket, key) = id;
            self.emit(Change::Removed { bucket, key });
        } else if mask.contains(EventMask::CREATE) {
            if unnamed_like(name) {
                if self.created_unnamed_like.len() >= UNNAMED_LIKE_KEPT {
                    self.created_unnamed_like.clear();
                }
                self.created_unnamed_like.insert((dir.bucket.clone(), key.clone()));
            }
            if let Some(created) = &self.created {
                // Announced at its close if it was opened; a link never closes under its name.
                created(&dir.bucket, &key);
            }
        }
    }

    /// A directory `rel` of `bucket` (`""`: the bucket directory itself) appeared or went.
    fn directory_event(&mut self, mask: EventMask, cookie: u32, bucket: &str, rel: &str, depth: usize) {
        if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
            self.forget(bucket, rel);
            if mask.contains(EventMask::MOVED_FROM) {
                self.moved.push((cookie, Instant::now(), bucket.to_string(), rel.to_string()));
            }
        } else if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
            if rel.is_empty() && !(self.buckets)(bucket) {
                return;
            }
            let from = match self.moved.iter().position(|m| mask.contains(EventMask::MOVED_TO) && m.0 == cookie) {
                Some(i) => {
                    let (_, _, bucket, from) = self.moved.swap_remove(i);
                    Some(Moved { bucket, from, to: rel.to_string() })
                }
                None => None,
            };
            match tree::open_beneath(self.root.as_fd(), bucket, rel) {
                Ok(fd) => self.add_dir(fd, bucket, rel, depth, Announce::All, from.as_ref()),
                Err(err) => tracing::debug!(bucket, rel, %err, "a new directory could not be opened"),
            }
        }
    }

    /// Watches every bucket directory of the root that has rules: those not watched yet, or
    /// with `again` all of them (listed again after lost events).
    fn add_buckets(&mut self, announce: Announce, again: bool) {
        let watched: std::collections::HashSet<String> = match again {
            true => Default::default(),
            false => self.dirs.values().filter(|d| d.rel.is_empty()).map(|d| d.bucket.clone()).collect(),
        };
        let listing = match tree::list(self.root.as_fd()) {
            Ok(listing) => listing,
            Err(err) => {
                tracing::warn!(root = %self.root_path.display(), %err, "cannot list the data root");
                return;
            }
        };
        for (name, kind) in listing {
            if kind != Kind::Dir || !is_bucket_name(&name) || watched.contains(&name) || !(self.buckets)(&name) {
                continue;
            }
            match tree::open_dir(self.root.as_fd(), &name) {
                Ok(fd) => self.add_dir(fd, &name, "", 0, announce, None),
                Err(err) => tracing::debug!(bucket = name, %err, "a bucket directory could not be opened"),
            }
        }
    }

    /// Watches the directory open as `fd` and everything beneath it, announcing its files as
    /// `announce` says; `from` is where it was before a rename within the tree (its old keys
    /// are announced removed).
    fn add_dir(
        &mut self,
        fd: OwnedFd,
        bucket: &str,
        rel: &str,
        depth: usize,
        announce: Announce,
        from: Option<&Moved>,
    ) {
        if depth > MAX_DEPTH {
            tracing::debug!(bucket, depth, "not watching a directory deeper than {MAX_DEPTH} levels");
            return;
        }
        let watched = self.add_watch(fd.as_fd(), bucket, rel, depth);
        let listing = match tree::list(fd.as_fd()) {
            Ok(listing) => listing,
            Err(err) => {
                tracing::debug!(bucket, rel, %err, "a watched directory could not be listed");
                return;
            }
        };
        for (name, kind) in listing {
            let Some(key) = child_key(rel, &name) else { continue };
            match kind {
                Kind::Dir => match tree::open_dir(fd.as_fd(), &name) {
                    Ok(child) => self.add_dir(child, bucket, &key, depth + 1, announce, from),
                    Err(err) => tracing::debug!(bucket, key, %err, "a directory could not be opened"),
                },
                Kind::File => {
                    if let Some(moved) = from
                        && let Some(old) = tree::rebase(&key, &moved.to, &moved.from)
                    {
                        self.emit(Change::Removed { bucket: moved.bucket.clone(), key: old });
                    }
                    if announce_file(announce, fd.as_fd(), &name) {
                        self.pending.insert((bucket.to_string(), key), Instant::now());
                    }
                }
            }
        }
        if watched && rel.is_empty() {
            self.counters.watched_buckets.lock().unwrap_or_else(|e| e.into_inner()).insert(bucket.to_string());
        }
    }

    /// Whether the directory is watched now.
    fn add_watch(&mut self, fd: BorrowedFd<'_>, bucket: &str, rel: &str, depth: usize) -> bool {
        // Through the descriptor: the very directory opened (without following links) is
        // watched, whatever a user renamed into its path since.
        if self.dirs.len() >= self.max_watches {
            self.at_limit(bucket, "the watcher's limit (notify_watch_max_directories)");
            return false;
        }
        let through_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let added = match self.inotify.watches().add(&through_fd, DIR_MASK) {
            // No /proc: by path, not following a link at its end.
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let path = self.root_path.join(bucket).join(rel);
                self.inotify.watches().add(path, DIR_MASK | WatchMask::DONT_FOLLOW)
            }
            other => other,
        };
        match added {
            Ok(wd) => {
                let watched = WatchedDir { bucket: bucket.to_string(), rel: rel.to_string(), depth };
                if self.dirs.insert(wd, watched).is_none() {
                    self.counters.watches.fetch_add(1, Ordering::Relaxed);
                }
                true
            }
            Err(err) if err.raw_os_error() == Some(libc_enospc()) => {
                self.at_limit(bucket, "the kernel's inotify watch limit (sysctl fs.inotify.max_user_watches)");
                false
            }
            Err(err) => {
                tracing::debug!(bucket, rel, %err, "cannot watch a directory");
                false
            }
        }
    }

    /// A directory of `bucket` is left unwatched at `limit`: the bucket is named in
    /// `over_limit` (for a scanner), and the first time it is said.
    fn at_limit(&mut self, bucket: &str, limit: &str) {
        self.counters.watch_limit_hits.fetch_add(1, Ordering::Relaxed);
        self.counters.over_limit.lock().unwrap_or_else(|e| e.into_inner()).insert(bucket.to_string());
        if !std::mem::replace(&mut self.limit_logged, true) {
            tracing::warn!(
                bucket,
                watches = self.dirs.len(),
                "{limit} is reached: directories beyond it are not watched, and their buckets are \
                 scanned instead (every notify_scan_interval_seconds); raise the limit for \
                 announcements within the settle time"
            );
        }
    }

    /// Stops watching `rel` of `bucket` and everything beneath it.
    fn forget(&mut self, bucket: &str, rel: &str) {
        let beneath = |d: &WatchedDir| {
            d.bucket == bucket
                && (rel.is_empty() || d.rel == rel || d.rel.strip_prefix(rel).is_some_and(|r| r.starts_with('/')))
        };
        let gone: Vec<WatchDescriptor> =
            self.dirs.iter().filter(|(_, d)| beneath(d)).map(|(wd, _)| wd.clone()).collect();
        for wd in gone {
            self.dirs.remove(&wd);
            self.counters.watches.fetch_sub(1, Ordering::Relaxed);
            // It may already be gone with its directory; the kernel then said IN_IGNORED.
            let _ = self.inotify.watches().remove(wd);
        }
        if rel.is_empty() {
            self.counters.over_limit.lock().unwrap_or_else(|e| e.into_inner()).remove(bucket);
            self.counters.watched_buckets.lock().unwrap_or_else(|e| e.into_inner()).remove(bucket);
        }
        let prefix = format!("{rel}/");
        self.pending.retain(|(b, k), _| b != bucket || !(rel.is_empty() || k.starts_with(&prefix)));
    }

    /// Events were lost: every watched bucket is listed again (new directories watched) and
    /// files modified since shortly before the last read are announced.
    fn overflow(&mut self, previous: SystemTime) {
        self.counters.overflows.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("the inotify queue overflowed: events were lost; rescanning the watched buckets");
        let since = previous.checked_sub(self.settle + Duration::from_secs(1)).unwrap_or(SystemTime::UNIX_EPOCH);
        self.add_buckets(Announce::ModifiedSince(since), true);
    }

    fn flush(&mut self, now: Instant) {
        let settle = self.settle;
        let mut due: Vec<(String, String)> =
            self.pending.iter().filter(|(_, t)| now.duration_since(**t) >= settle).map(|(k, _)| k.clone()).collect();
        // In directory order, so that each directory is opened once for all its files.
        due.sort_unstable_by(|a, b| (&a.0, parent(&a.1)).cmp(&(&b.0, parent(&b.1))));
        let mut dir: Option<(String, String, io::Result<OwnedFd>)> = None;
        for (bucket, key) in due {
            let id = (bucket, key);
            self.pending.remove(&id);
            let (bucket, key) = id;
            if !dir.as_ref().is_some_and(|(b, d, _)| *b == bucket && d == parent(&key)) {
                let opened = tree::open_beneath(self.root.as_fd(), &bucket, parent(&key));
                dir = Some((bucket.clone(), parent(&key).to_string(), opened));
            }
            let Some((_, _, Ok(fd))) = &dir else { continue };
            let Some(stat) = regular_file_in(fd.as_fd(), leaf(&key)) else { continue };
            if !self.is_known(&bucket, &key, &stat) {
                self.emit(Change::Written { bucket, key });
            }
        }
    }

    /// Whether the file found at `key` is one the caller knows about (`WatchOptions::known`).
    fn is_known(&self, bucket: &str, key: &str, stat: &rustix::fs::Stat) -> bool {
        let mtime = SystemTime::UNIX_EPOCH
            + Duration::new(stat.st_mtime.max(0) as u64, stat.st_mtime_nsec.clamp(0, 999_999_999) as u32);
        self.known.as_ref().is_some_and(|known| known(bucket, key, stat.st_size.max(0) as u64, mtime))
    }

    fn expire_moves(&mut self, now: Instant) {
        self.moved.retain(|m| now.duration_since(m.1) < MOVE_WAIT);
    }

    /// The file's status, if `key` of `bucket` is a regular file now (looked at without
    /// following links: not a link, not a directory).
    fn regular_file(&self, bucket: &str, key: &str) -> Option<rustix::fs::Stat> {
        let dir = tree::open_beneath(self.root.as_fd(), bucket, parent(key)).ok()?;
        regular_file_in(dir.as_fd(), leaf(key))
    }

    fn emit(&self, change: Change) {
        let counter = match change {
            Change::Written { .. } => &self.counters.written,
            Change::Removed { .. } => &self.counters.removed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        (self.sink)(change);
    }
}

/// `Watcher::watches_whole` of the watcher counting in `counters`.
fn watched_whole(counters: Arc<Counters>) -> BucketFilter {
    Arc::new(move |bucket| {
        counters.watched_buckets.lock().unwrap_or_else(|e| e.into_inner()).contains(bucket)
            && !counters.over_limit.lock().unwrap_or_else(|e| e.into_inner()).contains(bucket)
    })
}

/// The status of `name` in `dir`, if it is a regular file (looked at without following links).
fn regular_file_in(dir: BorrowedFd<'_>, name: &str) -> Option<rustix::fs::Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .filter(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile)
}

/// Whether `name` is what the kernel calls an unnamed (`O_TMPFILE`) file: `#` and digits.
fn unnamed_like(name: &str) -> bool {
    name.strip_prefix('#').is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// The directory of `key` within its bucket (`""` at the top).
fn parent(key: &str) -> &str {
    key.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The last segment of `key`.
fn leaf(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, name)| name)
}

fn announce_file(announce: Announce, dir: BorrowedFd<'_>, name: &str) -> bool {
    match announce {
        Announce::Nothing => false,
        Announce::All => true,
        Announce::ModifiedSince(since) => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| {
            let mtime = SystemTime::UNIX_EPOCH + Duration::new(s.st_mtime.max(0) as u64, s.st_mtime_nsec as u32);
            mtime >= since
        }),
    }
}

fn libc_enospc() -> i32 {
    rustix::io::Errno::NOSPC.raw_os_error()
}

#[cfg(test)]
mod tests;
