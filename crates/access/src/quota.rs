//! Hard quotas per bucket and per user (the buckets the user owns), in bytes and objects. A
//! write reserves what it will add before its first byte (the size a door declares; more as it
//! streams if it declared none), so concurrent writers racing for the last bytes cannot
//! overshoot together; a refused write leaves nothing behind (its staged data is dropped).
//! Usage is counted from a scan of each bucket the first time a quota needs it, then kept by
//! the writes and deletes that pass here, and scanned again periodically (`rescan`), which is
//! when changes made by POSIX tools are seen. Usage counts current objects (not noncurrent
//! versions, not parts of unfinished uploads).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;

use isthmus_store::byte_size::ByteSize;
use isthmus_store::{
    BoxedWriter, Digests, ListRequest, ObjectInfo, ObjectWrite, RequestContext, Shown, Store, StoreError, StoreResult,
};

/// One `[[quotas]]` entry of the configuration file: a bucket's or a user's limits.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct QuotaEntry {
    pub bucket: Option<String>,
    /// A user by access key.
    pub user: Option<String>,
    pub max_bytes: Option<ByteSize>,
    pub max_objects: Option<u64>,
}

/// Limits of one bucket or user (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub bytes: Option<u64>,
    pub objects: Option<u64>,
}

/// Bytes and objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub objects: u64,
}

impl Usage {
    fn add(&mut self, other: Usage) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.objects = self.objects.saturating_add(other.objects);
    }

    fn sub(&mut self, other: Usage) {
        self.bytes = self.bytes.saturating_sub(other.bytes);
        self.objects = self.objects.saturating_sub(other.objects);
    }
}

#[derive(Default)]
struct Book {
    /// Counted usage of each bucket a quota has needed.
    used: HashMap<String, Usage>,
    /// What writes in flight have reserved, per bucket.
    reserved: HashMap<String, Usage>,
    /// Each bucket's owner (root's name for buckets nobody recorded).
    owners: HashMap<String, String>,
    /// Buckets whose usage has been counted.
    scanned: HashSet<String>,
    /// Every bucket's name, as of the last listing (kept up to date by the gateway's own
    /// creations and deletions; buckets made with mkdir join at the next rescan), so a write
    /// under a user quota does not list the root to find the user's buckets.
    names: Option<BTreeSet<String>>,
}

/// The quotas and the usage they are checked against.
pub struct Quotas {
    buckets: HashMap<String, Limits>,
    users: HashMap<String, Limits>,
    /// Who owns the buckets without a recorded owner.
    root_owner: String,
    book: Mutex<Book>,
}

/// What a write is about to add to its bucket; the limits apply to the sum of this with what
/// is used and reserved.
#[derive(Debug, Clone, Copy)]
struct Growth {
    usage: Usage,
}

