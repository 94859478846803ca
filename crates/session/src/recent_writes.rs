//! The gateway's own recent writes and deletes, by bucket and key, so that the watcher of the
//! data root, which sees them land like any other file, announces none of them again. A change
//! is marked before it starts (the watcher may see a file land or go before the call returns)
//! and settled with what it left once it succeeded; a failed one is forgotten.
//!
//! A new key the gateway links into place from an unnamed file shows the watcher no close
//! under its name (the close is the unnamed file's, `#<inode>`): the watcher settles it when
//! the name appears (`created`). Bounded by age and by count, oldest first: what is never
//! settled (a scanner's directories see a change up to their interval later) ages out, or,
//! under a sustained write rate, makes room for newer ones in order, one at a time: never all
//! at once under the lock on a request's path.
//!
//! A change the watcher saw land (or go) while it was still under way is claimed as soon as it
//! settles: the watcher will see nothing more of it. Before, nothing claimed it, and it stayed
//! at the front of the line for its whole `kept` time, holding back the clearing of every
//! claimed change behind it: under sustained writes to a bucket with rules the memory sat at
//! its bound of 100,000 (with a warning that it outgrew it), and every write paid for it.
//!
//! What the watcher claims is only marked claimed: the request threads, which made it, free it
//! when its place in line comes up. Freeing it on the watcher's thread took the allocator's
//! lock of the request thread that allocated it (glibc frees a chunk into its own thread's
//! arena), and a watcher descheduled there, its CPU busy with a broker, kept that request
//! thread waiting for milliseconds.
//!
//! A new key the gateway links into a directory of a bucket the kernel watcher watches whole
//! (`watched_whole`) is not remembered at all: the watcher sees only its name appear, which it
//! does not announce, and no scanner covers the bucket. Remembering it (a mark before the
//! write, one after, the watcher's claim and the request thread's clearing) cost a 4 KiB PUT
//! about 4 % of its rate, in every A/B run of stop 60, though its CPU time measured about a
//! microsecond. Anything else a write shows the watcher (a rename over a key, a directory
//! made, a version moved aside) is marked first, as before (`ObjectWrite::commit_seen`).
//! A new key linked into a directory the gateway made that the watchers may not have listed
//! yet is remembered once written (`YoungDirs`). A directory a user made, written into through
//! the gateway before the watcher listed it, may have such a write announced a second time (at
//! least once, never lost); so may the gateway's writes that a rescan after a lost-events
//! overflow finds modified shortly before it.
//!
//! The watcher's events are not tagged with the change that caused them, so one change's event
//! may be read while a later change of the same key is remembered. A name appearing is not
//! taken for a change that arrives by a rename (an overwrite: `arrives_by_rename`), and a
//! claimed change still answers for what it left for `CLAIMED_LINGER` after it was marked
//! (when the watcher read a new key's name appearing only after an overwrite of that key was
//! marked, the overwrite was claimed by it and its rename then announced as someone's POSIX
//! write); no longer, so a user's change made later is not taken for it.
//!
//! Nothing is remembered until a watcher or scanner of the data root starts (`watcher_started`):
//! with `notify_watch = "off"` nothing would ever claim a change, and every write to a bucket
//! with rules paid for remembering it, then for forgetting the oldest of 100,000.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::young_dirs::{WatcherProgress, YoungDirs};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// How long the gateway's own writes are remembered for the watcher (and for scans of shared
/// file systems, which see a change up to their interval later).
const RECENT_KEPT: Duration = Duration::from_secs(120);
/// The gateway's own writes remembered at once; past it the oldest are forgotten (their files
/// may then be announced a second time by a scan, never lost).
const RECENT_CAPACITY: usize = 100_000;
/// How long a change the watcher claimed is kept before it is freed: it still answers for its
/// file meanwhile (see `RecentWrites::take`). Longer than the watcher takes to read the events
/// queued behind the one that claimed it.
const CLAIMED_LINGER: Duration = Duration::from_secs(2);
/// The most places in line of changes already taken that one mark clears (the watcher takes
/// most changes within milliseconds, oldest first, so the line stays about as long as what
/// is remembered; a mark adds at most one place).
const CLEARED_PER_MARK: usize = 16;
/// The most changes one mark forgets for their age alone: after a quiet spell the aged ones
/// go a few at a time, so no request holds the lock to forget a burst's worth (an aged change
/// is no longer answered for anyway).
const AGED_PER_MARK: usize = 8;

