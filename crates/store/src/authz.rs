//! Who may use which bucket: the one authorization layer every door shares. `Authorized` wraps
//! any `Store` and checks each call's principal before the backend sees it; the gateway, the C
//! and libs3 doors and the Python package all call their engine through it.
//!
//! The rules: the process itself (embedded doors, benchmarks, maintenance) and a door's root user
//! may use every bucket; any other user the buckets it created (their recorded owner) and those
//! its grants name. A bucket without a recorded owner (made with mkdir) belongs to root. Beyond
//! that, a bucket's canned ACL shares reading (public-read: everyone, unsigned requests too;
//! authenticated-read: every signed user) or reading and writing objects (public-read-write);
//! the bucket itself (deleting it, its ACL, policy, tags) stays its owner's. A bucket policy
//! (`policy`) may allow reading objects and listing to everyone or named users, or deny it; an
//! explicit Deny wins over the ACLs. A missing bucket passes
//! the check, so the operation itself answers NoSuchBucket.
//!
//! With `identity = "posix"` (`judged_by_kernel`) the kernel decides who may read and write
//! objects: every signed user may try any bucket's objects and listings, and the file-system
//! calls, made with the user's Unix identity, succeed or are refused as they would be for the
//! user's shell. What the file system cannot judge stays here: a bucket's own settings (ACL,
//! policy, tags, versioning, deletion) are its S3 owner's, and a policy's explicit Deny still
//! refuses. Unsigned requests still need a public ACL or policy, and then run as `nobody`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::acl::{Acl, CannedAcl, GrantPermission, PublicAccessBlock};
use crate::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use crate::policy::{BucketPolicy, PolicyAction};
use crate::{
    BoxedWriter, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome, DeleteRequest, GetRequest,
    GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest, ListVersionsRequest, ObjectInfo, PartRequest,
    Principal, PutRequest, RequestContext, Store, StoreError, StoreResult, Versioning, VersionsPage,
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

/// What a call does with a bucket, for the checks of its ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// List and read objects (what public-read and authenticated-read share).
    Read,
    /// Write and delete objects (what public-read-write shares besides reading).
    Write,
    /// Everything about the bucket itself (delete it, its ACL, tags, owner) and object tags:
    /// the owner's, never shared by an ACL.
    Owner,
}

/// Whether the principal of `cx` acts for everyone (the process, a door's root user).
fn is_superuser(cx: &RequestContext) -> bool {
    match &cx.principal {
        Principal::Process => true,
        Principal::User { is_root, .. } => *is_root,
        Principal::Anonymous => false,
    }
}

