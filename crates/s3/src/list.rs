//! ListObjects (v1) and ListObjectsV2: one engine listing, two response shapes, with
//! continuation tokens and `encoding-type=url`; each object's checksum algorithm and type.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use isthmus_store::{ListPage, ListRequest, ListVersionsRequest, RequestContext};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::convert::etag;
use crate::integrity::{checksum_type, listed_algorithm};

const MAX_KEYS: i32 = 1000;

/// Unreserved characters and `/` stay; everything else (including `+` and space) is escaped,
/// which every client's decoder (also the `unquote_plus` of botocore) reads back exactly.
const KEY_ENCODE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');

struct Encoder(bool);

impl Encoder {
    fn new(encoding_type: Option<&EncodingType>) -> S3Result<Self> {
        match encoding_type.map(EncodingType::as_str) {
            None => Ok(Self(false)),
            Some(EncodingType::URL) => Ok(Self(true)),
            Some(other) => Err(s3_error!(InvalidArgument, "Invalid Encoding Method specified in Request: {other}")),
        }
    }

    fn apply(&self, s: String) -> String {
        if self.0 { utf8_percent_encode(&s, KEY_ENCODE).to_string() } else { s }
    }

    fn opt(&self, s: Option<String>) -> Option<String> {
        s.map(|s| self.apply(s))
    }
}

fn max_keys(requested: Option<i32>) -> S3Result<usize> {
    match requested {
        None => Ok(MAX_KEYS as usize),
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "max-keys must be a non-negative integer")),
        Some(n) => Ok(n.min(MAX_KEYS) as usize),
    }
}

/// The engine request of a listing: empty delimiters and markers count as absent.
fn list_request(
    prefix: &Option<String>,
    delimiter: &Option<String>,
    after: Option<String>,
    max_keys: usize,
) -> ListRequest {
    ListRequest {
        prefix: prefix.clone().unwrap_or_default(),
        delimiter: delimiter.clone().filter(|d| !d.is_empty()),
        start_after: after.filter(|m| !m.is_empty()),
        max_keys,
    }
}

async fn list_page(gw: &Gateway, cx: &RequestContext, bucket: String, request: ListRequest) -> S3Result<ListPage> {
    gw.scan(cx, move |store, cx| store.list_objects(cx, &bucket, &request)).await
}

/// The page's common prefixes, encoded as the request asked.
fn common_prefixes(page: &mut ListPage, enc: &Encoder) -> Vec<CommonPrefix> {
    std::mem::take(&mut page.common_prefixes).into_iter().map(|p| CommonPrefix { prefix: Some(enc.apply(p)) }).collect()
}

fn contents(page: &mut ListPage, enc: &Encoder) -> (Vec<Object>, Vec<CommonPrefix>) {
    let objects = std::mem::take(&mut page.objects)
        .into_iter()
        .map(|o| Object {
            checksum_algorithm: listed_algorithm(&o.checksum),
            checksum_type: o.checksum.as_ref().map(checksum_type),
            key: Some(enc.apply(o.key)),
            size: Some(o.size as i64),
            e_tag: Some(etag(&o.etag)),
            last_modified: Some(Timestamp::from(o.last_modified)),
            storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
            ..Default::default()
        })
        .collect();
    let prefixes = common_prefixes(page, enc);
    (objects, prefixes)
}

pub async fn list_objects(gw: &Gateway, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let enc = Encoder::new(input.encoding_type.as_ref())?;
    let max = max_keys(input.max_keys)?;
    let request = list_request(&input.prefix, &input.delimiter, input.marker.clone(), max);
    let mut page = list_page(gw, &cx, input.bucket.clone(), request).await?;
    let (objects, prefixes) = contents(&mut page, &enc);
    Ok(S3Response::new(ListObjectsOutput {
        name: Some(input.bucket),
        prefix: Some(enc.apply(input.prefix.unwrap_or_default())),
        marker: Some(enc.apply(input.marker.unwrap_or_default())),
        delimiter: enc.opt(input.delimiter.filter(|d| !d.is_empty())),
        max_keys: Some(max as i32),
        is_truncated: Some(page.is_truncated),
        next_marker: enc.opt(page.next_marker),
        contents: Some(objects),
        common_prefixes: Some(prefixes),
        encoding_type: input.encoding_type,
        ..Default::default()
    }))
}

