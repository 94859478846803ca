//! The background rebuild of replaced drives. A drive formatted blank into its slot
//! (`DriveState::Rebuilding`: it takes writes, serves no reads) gets every bucket, object
//! record and shard it should hold from the other drives, one object at a time at the pool's
//! `heal_rate_mib`, on a thread with the gateway's identity; once every object is rebuilt the
//! drive is online. Its progress is kept on the drive (`rebuild.json`): a gateway restarted
//! mid-rebuild resumes there, and `isthmus pool status` in another process reads it. One
//! process rebuilds a drive at a time (a lock file on the drive), however many serve the pool.

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Inner;
use super::drives::{Drive, DriveState};
use super::status::HealProgress;
use isthmus_store::ListRequest;
use isthmus_store::error::{StoreError, StoreResult};

/// Where a rebuild keeps its progress, and the lock its rebuilder holds, on the drive rebuilt.
const PROGRESS_FILE: &str = ".isthmus/ec/rebuild.json";
const LOCK_FILE: &str = ".isthmus/ec/rebuild.lock";
/// A progress file larger than this is not one (a drive's files are untrusted).
const MAX_PROGRESS_FILE: u64 = 64 << 10;
/// How often the drives are looked at for one to rebuild.
const POLL: Duration = Duration::from_millis(500);
/// How long after a pass that could not rebuild everything the next one starts.
const RETRY: Duration = Duration::from_secs(60);
/// How long a drive another process is rebuilding is left alone before it is looked at again.
const BUSY_RETRY: Duration = Duration::from_secs(1);
/// How often the progress is saved on the drive.
const SAVE_EVERY: Duration = Duration::from_secs(1);
/// What one object costs of the rate at least (its record's write and sync).
const OBJECT_COST: u64 = 64 << 10;
/// How far the rebuild may run ahead of its rate after a slow stretch.
const BURST: Duration = Duration::from_secs(1);
/// Keys listed per drive per page.
const PAGE: usize = 1000;
/// The longest sleep between two looks at whether the pool is still open.
const NAP: Duration = Duration::from_millis(100);
/// How long the thread waits for the pool it was started for to be built.
const BIRTH: Duration = Duration::from_secs(10);

/// Where a pass stands, as saved on the drive: every object up to `key` of `bucket` (in
/// listing order) is done; `key` none: `bucket` is to be done from its start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Saved {
    bucket: String,
    key: Option<String>,
    done: u64,
    /// The objects the pass goes through, once counted.
    total: Option<u64>,
}

/// The rebuilds of one open pool: the thread that runs them and their progress.
pub(crate) struct Rebuilds {
    /// Progress of the drives this process is rebuilding (or last tried to), by slot.
    running: Mutex<HashMap<usize, HealProgress>>,
}

/// How a pass over a drive ended.
enum Outcome {
    /// Every object rebuilt: the drive is online (or it no longer needs rebuilding).
    Done,
    /// Some objects could not be rebuilt (too few drives, errors): try again later.
    Incomplete,
    /// Another process is rebuilding the drive.
    Busy,
    /// The pool was closed, or the drive left the rebuilding state (went away, or `heal`
    /// finished it).
    Stopped,
}

impl Rebuilds {
    /// Starts the rebuilder of the pool `inner` will be (it is being built: the thread waits
    /// until it is, and ends when it is dropped).
    pub(crate) fn start(inner: Weak<Inner>) -> Arc<Self> {
        let rebuilds = Arc::new(Self { running: Mutex::new(HashMap::new()) });
        let own = rebuilds.clone();
        // The gateway's own work on its own files: never a user's identity.
        let started = isthmus_store::identity::spawn_gateway_thread("isthmus-ec-rebuild", move || {
            let born = Instant::now();
            while inner.strong_count() == 0 {
                if born.elapsed() > BIRTH {
                    return;
                }
                std::thread::sleep(NAP);
            }
            own.run(&inner);
        });
        if let Err(err) = started {
            tracing::error!(error = %err, "the rebuilder of replaced drives did not start");
        }
        rebuilds
    }

