//! Bucket policies: PutBucketPolicy (checked against the supported subset, MalformedPolicy
//! otherwise), GetBucketPolicy (NoSuchBucketPolicy without one), DeleteBucketPolicy; and the
//! PublicAccessBlock that overrides policies and ACLs (Put/Get/DeletePublicAccessBlock). The
//! authorization layer (`isthmus_access::self`, `policy`) enforces both.

use isthmus_store::BucketSettings;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;

pub async fn put_bucket_policy(
    gw: &Gateway,
    req: S3Request<PutBucketPolicyInput>,
) -> S3Result<S3Response<PutBucketPolicyOutput>> {
    let cx = gw.cx(&req)?;
    let (bucket, policy) = (req.input.bucket, req.input.policy);
    gw.write(&cx, move |store, cx| store.set_bucket_policy(cx, &bucket, Some(policy.clone()))).await?;
    Ok(S3Response::new(PutBucketPolicyOutput::default()))
}

pub async fn get_bucket_policy(
    gw: &Gateway,
    req: S3Request<GetBucketPolicyInput>,
) -> S3Result<S3Response<GetBucketPolicyOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let policy = gw.read(&cx, move |store, cx| store.bucket_policy(cx, &bucket)).await?;
    match policy {
        Some(policy) => Ok(S3Response::new(GetBucketPolicyOutput { policy: Some(policy) })),
        None => Err(s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist")),
    }
}

pub async fn delete_bucket_policy(
    gw: &Gateway,
    req: S3Request<DeleteBucketPolicyInput>,
) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_policy(cx, &bucket, None)).await?;
    Ok(S3Response::new(DeleteBucketPolicyOutput::default()))
}

fn setting(value: Option<bool>) -> bool {
    value.unwrap_or(false)
}

pub async fn put_public_access_block(
    gw: &Gateway,
    req: S3Request<PutPublicAccessBlockInput>,
) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
    let cx = gw.cx(&req)?;
    let c = req.input.public_access_block_configuration;
    let block = isthmus_store::PublicAccessBlock {
        block_public_acls: setting(c.block_public_acls),
        ignore_public_acls: setting(c.ignore_public_acls),
        block_public_policy: setting(c.block_public_policy),
        restrict_public_buckets: setting(c.restrict_public_buckets),
    };
    let bucket = req.input.bucket;
    gw.write(&cx, move |store, cx| store.set_public_access_block(cx, &bucket, Some(block))).await?;
    Ok(S3Response::new(PutPublicAccessBlockOutput::default()))
}

/// A bucket without one answers NoSuchPublicAccessBlockConfiguration (404), as in S3.
pub async fn get_public_access_block(
    gw: &Gateway,
    req: S3Request<GetPublicAccessBlockInput>,
) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let Some(block) = gw.read(&cx, move |store, cx| store.public_access_block(cx, &bucket)).await? else {
        let mut err = s3s::S3Error::with_message(
            s3s::S3ErrorCode::Custom("NoSuchPublicAccessBlockConfiguration".into()),
            "The public access block configuration was not found",
        );
        err.set_status_code(hyper::StatusCode::NOT_FOUND);
        return Err(err);
    };
    Ok(S3Response::new(GetPublicAccessBlockOutput {
        public_access_block_configuration: Some(PublicAccessBlockConfiguration {
            block_public_acls: Some(block.block_public_acls),
            ignore_public_acls: Some(block.ignore_public_acls),
            block_public_policy: Some(block.block_public_policy),
            restrict_public_buckets: Some(block.restrict_public_buckets),
        }),
    }))
}

pub async fn delete_public_access_block(
    gw: &Gateway,
    req: S3Request<DeletePublicAccessBlockInput>,
) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    gw.write(&cx, move |store, cx| store.set_public_access_block(cx, &bucket, None)).await?;
    Ok(S3Response::new(DeletePublicAccessBlockOutput::default()))
}
