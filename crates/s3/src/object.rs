//! Object operations: PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects, CopyObject.

use isthmus_store::{
    Conditions, CopyRequest, DeleteRequest, GetRequest, HeadRequest, ObjectInfo, PutRequest, RequestContext, Store,
    StoreResult,
};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::body::{ObjectBody, write_object};
use crate::convert::{self, byte_range, conditions, etag, etag_match, parse_http_date, user_metadata};
use crate::integrity::{ChecksumHeaders, Declared, checksum_type, served_checksum};
use crate::tagging::parse_tagging_header;
use crate::{checksum_headers, meta_headers, set_checksum};
use isthmus_session::Placement;

pub async fn put_object(gw: &Gateway, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
    // A browser's form upload (every form carries its extras, if only empty ones).
    let (req, browser_form) = crate::post_policy::with_form_extras(req);
    let cx = gw.cx(&req)?;
    if !declares_length(&req.headers) {
        return Err(s3_error!(MissingContentLength, "You must provide the Content-Length HTTP header."));
    }
    let declared = declared(&req)?;
    let expects_continue = crate::expect::expects_continue(&req.headers);
    let input = req.input;
    if input.write_offset_bytes.is_some() {
        return Err(s3_error!(NotImplemented, "Appending with x-amz-write-offset-bytes is not supported"));
    }
    crate::acl::no_grant_headers!(input);
    let tags = parse_tagging_header(input.tagging.as_deref())?;
    let request = PutRequest {
        if_match: etag_match(input.if_match.clone()),
        if_none_match: etag_match(input.if_none_match.clone()),
        checksum_algorithm: declared.algorithm,
        checksum_type: isthmus_store::ChecksumType::FullObject,
        etag_without_md5: false,
        md5_required: declared.declares_md5(),
        size_hint: input.content_length.and_then(|n| u64::try_from(n).ok()),
        complete_checksum: Default::default(),
        browser_form,
        meta: isthmus_store::ObjectMeta {
            tags,
            acl: crate::acl::parse_canned(input.acl.as_ref().map(|a| a.as_str()))?,
            ..meta_headers!(input).into_meta()
        },
    };
    if request.if_none_match.as_ref().is_some_and(|m| *m != isthmus_store::ETagMatch::Any) {
        return Err(s3_error!(NotImplemented, "If-None-Match on PUT supports only '*'"));
    }
    let body = input
        .body
        .unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
    let (bucket, key) = (input.bucket, input.key);
    // A conditional write reads the current ETag at commit, which may mean hashing a file
    // written outside the gateway: such a write commits on the blocking pool.
    let placement = if request.if_match.is_some() { Placement::Long } else { Placement::Write };
    let info = write_object(gw, &cx, body, declared, (placement, expects_continue), move |store, cx| {
        store.put_object(cx, &bucket, &key, request.clone())
    })
    .await?;
    let mut output =
        PutObjectOutput { e_tag: Some(etag(&info.etag)), version_id: written_version(&info), ..Default::default() };
    set_checksum!(output, &info.checksum);
    output.checksum_type = info.checksum.as_ref().map(checksum_type);
    Ok(S3Response::new(output))
}

/// The description GET and HEAD both return (size or range, ETag, dates, headers, metadata),
/// for either output type, plus `extra` fields.
macro_rules! object_output {
    ($ty:ident, $info:expr, $range:expr, $part_number:expr, { $($field:ident: $value:expr),* $(,)? }) => {{
        let info: ObjectInfo = $info;
        let range: Option<(u64, u64)> = $range;
        $ty {
            content_length: Some(range.map_or(info.size, |(first, last)| last - first + 1) as i64),
            content_range: range.map(|(first, last)| format!("bytes {first}-{last}/{}", info.size)),
            accept_ranges: Some("bytes".into()),
            parts_count: $part_number.map(|_| info.part_count() as i32),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(Timestamp::from(info.last_modified)),
            metadata: user_metadata(&info.meta),
            expires: expires(&info),
            content_type: info.meta.content_type,
            content_encoding: info.meta.content_encoding,
            content_disposition: info.meta.content_disposition,
            content_language: info.meta.content_language,
            cache_control: info.meta.cache_control,
            $($field: $value,)*
            ..Default::default()
        }
    }};
}

