//! Object tagging: PutObjectTagging, GetObjectTagging, DeleteObjectTagging, and the
//! `x-amz-tagging` header of PutObject, CreateMultipartUpload and CopyObject; bucket tagging:
//! Put/Get/DeleteBucketTagging.

use isthmus_store::{BucketSettings, ObjectChange};
use std::collections::BTreeMap;

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::subresources::require_current_version;

/// Parses `x-amz-tagging` (URL query form: `k1=v1&k2=v2`).
pub fn parse_tagging_header(header: Option<&str>) -> S3Result<BTreeMap<String, String>> {
    let mut tags = BTreeMap::new();
    for (k, v) in url::form_urlencoded::parse(header.unwrap_or_default().as_bytes()) {
        if tags.insert(k.into_owned(), v.into_owned()).is_some() {
            return Err(s3_error!(InvalidTag, "Cannot provide multiple Tags with the same key"));
        }
    }
    Ok(tags)
}

fn tag_map(tag_set: TagSet) -> S3Result<BTreeMap<String, String>> {
    let mut tags = BTreeMap::new();
    for tag in tag_set {
        let (Some(k), Some(v)) = (tag.key, tag.value) else {
            return Err(s3_error!(MalformedXML, "Every tag needs a Key and a Value"));
        };
        if tags.insert(k, v).is_some() {
            return Err(s3_error!(InvalidTag, "Cannot provide multiple Tags with the same key"));
        }
    }
    Ok(tags)
}

pub async fn put_object_tagging(
    gw: &Gateway,
    req: S3Request<PutObjectTaggingInput>,
) -> S3Result<S3Response<PutObjectTaggingOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let tags = tag_map(input.tagging.tag_set)?;
    let version = input.version_id.clone();
    gw.write(&cx, move |store, cx| {
        require_current_version(store, cx, &input.bucket, &input.key, input.version_id.as_deref())?;
        store.update_object(cx, &input.bucket, &input.key, ObjectChange::Tags(tags.clone()))
    })
    .await?;
    Ok(S3Response::new(PutObjectTaggingOutput { version_id: version }))
}

pub async fn get_object_tagging(
    gw: &Gateway,
    req: S3Request<GetObjectTaggingInput>,
) -> S3Result<S3Response<GetObjectTaggingOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let info = gw
        .read(&cx, move |store, cx| {
            require_current_version(store, cx, &input.bucket, &input.key, input.version_id.as_deref())?;
            store.head_object(cx, &input.bucket, &input.key, &Default::default())
        })
        .await?;
    Ok(S3Response::new(GetObjectTaggingOutput { tag_set: tag_set(info.meta.tags), version_id: info.version_id }))
}

pub async fn delete_object_tagging(
    gw: &Gateway,
    req: S3Request<DeleteObjectTaggingInput>,
) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let version = input.version_id.clone();
    gw.write(&cx, move |store, cx| {
        require_current_version(store, cx, &input.bucket, &input.key, input.version_id.as_deref())?;
        store.update_object(cx, &input.bucket, &input.key, ObjectChange::Tags(BTreeMap::new()))
    })
    .await?;
    Ok(S3Response::new(DeleteObjectTaggingOutput { version_id: version }))
}

fn tag_set(tags: BTreeMap<String, String>) -> TagSet {
    tags.into_iter().map(|(k, v)| Tag { key: Some(k), value: Some(v) }).collect()
}

pub async fn put_bucket_tagging(
    gw: &Gateway,
    req: S3Request<PutBucketTaggingInput>,
) -> S3Result<S3Response<PutBucketTaggingOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let tags = tag_map(input.tagging.tag_set)?;
    gw.write(&cx, move |store, cx| store.set_bucket_tags(cx, &input.bucket, tags.clone())).await?;
    Ok(S3Response::new(PutBucketTaggingOutput::default()))
}

/// A bucket without tags answers NoSuchTagSet, as in S3.
pub async fn get_bucket_tagging(
    gw: &Gateway,
    req: S3Request<GetBucketTaggingInput>,
) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let tags = gw.read(&cx, move |store, cx| store.bucket_tags(cx, &bucket)).await?;
    if tags.is_empty() {
        return Err(s3_error!(NoSuchTagSet, "The TagSet does not exist"));
    }
    Ok(S3Response::new(GetBucketTaggingOutput { tag_set: tag_set(tags) }))
}

pub async fn delete_bucket_tagging(
    gw: &Gateway,
    req: S3Request<DeleteBucketTaggingInput>,
) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_tags(cx, &bucket, BTreeMap::new())).await?;
    Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagging_header_is_url_query_form() {
        let tags = parse_tagging_header(Some("project=climate%20model&stage=raw&empty=")).unwrap();
        assert_eq!(tags.get("project").map(String::as_str), Some("climate model"));
        assert_eq!(tags.get("empty").map(String::as_str), Some(""));
        assert!(parse_tagging_header(Some("a=1&a=2")).is_err());
        assert!(parse_tagging_header(None).unwrap().is_empty());
    }
}
