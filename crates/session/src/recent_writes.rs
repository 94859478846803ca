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
//! Nothing is remembered until a watcher or scanner of the data root starts (`watcher_started`):
//! with `notify_watch = "off"` nothing would ever claim a change, and every write to a bucket
//! with rules paid for remembering it, then for forgetting the oldest of 100,000.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long the gateway's own writes are remembered for the watcher (and for scans of shared
/// file systems, which see a change up to their interval later).
const RECENT_KEPT: Duration = Duration::from_secs(120);
/// The gateway's own writes remembered at once; past it the oldest are forgotten (their files
/// may then be announced a second time by a scan, never lost).
const RECENT_CAPACITY: usize = 100_000;
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

/// See the module comment.
pub struct RecentWrites {
    inner: Mutex<Recent>,
    /// Whether a watcher or scanner claims what is remembered (see the module comment).
    watching: AtomicBool,
    kept: Duration,
    capacity: usize,
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
}

impl Default for RecentWrites {
    fn default() -> Self {
        Self::bounded(RECENT_KEPT, RECENT_CAPACITY)
    }
}

impl RecentWrites {
    fn bounded(kept: Duration, capacity: usize) -> Self {
        Self { inner: Mutex::new(Recent::default()), watching: AtomicBool::new(false), kept, capacity: capacity.max(1) }
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
                    (mark.at, mark.expected, mark.claimed, mark.seen) = (now, expected, claimed, false);
                }
                None => {
                    let (id, place): (Id, u64) = (Arc::from(id), recent.next_place);
                    recent.next_place += 1;
                    recent.order.push_back((id.clone(), place, now));
                    recent.entries.insert(id, Mark { at: now, expected, place, claimed: false, seen: false });
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
            let claimed = mark.is_some_and(|mark| mark.claimed);
            let latest = mark.filter(|mark| !mark.claimed).map(|mark| mark.at);
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
            if now.duration_since(latest) < self.kept && !recent.crowded {
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
    /// write answers true once.
    pub fn known_file(&self, bucket: &str, key: &str, size: u64, modified: SystemTime) -> bool {
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            let Some(mark) = recent.entries.get_mut(id).filter(|mark| !mark.claimed) else { return false };
            if mark.at.elapsed() >= self.kept {
                return false;
            }
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
            if let Some(mark) = recent.entries.get_mut(id).filter(|mark| !mark.claimed) {
                match mark.expected {
                    Expected::Written { .. } => mark.claimed = true,
                    Expected::Underway => mark.seen = true,
                    Expected::Gone => {}
                }
            }
        })
    }

