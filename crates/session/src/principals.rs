//! Who is asking: the one place a door's evidence (a checked signature's access key, a
//! bearer token's grant, temporary credentials' session token, a socket peer's uid, or "this
//! process") becomes a `RequestContext`: the user, whether it is root, its token scopes and
//! the Unix identity its calls run as. Disabled users and users without an identity (with
//! `identity = "posix"`) are refused here, for every door alike.

use std::sync::Arc;

use isthmus_grid::TokenGrant;
use isthmus_store::RequestContext;

use crate::Refusal;
use crate::identities::Identities;
use crate::tokens::{GridAuth, TokenPrincipal};
use crate::users::UserDirectory;

/// What a door knows about who sent a request, before the session decides who that is.
#[derive(Debug, Default, Clone, Copy)]
pub struct Asking<'a> {
    /// The access key a door checked the request's signature with (none: unsigned).
    pub access_key: Option<&'a str>,
    /// A bearer token's grant, verified by the door's edge with `GridAuth::verify_bearer`.
    pub bearer: Option<&'a TokenGrant>,
    /// The session token that came with the request (temporary credentials).
    pub security_token: Option<&'a str>,
}

/// The users, their identities and the grid credentials: everything that says who asks.
/// Clones share the same tables (administration changes them while the gateway serves).
#[derive(Clone)]
pub struct Principals {
    users: UserDirectory,
    identities: Arc<Identities>,
    grid: GridAuth,
}

impl Principals {
    pub fn new(users: UserDirectory, identities: Arc<Identities>, grid: GridAuth) -> Self {
        Self { users, identities, grid }
    }

    /// Users only, each running as the gateway, with no tokens (embedded tools and tests).
    pub fn of_users(users: UserDirectory) -> Self {
        Self::new(users, Arc::new(Identities::gateway()), GridAuth::default())
    }

    pub fn users(&self) -> &UserDirectory {
        &self.users
    }

    pub fn identities(&self) -> &Arc<Identities> {
        &self.identities
    }

    pub fn grid(&self) -> &GridAuth {
        &self.grid
    }

    /// The secret a signature by `access_key` is checked with: a user's (refused when the
    /// user is disabled or unknown), or temporary credentials' (their token is checked by
    /// `context`).
    pub fn signing_secret(&self, access_key: &str) -> Result<String, Refusal> {
        if self.users.get(access_key).is_none()
            && let Some(secret) = self.grid.temporary_secret(access_key)
        {
            return Ok(secret);
        }
        self.users.secret_of(access_key)
    }

    /// The context of a request: the user its signature, bearer token or temporary
    /// credentials (then limited to the token's scopes) authenticated, or an anonymous one;
    /// with the Unix identity its calls run as.
    pub fn context(&self, asking: &Asking<'_>) -> Result<RequestContext, Refusal> {
        let token = match (asking.bearer, asking.access_key) {
            (Some(grant), _) => Some(TokenPrincipal::of_grant(grant)),
            (None, Some(access_key)) => self.grid.temporary_principal(access_key, asking.security_token)?,
            (None, None) => None,
        };
        let cx = match (asking.access_key, token) {
            (_, Some(principal)) => {
                // Credentials made from keys last only while those keys are the user's (a
                // removed user or a rotated secret ends them).
                if !principal.keys_still_current(self.users.get(&principal.user).as_ref(), &self.grid) {
                    return Err(Refusal::StaleKeys);
                }
                let is_root = self.users.is_root(&principal.user);
                principal.context(is_root)
            }
            (Some(access_key), None) => RequestContext::user(access_key, self.users.is_root(access_key)),
            // Unsigned: the authorization layer allows it only where a bucket's ACL shares.
            (None, None) => RequestContext::anonymous(),
        };
        self.with_identity(cx)
    }

    /// Whether `access_key` with `security_token` are temporary credentials the root user made
    /// from its current keys (STS `GetSessionToken`, what the web console keeps), not a token's.
    pub fn is_root_session(&self, access_key: &str, security_token: Option<&str>) -> bool {
        match self.grid.temporary_principal(access_key, security_token) {
            Ok(Some(principal)) => {
                principal.made_from_keys.is_some()
                    && principal.scopes.is_none()
                    && self.users.is_root(&principal.user)
                    && principal.keys_still_current(self.users.get(&principal.user).as_ref(), &self.grid)
            }
            _ => false,
        }
    }

    /// The context of a local socket's peer: the user its uid maps to (the first in
    /// configuration order), if that user exists, is enabled and has an identity.
    pub fn peer(&self, uid: u32) -> Option<RequestContext> {
        let (access_key, _) = self.identities.by_uid(uid)?;
        let is_root = self.users.is_root(&access_key);
        self.with_identity(RequestContext::user(access_key, is_root)).ok()
    }

    /// Changes whenever the users or their identities change (a connection that keeps its
    /// peer's context asks again then).
    pub fn generation(&self) -> u64 {
        // Both counters only grow, so their sum moves whenever either does.
        self.identities.generation().wrapping_add(self.users.generation())
    }

    fn with_identity(&self, cx: RequestContext) -> Result<RequestContext, Refusal> {
        if cx.user_name().is_some_and(|user| self.users.is_disabled(user)) {
            return Err(Refusal::UserDisabled);
        }
        let identity = self.identities.of(&cx)?;
        Ok(cx.with_identity(identity))
    }
}

impl isthmus_local::Peers for Principals {
    fn resolve(&self, uid: u32) -> Option<RequestContext> {
        self.peer(uid)
    }

    fn generation(&self) -> u64 {
        Principals::generation(self)
    }

    /// A connection's thread rests in its peer's identity between requests (see
    /// `identity::allow_resting`), and gets its own back when the peer leaves.
    fn serve_connection(&self, serve: &mut dyn FnMut() -> std::io::Result<()>) -> std::io::Result<()> {
        let served = isthmus_store::identity::allow_resting(serve);
        isthmus_store::identity::end_resting();
        served
    }
}