/// Sets the headers a GET or HEAD asked to be answered with (`response-content-type=` and the
/// other `response-*` query parameters, as presigned download links use), which S3 allows only
/// on signed requests.
macro_rules! response_overrides {
    ($cx:expr, $input:expr) => {{
        let input = &$input;
        let asked = input.response_cache_control.is_some()
            || input.response_content_disposition.is_some()
            || input.response_content_encoding.is_some()
            || input.response_content_language.is_some()
            || input.response_content_type.is_some()
            || input.response_expires.is_some();
        if asked && matches!($cx.principal, isthmus_store::Principal::Anonymous) {
            return Err(s3s::s3_error!(
                InvalidRequest,
                "Request specific response headers cannot be used for anonymous GET requests."
            ));
        }
        (
            input.response_cache_control.clone(),
            input.response_content_disposition.clone(),
            input.response_content_encoding.clone(),
            input.response_content_language.clone(),
            input.response_content_type.clone(),
            input.response_expires.clone(),
        )
    }};
}

/// Applies what `response_overrides!` took to an output (an override wins, else the stored
/// header stays).
macro_rules! apply_overrides {
    ($output:expr, $overrides:expr) => {{
        let (cache_control, disposition, encoding, language, content_type, expires) = $overrides;
        $output.cache_control = cache_control.or($output.cache_control.take());
        $output.content_disposition = disposition.or($output.content_disposition.take());
        $output.content_encoding = encoding.or($output.content_encoding.take());
        $output.content_language = language.or($output.content_language.take());
        $output.content_type = content_type.or($output.content_type.take());
        $output.expires = expires.or($output.expires.take());
    }};
}

fn expires(info: &ObjectInfo) -> Option<Timestamp> {
    info.meta.expires.as_deref().and_then(parse_http_date)
}

/// Whether a request says how long its body is: a Content-Length, an aws-chunked body's
/// decoded length, or chunked framing (whose end the protocol layer finds). A PUT with none of
/// them is refused as S3 does (411), not stored as an empty object.
fn declares_length(headers: &hyper::HeaderMap) -> bool {
    ["content-length", "x-amz-decoded-content-length", "transfer-encoding"].iter().any(|h| headers.contains_key(*h))
}

/// What a PutObject or UploadPart request declares about its body.
pub fn declared<T: HasIntegrityHeaders>(req: &S3Request<T>) -> S3Result<Declared> {
    let trailer = req.headers.get("x-amz-trailer").and_then(|v| v.to_str().ok());
    // The header as sent: the protocol layer drops an empty one, which S3 refuses as an
    // invalid digest (so does a value that is not text).
    let content_md5 = match req.headers.get("content-md5") {
        Some(value) => Some(value.to_str().unwrap_or_default()),
        None => req.input.content_md5(),
    };
    Declared::new(
        content_md5,
        req.input.checksum_algorithm(),
        req.input.checksum_headers(),
        trailer,
        req.trailing_headers.clone(),
    )
}

/// Inputs that carry a body with integrity headers.
pub trait HasIntegrityHeaders {
    fn content_md5(&self) -> Option<&str>;
    fn checksum_algorithm(&self) -> Option<&str>;
    fn checksum_headers(&self) -> ChecksumHeaders;
}

macro_rules! has_integrity_headers {
    ($t:ty) => {
        impl HasIntegrityHeaders for $t {
            fn content_md5(&self) -> Option<&str> {
                self.content_md5.as_deref()
            }
            fn checksum_algorithm(&self) -> Option<&str> {
                self.checksum_algorithm.as_ref().map(ChecksumAlgorithm::as_str)
            }
            fn checksum_headers(&self) -> ChecksumHeaders {
                checksum_headers!(self)
            }
        }
    };
}

