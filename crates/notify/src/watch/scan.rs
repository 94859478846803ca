//! The incremental scanner for shared file systems (CephFS, NFS, Lustre), where the kernel
//! does not see other nodes' writes: each pass walks a bucket and compares every regular
//! file's (inode, size, mtime, ctime) with the index the previous pass left on disk.
//!
//! Decisions. The first pass of a bucket with no index only records (announces nothing): the
//! files there before notifications were enabled are not news; a directory that appears later
//! is new, and its files are announced. A directory whose inode, mtime and ctime did not
//! change is not read again (its entry names come from the index), but each of its entries
//! is still statted, since writing a file does not touch its directory; a directory changed
//! within two seconds of its listing is listed again next time (timestamps are coarse). Each
//! directory's events are handed to the sink before its table is saved, so a pass killed
//! halfway starts again from the top and repeats at most the directory in flight (at least
//! once, never lost). Memory: the tables of the directories on the current path (at most
//! `MAX_DEPTH` + 1; a table costs about 40 bytes plus the name per entry), never the whole
//! bucket. Not seen: a second write within the file system's timestamp granularity of the
//! pass's stat that leaves the size unchanged; on NFS, whatever the client's attribute
//! cache hides (mount with `actimeo` small or `noac` for prompt results).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use isthmus_store::state_dir::{StateDir, StateError};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::index::{DirTable, Entry, table_name};
use super::tree::{self, Kind};
use super::{BucketFilter, Change, MAX_DEPTH, Sink, child_key, is_bucket_name};

/// Why a pass could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("cannot open the data root {path}: {source}")]
    Root { path: PathBuf, source: io::Error },
    #[error("{0:?} is not a bucket name")]
    NotABucket(String),
    #[error("cannot open the directory of bucket {bucket}: {source}")]
    Bucket { bucket: String, source: io::Error },
    #[error("the scan index of bucket {bucket}: {source}")]
    Index { bucket: String, source: StateError },
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Regular files statted.
    pub files: u64,
    /// Directories visited.
    pub dirs: u64,
    /// Directories whose entries were read (the others had not changed).
    pub dirs_listed: u64,
    pub written: u64,
    pub removed: u64,
    pub elapsed: Duration,
}

/// Scans buckets of one data root, keeping its index in a state directory.
pub struct Scanner {
    root: OwnedFd,
    root_path: PathBuf,
    index: StateDir,
    sink: Sink,
}

/// The file in a bucket's index directory that says its first pass finished.
const BASELINE: &str = "baseline";
/// A table is read whole; a directory of a few million entries fits.
const TABLE_LIMIT: u64 = 256 << 20;
/// A directory modified this close to its listing is listed again next pass.
const RACY_NS: i64 = 2_000_000_000;

impl Scanner {
    /// A scanner of the buckets beneath `root`; `index` is a directory of the gateway's state
    /// kept for it alone (one subdirectory per bucket is made there).
    pub fn new(root: &Path, index: StateDir, sink: Sink) -> Result<Scanner, ScanError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(root, flags, Mode::empty())
            .map_err(|e| ScanError::Root { path: root.to_path_buf(), source: e.into() })?;
        Ok(Scanner { root: fd, root_path: root.to_path_buf(), index, sink })
    }

    /// One pass over `bucket`: announces what changed since the last pass (nothing on the
    /// bucket's first pass, which records).
    pub fn pass(&self, bucket: &str) -> Result<ScanStats, ScanError> {
        self.pass_until(bucket, None)
    }

    fn pass_until(&self, bucket: &str, stop: Option<&AtomicBool>) -> Result<ScanStats, ScanError> {
        if !is_bucket_name(bucket) {
            return Err(ScanError::NotABucket(bucket.to_string()));
        }
        let started = Instant::now();
        let index_err = |source| ScanError::Index { bucket: bucket.to_string(), source };
        let index = self.index.subdir(bucket, true).map_err(index_err)?.expect("created when missing");
        let baseline = index.read(BASELINE, 64).map_err(index_err)?.is_none();
        let dir = tree::open_dir(self.root.as_fd(), bucket)
            .map_err(|source| ScanError::Bucket { bucket: bucket.to_string(), source })?;
        let mut pass = Pass { index: &index, bucket, baseline, sink: &self.sink, stop, stats: ScanStats::default() };
        let finished = pass.visit(dir.as_fd(), "", 0)?;
        if finished && baseline {
            index.replace(BASELINE, b"first pass done\n", 0o644).map_err(index_err)?;
        }
        let mut stats = pass.stats;
        stats.elapsed = started.elapsed();
        Ok(stats)
    }

    /// Scans every bucket directory of the root that `buckets` says yes to, every `interval`,
    /// on a thread of its own.
    pub fn start(self, interval: Duration, buckets: BucketFilter) -> io::Result<ScanLoop> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("notify-scan".into()).spawn(move || {
            crate::background::yield_to_requests();
            while !flag.load(Ordering::Relaxed) {
                self.pass_all(&buckets, &flag);
                let until = Instant::now() + interval;
                while !flag.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(50).min(interval));
                }
            }
        })?;
        Ok(ScanLoop { stop, thread: Some(thread) })
    }

    fn pass_all(&self, buckets: &BucketFilter, stop: &AtomicBool) {
        let listing = match tree::list(self.root.as_fd()) {
            Ok(listing) => listing,
            Err(err) => {
                tracing::warn!(root = %self.root_path.display(), %err, "cannot list the data root");
                return;
            }
        };
        for (name, kind) in listing {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if kind != Kind::Dir || !is_bucket_name(&name) || !buckets(&name) {
                continue;
            }
            match self.pass_until(&name, Some(stop)) {
                Ok(stats) => tracing::debug!(bucket = name, ?stats, "scan pass"),
                Err(err) => tracing::warn!(bucket = name, %err, "scan pass failed"),
            }
        }
    }
}

