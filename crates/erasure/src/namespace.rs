//! The bucket namespace of an erasure-coded pool, decided by the drives together: whether a
//! bucket exists, the bucket list, a bucket's settings and object listings are read from
//! several drives and no single drive decides any of them.
//!
//! Every drive holds every bucket as a directory of its metadata namespace (a `PosixStore`)
//! and the bucket's settings in a record of its own, `.isthmus/ec/buckets/NAME.json`, stamped
//! with the time of the change. A bucket exists when at least as many of the drives that
//! answer hold it as lack it: a create or a delete reaches a majority of the drives
//! (`namespace_write_quorum`), so a drive that lost its bucket directories (an fsck, an
//! operator's mistake), one that missed a delete while it was away, or a blank replacement
//! changes nothing. A bucket's settings are the latest record among the drives that hold the
//! bucket. Drives that disagree with the decision are repaired in the background (the bucket
//! and its settings made again on a drive that lacks them); a drive's leftover of a deleted
//! bucket is cleared when the name is created again, and by `isthmus heal`.
//!
//! Decisions are kept for `DECISION_TTL` (every request's authorization reads its bucket's
//! settings): a change made through another gateway serving the same drives is seen within
//! that time, a change made through this one at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Inner;
use super::drives::Drive;
use isthmus_posix::{KeyPage, PosixStore};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::{BucketConfig, BucketInfo, ListPage, ListRequest, RequestContext, Store};

/// How long a namespace decision is reused.
const DECISION_TTL: Duration = Duration::from_secs(1);
/// Decisions kept at most (a pool with more buckets in use decides again more often).
const DECISIONS_KEPT: usize = 10_000;

/// What one drive keeps of a bucket's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct BucketRecord {
    /// When the settings were last changed (ns since the epoch): the latest record wins.
    changed_ns: u64,
    settings: BucketConfig,
}

/// A bucket as the drives decided it.
#[derive(Debug, Clone)]
pub(crate) struct BucketState {
    pub(crate) settings: BucketConfig,
    /// Drives that lacked the bucket when this was decided (listings ask them last).
    lacking: Vec<usize>,
}

/// What one drive answered about a bucket.
enum Answer {
    /// It holds the bucket, with its settings record (`None`: no record, as on
    /// pools made before records; its metadata namespace's settings stand in, as of time 0).
    Holds {
        record: Option<BucketRecord>,
    },
    Lacks,
}

/// A bucket as decided (`None`: it does not exist).
type Decision = Option<Arc<BucketState>>;

/// The pool's recent decisions.
#[derive(Default)]
pub(crate) struct Decisions {
    buckets: Mutex<HashMap<String, (Instant, Decision)>>,
}

impl Decisions {
    fn get(&self, bucket: &str) -> Option<Decision> {
        let kept = self.buckets.lock().expect("namespace decisions lock");
        kept.get(bucket).filter(|(at, _)| at.elapsed() < DECISION_TTL).map(|(_, state)| state.clone())
    }

    fn put(&self, bucket: &str, state: Decision) {
        let mut kept = self.buckets.lock().expect("namespace decisions lock");
        if kept.len() >= DECISIONS_KEPT {
            kept.retain(|_, (at, _)| at.elapsed() < DECISION_TTL);
            if kept.len() >= DECISIONS_KEPT {
                kept.clear();
            }
        }
        kept.insert(bucket.to_string(), (Instant::now(), state));
    }