/// What the gateway's own change of a key left, as the watcher will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expected {
    /// The change is under way (the watcher may see it land before the call returns).
    Underway,
    /// The object with this ETag, size and modification time.
    Written { etag: String, size: u64, modified: SystemTime },
    /// No object.
    Gone,
}

/// A change's bucket and key, as `bucket/key` (a bucket name has no `/`): one allocation per
/// remembered change, shared by the map and the line; looked up without one (`with_id`).
type Id = Arc<str>;

/// Runs `f` with `bucket/key` in this thread's scratch buffer.
fn with_id<R>(bucket: &str, key: &str, f: impl FnOnce(&str) -> R) -> R {
    thread_local!(static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) });
    SCRATCH.with_borrow_mut(|id| {
        id.clear();
        id.push_str(bucket);
        id.push('/');
        id.push_str(key);
        let result = f(id);
        if id.capacity() > 4096 {
            // A very long key once: not kept for the thread's life.
            *id = String::new();
        }
        result
    })
}

/// Whether something holds of a bucket.
pub type BucketTest = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// See the module comment.
pub struct RecentWrites {
    inner: Mutex<Recent>,
    /// Whether a watcher or scanner claims what is remembered (see the module comment).
    watching: AtomicBool,
    /// Whether the kernel watcher watches a bucket whole (see the module comment); unset
    /// while a scanner covers the whole data root, or before the watchers started.
    watched_whole: OnceLock<BucketTest>,
    kept: Duration,
    capacity: usize,
    /// `CLAIMED_LINGER`, shorter in tests.
    linger: Duration,
    /// Directories the gateway made that the watchers may not have listed yet.
    young: YoungDirs,
}

#[derive(Default)]
struct Recent {
    /// The latest change of each key, when it was marked, and its place in line.
    entries: HashMap<Id, Mark>,
    /// Keys in the order they were first marked (a place number and that time): the oldest
    /// is forgotten first. A place whose key was taken since (or taken and marked again: it
    /// then has a newer place) is cleared when it comes up; a key marked again since it took
    /// its place keeps it, and goes back in line with its newer time once aged.
    order: VecDeque<(Id, u64, Instant)>,
    /// The number of the next place in line.
    next_place: u64,
    /// Whether a change younger than `kept` was forgotten for room (said once).
    crowded: bool,
}

struct Mark {
    at: Instant,
    expected: Expected,
    place: u64,
    /// Claimed by the watcher: as good as forgotten, freed by a request thread (see the
    /// module comment).
    claimed: bool,
    /// The watcher saw this change while it was under way: claimed once it settles.
    seen: bool,
    /// The change reaches the watcher as a rename over the key (see `arrives_by_rename`).
    by_rename: bool,
}

impl Default for RecentWrites {
    fn default() -> Self {
        Self::bounded(RECENT_KEPT, RECENT_CAPACITY)
    }
}

