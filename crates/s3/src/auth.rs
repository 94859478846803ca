//! The secrets s3s checks signatures with, asked of the session floor (users' keys and the
//! keys of temporary credentials), and the S3 error each of the session's refusals becomes.

use isthmus_session::{Principals, Refusal};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Error, S3ErrorCode, S3Result};

/// The users' and temporary credentials' secrets (their session token is checked when the
/// request's context is made).
#[derive(Clone)]
pub struct GatewayKeys(pub Principals);

#[async_trait::async_trait]
impl S3Auth for GatewayKeys {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        self.0.signing_secret(access_key).map(SecretKey::from).map_err(refusal_error)
    }
}

/// The S3 error a refusal of the session floor is answered with.
pub fn refusal_error(refusal: Refusal) -> S3Error {
    let code = S3ErrorCode::from_bytes(refusal.s3_code().as_bytes()).unwrap_or(S3ErrorCode::AccessDenied);
    S3Error::with_message(code, refusal.to_string())
}
