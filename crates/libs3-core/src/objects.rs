//! The bucket and object calls both faces serve: buckets (create, delete, test, list the
//! service), listings, put, get, head, delete and copy, and the answer to what is not served.
//! Each runs inside `boundary` and ends in exactly one complete callback.

use std::ffi::{CString, c_char, c_int, c_void};

use isthmus_session::door::{range_of, stream_out};
use isthmus_store::{Conditions, CopyRequest, ETagMatch, GetRequest, ListRequest, ObjectInfo, Store};

use crate::abi::{
    BucketContext, PutProperties, S3GetConditions, S3GetObjectHandler, S3ListBucketContent, S3ListBucketHandler,
    S3ListServiceHandler, S3PutObjectHandler, S3ResponseHandler,
};
use crate::drive::{
    callback_result, etag_out, keep, properties, pull, put_request, required, response_of, serve, text, unix_seconds,
};
use crate::engine::{bucket_of, cx, engine};
use crate::face::{Face, Failure};

/// Runs a bucket-level call (create, delete, test) for `host` and `bucket`, and completes it.
///
/// # Safety
/// `host` and `bucket` are null or valid C strings; `handler` is null or a valid handler.
unsafe fn bucket_call(
    face: &Face,
    host: *const c_char,
    bucket: *const c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
    body: impl FnOnce(&dyn Store, &str) -> Result<(), Failure>,
) {
    let call = || {
        // SAFETY: per this function's contract.
        let store = unsafe { engine(host) }?;
        // SAFETY: as above.
        let bucket = unsafe { text(bucket) }.ok_or_else(|| Failure::new("ErrorInvalidBucketName", "no bucket name"))?;
        body(store, bucket)
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, handler, data, call) }
}

/// S3_create_bucket (the canned ACL and location constraint are not used).
///
/// # Safety
/// As `bucket_call`.
pub unsafe fn create_bucket(
    face: &Face,
    host: *const c_char,
    bucket: *const c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's pointers, per this function's contract.
    unsafe {
        bucket_call(face, host, bucket, handler, data, |store, bucket| {
            Ok(store.create_bucket(&cx(), bucket, &Default::default())?)
        })
    }
}

/// S3_delete_bucket.
///
/// # Safety
/// As `bucket_call`.
pub unsafe fn delete_bucket(
    face: &Face,
    host: *const c_char,
    bucket: *const c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's pointers, per this function's contract.
    unsafe { bucket_call(face, host, bucket, handler, data, |store, bucket| Ok(store.delete_bucket(&cx(), bucket)?)) }
}

/// S3_test_bucket: the location returned is always empty (one region).
///
/// # Safety
/// As `bucket_call`; `location` is null or writable for `location_size` bytes.
pub unsafe fn test_bucket(
    face: &Face,
    host: *const c_char,
    bucket: *const c_char,
    location_size: c_int,
    location: *mut c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's pointers, per this function's contract.
    unsafe {
        bucket_call(face, host, bucket, handler, data, |store, bucket| {
            store.head_bucket(&cx(), bucket)?;
            if !location.is_null() && location_size > 0 {
                // SAFETY: `location` is writable for at least one byte.
                *location = 0;
            }
            Ok(())
        })
    }
}

/// S3_list_service: one callback per bucket.
///
/// # Safety
/// `host` is null or a valid C string; `handler` is null or a valid handler.
pub unsafe fn list_service(face: &Face, host: *const c_char, handler: *const S3ListServiceHandler, data: *mut c_void) {
    let call = || {
        // SAFETY: per this function's contract.
        let store = unsafe { engine(host) }?;
        // SAFETY: as above.
        let callback = unsafe { handler.as_ref() }.and_then(|h| h.list);
        for bucket in store.list_buckets(&cx())? {
            let name = CString::new(bucket.name).unwrap_or_default();
            if let Some(cb) = callback {
                let created = unix_seconds(bucket.created);
                // SAFETY: the caller's callback; the strings outlive the call.
                let code = unsafe { cb(c"isthmus".as_ptr(), c"isthmus".as_ptr(), name.as_ptr(), created, data) };
                callback_result(code, "the listing callback stopped")?;
            }
        }
        Ok(())
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response_of(handler), data, call) }
}

