//! The request context every engine call carries: who is asking (a principal that a door
//! fills from a SigV4 key, a socket's peer credentials or a token) and under which constraints
//! the call runs (whether it may block its thread on long work), and, with `identity = "posix"`,
//! the Unix identity its file-system calls run as.

use std::sync::Arc;

use crate::error::StoreResult;
use crate::identity::UnixIdentity;
use crate::scopes::{ScopeAccess, Scopes};

/// Who a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The process itself: embedded doors, benchmarks and maintenance act with the identity the
    /// process has.
    Process,
    /// A user a door authenticated, by the name the door knows it under (an access key).
    User { name: String, is_root: bool },
    /// An unsigned request: allowed only where a bucket's ACL shares with everyone.
    Anonymous,
}

/// The context of one engine call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    pub principal: Principal,
    /// False when the caller runs on an async worker that must not wait on long work: a call
    /// that would have to hash a file written outside the gateway then fails with
    /// `StoreError::WouldBlock` before doing it, and the caller runs it again where it may block.
    pub may_block: bool,
    /// The owner the caller expects the request's bucket to have (S3's
    /// `x-amz-expected-bucket-owner`): the authorization layer refuses the call otherwise.
    pub expected_bucket_owner: Option<String>,
    /// The owner the caller expects a copy's source bucket to have
    /// (`x-amz-source-expected-bucket-owner`).
    pub expected_source_owner: Option<String>,
    /// The Unix identity the call's file-system work runs as (switched by the session floor); `None`: the
    /// process's own.
    pub identity: Option<Arc<UnixIdentity>>,
    /// The capability scopes of the bearer token (or temporary credentials) the request came
    /// with: the authorization layer limits it to them. `None`: not limited by a token.
    pub scopes: Option<Arc<Scopes>>,
    /// Where the request came from (the HTTP peer's address), for the records of bucket
    /// notifications; `None` for the local socket and in-process doors.
    pub source_ip: Option<std::net::IpAddr>,
}

impl RequestContext {
    /// The process acting for itself, on a thread that may block.
    pub fn process() -> Self {
        Self::of(Principal::Process)
    }

    /// `principal`'s request, on a thread that may block, with nothing else known yet.
    fn of(principal: Principal) -> Self {
        Self {
            principal,
            may_block: true,
            expected_bucket_owner: None,
            expected_source_owner: None,
            identity: None,
            scopes: None,
            source_ip: None,
        }
    }

    /// A door's authenticated user, on a thread that may block.
    pub fn user(name: impl Into<String>, is_root: bool) -> Self {
        Self::of(Principal::User { name: name.into(), is_root })
    }

    /// An unsigned request.
    pub fn anonymous() -> Self {
        Self::of(Principal::Anonymous)
    }

    /// The same request, expecting its bucket to belong to `owner`.
    pub fn expecting_bucket_owner(self, owner: Option<String>) -> Self {
        Self { expected_bucket_owner: owner, ..self }
    }

    /// The same request, expecting a copy's source bucket to belong to `owner`.
    pub fn expecting_source_owner(self, owner: Option<String>) -> Self {
        Self { expected_source_owner: owner, ..self }
    }

    /// The same request, its file-system work run as `identity`.
    pub fn with_identity(self, identity: Option<Arc<UnixIdentity>>) -> Self {
        Self { identity, ..self }
    }

    /// The same request, known to come from `source_ip`.
    pub fn from_address(self, source_ip: Option<std::net::IpAddr>) -> Self {
        Self { source_ip, ..self }
    }

    /// The same request, limited to a token's `scopes`.
    pub fn with_scopes(self, scopes: Option<Arc<Scopes>>) -> Self {
        Self { scopes, ..self }
    }

    /// AccessDenied (naming the scope needed) unless the request's token, if it has one,
    /// grants `access` on `key` of `bucket` ("" for the bucket itself).
    pub fn require_scope(&self, access: ScopeAccess, bucket: &str, key: &str) -> StoreResult<()> {
        match &self.scopes {
            Some(scopes) => scopes.require(access, bucket, key),
            None => Ok(()),
        }
    }

    /// The same request, run where it may (or may not) block.
    pub fn with_may_block(&self, may_block: bool) -> Self {
        Self { may_block, ..self.clone() }
    }

    /// The user name a door authenticated, if any.
    pub fn user_name(&self) -> Option<&str> {
        match &self.principal {
            Principal::User { name, .. } => Some(name),
            Principal::Process | Principal::Anonymous => None,
        }
    }
}

impl Default for RequestContext {
    fn default() -> Self {
        Self::process()
    }
}
