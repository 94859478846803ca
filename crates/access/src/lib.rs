//! Access control, the floor between the doors and the backends: `Authorized`, bucket policies
//! (`policy`) and quotas (`quota`).
//!
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
//! For a request that runs with its user's Unix identity (`RequestContext::identity`, set by
//! the doors with `identity = "posix"`) the kernel decides who may read and write objects, in
//! buckets whose backend says the kernel can judge them: every signed user may try their
//! objects and listings, and the file-system calls, made with the user's Unix identity,
//! succeed or are refused as they would be for the user's shell. What the file system cannot judge stays here: a bucket's own settings (ACL,
//! policy, tags, versioning, deletion) are its S3 owner's, and a policy's explicit Deny still
//! refuses. Unsigned requests still need a public ACL or policy, and then run as `nobody`.
//! The kernel judges only buckets whose backend says it can (`BucketFacts::access`): in an
//! erasure-coded pool the files are the gateway's, so the rules above apply there as without
//! Unix identities.

mod calls;
pub mod policy;
pub mod quota;

use std::collections::HashMap;
use std::sync::Arc;

use crate::policy::{BucketPolicy, PolicyAction};
use isthmus_store::acl::{Acl, CannedAcl, GrantPermission, PublicAccessBlock};
use isthmus_store::{AccessJudge, HeadRequest, Principal, RequestContext, Store, StoreError, StoreResult};

/// Buckets each user may use besides its own: exact names, or prefixes ending in `*`. Clones
/// share one table, so a gateway's administration changes what every door enforces at once.
#[derive(Debug, Clone, Default)]
pub struct BucketGrants {
    by_user: Arc<std::sync::RwLock<HashMap<String, Vec<String>>>>,
}

impl BucketGrants {
    /// Grants from (user name, bucket patterns) pairs.
    pub fn new<U, P>(grants: impl IntoIterator<Item = (U, P)>) -> Self
    where
        U: Into<String>,
        P: IntoIterator,
        P::Item: Into<String>,
    {
        let table = grants
            .into_iter()
            .map(|(user, patterns)| (user.into(), patterns.into_iter().map(Into::into).collect()))
            .collect();
        let shared = Self::default();
        shared.replace(table);
        shared
    }

    /// Makes `table` (user name to patterns) the grants every clone enforces from now on.
    pub fn replace(&self, table: HashMap<String, Vec<String>>) {
        *self.by_user.write().expect("not poisoned") = table;
    }

    /// Whether `user`'s grants name `bucket`.
    pub fn grants(&self, user: &str, bucket: &str) -> bool {
        self.by_user.read().expect("not poisoned").get(user).is_some_and(|patterns| {
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
    /// Hard quotas checked before writes (admission control, like the rights checked here).
    quotas: Option<Arc<crate::quota::Quotas>>,
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
        Self { inner, grants, root_owner: None, quotas: None }
    }

    /// Whether the kernel, not this layer, decides the object access of `cx` in `bucket`: for a
    /// signed user whose calls run with its Unix identity, in a bucket whose backend says the
    /// kernel can judge (`AccessJudge`). Asked per request and per bucket: no switch of this
    /// layer decides it. Elsewhere (an erasure-coded pool: the gateway's own files) this layer
    /// applies the S3 rules, never nobody. A bucket whose facts cannot be read (missing, not
    /// enterable) is judged here too: the call itself still runs as the user, so the kernel
    /// refuses what it would refuse anyway.
    fn kernel_decides(&self, cx: &RequestContext, bucket: &str) -> bool {
        cx.identity.is_some()
            && matches!(cx.principal, Principal::User { .. })
            && self.inner.bucket_facts(cx, bucket).is_ok_and(|facts| facts.access == AccessJudge::Kernel)
    }

    /// Logs a refusal this layer made for a signed user where Unix identities are on (the
    /// kernel's own refusals are the file system's to log).
    fn log_refusal(&self, cx: &RequestContext, bucket: &str, what: &str) {
        if cx.identity.is_some()
            && let Some(user) = cx.user_name()
        {
            tracing::info!(user, bucket, what, "refused by the gateway (the bucket's files are not the users' own)");
        }
    }

    /// Refuses writes past `quotas` (none configured: no checks).
    pub fn with_quotas(self, quotas: Option<Arc<crate::quota::Quotas>>) -> Self {
        Self { quotas: quotas.filter(|q| !q.is_empty()), ..self }
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
        match self.inner.bucket_config(cx, bucket).map(|c| c.owner) {
            Ok(owner) => Ok(user.is_some() && owner.as_deref() == user),
            Err(StoreError::NoSuchBucket) => Ok(true),
            Err(err) => Err(err),
        }
    }

    /// Whether the principal of `cx` may do `access` in `bucket`: as its owner, or as the
    /// bucket's canned ACL shares it with everyone (or every signed user).
    pub fn allowed(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<bool> {
        if access != Access::Owner && self.kernel_decides(cx, bucket) {
            return Ok(true);
        }
        if self.may_use(cx, bucket)? {
            return Ok(true);
        }
        let shared = self.shared_by_acl(cx, bucket, access)?;
        if !shared {
            self.log_refusal(cx, bucket, if access == Access::Write { "write" } else { "read" });
        }
        Ok(shared)
    }

    /// Whether the bucket's ACL shares `access` with the principal of `cx` (never the
    /// owner's own access).
    fn shared_by_acl(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<bool> {
        if access == Access::Owner {
            return Ok(false);
        }
        match self.inner.bucket_config(cx, bucket).map(|c| c.acl) {
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
        let owner = match self.inner.bucket_config(cx, bucket).map(|c| c.owner) {
            Ok(owner) => owner.or_else(|| self.root_owner.clone()),
            Err(StoreError::NoSuchBucket) => return Ok(()),
            Err(err) => return Err(err),
        };
        if owner.as_deref() == Some(expected) { Ok(()) } else { Err(StoreError::AccessDenied) }
    }

    /// The bucket's PublicAccessBlock (all off when it has none or is missing).
    fn block_of(&self, cx: &RequestContext, bucket: &str) -> StoreResult<PublicAccessBlock> {
        match self.inner.bucket_config(cx, bucket).map(|c| c.public_access_block) {
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
        let Some(document) = self.inner.bucket_config(cx, bucket)?.policy else { return Ok(None) };
        let policy = BucketPolicy::parse(bucket, &document)?;
        let public_allows = !self.block_of(cx, bucket)?.restrict_public_buckets;
        Ok(policy.verdict(bucket, cx.user_name(), action, public_allows))
    }

    /// Reading (one object, or a listing): allowed by the bucket's owner rules; for others by
    /// its policy (an explicit Deny wins), its ACL, or for one object the object's own ACL.
    fn require_read(&self, cx: &RequestContext, bucket: &str, action: PolicyAction<'_>) -> StoreResult<()> {
        if self.kernel_decides(cx, bucket) {
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
            self.log_refusal(cx, bucket, "read");
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
        let owner = self.inner.bucket_config(cx, bucket).map(|c| c.owner).ok().flatten();
        match (owner, &cx.principal) {
            (Some(owner), Principal::User { name, .. }) => &owner == name,
            (Some(_), Principal::Process) => true,
            (Some(_), Principal::Anonymous) => false,
            (None, _) => is_superuser(cx),
        }
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
