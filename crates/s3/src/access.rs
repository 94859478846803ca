//! Who may do what: every request must be signed (s3s's default check refuses anonymous ones);
//! the root user may use every bucket; other users the buckets they created and those the
//! configuration grants them. ListBuckets shows each user only the buckets it may use.

use std::sync::Arc;

use isthmus_store::{Store, StoreError};
use s3s::access::S3AccessContext;
use s3s::dto::{CopyObjectInput, CopySource, UploadPartCopyInput};
use s3s::path::S3Path;
use s3s::{S3Request, S3Result, s3_error};

use crate::auth::UserDirectory;

pub struct AccessPolicy<S: Store> {
    pub store: Arc<S>,
    pub users: Arc<UserDirectory>,
    /// Where the owner lookup runs (inline on local file systems, as the gateway's reads do).
    pub io: crate::error::IoPolicy,
}

/// Checks that `access_key` may use `bucket`. A missing bucket passes, so the operation itself
/// answers NoSuchBucket.
pub fn check_bucket<S: Store>(store: &S, users: &UserDirectory, access_key: &str, bucket: &str) -> S3Result<()> {
    if users.is_root(access_key) {
        return Ok(());
    }
    let owner = match store.bucket_owner(bucket) {
        Ok(owner) => owner,
        Err(StoreError::NoSuchBucket) => return Ok(()),
        Err(err) => return Err(crate::error::s3_error(err)),
    };
    if users.may_use(access_key, bucket, owner.as_deref()) {
        Ok(())
    } else {
        Err(s3_error!(AccessDenied, "Access Denied"))
    }
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
impl<S: Store> s3s::access::S3Access for AccessPolicy<S> {
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

impl<S: Store> AccessPolicy<S> {
    /// The source of a copy must be readable by the requester too.
    async fn check_source<T>(&self, req: &S3Request<T>, source_bucket: Option<&str>) -> S3Result<()> {
        let (Some(bucket), access_key) = (source_bucket, requester(req)?) else { return Ok(()) };
        self.check_owner(access_key.to_string(), bucket.to_string()).await
    }

    /// `check_bucket` without a thread handoff where none is needed: the root user needs no
    /// lookup at all, and on local file systems the owner file is read inline.
    async fn check_owner(&self, access_key: String, bucket: String) -> S3Result<()> {
        if self.users.is_root(&access_key) {
            return Ok(());
        }
        if self.io.inline_reads {
            return check_bucket(&*self.store, &self.users, &access_key, &bucket);
        }
        let (store, users) = (self.store.clone(), self.users.clone());
        tokio::task::spawn_blocking(move || check_bucket(&*store, &users, &access_key, &bucket))
            .await
            .map_err(crate::error::join_error)?
    }
}