/// A store whose every call is checked against the caller's principal first.
pub struct Authorized<S: ?Sized> {
    inner: Arc<S>,
    grants: BucketGrants,
    /// Who owns the buckets without a recorded owner (made with mkdir): the door's root user.
    root_owner: Option<String>,
    /// Object access of signed users is the kernel's to judge (`identity = "posix"`).
    kernel_judges: bool,
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
        Self { inner, grants, root_owner: None, kernel_judges: false }
    }

    /// Leaves object access of signed users to the kernel, for requests that run with their
    /// users' Unix identities.
    pub fn judged_by_kernel(self) -> Self {
        Self { kernel_judges: true, ..self }
    }

    /// Whether the kernel, not this layer, decides the object access of `cx`.
    fn kernel_decides(&self, cx: &RequestContext) -> bool {
        self.kernel_judges && matches!(cx.principal, Principal::User { .. })
    }

    /// Names the owner of buckets without a recorded one, for `expected_bucket_owner` checks.
    pub fn with_root_owner(self, root: impl Into<String>) -> Self {
        Self { root_owner: Some(root.into()), ..self }
    }

    /// The backend behind the checks (for backend-specific administration).
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// Whether the principal of `cx` may use `bucket` as its owner does (true for a missing
    /// bucket): the process, root, the owner and users the grants name.
    pub fn may_use(&self, cx: &RequestContext, bucket: &str) -> StoreResult<bool> {
        let user = match &cx.principal {
            Principal::Process | Principal::User { is_root: true, .. } => return Ok(true),
            Principal::User { name, .. } => Some(name.as_str()),
            Principal::Anonymous => None,
        };
        if user.is_some_and(|u| self.grants.grants(u, bucket)) {
            return Ok(true);
        }
        match self.inner.bucket_owner(cx, bucket) {
            Ok(owner) => Ok(user.is_some() && owner.as_deref() == user),
            Err(StoreError::NoSuchBucket) => Ok(true),
            Err(err) => Err(err),
        }
    }

    /// Whether the principal of `cx` may do `access` in `bucket`: as its owner, or as the
    /// bucket's canned ACL shares it with everyone (or every signed user).
    pub fn allowed(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<bool> {
        if access != Access::Owner && self.kernel_decides(cx) {
            return Ok(true);
        }
        if self.may_use(cx, bucket)? {
            return Ok(true);
        }
        self.shared_by_acl(cx, bucket, access)
    }

    /// Whether the bucket's ACL shares `access` with the principal of `cx` (never the
    /// owner's own access).
    fn shared_by_acl(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<bool> {
        if access == Access::Owner {
            return Ok(false);
        }
        match self.inner.bucket_acl(cx, bucket) {
            Ok(acl) => self.acl_shares(cx, bucket, &acl, access),
            Err(StoreError::NoSuchBucket) => Ok(true),
            Err(err) => Err(err),
        }
    }

    /// Whether `acl` (of the bucket or of one of its objects) shares `access` with the
    /// principal of `cx`: by its canned ACL (unless the bucket ignores public ACLs) or by a
    /// grant to the user.
    fn acl_shares(&self, cx: &RequestContext, bucket: &str, acl: &Acl, access: Access) -> StoreResult<bool> {
        let permission = match access {
            Access::Read => GrantPermission::Read,
            Access::Write => GrantPermission::Write,
            Access::Owner => return Ok(false),
        };
        if cx.user_name().is_some_and(|user| acl.grants(user, permission)) {
            return Ok(true);
        }
        let signed = matches!(cx.principal, Principal::User { .. });
        Ok(match (self.effective_acl(cx, bucket, acl.canned)?, access) {
            (CannedAcl::PublicReadWrite, _) | (CannedAcl::PublicRead, Access::Read) => true,
            (CannedAcl::AuthenticatedRead, Access::Read) => signed,
            _ => false,
        })
    }

    /// `allowed`, as an AccessDenied error, and the bucket's owner is the one the request
    /// expects, if it names one.
    fn require(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<()> {
        self.require_access(cx, bucket, access)?;
        self.check_expected_owner(cx, bucket)
    }

    /// AccessDenied unless the bucket's owner is the one the request expects (if it names one).
    fn check_expected_owner(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.check_owner_is(cx, bucket, cx.expected_bucket_owner.as_deref())
    }

    /// A GET or HEAD: of the latest version, as `require_read` says; of a named version, read
    /// access by owner, grant or bucket ACL (policies grant `s3:GetObject`, not
    /// `s3:GetObjectVersion`).
    fn require_object_read(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        version: Option<&str>,
    ) -> StoreResult<()> {
        match version {
            None => self.require_read(cx, bucket, PolicyAction::GetObject { key }),
            Some(_) => self.require(cx, bucket, Access::Read),
        }
    }

    /// The source of a copy: readable, and owned by whom the request expects (if it says).
    fn require_source(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.require_access(cx, bucket, Access::Read)?;
        self.check_owner_is(cx, bucket, cx.expected_source_owner.as_deref())
    }

    /// AccessDenied unless `bucket`'s owner (root's id for buckets nobody recorded) is `expected`.
    fn check_owner_is(&self, cx: &RequestContext, bucket: &str, expected: Option<&str>) -> StoreResult<()> {
        let Some(expected) = expected else { return Ok(()) };
        let owner = match self.inner.bucket_owner(cx, bucket) {
            Ok(owner) => owner.or_else(|| self.root_owner.clone()),
            Err(StoreError::NoSuchBucket) => return Ok(()),
            Err(err) => return Err(err),
        };
        if owner.as_deref() == Some(expected) { Ok(()) } else { Err(StoreError::AccessDenied) }
    }

    /// The bucket's PublicAccessBlock (all off when it has none or is missing).
    fn block_of(&self, cx: &RequestContext, bucket: &str) -> StoreResult<PublicAccessBlock> {
        match self.inner.public_access_block(cx, bucket) {
            Ok(block) => Ok(block.unwrap_or_default()),
            Err(StoreError::NoSuchBucket) => Ok(PublicAccessBlock::default()),
            Err(err) => Err(err),
        }
    }

    /// Writing an object that gets `acl`: write access, and the ACL not blocked.
    fn require_write(&self, cx: &RequestContext, bucket: &str, acl: Option<CannedAcl>) -> StoreResult<()> {
        self.require(cx, bucket, Access::Write)?;
        self.check_acl_allowed(cx, bucket, acl)
    }

    /// AccessDenied when `acl` is public and the bucket blocks public ACLs.
    fn check_acl_allowed(&self, cx: &RequestContext, bucket: &str, acl: Option<CannedAcl>) -> StoreResult<()> {
        if acl.is_some_and(CannedAcl::is_public) && self.block_of(cx, bucket)?.block_public_acls {
            return Err(StoreError::AccessDenied);
        }
        Ok(())
    }

    /// An ACL as authorization sees it: public ones count as private when the bucket ignores them.
    fn effective_acl(&self, cx: &RequestContext, bucket: &str, acl: CannedAcl) -> StoreResult<CannedAcl> {
        if acl.is_public() && self.block_of(cx, bucket)?.ignore_public_acls {
            return Ok(CannedAcl::Private);
        }
        Ok(acl)
    }

    /// The bucket policy's verdict for a principal the owner rules do not allow (`None`: there
    /// is no policy, or no statement applies).
    fn policy_verdict(&self, cx: &RequestContext, bucket: &str, action: PolicyAction<'_>) -> StoreResult<Option<bool>> {
        let Some(document) = self.inner.bucket_policy(cx, bucket)? else { return Ok(None) };
        let policy = BucketPolicy::parse(bucket, &document)?;
        let public_allows = !self.block_of(cx, bucket)?.restrict_public_buckets;
        Ok(policy.verdict(bucket, cx.user_name(), action, public_allows))
    }

    /// Reading (one object, or a listing): allowed by the bucket's owner rules; for others by
    /// its policy (an explicit Deny wins), its ACL, or for one object the object's own ACL.
    fn require_read(&self, cx: &RequestContext, bucket: &str, action: PolicyAction<'_>) -> StoreResult<()> {
        if self.kernel_decides(cx) {
            if !is_superuser(cx) && self.policy_verdict(cx, bucket, action)? == Some(false) {
                return Err(StoreError::AccessDenied);
            }
            return self.check_expected_owner(cx, bucket);
        }
        if self.may_use(cx, bucket)? {
            return self.check_expected_owner(cx, bucket);
        }
        match self.policy_verdict(cx, bucket, action)? {
            Some(false) => return Err(StoreError::AccessDenied),
            Some(true) => return self.check_expected_owner(cx, bucket),
            None => {}
        }
        if self.shared_by_acl(cx, bucket, Access::Read)? {
            return self.check_expected_owner(cx, bucket);
        }
        let PolicyAction::GetObject { key } = action else { return Err(StoreError::AccessDenied) };
        let acl = match self.inner.head_object(cx, bucket, key, &HeadRequest::default()) {
            Ok(info) => info.meta.object_acl(),
            Err(StoreError::WouldBlock) => return Err(StoreError::WouldBlock),
            // Whether the key exists is not told to those who may not read it.
            Err(_) => return Err(StoreError::AccessDenied),
        };
        if self.acl_shares(cx, bucket, &acl, Access::Read)? {
            self.check_expected_owner(cx, bucket)
        } else {
            Err(StoreError::AccessDenied)
        }
    }

    /// `allowed`, as an AccessDenied error (for the source of a copy, whose expected owner
    /// S3 names in another header).
    fn require_access(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<()> {
        if self.allowed(cx, bucket, access)? { Ok(()) } else { Err(StoreError::AccessDenied) }
    }

    /// Whether the principal of `cx` is the recorded owner of an existing bucket (root owns
    /// the buckets nobody recorded).
    fn owns(&self, cx: &RequestContext, bucket: &str) -> bool {
        let owner = self.inner.bucket_owner(cx, bucket).ok().flatten();
        match (owner, &cx.principal) {
            (Some(owner), Principal::User { name, .. }) => &owner == name,
            (Some(_), Principal::Process) => true,
            (Some(_), Principal::Anonymous) => false,
            (None, _) => is_superuser(cx),
        }
    }
}

impl<S: Store + ?Sized> Store for Authorized<S> {
    /// Each principal sees the buckets it may use.
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        if cx.principal == Principal::Anonymous {
            return Err(StoreError::AccessDenied);
        }
        let mut visible = Vec::new();
        for bucket in self.inner.list_buckets(cx)? {
            if self.kernel_decides(cx) || self.may_use(cx, &bucket.name)? {
                visible.push(bucket);
            }
        }
        Ok(visible)
    }

    /// Any principal may create a bucket; a user becomes its recorded owner. An existing bucket
    /// answers BucketAlreadyOwnedByYou to its owner and BucketAlreadyExists to everyone else.
    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        if cx.principal == Principal::Anonymous {
            return Err(StoreError::AccessDenied);
        }
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
        self.require(cx, bucket, Access::Read)?;
        self.inner.head_bucket(cx, bucket)
    }

    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_facts(cx, bucket)
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.delete_bucket(cx, bucket)
    }

    fn bucket_owner(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_owner(cx, bucket)
    }

    /// Only the process and root give a bucket to someone.
    fn set_bucket_owner(&self, cx: &RequestContext, bucket: &str, owner: &str) -> StoreResult<()> {
        if !is_superuser(cx) {
            return Err(StoreError::AccessDenied);
        }
        self.inner.set_bucket_owner(cx, bucket, owner)
    }

    fn bucket_acl(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Acl> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_acl(cx, bucket)
    }

    fn set_bucket_acl(&self, cx: &RequestContext, bucket: &str, acl: Acl) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.check_acl_allowed(cx, bucket, Some(acl.canned))?;
        self.inner.set_bucket_acl(cx, bucket, acl)
    }

    fn bucket_policy(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_policy(cx, bucket)
    }

    fn set_bucket_policy(&self, cx: &RequestContext, bucket: &str, policy: Option<String>) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        if let Some(document) = &policy
            && BucketPolicy::parse(bucket, document)?.is_public()
            && self.block_of(cx, bucket)?.block_public_policy
        {
            return Err(StoreError::AccessDenied);
        }
        self.inner.set_bucket_policy(cx, bucket, policy)
    }

    fn public_access_block(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<PublicAccessBlock>> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.public_access_block(cx, bucket)
    }

    fn set_public_access_block(
        &self,
        cx: &RequestContext,
        bucket: &str,
        block: Option<PublicAccessBlock>,
    ) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.set_public_access_block(cx, bucket, block)
    }

    fn bucket_tags(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BTreeMap<String, String>> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_tags(cx, bucket)
    }

    fn set_bucket_tags(&self, cx: &RequestContext, bucket: &str, tags: BTreeMap<String, String>) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.set_bucket_tags(cx, bucket, tags)
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        self.require_write(cx, bucket, request.meta.acl)?;
        self.inner.put_object(cx, bucket, key, request)
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        self.require_object_read(cx, bucket, key, request.version_id.as_deref())?;
        self.inner.get_object(cx, bucket, key, request)
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        self.require_object_read(cx, bucket, key, request.version_id.as_deref())?;
        self.inner.head_object(cx, bucket, key, request)
    }

    fn bucket_location(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        self.head_bucket(cx, bucket)?;
        self.inner.bucket_location(cx, bucket)
    }

    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::path::PathBuf>> {
        self.require_object_read(cx, bucket, key, None)?;
        self.inner.object_file(cx, bucket, key)
    }

    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        self.require_object_read(cx, bucket, key, None)?;
        self.inner.read_derived(cx, bucket, key, kind)
    }

    /// Whoever may read an object may keep what is derived from it: it is a cache of reads.
    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        self.require_object_read(cx, bucket, key, None)?;
        self.inner.write_derived(cx, bucket, key, kind, bytes)
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        self.require(cx, bucket, Access::Write)?;
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
        self.require_write(cx, destination.0, request.acl)?;
        self.inner.copy_object(cx, source, destination, request)
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        self.require_read(cx, bucket, PolicyAction::ListBucket { prefix: &request.prefix })?;
        self.inner.list_objects(cx, bucket, request)
    }

    fn bucket_versioning(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<Versioning>> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_versioning(cx, bucket)
    }

    fn set_bucket_versioning(&self, cx: &RequestContext, bucket: &str, state: Versioning) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.set_bucket_versioning(cx, bucket, state)
    }

    /// Bucket policies grant `s3:ListBucket`, not `s3:ListBucketVersions`: listing versions
    /// takes read access by owner, grant or bucket ACL.
    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        self.require(cx, bucket, Access::Read)?;
        self.inner.list_object_versions(cx, bucket, request)
    }

    fn set_object_acl(&self, cx: &RequestContext, bucket: &str, key: &str, acl: Acl) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.check_acl_allowed(cx, bucket, Some(acl.canned))?;
        self.inner.set_object_acl(cx, bucket, key, acl)
    }

    fn set_object_tags(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        tags: BTreeMap<String, String>,
    ) -> StoreResult<()> {
        self.require(cx, bucket, Access::Owner)?;
        self.inner.set_object_tags(cx, bucket, key, tags)
    }

    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.require_write(cx, bucket, request.meta.acl)?;
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
        self.require(cx, bucket, Access::Write)?;
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
        self.require(cx, bucket, Access::Write)?;
        self.inner.complete_multipart_upload(cx, bucket, key, upload_id, parts, request)
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        self.require(cx, bucket, Access::Write)?;
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
        self.require(cx, bucket, Access::Read)?;
        self.inner.list_parts(cx, bucket, key, upload_id, request)
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        self.require(cx, bucket, Access::Read)?;
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
        self.require(cx, bucket, Access::Write)?;
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
