//! Who may use which bucket: the one authorization layer every door shares. `Authorized` wraps
//! any `Store` and checks each call's principal before the backend sees it; the gateway, the C
//! and libs3 doors and the Python package all call their engine through it.
//!
//! The rules: the process itself (embedded doors, benchmarks, maintenance) and a door's root user
//! may use every bucket; any other user the buckets it created (their recorded owner) and those
//! its grants name. A bucket without a recorded owner (made with mkdir) belongs to root. A
//! missing bucket passes the check, so the operation itself answers NoSuchBucket.
//! With `identity = "posix"` (later) the kernel's checks come on top of these, not instead.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use crate::{
    BoxedWriter, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteRequest, GetRequest, GetResponse,
    HeadRequest, ListPage, ListPartsRequest, ListRequest, ObjectInfo, PartRequest, Principal, PutRequest,
    RequestContext, Store, StoreError, StoreResult,
};

/// Buckets each user may use besides its own: exact names, or prefixes ending in `*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketGrants {
    by_user: HashMap<String, Vec<String>>,
}

impl BucketGrants {
    /// Grants from (user name, bucket patterns) pairs.
    pub fn new<U, P>(grants: impl IntoIterator<Item = (U, P)>) -> Self
    where
        U: Into<String>,
        P: IntoIterator,
        P::Item: Into<String>,
    {
        let by_user = grants
            .into_iter()
            .map(|(user, patterns)| (user.into(), patterns.into_iter().map(Into::into).collect()))
            .collect();
        Self { by_user }
    }

    /// Whether `user`'s grants name `bucket`.
    pub fn grants(&self, user: &str, bucket: &str) -> bool {
        self.by_user.get(user).is_some_and(|patterns| {
            patterns.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => bucket.starts_with(prefix),
                None => p == bucket,
            })
        })
    }
}

/// Whether the principal of `cx` acts for everyone (the process, a door's root user).
fn is_superuser(cx: &RequestContext) -> bool {
    match &cx.principal {
        Principal::Process => true,
        Principal::User { is_root, .. } => *is_root,
    }
}

/// A store whose every call is checked against the caller's principal first.
pub struct Authorized<S: ?Sized> {
    inner: Arc<S>,
    grants: BucketGrants,
    /// Who owns the buckets without a recorded owner (made with mkdir): the door's root user.
    root_owner: Option<String>,
}

impl<S: Store> Authorized<S> {
    /// An in-process door's engine: it acts as the process (or as users it names itself) and
    /// grants nothing beyond ownership.
    pub fn without_grants(inner: S) -> Self {
        Self::new(Arc::new(inner), BucketGrants::default())
    }
}

impl<S: Store + ?Sized> Authorized<S> {
    pub fn new(inner: Arc<S>, grants: BucketGrants) -> Self {
        Self { inner, grants, root_owner: None }
    }

    /// Names the owner of buckets without a recorded one, for `expected_bucket_owner` checks.
    pub fn with_root_owner(self, root: impl Into<String>) -> Self {
        Self { root_owner: Some(root.into()), ..self }
    }

    /// The backend behind the checks (for backend-specific administration).
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// Whether the principal of `cx` may use `bucket` (true for a missing bucket).
    pub fn may_use(&self, cx: &RequestContext, bucket: &str) -> StoreResult<bool> {
        let Principal::User { name: user, is_root: false } = &cx.principal else { return Ok(true) };
        if self.grants.grants(user, bucket) {
            return Ok(true);
        }
        match self.inner.bucket_owner(cx, bucket) {
            Ok(owner) => Ok(owner.as_deref() == Some(user.as_str())),
            Err(StoreError::NoSuchBucket) => Ok(true),
            Err(err) => Err(err),
        }
    }

    /// `may_use`, as an AccessDenied error, and the bucket's owner is the one the request
    /// expects, if it names one.
    fn require(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.require_source(cx, bucket)?;
        let Some(expected) = &cx.expected_bucket_owner else { return Ok(()) };
        let owner = match self.inner.bucket_owner(cx, bucket) {
            Ok(owner) => owner.or_else(|| self.root_owner.clone()),
            Err(StoreError::NoSuchBucket) => return Ok(()),
            Err(err) => return Err(err),
        };
        if owner.as_deref() == Some(expected.as_str()) { Ok(()) } else { Err(StoreError::AccessDenied) }
    }

    /// `may_use`, as an AccessDenied error (the source of a copy: the expected owner names the
    /// destination's).
    fn require_source(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        if self.may_use(cx, bucket)? { Ok(()) } else { Err(StoreError::AccessDenied) }
    }

