//! The store stack every door calls, assembled here and nowhere else: the authorization
//! layer (owners, grants, ACLs, policies, scopes, quotas) over the identity wrapper (each call
//! as the request's Unix identity, `as_requester`) over the engine (the data root's pools;
//! an erasure-coded pool runs as the gateway by construction). In-process doors (C, libs3,
//! Python, the command line's tools) act as the process itself; a `unix:` location reaches a
//! running gateway's local socket instead, served as the user the process's uid maps to.

use std::path::Path;
use std::sync::Arc;

use isthmus_access::{Authorized, BucketGrants, quota::Quotas};
use isthmus_posix::StoreOptions;
use isthmus_store::{Store, StoreResult};

use crate::as_requester::AsRequester;
use crate::users::UserDirectory;

/// The stack a gateway serves `engine` through: its users' grants decide who may use which
/// bucket, the root user owns buckets without a recorded owner, `quotas` are enforced, and a
/// bucket's canned ACL shares its objects too where `bucket_acl_shares_objects` keeps the
/// sharing of earlier releases.
pub fn served(
    engine: Arc<dyn Store>,
    users: &UserDirectory,
    quotas: Option<Arc<Quotas>>,
    bucket_acl_shares_objects: bool,
) -> Arc<dyn Store> {
    let identified: Arc<dyn Store> = Arc::new(AsRequester(engine));
    Arc::new(
        Authorized::new(identified, users.grants())
            .with_root_owner(users.root())
            .with_quotas(quotas)
            .with_bucket_acl_sharing_objects(bucket_acl_shares_objects),
    )
}

/// The stack over `engine` for the process acting for itself (no users, no grants).
pub fn in_process(engine: Arc<dyn Store>) -> Arc<dyn Store> {
    let identified: Arc<dyn Store> = Arc::new(AsRequester(engine));
    Arc::new(Authorized::new(identified, BucketGrants::default()))
}

/// A data root with its pools (ROOT/.isthmus/pools.toml), as the gateway sees it, for the
/// process acting for itself.
pub fn open_root(root: &Path, options: StoreOptions) -> StoreResult<Arc<dyn Store>> {
    Ok(in_process(isthmus_pools::open_root(root, options)?))
}

/// A data root (`open_root`), or a gateway's local socket when `location` is `unix:PATH` or
/// `unix://PATH` (then the gateway's own stack serves it, and `options` are the gateway's).
pub fn open(location: &str, options: StoreOptions) -> StoreResult<Arc<dyn Store>> {
    match isthmus_local::socket_path(location) {
        Some(path) => Ok(Arc::new(isthmus_local::LocalStore::connect(path)?)),
        None => open_root(Path::new(location), options),
    }
}

/// `served` with its successful writes and deletes announced to `announcer` for the buckets'
/// notification rules; buckets without a recorded owner are `root_user`'s.
pub fn announced(
    served: Arc<dyn Store>,
    announcer: Arc<dyn crate::announcing::Announcer>,
    root_user: &str,
) -> crate::announcing::Announcing {
    crate::announcing::Announcing::new(served, announcer, root_user)
}
