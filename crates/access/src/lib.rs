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
//! that, as in S3, a bucket's canned ACL shares listing it (public-read: everyone, unsigned
//! requests too; authenticated-read: every signed user) and with public-read-write writing and
//! deleting objects too; reading an object takes the object's own ACL or a bucket policy
//! (`with_bucket_acl_sharing_objects` restores the sharing of objects by the bucket's ACL of
//! earlier releases). The bucket itself (deleting it, its ACL, policy, tags) stays its owner's. A bucket policy
//! (`policy`) may allow reading objects and listing to everyone or named users, or deny it; an
//! explicit Deny wins over everything else, as in AWS: it refuses the bucket's owner, the users
//! its grants name and the users the kernel judges too (only the process and root, who may
//! change the policy anyway, pass). Every read of an object, through every door and as the
//! source of a copy, asks one question (`require_object_read`). A missing bucket passes
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
use std::sync::{Arc, Mutex};

use crate::policy::{BucketPolicy, PolicyAction};
use isthmus_store::acl::{Acl, CannedAcl, GrantPermission, PublicAccessBlock};
use isthmus_store::scopes::ScopeAccess;
use isthmus_store::{
    AccessJudge, BucketConfig, HeadRequest, Principal, RequestContext, Store, StoreError, StoreResult,
};

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
    /// List the bucket, and read its objects (a bucket's public-read and authenticated-read
    /// share the listing; an object's, the object).
    Read,
    /// Write and delete objects (what public-read-write shares besides reading).
    Write,
    /// Everything about the bucket itself (delete it, its ACL, tags, owner) and object tags:
    /// the owner's, never shared by an ACL.
    Owner,
}

