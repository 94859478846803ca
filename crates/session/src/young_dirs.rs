//! Directories the gateway made that the kernel watchers may not have listed yet, measured by
//! the watchers' own progress, not by the clock. A watcher lists a new directory when it reads
//! that the directory appeared, and then finds (and announces, unless the gateway remembers
//! it) whatever was linked into it meanwhile. So a new key the gateway links into a directory
//! is remembered when that directory was made after the point up to which every watcher had
//! read its events, as it stood before the write began.
//!
//! Each watcher says how far it has read (`WatcherProgress::caught_up`: every event queued
//! before that instant has been handled, new directories listed). A directory is taken as
//! made when the call that may make it returned (`made`), and as being made, young whatever
//! the watchers read, from before that call began (`making`): a time taken before the `mkdir`
//! let a watcher's read that began between it and the `mkdir` count as having listed the
//! directory (seen in a test: a PUT just after a copy made its directory was announced
//! again). A watcher that stalls (its
//! changes wait for a thread hashing a large file) keeps the directories made since young for
//! as long as it stalls; a clock would have let them go after a fixed time. Bounded: past
//! `KEPT` directories the oldest are forgotten (a write into one may then be announced a
//! second time, never lost).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Young directories remembered at once (see the module comment).
const KEPT: usize = 100_000;
/// How long, in the watchers' reading, a directory is kept after they read past its making:
/// a write that began before that (its `read_to` older) still asks about it. Forgetting it as
/// soon as the watchers had read past it answered such a write "not young" (1 write in 4,800
/// from 4 clients making a directory every other PUT was announced twice). Longer than a
/// commit takes from its start to its question.
const ASKED_FOR: u64 = 10_000_000_000;

/// How far one watcher has read its events, in nanoseconds since the gateway's `epoch`.
#[derive(Clone)]
pub struct WatcherProgress {
    read_to: Arc<AtomicU64>,
    epoch: Instant,
}

impl WatcherProgress {
    /// Every event queued before `instant` has been handled.
    pub fn caught_up(&self, instant: Instant) {
        self.read_to.fetch_max(nanos_since(self.epoch, instant), Ordering::AcqRel);
    }
}

fn nanos_since(epoch: Instant, instant: Instant) -> u64 {
    u64::try_from(instant.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// See the module comment.
pub(crate) struct YoungDirs {
    epoch: Instant,
    /// The watchers' progress, once they started.
    watchers: OnceLock<Vec<Arc<AtomicU64>>>,
    made: Mutex<Made>,
    /// When the gateway last made a directory (0: never): a write looks further only when
    /// that is past what the watchers have read, or a call is making directories.
    last_made: AtomicU64,
    /// Calls making directories now.
    in_progress: AtomicU64,
}

#[derive(Default)]
struct Made {
    /// `bucket/dir` and when it was last made.
    dirs: HashMap<Arc<str>, u64>,
    /// In the order they were made, to forget from the front.
    order: VecDeque<(Arc<str>, u64)>,
}

impl Default for YoungDirs {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            watchers: OnceLock::new(),
            made: Mutex::default(),
            last_made: AtomicU64::new(0),
            in_progress: AtomicU64::new(0),
        }
    }
}

impl YoungDirs {
    /// A new watcher's progress, to be given to it before `watchers_started`.
    pub(crate) fn progress(&self) -> WatcherProgress {
        WatcherProgress { read_to: Arc::new(AtomicU64::new(0)), epoch: self.epoch }
    }

    /// The watchers are running: what they have read is known from now on.
    pub(crate) fn watchers_started(&self, watchers: &[WatcherProgress]) {
        let _ = self.watchers.set(watchers.iter().map(|w| w.read_to.clone()).collect());
    }

    /// How far every watcher has read (0 before they started, or without any).
    pub(crate) fn read_to(&self) -> u64 {
        let Some(watchers) = self.watchers.get() else { return 0 };
        watchers.iter().map(|w| w.load(Ordering::Acquire)).min().unwrap_or(0)
    }

    /// A call that may make the missing directories of `key` in `bucket` is about to begin:
    /// each of its directories is young until `made` says the call returned, and after that
    /// until the watchers have read past then.
    pub(crate) fn making(&self, bucket: &str, key: &str) {
        self.in_progress.fetch_add(1, Ordering::AcqRel);
        self.record(bucket, key, u64::MAX);
    }