/// S3_list_bucket: one callback with the page (at most 1000 keys, as S3 answers). The next
/// marker is the page's last key when the page is truncated, else "" (never null), and stays
/// valid until the call after the next one, since callers use it as the next call's marker.
///
/// # Safety
/// `ctx` is null or a valid bucket context; the strings are null or valid C strings;
/// `handler` is null or a valid handler.
#[allow(clippy::too_many_arguments)]
pub unsafe fn list_bucket(
    face: &Face,
    ctx: *const BucketContext,
    prefix: *const c_char,
    marker: *const c_char,
    delimiter: *const c_char,
    max_keys: c_int,
    handler: *const S3ListBucketHandler,
    data: *mut c_void,
) {
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let request = ListRequest {
            // SAFETY: `prefix` is null or a valid C string (this function's contract).
            prefix: unsafe { text(prefix) }.unwrap_or_default().to_string(),
            // SAFETY: `delimiter` is null or a valid C string (this function's contract).
            delimiter: unsafe { text(delimiter) }.filter(|d| !d.is_empty()).map(str::to_string),
            // SAFETY: `marker` is null or a valid C string (this function's contract).
            start_after: unsafe { text(marker) }.filter(|m| !m.is_empty()).map(str::to_string),
            max_keys: if max_keys > 0 { (max_keys as usize).min(1000) } else { 1000 },
        };
        let page = store.list_objects(&cx(), bucket, &request)?;
        // SAFETY: `handler` is null or a valid handler (this function's contract).
        let Some(cb) = (unsafe { handler.as_ref() }).and_then(|h| h.list) else { return Ok(()) };
        let cstr = |s: &str| CString::new(s).unwrap_or_default();
        let keys: Vec<CString> = page.objects.iter().map(|o| cstr(&o.key)).collect();
        let etags: Vec<CString> = page.objects.iter().map(|o| cstr(&format!("\"{}\"", o.etag))).collect();
        let contents: Vec<S3ListBucketContent> = page
            .objects
            .iter()
            .zip(keys.iter().zip(&etags))
            .map(|(o, (k, e))| S3ListBucketContent {
                key: k.as_ptr(),
                last_modified: unix_seconds(o.last_modified),
                e_tag: e.as_ptr(),
                size: o.size,
                owner_id: c"isthmus".as_ptr(),
                owner_display_name: c"isthmus".as_ptr(),
            })
            .collect();
        let prefixes: Vec<CString> = page.common_prefixes.iter().map(|p| cstr(p)).collect();
        let prefix_ptrs: Vec<*const c_char> = prefixes.iter().map(|p| p.as_ptr()).collect();
        let next = match page.is_truncated {
            true => keep(page.next_marker.as_deref().unwrap_or_default()),
            false => keep(""),
        };
        // SAFETY: the caller's callback; every pointer it gets outlives the call.
        let code = unsafe {
            cb(
                c_int::from(page.is_truncated),
                next,
                contents.len() as c_int,
                contents.as_ptr(),
                prefix_ptrs.len() as c_int,
                prefix_ptrs.as_ptr(),
                data,
            )
        };
        callback_result(code, "the listing callback stopped")
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response_of(handler), data, call) }
}

/// Checks a Content-MD5 (base64) the caller declared against what was written.
fn check_md5(declared: Option<&str>, written: Option<[u8; 16]>) -> Result<(), Failure> {
    let Some(declared) = declared.and_then(md5_from_base64) else { return Ok(()) };
    match Some(declared) == written {
        true => Ok(()),
        false => Err(Failure::new("ErrorBadDigest", "The Content-MD5 you specified did not match what we received.")),
    }
}

/// S3_put_object: the body is pulled from the data callback in chunks until `content_length`
/// bytes have come; the properties callback then gets the new object's ETag.
///
/// # Safety
/// `ctx`, `props` and `handler` are null or valid; `key` is null or a valid C string.
pub unsafe fn put_object(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    content_length: u64,
    props: *const PutProperties,
    handler: *const S3PutObjectHandler,
    data: *mut c_void,
) {
    let response = response_of(handler);
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let mut writer =
            // SAFETY: `key` is null or a valid C string; `props` is null or valid put properties (this function's contract).
            store.put_object(&cx(), bucket, unsafe { required(key, "key") }?, unsafe { put_request(props) })?;
        // SAFETY: `handler` is null or a valid handler (this function's contract).
        let source = unsafe { handler.as_ref() }.and_then(|h| h.data);
        // SAFETY: the handler's data callback may be called with `data` (this function's contract).
        unsafe { pull(content_length, source, data, |b| Ok(writer.write_all(b)?)) }?;
        // SAFETY: `props` is null or valid put properties, its strings null or valid C strings (this function's contract).
        let md5 = unsafe { props.as_ref() }.and_then(|p| unsafe { text(p.md5) });
        check_md5(md5, writer.digests().md5)?;
        let info = writer.commit()?;
        // SAFETY: the handler is null or valid, its callbacks callable with `data` (this function's contract).
        unsafe { properties(response, data, &info, 0) }
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response, data, call) }
}

