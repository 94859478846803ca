//! Bucket CORS configuration (Put/Get/DeleteBucketCors): the S3 document converted to and from
//! the store's rules (`isthmus_store::cors`), which the HTTP layer matches preflights and actual
//! requests against.

use isthmus_store::{BucketSettings, CorsConfig, CorsRule};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;

pub async fn put_bucket_cors(
    gw: &Gateway,
    req: S3Request<PutBucketCorsInput>,
) -> S3Result<S3Response<PutBucketCorsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let rules = input.cors_configuration.cors_rules.into_iter().map(rule_of).collect();
    let config = Some(CorsConfig { rules });
    gw.write(&cx, move |store, cx| store.set_bucket_cors(cx, &input.bucket, config.clone())).await?;
    Ok(S3Response::new(PutBucketCorsOutput::default()))
}

/// A bucket without rules answers NoSuchCORSConfiguration, as in S3.
pub async fn get_bucket_cors(
    gw: &Gateway,
    req: S3Request<GetBucketCorsInput>,
) -> S3Result<S3Response<GetBucketCorsOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let Some(config) = gw.read(&cx, move |store, cx| store.bucket_cors(cx, &bucket)).await? else {
        return Err(s3_error!(NoSuchCORSConfiguration, "The CORS configuration does not exist"));
    };
    let rules = config.rules.into_iter().map(document_of).collect();
    Ok(S3Response::new(GetBucketCorsOutput { cors_rules: Some(rules) }))
}

pub async fn delete_bucket_cors(
    gw: &Gateway,
    req: S3Request<DeleteBucketCorsInput>,
) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_cors(cx, &bucket, None)).await?;
    Ok(S3Response::new(DeleteBucketCorsOutput::default()))
}

fn rule_of(rule: CORSRule) -> CorsRule {
    CorsRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers: rule.allowed_headers.unwrap_or_default(),
        expose_headers: rule.expose_headers.unwrap_or_default(),
        max_age_seconds: rule.max_age_seconds,
    }
}

fn document_of(rule: CorsRule) -> CORSRule {
    let some = |list: Vec<String>| (!list.is_empty()).then_some(list);
    CORSRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers: some(rule.allowed_headers),
        expose_headers: some(rule.expose_headers),
        max_age_seconds: rule.max_age_seconds,
    }
}
