//! Multipart uploads: CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
//! AbortMultipartUpload, ListParts, ListMultipartUploads, UploadPartCopy.

use isthmus_store::{CompletedPart as StorePart, ListPartsRequest, ListUploadsRequest, PartRequest, PutRequest};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::body::write_object;
use crate::convert::{etag, etag_match};
use crate::integrity::{
    checksum_type, complete_checksum, listed_part_checksum, upload_checksum, upload_checksum_choice,
};
use crate::{checksum_headers, meta_headers, set_checksum};
use isthmus_session::Placement;

const MAX_LISTED: i32 = 1000;

fn limit(requested: Option<i32>, what: &str) -> S3Result<usize> {
    match requested {
        None => Ok(MAX_LISTED as usize),
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "{what} must be a non-negative integer")),
        Some(n) => Ok(n.min(MAX_LISTED) as usize),
    }
}

fn part_number(n: i32) -> S3Result<u32> {
    u32::try_from(n)
        .map_err(|_| s3_error!(InvalidArgument, "Part number must be an integer between 1 and 10000, inclusive"))
}

pub async fn create_multipart_upload(
    gw: &Gateway,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    crate::acl::no_grant_headers!(input);
    let (checksum_algorithm, checksum_type) = upload_checksum_choice(
        input.checksum_algorithm.as_ref().map(|a| a.as_str()),
        input.checksum_type.as_ref().map(|t| t.as_str()),
    )?;
    let tags = crate::tagging::parse_tagging_header(input.tagging.as_deref())?;
    let request = PutRequest {
        meta: isthmus_store::ObjectMeta {
            tags,
            acl: crate::acl::parse_canned(input.acl.as_ref().map(|a| a.as_str()))?,
            ..meta_headers!(input).into_meta()
        },
        checksum_algorithm,
        checksum_type,
        ..PutRequest::default()
    };
    let (bucket, key) = (input.bucket, input.key);
    let (b, k) = (bucket.clone(), key.clone());
    let upload_id = gw.write(&cx, move |store, cx| store.create_multipart_upload(cx, &b, &k, request.clone())).await?;
    let (checksum_algorithm, checksum_type) = upload_checksum(checksum_algorithm, checksum_type);
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(bucket),
        key: Some(key),
        upload_id: Some(upload_id),
        checksum_algorithm,
        checksum_type,
        ..Default::default()
    }))
}

pub async fn upload_part(gw: &Gateway, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
    let cx = gw.cx(&req)?;
    let declared = crate::object::declared(&req)?;
    let expects_continue = crate::expect::expects_continue(&req.headers);
    let input = req.input;
    let number = part_number(input.part_number)?;
    let body = input
        .body
        .unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
    let (bucket, key, upload_id) = (input.bucket, input.key, input.upload_id);
    // Every checksum the client sends is computed and verified, whether or not the upload was
    // created with a checksum algorithm; an upload created with one needs it from every part.
    let size_hint = input.content_length.and_then(|n| u64::try_from(n).ok());
    let request = PartRequest {
        part_number: number,
        checksum_algorithm: declared.algorithm,
        size_hint,
        md5_required: declared.declares_md5(),
        checksum_declared: true,
    };
    let info = write_object(gw, &cx, body, declared, (Placement::Write, expects_continue), move |store, cx| {
        store.upload_part(cx, &bucket, &key, &upload_id, &request)
    })
    .await?;
    let mut output = UploadPartOutput { e_tag: Some(etag(&info.etag)), ..Default::default() };
    set_checksum!(output, &info.checksum);
    Ok(S3Response::new(output))
}

