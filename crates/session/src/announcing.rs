//! The announcing wrapper of the store stack: every write and delete that succeeded through a
//! gateway's doors (HTTP, the local socket) is announced to the bucket's notification rules
//! that match it, once, after it happened. What an announcement becomes (a record in the
//! durable queue, delivered to a destination) is the `Announcer`'s; here are which calls
//! announce what, the rules looked up per bucket (kept a moment, so a bucket without rules costs
//! a map lookup per write), and the gateway's own recent writes, so that the watcher of the data
//! root (which sees the gateway's renames like any other) does not announce them again.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::recent_writes::Expected;
pub use crate::recent_writes::RecentWrites;
use std::time::{Duration, Instant};

use isthmus_store::notification::NotificationConfig;
use isthmus_store::{
    BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CompletedPart, CopyRequest, CreateBucketRequest, DeleteOutcome,
    DeleteRequest, Digests, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest,
    ListUploadsRequest, ListVersionsRequest, MultipartStore, ObjectChange, ObjectFiles, ObjectInfo, ObjectWrite,
    PartRequest, PartsPage, Principal, PutRequest, RequestContext, Shown, Store, StoreResult, UploadsPage,
    VersionsPage,
};

/// What happened to one object, for the rules that match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// S3's event name without `s3:` (`ObjectCreated:Put`, ...; `notification::EVENT_NAMES`).
    pub name: &'static str,
    pub bucket: String,
    pub key: String,
    pub size: u64,
    /// `None` for removals.
    pub etag: Option<String>,
    pub version_id: Option<String>,
    /// Who did it: the door's user name, `anonymous`, or for files written outside the gateway,
    /// `posix`.
    pub principal: String,
    pub source_ip: Option<IpAddr>,
    pub bucket_owner: String,
}

/// One rule an announcement matched: its id and its destination's ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub rule_id: String,
    pub arn: String,
}

/// Where announcements go (the gateway's notification queue).
pub trait Announcer: Send + Sync + 'static {
    /// Whether a write to a bucket with rules may start now. The operator decides what a full
    /// queue does: an error refuses the write before it starts (`SlowDown`), or the call waits
    /// for room (on an async worker: `WouldBlock`, so the runner moves it where it may wait).
    fn admit(&self, cx: &RequestContext) -> StoreResult<()>;
    /// Queues `announcement` for `targets` (never empty). The write has happened: a failure
    /// here is the announcer's to log and count.
    fn announce(&self, announcement: Announcement, targets: Vec<Target>);
}

/// How long a bucket's rules are kept before they are read again (a change through this
/// gateway is seen at once; this bounds how late one made elsewhere, by another gateway on the
/// same pools, is seen).
const RULES_KEPT: Duration = Duration::from_secs(2);
/// Buckets whose rules are kept at once.
const RULES_CAPACITY: usize = 10_000;
/// A bucket's rules and owner, as kept.
type Rules = Option<(Arc<NotificationConfig>, String)>;

/// `inner`, its successful writes and deletes announced.
pub struct Announcing {
    inner: Arc<dyn Store>,
    announcer: Arc<dyn Announcer>,
    /// Owner of buckets without a recorded one.
    root_user: String,
    rules: Mutex<HashMap<String, (Instant, Rules)>>,
    recent: Arc<RecentWrites>,
}

impl Announcing {
    pub fn new(inner: Arc<dyn Store>, announcer: Arc<dyn Announcer>, root_user: impl Into<String>) -> Self {
        Self {
            inner,
            announcer,
            root_user: root_user.into(),
            rules: Mutex::new(HashMap::new()),
            recent: Arc::new(RecentWrites::default()),
        }
    }

    /// The gateway's own recent writes (what the data root's watcher must not announce again).
    pub fn recent_writes(&self) -> Arc<RecentWrites> {
        self.recent.clone()
    }

    /// The bucket's rules and owner, if it has rules (read as the gateway, kept a moment).
    pub fn rules_of(&self, bucket: &str) -> Rules {
        let now = Instant::now();
        if let Some((read, rules)) = self.rules.lock().expect("rules lock").get(bucket)
            && now.duration_since(*read) < RULES_KEPT
        {
            return rules.clone();
        }
        let rules = match self.inner.bucket_config(&RequestContext::process(), bucket) {
            Ok(BucketConfig { notification: Some(notification), owner, .. }) if !notification.rules.is_empty() => {
                Some((Arc::new(notification), owner.unwrap_or_else(|| self.root_user.clone())))
            }
            _ => None,
        };
        let mut cache = self.rules.lock().expect("rules lock");
        if cache.len() >= RULES_CAPACITY {
            cache.clear();
        }
        cache.insert(bucket.to_string(), (now, rules.clone()));
        rules
    }

