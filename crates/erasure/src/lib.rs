//! Erasure-coded pools: objects cut into blocks, each block into k data and m parity shards
//! (`codec`), written to k + m of the pool's N drive directories chosen by a stable hash of the
//! bucket and key; small objects kept whole in their manifest. Every drive holds every
//! object's manifest (`manifest`) in its own metadata namespace (`drives`), committed by
//! quorum; reads hedge around slow drives and rebuild from parity (`read`), drives judged
//! slow on their service times (`latency`); heal repairs (`heal`), a replaced drive is rebuilt
//! in the background (`rebuild`), and the pool reports its drives and quorums (`status`).
//! `ErasureStore` is the `Store`: its calls (`store`, `multipart`) are crate-private and reached
//! only through it, each run with the gateway's identity (`gateway_files`).

pub mod codec;
mod drive_files;
mod drives;
mod format;
mod gateway_files;
mod heal;
mod lanes;
mod latency;
mod manifest;
mod multipart;
mod namespace;
mod read;
mod rebuild;
mod status;
mod store;
mod write;

use std::path::PathBuf;
use std::sync::{Arc, mpsc};

pub use drives::DriveState;
pub use drives::write_atomically;
pub use heal::HealReport;
pub use status::{DriveReport, HealProgress, PoolStatus};

use codec::Layout;
use drives::Drive;
use isthmus_posix::StoreOptions;
use isthmus_store::RequestContext;
use isthmus_store::error::{StoreError, StoreResult};
use manifest::Stored;

/// The shortest wait for a manifest before one more drive is asked.
const MANIFEST_HEDGE_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

/// The least time drives that have not yet written a record get once the write quorum has it.
const MANIFEST_GRACE: std::time::Duration = std::time::Duration::from_millis(20);

/// Default block size: each block of this many bytes becomes k + m shards.
pub const DEFAULT_BLOCK_SIZE: u64 = 1 << 20;
/// Objects up to this size are kept whole in their manifest (on every drive) rather than as
/// k + m tiny shard files.
pub const DEFAULT_INLINE_LIMIT: u64 = 16 << 10;

/// Default pace of the background rebuild of a replaced drive, in MiB of objects a second.
pub const DEFAULT_HEAL_RATE_MIB: u64 = 128;

/// How an erasure-coded pool is laid out (the `[[pool]]` entry of kind "erasure").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasureConfig {
    /// One directory per drive (or per mount); N of them.
    pub drives: Vec<PathBuf>,
    /// k: data shards per block.
    pub data: usize,
    /// m: parity shards per block (drives that may be lost).
    pub parity: usize,
    pub block_size: u64,
    pub inline_limit: u64,
    /// Read an extra shard when a drive is slower than its peers.
    pub hedged_reads: bool,
    /// What an object's ETag is (the pool's `etag` key).
    pub etag: EtagPolicy,
    /// The pace of the background rebuild of a replaced drive, in MiB of objects a second
    /// (the pool's `heal_rate_mib`); 0: no background rebuild (`isthmus heal` rebuilds).
    pub heal_rate_mib: u64,
    /// Whether this process rebuilds replaced drives in the background (a gateway does; the
    /// one-shot admin commands, which open the pool beside it, do not).
    pub background_heal: bool,
}

/// What the ETag of an object written to an erasure-coded pool is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EtagPolicy {
    /// The MD5 of the bytes, as S3 gives for single-part uploads (`etag = "md5"`, the default).
    #[default]
    Md5,
    /// A tag unique to the write (`etag = "unique"`), unless the client declared a Content-MD5,
    /// which is then computed, verified and used. MD5 runs at about 0.6 GiB/s on one core and
    /// took a quarter of the CPU of an erasure write (profile in docs/benchmarks/pools.md): a pool written at
    /// disk speed by clients that check checksums, not ETags, can do without it. An object's
    /// ETag then ends in "-1" (clients do not take it for an MD5), a part's is 32 random hex
    /// digits (the multipart ETag is computed from the parts' as usual).
    Unique,
}

impl EtagPolicy {
    /// Parses the pool table's `etag` value.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "md5" => Ok(Self::Md5),
            "unique" => Ok(Self::Unique),
            other => Err(format!("etag = {other:?}: write etag = \"md5\" (the default) or etag = \"unique\"")),
        }
    }
}