pub async fn complete_multipart_upload(
    gw: &Gateway,
    req: S3Request<CompleteMultipartUploadInput>,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let declared = complete_checksum(input.checksum_type.as_ref().map(|t| t.as_str()), checksum_headers!(input))?;
    let listed = input.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
    let mut parts = Vec::with_capacity(listed.len());
    for p in listed {
        let checksum = listed_part_checksum(checksum_headers!(p))?;
        let (Some(n), Some(tag)) = (p.part_number, p.e_tag) else {
            return Err(s3_error!(MalformedXML, "Every part needs a PartNumber and an ETag"));
        };
        parts.push(StorePart { part_number: part_number(n)?, etag: tag.into_value(), checksum });
    }
    let request = PutRequest {
        if_match: etag_match(input.if_match),
        if_none_match: etag_match(input.if_none_match),
        complete_checksum: declared,
        ..PutRequest::default()
    };
    let (bucket, key, upload_id) = (input.bucket, input.key, input.upload_id);
    let (b, k) = (bucket.clone(), key.clone());
    // Assembling copies every part and fsyncs: always on the blocking pool.
    let info = gw
        .long(&cx, move |store, cx| store.complete_multipart_upload(cx, &b, &k, &upload_id, &parts, request.clone()))
        .await?;
    let mut output = CompleteMultipartUploadOutput {
        location: Some(format!("/{bucket}/{key}")),
        bucket: Some(bucket),
        key: Some(key),
        e_tag: Some(etag(&info.etag)),
        checksum_type: info.checksum.as_ref().map(checksum_type),
        version_id: crate::object::written_version(&info),
        ..Default::default()
    };
    set_checksum!(output, &info.checksum);
    Ok(S3Response::new(output))
}

pub async fn abort_multipart_upload(
    gw: &Gateway,
    req: S3Request<AbortMultipartUploadInput>,
) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    gw.write(&cx, move |store, cx| store.abort_multipart_upload(cx, &input.bucket, &input.key, &input.upload_id))
        .await?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

pub async fn list_parts(gw: &Gateway, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let max = limit(input.max_parts, "max-parts")?;
    let after = u32::try_from(input.part_number_marker.unwrap_or(0)).unwrap_or(0);
    let (bucket, key, upload_id) = (input.bucket, input.key, input.upload_id);
    let (b, k, u) = (bucket.clone(), key.clone(), upload_id.clone());
    let request = ListPartsRequest { after_part: after, max_parts: max };
    let root = gw.principals.users().root().to_string();
    let (page, initiator) = gw
        .scan(&cx, move |store, cx| {
            let page = store.list_parts(cx, &b, &k, &u, &request)?;
            let initiator = match page.initiator.clone() {
                Some(user) => user,
                None => bucket_owner_or(store, cx, &b, &root)?,
            };
            Ok((page, initiator))
        })
        .await?;
    let (initiator, owner) = initiator_and_owner(initiator);
    let parts = page
        .parts
        .into_iter()
        .map(|p| {
            let mut part = Part {
                part_number: Some(p.part_number as i32),
                e_tag: Some(etag(&p.etag)),
                size: Some(p.size as i64),
                last_modified: Some(Timestamp::from(p.last_modified)),
                ..Default::default()
            };
            set_checksum!(part, &p.checksum);
            part
        })
        .collect();
    let (checksum_algorithm, checksum_type) = upload_checksum(page.checksum_algorithm, page.checksum_type);
    Ok(S3Response::new(ListPartsOutput {
        checksum_algorithm,
        checksum_type,
        bucket: Some(bucket),
        key: Some(key),
        upload_id: Some(upload_id),
        parts: Some(parts),
        is_truncated: Some(page.is_truncated),
        next_part_number_marker: page.next_part_number_marker.map(|n| n as i32),
        part_number_marker: input.part_number_marker,
        max_parts: Some(max as i32),
        storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
        initiator: Some(initiator),
        owner: Some(owner),
        ..Default::default()
    }))
}

/// The owner of `bucket`, or the root user for a bucket without a recorded owner: whose an
/// upload is when it records no initiator (started by the process through an in-process door,
/// or recorded before initiators were).
fn bucket_owner_or(
    store: &dyn isthmus_store::Store,
    cx: &isthmus_store::RequestContext,
    bucket: &str,
    root: &str,
) -> isthmus_store::StoreResult<String> {
    Ok(isthmus_store::BucketSettings::bucket_owner(store, cx, bucket)?.unwrap_or_else(|| root.to_string()))
}

/// An upload's Initiator and Owner: the user who started it (S3 names the same account twice).
fn initiator_and_owner(user: String) -> (Initiator, Owner) {
    (
        Initiator { id: Some(user.clone()), display_name: Some(user.clone()) },
        Owner { id: Some(user.clone()), display_name: Some(user) },
    )
}

