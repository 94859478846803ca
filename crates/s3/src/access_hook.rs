//! The gateway's access hook. Signed requests pass (s3s has verified the signature), and so do
//! requests with a verified bearer token; unsigned
//! ones pass too, as the anonymous principal, for the operations a bucket's canned ACL can share
//! (reading and writing objects, listing); every other operation needs a signature. Which
//! principal may do what in which bucket is decided by the engine's authorization layer
//! (`isthmus_access::Authorized`), which the gateway's store is wrapped in, so the gateway and
//! the in-process doors follow one set of rules.

use s3s::access::S3AccessContext;
use s3s::{S3Result, s3_error};

pub struct SignedRequestsOnly;

/// Operations an ACL can open to unsigned requests.
const ANONYMOUS_OPERATIONS: &[&str] = &[
    "GetObject",
    "HeadObject",
    "HeadBucket",
    "ListObjects",
    "ListObjectsV2",
    "PutObject",
    "PostObject",
    "DeleteObject",
    "GetBucketLocation",
];

/// Whether unsigned requests may ask for `operation` (the authorization layer then decides
/// whether the anonymous principal may do it there). The fast path of anonymous reads asks
/// this too (`fast_read`).
pub(crate) fn admits_anonymous(operation: &str) -> bool {
    ANONYMOUS_OPERATIONS.contains(&operation)
}

#[async_trait::async_trait]
impl s3s::access::S3Access for SignedRequestsOnly {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let operation = cx.s3_op().name().to_string();
        if let Some(slot) = cx.extensions_mut().get::<crate::metrics::OperationSlot>() {
            slot.set(&operation);
        }
        // A bearer token was verified before the protocol layer (`bearer::admit`).
        let has_token = cx.extensions_mut().get::<crate::bearer::BearerGrant>().is_some();
        if cx.credentials().is_some() || has_token || admits_anonymous(cx.s3_op().name()) {
            return Ok(());
        }
        Err(s3_error!(AccessDenied, "Anonymous requests are not allowed for this operation"))
    }
}