/// The scanning thread; stopped (between two directories) by `stop` or when dropped.
pub struct ScanLoop {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ScanLoop {
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the notification scanner's thread panicked");
        }
    }
}

impl Drop for ScanLoop {
    fn drop(&mut self) {
        self.halt();
    }
}

struct Pass<'a> {
    index: &'a StateDir,
    bucket: &'a str,
    baseline: bool,
    sink: &'a Sink,
    stop: Option<&'a AtomicBool>,
    stats: ScanStats,
}

impl Pass<'_> {
    /// Visits the directory `rel` open as `dir`; false if stopped before the end.
    fn visit(&mut self, dir: BorrowedFd<'_>, rel: &str, depth: usize) -> Result<bool, ScanError> {
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(false);
        }
        self.stats.dirs += 1;
        let Ok(me) = rustix::fs::fstat(dir) else { return Ok(true) };
        let old = self.load(rel)?;
        let now = now_ns();
        let unchanged = old.as_ref().is_some_and(|t| {
            (t.ino, t.mtime, t.ctime)
                == (me.st_ino, ns(me.st_mtime, me.st_mtime_nsec), ns(me.st_ctime, me.st_ctime_nsec))
                && t.mtime < t.listed_at - RACY_NS
        });
        let (names, listed_at) = match &old {
            Some(t) if unchanged => (t.entries.iter().map(|e| (e.name.clone(), e.kind)).collect(), t.listed_at),
            _ => {
                self.stats.dirs_listed += 1;
                match tree::list(dir) {
                    Ok(names) => (names, now),
                    Err(err) => {
                        tracing::debug!(bucket = self.bucket, rel, %err, "cannot list a directory");
                        return Ok(true);
                    }
                }
            }
        };
        let mut entries: Vec<Entry> = names.into_iter().filter_map(|(name, _)| stat_entry(dir, name)).collect();
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        self.stats.files += entries.iter().filter(|e| e.kind == Kind::File).count() as u64;
        let announce = !self.baseline;
        let old_entries = old.as_ref().map_or(&[][..], |t| &t.entries[..]);
        self.compare(rel, old_entries, &entries, announce)?;
        let table = DirTable {
            rel: rel.to_string(),
            ino: me.st_ino,
            mtime: ns(me.st_mtime, me.st_mtime_nsec),
            ctime: ns(me.st_ctime, me.st_ctime_nsec),
            listed_at,
            entries,
        };
        if old.as_ref() != Some(&table) {
            self.save(&table)?;
        }
        drop(old); // only the names of subdirectories stay in memory while they are visited
        let subdirs: Vec<String> = table.entries.into_iter().filter(|e| e.kind == Kind::Dir).map(|e| e.name).collect();
        for name in subdirs {
            let Some(key) = child_key(rel, &name) else { continue };
            if depth + 1 > MAX_DEPTH {
                tracing::debug!(bucket = self.bucket, depth, "not scanning a directory deeper than {MAX_DEPTH} levels");
                continue;
            }
            match tree::open_dir(dir, &name) {
                Ok(child) => {
                    if !self.visit(child.as_fd(), &key, depth + 1)? {
                        return Ok(false);
                    }
                }
                Err(err) => tracing::debug!(bucket = self.bucket, key, %err, "cannot open a directory"),
            }
        }
        Ok(true)
    }

    /// Announces the differences between a directory's old and new entries (both sorted) and
    /// forgets the subdirectories that went.
    fn compare(&mut self, rel: &str, old: &[Entry], new: &[Entry], announce: bool) -> Result<(), ScanError> {
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            let order = match (old.get(i), new.get(j)) {
                (Some(o), Some(n)) => o.name.cmp(&n.name),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            let (gone, came) = match order {
                std::cmp::Ordering::Less => (old.get(i), None),
                std::cmp::Ordering::Greater => (None, new.get(j)),
                std::cmp::Ordering::Equal if old[i].kind != new[j].kind => (old.get(i), new.get(j)),
                std::cmp::Ordering::Equal => {
                    if announce && new[j].kind == Kind::File && old[i].differs(&new[j]) {
                        self.emit(rel, &new[j].name, true);
                    }
                    (None, None)
                }
            };
            if let Some(o) = gone {
                match o.kind {
                    Kind::File if announce => self.emit(rel, &o.name, false),
                    Kind::File => {}
                    Kind::Dir => self.forget(rel, &o.name, announce)?,
                }
            }
            if let Some(n) = came
                && announce
                && n.kind == Kind::File
            {
                self.emit(rel, &n.name, true);
            }
            if order != std::cmp::Ordering::Greater {
                i += 1;
            }
            if order != std::cmp::Ordering::Less {
                j += 1;
            }
        }
        Ok(())
    }

    /// The directory `name` of `rel` went: its files (as the index knew them) are removed.
    fn forget(&mut self, rel: &str, name: &str, announce: bool) -> Result<(), ScanError> {
        let Some(key) = child_key(rel, name) else { return Ok(()) };
        if let Some(table) = self.load(&key)? {
            for entry in &table.entries {
                match entry.kind {
                    Kind::File if announce => self.emit(&key, &entry.name, false),
                    Kind::File => {}
                    Kind::Dir => self.forget(&key, &entry.name, announce)?,
                }
            }
        }
        self.index.remove(&table_name(&key)).map_err(|source| self.index_error(source))
    }

    fn emit(&mut self, rel: &str, name: &str, written: bool) {
        let Some(key) = child_key(rel, name) else { return };
        let bucket = self.bucket.to_string();
        if written {
            self.stats.written += 1;
            (self.sink)(Change::Written { bucket, key });
        } else {
            self.stats.removed += 1;
            (self.sink)(Change::Removed { bucket, key });
        }
    }

    /// The table of `rel`; a damaged or misplaced one is dropped (its files are then announced
    /// again: at least once).
    fn load(&self, rel: &str) -> Result<Option<DirTable>, ScanError> {
        let name = table_name(rel);
        let bytes = match self.index.read(&name, TABLE_LIMIT) {
            Ok(bytes) => bytes,
            Err(StateError::TooLarge { .. }) => None,
            Err(source) => return Err(self.index_error(source)),
        };
        Ok(bytes.and_then(|bytes| match DirTable::decode(&bytes) {
            Some(table) if table.rel == rel => Some(table),
            _ => {
                tracing::warn!(bucket = self.bucket, rel, "a damaged scan index table was dropped");
                None
            }
        }))
    }

    fn save(&self, table: &DirTable) -> Result<(), ScanError> {
        self.index.replace(&table_name(&table.rel), &table.encode(), 0o644).map_err(|source| self.index_error(source))
    }

    fn index_error(&self, source: StateError) -> ScanError {
        ScanError::Index { bucket: self.bucket.to_string(), source }
    }
}

/// What `name` in `dir` is now, if it can hold or be a key.
fn stat_entry(dir: BorrowedFd<'_>, name: String) -> Option<Entry> {
    let stat = rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
    let kind = Kind::of(FileType::from_raw_mode(stat.st_mode))?;
    let (ino, size) = match kind {
        Kind::File => (stat.st_ino, stat.st_size as u64),
        // A directory's own times are in its table; here only that it is one counts.
        Kind::Dir => (stat.st_ino, 0),
    };
    let (mtime, ctime) = match kind {
        Kind::File => (ns(stat.st_mtime, stat.st_mtime_nsec), ns(stat.st_ctime, stat.st_ctime_nsec)),
        Kind::Dir => (0, 0),
    };
    Some(Entry { name, kind, ino, size, mtime, ctime })
}

fn ns(secs: i64, nsec: impl TryInto<i64>) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec.try_into().unwrap_or(0))
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}
