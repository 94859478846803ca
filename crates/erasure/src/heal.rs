//! Healing an erasure-coded pool: an object's shards are checked block by block and any that
//! is missing or rotten is rebuilt from the others; its manifest is rewritten on drives that
//! lack it or hold an older one. Reads that found a bad shard ask the background healer;
//! `isthmus heal POOL` heals everything (buckets, objects, leftovers) and brings a replaced
//! drive back online (as the background rebuild, `rebuild`, does by itself).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak, mpsc};
use std::time::{Duration, SystemTime};

use super::codec;
use super::drives::{DATA_DIR, DriveState, UPLOADS_DIR};
use super::manifest::{Segment, Stored};
use super::rebuild::Rebuilds;
use super::status::{DriveReport, HealProgress};
use super::{ErasureStore, Inner};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::{ListRequest, RequestContext, Store, StoreExt};

/// Shard files no manifest or upload names are removed by heal once this old (a write in
/// progress has not committed its manifest yet).
const ORPHAN_AGE: Duration = Duration::from_secs(3600);
/// Objects queued for the background healer beyond this are dropped (heal finds them).
const QUEUE: usize = 1024;

/// The background healer: heals objects reads found damaged, and rebuilds replaced drives
/// (`rebuild`).
pub(crate) struct Healer {
    queue: Mutex<Option<mpsc::SyncSender<(String, String)>>>,
    /// Objects queued and not yet looked at, and objects it found damaged and repaired.
    counts: Arc<HealCounts>,
    /// The rebuilds of replaced drives this process runs.
    rebuilds: Arc<Rebuilds>,
}

#[derive(Default)]
pub(crate) struct HealCounts {
    pub(crate) queued: AtomicUsize,
    pub(crate) repaired: AtomicU64,
}