has_integrity_headers!(PutObjectInput);
has_integrity_headers!(UploadPartInput);

/// The `partNumber` of a GET or HEAD.
fn requested_part(n: Option<i32>) -> S3Result<Option<u32>> {
    match n {
        None => Ok(None),
        Some(n) if (1..=10_000).contains(&n) => Ok(Some(n as u32)),
        Some(_) => Err(s3_error!(InvalidArgument, "Part number must be an integer between 1 and 10000, inclusive")),
    }
}

/// The `x-amz-version-id` of a write: the new version's id where versioning is enabled (a
/// write in a suspended bucket makes the null version, which S3 does not announce).
pub(crate) fn written_version(info: &ObjectInfo) -> Option<String> {
    info.version_id.clone().filter(|id| id != isthmus_store::NULL_VERSION)
}

pub async fn get_object(gw: &Gateway, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
    let cx = gw.cx(&req)?;
    // A GET of a Zarr array's path with ?select=, ?where= or ?array: the array service.
    if let Some(request) = crate::select::array_request(&req)? {
        return crate::select::serve(gw, cx, req.input.bucket, req.input.key, request).await;
    }
    let wants_md5 = crate::third_party_copy::wants_md5_digest(&req.headers);
    let overrides = response_overrides!(cx, req.input);
    let input = req.input;
    let checksum_mode = input.checksum_mode.as_ref().is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
    let part_number = requested_part(input.part_number)?;
    let request = GetRequest {
        version_id: input.version_id,
        range: byte_range(input.range),
        part_number,
        conditions: conditions(input.if_match, input.if_none_match, input.if_modified_since, input.if_unmodified_since),
    };
    let (bucket, key) = (input.bucket, input.key);
    let ((info, range), body) = gw.read(&cx, move |store, cx| read_for_get(store, cx, &bucket, &key, &request)).await?;
    // RFC 3230 instance digest, for third-party copy between storage systems: the MD5 of the
    // whole object when its ETag is one.
    let digest = wants_md5.then(|| crate::third_party_copy::md5_digest_header(&info.etag)).flatten();
    let checksum = served_checksum(&info, part_number, range);
    let mut output = get_output(gw, info, range, part_number, body);
    apply_overrides!(output, overrides);
    // Returned on request, for what they describe: the object, or one part of it.
    if checksum_mode {
        output.checksum_type = checksum.as_ref().map(checksum_type);
        set_checksum!(output, &checksum);
    }
    let mut resp = S3Response::new(output);
    if let Some(digest) = digest {
        resp.headers.insert("digest", digest);
    }
    Ok(resp)
}

/// The engine call of a GET: the object's description, the range served, and the body (read
/// at once when small).
type ReadForGet = ((ObjectInfo, Option<(u64, u64)>), ObjectBody);

fn read_for_get(
    store: &dyn Store,
    cx: &RequestContext,
    bucket: &str,
    key: &str,
    request: &GetRequest,
) -> StoreResult<ReadForGet> {
    let response = store.get_object(cx, bucket, key, request)?;
    let body = ObjectBody::prefetch(response.body)?;
    Ok(((response.info, response.range), body))
}

/// What a GET of `info` answers, before `response-*` overrides and checksums.
fn get_output(
    gw: &Gateway,
    info: ObjectInfo,
    range: Option<(u64, u64)>,
    part_number: Option<u32>,
    body: ObjectBody,
) -> GetObjectOutput {
    let tag_count = (!info.meta.tags.is_empty()).then_some(info.meta.tags.len() as i32);
    let version_id = info.version_id.clone();
    object_output!(GetObjectOutput, info, range, part_number, {
        body: Some(body.into_blob(&gw.runner)),
        tag_count: tag_count,
        version_id: version_id,
    })
}