    /// Forgets what was kept of `bucket`'s rules (its settings changed or it was removed).
    fn forget_rules(&self, bucket: &str) {
        self.rules.lock().expect("rules lock").remove(bucket);
    }

    /// What announcing `name` in `bucket` for this request needs, if the bucket has rules:
    /// taken before the call, so a write waits for (or is refused) room in a full queue before
    /// it starts.
    fn pending(&self, cx: &RequestContext, bucket: &str, name: &'static str) -> StoreResult<Option<Pending>> {
        let Some((rules, owner)) = self.rules_of(bucket) else {
            return Ok(None);
        };
        self.announcer.admit(cx)?;
        Ok(Some(Pending {
            announcer: self.announcer.clone(),
            recent: self.recent.clone(),
            rules,
            name,
            bucket: bucket.to_string(),
            bucket_owner: owner,
            principal: principal_name(cx),
            source_ip: cx.source_ip,
            unseen: false,
        }))
    }
}

/// An announcement to make once its call succeeded.
struct Pending {
    announcer: Arc<dyn Announcer>,
    recent: Arc<RecentWrites>,
    rules: Arc<NotificationConfig>,
    name: &'static str,
    bucket: String,
    bucket_owner: String,
    principal: String,
    source_ip: Option<IpAddr>,
    /// The write showed the watcher of the data root nothing it announces (see
    /// `RecentWrites`): nothing to remember.
    unseen: bool,
}

impl Pending {
    /// Announces the object `info` describes.
    fn object(self, info: &ObjectInfo) {
        let expected = Expected::Written { etag: info.etag.clone(), size: info.size, modified: info.last_modified };
        self.announce(&info.key, expected, info.version_id.clone());
    }

    /// Announces that `key` is gone.
    fn gone(self, key: &str, version_id: Option<String>) {
        self.announce(key, Expected::Gone, version_id);
    }

    /// Whether the watcher of the data root may announce what this change leaves at `key`
    /// (`None`: either a file landing or one going): only then must the gateway remember it.
    /// With no watcher or scanner running, nothing is remembered.
    /// The watcher announces a file landing as `ObjectCreated:Put` and one going as
    /// `ObjectRemoved:Delete`, and drops, before it looks for the gateway's own, whatever no
    /// rule wants; a tagging change shows it nothing. Remembering the others left them
    /// unclaimed until they aged out: a bucket whose rules want only new objects filled the
    /// gateway's memory of its writes with its deletes.
    fn watched(&self, key: &str, leaves: Option<&Expected>) -> bool {
        if self.unseen || !self.recent.watching() {
            return false;
        }
        let wants = |name: &str| self.rules.matching(name, key).next().is_some();
        let (landing, going) = match leaves {
            Some(Expected::Written { .. }) => (true, false),
            Some(Expected::Gone) => (false, true),
            // A delete may also bring an earlier version back as the key's file.
            Some(Expected::Underway) | None => (true, !self.name.starts_with("ObjectCreated")),
        };
        !self.name.starts_with("ObjectTagging")
            && ((landing && wants("ObjectCreated:Put")) || (going && wants("ObjectRemoved:Delete")))
    }

    /// Runs `call`, which does not say what it shows the watcher (a copy, a multipart upload's
    /// completion) and may make `key`'s directories: they are taken as young (see
    /// `RecentWrites`).
    fn making_dirs<T>(&self, key: &str, call: impl FnOnce() -> T) -> T {
        if !self.recent.watching() {
            return call();
        }
        self.recent.making_dirs(&self.bucket, key);
        let result = call();
        self.recent.dirs_made(&self.bucket, key);
        result
    }

    /// Marks a change of `key` under way (before the call that makes it).
    fn underway(&self, key: &str) {
        if self.watched(key, None) {
            self.recent.mark(&self.bucket, key, Expected::Underway);
        }
    }

    /// The change of `key` failed: nothing to announce, nothing for the watcher to skip.
    fn failed(&self, key: &str) {
        if self.watched(key, None) {
            self.recent.forget_underway(&self.bucket, key);
        }
    }