    /// Whether what the watcher saw of `key` (the object with this ETag, or `None`: no object)
    /// is the gateway's own change, already announced. A settled change answers true once; one
    /// under way, as long as it is.
    pub fn take(&self, bucket: &str, key: &str, seen: Option<&str>) -> bool {
        with_id(bucket, key, |id| {
            let mut recent = self.lock();
            let Some(mark) = recent.entries.get_mut(id).filter(|mark| !mark.claimed) else { return false };
            if mark.at.elapsed() >= self.kept {
                return false;
            }
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
mod tests {
    use super::*;

    fn written(etag: &str) -> Expected {
        Expected::Written { etag: etag.into(), size: 1, modified: SystemTime::UNIX_EPOCH }
    }

    /// A sustained write rate to keys the watcher never settles (new keys linked into place
    /// from unnamed files) once filled the map to its bound, then emptied it at once, under
    /// the lock, with a warning each time. Now the oldest go one at a time and the newest stay.
    #[test]
    fn past_the_bound_the_oldest_are_forgotten_one_at_a_time() {
        let recent = RecentWrites::bounded(Duration::from_secs(120), 100);
        let mark = |i: usize| {
            recent.mark("b", &format!("k{i}"), Expected::Underway);
            recent.mark("b", &format!("k{i}"), written("e"));
        };
        for i in 0..150 {
            mark(i);
            assert_eq!(recent.len(), (i + 1).min(100), "full, never emptied");
        }
        assert!(recent.take("b", "k50", Some("e")) && !recent.take("b", "k49", Some("e")));
        for i in 150..1000 {
            mark(i);
        }
        assert_eq!(recent.len(), 100);
        assert!(recent.take("b", "k999", Some("e")), "the newest is remembered");
        assert!(recent.take("b", "k900", Some("e")));
        assert!(!recent.take("b", "k899", Some("e")), "the oldest were forgotten");
        assert!(recent.lock().crowded);
    }

    /// The watcher often sees a new key appear before the request that linked it settles its
    /// mark. Nothing claimed such a change afterwards: it stayed first in line for `kept`,
    /// nothing behind it was cleared, and sustained writes filled the memory to its bound (and
    /// warned that it outgrew it). Now it is claimed when it settles, and the memory stays as
    /// small as what the watcher has not seen yet.
    #[test]
    fn a_change_seen_under_way_is_claimed_when_it_settles_and_holds_nothing_back() {
        let recent = RecentWrites::bounded(Duration::from_secs(120), 1000);
        for i in 0..5000 {
            let key = format!("k{i}");
            recent.mark("b", &key, Expected::Underway);
            if i % 10 == 0 {
                // Seen while under way: by its name appearing, by its file found, by its going.
                match i % 30 {
                    0 => recent.created("b", &key),
                    10 => assert!(recent.known_file("b", &key, 1, SystemTime::UNIX_EPOCH)),
                    _ => assert!(recent.take("b", &key, None)),
                }
                recent.mark("b", &key, written("e"));
                assert!(!recent.take("b", &key, Some("e")), "claimed as it settled");
            } else {
                recent.mark("b", &key, written("e"));
                recent.created("b", &key);
            }
        }
        assert_eq!(recent.len(), 0);
        assert!(recent.lock().entries.len() <= 2 * CLEARED_PER_MARK, "{}", recent.lock().entries.len());
        assert!(!recent.lock().crowded, "never past its bound");
        // A change under way that the watcher saw, marked under way again, waits for its own.
        recent.mark("b", "again", Expected::Underway);
        recent.created("b", "again");
        recent.mark("b", "again", Expected::Underway);
        recent.mark("b", "again", written("f"));
        assert!(recent.take("b", "again", Some("f")));
    }

    /// What the watcher claims is only marked so (its thread frees nothing a request thread
    /// allocated); the request threads' next marks free it, a few per mark.
    #[test]
    fn claimed_changes_are_freed_by_the_next_marks_not_by_the_watcher() {
        let recent = RecentWrites::bounded(Duration::from_secs(120), 1000);
        for i in 0..100 {
            recent.mark("b", &format!("k{i}"), written("e"));
        }
        for i in 0..100 {
            recent.created("b", &format!("k{i}"));
        }
        assert_eq!(recent.len(), 0, "claimed: as good as forgotten");
        assert!(!recent.take("b", "k7", Some("e")), "a claimed change answers no more");
        assert_eq!(recent.lock().entries.len(), 100, "kept for a request thread to free");
        let marks = 100usize.div_ceil(CLEARED_PER_MARK);
        for i in 0..marks {
            recent.mark("b", &format!("new{i}"), written("e"));
        }
        assert_eq!(recent.lock().entries.len(), marks, "freed by the marks that followed");
        assert_eq!(recent.lock().order.len(), marks);
        // A claimed key marked again is remembered again.
        recent.mark("b", "k0", written("f"));
        recent.created("b", "k0");
        recent.mark("b", "k0", written("g"));
        assert!(recent.take("b", "k0", Some("g")));
    }

    #[test]
    fn a_change_older_than_kept_is_forgotten_when_the_next_is_marked() {
        let recent = RecentWrites::bounded(Duration::from_millis(50), 100);
        recent.mark("b", "old", written("e"));
        std::thread::sleep(Duration::from_millis(80));
        recent.mark("b", "new", written("e"));
        assert_eq!(recent.len(), 1);
        assert!(!recent.take("b", "old", Some("e")));
        assert!(recent.take("b", "new", Some("e")));
        assert!(!recent.lock().crowded, "forgetting by age is no crowding");
    }

    /// After a burst and a quiet spell, the next mark does not forget the whole burst under
    /// the lock: a few aged changes go per mark, and every mark makes progress.
    #[test]
    fn aged_changes_go_a_few_per_mark() {
        let recent = RecentWrites::bounded(Duration::from_millis(50), 1000);
        for i in 0..100 {
            recent.mark("b", &format!("burst{i}"), written("e"));
        }
        std::thread::sleep(Duration::from_millis(80));
        recent.mark("b", "next", written("e"));
        assert_eq!(recent.len(), 101 - AGED_PER_MARK);
        for i in 0..5 {
            recent.mark("b", &format!("more{i}"), written("e"));
        }
        assert_eq!(recent.len(), 101 - 6 * AGED_PER_MARK + 5);
        for i in 5..20 {
            recent.mark("b", &format!("more{i}"), written("e"));
        }
        // The whole burst is gone; "next" and the 20 marked after it stay.
        assert_eq!(recent.len(), 21);
        assert!(!recent.take("b", "burst99", Some("e")), "an aged change is not answered for");
    }

    #[test]
    fn a_key_marked_again_keeps_its_latest_change_and_one_place_in_line() {
        let recent = RecentWrites::bounded(Duration::from_secs(120), 2);
        recent.mark("b", "a", Expected::Underway);
        recent.mark("b", "a", written("1"));
        recent.mark("b", "a", Expected::Underway);
        recent.mark("b", "a", written("2"));
        assert_eq!(recent.lock().order.len(), 1);
        assert!(!recent.take("b", "a", Some("1")), "the earlier change is not the latest");
        assert!(recent.take("b", "a", Some("2")));
        // Taken keys leave their places behind; the line stays within twice the bound.
        for i in 0..10 {
            recent.mark("b", &format!("t{i}"), written("e"));
            assert!(recent.take("b", &format!("t{i}"), Some("e")));
        }
        assert!(recent.lock().order.len() <= 4);
        assert_eq!(recent.len(), 0);
    }

    /// The gateway's new keys reach the watcher only as the name appearing: that settles the
    /// write, so a sustained write rate no longer keeps the map at its bound.
    #[test]
    fn a_write_is_settled_when_its_name_appears_and_one_under_way_is_kept() {
        let recent = RecentWrites::bounded(Duration::from_secs(120), 100);
        for i in 0..1000 {
            let key = format!("k{i}");
            recent.mark("b", &key, Expected::Underway);
            recent.mark("b", &key, written("e"));
            recent.created("b", &key);
        }
        assert_eq!(recent.len(), 0);
        assert!(!recent.lock().crowded);
        recent.mark("b", "busy", Expected::Underway);
        recent.created("b", "busy");
        assert!(recent.take("b", "busy", Some("anything")), "still under way");
        recent.mark("b", "gone", Expected::Gone);
        recent.created("b", "gone");
        assert!(recent.take("b", "gone", None), "a removal is not settled by a file appearing");
        recent.created("other", "k1");
        assert_eq!(recent.len(), 1);
    }

    /// Taken changes left their places in line until the line reached twice the bound: under
    /// sustained writes settled by the watcher, 200,000 stale places, one cold eviction per
    /// write. Now they are cleared as they come up, also when the key was marked again.
    #[test]
    fn places_of_taken_changes_leave_the_line_as_they_come_up() {
        let recent = RecentWrites::bounded(Duration::from_secs(120), 1000);
        for i in 0..5000 {
            let key = format!("k{}", i % 700);
            recent.mark("b", &key, Expected::Underway);
            recent.mark("b", &key, written("e"));
            // The watcher settles each a few writes later.
            if i >= 3 {
                recent.created("b", &format!("k{}", (i - 3) % 700));
            }
            assert!(recent.lock().order.len() <= 8, "write {i}: {} places", recent.lock().order.len());
        }
        assert_eq!(recent.len(), 3);
        assert!(!recent.lock().crowded);
        assert!(recent.take("b", "k99", Some("e")) && recent.take("b", "k98", Some("e")));
    }

    #[test]
    fn an_underway_change_that_failed_is_forgotten_unless_marked_again() {
        let recent = RecentWrites::default();
        recent.mark("b", "k", Expected::Underway);
        assert!(recent.known_file("b", "k", 5, SystemTime::UNIX_EPOCH), "under way: the gateway's");
        recent.forget_underway("b", "k");
        assert!(!recent.known_file("b", "k", 5, SystemTime::UNIX_EPOCH));
        recent.mark("b", "k", written("e"));
        recent.forget_underway("b", "k");
        assert!(recent.known_file("b", "k", 1, SystemTime::UNIX_EPOCH), "settled, so kept");
        assert!(!recent.known_file("b", "k", 1, SystemTime::UNIX_EPOCH), "answered once");
    }
}