/// Decodes a base64 MD5 (as Content-MD5 carries it).
fn md5_from_base64(text: &str) -> Option<[u8; 16]> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(16);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c)? as u32;
        bits = (bits << 6) | v;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    out.try_into().ok()
}

/// The engine's get request for libs3 get conditions and a range (`byte_count` 0: to the end).
///
/// # Safety
/// `conditions` is null or valid, with null or valid C strings.
unsafe fn get_request(
    conditions: *const S3GetConditions,
    start_byte: u64,
    byte_count: u64,
) -> Result<GetRequest, Failure> {
    let mut request = GetRequest::default();
    // SAFETY: per this function's contract.
    if let Some(c) = unsafe { conditions.as_ref() } {
        let time = |t: i64| (t >= 0).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64));
        let tags = |t: &str| ETagMatch::Tags(vec![t.trim_matches('"').to_string()]);
        request.conditions = Conditions {
            if_modified_since: time(c.if_modified_since),
            if_unmodified_since: time(c.if_not_modified_since),
            // SAFETY: the conditions' strings are null or valid C strings.
            if_match: unsafe { text(c.if_match_etag) }.map(tags),
            // SAFETY: as above.
            if_none_match: unsafe { text(c.if_not_match_etag) }.map(tags),
        };
    }
    request.range = range_of(start_byte, std::num::NonZeroU64::new(byte_count))?;
    Ok(request)
}

/// S3_get_object: the properties callback, then the body in chunks of up to 1 MiB through the
/// data callback; a status other than OK from it stops the download with that status.
///
/// # Safety
/// `ctx`, `conditions` and `handler` are null or valid; `key` is null or a valid C string.
#[allow(clippy::too_many_arguments)]
pub unsafe fn get_object(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    conditions: *const S3GetConditions,
    start_byte: u64,
    byte_count: u64,
    handler: *const S3GetObjectHandler,
    data: *mut c_void,
) {
    let response = response_of(handler);
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        // SAFETY: `conditions` is null or valid get conditions (this function's contract).
        let request = unsafe { get_request(conditions, start_byte, byte_count) }?;
        // SAFETY: `key` is null or a valid C string (this function's contract).
        let answer = store.get_object(&cx(), bucket, unsafe { required(key, "key") }?, &request)?;
        // SAFETY: the handler is null or valid, its callbacks callable with `data` (this function's contract).
        unsafe { properties(response, data, &answer.info, answer.body.remaining()) }?;
        // SAFETY: `handler` is null or a valid handler (this function's contract).
        let sink = unsafe { handler.as_ref() }.and_then(|h| h.data);
        let mut body = answer.body;
        let mut stopped = None;
        stream_out(&mut body, |chunk| {
            let Some(write) = sink else { return true };
            // SAFETY: the caller's callback; the chunk outlives the call.
            let code = unsafe { write(chunk.len() as c_int, chunk.as_ptr().cast(), data) };
            callback_result(code, "the data callback stopped the download").map_err(|f| stopped = Some(f)).is_ok()
        })?;
        stopped.map_or(Ok(()), Err)
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response, data, call) }
}

/// S3_head_object: the properties callback with the object's length and time.
///
/// # Safety
/// `ctx` and `handler` are null or valid; `key` is null or a valid C string.
pub unsafe fn head_object(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let info: ObjectInfo =
            // SAFETY: `key` is null or a valid C string (this function's contract).
            store.head_object(&cx(), bucket, unsafe { required(key, "key") }?, &Default::default()).map_err(|e| {
                let status = e.http_status();
                Failure::from(e).of_head(face, status)
            })?;
        // SAFETY: the handler is null or valid, its callbacks callable with `data` (this function's contract).
        unsafe { properties(handler, data, &info, info.size) }
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, handler, data, call) }
}

/// S3_delete_object.
///
/// # Safety
/// `ctx` and `handler` are null or valid; `key` is null or a valid C string.
pub unsafe fn delete_object(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        // SAFETY: `key` is null or a valid C string (this function's contract).
        store.delete_object(&cx(), bucket, unsafe { required(key, "key") }?, &Default::default())?;
        Ok(())
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, handler, data, call) }
}

