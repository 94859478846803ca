//! What an object's subresources (its tags and ACL) attach to: this gateway keeps them for
//! the current version only, and a request naming another version is refused here.

use isthmus_store::{HeadRequest, RequestContext, Store, StoreError, StoreResult};

/// Tags and ACLs are kept for the current version only: a `versionId` must name it (or be
/// absent). A missing version is NoSuchVersion; another existing one, a clear refusal.
pub(crate) fn require_current_version(
    store: &dyn Store,
    cx: &RequestContext,
    bucket: &str,
    key: &str,
    version_id: Option<&str>,
) -> StoreResult<()> {
    let Some(wanted) = version_id else { return Ok(()) };
    let named = HeadRequest { version_id: Some(wanted.to_string()), ..Default::default() };
    let named = store.head_object(cx, bucket, key, &named)?;
    match store.head_object(cx, bucket, key, &HeadRequest::default()) {
        Ok(current) if current.version_id == named.version_id => Ok(()),
        Ok(_) | Err(_) => Err(StoreError::InvalidRequest(
            "This gateway keeps tags and ACLs for the current version of an object only".into(),
        )),
    }
}