pub async fn list_multipart_uploads(
    gw: &Gateway,
    req: S3Request<ListMultipartUploadsInput>,
) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    if input.delimiter.as_deref().is_some_and(|d| !d.is_empty()) {
        return Err(s3_error!(NotImplemented, "ListMultipartUploads with a delimiter is not supported"));
    }
    let max = limit(input.max_uploads, "max-uploads")?;
    let request = ListUploadsRequest {
        prefix: input.prefix.clone().unwrap_or_default(),
        key_marker: input.key_marker.clone().filter(|m| !m.is_empty()),
        upload_id_marker: input.upload_id_marker.clone().filter(|m| !m.is_empty()),
        max_uploads: max,
    };
    let bucket = input.bucket.clone();
    let root = gw.principals.users().root().to_string();
    let (page, bucket_owner) = gw
        .scan(&cx, move |store, cx| {
            let page = store.list_multipart_uploads(cx, &bucket, &request)?;
            Ok((page, bucket_owner_or(store, cx, &bucket, &root)?))
        })
        .await?;
    let uploads = page
        .uploads
        .into_iter()
        .map(|u| {
            let (checksum_algorithm, checksum_type) = upload_checksum(u.checksum_algorithm, u.checksum_type);
            let (initiator, owner) = initiator_and_owner(u.initiator.unwrap_or_else(|| bucket_owner.clone()));
            MultipartUpload {
                initiator: Some(initiator),
                owner: Some(owner),
                key: Some(u.key),
                upload_id: Some(u.upload_id),
                initiated: Some(Timestamp::from(u.initiated)),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                checksum_algorithm,
                checksum_type,
            }
        })
        .collect();
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(input.bucket),
        prefix: input.prefix,
        key_marker: input.key_marker,
        upload_id_marker: input.upload_id_marker,
        max_uploads: Some(max as i32),
        is_truncated: Some(page.is_truncated),
        next_key_marker: page.next_key_marker,
        next_upload_id_marker: page.next_upload_id_marker,
        uploads: Some(uploads),
        ..Default::default()
    }))
}

pub async fn upload_part_copy(
    gw: &Gateway,
    req: S3Request<UploadPartCopyInput>,
) -> S3Result<S3Response<UploadPartCopyOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let number = part_number(input.part_number)?;
    let CopySource::Bucket { bucket: src_bucket, key: src_key, version_id } = &input.copy_source else {
        return Err(s3_error!(NotImplemented, "Copying from an access point is not supported"));
    };
    let source_version_id = version_id.as_deref().map(str::to_string);
    let range = match input.copy_source_range.as_deref() {
        None => None,
        Some(header) => match Range::parse(header) {
            Ok(Range::Int { first, last: Some(last) }) => {
                Some(isthmus_store::ByteRange::FromTo { first, last: Some(last) })
            }
            _ => {
                return Err(s3_error!(
                    InvalidArgument,
                    "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"
                ));
            }
        },
    };
    let source_request = isthmus_store::GetRequest {
        version_id: source_version_id.clone(),
        range,
        part_number: None,
        conditions: crate::convert::conditions(
            input.copy_source_if_match,
            input.copy_source_if_none_match,
            input.copy_source_if_modified_since,
            input.copy_source_if_unmodified_since,
        ),
    };
    let (src_bucket, src_key) = (src_bucket.to_string(), src_key.to_string());
    let (bucket, key, upload_id) = (input.bucket, input.key, input.upload_id);
    // Copies the bytes: always on the blocking pool.
    let request = PartRequest { part_number: number, ..PartRequest::default() };
    let info = gw
        .long(&cx, move |store, cx| {
            store.upload_part_copy(cx, &bucket, &key, &upload_id, &request, (&src_bucket, &src_key), &source_request)
        })
        .await?;
    let mut result = CopyPartResult {
        e_tag: Some(etag(&info.etag)),
        last_modified: Some(Timestamp::from(info.last_modified)),
        ..Default::default()
    };
    set_checksum!(result, &info.checksum);
    Ok(S3Response::new(UploadPartCopyOutput {
        copy_part_result: Some(result),
        copy_source_version_id: source_version_id,
        ..Default::default()
    }))
}