/// Where S3_copy_object_range puts a range of the source: a part of a multipart upload.
pub struct PartTarget<'a> {
    pub part_number: u32,
    pub upload_id: &'a str,
    /// The source's bytes `first..first+count` (count 0: the whole source).
    pub first: u64,
    pub count: u64,
}

/// The last-modified time and ETag a copy returns to its caller.
pub struct CopyReturn {
    pub last_modified: *mut i64,
    pub etag_size: c_int,
    pub etag: *mut c_char,
}

/// S3_copy_object and S3_copy_object_range: a whole-object copy (put properties, when given,
/// replace the metadata, as libs3 then asks for), or a range of the source into a part.
///
/// # Safety
/// `ctx`, `props` and `handler` are null or valid; the strings are null or valid C strings;
/// the return pointers are null or writable (`etag` for `etag_size` bytes).
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_object(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    destination_bucket: *const c_char,
    destination_key: *const c_char,
    part: Option<PartTarget<'_>>,
    props: *const PutProperties,
    out: CopyReturn,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        // SAFETY: `key` is null or a valid C string (this function's contract).
        let key = unsafe { required(key, "key") }?;
        // SAFETY: `destination_bucket` is null or a valid C string (this function's contract).
        let dst_bucket = unsafe { text(destination_bucket) }.unwrap_or(bucket);
        // SAFETY: `destination_key` is null or a valid C string (this function's contract).
        let dst_key = unsafe { text(destination_key) }.unwrap_or(key);
        let info = match part {
            None => {
                let request = CopyRequest {
                    // SAFETY: `props` is null or valid put properties (this function's contract).
                    replace_meta: (!props.is_null()).then(|| unsafe { put_request(props) }.meta),
                    ..Default::default()
                };
                store.copy_object(&cx(), (bucket, key), (dst_bucket, dst_key), &request)?
            }
            Some(part) => {
                let request = isthmus_store::PartRequest { part_number: part.part_number, ..Default::default() };
                let source = GetRequest {
                    range: range_of(part.first, std::num::NonZeroU64::new(part.count))?,
                    ..Default::default()
                };
                store.upload_part_copy(&cx(), dst_bucket, dst_key, part.upload_id, &request, (bucket, key), &source)?
            }
        };
        // SAFETY: the return pointers are null or writable (`etag` for `etag_size` bytes; this function's contract).
        if let Some(t) = unsafe { out.last_modified.as_mut() } {
            *t = unix_seconds(info.last_modified);
        }
        // SAFETY: the return pointers are null or writable (`etag` for `etag_size` bytes; this function's contract).
        unsafe { etag_out(&info.etag, out.etag_size, out.etag) };
        Ok(())
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, handler, data, call) }
}

/// A call this library does not serve (ACLs, logging, lifecycle): the face's unsupported
/// status through the complete callback.
///
/// # Safety
/// `handler` is null or a valid handler.
pub unsafe fn unsupported(face: &Face, handler: *const S3ResponseHandler, data: *mut c_void, what: &str) {
    let call = || Err(Failure::new(face.unsupported, format!("{what} is not served by the Isthmus libs3 drop-in")));
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, handler, data, call) }
}

/// S3_validate_bucket_name: libs3's rules (virtual-host style: 3-63 lowercase letters, digits,
/// dots and dashes; path style also allows upper case and '_', up to 255).
///
/// # Safety
/// `name` is null or a valid C string.
pub unsafe fn validate_bucket_name(face: &Face, name: *const c_char, uri_style: c_int) -> c_int {
    // SAFETY: per this function's contract.
    let Some(name) = (unsafe { text(name) }) else { return face.number("InvalidBucketNameCharacter") };
    let virtual_host = uri_style == 0;
    let limit = if virtual_host { 63 } else { 255 };
    let problem = if name.len() > limit {
        "InvalidBucketNameTooLong"
    } else if name.len() < 3 {
        "InvalidBucketNameTooShort"
    } else if !name.as_bytes()[0].is_ascii_alphanumeric() {
        "InvalidBucketNameFirstCharacter"
    } else if !name.bytes().all(|b| {
        b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || b == b'.'
            || b == b'-'
            || (!virtual_host && (b.is_ascii_uppercase() || b == b'_'))
    }) {
        "InvalidBucketNameCharacter"
    } else if virtual_host && (name.contains("..") || name.contains(".-") || name.contains("-.")) {
        "InvalidBucketNameCharacterSequence"
    } else if name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok()) {
        "InvalidBucketNameDotQuadNotation"
    } else {
        "OK"
    };
    face.number(problem)
}
