//! Bucket policies: PutBucketPolicy (checked against the supported subset, MalformedPolicy
//! otherwise), GetBucketPolicy (NoSuchBucketPolicy without one), DeleteBucketPolicy. The
//! authorization layer (`isthmus_store::policy`) evaluates them.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;

pub async fn put_bucket_policy(
    gw: &Gateway,
    req: S3Request<PutBucketPolicyInput>,
) -> S3Result<S3Response<PutBucketPolicyOutput>> {
    let cx = gw.cx(&req);
    let (bucket, policy) = (req.input.bucket, req.input.policy);
    gw.write(&cx, move |store, cx| store.set_bucket_policy(cx, &bucket, Some(policy.clone()))).await?;
    Ok(S3Response::new(PutBucketPolicyOutput::default()))
}

pub async fn get_bucket_policy(
    gw: &Gateway,
    req: S3Request<GetBucketPolicyInput>,
) -> S3Result<S3Response<GetBucketPolicyOutput>> {
    let cx = gw.cx(&req);
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
    let cx = gw.cx(&req);
    let bucket = req.input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_policy(cx, &bucket, None)).await?;
    Ok(S3Response::new(DeleteBucketPolicyOutput::default()))
}