    fn run(&self, pool: &Weak<Inner>) {
        let mut not_before: HashMap<usize, Instant> = HashMap::new();
        loop {
            let candidates: Vec<usize> = {
                let Some(inner) = pool.upgrade() else { return };
                if !inner.config.background_heal || inner.config.heal_rate_mib == 0 {
                    return;
                }
                inner
                    .drives
                    .iter()
                    .filter(|d| not_before.get(&d.index).is_none_or(|at| Instant::now() >= *at))
                    .filter(|d| d.state() == DriveState::Rebuilding)
                    .map(|d| d.index)
                    .collect()
            };
            for slot in candidates {
                match self.rebuild(pool, slot) {
                    Outcome::Done | Outcome::Stopped => {
                        not_before.remove(&slot);
                    }
                    Outcome::Incomplete => {
                        not_before.insert(slot, Instant::now() + RETRY);
                    }
                    Outcome::Busy => {
                        not_before.insert(slot, Instant::now() + BUSY_RETRY);
                    }
                }
            }
            if !nap(pool, POLL) {
                return;
            }
        }
    }

    /// How far the rebuild of `drive` has come: this process's figures if it runs it, else
    /// what the drive records (another process runs it), else nothing done yet.
    pub(crate) fn progress(&self, drive: &Drive) -> HealProgress {
        if let Some(progress) = self.running.lock().expect("rebuild progress lock").get(&drive.index) {
            return *progress;
        }
        load(drive).map(|s| HealProgress { done: s.done, total: s.total }).unwrap_or_default()
    }

    fn show(&self, slot: usize, saved: &Saved) {
        let progress = HealProgress { done: saved.done, total: saved.total };
        self.running.lock().expect("rebuild progress lock").insert(slot, progress);
    }

    /// One pass over every object for drive `slot`, from where the last one stopped.
    fn rebuild(&self, pool: &Weak<Inner>, slot: usize) -> Outcome {
        let (drive, rate) = match pool.upgrade() {
            Some(inner) => (inner.drives[slot].clone(), inner.config.heal_rate_mib),
            None => return Outcome::Stopped,
        };
        let Some(_lock) = try_lock(&drive) else { return Outcome::Busy };
        // Another process may have finished it while this one waited for the lock.
        drive.refresh(true);
        if drive.state() != DriveState::Rebuilding {
            return Outcome::Done;
        }
        let mut pass = Pass {
            pool,
            rebuilds: self,
            drive: &drive,
            saved: load(&drive).unwrap_or_default(),
            pacer: Pacer::new(rate),
            saved_at: Instant::now(),
            failed: 0,
            first_failure: None,
        };
        if pass.saved.done > 0 || !pass.saved.bucket.is_empty() {
            tracing::info!(drive = %drive.path.display(), done = pass.saved.done, "resuming the rebuild of a replaced drive");
        } else {
            tracing::info!(drive = %drive.path.display(), rate_mib = rate, "rebuilding a replaced drive in the background");
        }
        self.show(slot, &pass.saved);
        let outcome = pass.run();
        let Some(inner) = pool.upgrade() else { return Outcome::Stopped };
        match outcome {
            Ok(Outcome::Done) if pass.failed == 0 => match inner.mark_rebuilt(&drive) {
                Ok(()) => {
                    self.running.lock().expect("rebuild progress lock").remove(&slot);
                    tracing::info!(pool = %inner.name, drive = %drive.path.display(), objects = pass.saved.done, "rebuilt drive is online");
                    Outcome::Done
                }
                Err(err) => {
                    tracing::warn!(pool = %inner.name, drive = %drive.path.display(), error = %err, "a rebuilt drive could not be marked online");
                    Outcome::Incomplete
                }
            },
            Ok(Outcome::Done) | Ok(Outcome::Incomplete) => {
                tracing::warn!(
                    pool = %inner.name,
                    drive = %drive.path.display(),
                    failed = pass.failed,
                    first = pass.first_failure.as_deref().unwrap_or(""),
                    retry_s = RETRY.as_secs(),
                    "a replaced drive could not be rebuilt whole: it stays healing and the pass starts again (`isthmus heal POOL` lists unreadable objects)"
                );
                // The next pass starts over; this one's figures stay shown until then.
                save(&drive, &Saved::default());
                Outcome::Incomplete
            }
            Ok(other) => other,
            Err(err) => {
                tracing::warn!(pool = %inner.name, drive = %drive.path.display(), error = %err, "the rebuild of a replaced drive stopped; it starts again later");
                Outcome::Incomplete
            }
        }
    }
}