    pub(crate) fn forget(&self, bucket: &str) {
        self.buckets.lock().expect("namespace decisions lock").remove(bucket);
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn gateway() -> RequestContext {
    RequestContext::process()
}

/// A drive's settings record of `bucket` (`None`: it has none, or one too damaged to use).
fn read_record(drive: &Drive, bucket: &str) -> Option<BucketRecord> {
    let bytes = drive.read_bucket_record(bucket)?;
    match serde_json::from_slice(&bytes) {
        Ok(record) => Some(record),
        Err(err) => {
            tracing::warn!(drive = %drive.path.display(), bucket, error = %err, "bucket settings record unreadable: ignored");
            None
        }
    }
}

fn write_record(drive: &Drive, bucket: &str, record: &BucketRecord, sync: bool) -> StoreResult<()> {
    let bytes = serde_json::to_vec(record).expect("a bucket record serializes");
    drive
        .write_bucket_record(bucket, &bytes, sync)
        .map_err(|e| StoreError::io("record a bucket's settings", &drive.path.join(".isthmus/ec/buckets"), e))
}

/// What `drive` (its metadata namespace `store`) holds of `bucket`.
fn ask_bucket(drive: &Drive, store: &PosixStore, bucket: &str) -> StoreResult<Answer> {
    match store.head_bucket(&gateway(), bucket) {
        Ok(()) => Ok(Answer::Holds { record: read_record(drive, bucket) }),
        Err(StoreError::NoSuchBucket) => Ok(Answer::Lacks),
        Err(err) => Err(err),
    }
}

impl Inner {
    /// Drives a bucket's creation or removal must reach: a majority of the pool's drives, and
    /// at least the object write quorum.
    pub(crate) fn namespace_write_quorum(&self) -> usize {
        self.meta_write_quorum().max(self.n() / 2 + 1)
    }

    /// Asks `question` of every drive that serves reads, at once on the drives' lanes, and
    /// hands the answers to `settle` as they come (with how many are still outstanding) until
    /// it says the matter is settled and a read quorum has answered. Once a read quorum has answered, drives still silent
    /// after `MANIFEST_GRACE` (or four times the pool's typical latency) are not waited for.
    /// Returns how many drives answered; a drive whose question failed is not counted.
    fn ask_every_drive<T: Send + 'static>(
        &self,
        what: &'static str,
        question: impl Fn(&Drive, &PosixStore) -> StoreResult<T> + Send + Sync + 'static,
        mut settle: impl FnMut(usize, T, usize) -> bool,
    ) -> usize {
        let question = Arc::new(question);
        let (tx, rx) = mpsc::channel::<(usize, StoreResult<T>)>();
        let mut asked = 0;
        for drive in &self.drives {
            let Some(store) = drive.readable() else { continue };
            asked += 1;
            let (tx, on, question) = (tx.clone(), drive.clone(), question.clone());
            drive.lane.spawn(move || {
                let _ = tx.send((on.index, on.timed(|| question(&on, &store))));
            });
        }
        drop(tx);
        let grace =
            Duration::from_micros(self.median_latency_us().unwrap_or(0).saturating_mul(4)).max(super::MANIFEST_GRACE);
        let (mut answered, mut heard, mut until) = (0, 0, None::<Instant>);
        while heard < asked {
            let answer = match until {
                None => rx.recv().ok(),
                Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())).ok(),
            };
            let Some((index, result)) = answer else { break };
            heard += 1;
            match result {
                Ok(value) => {
                    answered += 1;
                    if settle(index, value, asked - heard) && answered >= self.meta_read_quorum() {
                        break;
                    }
                }
                Err(err) => self.drives[index].failed(what, &err),
            }
            if answered >= self.meta_read_quorum() && until.is_none() {
                until = Some(Instant::now() + grace);
            }
        }
        answered
    }

    /// `bucket` as the drives decide it (`None`: it does not exist), reusing a decision made
    /// within `DECISION_TTL`.
    pub(crate) fn bucket_state(&self, bucket: &str) -> StoreResult<Decision> {
        if let Some(state) = self.decisions.get(bucket) {
            return Ok(state);
        }
        let state = self.decide_bucket(bucket)?.map(Arc::new);
        self.decisions.put(bucket, state.clone());
        Ok(state)
    }

    /// `bucket`, or NoSuchBucket.
    pub(crate) fn existing_bucket(&self, bucket: &str) -> StoreResult<Arc<BucketState>> {
        self.bucket_state(bucket)?.ok_or(StoreError::NoSuchBucket)
    }

    /// Asks the drives about `bucket`: it exists when at least as many hold it as lack it; its
    /// settings are the latest record of those that hold it. Drives that lack a bucket that
    /// exists get it back in the background.
    fn decide_bucket(&self, bucket: &str) -> StoreResult<Option<BucketState>> {
        if isthmus_store::key::validate_bucket_name(bucket).is_err() {
            return Ok(None);
        }
        let (mut holders, mut lacking) = (Vec::new(), Vec::new());
        let name = bucket.to_string();
        let answered = self.ask_every_drive(
            "look up a bucket",
            move |drive, store| ask_bucket(drive, store, &name),
            |index, answer, outstanding| {
                match answer {
                    Answer::Holds { record } => holders.push((index, record)),
                    Answer::Lacks => lacking.push(index),
                }
                // Settled once the outstanding answers cannot change the count's outcome.
                holders.len() >= lacking.len() + outstanding || lacking.len() > holders.len() + outstanding
            },
        );
        if answered < self.meta_read_quorum() {
            return Err(self.too_few(&answered.to_string()));
        }
        if holders.len() < lacking.len() {
            return Ok(None);
        }
        let latest = holders
            .iter()
            .filter_map(|(index, record)| record.as_ref().map(|r| (*index, r)))
            .max_by_key(|(_, record)| record.changed_ns);
        let settings = match latest {
            Some((_, record)) => record.settings.clone(),
            // A pool made before settings records: the holders' metadata namespaces keep them.
            None => self.legacy_settings(bucket, holders.iter().map(|(index, _)| *index))?,
        };
        let changed_ns = latest.map(|(_, record)| record.changed_ns);
        let behind = holders.iter().filter(|(_, r)| r.as_ref().map(|r| r.changed_ns) != changed_ns).map(|(i, _)| *i);
        let stale: Vec<usize> = lacking.iter().copied().chain(behind).collect();
        let record = BucketRecord { changed_ns: changed_ns.unwrap_or(0), settings: settings.clone() };
        for index in stale {
            let (drive, bucket, record, sync) =
                (self.drives[index].clone(), bucket.to_string(), record.clone(), self.strict());
            self.drives[index].lane.spawn(move || repair_bucket(&drive, &bucket, &record, sync));
        }
        Ok(Some(BucketState { settings, lacking }))
    }

    /// The settings a pool made before settings records kept in its drives' metadata
    /// namespaces: the most common among `holders`.
    fn legacy_settings(&self, bucket: &str, holders: impl Iterator<Item = usize>) -> StoreResult<BucketConfig> {
        let mut seen: BTreeMap<String, (usize, BucketConfig)> = BTreeMap::new();
        for index in holders {
            let Some(store) = self.drives[index].readable() else { continue };
            if let Ok(settings) = store.bucket_config(&gateway(), bucket) {
                let settings = BucketConfig { version: None, ..settings };
                seen.entry(settings.digest()).or_insert((0, settings)).0 += 1;
            }
        }
        Ok(seen.into_values().max_by_key(|(count, _)| *count).map(|(_, s)| s).unwrap_or_default())
    }

    /// Brings every drive that takes writes in line with the drives' decision on `bucket`
    /// (for `isthmus heal`): the bucket and its settings made on drives that lack them, a
    /// deleted bucket's leftovers cleared from drives that keep them.
    pub(crate) fn heal_bucket(&self, bucket: &str) -> StoreResult<()> {
        self.decisions.forget(bucket);
        let state = self.bucket_state(bucket)?;
        for drive in &self.drives {
            let Some(store) = drive.writable() else { continue };
            match &state {
                Some(state) => {
                    let record = read_record(drive, bucket);
                    let decided = BucketRecord { changed_ns: now_ns(), settings: state.settings.clone() };
                    let settings_differ = record.is_none_or(|r| r.settings != decided.settings);
                    if store.head_bucket(&gateway(), bucket).is_err() || settings_differ {
                        repair_bucket(drive, bucket, &decided, self.strict());
                    }
                }
                None if store.head_bucket(&gateway(), bucket).is_ok() => {
                    tracing::warn!(drive = %drive.path.display(), bucket, "clearing a drive's leftover of a deleted bucket");
                    clear_leftover(drive, &store, bucket)?;
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Every bucket of the pool: those at least as many drives hold as lack.
    pub(crate) fn bucket_list(&self) -> StoreResult<Vec<BucketInfo>> {
        let mut held: BTreeMap<String, (usize, SystemTime)> = BTreeMap::new();
        let answered = self.ask_every_drive(
            "list the buckets",
            |_, store| store.list_buckets(&gateway()),
            |_, buckets, _| {
                for bucket in buckets {
                    let entry = held.entry(bucket.name).or_insert((0, bucket.created));
                    entry.0 += 1;
                    entry.1 = entry.1.min(bucket.created);
                }
                false
            },
        );
        if answered < self.meta_read_quorum() {
            return Err(self.too_few(&answered.to_string()));
        }
        Ok(held
            .into_iter()
            .filter(|(_, (holders, _))| 2 * holders >= answered)
            .map(|(name, (_, created))| BucketInfo { name, created })
            .collect())
    }

    /// Records `settings` as `bucket`'s on every drive that takes writes (a majority must).
    pub(crate) fn record_settings(&self, bucket: &str, settings: &BucketConfig) -> StoreResult<()> {
        let record =
            BucketRecord { changed_ns: now_ns(), settings: BucketConfig { version: None, ..settings.clone() } };
        let sync = self.strict();
        let result = self.on_every_writable_drive(
            "record a bucket's settings",
            |drive, _| write_record(drive, bucket, &record, sync),
            |_| false,
            self.namespace_write_quorum(),
        );
        self.decisions.forget(bucket);
        result
    }

    /// Creates `bucket` on every drive that takes writes, clearing first what a drive kept of
    /// an earlier bucket of that name (a delete it missed while away): the name was free by
    /// the drives' decision, so nothing there is anyone's.
    pub(crate) fn make_bucket(&self, bucket: &str, settings: &BucketConfig) -> StoreResult<()> {
        let record = BucketRecord { changed_ns: now_ns(), settings: settings.clone() };
        let sync = self.strict();
        let result = self.on_every_writable_drive(
            "create a bucket",
            |drive, store| {
                match store.create_bucket(&gateway(), bucket, &Default::default()) {
                    Err(StoreError::BucketAlreadyOwnedByYou | StoreError::BucketAlreadyExists) => {
                        tracing::warn!(drive = %drive.path.display(), bucket, "clearing a drive's leftover of a deleted bucket");
                        clear_leftover(drive, store, bucket)?;
                        store.create_bucket(&gateway(), bucket, &Default::default())?;
                    }
                    other => other?,
                }
                write_record(drive, bucket, &record, sync)
            },
            |_| false,
            self.namespace_write_quorum(),
        );
        self.decisions.forget(bucket);
        result
    }

    /// Removes `bucket` from every drive that takes writes (a majority must), with its shards,
    /// uploads and settings record. A drive that still holds objects of it holds leftovers
    /// (the listing, read by quorum, found it empty) unless a majority does.
    pub(crate) fn remove_bucket(&self, bucket: &str) -> StoreResult<()> {
        let result = self.on_every_writable_drive(
            "delete a bucket",
            |drive, store| {
                match store.delete_bucket(&gateway(), bucket) {
                    Ok(()) | Err(StoreError::NoSuchBucket) => {}
                    // Tombstones of deleted objects (heal drops them later), or a record of
                    // one the drive missed the delete of: nothing the listing showed.
                    Err(StoreError::BucketNotEmpty) => clear_leftover(drive, store, bucket)?,
                    Err(err) => return Err(err),
                }
                drive
                    .remove_bucket_files(bucket)
                    .map_err(|e| StoreError::io("remove a bucket's files", &drive.path.join(".isthmus/ec"), e))
            },
            |_| false,
            self.namespace_write_quorum(),
        );
        self.decisions.forget(bucket);
        result
    }

    /// Runs `op` on every drive that takes writes; succeeds when `quorum` of them did (or
    /// answered `tolerated`), else answers the first drive's error.
    pub(crate) fn on_every_writable_drive<T>(
        &self,
        what: &str,
        op: impl Fn(&Drive, &PosixStore) -> StoreResult<T>,
        tolerated: impl Fn(&StoreError) -> bool,
        quorum: usize,
    ) -> StoreResult<()> {
        let mut done = 0;
        let mut first_error = None;
        for drive in &self.drives {
            let Some(store) = drive.writable() else { continue };
            match op(drive, &store) {
                Ok(_) => done += 1,
                Err(err) if tolerated(&err) => done += 1,
                Err(err) => {
                    if matches!(err, StoreError::Io(_) | StoreError::IoAt { .. }) {
                        drive.failed(what, &err);
                    }
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) if done < quorum => Err(err),
            _ if done < quorum => Err(self.too_few(&done.to_string())),
            _ => Ok(()),
        }
    }

    /// One page of `bucket`'s listing: the union of the listings of a read quorum of drives
    /// (a drive that lost some of the bucket's records hides nothing), each object described
    /// by the record of a drive that listed it.
    pub(crate) fn list_page(&self, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        let merged = self.merged_names(bucket, request)?;
        self.describe(bucket, merged)
    }

    /// The keys (folder objects included) of one page of `bucket`'s listing by name, and
    /// where the next page starts (`None`: this was the last).
    pub(crate) fn list_names(&self, bucket: &str, request: &ListRequest) -> StoreResult<(Vec<String>, Option<String>)> {
        let merged = self.merged_names(bucket, request)?;
        let next = merged.truncated.then(|| merged.entries.last().map(|(name, _)| name.clone())).flatten();
        Ok((merged.entries.into_iter().filter(|(_, by)| by.is_some()).map(|(name, _)| name).collect(), next))
    }

    /// One page of the union of the listings by name of a read quorum of drives.
    fn merged_names(&self, bucket: &str, request: &ListRequest) -> StoreResult<Merged> {
        let state = self.existing_bucket(bucket)?;
        let wanted = self.meta_read_quorum();
        let median = self.median_latency_us();
        let mut order: Vec<usize> = (0..self.n()).filter(|&i| self.drives[i].readable().is_some()).collect();
        order.sort_by_key(|&i| (state.lacking.contains(&i), self.is_slow(&self.drives[i], median)));
        let (tx, rx) = mpsc::channel::<(usize, StoreResult<KeyPage>)>();
        let ask = |index: usize| {
            let drive = self.drives[index].clone();
            let (tx, bucket, request) = (tx.clone(), bucket.to_string(), request.clone());
            self.drives[index].lane.spawn(move || {
                let page = match drive.readable() {
                    Some(store) => drive.timed(|| store.list_keys(&bucket, &request)),
                    None => Err(StoreError::InsufficientShards("offline".into())),
                };
                let _ = tx.send((index, page));
            });
        };
        let mut next = 0;
        while next < order.len() && next < wanted {
            ask(order[next]);
            next += 1;
        }
        let mut in_flight = next;
        let mut pages = Vec::new();
        while pages.len() < wanted && in_flight > 0 {
            let Ok((index, page)) = rx.recv() else { break };
            in_flight -= 1;
            match page {
                Ok(page) => pages.push((index, page)),
                // A drive that lost the bucket's directory lists nothing of it.
                Err(StoreError::NoSuchBucket) => pages.push((index, KeyPage::default())),
                Err(err @ (StoreError::InvalidArgument(_) | StoreError::InvalidKey(_))) => return Err(err),
                Err(err) => {
                    self.drives[index].failed("list a bucket", &err);
                    if next < order.len() {
                        ask(order[next]);
                        next += 1;
                        in_flight += 1;
                    }
                }
            }
        }
        if pages.len() < wanted {
            return Err(self.too_few(&pages.len().to_string()));
        }
        Ok(merge(pages, request.max_keys))
    }

    /// Describes each object of a merged page by the record of a drive that listed it (the
    /// quorum's when that one is damaged, or a tombstone that may be older than a write it
    /// missed).
    fn describe(&self, bucket: &str, merged: Merged) -> StoreResult<ListPage> {
        let mut page = ListPage { is_truncated: merged.truncated, ..Default::default() };
        for (name, listed_by) in merged.entries {
            page.next_marker = Some(name.clone());
            let Some(index) = listed_by else {
                page.common_prefixes.push(name);
                continue;
            };
            let store = self.drives[index].readable();
            if name.ends_with('/') {
                let folder = match &store {
                    Some(store) => store.head_object(&gateway(), bucket, &name, &Default::default()).ok(),
                    None => None,
                };
                page.objects.extend(folder);
                continue;
            }
            // (A tombstone there may be older than a write it missed: the quorum says.)
            let stored = match store.map(|store| super::read_manifest(&store, &gateway(), bucket, &name)) {
                Some(Ok(Some(stored))) if !stored.manifest.deleted => Some(stored),
                _ => self.current(bucket, &name)?,
            };
            if let Some(stored) = stored {
                page.objects.push(stored.info(&name));
            }
        }
        if !page.is_truncated {
            page.next_marker = None;
        }
        Ok(page)
    }
}

/// A page of names merged from several drives: each name with the drive that listed it as an
/// object (`None`: a common prefix), and whether more follow.
struct Merged {
    entries: Vec<(String, Option<usize>)>,
    truncated: bool,
}

/// The union of drives' listings by name, as one page of at most `max_keys` entries: only
/// entries up to the end of the shortest truncated page are certain to be complete.
fn merge(pages: Vec<(usize, KeyPage)>, max_keys: usize) -> Merged {
    let bound: Option<String> =
        pages.iter().filter(|(_, p)| p.page.is_truncated).filter_map(|(_, p)| p.page.next_marker.clone()).min();
    // Name -> the drive that listed it as an object (`None`: a common prefix).
    let mut entries: BTreeMap<String, Option<usize>> = BTreeMap::new();
    for (index, listed) in pages {
        for prefix in listed.page.common_prefixes {
            entries.insert(prefix, None);
        }
        for key in listed.keys {
            entries.entry(key).or_insert(Some(index));
        }
    }
    if let Some(bound) = &bound {
        entries.retain(|name, _| name <= bound);
    }
    let truncated = bound.is_some() || entries.len() > max_keys;
    Merged { entries: entries.into_iter().take(max_keys).collect(), truncated }
}

/// Makes `bucket` (its directory and settings `record`) again on `drive`, if it takes writes;
/// a newer record there is kept.
fn repair_bucket(drive: &Drive, bucket: &str, record: &BucketRecord, sync: bool) {
    let Some(store) = drive.writable() else { return };
    let made = match store.create_bucket(&gateway(), bucket, &Default::default()) {
        Ok(()) => true,
        Err(StoreError::BucketAlreadyOwnedByYou | StoreError::BucketAlreadyExists) => false,
        Err(err) => {
            drive.failed("make a bucket again", &err);
            return;
        }
    };
    let newer = read_record(drive, bucket).is_some_and(|r| r.changed_ns > record.changed_ns);
    if !newer && let Err(err) = write_record(drive, bucket, record, sync) {
        drive.failed("record a bucket's settings again", &err);
        return;
    }
    if made {
        tracing::info!(drive = %drive.path.display(), bucket, "bucket made again on a drive that lacked it");
    }
}

/// Clears what `drive` keeps of an earlier bucket `bucket` (records, shards, uploads), so the
/// name can be made anew there.
fn clear_leftover(drive: &Drive, store: &PosixStore, bucket: &str) -> StoreResult<()> {
    let failed = |e| StoreError::io("clear a bucket's leftover", &drive.path.join(bucket), e);
    drive.remove_bucket_dir(bucket).map_err(failed)?;
    drive.remove_bucket_files(bucket).map_err(failed)?;
    // The metadata namespace notices the directory is gone (its cached descriptor has no name).
    let _ = store.head_bucket(&gateway(), bucket);
    Ok(())
}