    /// Runs `call`, the change of `key` this announcement is for, marked under way meanwhile.
    fn around<T>(&self, key: &str, call: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        self.underway(key);
        call().inspect_err(|_| self.failed(key))
    }

    /// Announces `key` as `expected` says the change left it, and remembers it as the
    /// gateway's own change.
    fn announce(self, key: &str, expected: Expected, version_id: Option<String>) {
        let (size, etag) = match &expected {
            Expected::Written { etag, size, .. } => (*size, Some(etag.clone())),
            _ => (0, None),
        };
        if self.watched(key, Some(&expected)) {
            self.recent.mark(&self.bucket, key, expected);
        } else {
            // Marked under way, perhaps, for what the change might have left.
            self.failed(key);
        }
        let announcement = Announcement {
            name: self.name,
            bucket: self.bucket,
            key: key.to_string(),
            size,
            etag,
            version_id,
            principal: self.principal,
            source_ip: self.source_ip,
            bucket_owner: self.bucket_owner,
        };
        announce_matching(&*self.announcer, &self.rules, announcement);
    }
}

/// Queues `announcement` for the rules of `rules` that match it, if any.
pub fn announce_matching(announcer: &dyn Announcer, rules: &NotificationConfig, announcement: Announcement) {
    let targets: Vec<Target> = rules
        .matching(announcement.name, &announcement.key)
        .map(|rule| Target { rule_id: rule.id.clone(), arn: rule.arn.clone() })
        .collect();
    if !targets.is_empty() {
        announcer.announce(announcement, targets);
    }
}

/// The name records give the request's principal.
fn principal_name(cx: &RequestContext) -> String {
    match &cx.principal {
        Principal::User { name, .. } => name.clone(),
        Principal::Anonymous => "anonymous".into(),
        Principal::Process => "isthmus".into(),
    }
}

/// A writer whose commit announces the object it made.
struct AnnouncingWriter {
    inner: BoxedWriter,
    pending: Pending,
    key: String,
}

impl ObjectWrite for AnnouncingWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        self.inner.write_all(bytes)
    }

    fn write_zeros(&mut self, len: u64) -> StoreResult<()> {
        self.inner.write_zeros(len)
    }

    fn digests(&self) -> Digests {
        self.inner.digests()
    }

    /// In a bucket the kernel watcher watches whole, the write is marked under way only if the
    /// writer says its commit shows the watcher more than a new name (`commit_seen`); elsewhere
    /// before the commit, as every change is.
    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        let Self { inner, mut pending, key } = *self;
        let recent = pending.recent.clone();
        let mut marked = !recent.watched_whole(&pending.bucket);
        // Before the write: a directory made after this, the watchers may list after it.
        let read_to = recent.watchers_read_to();
        if marked {
            pending.underway(&key);
        }
        let mut making_dirs = false;
        let committed = inner.commit_seen(&mut |shown| {
            if !recent.watching() {
                return;
            }
            if shown == Shown::Directories && !std::mem::replace(&mut making_dirs, true) {
                recent.making_dirs(&pending.bucket, &key);
            }
            if !std::mem::replace(&mut marked, true) {
                pending.underway(&key);
            }
            if shown == Shown::Rename {
                recent.arrives_by_rename(&pending.bucket, &key);
            }
        });
        if making_dirs {
            recent.dirs_made(&pending.bucket, &key);
        }
        let info = committed.inspect_err(|_| {
            if marked {
                pending.failed(&key);
            }
        })?;
        // Linked into a directory the watchers may not have listed yet: remembered once written.
        pending.unseen = !marked && !recent.in_young_dir(&pending.bucket, &key, read_to);
        pending.object(&info);
        Ok(info)
    }
}

