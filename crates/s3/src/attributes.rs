//! GetObjectAttributes: ETag (quoted by the protocol layer, as in every other response; S3
//! leaves it unquoted here), checksum and its type, size, storage class
//! and the parts of a multipart object (with their checksums where recorded), paged by
//! `x-amz-max-parts` and `x-amz-part-number-marker`. One HEAD of the engine answers it.

use isthmus_store::HeadRequest;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::integrity::checksum_type;

const MAX_PARTS: i32 = 1000;

pub async fn get_object_attributes(
    gw: &Gateway,
    req: S3Request<GetObjectAttributesInput>,
) -> S3Result<S3Response<GetObjectAttributesOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    // The header is one comma-separated list (or repeated): both arrive here.
    let wanted =
        |name: &str| input.object_attributes.iter().flat_map(|a| a.as_str().split(',')).any(|a| a.trim() == name);
    if input.object_attributes.is_empty() {
        return Err(s3_error!(InvalidArgument, "x-amz-object-attributes must name at least one attribute"));
    }
    let max_parts = match input.max_parts {
        None => MAX_PARTS,
        Some(n @ 0..) => n.min(MAX_PARTS),
        Some(_) => return Err(s3_error!(InvalidArgument, "max-parts must be a non-negative integer")),
    };
    let marker = input.part_number_marker.unwrap_or(0).max(0) as u32;
    let (bucket, key) = (input.bucket.clone(), input.key.clone());
    let request = HeadRequest { version_id: input.version_id.clone(), ..Default::default() };
    let info = gw.read(&cx, move |store, cx| store.head_object(cx, &bucket, &key, &request)).await?;
    let mut output = GetObjectAttributesOutput {
        last_modified: Some(Timestamp::from(info.last_modified)),
        version_id: info.version_id.clone(),
        ..Default::default()
    };
    if wanted(ObjectAttributes::ETAG) {
        output.e_tag = Some(ETag::Strong(info.etag.clone()));
    }
    if wanted(ObjectAttributes::OBJECT_SIZE) {
        output.object_size = Some(info.size as i64);
    }
    if wanted(ObjectAttributes::STORAGE_CLASS) {
        output.storage_class = Some(StorageClass::from_static(StorageClass::STANDARD));
    }
    if wanted(ObjectAttributes::CHECKSUM)
        && let Some(c) = &info.checksum
    {
        let mut checksum = Checksum { checksum_type: Some(checksum_type(c)), ..Default::default() };
        crate::set_checksum!(checksum, &info.checksum);
        output.checksum = Some(checksum);
    }
    // Parts exist for objects completed from a multipart upload, as in S3.
    if wanted(ObjectAttributes::OBJECT_PARTS) && !info.parts.is_empty() {
        let total = info.part_count();
        let first = marker + 1;
        let last = total.min(marker.saturating_add(max_parts as u32));
        let parts: Vec<ObjectPart> = (first..=last)
            .filter_map(|n| {
                let (start, end) = info.part_range(n)?;
                let mut part = ObjectPart {
                    part_number: Some(n as i32),
                    size: Some((end - start + 1) as i64),
                    ..Default::default()
                };
                crate::set_checksum!(part, &info.checksum.as_ref().and_then(|c| c.part(n)));
                Some(part)
            })
            .collect();
        let is_truncated = last < total;
        output.object_parts = Some(GetObjectAttributesParts {
            is_truncated: Some(is_truncated),
            max_parts: Some(max_parts),
            part_number_marker: Some(marker as i32),
            next_part_number_marker: is_truncated.then_some(last as i32),
            parts: Some(parts),
            total_parts_count: Some(total as i32),
        });
    }
    Ok(S3Response::new(output))
}

/// A GetObjectAttributes request (`GET /bucket/key?attributes`).
pub fn is_attributes_request<B>(req: &hyper::Request<B>) -> bool {
    req.method() == hyper::Method::GET
        && req.uri().query().is_some_and(|q| q.split('&').any(|p| p.split('=').next() == Some("attributes")))
}

/// S3 writes the ETag of GetObjectAttributes without quotes (unlike every other response); the
/// protocol layer always quotes it. This takes the quotes off in the answered XML.
pub fn unquote_etag(resp: &mut s3s::HttpResponse) {
    if resp.status() != hyper::StatusCode::OK {
        return;
    }
    let Some(bytes) = resp.body().bytes() else { return };
    let Ok(body) = std::str::from_utf8(&bytes) else { return };
    let Some(start) =
        body.find("<ETag>&quot;").map(|i| (i, "&quot;")).or_else(|| body.find("<ETag>\"").map(|i| (i, "\"")))
    else {
        return;
    };
    let (at, quote) = start;
    let value_start = at + "<ETag>".len();
    let Some(end) = body[value_start..].find("</ETag>").map(|e| value_start + e) else { return };
    let value = &body[value_start..end];
    let Some(inner) = value.strip_prefix(quote).and_then(|v| v.strip_suffix(quote)) else { return };
    let fixed = format!("{}{inner}{}", &body[..value_start], &body[end..]);
    if let Ok(length) = hyper::header::HeaderValue::from_str(&fixed.len().to_string()) {
        resp.headers_mut().insert(hyper::header::CONTENT_LENGTH, length);
    }
    *resp.body_mut() = s3s::Body::from(fixed);
}
