//! Bearer tokens and temporary credentials: which issuers and which session key the gateway
//! trusts (`GridAuth`), and who a token or temporary credentials make a request act as
//! (`TokenPrincipal`). The HTTP edge finds the token in the request; deciding what it means
//! is here.

use std::sync::Arc;

use isthmus_grid::{SessionError, SessionKeys, TokenError, TokenGrant, TokenVerifier};
use isthmus_store::{RequestContext, Scopes};

use crate::Refusal;
use crate::users::User;

/// The grid credentials the gateway accepts besides its users' keys.
#[derive(Clone, Default)]
pub struct GridAuth {
    /// Trusted token issuers (none: bearer tokens are refused).
    pub tokens: Option<Arc<TokenVerifier>>,
    /// The key of temporary credentials (none: STS is off).
    pub sessions: Option<SessionKeys>,
}

impl std::fmt::Debug for GridAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GridAuth")
            .field("tokens", &self.tokens.is_some())
            .field("sessions", &self.sessions.is_some())
            .finish()
    }
}

/// Why a bearer token was refused.
#[derive(Debug)]
pub enum BearerRefusal {
    /// No issuer is configured: this gateway takes no bearer tokens.
    NotAccepted,
    /// The token failed verification.
    Invalid(TokenError),
}

impl GridAuth {
    /// What a bearer token grants, if it is one a trusted issuer signed.
    pub fn verify_bearer(&self, token: &str) -> Result<TokenGrant, BearerRefusal> {
        let verifier = self.tokens.as_ref().ok_or(BearerRefusal::NotAccepted)?;
        verifier.verify(token).map_err(BearerRefusal::Invalid)
    }

    /// The secret of temporary credentials' access key, if it is one (their session token is
    /// checked when the request's context is made).
    pub fn temporary_secret(&self, access_key: &str) -> Option<String> {
        self.sessions.as_ref().and_then(|sessions| sessions.secret_for(access_key))
    }

    /// Who a request signed with `access_key` acts as when that key is temporary credentials
    /// (checked against `security_token`); `Ok(None)` for other keys.
    pub fn temporary_principal(
        &self,
        access_key: &str,
        security_token: Option<&str>,
    ) -> Result<Option<TokenPrincipal>, Refusal> {
        let Some(sessions) = &self.sessions else { return Ok(None) };
        if sessions.secret_for(access_key).is_none() {
            return Ok(None);
        }
        match sessions.verify(access_key, security_token) {
            Ok(session) => Ok(Some(TokenPrincipal {
                scopes: session.limits(),
                made_from_keys: session.from_keys().then(|| session.keys.clone()),
                user: session.user,
            })),
            Err(SessionError::Expired) => Err(Refusal::ExpiredToken),
            Err(err) => Err(Refusal::InvalidToken(err.to_string())),
        }
    }
}

/// Who a request authenticated by a token or by temporary credentials acts as.
#[derive(Debug)]
pub struct TokenPrincipal {
    /// The user (its access key).
    pub user: String,
    /// The token's scopes; none for temporary credentials made from the user's own keys.
    pub scopes: Option<Arc<Scopes>>,
    /// For temporary credentials made from the user's own keys: the fingerprint of those keys,
    /// which must still be the user's (`keys_still_current`).
    pub made_from_keys: Option<String>,
}

impl TokenPrincipal {
    /// The principal of a verified bearer token.
    pub fn of_grant(grant: &TokenGrant) -> Self {
        Self { user: grant.user.clone(), scopes: Some(grant.scopes.clone()), made_from_keys: None }
    }

    /// Whether credentials made from keys were made from the user's current keys (`user`:
    /// the directory's entry, none if the user is gone). Tokens' principals always are.
    pub fn keys_still_current(&self, user: Option<&User>, grid: &GridAuth) -> bool {
        let Some(fingerprint) = &self.made_from_keys else { return true };
        match (user, &grid.sessions) {
            (Some(user), Some(sessions)) => sessions.fingerprint(&user.access_key, &user.secret_key) == *fingerprint,
            _ => false,
        }
    }

    /// The context of a token-authenticated request: its user, limited to its scopes (if any).
    pub fn context(self, is_root: bool) -> RequestContext {
        RequestContext::user(self.user, is_root).with_scopes(self.scopes)
    }
}