impl Store for Announcing {
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        self.inner.list_buckets(cx)
    }

    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        self.inner.create_bucket(cx, bucket, request)?;
        self.forget_rules(bucket);
        Ok(())
    }

    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.inner.head_bucket(cx, bucket)
    }

    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        self.inner.bucket_facts(cx, bucket)
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.inner.delete_bucket(cx, bucket)?;
        self.forget_rules(bucket);
        Ok(())
    }

    fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        self.inner.bucket_config(cx, bucket)
    }

    fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        let result = self.inner.set_bucket_config(cx, bucket, config);
        self.forget_rules(bucket);
        result
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        let name = if request.browser_form { "ObjectCreated:Post" } else { "ObjectCreated:Put" };
        let pending = self.pending(cx, bucket, name)?;
        let writer = self.inner.put_object(cx, bucket, key, request)?;
        Ok(match pending {
            Some(pending) => Box::new(AnnouncingWriter { inner: writer, pending, key: key.to_string() }),
            None => writer,
        })
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        self.inner.get_object(cx, bucket, key, request)
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        self.inner.head_object(cx, bucket, key, request)
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        let Some(mut pending) = self.pending(cx, bucket, "ObjectRemoved:Delete")? else {
            return self.inner.delete_object(cx, bucket, key, request);
        };
        let outcome = pending.around(key, || self.inner.delete_object(cx, bucket, key, request))?;
        if outcome.delete_marker && request.version_id.is_none() {
            pending.name = "ObjectRemoved:DeleteMarkerCreated";
        }
        // Deleting the current version by its id brings the one before it back as the key's
        // file: the watcher sees it land, and it is the gateway's doing, not a new write.
        let restored = match &request.version_id {
            Some(_) => self.inner.head_object(&RequestContext::process(), bucket, key, &HeadRequest::default()).ok(),
            None => None,
        };
        let restored =
            restored.map(|info| Expected::Written { etag: info.etag, size: info.size, modified: info.last_modified });
        let restored = restored.filter(|expected| pending.watched(key, Some(expected)));
        pending.gone(key, outcome.version_id.clone());
        if let Some(expected) = restored {
            self.recent.mark(bucket, key, expected);
        }
        Ok(outcome)
    }

    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        let Some(pending) = self.pending(cx, destination.0, "ObjectCreated:Copy")? else {
            return self.inner.copy_object(cx, source, destination, request);
        };
        let copy = || self.inner.copy_object(cx, source, destination, request);
        let info = pending.making_dirs(destination.1, || pending.around(destination.1, copy))?;
        pending.object(&info);
        Ok(info)
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        self.inner.list_objects(cx, bucket, request)
    }

    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        self.inner.list_object_versions(cx, bucket, request)
    }

    fn update_object(&self, cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()> {
        let name = match &change {
            ObjectChange::Tags(tags) if tags.is_empty() => Some("ObjectTagging:Delete"),
            ObjectChange::Tags(_) => Some("ObjectTagging:Put"),
            ObjectChange::Acl(_) => None,
        };
        let pending = match name {
            Some(name) => self.pending(cx, bucket, name)?,
            None => None,
        };
        self.inner.update_object(cx, bucket, key, change)?;
        if let Some(pending) = pending {
            // The record names the object whose tags changed, as the requester sees it.
            match self.inner.head_object(cx, bucket, key, &HeadRequest::default()) {
                Ok(info) => pending.object(&info),
                Err(_) => pending.gone(key, None),
            }
        }
        Ok(())
    }

    fn files(&self) -> Option<&dyn ObjectFiles> {
        // In-place updates (Zarr shards written in place) are not announced: see the
        // notifications chapter of the user guide.
        self.inner.files()
    }

    fn upload_part_copy(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
        source: (&str, &str),
        source_request: &GetRequest,
    ) -> StoreResult<ObjectInfo> {
        self.inner.upload_part_copy(cx, bucket, key, upload_id, request, source, source_request)
    }
}

impl MultipartStore for Announcing {
    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.inner.create_multipart_upload(cx, bucket, key, request)
    }

    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        self.inner.upload_part(cx, bucket, key, upload_id, request)
    }

    fn complete_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        let Some(pending) = self.pending(cx, bucket, "ObjectCreated:CompleteMultipartUpload")? else {
            return self.inner.complete_multipart_upload(cx, bucket, key, upload_id, parts, request);
        };
        let complete = || self.inner.complete_multipart_upload(cx, bucket, key, upload_id, parts, request);
        let info = pending.making_dirs(key, || pending.around(key, complete))?;
        pending.object(&info);
        Ok(info)
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        self.inner.abort_multipart_upload(cx, bucket, key, upload_id)
    }

    fn list_parts(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        self.inner.list_parts(cx, bucket, key, upload_id, request)
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        self.inner.list_multipart_uploads(cx, bucket, request)
    }
}

#[cfg(test)]
mod tests;