impl RecentWrites {
    fn bounded(kept: Duration, capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Recent::default()),
            watching: AtomicBool::new(false),
            watched_whole: OnceLock::new(),
            kept,
            capacity: capacity.max(1),
            linger: CLAIMED_LINGER,
            young: YoungDirs::default(),
        }
    }

    /// How far a new kernel watcher has read its events, for it to say (see `YoungDirs`).
    pub fn watcher_progress(&self) -> WatcherProgress {
        self.young.progress()
    }

    /// The kernel watchers (`progress` of each) started, and they alone see the data root:
    /// `test` says whether they watch a bucket whole (see the module comment). Set once; later
    /// calls change nothing.
    pub fn watchers_watch_whole(&self, test: BucketTest, progress: &[WatcherProgress]) {
        self.young.watchers_started(progress);
        let _ = self.watched_whole.set(test);
    }

    /// How far every kernel watcher has read its events (see `YoungDirs`).
    pub(crate) fn watchers_read_to(&self) -> u64 {
        self.young.read_to()
    }

    /// Whether the kernel watcher watches `bucket` whole, and no scanner covers it.
    pub(crate) fn watched_whole(&self, bucket: &str) -> bool {
        self.watched_whole.get().is_some_and(|test| test(bucket))
    }

    /// A call that may make the missing directories of `key` is about to begin; `dirs_made`
    /// must follow once it returned (see `YoungDirs`).
    pub(crate) fn making_dirs(&self, bucket: &str, key: &str) {
        self.young.making(bucket, key);
    }

    /// The call `making_dirs` announced returned.
    pub(crate) fn dirs_made(&self, bucket: &str, key: &str) {
        self.young.made(bucket, key);
    }

    /// Whether `key`'s directory was made by the gateway after the watchers had read to
    /// `read_to` (`watchers_read_to` before the write began).
    pub(crate) fn in_young_dir(&self, bucket: &str, key: &str, read_to: u64) -> bool {
        self.young.holds(bucket, key, read_to)
    }

    /// A watcher or scanner of the data root is about to start: from now on the gateway's own
    /// changes are remembered for it to claim (before it starts, so that none it sees is missed).
    pub fn watcher_started(&self) {
        self.watching.store(true, Ordering::Release);
    }

    /// Whether anything will claim what is remembered (nothing is, until then).
    pub(crate) fn watching(&self) -> bool {
        self.watching.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many changes are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.values().filter(|mark| !mark.claimed).count()
    }

    pub(crate) fn mark(&self, bucket: &str, key: &str, expected: Expected) {
        let now = Instant::now();
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            match recent.entries.get_mut(id) {
                Some(mark) => {
                    // Settled after the watcher saw it: nothing more of it will reach the watcher.
                    let claimed = mark.seen && expected != Expected::Underway;
                    // A new change starts as arriving however it will.
                    mark.by_rename &= expected != Expected::Underway;
                    (mark.at, mark.expected, mark.claimed, mark.seen) = (now, expected, claimed, false);
                }
                None => {
                    let (id, place): (Id, u64) = (Arc::from(id), recent.next_place);
                    recent.next_place += 1;
                    recent.order.push_back((id.clone(), place, now));
                    let mark = Mark { at: now, expected, place, claimed: false, seen: false, by_rename: false };
                    recent.entries.insert(id, mark);
                }
            }
            self.forget_oldest(&mut recent, now);
        })
    }

    /// Clears up to `CLEARED_PER_MARK` places of changes taken since, then forgets, oldest
    /// first, what is past `capacity` (the line is kept within twice the capacity), and up to
    /// `AGED_PER_MARK` of what is older than `kept`.
    fn forget_oldest(&self, recent: &mut Recent, now: Instant) {
        let (mut clear_budget, mut aged_budget) = (CLEARED_PER_MARK, AGED_PER_MARK);
        while let Some((id, place, first)) = recent.order.front() {
            let (place, first) = (*place, *first);
            let mark = recent.entries.get(id).filter(|mark| mark.place == place);
            // A claimed change lingers a moment: it still answers for its file (see `take`).
            let lingering = |mark: &&Mark| !mark.claimed || now.duration_since(mark.at) < self.linger;
            let claimed = mark.is_some_and(|mark| mark.claimed);
            let latest = mark.filter(lingering).map(|mark| mark.at);
            let crowded = recent.entries.len() > self.capacity || recent.order.len() > 2 * self.capacity;
            let aged = now.duration_since(first) >= self.kept;
            if latest.is_none() && clear_budget > 0 {
                clear_budget -= 1;
            } else if aged && aged_budget > 0 {
                aged_budget -= 1;
            } else if !crowded {
                break;
            }
            let (id, _, _) = recent.order.pop_front().expect("a first key");
            let Some(latest) = latest else {
                if claimed {
                    recent.entries.remove(&id);
                }
                continue;
            };
            if latest != first && now.duration_since(latest) < self.kept && !crowded {
                // Marked again since: back in line with its newer time.
                recent.order.push_back((id, place, latest));
                continue;
            }
            if now.duration_since(latest) < self.kept && !recent.crowded && !claimed {
                recent.crowded = true;
                tracing::warn!(
                    capacity = self.capacity,
                    "the gateway's recent writes outgrew their bound: the oldest are forgotten, and a scan that \
                     finds those files may announce them a second time (said once)"
                );
            }
            recent.entries.remove(&id);
        }
    }

    /// Whether `mark` still answers for its change: younger than `kept`, and, once claimed,
    /// than `linger` (see the module comment).
    fn answers(&self, mark: &Mark) -> bool {
        let age = mark.at.elapsed();
        age < self.kept && (!mark.claimed || age < self.linger)
    }

    /// The change of `key` under way reaches the watcher as a rename over the key (an
    /// overwrite), never as its name appearing: a name appearing is an earlier change's.
    pub(crate) fn arrives_by_rename(&self, bucket: &str, key: &str) {
        with_id(bucket, key, |id| {
            if let Some(mark) = self.lock().entries.get_mut(id).filter(|mark| !mark.claimed) {
                mark.by_rename = true;
                // Nothing of this change was visible before the rename.
                mark.seen = false;
            }
        })
    }

    /// Forgets a change that failed, unless another one marked the key since.
    pub(crate) fn forget_underway(&self, bucket: &str, key: &str) {
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            if recent.entries.get(id).is_some_and(|mark| !mark.claimed && mark.expected == Expected::Underway) {
                recent.entries.remove(id);
            }
        })
    }

    /// Whether the file the watcher found at `key` (its size and modification time) is the
    /// one the gateway wrote there, or a change of the gateway's is under way: answered before
    /// the file is read, so the gateway's own writes cost the watcher one `statx`. A settled
    /// write is claimed, and answers for its file as long as it is remembered (see `take`).
    pub fn known_file(&self, bucket: &str, key: &str, size: u64, modified: SystemTime) -> bool {
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            let Some(mark) = recent.entries.get_mut(id).filter(|mark| self.answers(mark)) else { return false };
            match mark.expected {
                Expected::Underway => {
                    mark.seen = true;
                    true
                }
                Expected::Written { size: s, modified: m, .. } if s == size && m == modified => {
                    mark.claimed = true;
                    true
                }
                _ => false,
            }
        })
    }

    /// The watcher saw a file appear at `key`. The gateway's new keys appear so, linked into
    /// place, and nothing else of them reaches the watcher under their name: a settled write
    /// of the gateway's there is forgotten, one under way is forgotten once it settles. Someone else's file made
    /// at a key the gateway wrote a moment before costs at most a second announcement of the
    /// gateway's write, should the gateway's file be seen again; never a missed one.
    pub fn created(&self, bucket: &str, key: &str) {
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            if let Some(mark) = recent.entries.get_mut(id).filter(|mark| !mark.claimed && !mark.by_rename) {
                match mark.expected {
                    Expected::Written { .. } => mark.claimed = true,
                    Expected::Underway => mark.seen = true,
                    Expected::Gone => {}
                }
            }
        })
    }

    /// Whether what the watcher saw of `key` (the object with this ETag, or `None`: no object)
    /// is the gateway's own change, already announced. A change under way answers true as
    /// long as it is. A settled one is claimed, and still answers for what it left until it
    /// is freed: one change of the gateway's may reach the watcher as two events (a new key's
    /// name appearing, then, a moment later, the rename of the write that replaced it), and the
    /// first of them may be taken for the second's. Answering once announced the second
    /// again, as someone's POSIX write.
    pub fn take(&self, bucket: &str, key: &str, seen: Option<&str>) -> bool {
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            let Some(mark) = recent.entries.get_mut(id).filter(|mark| self.answers(mark)) else { return false };
            let ours = match (&mark.expected, seen) {
                (Expected::Underway, _) => {
                    mark.seen = true;
                    return true;
                }
                (Expected::Written { etag, .. }, Some(seen)) => etag == seen,
                (Expected::Gone, None) => true,
                _ => false,
            };
            mark.claimed |= ours;
            ours
        })
    }
}

#[cfg(test)]
mod tests;
