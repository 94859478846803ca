//! Bearer tokens and temporary credentials at the gateway's edge. A request with
//! `Authorization: Bearer <JWT>` is verified here, before the S3 protocol layer (which knows
//! only signatures): a good token becomes a request extension naming its user and scopes and
//! the header is removed; a bad one is answered 401 with what is wrong. A SigV4 request signed
//! with temporary credentials (from STS) has its session token checked when its context is made.

use std::sync::Arc;

use isthmus_grid::{SessionError, SessionKeys, TokenError, TokenGrant, TokenVerifier};
use isthmus_store::{RequestContext, Scopes};
use s3s::S3Request;

/// What a request's token granted, kept in its extensions.
#[derive(Clone, Debug)]
pub struct BearerGrant(pub Arc<TokenGrant>);

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

/// The token of an `Authorization: Bearer` header.
pub fn bearer_token<B>(req: &hyper::Request<B>) -> Option<&str> {
    let value = req.headers().get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// A refused token as the client sees it: 401, the reason, and RFC 6750's challenge.
#[derive(Debug)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

impl Refusal {
    fn of(err: &TokenError) -> Self {
        let code = if err.is_expiry() { "ExpiredToken" } else { "InvalidToken" };
        Self { code, message: format!("The bearer token was refused: {err}") }
    }
}

/// Admits a bearer-token request: on success the header is gone and the grant is in the
/// request's extensions; requests without a bearer token pass unchanged.
pub fn admit<B>(req: &mut hyper::Request<B>, grid: &GridAuth) -> Result<(), Refusal> {
    let Some(token) = bearer_token(req) else { return Ok(()) };
    let Some(verifier) = &grid.tokens else {
        return Err(Refusal {
            code: "InvalidToken",
            message: "This gateway accepts no bearer tokens (no token_issuers are configured)".into(),
        });
    };
    let grant = verifier.verify(token).map_err(|err| {
        tracing::info!(error = %err, "bearer token refused");
        Refusal::of(&err)
    })?;
    tracing::debug!(issuer = %grant.issuer, subject = %grant.subject, user = %grant.user, "bearer token accepted");
    req.headers_mut().remove(hyper::header::AUTHORIZATION);
    req.extensions_mut().insert(BearerGrant(Arc::new(grant)));
    Ok(())
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
    /// Whether credentials made from keys were made from the user's current keys (`user`:
    /// the directory's entry, none if the user is gone). Tokens' principals always are.
    pub fn keys_still_current(&self, user: Option<&crate::User>, grid: &GridAuth) -> bool {
        let Some(fingerprint) = &self.made_from_keys else { return true };
        match (user, &grid.sessions) {
            (Some(user), Some(sessions)) => sessions.fingerprint(&user.access_key, &user.secret_key) == *fingerprint,
            _ => false,
        }
    }
}

/// The user and scopes a request acts with when a token (or temporary credentials) authenticated
/// it: `Ok(None)` for requests signed with a user's own keys and unsigned ones.
pub fn token_principal<T>(req: &S3Request<T>, grid: &GridAuth) -> Result<Option<TokenPrincipal>, s3s::S3Error> {
    if let Some(BearerGrant(grant)) = req.extensions.get::<BearerGrant>() {
        let principal =
            TokenPrincipal { user: grant.user.clone(), scopes: Some(grant.scopes.clone()), made_from_keys: None };
        return Ok(Some(principal));
    }
    let (Some(credentials), Some(sessions)) = (&req.credentials, &grid.sessions) else { return Ok(None) };
    if sessions.secret_for(&credentials.access_key).is_none() {
        return Ok(None);
    }
    let token =
        req.headers.get("x-amz-security-token").and_then(|v| v.to_str().ok()).map(str::to_string).or_else(|| {
            let query = req.uri.query()?;
            url::form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == "X-Amz-Security-Token")
                .map(|(_, value)| value.into_owned())
        });
    match sessions.verify(&credentials.access_key, token.as_deref()) {
        Ok(session) => Ok(Some(TokenPrincipal {
            scopes: session.limits(),
            made_from_keys: session.from_keys().then(|| session.keys.clone()),
            user: session.user,
        })),
        Err(SessionError::Expired) => {
            Err(s3s::s3_error!(ExpiredToken, "The provided token has expired (temporary credentials)"))
        }
        Err(err) => Err(s3s::S3Error::with_message(s3s::S3ErrorCode::InvalidToken, err.to_string())),
    }
}

/// The context of a token-authenticated request: its user, limited to its scopes (if any).
pub fn token_context(principal: TokenPrincipal, is_root: bool) -> RequestContext {
    RequestContext::user(principal.user, is_root).with_scopes(principal.scopes)
}