/// One pass of a rebuild.
struct Pass<'a> {
    pool: &'a Weak<Inner>,
    rebuilds: &'a Rebuilds,
    drive: &'a Arc<Drive>,
    saved: Saved,
    pacer: Pacer,
    saved_at: Instant,
    failed: u64,
    first_failure: Option<String>,
}

impl Pass<'_> {
    fn run(&mut self) -> StoreResult<Outcome> {
        if self.saved.total.is_none() {
            let Some(total) = self.count()? else { return Ok(Outcome::Stopped) };
            self.saved.total = Some(total);
            save(self.drive, &self.saved);
            self.rebuilds.show(self.drive.index, &self.saved);
        }
        let Some(buckets) = with_pool(self.pool, buckets)? else { return Ok(Outcome::Stopped) };
        let resume_at = self.saved.bucket.clone();
        for bucket in buckets.into_iter().filter(|b| *b >= resume_at) {
            let mut after = if bucket == self.saved.bucket { self.saved.key.clone() } else { None };
            if bucket != self.saved.bucket {
                self.saved.bucket = bucket.clone();
                self.saved.key = None;
            }
            match with_pool(self.pool, |inner| inner.heal_bucket(&bucket)) {
                Ok(Some(())) => {}
                Ok(None) => return Ok(Outcome::Stopped),
                Err(err) => {
                    self.fail(format!("bucket {bucket}: {err}"));
                    continue;
                }
            }
            loop {
                let Some(page) = with_pool(self.pool, |inner| key_page(inner, &bucket, after.as_deref()))? else {
                    return Ok(Outcome::Stopped);
                };
                for key in page.keys {
                    if !self.object(&bucket, &key) {
                        save(self.drive, &self.saved);
                        return Ok(Outcome::Stopped);
                    }
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        save(self.drive, &self.saved);
        Ok(if self.failed == 0 { Outcome::Done } else { Outcome::Incomplete })
    }

    /// Counts the objects of every bucket (`None`: stopped meanwhile).
    fn count(&mut self) -> StoreResult<Option<u64>> {
        let Some(names) = with_pool(self.pool, buckets)? else { return Ok(None) };
        let mut total = 0u64;
        for bucket in names {
            let mut after: Option<String> = None;
            loop {
                if self.drive.state() != DriveState::Rebuilding {
                    return Ok(None);
                }
                let Some(page) = with_pool(self.pool, |inner| key_page(inner, &bucket, after.as_deref()))? else {
                    return Ok(None);
                };
                total = total.saturating_add(page.keys.len() as u64);
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        Ok(Some(total))
    }

    /// Rebuilds one object on the drive, then waits as the rate asks; false when the pass
    /// must stop (pool closed, drive no longer rebuilding).
    fn object(&mut self, bucket: &str, key: &str) -> bool {
        let spent = {
            let Some(inner) = self.pool.upgrade() else { return false };
            if self.drive.state() != DriveState::Rebuilding {
                return false;
            }
            match inner.heal_key(bucket, key, Some(self.drive.index)) {
                Ok(h) => h.bytes,
                Err(err) => {
                    self.fail(format!("{bucket}/{key}: {err}"));
                    0
                }
            }
        };
        self.saved.done = self.saved.done.saturating_add(1);
        self.saved.bucket = bucket.to_string();
        self.saved.key = Some(key.to_string());
        self.rebuilds.show(self.drive.index, &self.saved);
        if self.saved_at.elapsed() >= SAVE_EVERY {
            save(self.drive, &self.saved);
            self.saved_at = Instant::now();
        }
        nap(self.pool, self.pacer.spend(spent))
    }

    fn fail(&mut self, what: String) {
        tracing::debug!(drive = %self.drive.path.display(), what, "not rebuilt");
        self.failed += 1;
        self.first_failure.get_or_insert(what);
    }
}

/// Keeps the rebuild at its rate: how long to wait after each object.
struct Pacer {
    started: Instant,
    spent: u64,
    bytes_per_second: f64,
}

impl Pacer {
    fn new(mib_per_second: u64) -> Self {
        Self {
            started: Instant::now(),
            spent: 0,
            bytes_per_second: (mib_per_second.max(1) as f64) * f64::from(1 << 20),
        }
    }

    /// Counts `bytes` of work (at least `OBJECT_COST`); returns how long to wait before the next.
    fn spend(&mut self, bytes: u64) -> Duration {
        self.spent = self.spent.saturating_add(bytes.max(OBJECT_COST));
        let due = Duration::from_secs_f64(self.spent as f64 / self.bytes_per_second);
        let elapsed = self.started.elapsed();
        // Behind its rate after a slow stretch: catch up by no more than `BURST`.
        if let Some(behind) = elapsed.checked_sub(due)
            && behind > BURST
        {
            self.started += behind - BURST;
        }
        due.saturating_sub(self.started.elapsed())
    }
}

/// Runs `f` on the pool if it is still open (`None`: closed), holding it no longer.
fn with_pool<T>(pool: &Weak<Inner>, f: impl FnOnce(&Inner) -> StoreResult<T>) -> StoreResult<Option<T>> {
    match pool.upgrade() {
        Some(inner) => f(&inner).map(Some),
        None => Ok(None),
    }
}

/// Sleeps `how_long` in short naps; false when the pool was closed meanwhile.
fn nap(pool: &Weak<Inner>, how_long: Duration) -> bool {
    let until = Instant::now() + how_long;
    loop {
        if pool.strong_count() == 0 {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(NAP));
    }
}

/// Every bucket of the pool (as the drives decide it), in order.
fn buckets(inner: &Inner) -> StoreResult<BTreeSet<String>> {
    Ok(inner.bucket_list()?.into_iter().map(|b| b.name).collect())
}

/// Keys of a bucket after `after`, merged from a read quorum of drives, in order.
struct KeyPage {
    keys: Vec<String>,
    /// Where the next page starts; none: this was the last.
    next: Option<String>,
}

/// The next keys of `bucket` after `after` (every acknowledged object's record is on N - m
/// drives, so on one of the m + 1 the listing reads).
fn key_page(inner: &Inner, bucket: &str, after: Option<&str>) -> StoreResult<KeyPage> {
    let request = ListRequest { max_keys: PAGE, start_after: after.map(str::to_string), ..Default::default() };
    match inner.list_names(bucket, &request) {
        Ok((keys, next)) => Ok(KeyPage { keys, next }),
        Err(StoreError::NoSuchBucket) => Ok(KeyPage { keys: Vec::new(), next: None }),
        Err(err) => Err(err),
    }
}

/// The rebuild's lock on `drive`, if no other process holds it.
fn try_lock(drive: &Drive) -> Option<std::fs::File> {
    let path = drive.path.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|err| tracing::debug!(path = %path.display(), error = %err, "no rebuild lock"))
        .ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(file)
}

/// The progress saved on `drive`, if it holds a readable one.
fn load(drive: &Drive) -> Option<Saved> {
    let file = std::fs::File::open(drive.path.join(PROGRESS_FILE)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_PROGRESS_FILE + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_PROGRESS_FILE {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

fn save(drive: &Drive, saved: &Saved) {
    let bytes = serde_json::to_vec(saved).expect("progress serializes");
    if let Err(err) = super::write_atomically(&drive.path.join(PROGRESS_FILE), &bytes, false) {
        tracing::debug!(drive = %drive.path.display(), error = %err, "rebuild progress not saved");
    }
}

impl Inner {
    /// Marks a drive that was rebuilt whole online, its rebuild's progress removed.
    pub(crate) fn mark_rebuilt(&self, drive: &Drive) -> StoreResult<()> {
        drive.write_format(false)?;
        drive.refresh(true);
        let _ = std::fs::remove_file(drive.path.join(PROGRESS_FILE));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacer_keeps_the_rate_and_catches_up_by_a_burst_at_most() {
        let mut pacer = Pacer::new(1);
        // 1 MiB at 1 MiB/s: about a second to wait.
        let wait = pacer.spend(1 << 20);
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1), "{wait:?}");
        // A tiny object costs `OBJECT_COST` of the rate.
        let mut pacer = Pacer::new(1);
        let wait = pacer.spend(1);
        assert!(wait > Duration::from_millis(50), "{wait:?}");
        // Long behind (as after a slow stretch): at most `BURST` of catching up.
        let mut pacer = Pacer::new(1);
        pacer.started -= Duration::from_secs(100);
        assert_eq!(pacer.spend(1 << 20), Duration::ZERO);
        let mut waited_for = 0;
        while pacer.spend(1 << 20).is_zero() {
            waited_for += 1;
            assert!(waited_for < 5, "caught up by more than a burst");
        }
    }
}
