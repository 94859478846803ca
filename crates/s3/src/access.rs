//! Who may do what: every request must be signed (s3s's default check refuses anonymous ones);
//! the root user may use every bucket; other users the buckets they created and those the
//! configuration grants them. ListBuckets shows each user only the buckets it may use.

use std::sync::Arc;

use isthmus_store::{RequestContext, Store, StoreError};
use s3s::access::S3AccessContext;
use s3s::dto::{CopyObjectInput, CopySource, UploadPartCopyInput};
use s3s::path::S3Path;
use s3s::{S3Request, S3Result, s3_error};

use crate::auth::UserDirectory;

pub struct AccessPolicy {
    /// Owner lookups are engine calls like any other (inline on local file systems).
    pub engine: crate::engine::Engine,
    pub users: Arc<UserDirectory>,
}

/// Checks that `access_key` may use `bucket`. A missing bucket passes, so the operation itself
/// answers NoSuchBucket.
pub fn check_bucket(
    store: &dyn Store,
    cx: &RequestContext,
    users: &UserDirectory,
    access_key: &str,
    bucket: &str,
) -> Result<bool, StoreError> {
    if users.is_root(access_key) {
        return Ok(true);
    }
    let owner = match store.bucket_owner(cx, bucket) {
        Ok(owner) => owner,
        Err(StoreError::NoSuchBucket) => return Ok(true),
        Err(err) => return Err(err),
    };
    Ok(users.may_use(access_key, bucket, owner.as_deref()))
}

fn requester<T>(req: &S3Request<T>) -> S3Result<&str> {
    req.credentials.as_ref().map(|c| c.access_key.as_str()).ok_or_else(|| s3_error!(AccessDenied, "Access Denied"))
}

fn copy_source_bucket(source: &CopySource) -> Option<&str> {
    match source {
        CopySource::Bucket { bucket, .. } => Some(bucket),
        _ => None,
    }
}

#[async_trait::async_trait]
impl s3s::access::S3Access for AccessPolicy {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let Some(credentials) = cx.credentials() else {
            return Err(s3_error!(AccessDenied, "Anonymous requests are not allowed"));
        };
        let access_key = credentials.access_key.clone();
        let bucket = match cx.s3_path() {
            S3Path::Root => return Ok(()),
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => bucket.to_string(),
        };
        if cx.s3_op().name() == "CreateBucket" {
            return Ok(());
        }
        self.check_owner(access_key, bucket).await
    }

    async fn copy_object(&self, req: &mut S3Request<CopyObjectInput>) -> S3Result<()> {
        self.check_source(req, copy_source_bucket(&req.input.copy_source)).await
    }

    async fn upload_part_copy(&self, req: &mut S3Request<UploadPartCopyInput>) -> S3Result<()> {
        self.check_source(req, copy_source_bucket(&req.input.copy_source)).await
    }
}

impl AccessPolicy {
    /// The source of a copy must be readable by the requester too.
    async fn check_source<T>(&self, req: &S3Request<T>, source_bucket: Option<&str>) -> S3Result<()> {
        let (Some(bucket), access_key) = (source_bucket, requester(req)?) else { return Ok(()) };
        self.check_owner(access_key.to_string(), bucket.to_string()).await
    }

    /// `check_bucket` as an engine call: none for the root user, inline on local file systems.
    async fn check_owner(&self, access_key: String, bucket: String) -> S3Result<()> {
        if self.users.is_root(&access_key) {
            return Ok(());
        }
        let cx = RequestContext::user(access_key.clone(), false);
        let users = self.users.clone();
        let allowed = self
            .engine
            .call(&cx, crate::engine::Placement::Read, move |store, cx| {
                check_bucket(store, cx, &users, &access_key, &bucket)
            })
            .await?;
        if allowed { Ok(()) } else { Err(s3_error!(AccessDenied, "Access Denied")) }
    }
}