impl Healer {
    pub(crate) fn start(inner: Weak<Inner>) -> Self {
        let (tx, rx) = mpsc::sync_channel::<(String, String)>(QUEUE);
        let counts = Arc::new(HealCounts::default());
        let seen = counts.clone();
        let rebuilds = Rebuilds::start(inner.clone());
        // The gateway's own work: it may be started by a read switched to a user's identity.
        let _ = isthmus_store::identity::spawn_gateway_thread("isthmus-ec-heal", move || {
            loop {
                match rx.recv_timeout(Duration::from_secs(60)) {
                    Ok((bucket, key)) => {
                        seen.queued.fetch_sub(1, Ordering::Relaxed);
                        let Some(inner) = inner.upgrade() else { return };
                        match inner.heal_object(&bucket, &key) {
                            Ok(healed) if healed.shards + healed.manifests > 0 => {
                                seen.repaired.fetch_add(1, Ordering::Relaxed);
                                tracing::info!(pool = %inner.name, bucket, key, shards = healed.shards, manifests = healed.manifests, "healed on read");
                            }
                            Ok(_) => {}
                            Err(err) => {
                                tracing::warn!(pool = %inner.name, bucket, key, error = %err, "heal on read failed")
                            }
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if inner.strong_count() == 0 {
                            return;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        });
        Self { queue: Mutex::new(Some(tx)), counts, rebuilds }
    }

    /// How far the rebuild of `drive` (being rebuilt) has come, in this process or another.
    pub(crate) fn rebuild_progress(&self, drive: &super::drives::Drive) -> HealProgress {
        self.rebuilds.progress(drive)
    }

    /// Asks for `bucket/key` to be healed soon.
    pub(crate) fn request(&self, bucket: &str, key: &str) {
        if let Some(tx) = self.queue.lock().expect("heal queue lock").as_ref() {
            // Counted before it is sent, so the healer never takes the count below zero.
            self.counts.queued.fetch_add(1, Ordering::Relaxed);
            if tx.try_send((bucket.to_string(), key.to_string())).is_err() {
                self.counts.queued.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Objects waiting for the background healer, and objects it repaired since the start.
    pub(crate) fn backlog(&self) -> (usize, u64) {
        (self.counts.queued.load(Ordering::Relaxed), self.counts.repaired.load(Ordering::Relaxed))
    }
}

/// What healing one object did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObjectHeal {
    pub(crate) shards: u64,
    pub(crate) manifests: u64,
    /// Bytes it read and wrote (about the object's size per rebuilt shard, and the records).
    pub(crate) bytes: u64,
}

/// What `heal` did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealReport {
    pub buckets: u64,
    pub objects: u64,
    pub shards_rebuilt: u64,
    pub manifests_repaired: u64,
    /// Objects with fewer than k good shards: `bucket/key` and why.
    pub unreadable: Vec<String>,
    /// Leftover shard files removed (of crashed writes and replaced objects).
    pub leftovers_removed: u64,
    pub drives: Vec<DriveReport>,
}

impl Inner {
    /// Whether shard `i` of `segment` is whole on its drive: every block's frame checks out.
    fn shard_is_good(&self, bucket: &str, segment: &Segment, i: usize) -> bool {
        let drive = &self.drives[segment.drives[i]];
        let Ok(file) = drive.open_shard(bucket, &segment.data_id) else { return false };
        if file.metadata().map(|m| m.len()).ok() != Some(segment.shard_file_len()) {
            return false;
        }
        (0..segment.blocks()).all(|b| {
            let mut framed = vec![0u8; segment.framed_len(b)];
            drive.timed(|| file.read_exact_at(&mut framed, segment.shard_offset(b))).is_ok()
                && codec::unframe(segment.framing, &framed, segment.shard_len(b)).is_some()
        })
    }

    /// Rewrites shard `i` of `segment` from the other shards, block by block.
    fn rebuild_shard(self: &Arc<Self>, bucket: &str, segment: &Segment, i: usize) -> StoreResult<()> {
        let drive = &self.drives[segment.drives[i]];
        let target = drive.path.join(DATA_DIR).join(bucket).join(&segment.data_id);
        // Staged beneath the drive's verified directory, removed unless installed.
        let staged =
            drive.stage_shard(bucket, &segment.data_id).map_err(|e| StoreError::io("create a shard", &target, e))?;
        let files = self.open_segment(bucket, segment);
        for b in 0..segment.blocks() {
            let block = self.read_block(segment, &files, b, Some(i), &None)?.block;
            let shard = codec::encode(segment.layout(), &block, segment.framing)?.swap_remove(i);
            staged
                .file
                .write_all_at(&shard, segment.shard_offset(b))
                .map_err(|e| StoreError::io("write a shard", &target, e))?;
        }
        staged.install().map_err(|e| StoreError::io("install a shard", &target, e))
    }

    /// Heals `bucket/key`: the latest manifest any drive holds is the object; its missing or
    /// rotten shards are rebuilt, and drives without it (or with an older one) get it.
    pub(crate) fn heal_object(self: &Arc<Self>, bucket: &str, key: &str) -> StoreResult<ObjectHeal> {
        self.heal_object_on(bucket, key, None)
    }

    /// As `heal_object`, checking and rebuilding shards only on drive `only` if given (a
    /// replaced drive: the others' shards are not read unless it needs them).
    pub(crate) fn heal_object_on(
        self: &Arc<Self>,
        bucket: &str,
        key: &str,
        only: Option<usize>,
    ) -> StoreResult<ObjectHeal> {
        let _lock = self.lock_key(bucket, key)?;
        let cx = RequestContext::process();
        let mut copies: Vec<(usize, Option<Stored>)> = Vec::new();
        for drive in &self.drives {
            let Some(store) = drive.writable() else { continue };
            match super::read_manifest(&store, &cx, bucket, key) {
                Ok(found) => copies.push((drive.index, found)),
                Err(StoreError::NoSuchBucket | StoreError::InvalidArgument(_)) => copies.push((drive.index, None)),
                Err(err) => drive.failed("read a manifest", &err),
            }
        }
        let Some(latest) = copies.iter().filter_map(|(_, c)| c.as_ref()).fold(None::<&Stored>, |best, c| {
            Some(match best {
                Some(b) if !c.newer_than(b) => b,
                _ => c,
            })
        }) else {
            return Ok(ObjectHeal::default());
        };
        let latest = latest.clone();
        let mut healed = ObjectHeal::default();
        for segment in &latest.manifest.segments {
            for i in 0..segment.drives.len() {
                if only.is_some_and(|d| d != segment.drives[i])
                    || self.drives[segment.drives[i]].writable().is_none()
                    || self.shard_is_good(bucket, segment, i)
                {
                    continue;
                }
                self.rebuild_shard(bucket, segment, i)?;
                healed.shards += 1;
                healed.bytes += segment.size;
            }
        }
        let mut stale_segments: Vec<Segment> = Vec::new();
        for (index, copy) in &copies {
            if copy.as_ref().is_some_and(|c| c.manifest.write_id == latest.manifest.write_id) {
                continue;
            }
            let store = self.drives[*index].writable().ok_or(StoreError::NoSuchBucket)?;
            if store.head_bucket(&cx, bucket).is_err() {
                store.create_bucket(&cx, bucket, &Default::default())?;
            }
            let encoded = latest.encode();
            super::write_manifest(&store, bucket, key, &encoded)?;
            healed.manifests += 1;
            healed.bytes += encoded.len() as u64;
            if let Some(old) = copy {
                stale_segments.extend(
                    old.manifest
                        .segments
                        .iter()
                        .filter(|s| !latest.manifest.segments.iter().any(|n| n.data_id == s.data_id))
                        .cloned(),
                );
            }
        }
        self.discard_segments(bucket, &stale_segments);
        // A delete every drive of the pool now records is done with: its tombstones go (under
        // the key's lock, so no write of the key is between the reads and the removal).
        if latest.manifest.deleted && copies.len() == self.drives.len() {
            self.remove_manifests(bucket, key)?;
        }
        Ok(healed)
    }

    /// Heals the object or folder `bucket/key` (shards only on drive `only`, if given).
    pub(crate) fn heal_key(self: &Arc<Self>, bucket: &str, key: &str, only: Option<usize>) -> StoreResult<ObjectHeal> {
        if key.ends_with('/') {
            self.heal_folder(bucket, key).map(|m| ObjectHeal { manifests: m, ..Default::default() })
        } else {
            self.heal_object_on(bucket, key, only)
        }
    }

    /// Every key of `bucket` that any drive holds.
    fn all_keys(&self, bucket: &str) -> StoreResult<BTreeSet<String>> {
        let cx = RequestContext::process();
        let mut keys = BTreeSet::new();
        for drive in &self.drives {
            let Some(store) = drive.writable() else { continue };
            let mut request = ListRequest { max_keys: 1000, ..Default::default() };
            loop {
                let page = match store.list_objects(&cx, bucket, &request) {
                    Ok(page) => page,
                    Err(StoreError::NoSuchBucket) => break,
                    Err(err) => return Err(err),
                };
                keys.extend(page.objects.into_iter().map(|o| o.key));
                if !page.is_truncated {
                    break;
                }
                request.start_after = page.next_marker;
            }
        }
        Ok(keys)
    }

    /// Copies folder objects (keys ending in '/') to drives that lack them.
    fn heal_folder(&self, bucket: &str, key: &str) -> StoreResult<u64> {
        let cx = RequestContext::process();
        let Some(info) = self
            .drives
            .iter()
            .filter_map(|d| d.writable())
            .find_map(|s| s.head_object(&cx, bucket, key, &Default::default()).ok())
        else {
            return Ok(0);
        };
        let mut repaired = 0;
        for store in self.drives.iter().filter_map(|d| d.writable()) {
            if store.head_object(&cx, bucket, key, &Default::default()).is_err() {
                let request = isthmus_store::PutRequest { meta: info.meta.clone(), ..Default::default() };
                store.put_bytes(&cx, bucket, key, b"", request)?;
                repaired += 1;
            }
        }
        Ok(repaired)
    }
}

/// Removes files under `dir` (one level of bucket directories) older than `age` that
/// `removable` allows; returns how many.
fn remove_old_files(dir: &std::path::Path, age: Duration, removable: impl Fn(&str) -> bool) -> u64 {
    let mut removed = 0;
    let Ok(buckets) = std::fs::read_dir(dir) else { return 0 };
    for bucket in buckets.flatten() {
        let Ok(files) = std::fs::read_dir(bucket.path()) else { continue };
        for file in files.flatten() {
            let old = file
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() > age);
            let name = file.file_name();
            if old && removable(name.to_str().unwrap_or_default()) && std::fs::remove_file(file.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

impl ErasureStore {
    /// Heals the whole pool: every bucket on every drive, every object's shards and manifests,
    /// leftovers removed; a replaced drive that healed cleanly is online again. `progress` is
    /// told (objects done, objects in all) as it goes.
    pub fn heal(&self, mut progress: impl FnMut(u64, u64)) -> StoreResult<HealReport> {
        let inner = self.inner();
        let cx = RequestContext::process();
        for drive in &inner.drives {
            drive.refresh(true);
        }
        let mut buckets = BTreeSet::new();
        for store in inner.drives.iter().filter_map(|d| d.writable()) {
            buckets.extend(store.list_buckets(&cx)?.into_iter().map(|b| b.name));
        }
        let mut report = HealReport { buckets: buckets.len() as u64, ..Default::default() };
        let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for bucket in &buckets {
            inner.heal_bucket(bucket)?;
            keys.insert(bucket.clone(), inner.all_keys(bucket)?);
        }
        let total: u64 = keys.values().map(|k| k.len() as u64).sum();
        let mut referenced: HashSet<String> = HashSet::new();
        // Leftovers are removed only when every object's shards are known.
        let mut complete = true;
        for (bucket, keys) in &keys {
            for key in keys {
                report.objects += 1;
                match inner.heal_key(bucket, key, None) {
                    Ok(h) => {
                        report.shards_rebuilt += h.shards;
                        report.manifests_repaired += h.manifests;
                    }
                    Err(err) => report.unreadable.push(format!("{bucket}/{key}: {err}")),
                }
                match inner.current(bucket, key) {
                    Ok(Some(current)) => referenced.extend(current.manifest.segments.into_iter().map(|s| s.data_id)),
                    Ok(None) => {}
                    Err(_) => complete = false,
                }
                progress(report.objects, total);
            }
        }
        // Shards of uploads in progress are not leftovers.
        for drive in inner.drives.iter().filter(|d| d.writable().is_some()) {
            for upload in std::fs::read_dir(drive.path.join(UPLOADS_DIR)).into_iter().flatten().flatten() {
                for dir in std::fs::read_dir(upload.path()).into_iter().flatten().flatten() {
                    for part in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                        if let Some(data_id) = std::fs::read(part.path())
                            .ok()
                            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                            .and_then(|v| v["segment"]["data_id"].as_str().map(str::to_string))
                        {
                            referenced.insert(data_id);
                        }
                    }
                }
            }
        }
        for drive in inner.drives.iter().filter(|d| complete && report.unreadable.is_empty() && d.writable().is_some())
        {
            report.leftovers_removed += remove_old_files(&drive.path.join(DATA_DIR), ORPHAN_AGE, |name| {
                let data_id = name.split('.').next().unwrap_or(name);
                !referenced.contains(data_id)
            });
        }
        if report.unreadable.is_empty() {
            for drive in inner.drives.iter().filter(|d| d.state() == DriveState::Rebuilding) {
                inner.mark_rebuilt(drive)?;
                tracing::info!(pool = %inner.name, drive = %drive.path.display(), "rebuilt drive is online");
            }
        }
        report.drives = inner.drive_reports();
        Ok(report)
    }

    /// Times a few small reads on every drive, so `drive_reports` has latencies to show in a
    /// process that has not read anything yet.
    pub fn probe_drives(&self) {
        for drive in self.inner().drives.iter().filter(|d| d.writable().is_some()) {
            for _ in 0..3 {
                let _ = drive.timed_io(0, || drive.is_formatted());
            }
        }
    }

    /// Objects waiting for the background healer (reads found them damaged, or a write left a
    /// drive behind), and objects it repaired since the pool was opened.
    pub fn heal_backlog(&self) -> (usize, u64) {
        self.inner().healer.backlog()
    }

    /// Heals one object now (what a read that found a bad shard asks the background healer).
    pub fn heal_object(&self, bucket: &str, key: &str) -> StoreResult<(u64, u64)> {
        self.inner().heal_object(bucket, key).map(|h| (h.shards, h.manifests))
    }
}
