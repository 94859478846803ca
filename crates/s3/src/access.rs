//! The gateway's access hook: every request must be signed. Which bucket a signed user may use
//! is decided by the engine's authorization layer (`isthmus_store::Authorized`), which the
//! gateway's store is wrapped in, so the gateway and the in-process doors follow one set of rules.

use s3s::access::S3AccessContext;
use s3s::{S3Result, s3_error};

pub struct SignedRequestsOnly;

#[async_trait::async_trait]
impl s3s::access::S3Access for SignedRequestsOnly {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        match cx.credentials() {
            Some(_) => Ok(()),
            None => Err(s3_error!(AccessDenied, "Anonymous requests are not allowed")),
        }
    }
}
