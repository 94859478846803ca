//! Bearer tokens and temporary credentials at the gateway's edge. A request with
//! `Authorization: Bearer <JWT>` is verified here, before the S3 protocol layer (which knows
//! only signatures): a good token becomes a request extension naming its user and scopes and
//! the header is removed; a bad one is answered 401 with what is wrong. A SigV4 request signed
//! with temporary credentials (from STS) has its session token checked when its context is made
//! (by the session floor, `isthmus_session::Principals::context`).

use std::sync::Arc;

use isthmus_grid::{TokenError, TokenGrant};
pub use isthmus_session::GridAuth;
use isthmus_session::tokens::BearerRefusal;
use s3s::S3Request;

/// What a request's token granted, kept in its extensions.
#[derive(Clone, Debug)]
pub struct BearerGrant(pub Arc<TokenGrant>);

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
    let grant = grid.verify_bearer(token).map_err(|refusal| match refusal {
        BearerRefusal::NotAccepted => Refusal {
            code: "InvalidToken",
            message: "This gateway accepts no bearer tokens (no token_issuers are configured)".into(),
        },
        BearerRefusal::Invalid(err) => {
            tracing::info!(error = %err, "bearer token refused");
            Refusal::of(&err)
        }
    })?;
    tracing::debug!(issuer = %grant.issuer, subject = %grant.subject, user = %grant.user, "bearer token accepted");
    req.headers_mut().remove(hyper::header::AUTHORIZATION);
    req.extensions_mut().insert(BearerGrant(Arc::new(grant)));
    Ok(())
}

/// The session token a request signed with temporary credentials carries
/// (`x-amz-security-token`, or `X-Amz-Security-Token` in a presigned URL's query).
pub fn security_token<T>(req: &S3Request<T>) -> Option<String> {
    req.headers.get("x-amz-security-token").and_then(|v| v.to_str().ok()).map(str::to_string).or_else(|| {
        let query = req.uri.query()?;
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "X-Amz-Security-Token")
            .map(|(_, value)| value.into_owned())
    })
}