/// A GET naming nothing but an object (no query; no header that shapes the answer: no range,
/// condition, checksum mode, digest...) in `cx`: the same engine call and output as
/// `get_object` makes for it, for the fast path (`fast_read`). `None` when the engine
/// refused or failed: the normal path answers (and counts) that.
pub(crate) async fn plain_get(
    gw: &Gateway,
    cx: &RequestContext,
    bucket: String,
    key: String,
) -> Option<GetObjectOutput> {
    let request = GetRequest {
        version_id: None,
        range: byte_range(None),
        part_number: None,
        conditions: conditions(None, None, None, None),
    };
    let ((info, range), body) = gw
        .runner
        .call(cx, Placement::Read, move |store, cx| read_for_get(store, cx, &bucket, &key, &request))
        .await
        .ok()?;
    Some(get_output(gw, info, range, None, body))
}

/// What a HEAD of `info` answers (with `part` of it), before `response-*` overrides and
/// checksums; and its tag count (for `x-amz-tagging-count`, a header s3s's output lacks).
fn head_output(info: ObjectInfo, part: Option<(u64, u64)>, part_number: Option<u32>) -> (HeadObjectOutput, usize) {
    let tag_count = info.meta.tags.len();
    let version_id = info.version_id.clone();
    (object_output!(HeadObjectOutput, info, part, part_number, { version_id: version_id }), tag_count)
}

/// `plain_get`'s HEAD: the output and tag count `head_object` answers a HEAD naming nothing
/// but an object with; `None` when the engine refused or failed.
pub(crate) async fn plain_head(
    gw: &Gateway,
    cx: &RequestContext,
    bucket: String,
    key: String,
) -> Option<(HeadObjectOutput, usize)> {
    let request = HeadRequest { version_id: None, conditions: conditions(None, None, None, None) };
    let info = gw
        .runner
        .call(cx, Placement::Read, move |store, cx| store.head_object(cx, &bucket, &key, &request))
        .await
        .ok()?;
    Some(head_output(info, None, None))
}

pub async fn head_object(gw: &Gateway, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
    let cx = gw.cx(&req)?;
    let overrides = response_overrides!(cx, req.input);
    let input = req.input;
    let checksum_mode = input.checksum_mode.as_ref().is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
    let conditions =
        conditions(input.if_match, input.if_none_match, input.if_modified_since, input.if_unmodified_since);
    let (bucket, key) = (input.bucket, input.key);
    let part_number = requested_part(input.part_number)?;
    let request = HeadRequest { version_id: input.version_id, conditions };
    let info = gw.read(&cx, move |store, cx| store.head_object(cx, &bucket, &key, &request)).await?;
    let part = match part_number {
        None | Some(1) if info.parts.is_empty() => None,
        None => None,
        Some(n) => Some(
            info.part_range(n).ok_or_else(|| crate::error::s3_error(isthmus_store::StoreError::InvalidPartNumber))?,
        ),
    };
    let checksum = served_checksum(&info, part_number, None);
    let (mut output, tag_count) = head_output(info, part, part_number);
    apply_overrides!(output, overrides);
    if checksum_mode {
        output.checksum_type = checksum.as_ref().map(checksum_type);
        set_checksum!(output, &checksum);
    }
    let mut response = S3Response::new(output);
    // As on GET (s3s's HEAD output has no field for it).
    if tag_count > 0 {
        response.headers.insert("x-amz-tagging-count", hyper::header::HeaderValue::from(tag_count));
    }
    if part.is_some() {
        response.status = Some(hyper::StatusCode::PARTIAL_CONTENT);
    }
    Ok(response)
}

pub async fn delete_object(
    gw: &Gateway,
    req: S3Request<DeleteObjectInput>,
) -> S3Result<S3Response<DeleteObjectOutput>> {
    let cx = gw.cx(&req)?;
    let (bucket, key) = (req.input.bucket, req.input.key);
    let request = DeleteRequest { version_id: req.input.version_id };
    let outcome = gw.write(&cx, move |store, cx| store.delete_object(cx, &bucket, &key, &request)).await?;
    Ok(S3Response::new(DeleteObjectOutput {
        delete_marker: outcome.delete_marker.then_some(true),
        version_id: outcome.version_id,
        ..Default::default()
    }))
}