impl ErasureConfig {
    pub fn new(drives: Vec<PathBuf>, data: usize, parity: usize) -> Self {
        Self {
            drives,
            data,
            parity,
            block_size: DEFAULT_BLOCK_SIZE,
            inline_limit: DEFAULT_INLINE_LIMIT,
            hedged_reads: true,
            etag: EtagPolicy::Md5,
            heal_rate_mib: DEFAULT_HEAL_RATE_MIB,
            background_heal: true,
        }
    }

    fn check(&self) -> StoreResult<Layout> {
        let layout = Layout::new(self.data, self.parity)?;
        if self.drives.len() < layout.shards() {
            return Err(StoreError::InvalidArgument(format!(
                "{}+{} needs at least {} drives, {} are listed",
                self.data,
                self.parity,
                layout.shards(),
                self.drives.len()
            )));
        }
        if !(4096..=1 << 30).contains(&self.block_size) {
            return Err(StoreError::InvalidArgument(format!("block_size {} is outside 4 KiB..1 GiB", self.block_size)));
        }
        for (i, a) in self.drives.iter().enumerate() {
            if self.drives[..i].contains(a) {
                return Err(StoreError::InvalidArgument(format!("drive {} is listed twice", a.display())));
            }
        }
        Ok(layout)
    }
}

/// What the engine keeps of an open erasure-coded pool (shared with readers and the healer).
pub(crate) struct Inner {
    name: String,
    config: ErasureConfig,
    layout: Layout,
    /// Shared with the jobs that run on their lanes.
    drives: Vec<Arc<Drive>>,
    options: StoreOptions,
    healer: heal::Healer,
    /// The bucket namespace as the drives last decided it.
    decisions: namespace::Decisions,
}

/// An erasure-coded pool as a `Store`. Its files are the gateway's: every call, and every read
/// and write of the streams it returns, runs with the gateway's identity whatever identity the
/// calling thread has (`gateway_files`), so no caller has to remember to wrap it.
pub struct ErasureStore {
    calls: ErasureCalls,
}

/// The pool's calls as its drives answer them, with the calling thread's identity (`store`,
/// `multipart`): crate-private, so that only `ErasureStore` reaches them.
pub(crate) struct ErasureCalls {
    inner: Arc<Inner>,
}

impl ErasureStore {
    /// The drive (index among `drives`) where the shards of a single-part object `bucket/key`
    /// start: benchmarks use it to give objects the same placement in several pools.
    pub fn placement_start(bucket: &str, key: &str, drives: usize) -> usize {
        (Inner::placement_hash(bucket, key) % drives.max(1) as u64) as usize
    }

    /// Opens the pool `name` over its drives, formatting them on first use. Each drive is
    /// judged by the identity it carries (`format`): this slot's drive is online (or healing,
    /// or read-only); a missing one is offline; another pool's or another slot's is foreign and
    /// a blank directory where a mounted disk was is unformatted, both never written; a blank
    /// replacement is formatted into its slot and rebuilt in the background (`rebuild`, unless
    /// `background_heal` is off) or by `heal`.
    pub fn open(name: &str, config: ErasureConfig, options: StoreOptions) -> StoreResult<Self> {
        let layout = config.check()?;
        let identity = format::resolve(name, &config.drives)?;
        let drives: Vec<Arc<Drive>> = config
            .drives
            .iter()
            .enumerate()
            .map(|(i, path)| Arc::new(Drive::new(i, path.clone(), identity.clone(), options)))
            .collect();
        for drive in &drives {
            drive.refresh(true);
        }
        let inner = Arc::new_cyclic(|weak| Inner {
            name: name.to_string(),
            config,
            layout,
            drives,
            options,
            healer: heal::Healer::start(weak.clone()),
            decisions: namespace::Decisions::default(),
        });
        let n = inner.n();
        let online = inner.drives.iter().filter(|d| d.readable().is_some()).count();
        let writable = inner.drives.iter().filter(|d| d.writable().is_some()).count();
        if online < inner.meta_read_quorum() {
            tracing::warn!(pool = name, online, drives = n, "erasure pool has too few drives online to serve reads");
        }
        if writable < inner.meta_write_quorum() {
            tracing::warn!(
                pool = name,
                writable,
                drives = n,
                needed = inner.meta_write_quorum(),
                "erasure pool has too few drives taking writes to accept writes"
            );
        }
        Ok(Self { calls: ErasureCalls { inner } })
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.calls.inner
    }

