//! Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation.

use isthmus_store::BucketSettings;
use isthmus_store::CreateBucketRequest;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;

/// The region every bucket of this gateway reports.
const REGION: &str = crate::server::DEFAULT_REGION;

/// ListBuckets, with S3's filters and pages: `prefix`, `bucket-region`, `max-buckets`
/// (1-10,000; all buckets without it) and `continuation-token`.
pub async fn list_buckets(gw: &Gateway, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let max_buckets = match input.max_buckets {
        None => usize::MAX,
        Some(n @ 1..=10_000) => n as usize,
        Some(_) => return Err(s3_error!(InvalidArgument, "max-buckets must be between 1 and 10000")),
    };
    let after = match input.continuation_token.as_deref().filter(|t| !t.is_empty()) {
        Some(token) => Some(crate::list::decode_token(token)?),
        None => None,
    };
    // The authorization layer shows each user the buckets it may use, in name order.
    let all = gw.scan(&cx, move |store, cx| store.list_buckets(cx)).await?;
    let mut matching = all.into_iter().filter(|b| {
        input.prefix.as_deref().is_none_or(|p| b.name.starts_with(p))
            && input.bucket_region.as_deref().is_none_or(|r| r == REGION)
            && after.as_deref().is_none_or(|a| b.name.as_str() > a)
    });
    let page: Vec<_> = matching.by_ref().take(max_buckets).collect();
    let continuation_token = match (matching.next(), page.last()) {
        (Some(_), Some(last)) => Some(crate::list::encode_token(&last.name)),
        _ => None,
    };
    let buckets = page
        .into_iter()
        .map(|b| Bucket {
            name: Some(b.name),
            creation_date: Some(Timestamp::from(b.created)),
            bucket_region: Some(REGION.to_string()),
        })
        .collect();
    let owner = req.credentials.map(|c| Owner { id: Some(c.access_key.clone()), display_name: Some(c.access_key) });
    Ok(S3Response::new(ListBucketsOutput { buckets: Some(buckets), owner, prefix: input.prefix, continuation_token }))
}

pub async fn create_bucket(
    gw: &Gateway,
    req: S3Request<CreateBucketInput>,
) -> S3Result<S3Response<CreateBucketOutput>> {
    let cx = gw.cx(&req)?;
    crate::acl::no_grant_headers!(req.input);
    if req.input.grant_write.is_some() {
        return Err(s3_error!(NotImplemented, "Grant headers are taken by PutBucketAcl; use x-amz-acl here"));
    }
    let acl = crate::acl::parse_canned(req.input.acl.as_ref().map(|a| a.as_str()))?.map(isthmus_store::Acl::canned);
    let bucket = req.input.bucket;
    let location = format!("/{bucket}");
    let request = CreateBucketRequest {
        location: req
            .input
            .create_bucket_configuration
            .and_then(|c| c.location_constraint)
            .map(|l| l.as_str().to_string()),
    };
    // The authorization layer records the creator as owner, and tells the owner of an existing
    // bucket (BucketAlreadyOwnedByYou) apart from everyone else (BucketAlreadyExists).
    gw.write(&cx, move |store, cx| {
        match store.create_bucket(cx, &bucket, &request) {
            Err(isthmus_store::StoreError::BucketAlreadyOwnedByYou) if in_us_east_1(&request) => {
                return recreate_own_bucket(store, cx, &bucket, acl.as_ref());
            }
            created => created?,
        }
        match &acl {
            Some(acl) => store.set_bucket_acl(cx, &bucket, acl.clone()),
            None => Ok(()),
        }
    })
    .await?;
    Ok(S3Response::new(CreateBucketOutput { location: Some(location) }))
}

/// Whether a CreateBucket asks for the location S3 calls us-east-1: no constraint, or one
/// naming us-east-1.
fn in_us_east_1(request: &CreateBucketRequest) -> bool {
    request.location.as_deref().is_none_or(|l| l.is_empty() || l == crate::server::DEFAULT_REGION)
}

/// CreateBucket of a bucket the requester owns, asked for us-east-1. A gateway without a pool
/// table is that one location (GetBucketLocation answers it), and S3 answers there 200 and
/// changes nothing, so a tool that "makes sure the bucket exists" works; asking for an ACL
/// other than the bucket's is refused (409 `BucketAlreadyExists`, as the S3 conformance suite
/// checks), never applied: re-creating resets neither the bucket's ACL nor its contents. With
/// pools, each pool is a location (a region, to S3 clients), and S3 answers other regions 409
/// `BucketAlreadyOwnedByYou`.
fn recreate_own_bucket(
    store: &dyn isthmus_store::Store,
    cx: &isthmus_store::RequestContext,
    bucket: &str,
    asked: Option<&isthmus_store::Acl>,
) -> isthmus_store::StoreResult<()> {
    if store.bucket_facts(cx, bucket)?.pool.is_some() {
        return Err(isthmus_store::StoreError::BucketAlreadyOwnedByYou);
    }
    let current = store.bucket_config(cx, bucket)?.acl;
    let asked = asked.cloned().unwrap_or_default();
    if asked.canned == current.canned && current.grants.is_empty() {
        Ok(())
    } else {
        Err(isthmus_store::StoreError::BucketAlreadyExists)
    }
}

pub async fn head_bucket(gw: &Gateway, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    gw.read(&cx, move |store, cx| store.head_bucket(cx, &bucket)).await?;
    Ok(S3Response::new(HeadBucketOutput::default()))
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<S3Response<DeleteBucketOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    // Removes the bucket's internal tree (unfinished uploads can be large): on the pool.
    gw.long(&cx, move |store, cx| store.delete_bucket(cx, &bucket)).await?;
    Ok(S3Response::new(DeleteBucketOutput::default()))
}

pub async fn get_bucket_location(
    gw: &Gateway,
    req: S3Request<GetBucketLocationInput>,
) -> S3Result<S3Response<GetBucketLocationOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let pool = gw.read(&cx, move |store, cx| store.bucket_facts(cx, &bucket).map(|facts| facts.pool)).await?;
    // The pool holding the bucket; without pools, us-east-1, reported as an empty constraint,
    // which every client accepts.
    let location_constraint = pool.map(BucketLocationConstraint::from);
    Ok(S3Response::new(GetBucketLocationOutput { location_constraint }))
}

pub async fn get_bucket_versioning(
    gw: &Gateway,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let state = gw.read(&cx, move |store, cx| store.bucket_versioning(cx, &bucket)).await?;
    // A bucket never versioned: S3 reports that by leaving Status out.
    Ok(S3Response::new(GetBucketVersioningOutput {
        status: state.map(|s| BucketVersioningStatus::from(s.as_str().to_string())),
        mfa_delete: None,
    }))
}

/// PutBucketVersioning: Enabled or Suspended. MFA delete needs an MFA device, which this
/// gateway does not have: refused.
pub async fn put_bucket_versioning(
    gw: &Gateway,
    req: S3Request<PutBucketVersioningInput>,
) -> S3Result<S3Response<PutBucketVersioningOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let config = input.versioning_configuration;
    if config.mfa_delete.as_ref().is_some_and(|m| m.as_str() == MFADelete::ENABLED) || input.mfa.is_some() {
        return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
    }
    let state = config
        .status
        .as_ref()
        .and_then(|s| isthmus_store::Versioning::parse(s.as_str()))
        .ok_or_else(|| s3_error!(MalformedXML, "The versioning Status must be Enabled or Suspended"))?;
    let bucket = input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_versioning(cx, &bucket, state)).await?;
    Ok(S3Response::new(PutBucketVersioningOutput::default()))
}
