//! Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation.

use isthmus_store::Store;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};

use crate::Gateway;

pub async fn list_buckets<S: Store>(
    gw: &Gateway<S>,
    req: S3Request<ListBucketsInput>,
) -> S3Result<S3Response<ListBucketsOutput>> {
    let prefix = req.input.prefix.clone();
    let requester = req.credentials.as_ref().map(|c| c.access_key.clone()).unwrap_or_default();
    let users = gw.users.clone();
    // Each user sees the buckets it may use.
    let buckets = gw
        .read(move |store| {
            let all = store.list_buckets()?;
            Ok(all
                .into_iter()
                .filter(|b| crate::access::check_bucket(store, &users, &requester, &b.name).is_ok())
                .collect::<Vec<_>>())
        })
        .await?;
    let buckets = buckets
        .into_iter()
        .filter(|b| prefix.as_deref().is_none_or(|p| b.name.starts_with(p)))
        .map(|b| Bucket { name: Some(b.name), creation_date: Some(Timestamp::from(b.created)), bucket_region: None })
        .collect();
    let owner = req.credentials.map(|c| Owner { id: Some(c.access_key.clone()), display_name: Some(c.access_key) });
    Ok(S3Response::new(ListBucketsOutput { buckets: Some(buckets), owner, prefix, ..Default::default() }))
}

pub async fn create_bucket<S: Store>(
    gw: &Gateway<S>,
    req: S3Request<CreateBucketInput>,
) -> S3Result<S3Response<CreateBucketOutput>> {
    let bucket = req.input.bucket;
    let location = format!("/{bucket}");
    let owner = req.credentials.map(|c| c.access_key).unwrap_or_default();
    gw.write(move |store| {
        store.create_bucket(&bucket)?;
        store.set_bucket_owner(&bucket, &owner)
    })
    .await?;
    Ok(S3Response::new(CreateBucketOutput { location: Some(location) }))
}

pub async fn head_bucket<S: Store>(
    gw: &Gateway<S>,
    req: S3Request<HeadBucketInput>,
) -> S3Result<S3Response<HeadBucketOutput>> {
    gw.read(move |store| store.head_bucket(&req.input.bucket)).await?;
    Ok(S3Response::new(HeadBucketOutput::default()))
}

pub async fn delete_bucket<S: Store>(
    gw: &Gateway<S>,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<S3Response<DeleteBucketOutput>> {
    gw.write(move |store| store.delete_bucket(&req.input.bucket)).await?;
    Ok(S3Response::new(DeleteBucketOutput::default()))
}

pub async fn get_bucket_location<S: Store>(
    gw: &Gateway<S>,
    req: S3Request<GetBucketLocationInput>,
) -> S3Result<S3Response<GetBucketLocationOutput>> {
    gw.read(move |store| store.head_bucket(&req.input.bucket)).await?;
    // us-east-1 is reported as an empty constraint, which every client accepts.
    Ok(S3Response::new(GetBucketLocationOutput { location_constraint: None }))
}

pub async fn get_bucket_versioning<S: Store>(
    gw: &Gateway<S>,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    gw.read(move |store| store.head_bucket(&req.input.bucket)).await?;
    // Never versioned: S3 reports that by leaving Status out.
    Ok(S3Response::new(GetBucketVersioningOutput::default()))
}