pub async fn copy_object(gw: &Gateway, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    crate::acl::no_grant_headers!(input);
    let CopySource::Bucket { bucket: src_bucket, key: src_key, version_id } = &input.copy_source else {
        return Err(s3_error!(NotImplemented, "Copying from an access point is not supported"));
    };
    let source_version_id = version_id.as_deref().map(str::to_string);
    let (src_bucket, src_key) = (src_bucket.to_string(), src_key.to_string());
    let replace = input.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
    if !replace && src_bucket == input.bucket && src_key == input.key {
        return Err(s3_error!(
            InvalidRequest,
            "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata."
        ));
    }
    let source_conditions: Conditions = conditions(
        input.copy_source_if_match.clone(),
        input.copy_source_if_none_match.clone(),
        input.copy_source_if_modified_since,
        input.copy_source_if_unmodified_since,
    );
    let (bucket, key) = (input.bucket.clone(), input.key.clone());
    let replace_tags = match input.tagging_directive.as_ref().map(|d| d.as_str()) {
        Some(TaggingDirective::REPLACE) => Some(parse_tagging_header(input.tagging.as_deref())?),
        _ => None,
    };
    let request = CopyRequest {
        source_version_id: source_version_id.clone(),
        acl: crate::acl::parse_canned(input.acl.as_ref().map(|a| a.as_str()))?,
        replace_meta: replace.then(|| meta_headers!(input).into_meta()),
        source_conditions,
        replace_tags,
    };
    let info = gw
        .long(&cx, move |store, cx| store.copy_object(cx, (&src_bucket, &src_key), (&bucket, &key), &request))
        .await?;
    let result = CopyObjectResult {
        e_tag: Some(convert::etag(&info.etag)),
        last_modified: Some(Timestamp::from(info.last_modified)),
        ..Default::default()
    };
    Ok(S3Response::new(CopyObjectOutput {
        copy_object_result: Some(result),
        copy_source_version_id: source_version_id,
        version_id: written_version(&info),
        ..Default::default()
    }))
}

/// Most keys one DeleteObjects request may name.
const MAX_DELETE_KEYS: usize = 1000;

pub async fn delete_objects(
    gw: &Gateway,
    req: S3Request<DeleteObjectsInput>,
) -> S3Result<S3Response<DeleteObjectsOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let quiet = input.delete.quiet.unwrap_or(false);
    let objects = input.delete.objects;
    if objects.is_empty() || objects.len() > MAX_DELETE_KEYS {
        return Err(s3_error!(MalformedXML, "A DeleteObjects request names 1 to {MAX_DELETE_KEYS} keys"));
    }
    let bucket = input.bucket;
    // One engine call for the whole batch: each key is deleted (and fsynced) in turn.
    let results = gw
        .write(&cx, move |store, cx| {
            store.head_bucket(cx, &bucket)?;
            Ok(objects
                .iter()
                .map(|o| {
                    let request = DeleteRequest { version_id: o.version_id.clone() };
                    let outcome = store.delete_object(cx, &bucket, &o.key, &request);
                    (o.key.clone(), o.version_id.clone(), outcome)
                })
                .collect::<Vec<_>>())
        })
        .await?;
    let mut deleted = Vec::new();
    let mut errors = Vec::new();
    for (key, asked_version, outcome) in results {
        match outcome {
            Ok(outcome) => {
                if !quiet {
                    // A delete that made a marker names it in DeleteMarkerVersionId; one that
                    // removed a version names that version in VersionId.
                    let marker = outcome.delete_marker && asked_version.is_none();
                    deleted.push(DeletedObject {
                        key: Some(key),
                        delete_marker: outcome.delete_marker.then_some(true),
                        delete_marker_version_id: if marker { outcome.version_id.clone() } else { None },
                        version_id: if marker { None } else { asked_version },
                    });
                }
            }
            Err(err) => errors.push(Error {
                code: Some(err.s3_code().to_string()),
                message: Some(err.to_string()),
                key: Some(key),
                version_id: asked_version,
            }),
        }
    }
    Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
}