    /// Whether the principal of `cx` is the recorded owner of an existing bucket (root owns
    /// the buckets nobody recorded).
    fn owns(&self, cx: &RequestContext, bucket: &str) -> bool {
        let owner = self.inner.bucket_owner(cx, bucket).ok().flatten();
        match (owner, &cx.principal) {
            (Some(owner), Principal::User { name, .. }) => &owner == name,
            (Some(_), Principal::Process) => true,
            (None, _) => is_superuser(cx),
        }
    }
}

impl<S: Store + ?Sized> Store for Authorized<S> {
    /// Each principal sees the buckets it may use.
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        let mut visible = Vec::new();
        for bucket in self.inner.list_buckets(cx)? {
            if self.may_use(cx, &bucket.name)? {
                visible.push(bucket);
            }
        }
        Ok(visible)
    }

    /// Any principal may create a bucket; a user becomes its recorded owner. An existing bucket
    /// answers BucketAlreadyOwnedByYou to its owner and BucketAlreadyExists to everyone else.
    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        match self.inner.create_bucket(cx, bucket, request) {
            Ok(()) => match cx.user_name() {
                Some(user) => self.inner.set_bucket_owner(cx, bucket, user),
                None => Ok(()),
            },
            Err(StoreError::BucketAlreadyExists) if self.owns(cx, bucket) => Err(StoreError::BucketAlreadyOwnedByYou),
            Err(err) => Err(err),
        }
    }

    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.require(cx, bucket)?;
        self.inner.head_bucket(cx, bucket)
    }

    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        self.require(cx, bucket)?;
        self.inner.bucket_facts(cx, bucket)
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.require(cx, bucket)?;
        self.inner.delete_bucket(cx, bucket)
    }

    fn bucket_owner(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        self.require(cx, bucket)?;
        self.inner.bucket_owner(cx, bucket)
    }

    /// Only the process and root give a bucket to someone.
    fn set_bucket_owner(&self, cx: &RequestContext, bucket: &str, owner: &str) -> StoreResult<()> {
        if !is_superuser(cx) {
            return Err(StoreError::AccessDenied);
        }
        self.inner.set_bucket_owner(cx, bucket, owner)
    }

    fn bucket_tags(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BTreeMap<String, String>> {
        self.require(cx, bucket)?;
        self.inner.bucket_tags(cx, bucket)
    }

    fn set_bucket_tags(&self, cx: &RequestContext, bucket: &str, tags: BTreeMap<String, String>) -> StoreResult<()> {
        self.require(cx, bucket)?;
        self.inner.set_bucket_tags(cx, bucket, tags)
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        self.require(cx, bucket)?;
        self.inner.put_object(cx, bucket, key, request)
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        self.require(cx, bucket)?;
        self.inner.get_object(cx, bucket, key, request)
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        self.require(cx, bucket)?;
        self.inner.head_object(cx, bucket, key, request)
    }

    fn delete_object(&self, cx: &RequestContext, bucket: &str, key: &str, request: &DeleteRequest) -> StoreResult<()> {
        self.require(cx, bucket)?;
        self.inner.delete_object(cx, bucket, key, request)
    }

    /// The source must be usable too.
    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        self.require_source(cx, source.0)?;
        self.require(cx, destination.0)?;
        self.inner.copy_object(cx, source, destination, request)
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        self.require(cx, bucket)?;
        self.inner.list_objects(cx, bucket, request)
    }

    fn set_object_tags(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        tags: BTreeMap<String, String>,
    ) -> StoreResult<()> {
        self.require(cx, bucket)?;
        self.inner.set_object_tags(cx, bucket, key, tags)
    }

    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.require(cx, bucket)?;
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
        self.require(cx, bucket)?;
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
        self.require(cx, bucket)?;
        self.inner.complete_multipart_upload(cx, bucket, key, upload_id, parts, request)
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        self.require(cx, bucket)?;
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
        self.require(cx, bucket)?;
        self.inner.list_parts(cx, bucket, key, upload_id, request)
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        self.require(cx, bucket)?;
        self.inner.list_multipart_uploads(cx, bucket, request)
    }

    /// The source must be usable too.
    #[allow(clippy::too_many_arguments, reason = "the Store trait's signature")]
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
        self.require_source(cx, source.0)?;
        self.require(cx, bucket)?;
        self.inner.upload_part_copy(cx, bucket, key, upload_id, request, source, source_request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_match_names_and_prefixes() {
        let grants = BucketGrants::new([("alice", vec!["shared-*", "exact"])]);
        assert!(grants.grants("alice", "shared-data"));
        assert!(grants.grants("alice", "exact"));
        assert!(!grants.grants("alice", "exactly"));
        assert!(!grants.grants("alice", "other"));
        assert!(!grants.grants("bob", "shared-data"));
    }
}