impl Quotas {
    /// The quotas of the configuration's entries; `root_owner` owns buckets nobody recorded.
    pub fn new(entries: &[QuotaEntry], root_owner: &str) -> Result<Self, String> {
        let mut buckets = HashMap::new();
        let mut users = HashMap::new();
        for entry in entries {
            let limits = Limits {
                bytes: entry.max_bytes.as_ref().map(ByteSize::bytes).transpose()?,
                objects: entry.max_objects,
            };
            if limits == Limits::default() {
                return Err("a [[quotas]] entry needs max_bytes or max_objects".into());
            }
            let added = match (&entry.bucket, &entry.user) {
                (Some(bucket), None) => buckets.insert(bucket.clone(), limits),
                (None, Some(user)) => users.insert(user.clone(), limits),
                _ => return Err("a [[quotas]] entry names a bucket or a user (one of them)".into()),
            };
            if added.is_some() {
                return Err(format!("two [[quotas]] entries for {:?}", entry.bucket.as_ref().or(entry.user.as_ref())));
            }
        }
        Ok(Self { buckets, users, root_owner: root_owner.to_string(), book: Mutex::default() })
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty() && self.users.is_empty()
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The owner of `bucket` as quotas count it.
    fn owner_of<S: Store + ?Sized>(&self, store: &S, bucket: &str) -> StoreResult<String> {
        if let Some(owner) = self.book().owners.get(bucket) {
            return Ok(owner.clone());
        }
        let owner =
            store.bucket_config(&RequestContext::process(), bucket)?.owner.unwrap_or_else(|| self.root_owner.clone());
        self.book().owners.insert(bucket.to_string(), owner.clone());
        Ok(owner)
    }

    /// Records the owner of a bucket just created.
    pub fn bucket_created(&self, bucket: &str, owner: Option<&str>) {
        let mut book = self.book();
        book.owners.insert(bucket.to_string(), owner.unwrap_or(&self.root_owner).to_string());
        book.used.insert(bucket.to_string(), Usage::default());
        book.scanned.insert(bucket.to_string());
        if let Some(names) = &mut book.names {
            names.insert(bucket.to_string());
        }
    }

    /// Forgets a deleted bucket.
    pub fn bucket_deleted(&self, bucket: &str) {
        let mut book = self.book();
        book.owners.remove(bucket);
        book.used.remove(bucket);
        book.scanned.remove(bucket);
        if let Some(names) = &mut book.names {
            names.remove(bucket);
        }
    }

    /// The buckets whose usage the quotas of `bucket` (its own, its owner's) add up, and the
    /// limits that apply; empty when no quota applies.
    fn scope_of<S: Store + ?Sized>(&self, store: &S, bucket: &str) -> StoreResult<Vec<(String, Limits, Vec<String>)>> {
        let mut scopes = Vec::new();
        if let Some(limits) = self.buckets.get(bucket) {
            scopes.push((format!("bucket {bucket:?}"), *limits, vec![bucket.to_string()]));
        }
        if !self.users.is_empty() {
            let owner = self.owner_of(store, bucket)?;
            if let Some(limits) = self.users.get(&owner) {
                let owned = self.buckets_of(store, &owner)?;
                scopes.push((format!("user {owner:?}"), *limits, owned));
            }
        }
        Ok(scopes)
    }

    /// The buckets `user` owns (from the remembered bucket names; listed once if none yet).
    fn buckets_of<S: Store + ?Sized>(&self, store: &S, user: &str) -> StoreResult<Vec<String>> {
        let remembered = self.book().names.clone();
        let names = match remembered {
            Some(names) => names,
            None => {
                // As the process: the store stack's identity wrapper runs it as the gateway.
                let listed: BTreeSet<String> =
                    store.list_buckets(&RequestContext::process())?.into_iter().map(|b| b.name).collect();
                self.book().names = Some(listed.clone());
                listed
            }
        };
        let mut owned = Vec::new();
        for name in names {
            if self.owner_of(store, &name)? == user {
                owned.push(name);
            }
        }
        Ok(owned)
    }

    /// Counts the usage of the buckets not counted yet (a listing of each: long work, so a
    /// context that may not block gets WouldBlock).
    fn ensure_scanned<S: Store + ?Sized>(&self, store: &S, cx: &RequestContext, buckets: &[String]) -> StoreResult<()> {
        let missing: Vec<&String> = {
            let book = self.book();
            buckets.iter().filter(|b| !book.scanned.contains(*b)).collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        if !cx.may_block {
            return Err(StoreError::WouldBlock);
        }
        for bucket in missing {
            let usage = count(store, bucket)?;
            let mut book = self.book();
            book.used.insert(bucket.clone(), usage);
            book.scanned.insert(bucket.clone());
        }
        Ok(())
    }

    /// Reserves `growth` in `bucket` if every quota that applies has room for it.
    fn reserve<S: Store + ?Sized>(
        self: &Arc<Self>,
        store: &S,
        cx: &RequestContext,
        bucket: &str,
        growth: Growth,
    ) -> StoreResult<Option<Reservation>> {
        let scopes = self.scope_of(store, bucket)?;
        if scopes.is_empty() {
            return Ok(None);
        }
        let all: Vec<String> = scopes.iter().flat_map(|(_, _, buckets)| buckets.iter().cloned()).collect();
        self.ensure_scanned(store, cx, &all)?;
        let mut book = self.book();
        check_room(&book, &scopes, growth.usage)?;
        book.reserved.entry(bucket.to_string()).or_default().add(growth.usage);
        Ok(Some(Reservation { quotas: self.clone(), bucket: bucket.to_string(), held: growth.usage, scopes }))
    }

    /// What a write of `size` bytes adds to `bucket`, given the object it replaces (if any).
    fn growth<S: Store + ?Sized>(
        store: &S,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        size: u64,
    ) -> StoreResult<(Growth, Option<u64>)> {
        let old = current_size(store, cx, bucket, key)?;
        let usage = Usage { bytes: size.saturating_sub(old.unwrap_or(0)), objects: u64::from(old.is_none()) };
        Ok((Growth { usage }, old))
    }

    /// Usage and limits of every bucket and user with a quota, for `isthmus admin usage`
    /// (counts what is not counted yet).
    pub fn report<S: Store + ?Sized>(&self, store: &S) -> StoreResult<Vec<(String, Usage, Limits)>> {
        let cx = RequestContext::process();
        let mut rows = Vec::new();
        let mut names: Vec<&String> = self.buckets.keys().collect();
        names.sort();
        for bucket in names {
            let scanned = match self.ensure_scanned(store, &cx, std::slice::from_ref(bucket)) {
                Err(StoreError::NoSuchBucket) => continue,
                other => other,
            };
            scanned?;
            let used = self.book().used.get(bucket).copied().unwrap_or_default();
            rows.push((format!("bucket {bucket}"), used, self.buckets[bucket]));
        }
        let mut users: Vec<&String> = self.users.keys().collect();
        users.sort();
        for user in users {
            let owned = self.buckets_of(store, user)?;
            self.ensure_scanned(store, &cx, &owned)?;
            let book = self.book();
            let mut total = Usage::default();
            owned.iter().for_each(|b| total.add(book.used.get(b).copied().unwrap_or_default()));
            rows.push((format!("user {user}"), total, self.users[user]));
        }
        Ok(rows)
    }

    /// Counts every bucket a quota applies to again: what POSIX tools changed is seen now.
    /// Runs off the request path (a thread of its own, every `quota_rescan_seconds`).
    pub fn rescan<S: Store + ?Sized>(&self, store: &S) -> StoreResult<()> {
        let cx = RequestContext::process();
        let buckets = store.list_buckets(&cx)?;
        {
            let mut book = self.book();
            book.owners.clear();
            book.names = Some(buckets.iter().map(|b| b.name.clone()).collect());
        }
        for bucket in buckets {
            let name = bucket.name;
            let owner = self.owner_of(store, &name)?;
            if !self.buckets.contains_key(&name) && !self.users.contains_key(&owner) {
                continue;
            }
            match count(store, &name) {
                Ok(usage) => {
                    let mut book = self.book();
                    book.used.insert(name.clone(), usage);
                    book.scanned.insert(name);
                }
                Err(StoreError::NoSuchBucket) => self.bucket_deleted(&name),
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// A write of `size` bytes (if known) to `key`: reserved now, refused if it cannot fit.
    /// The writer it returns keeps reserving as it streams past the size, and settles usage
    /// when it commits.
    pub fn admit_write<S: Store + ?Sized>(
        self: &Arc<Self>,
        store: &S,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        size: Option<u64>,
    ) -> StoreResult<Option<Admitted>> {
        if self.scope_of(store, bucket)?.is_empty() {
            return Ok(None);
        }
        let (growth, old) = Self::growth(store, cx, bucket, key, size.unwrap_or(0))?;
        let reservation = self.reserve(store, cx, bucket, growth)?;
        Ok(reservation.map(|reservation| Admitted { reservation, old }))
    }

    /// A part of `size` bytes (if known): refused if it cannot fit; parts are not usage, so
    /// the reservation ends with the part's write.
    pub fn admit_part<S: Store + ?Sized>(
        self: &Arc<Self>,
        store: &S,
        cx: &RequestContext,
        bucket: &str,
        size: Option<u64>,
    ) -> StoreResult<Option<Admitted>> {
        let reservation = self.reserve_staging(store, cx, bucket, size.unwrap_or(0))?;
        Ok(reservation.map(|reservation| Admitted { reservation, old: Some(0) }))
    }

    /// Holds `bytes` against `bucket`'s quotas (its own, its owner's) for data staged on the way
    /// to a write there but not part of it (a part, a third-party pull's staged copy): refused
    /// if they have no room for it, held until the reservation is dropped, never usage.
    pub fn reserve_staging<S: Store + ?Sized>(
        self: &Arc<Self>,
        store: &S,
        cx: &RequestContext,
        bucket: &str,
        bytes: u64,
    ) -> StoreResult<Option<Reservation>> {
        self.reserve(store, cx, bucket, Growth { usage: Usage { bytes, objects: 0 } })
    }

    /// The size of the object a multipart completion makes of `parts` (from the upload's
    /// part list).
    pub fn completed_size<S: Store + ?Sized>(
        store: &S,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[isthmus_store::CompletedPart],
    ) -> StoreResult<u64> {
        let chosen: HashSet<u32> = parts.iter().map(|p| p.part_number).collect();
        let mut request = isthmus_store::ListPartsRequest { after_part: 0, max_parts: 1000 };
        let mut size = 0u64;
        loop {
            let page = store.list_parts(cx, bucket, key, upload_id, &request)?;
            size += page.parts.iter().filter(|p| chosen.contains(&p.part_number)).map(|p| p.size).sum::<u64>();
            match (page.is_truncated, page.next_part_number_marker) {
                (true, Some(marker)) => request.after_part = marker,
                _ => return Ok(size),
            }
        }
    }

    /// Usage after a delete of an object of `size` bytes.
    pub fn deleted(&self, bucket: &str, size: u64) {
        if let Some(used) = self.book().used.get_mut(bucket) {
            used.sub(Usage { bytes: size, objects: 1 });
        }
    }

    /// Whether any quota may apply to `bucket` (cheap: no listing).
    pub fn may_apply<S: Store + ?Sized>(&self, store: &S, bucket: &str) -> StoreResult<bool> {
        Ok(!self.scope_of_cheap(store, bucket)?.is_empty())
    }

    fn scope_of_cheap<S: Store + ?Sized>(&self, store: &S, bucket: &str) -> StoreResult<Vec<Limits>> {
        let mut limits: Vec<Limits> = self.buckets.get(bucket).copied().into_iter().collect();
        if !self.users.is_empty() {
            let owner = self.owner_of(store, bucket)?;
            limits.extend(self.users.get(&owner).copied());
        }
        Ok(limits)
    }
}

/// The size of the object now under `key`, if there is one.
pub fn current_size<S: Store + ?Sized>(
    store: &S,
    cx: &RequestContext,
    bucket: &str,
    key: &str,
) -> StoreResult<Option<u64>> {
    match store.head_object(cx, bucket, key, &isthmus_store::HeadRequest::default()) {
        Ok(info) => Ok(Some(info.size)),
        Err(StoreError::NoSuchKey | StoreError::LatestIsDeleteMarker { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// QuotaExceeded unless every quota of `scopes` has room for `more` besides what its buckets
/// use and have reserved.
fn check_room(book: &Book, scopes: &[(String, Limits, Vec<String>)], more: Usage) -> StoreResult<()> {
    for (name, limits, buckets) in scopes {
        let mut total = Usage::default();
        for bucket in buckets {
            total.add(book.used.get(bucket).copied().unwrap_or_default());
            total.add(book.reserved.get(bucket).copied().unwrap_or_default());
        }
        check(name, limits, total, more)?;
    }
    Ok(())
}

/// QuotaExceeded unless `used` plus `more` stays within `limits`.
fn check(name: &str, limits: &Limits, used: Usage, more: Usage) -> StoreResult<()> {
    if let Some(max) = limits.bytes
        && used.bytes.saturating_add(more.bytes) > max
    {
        return Err(StoreError::QuotaExceeded(format!(
            "Quota exceeded: {name} uses {} of its {max} bytes; this write needs {} more",
            used.bytes, more.bytes
        )));
    }
    if let Some(max) = limits.objects
        && used.objects.saturating_add(more.objects) > max
    {
        return Err(StoreError::QuotaExceeded(format!(
            "Quota exceeded: {name} holds {} of its {max} objects",
            used.objects
        )));
    }
    Ok(())
}

/// The current objects of `bucket`, counted from its listing, as the process: the first count
/// often runs inside a user's write, on a thread switched to that user, whose listing would
/// skip what the user cannot read (and let the user write past the quota by the size of it);
/// the store stack's identity wrapper (the session floor's) runs a call of the process as the
/// gateway whatever thread makes it.
pub fn count<S: Store + ?Sized>(store: &S, bucket: &str) -> StoreResult<Usage> {
    let cx = RequestContext::process();
    let mut usage = Usage::default();
    let mut request = ListRequest { max_keys: 1000, ..ListRequest::default() };
    loop {
        let page = store.list_objects(&cx, bucket, &request)?;
        for object in &page.objects {
            usage.add(Usage { bytes: object.size, objects: 1 });
        }
        if !page.is_truncated {
            return Ok(usage);
        }
        request.start_after = page.next_marker;
    }
}

/// Room held for a write in flight; given back when dropped.
pub struct Reservation {
    quotas: Arc<Quotas>,
    bucket: String,
    held: Usage,
    /// The quotas that apply, and the buckets each adds up.
    scopes: Vec<(String, Limits, Vec<String>)>,
}

impl Reservation {
    /// Holds `more` besides, if the quotas have room for it.
    fn extend(&mut self, more: Usage) -> StoreResult<()> {
        let mut book = self.quotas.book();
        check_room(&book, &self.scopes, more)?;
        book.reserved.entry(self.bucket.clone()).or_default().add(more);
        self.held.add(more);
        Ok(())
    }

    /// The write is visible: its growth becomes usage.
    fn settle(self, growth: Usage, shrink: Usage) {
        let mut book = self.quotas.book();
        let used = book.used.entry(self.bucket.clone()).or_default();
        used.add(growth);
        used.sub(shrink);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut book = self.quotas.book();
        if let Some(reserved) = book.reserved.get_mut(&self.bucket) {
            reserved.sub(self.held);
        }
    }
}

/// A write a quota admitted.
pub struct Admitted {
    reservation: Reservation,
    /// The size of the object it replaces (None: a new key; Some(0) for parts, which add none).
    old: Option<u64>,
}

impl Admitted {
    /// The writer, reserving more if it streams past what was declared and settling usage
    /// when it commits.
    pub fn writer(self, inner: BoxedWriter, counts: bool) -> BoxedWriter {
        Box::new(QuotaWriter { inner, admitted: Some(self), written: 0, counts })
    }

    /// Settles usage for a write that committed as `info` outside a writer (copies,
    /// completions).
    pub fn settle(self, info: &ObjectInfo) {
        settle(self.reservation, self.old, info.size);
    }
}

fn settle(reservation: Reservation, old: Option<u64>, size: u64) {
    let old_size = old.unwrap_or(0);
    let growth = Usage { bytes: size.saturating_sub(old_size), objects: u64::from(old.is_none()) };
    let shrink = Usage { bytes: old_size.saturating_sub(size), objects: 0 };
    reservation.settle(growth, shrink);
}

/// A writer under a quota.
struct QuotaWriter {
    inner: BoxedWriter,
    admitted: Option<Admitted>,
    written: u64,
    /// False for parts: their bytes are not usage once written.
    counts: bool,
}

impl ObjectWrite for QuotaWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        self.written += bytes.len() as u64;
        if let Some(admitted) = &mut self.admitted {
            // What the write adds so far over the object it replaces must stay reserved.
            let growth = self.written.saturating_sub(admitted.old.unwrap_or(0));
            let held = admitted.reservation.held.bytes;
            if growth > held {
                admitted.reservation.extend(Usage { bytes: growth - held, objects: 0 })?;
            }
        }
        self.inner.write_all(bytes)
    }

    fn digests(&self) -> Digests {
        self.inner.digests()
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        self.commit_seen(&mut |_| {})
    }

    fn commit_seen(mut self: Box<Self>, before_seen: &mut dyn FnMut(Shown)) -> StoreResult<ObjectInfo> {
        let admitted = self.admitted.take();
        let info = self.inner.commit_seen(before_seen)?;
        if let Some(admitted) = admitted
            && self.counts
        {
            settle(admitted.reservation, admitted.old, info.size);
        }
        Ok(info)
    }
}