    pub fn name(&self) -> &str {
        &self.inner().name
    }

    /// Each drive's state and, when it is not online, why and what the operator does about it
    /// (as the log says when the state changes), for status output.
    pub fn drive_states(&self) -> Vec<(DriveState, String)> {
        self.inner().drives.iter().map(|d| (d.state(), d.why())).collect()
    }

    pub fn config(&self) -> &ErasureConfig {
        &self.inner().config
    }
}

impl Inner {
    fn n(&self) -> usize {
        self.drives.len()
    }

    /// Drives whose shard writes a segment needs: k, or k + 1 when k = m (so two halves of
    /// the drives never both hold a complete write).
    fn shard_write_quorum(&self) -> usize {
        self.layout.data + usize::from(self.layout.data == self.layout.parity)
    }

    /// Drives a manifest must reach for a write to succeed: all but m. With reads asking m + 1
    /// drives, a read always meets a drive that took the latest acknowledged write.
    fn meta_write_quorum(&self) -> usize {
        self.n() - self.layout.parity
    }

    fn meta_read_quorum(&self) -> usize {
        self.layout.parity + 1
    }

    fn strict(&self) -> bool {
        self.options.durability == isthmus_store::Durability::Strict
    }

    /// A stable hash of `bucket/key`: where its shards start and its reads begin.
    fn placement_hash(bucket: &str, key: &str) -> u64 {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, format!("{bucket}/{key}").as_bytes())
    }

    /// The drives of a new segment of `bucket/key`: k + m consecutive drives from its hash.
    /// (`placement_start` tells where an object's first segment starts, for tools.)
    fn placement(&self, bucket: &str, key: &str, salt: u64) -> Vec<usize> {
        let start = (Self::placement_hash(bucket, key).wrapping_add(salt) % self.n() as u64) as usize;
        (0..self.layout.shards()).map(|i| (start + i) % self.n()).collect()
    }

    /// The typical service time of the pool's drives per MiB (median of their means), if
    /// measured: what a drive is judged slow against.
    fn median_latency_us(&self) -> Option<u64> {
        median(self.drives.iter().filter_map(|d| d.latency.mean_us()).collect())
    }

    /// The typical wait for an answer of the pool's drives per MiB, queue included (median of
    /// their means), if measured: how late an answer is before a read asks one more drive.
    fn median_wait_us(&self) -> Option<u64> {
        median(self.drives.iter().filter_map(|d| d.latency.wait_us()).collect())
    }

    /// Whether `drive` is much slower than its peers, whose median service time is `median_us`
    /// (its own service time 4x that and over 2 ms per MiB), or stalled: reads go around it
    /// while another drive can serve. Service times, not waits: under many streams every
    /// drive's queue is long now and then, and a slow drive that reads go around has a short
    /// one.
    fn is_slow(&self, drive: &Drive, median_us: Option<u64>) -> bool {
        let (mean, slow) = match (drive.latency.mean_us(), median_us) {
            (Some(mean), Some(median)) => (mean, mean > 2_000 && mean > 4 * median.max(1)),
            (mean, _) => (mean.unwrap_or(0), false),
        };
        let slow = slow || drive.latency.stalled();
        drive.judged_slow(slow, mean, median_us.unwrap_or(0));
        slow
    }

    /// Drives in the order reads of `bucket/key` should ask them: from the key's hash on,
    /// drives much slower than their peers last.
    fn read_order(&self, bucket: &str, key: &str) -> Vec<usize> {
        let start = (Self::placement_hash(bucket, key) % self.n() as u64) as usize;
        let median = self.median_latency_us();
        let slow: Vec<bool> = self.drives.iter().map(|d| self.is_slow(d, median)).collect();
        let mut order: Vec<usize> = (0..self.n()).map(|i| (start + i) % self.n()).collect();
        order.sort_by_key(|&d| slow[d]);
        order
    }

    fn too_few(&self, answered: &str) -> StoreError {
        StoreError::InsufficientShards(format!(
            "pool {:?}: {answered} of its {} drives answered; {} are needed",
            self.name,
            self.n(),
            self.meta_read_quorum()
        ))
    }

    /// The current manifest of `bucket/key`: the latest of those m + 1 online drives hold
    /// (`None` when that is a tombstone: the object was deleted).
    /// `NoSuchBucket` when none of them has the bucket. The m + 1 are asked at once on their
    /// drives' lanes, slow drives last, and one more is asked whenever an answer is late (as
    /// shard reads hedge): a slow or stalled drive does not hold up a HEAD, a GET or a commit.
    /// Asks still queued when the quorum has answered are dropped unrun.
    fn current(&self, bucket: &str, key: &str) -> StoreResult<Option<Stored>> {
        let quorum = self.meta_read_quorum();
        let order: Vec<usize> =
            self.read_order(bucket, key).into_iter().filter(|&i| self.drives[i].readable().is_some()).collect();
        let (tx, rx) = mpsc::channel::<(usize, StoreResult<Option<Stored>>)>();
        let wanted = read::Wanted::default();
        let ask = |index: usize| {
            let drive = self.drives[index].clone();
            let (tx, bucket, key, wanted) = (tx.clone(), bucket.to_string(), key.to_string(), wanted.token());
            self.drives[index].lane.spawn(move || {
                if !wanted.still() {
                    return;
                }
                let Some(store) = drive.readable() else {
                    let _ = tx.send((index, Err(StoreError::InsufficientShards("offline".into()))));
                    return;
                };
                let found = drive.timed(|| read_manifest(&store, &RequestContext::process(), &bucket, &key));
                let _ = tx.send((index, found));
            });
        };
        let mut next = 0;
        while next < order.len() && next < quorum {
            ask(order[next]);
            next += 1;
        }
        let mut in_flight = next;
        let wait = std::time::Duration::from_micros(self.median_wait_us().unwrap_or(0).saturating_mul(3))
            .max(MANIFEST_HEDGE_WAIT);
        let (mut answered, mut buckets_missing) = (0, 0);
        let mut latest: Option<Stored> = None;
        while answered < quorum && in_flight > 0 {
            let (index, found) = match rx.recv_timeout(wait) {
                Ok(answer) => answer,
                Err(_) => {
                    // Late: one more drive (the late one may still answer).
                    if next < order.len() {
                        ask(order[next]);
                        next += 1;
                        in_flight += 1;
                    }
                    continue;
                }
            };
            in_flight -= 1;
            match found {
                Ok(Some(stored)) => {
                    answered += 1;
                    if latest.as_ref().is_none_or(|l| stored.newer_than(l)) {
                        latest = Some(stored);
                    }
                }
                Ok(None) | Err(StoreError::NoSuchKey) => answered += 1,
                Err(StoreError::NoSuchBucket) => {
                    answered += 1;
                    buckets_missing += 1;
                }
                Err(
                    err @ (StoreError::InvalidKey(_) | StoreError::KeyTooLong(_) | StoreError::InvalidBucketName(_)),
                ) => {
                    return Err(err);
                }
                // A manifest that does not parse is as good as missing (heal rewrites it).
                Err(StoreError::InvalidArgument(_)) => answered += 1,
                Err(err) => {
                    self.drives[index].failed("read a manifest", &err);
                    if next < order.len() {
                        ask(order[next]);
                        next += 1;
                        in_flight += 1;
                    }
                }
            }
        }
        if answered < quorum {
            return Err(self.too_few(&answered.to_string()));
        }
        if buckets_missing == answered {
            return Err(StoreError::NoSuchBucket);
        }
        // A delete is the latest write: no object.
        Ok(latest.filter(|stored| !stored.manifest.deleted))
    }

    /// Takes `bucket/key`'s commit lock (on the first drive that takes writes).
    fn lock_key(&self, bucket: &str, key: &str) -> StoreResult<drive_files::KeyLock> {
        self.lock(drive_files::LockKind::Key, bucket, key)
    }

    /// Takes a lock on the first drive that takes writes and can hold it (a full drive may be
    /// unable to make a lock file: the next one is asked).
    fn lock(&self, kind: drive_files::LockKind, bucket: &str, name: &str) -> StoreResult<drive_files::KeyLock> {
        let mut last = None;
        for drive in self.drives.iter().filter(|d| d.writable().is_some()) {
            match drive.lock(kind, bucket, name) {
                Ok(lock) => return Ok(lock),
                Err(err) => {
                    drive.failed("take a lock", &err);
                    last = Some(err);
                }
            }
        }
        Err(last.unwrap_or_else(|| self.too_few("none")))
    }

    /// Writes `stored` as `bucket/key`'s manifest on every drive that takes writes (see
    /// `write_manifests_to`).
    fn write_manifests(&self, bucket: &str, key: &str, stored: &Stored) -> StoreResult<usize> {
        self.write_manifests_to(bucket, key, stored).map_err(|failed| failed.error)
    }

    /// Writes `stored` as `bucket/key`'s manifest on every drive that takes writes, in
    /// parallel on the drives' lanes; fails unless `meta_write_quorum` took it (saying which
    /// drives did, to undo). Once the quorum has it, the other drives get `MANIFEST_GRACE` (or
    /// 4x the typical wait) to answer; one still writing then finishes in the background and
    /// the key is handed to the healer (a read meets the quorum's record whatever a late drive
    /// holds): a stalled drive holds up no commit. Too few drives with room for it is
    /// `InsufficientStorage`.
    fn write_manifests_to(&self, bucket: &str, key: &str, stored: &Stored) -> Result<usize, ManifestsFailed> {
        let bytes = Arc::new(stored.encode());
        let (tx, rx) = mpsc::channel::<(usize, StoreResult<()>)>();
        let mut asked = 0;
        for drive in self.drives.iter() {
            let Some(store) = drive.writable() else { continue };
            asked += 1;
            let (tx, on, bucket, key, bytes) =
                (tx.clone(), drive.clone(), bucket.to_string(), key.to_string(), bytes.clone());
            drive.lane.spawn(move || {
                let _ = tx.send((on.index, on.timed(|| write_manifest(&store, &bucket, &key, &bytes))));
            });
        }
        drop(tx);
        let grace =
            std::time::Duration::from_micros(self.median_wait_us().unwrap_or(0).saturating_mul(4)).max(MANIFEST_GRACE);
        let (mut written, mut answered, mut until) = (Vec::new(), 0, None::<std::time::Instant>);
        let (mut first_error, mut no_space) = (None, false);
        while answered < asked {
            let answer = match until {
                None => rx.recv().ok(),
                Some(at) => rx.recv_timeout(at.saturating_duration_since(std::time::Instant::now())).ok(),
            };
            let Some((index, result)) = answer else { break };
            answered += 1;
            match result {
                Ok(()) => written.push(index),
                Err(err) => {
                    if !matches!(
                        err,
                        StoreError::NoSuchBucket | StoreError::ParentIsObject(_) | StoreError::ObjectIsDirectory(_)
                    ) {
                        self.drives[index].failed("write a manifest", &err);
                    }
                    no_space |= matches!(err, StoreError::InsufficientStorage | StoreError::QuotaExceeded(_));
                    first_error.get_or_insert(err);
                }
            }
            if written.len() >= self.meta_write_quorum() && until.is_none() {
                until = Some(std::time::Instant::now() + grace);
            }
        }
        if answered < asked && written.len() >= self.meta_write_quorum() {
            self.healer.request(bucket, key);
        }
        if written.len() >= self.meta_write_quorum() {
            return Ok(written.len());
        }
        let error = match first_error {
            Some(
                err @ (StoreError::NoSuchBucket
                | StoreError::ParentIsObject(_)
                | StoreError::ObjectIsDirectory(_)
                | StoreError::InvalidKey(_)
                | StoreError::KeyTooLong(_)),
            ) => err,
            _ if no_space => {
                tracing::warn!(pool = %self.name, bucket, key, written = written.len(), needed = self.meta_write_quorum(),
                    "an object's record found too few drives with room: the write is refused");
                StoreError::InsufficientStorage
            }
            _ => StoreError::InsufficientShards(format!(
                "pool {:?}: the object's record reached {} of {} drives; {} are needed",
                self.name,
                written.len(),
                self.n(),
                self.meta_write_quorum()
            )),
        };
        Err(ManifestsFailed { error, written })
    }

    /// Puts back `previous` (or no record) as `bucket/key`'s manifest on the drives `written`
    /// took a record that did not reach the write quorum: a refused write leaves the object as
    /// it was, not a record some reads would find.
    fn undo_manifests(&self, bucket: &str, key: &str, written: &[usize], previous: Option<&Stored>) {
        let cx = RequestContext::process();
        let previous = previous.map(Stored::encode);
        for &index in written {
            let drive = &self.drives[index];
            let Some(store) = drive.writable() else { continue };
            if previous.as_ref().is_some_and(|bytes| write_manifest(&store, bucket, key, bytes).is_ok()) {
                continue;
            }
            match isthmus_store::Store::delete_object(&*store, &cx, bucket, key, &Default::default()) {
                Ok(_) | Err(StoreError::NoSuchKey | StoreError::NoSuchBucket) if previous.is_none() => {}
                // The drive has no record now: heal gives it the previous one back.
                Ok(_) | Err(StoreError::NoSuchKey | StoreError::NoSuchBucket) => self.healer.request(bucket, key),
                Err(err) => {
                    tracing::warn!(pool = %self.name, drive = %drive.path.display(), bucket, key, error = %err,
                        "a refused write's record could not be taken back: heal settles it");
                    self.healer.request(bucket, key);
                }
            }
        }
    }

    /// Removes `bucket/key`'s manifest from every drive that takes writes.
    fn remove_manifests(&self, bucket: &str, key: &str) -> StoreResult<()> {
        let cx = RequestContext::process();
        let mut removed = 0;
        for drive in &self.drives {
            let Some(store) = drive.writable() else { continue };
            match isthmus_store::Store::delete_object(&*store, &cx, bucket, key, &Default::default()) {
                Ok(_) | Err(StoreError::NoSuchBucket | StoreError::NoSuchKey) => removed += 1,
                Err(err) => drive.failed("remove a manifest", &err),
            }
        }
        if removed >= self.meta_write_quorum() { Ok(()) } else { Err(self.too_few(&removed.to_string())) }
    }

    /// Moves the shard files of `stored`'s segments aside on their drives.
    fn discard_segments(&self, bucket: &str, segments: &[manifest::Segment]) {
        for segment in segments {
            for &d in &segment.drives {
                self.drives[d].discard_shard(bucket, &segment.data_id);
            }
        }
    }
}