/// What a read reads, for the rules that judge it.
#[derive(Debug, Clone, Copy)]
enum Read<'a> {
    /// The latest version of `key` (`s3:GetObject`, the object's own ACL).
    Latest { key: &'a str },
    /// A named version of `key`: its own ACL opens it; policies allow `s3:GetObject`, not
    /// `s3:GetObjectVersion`, so their Allow does not (their Deny of the key still refuses).
    Version { key: &'a str, version: &'a str },
    /// A listing under `prefix` (`s3:ListBucket`, the bucket's ACL).
    Listing { prefix: &'a str },
    /// A listing of versions under `prefix`: policies allow `s3:ListBucket`, not
    /// `s3:ListBucketVersions`, so their Allow does not open it.
    Versions { prefix: &'a str },
}

impl<'a> Read<'a> {
    /// The action a bucket policy judges.
    fn policy_action(self) -> PolicyAction<'a> {
        match self {
            Read::Latest { key } | Read::Version { key, .. } => PolicyAction::GetObject { key },
            Read::Listing { prefix } | Read::Versions { prefix } => PolicyAction::ListBucket { prefix },
        }
    }

    /// Whether a policy's Allow opens this read (its Deny refuses every read it names).
    fn policy_allow_opens(self) -> bool {
        matches!(self, Read::Latest { .. } | Read::Listing { .. })
    }

    /// The key and version read, for a read of one object.
    fn object(self) -> Option<(&'a str, Option<&'a str>)> {
        match self {
            Read::Latest { key } => Some((key, None)),
            Read::Version { key, version } => Some((key, Some(version))),
            Read::Listing { .. } | Read::Versions { .. } => None,
        }
    }
}

/// What an object's own ACL says to a requester.
enum ObjectShare {
    Shared,
    NotShared,
    /// No such key or version (or a delete marker).
    Missing,
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
    /// Bucket policies as parsed, by bucket, with the settings version they were parsed from:
    /// a policy is parsed when the bucket's settings change, not on every request it judges.
    policies: Arc<Mutex<ParsedPolicies>>,
    /// Whether a bucket's canned ACL also shares reading its objects (as earlier releases did: see
    /// `with_bucket_acl_sharing_objects`); S3 shares only the listing.
    bucket_acl_shares_objects: bool,
}

/// Parsed policies by bucket: (the settings version parsed, the policy).
type ParsedPolicies = HashMap<String, (String, Arc<BucketPolicy>)>;

/// Parsed policies kept at most (one per bucket that has a policy; beyond it, all are dropped
/// and parsed again as requests come).
const KEPT_POLICIES: usize = 4096;

impl<S: Store> Authorized<S> {
    /// An in-process door's engine: it acts as the process (or as users it names itself) and
    /// grants nothing beyond ownership.
    pub fn without_grants(inner: S) -> Self {
        Self::new(Arc::new(inner), BucketGrants::default())
    }
}

/// Whether the principal of `cx` is the recorded owner of a bucket with `settings` (true for
/// a missing bucket: the call itself answers NoSuchBucket).
fn owner_in(cx: &RequestContext, settings: Option<&BucketConfig>) -> bool {
    match settings {
        None => true,
        Some(config) => cx.user_name().is_some_and(|user| config.owner.as_deref() == Some(user)),
    }
}

/// A bucket's PublicAccessBlock (all off when it has none or is missing).
fn block(settings: Option<&BucketConfig>) -> PublicAccessBlock {
    settings.and_then(|config| config.public_access_block).unwrap_or_default()
}

/// `allowed` for a principal judged by the bucket's `settings` (not one that uses every
/// bucket): its owner, or a grant of the bucket's ACL.
fn allowed_by(cx: &RequestContext, settings: Option<&BucketConfig>, access: Access) -> bool {
    owner_in(cx, settings) || shared_by_acl(cx, settings, access)
}

/// Whether the ACL of a bucket with `settings` shares `access` with the principal of `cx`
/// (never the owner's own access; a missing bucket passes).
fn shared_by_acl(cx: &RequestContext, settings: Option<&BucketConfig>, access: Access) -> bool {
    match settings {
        _ if access == Access::Owner => false,
        None => true,
        Some(config) => acl_shares(cx, settings, &config.acl, access),
    }
}

/// Whether `acl` (of a bucket with `settings` or of one of its objects) shares `access` with
/// the principal of `cx`: by its canned ACL (unless the bucket ignores public ACLs) or by a
/// grant to the user.
fn acl_shares(cx: &RequestContext, settings: Option<&BucketConfig>, acl: &Acl, access: Access) -> bool {
    let permission = match access {
        Access::Read => GrantPermission::Read,
        Access::Write => GrantPermission::Write,
        Access::Owner => return false,
    };
    if cx.user_name().is_some_and(|user| acl.grants(user, permission)) {
        return true;
    }
    // Public ACLs count as private where the bucket ignores them.
    let canned =
        if acl.canned.is_public() && block(settings).ignore_public_acls { CannedAcl::Private } else { acl.canned };
    let signed = matches!(cx.principal, Principal::User { .. });
    match (canned, access) {
        (CannedAcl::PublicReadWrite, _) | (CannedAcl::PublicRead, Access::Read) => true,
        (CannedAcl::AuthenticatedRead, Access::Read) => signed,
        _ => false,
    }
}

impl<S: Store + ?Sized> Authorized<S> {
    pub fn new(inner: Arc<S>, grants: BucketGrants) -> Self {
        Self {
            inner,
            grants,
            root_owner: None,
            quotas: None,
            policies: Arc::default(),
            bucket_acl_shares_objects: false,
        }
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

    /// Refuses writes past `quotas` (none configured: no checks).
    pub fn with_quotas(self, quotas: Option<Arc<crate::quota::Quotas>>) -> Self {
        Self { quotas: quotas.filter(|q| !q.is_empty()), ..self }
    }

    /// Makes a bucket's canned ACL (public-read, authenticated-read, public-read-write) share
    /// reading its objects too, as earlier Isthmus releases did: a site whose
    /// published buckets rely on it keeps them readable while it gives them bucket policies.
    pub fn with_bucket_acl_sharing_objects(self, shares: bool) -> Self {
        Self { bucket_acl_shares_objects: shares, ..self }
    }

    /// Names the owner of buckets without a recorded one, for `expected_bucket_owner` checks.
    pub fn with_root_owner(self, root: impl Into<String>) -> Self {
        Self { root_owner: Some(root.into()), ..self }
    }

    /// The backend behind the checks (for backend-specific administration).
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// A bucket's settings as one decision reads them: once, so every rule of the decision
    /// judges the same settings, and the backend is asked once rather than once per rule.
    /// `None`: the bucket does not exist.
    fn settings(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<BucketConfig>> {
        match self.inner.bucket_config(cx, bucket) {
            Ok(config) => Ok(Some(config)),
            Err(StoreError::NoSuchBucket) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Whether `cx` uses `bucket` as its owner does whatever the bucket's ACL says: the
    /// process, root, and users the grants name (whose reads a policy's explicit Deny still
    /// refuses, as the owner's: `require_read`).
    fn uses_every_bucket(&self, cx: &RequestContext, bucket: &str) -> bool {
        match &cx.principal {
            Principal::Process | Principal::User { is_root: true, .. } => true,
            Principal::User { name, .. } => self.grants.grants(name, bucket),
            Principal::Anonymous => false,
        }
    }

    /// Whether the principal of `cx` may use `bucket` as its owner does (true for a missing
    /// bucket): the process, root, the owner and users the grants name.
    pub fn may_use(&self, cx: &RequestContext, bucket: &str) -> StoreResult<bool> {
        if self.uses_every_bucket(cx, bucket) {
            return Ok(true);
        }
        Ok(owner_in(cx, self.settings(cx, bucket)?.as_ref()))
    }

    /// Whether the principal of `cx` may do `access` in `bucket`: as its owner, or as the
    /// bucket's canned ACL shares it with everyone (or every signed user).
    pub fn allowed(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<bool> {
        if (access != Access::Owner && self.kernel_decides(cx, bucket)) || self.uses_every_bucket(cx, bucket) {
            return Ok(true);
        }
        Ok(allowed_by(cx, self.settings(cx, bucket)?.as_ref(), access))
    }

    /// `allowed`, as an AccessDenied error, and the bucket's owner is the one the request
    /// expects, if it names one.
    fn require(&self, cx: &RequestContext, bucket: &str, access: Access) -> StoreResult<()> {
        self.require_owned_by(cx, bucket, access, cx.expected_bucket_owner.as_deref())
    }

    /// `allowed`, as an AccessDenied error, and the bucket's owner (root's id for buckets
    /// nobody recorded) is `expected` if that names one; the settings are read once for both.
    fn require_owned_by(
        &self,
        cx: &RequestContext,
        bucket: &str,
        access: Access,
        expected: Option<&str>,
    ) -> StoreResult<()> {
        let without_settings =
            (access != Access::Owner && self.kernel_decides(cx, bucket)) || self.uses_every_bucket(cx, bucket);
        if without_settings && expected.is_none() {
            return Ok(());
        }
        let settings = self.settings(cx, bucket)?;
        if !without_settings && !allowed_by(cx, settings.as_ref(), access) {
            return Err(StoreError::denied(match access {
                Access::Owner => "only the bucket's owner may do this".to_string(),
                Access::Read | Access::Write => {
                    format!("the bucket's ACL does not grant {access:?} and the requester does not own the bucket")
                }
            }));
        }
        self.owner_is(settings.as_ref(), expected)
    }

    /// AccessDenied unless a bucket with `settings` is owned by `expected` (root's id for
    /// buckets nobody recorded), if that names one; a missing bucket passes.
    fn owner_is(&self, settings: Option<&BucketConfig>, expected: Option<&str>) -> StoreResult<()> {
        let (Some(expected), Some(config)) = (expected, settings) else { return Ok(()) };
        let owner = config.owner.as_deref().or(self.root_owner.as_deref());
        if owner == Some(expected) {
            Ok(())
        } else {
            Err(StoreError::denied(
                "the bucket's owner is not the one the request expects (x-amz-expected-bucket-owner)",
            ))
        }
    }

    /// Reading one object: a GET or HEAD, the source of a copy (CopyObject, UploadPartCopy), the
    /// file or the records read from it (HDF5 in place, arrays, selections), through any door.
    /// The one question all of them ask, so none reads what a GET of the key would not: the
    /// token's scope must reach the key, then the bucket's rules for `s3:GetObject` on it
    /// (`require_read`: owner, grants, policy, the object's ACL, public access block; an
    /// explicit Deny wins). `expected` is the bucket owner the request names (for a copy, the
    /// source's). A named version is opened by its own ACL, not by a policy's Allow.
    fn require_object_read(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        expected: Option<&str>,
    ) -> StoreResult<()> {
        cx.require_scope(ScopeAccess::Read, bucket, key)?;
        let read = match version {
            Some(version) => Read::Version { key, version },
            None => Read::Latest { key },
        };
        self.require_read(cx, bucket, read, expected)
    }

    /// Writing an object that gets `acl`: write access, and the ACL not blocked.
    fn require_write(&self, cx: &RequestContext, bucket: &str, acl: Option<CannedAcl>) -> StoreResult<()> {
        self.require(cx, bucket, Access::Write)?;
        self.check_acl_allowed(cx, bucket, acl)
    }

    /// AccessDenied when `acl` is public and the bucket blocks public ACLs.
    fn check_acl_allowed(&self, cx: &RequestContext, bucket: &str, acl: Option<CannedAcl>) -> StoreResult<()> {
        if acl.is_some_and(CannedAcl::is_public) && block(self.settings(cx, bucket)?.as_ref()).block_public_acls {
            return Err(StoreError::denied("the bucket's public access block refuses public ACLs"));
        }
        Ok(())
    }

    /// The policy of a bucket with `settings`, parsed (once per settings version).
    fn policy_of(&self, bucket: &str, config: &BucketConfig) -> StoreResult<Option<Arc<BucketPolicy>>> {
        let Some(document) = &config.policy else { return Ok(None) };
        let Some(version) = &config.version else {
            return BucketPolicy::parse(bucket, document).map(Arc::new).map(Some);
        };
        let mut kept = self.policies.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((kept_version, policy)) = kept.get(bucket)
            && kept_version == version
        {
            return Ok(Some(policy.clone()));
        }
        let policy = Arc::new(BucketPolicy::parse(bucket, document)?);
        if kept.len() >= KEPT_POLICIES {
            kept.clear();
        }
        kept.insert(bucket.to_string(), (version.clone(), policy.clone()));
        Ok(Some(policy))
    }

    /// The bucket policy's verdict on `action` by the principal of `cx` (`None`: there is no
    /// policy, or no statement applies).
    fn policy_verdict(
        &self,
        cx: &RequestContext,
        bucket: &str,
        config: &BucketConfig,
        action: PolicyAction<'_>,
    ) -> StoreResult<Option<bool>> {
        let Some(policy) = self.policy_of(bucket, config)? else { return Ok(None) };
        let public_allows = !block(Some(config)).restrict_public_buckets;
        Ok(policy.verdict(bucket, cx.user_name(), action, public_allows))
    }

    /// Reading (one object, or a listing). The process and root read everything. For anyone
    /// else an explicit Deny of the bucket policy refuses first, whoever they are (the owner,
    /// users the grants name, users the kernel judges, as in AWS, where an explicit Deny wins
    /// over every Allow); then the owner rules (owner, grants, the kernel), the policy's Allow
    /// (`Read::policy_allow_opens`), the bucket's ACL for a listing (`bucket_acl_opens`), or
    /// the object's (version's) own ACL open it. A missing object is told as missing (the call
    /// answers NoSuchKey) to those who may list the bucket, as S3 does, and refused to the
    /// others. `expected` is the bucket owner the request names. The bucket's settings are
    /// read once for every rule; a missing bucket passes (the call answers NoSuchBucket).
    fn require_read(
        &self,
        cx: &RequestContext,
        bucket: &str,
        read: Read<'_>,
        expected: Option<&str>,
    ) -> StoreResult<()> {
        if is_superuser(cx) && expected.is_none() {
            return Ok(());
        }
        let settings = self.settings(cx, bucket)?;
        let Some(config) = settings.as_ref() else { return Ok(()) };
        if is_superuser(cx) {
            return self.owner_is(settings.as_ref(), expected);
        }
        let verdict = self.policy_verdict(cx, bucket, config, read.policy_action())?;
        if verdict == Some(false) {
            return Err(StoreError::denied("the bucket policy denies it"));
        }
        let opened = self.kernel_decides(cx, bucket)
            || self.uses_every_bucket(cx, bucket)
            || owner_in(cx, settings.as_ref())
            || (read.policy_allow_opens() && verdict == Some(true))
            || (self.bucket_acl_opens(read) && shared_by_acl(cx, settings.as_ref(), Access::Read));
        let opened = opened
            || match read.object() {
                None => false,
                Some((key, version)) => match self.object_share(cx, bucket, config, key, version)? {
                    ObjectShare::Shared => true,
                    ObjectShare::Missing => self.may_list(cx, bucket, config, key)?,
                    ObjectShare::NotShared => false,
                },
            };
        if !opened {
            return Err(StoreError::denied(
                "neither the bucket policy nor the bucket's or the object's ACL grants read",
            ));
        }
        self.owner_is(settings.as_ref(), expected)
    }

    /// Whether a bucket's ACL opens `read`: a listing (a bucket's READ is "list its objects",
    /// as in S3), and its objects only where the operator keeps the sharing of earlier
    /// releases (`bucket_acl_shares_objects`).
    fn bucket_acl_opens(&self, read: Read<'_>) -> bool {
        matches!(read, Read::Listing { .. } | Read::Versions { .. }) || self.bucket_acl_shares_objects
    }

    /// Whether the principal of `cx` may list the part of a bucket with `config` that holds
    /// `key` (its ACL or its policy's Allow of `s3:ListBucket`): then S3 tells it that a key is
    /// missing rather than refusing.
    fn may_list(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig, key: &str) -> StoreResult<bool> {
        Ok(shared_by_acl(cx, Some(config), Access::Read)
            || self.policy_verdict(cx, bucket, config, PolicyAction::ListBucket { prefix: key })? == Some(true))
    }

    /// What the own ACL of `key` (of `version`, if named) in a bucket with `config` says to
    /// the principal of `cx`.
    fn object_share(
        &self,
        cx: &RequestContext,
        bucket: &str,
        config: &BucketConfig,
        key: &str,
        version: Option<&str>,
    ) -> StoreResult<ObjectShare> {
        let head = HeadRequest { version_id: version.map(str::to_string), ..HeadRequest::default() };
        match self.inner.head_object(cx, bucket, key, &head) {
            Ok(info) => Ok(if acl_shares(cx, Some(config), &info.meta.object_acl(), Access::Read) {
                ObjectShare::Shared
            } else {
                ObjectShare::NotShared
            }),
            Err(StoreError::WouldBlock) => Err(StoreError::WouldBlock),
            Err(StoreError::NoSuchKey | StoreError::NoSuchVersion | StoreError::LatestIsDeleteMarker { .. }) => {
                Ok(ObjectShare::Missing)
            }
            Err(_) => Ok(ObjectShare::NotShared),
        }
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