pub async fn list_objects_v2(
    gw: &Gateway,
    req: S3Request<ListObjectsV2Input>,
) -> S3Result<S3Response<ListObjectsV2Output>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let enc = Encoder::new(input.encoding_type.as_ref())?;
    let max = max_keys(input.max_keys)?;
    let from_token = match input.continuation_token.as_deref() {
        Some(token) => Some(decode_token(token)?),
        None => None,
    };
    // A continuation token supersedes start-after, as in S3.
    let request = list_request(&input.prefix, &input.delimiter, from_token.or_else(|| input.start_after.clone()), max);
    let mut page = list_page(gw, &cx, input.bucket.clone(), request).await?;
    let (objects, prefixes) = contents(&mut page, &enc);
    let owner = input
        .fetch_owner
        .unwrap_or(false)
        .then(|| req.credentials.map(|c| Owner { id: Some(c.access_key.clone()), display_name: Some(c.access_key) }))
        .flatten();
    let objects: Vec<Object> = objects.into_iter().map(|o| Object { owner: owner.clone(), ..o }).collect();
    Ok(S3Response::new(ListObjectsV2Output {
        name: Some(input.bucket),
        prefix: Some(enc.apply(input.prefix.unwrap_or_default())),
        delimiter: enc.opt(input.delimiter.filter(|d| !d.is_empty())),
        start_after: enc.opt(input.start_after),
        max_keys: Some(max as i32),
        key_count: Some((objects.len() + prefixes.len()) as i32),
        is_truncated: Some(page.is_truncated),
        continuation_token: input.continuation_token,
        next_continuation_token: page.next_marker.as_deref().map(encode_token),
        contents: Some(objects),
        common_prefixes: Some(prefixes),
        encoding_type: input.encoding_type,
        ..Default::default()
    }))
}

/// Continuation tokens are the last key or prefix returned, base64url-encoded: opaque to
/// clients, safe in XML and URLs, and valid across gateways sharing the file system.
pub(crate) fn encode_token(marker: &str) -> String {
    URL_SAFE_NO_PAD.encode(marker)
}

pub(crate) fn decode_token(token: &str) -> S3Result<String> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| s3_error!(InvalidArgument, "The continuation token provided is incorrect"))
}

/// ListObjectVersions: versions and delete markers, each key's newest first (in a bucket
/// never versioned, every object as its null version).
pub async fn list_object_versions(
    gw: &Gateway,
    req: S3Request<ListObjectVersionsInput>,
) -> S3Result<S3Response<ListObjectVersionsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let enc = Encoder::new(input.encoding_type.as_ref())?;
    let max = max_keys(input.max_keys)?;
    let listing = list_request(&input.prefix, &input.delimiter, input.key_marker.clone(), max);
    let request = ListVersionsRequest {
        prefix: listing.prefix,
        delimiter: listing.delimiter,
        key_marker: listing.start_after,
        version_id_marker: input.version_id_marker.clone().filter(|m| !m.is_empty()),
        max_keys: max,
    };
    let bucket = input.bucket.clone();
    let page = gw.scan(&cx, move |store, cx| store.list_object_versions(cx, &bucket, &request)).await?;
    let mut versions = Vec::new();
    let mut delete_markers = Vec::new();
    for v in page.versions {
        let key = Some(enc.apply(v.info.key));
        let last_modified = Some(Timestamp::from(v.info.last_modified));
        if v.delete_marker {
            delete_markers.push(DeleteMarkerEntry {
                key,
                version_id: v.info.version_id,
                is_latest: Some(v.is_latest),
                last_modified,
                owner: None,
            });
        } else {
            versions.push(ObjectVersion {
                checksum_algorithm: listed_algorithm(&v.info.checksum),
                checksum_type: v.info.checksum.as_ref().map(checksum_type),
                key,
                version_id: v.info.version_id,
                is_latest: Some(v.is_latest),
                size: Some(v.info.size as i64),
                e_tag: Some(etag(&v.info.etag)),
                last_modified,
                storage_class: Some(ObjectVersionStorageClass::from_static(ObjectVersionStorageClass::STANDARD)),
                ..Default::default()
            });
        }
    }
    let prefixes = page.common_prefixes.into_iter().map(|p| CommonPrefix { prefix: Some(enc.apply(p)) }).collect();
    Ok(S3Response::new(ListObjectVersionsOutput {
        name: Some(input.bucket),
        prefix: Some(enc.apply(input.prefix.unwrap_or_default())),
        delimiter: enc.opt(input.delimiter.filter(|d| !d.is_empty())),
        key_marker: enc.opt(input.key_marker),
        version_id_marker: input.version_id_marker,
        max_keys: Some(max as i32),
        is_truncated: Some(page.is_truncated),
        next_key_marker: enc.opt(page.next_key_marker),
        next_version_id_marker: page.next_version_id_marker,
        versions: Some(versions),
        delete_markers: Some(delete_markers),
        common_prefixes: Some(prefixes),
        encoding_type: input.encoding_type,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        for marker in ["a", "dir/é/x y+z", "🦀"] {
            assert_eq!(decode_token(&encode_token(marker)).unwrap(), marker);
        }
        assert!(decode_token("***").is_err());
    }

    #[test]
    fn url_encoding_escapes_plus_and_space_but_not_slash() {
        let enc = Encoder(true);
        assert_eq!(enc.apply("a b+c/é".into()), "a%20b%2Bc/%C3%A9");
        assert_eq!(Encoder(false).apply("a b".into()), "a b");
    }
}