    /// The call `making` announced returned (whatever it did).
    pub(crate) fn made(&self, bucket: &str, key: &str) {
        let now = nanos_since(self.epoch, Instant::now());
        self.record(bucket, key, now);
        self.last_made.fetch_max(now, Ordering::AcqRel);
        self.in_progress.fetch_sub(1, Ordering::AcqRel);
    }

    /// Records the directories of `key` as made at `now` (`u64::MAX`: being made).
    fn record(&self, bucket: &str, key: &str, now: u64) {
        let read_to = self.read_to();
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        let Made { dirs, order } = &mut *made;
        while let Some((dir, at)) = order.front() {
            // Made again since (or made after being made): a later place holds it.
            let current = dirs.get(dir) == Some(at);
            if current && at.saturating_add(ASKED_FOR) > read_to && order.len() < KEPT {
                break;
            }
            if current {
                dirs.remove(dir);
            }
            order.pop_front();
        }
        let path = key.trim_end_matches('/');
        let ends = path.match_indices('/').map(|(end, _)| end).chain(key.ends_with('/').then_some(path.len()));
        for end in ends {
            let dir: Arc<str> = Arc::from(format!("{bucket}/{}", &key[..end]));
            dirs.insert(dir.clone(), now);
            order.push_back((dir, now));
        }
    }

    /// Whether `key`'s directory was made by the gateway after `read_to` (what the watchers
    /// had read before the write began: `read_to()` then).
    pub(crate) fn holds(&self, bucket: &str, key: &str, read_to: u64) -> bool {
        let Some((dir, _)) = key.rsplit_once('/') else { return false };
        if self.in_progress.load(Ordering::Acquire) == 0 && self.last_made.load(Ordering::Acquire) <= read_to {
            return false;
        }
        let made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        // Only while directories are young: one allocation.
        made.dirs.get(format!("{bucket}/{dir}").as_str()).is_some_and(|at| *at > read_to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory is young until every watcher has read past when it was made, however long
    /// that takes; its parents made with it too; a key at the top of a bucket never is.
    #[test]
    fn a_directory_is_young_until_every_watcher_has_read_past_its_making() {
        let young = YoungDirs::default();
        let (first, second) = (young.progress(), young.progress());
        young.watchers_started(&[first.clone(), second.clone()]);
        let before = young.read_to();
        young.making("b", "new/dir/k");
        first.caught_up(Instant::now());
        second.caught_up(Instant::now());
        assert!(young.holds("b", "new/k", young.read_to()), "being made: young whatever was read");
        young.made("b", "new/dir/k");
        let before = before.max(young.read_to());
        for key in ["new/dir/k2", "new/k", "new/dir/deeper/k"] {
            let expected = key != "new/dir/deeper/k";
            assert_eq!(young.holds("b", key, before), expected, "{key}");
        }
        assert!(!young.holds("b", "top", before) && !young.holds("other", "new/k", before));
        first.caught_up(Instant::now());
        assert!(young.holds("b", "new/k", young.read_to()), "one watcher has not read that far");
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(young.holds("b", "new/k", young.read_to()), "a stalled watcher keeps it young");
        second.caught_up(Instant::now());
        assert!(!young.holds("b", "new/k", young.read_to()), "both have listed it");
        assert!(young.holds("b", "new/k", before), "a write that began before still remembers");
        young.making("b", "other/k");
        young.made("b", "other/k");
        assert!(young.holds("b", "new/k", before), "kept for a write that began before, though read past");
        let later = Instant::now() + std::time::Duration::from_secs(11);
        first.caught_up(later);
        second.caught_up(later);
        young.making("b", "last/k");
        young.made("b", "last/k");
        assert_eq!(young.made.lock().unwrap().dirs.len(), 1, "what every watcher read long past is forgotten");
    }

    #[test]
    fn directories_past_the_bound_are_forgotten_oldest_first() {
        let young = YoungDirs::default();
        young.watchers_started(&[young.progress()]);
        for i in 0..KEPT + 10 {
            young.making("b", &format!("d{i}/k"));
            young.made("b", &format!("d{i}/k"));
        }
        let made = young.made.lock().unwrap();
        assert!(made.order.len() <= KEPT && made.dirs.len() <= KEPT);
        assert!(made.dirs.contains_key(format!("b/d{}", KEPT + 9).as_str()) && !made.dirs.contains_key("b/d0"));
    }
}