/// A manifest write that did not reach the write quorum: why, and the drives that took it.
pub(crate) struct ManifestsFailed {
    pub(crate) error: StoreError,
    pub(crate) written: Vec<usize>,
}

/// The median of `values` (the upper one of an even count), if any.
fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

/// A drive's copy of a manifest (`None`: the drive has no object under the key).
fn read_manifest(
    store: &isthmus_posix::PosixStore,
    cx: &RequestContext,
    bucket: &str,
    key: &str,
) -> StoreResult<Option<Stored>> {
    use std::io::Read;
    let mut response = match isthmus_store::Store::get_object(store, cx, bucket, key, &Default::default()) {
        Ok(response) => response,
        Err(StoreError::NoSuchKey | StoreError::ObjectIsDirectory(_) | StoreError::ParentIsObject(_)) => {
            return Ok(None);
        }
        Err(err) => return Err(err),
    };
    let mut bytes = Vec::with_capacity(response.info.size as usize);
    response.body.read_to_end(&mut bytes)?;
    Stored::decode(&bytes).map(Some)
}

fn write_manifest(store: &isthmus_posix::PosixStore, bucket: &str, key: &str, bytes: &[u8]) -> StoreResult<()> {
    let request = isthmus_store::PutRequest { etag_without_md5: true, ..Default::default() };
    isthmus_store::StoreExt::put_bytes(store, &RequestContext::process(), bucket, key, bytes, request).map(|_| ())
}
