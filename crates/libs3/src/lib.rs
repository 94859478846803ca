//! A drop-in for the libs3 2.0 that Debian ships (`libs3.so.2`): the same functions and types,
//! served in-process by the Isthmus engine when the bucket context's host name is `isthmus`
//! (the data root comes from `ISTHMUS_ROOT`). Programs built against Debian's libs3, such as
//! its `s3` tool, run unchanged with this library first on the library path, and see the same
//! buckets and objects a running gateway serves. Calls complete synchronously; request contexts
//! are not used. ACL, logging and query-string signing are answered with NotImplemented.

#![allow(non_snake_case, clippy::missing_safety_doc)]

mod status_names;

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::{Arc, OnceLock};

use isthmus_posix::StoreOptions;
use isthmus_session::door::{guard, range_of, stream_out};
use isthmus_store::{
    Conditions, CopyRequest, ETagMatch, GetRequest, ListRequest, ObjectInfo, ObjectMeta, PutRequest, RequestContext,
    Store, StoreError,
};

/// The context of this library's calls: the host process acting for itself.
fn cx() -> RequestContext {
    RequestContext::process()
}

type S3Status = c_int;

fn status(name: &str) -> S3Status {
    status_names::NAMES.iter().position(|n| n.to_bytes() == name.as_bytes()).map_or(1, |i| i as S3Status)
}

#[repr(C)]
pub struct S3NameValue {
    name: *const c_char,
    value: *const c_char,
}

#[repr(C)]
pub struct S3ResponseProperties {
    request_id: *const c_char,
    request_id2: *const c_char,
    content_type: *const c_char,
    content_length: u64,
    server: *const c_char,
    e_tag: *const c_char,
    last_modified: i64,
    meta_data_count: c_int,
    meta_data: *const S3NameValue,
}

#[repr(C)]
pub struct S3ErrorDetails {
    message: *const c_char,
    resource: *const c_char,
    further_details: *const c_char,
    extra_details_count: c_int,
    extra_details: *mut S3NameValue,
}

type PropertiesCallback = unsafe extern "C" fn(*const S3ResponseProperties, *mut c_void) -> S3Status;
type CompleteCallback = unsafe extern "C" fn(S3Status, *const S3ErrorDetails, *mut c_void);

#[repr(C)]
pub struct S3ResponseHandler {
    properties: Option<PropertiesCallback>,
    complete: Option<CompleteCallback>,
}

#[repr(C)]
pub struct S3BucketContext {
    host_name: *const c_char,
    bucket_name: *const c_char,
    protocol: c_int,
    uri_style: c_int,
    access_key_id: *const c_char,
    secret_access_key: *const c_char,
}

#[repr(C)]
pub struct S3PutProperties {
    content_type: *const c_char,
    md5: *const c_char,
    cache_control: *const c_char,
    content_disposition_filename: *const c_char,
    content_encoding: *const c_char,
    expires: i64,
    canned_acl: c_int,
    meta_data_count: c_int,
    meta_data: *const S3NameValue,
}

#[repr(C)]
pub struct S3GetConditions {
    if_modified_since: i64,
    if_not_modified_since: i64,
    if_match_etag: *const c_char,
    if_not_match_etag: *const c_char,
}

#[repr(C)]
pub struct S3ListBucketContent {
    key: *const c_char,
    last_modified: i64,
    e_tag: *const c_char,
    size: u64,
    owner_id: *const c_char,
    owner_display_name: *const c_char,
}

#[repr(C)]
pub struct S3PutObjectHandler {
    response: S3ResponseHandler,
    data: Option<unsafe extern "C" fn(c_int, *mut c_char, *mut c_void) -> c_int>,
}

#[repr(C)]
pub struct S3GetObjectHandler {
    response: S3ResponseHandler,
    data: Option<unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> S3Status>,
}

type ListBucketCallback = unsafe extern "C" fn(
    c_int,
    *const c_char,
    c_int,
    *const S3ListBucketContent,
    c_int,
    *const *const c_char,
    *mut c_void,
) -> S3Status;

#[repr(C)]
pub struct S3ListBucketHandler {
    response: S3ResponseHandler,
    list: Option<ListBucketCallback>,
}

type ListServiceCallback =
    unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, i64, *mut c_void) -> S3Status;

#[repr(C)]
pub struct S3ListServiceHandler {
    response: S3ResponseHandler,
    list: Option<ListServiceCallback>,
}

/// The host name that selects the in-process engine.
const ENGINE_HOST: &str = "isthmus";

static DEFAULT_HOST: OnceLock<String> = OnceLock::new();
static STORE: OnceLock<Result<Arc<dyn Store>, String>> = OnceLock::new();

fn store() -> Result<&'static dyn Store, String> {
    STORE
        .get_or_init(|| {
            let root = std::env::var("ISTHMUS_ROOT").map_err(|_| "set ISTHMUS_ROOT to the data root".to_string())?;
            isthmus_session::stack::open_root(std::path::Path::new(&root), StoreOptions::default())
                .map_err(|e| format!("cannot open {root}: {e}"))
        })
        .as_ref()
        .map(|store| &**store)
        .map_err(Clone::clone)
}

unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() { None } else { unsafe { CStr::from_ptr(p) }.to_str().ok() }
}

/// A failure: the libs3 status and a message for the error details.
struct Failure(S3Status, String);

/// The libs3 status of an engine error: the engine's S3 code (`StoreError::s3_code`, the one
/// mapping every door shares) under libs3's name for it; codes libs3 has no name for become
/// InternalError (server-side failures) or InvalidArgument (the request's fault).
fn from_store(err: StoreError) -> Failure {
    let name = match err.s3_code() {
        "KeyTooLongError" => "ErrorKeyTooLong".to_string(),
        // libs3 reports a failed If-None-Match as a failed precondition.
        "NotModified" => "ErrorPreconditionFailed".to_string(),
        code => format!("Error{code}"),
    };
    let known = status_names::NAMES.iter().any(|n| n.to_bytes() == name.as_bytes());
    let name = match known {
        true => name.as_str(),
        false if err.http_status() >= 500 => "ErrorInternalError",
        false => "ErrorInvalidArgument",
    };
    Failure(status(name), err.to_string())
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        from_store(err)
    }
}

/// Checks the host and returns the engine, or why this library cannot serve the request.
unsafe fn engine(host: *const c_char) -> Result<&'static dyn Store, Failure> {
    let host = unsafe { text(host) }.map(str::to_string).or_else(|| DEFAULT_HOST.get().cloned());
    let failed = |m| Failure(status("FailedToInitializeRequest"), m);
    match host.as_deref() {
        Some(h) if h.split(':').next() == Some(ENGINE_HOST) => store().map_err(failed),
        Some(h) if isthmus_local::socket_path(h).is_some() => local_store(h).map_err(failed),
        other => Err(Failure(
            status("NameLookupError"),
            format!(
                "this libs3 serves only the host name '{ENGINE_HOST}' (in-process, from ISTHMUS_ROOT) and unix:/path/to/socket (a gateway's local socket), not {other:?}"
            ),
        )),
    }
}

/// The gateway reached through the local socket named by `host` (`unix:/run/isthmus.sock`):
/// one connection pool per process, to the first socket named.
fn local_store(host: &str) -> Result<&'static dyn Store, String> {
    /// The socket named first, and the gateway reached through it.
    type NamedGateway = (String, Arc<dyn Store>);
    static LOCAL: OnceLock<Result<NamedGateway, String>> = OnceLock::new();
    let (first, store) = LOCAL
        .get_or_init(|| {
            isthmus_session::stack::open(host, StoreOptions::default())
                .map(|store| (host.to_string(), store))
                .map_err(|e| format!("cannot use the local gateway at {host}: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)?;
    if first != host {
        return Err(format!("this process already uses the local gateway {first}; one socket per process"));
    }
    Ok(&**store)
}

/// Reports the end of a request through the handler's complete callback.
unsafe fn complete(handler: *const S3ResponseHandler, data: *mut c_void, result: Result<(), Failure>) {
    let Some(handler) = (unsafe { handler.as_ref() }) else { return };
    let Some(done) = handler.complete else { return };
    match result {
        Ok(()) => unsafe { done(0, std::ptr::null(), data) },
        Err(Failure(code, message)) => {
            let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
            let details = S3ErrorDetails {
                message: message.as_ptr(),
                resource: std::ptr::null(),
                further_details: std::ptr::null(),
                extra_details_count: 0,
                extra_details: std::ptr::null_mut(),
            };
            unsafe { done(code, &details, data) };
        }
    }
}

/// Calls the properties callback with an object's description.
unsafe fn properties(
    handler: *const S3ResponseHandler,
    data: *mut c_void,
    info: &ObjectInfo,
    length: u64,
) -> Result<(), Failure> {
    let Some(callback) = (unsafe { handler.as_ref() }).and_then(|h| h.properties) else { return Ok(()) };
    let etag = CString::new(format!("\"{}\"", info.etag)).unwrap_or_default();
    let content_type = info.meta.content_type.as_deref().and_then(|c| CString::new(c).ok());
    let pairs: Vec<(CString, CString)> = info
        .meta
        .user
        .iter()
        .filter_map(|(k, v)| Some((CString::new(k.as_str()).ok()?, CString::new(v.as_str()).ok()?)))
        .collect();
    let meta: Vec<S3NameValue> =
        pairs.iter().map(|(k, v)| S3NameValue { name: k.as_ptr(), value: v.as_ptr() }).collect();
    let props = S3ResponseProperties {
        request_id: std::ptr::null(),
        request_id2: std::ptr::null(),
        content_type: content_type.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        content_length: length,
        server: c"Isthmus".as_ptr(),
        e_tag: etag.as_ptr(),
        last_modified: unix_seconds(info.last_modified),
        meta_data_count: meta.len() as c_int,
        meta_data: if meta.is_empty() { std::ptr::null() } else { meta.as_ptr() },
    };
    callback_result(unsafe { callback(&props, data) }, "the properties callback stopped the request")
}

/// A caller's callback result: 0 goes on, anything else stops the request with that status.
fn callback_result(code: c_int, why: &str) -> Result<(), Failure> {
    if code == 0 { Ok(()) } else { Err(Failure(code, why.into())) }
}

/// Seconds since the Unix epoch, as libs3 reports times.
fn unix_seconds(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

unsafe fn put_request(props: *const S3PutProperties) -> PutRequest {
    let Some(p) = (unsafe { props.as_ref() }) else { return PutRequest::default() };
    let mut meta = ObjectMeta {
        content_type: unsafe { text(p.content_type) }.map(str::to_string),
        cache_control: unsafe { text(p.cache_control) }.map(str::to_string),
        content_encoding: unsafe { text(p.content_encoding) }.map(str::to_string),
        content_disposition: unsafe { text(p.content_disposition_filename) }
            .map(|f| format!("attachment; filename=\"{f}\"")),
        ..Default::default()
    };
    for i in 0..usize::try_from(p.meta_data_count).unwrap_or(0) {
        let pair = unsafe { &*p.meta_data.add(i) };
        if let (Some(k), Some(v)) = (unsafe { text(pair.name) }, unsafe { text(pair.value) }) {
            meta.user.insert(k.to_ascii_lowercase(), v.to_string());
        }
    }
    PutRequest { meta, ..Default::default() }
}

unsafe fn bucket_of<'a>(ctx: *const S3BucketContext) -> Result<(&'static dyn Store, &'a str), Failure> {
    let ctx = unsafe { ctx.as_ref() }.ok_or_else(|| Failure(status("InternalError"), "no bucket context".into()))?;
    let store = unsafe { engine(ctx.host_name) }?;
    let bucket = unsafe { text(ctx.bucket_name) }
        .ok_or_else(|| Failure(status("ErrorInvalidBucketName"), "no bucket name".into()))?;
    Ok((store, bucket))
}

/// Runs a bucket-level call (create, delete, test) for `host` and `bucket`, and completes it.
unsafe fn bucket_call(
    host: *const c_char,
    bucket: *const c_char,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
    call: impl FnOnce(&dyn Store, &str) -> Result<(), Failure>,
) {
    let result = guard(|| -> Result<(), Failure> {
        let store = unsafe { engine(host) }?;
        let bucket = unsafe { text(bucket) }
            .ok_or_else(|| Failure(status("ErrorInvalidBucketName"), "no bucket name".into()))?;
        call(store, bucket)
    });
    unsafe { complete(handler, data, result) };
}

fn key_of<'a>(key: *const c_char) -> Result<&'a str, Failure> {
    unsafe { text(key) }.ok_or_else(|| Failure(status("ErrorInvalidArgument"), "no key".into()))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_initialize(
    _user_agent: *const c_char,
    _flags: c_int,
    default_host: *const c_char,
) -> S3Status {
    if let Some(host) = unsafe { text(default_host) } {
        let _ = DEFAULT_HOST.set(host.to_string());
    }
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn S3_deinitialize() {}

#[unsafe(no_mangle)]
pub extern "C" fn S3_get_status_name(code: S3Status) -> *const c_char {
    usize::try_from(code).ok().and_then(|i| status_names::NAMES.get(i)).map_or(c"Unknown".as_ptr(), |n| n.as_ptr())
}

/// Nothing here is worth retrying: there is no network between the caller and the data.
#[unsafe(no_mangle)]
pub extern "C" fn S3_status_is_retryable(_code: S3Status) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_validate_bucket_name(name: *const c_char, uri_style: c_int) -> S3Status {
    let Some(name) = (unsafe { text(name) }) else { return status("InvalidBucketNameCharacter") };
    let virtual_host = uri_style == 0;
    let limit = if virtual_host { 63 } else { 255 };
    if name.len() > limit {
        return status("InvalidBucketNameTooLong");
    }
    if name.len() < 3 {
        return status("InvalidBucketNameTooShort");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return status("InvalidBucketNameFirstCharacter");
    }
    let allowed = |b: u8| {
        b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || b == b'.'
            || b == b'-'
            || (!virtual_host && (b.is_ascii_uppercase() || b == b'_'))
    };
    if !name.bytes().all(allowed) {
        return status("InvalidBucketNameCharacter");
    }
    if virtual_host && (name.contains("..") || name.contains(".-") || name.contains("-.")) {
        return status("InvalidBucketNameCharacterSequence");
    }
    if name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok()) {
        return status("InvalidBucketNameDotQuadNotation");
    }
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_create_bucket(
    _protocol: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    _canned_acl: c_int,
    _location: *const c_char,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    unsafe {
        bucket_call(host, bucket, handler, data, |store, bucket| {
            Ok(store.create_bucket(&cx(), bucket, &Default::default())?)
        })
    };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_delete_bucket(
    _protocol: c_int,
    _uri_style: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    unsafe { bucket_call(host, bucket, handler, data, |store, bucket| Ok(store.delete_bucket(&cx(), bucket)?)) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_test_bucket(
    _protocol: c_int,
    _uri_style: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    location_size: c_int,
    location: *mut c_char,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    unsafe {
        bucket_call(host, bucket, handler, data, |store, bucket| {
            store.head_bucket(&cx(), bucket)?;
            if !location.is_null() && location_size > 0 {
                *location = 0;
            }
            Ok(())
        })
    };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_service(
    _protocol: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    host: *const c_char,
    _context: *mut c_void,
    handler: *const S3ListServiceHandler,
    data: *mut c_void,
) {
    let response = unsafe { handler.as_ref() }.map_or(std::ptr::null(), |h| &h.response as *const _);
    let result = guard(|| -> Result<(), Failure> {
        let store = unsafe { engine(host) }?;
        let callback = unsafe { handler.as_ref() }.and_then(|h| h.list);
        for bucket in store.list_buckets(&cx())? {
            let name = CString::new(bucket.name).unwrap_or_default();
            let created = unix_seconds(bucket.created);
            if let Some(cb) = callback {
                let code = unsafe { cb(c"isthmus".as_ptr(), c"isthmus".as_ptr(), name.as_ptr(), created, data) };
                callback_result(code, "the listing callback stopped")?;
            }
        }
        Ok(())
    });
    unsafe { complete(response, data, result) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_bucket(
    ctx: *const S3BucketContext,
    prefix: *const c_char,
    marker: *const c_char,
    delimiter: *const c_char,
    max_keys: c_int,
    _context: *mut c_void,
    handler: *const S3ListBucketHandler,
    data: *mut c_void,
) {
    let response = unsafe { handler.as_ref() }.map_or(std::ptr::null(), |h| &h.response as *const _);
    let result = guard(|| -> Result<(), Failure> {
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let request = ListRequest {
            prefix: unsafe { text(prefix) }.unwrap_or_default().to_string(),
            delimiter: unsafe { text(delimiter) }.filter(|d| !d.is_empty()).map(str::to_string),
            start_after: unsafe { text(marker) }.filter(|m| !m.is_empty()).map(str::to_string),
            max_keys: if max_keys > 0 { (max_keys as usize).min(1000) } else { 1000 },
        };
        let page = store.list_objects(&cx(), bucket, &request)?;
        let keys: Vec<CString> =
            page.objects.iter().map(|o| CString::new(o.key.as_str()).unwrap_or_default()).collect();
        let etags: Vec<CString> =
            page.objects.iter().map(|o| CString::new(format!("\"{}\"", o.etag)).unwrap_or_default()).collect();
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
        let prefixes: Vec<CString> =
            page.common_prefixes.iter().map(|p| CString::new(p.as_str()).unwrap_or_default()).collect();
        let prefix_ptrs: Vec<*const c_char> = prefixes.iter().map(|p| p.as_ptr()).collect();
        let next = page.next_marker.as_deref().and_then(|m| CString::new(m).ok());
        if let Some(cb) = unsafe { handler.as_ref() }.and_then(|h| h.list) {
            let code = unsafe {
                cb(
                    c_int::from(page.is_truncated),
                    next.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                    contents.len() as c_int,
                    contents.as_ptr(),
                    prefix_ptrs.len() as c_int,
                    prefix_ptrs.as_ptr(),
                    data,
                )
            };
            callback_result(code, "the listing callback stopped")?;
        }
        Ok(())
    });
    unsafe { complete(response, data, result) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_put_object(
    ctx: *const S3BucketContext,
    key: *const c_char,
    content_length: u64,
    props: *const S3PutProperties,
    _context: *mut c_void,
    handler: *const S3PutObjectHandler,
    data: *mut c_void,
) {
    let response = unsafe { handler.as_ref() }.map_or(std::ptr::null(), |h| &h.response as *const _);
    let result = guard(|| -> Result<(), Failure> {
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let mut writer = store.put_object(&cx(), bucket, key_of(key)?, unsafe { put_request(props) })?;
        let source = unsafe { handler.as_ref() }.and_then(|h| h.data);
        let mut buf = vec![0u8; 1 << 20];
        let mut left = content_length;
        while left > 0 {
            let Some(read) = source else {
                return Err(Failure(status("ErrorIncompleteBody"), "no data callback".into()));
            };
            let want = left.min(buf.len() as u64) as c_int;
            let n = unsafe { read(want, buf.as_mut_ptr().cast(), data) };
            if n < 0 {
                return Err(Failure(status("AbortedByCallback"), "the data callback aborted the upload".into()));
            }
            if n == 0 {
                return Err(Failure(
                    status("ErrorIncompleteBody"),
                    "the data callback ended before Content-Length".into(),
                ));
            }
            let n = (n as u64).min(left) as usize;
            writer.write_all(&buf[..n])?;
            left -= n as u64;
        }
        if let Some(md5) = unsafe { props.as_ref() }.and_then(|p| unsafe { text(p.md5) }) {
            let declared = isthmus_md5_from_base64(md5);
            if declared.is_some() && declared != writer.digests().md5 {
                return Err(Failure(
                    status("ErrorBadDigest"),
                    "The Content-MD5 you specified did not match what we received.".into(),
                ));
            }
        }
        let info = writer.commit()?;
        unsafe { properties(response, data, &info, 0) }
    });
    unsafe { complete(response, data, result) };
}

/// Decodes a base64 MD5 (as Content-MD5 carries it).
fn isthmus_md5_from_base64(text: &str) -> Option<[u8; 16]> {
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

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_object(
    ctx: *const S3BucketContext,
    key: *const c_char,
    conditions: *const S3GetConditions,
    start_byte: u64,
    byte_count: u64,
    _context: *mut c_void,
    handler: *const S3GetObjectHandler,
    data: *mut c_void,
) {
    let response = unsafe { handler.as_ref() }.map_or(std::ptr::null(), |h| &h.response as *const _);
    let result = guard(|| -> Result<(), Failure> {
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let mut request = GetRequest::default();
        if let Some(c) = unsafe { conditions.as_ref() } {
            let time = |t: i64| (t >= 0).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64));
            request.conditions = Conditions {
                if_modified_since: time(c.if_modified_since),
                if_unmodified_since: time(c.if_not_modified_since),
                if_match: unsafe { text(c.if_match_etag) }
                    .map(|t| ETagMatch::Tags(vec![t.trim_matches('"').to_string()])),
                if_none_match: unsafe { text(c.if_not_match_etag) }
                    .map(|t| ETagMatch::Tags(vec![t.trim_matches('"').to_string()])),
            };
        }
        // libs3: a byte count of 0 reads to the end.
        request.range = range_of(start_byte, std::num::NonZeroU64::new(byte_count))?;
        let response_data = store.get_object(&cx(), bucket, key_of(key)?, &request)?;
        let length = response_data.body.remaining();
        unsafe { properties(response, data, &response_data.info, length) }?;
        let sink = unsafe { handler.as_ref() }.and_then(|h| h.data);
        let mut body = response_data.body;
        let mut stopped = None;
        stream_out(&mut body, |chunk| {
            let Some(write) = sink else { return true };
            let code = unsafe { write(chunk.len() as c_int, chunk.as_ptr().cast(), data) };
            match callback_result(code, "the data callback stopped the download") {
                Ok(()) => true,
                Err(failure) => {
                    stopped = Some(failure);
                    false
                }
            }
        })?;
        stopped.map_or(Ok(()), Err)
    });
    unsafe { complete(response, data, result) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_head_object(
    ctx: *const S3BucketContext,
    key: *const c_char,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let result = guard(|| -> Result<(), Failure> {
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let info = store.head_object(&cx(), bucket, key_of(key)?, &Default::default())?;
        unsafe { properties(handler, data, &info, info.size) }
    });
    unsafe { complete(handler, data, result) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_delete_object(
    ctx: *const S3BucketContext,
    key: *const c_char,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let result = guard(|| -> Result<(), Failure> {
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        store.delete_object(&cx(), bucket, key_of(key)?, &Default::default())?;
        Ok(())
    });
    unsafe { complete(handler, data, result) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_copy_object(
    ctx: *const S3BucketContext,
    key: *const c_char,
    destination_bucket: *const c_char,
    destination_key: *const c_char,
    props: *const S3PutProperties,
    last_modified_return: *mut i64,
    etag_return_size: c_int,
    etag_return: *mut c_char,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let result = guard(|| -> Result<(), Failure> {
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        let key = key_of(key)?;
        let dst_bucket = unsafe { text(destination_bucket) }.unwrap_or(bucket);
        let dst_key = unsafe { text(destination_key) }.unwrap_or(key);
        // libs3 sends REPLACE when put properties are given.
        let request = CopyRequest {
            replace_meta: (!props.is_null()).then(|| unsafe { put_request(props) }.meta),
            ..Default::default()
        };
        let info = store.copy_object(&cx(), (bucket, key), (dst_bucket, dst_key), &request)?;
        if let Some(t) = unsafe { last_modified_return.as_mut() } {
            *t = unix_seconds(info.last_modified);
        }
        if !etag_return.is_null() && etag_return_size > 0 {
            let quoted = format!("\"{}\"", info.etag);
            let n = quoted.len().min(etag_return_size as usize - 1);
            unsafe {
                std::ptr::copy_nonoverlapping(quoted.as_ptr().cast(), etag_return, n);
                *etag_return.add(n) = 0;
            }
        }
        Ok(())
    });
    unsafe { complete(handler, data, result) };
}

fn not_implemented(handler: *const S3ResponseHandler, data: *mut c_void, what: &str) {
    unsafe {
        complete(
            handler,
            data,
            Err(Failure(status("ErrorNotImplemented"), format!("{what} is not supported in-process"))),
        )
    };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_acl(
    _ctx: *const S3BucketContext,
    _key: *const c_char,
    _owner_id: *mut c_char,
    _owner_name: *mut c_char,
    _grant_count: *mut c_int,
    _grants: *mut c_void,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    not_implemented(handler, data, "GetAcl");
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_acl(
    _ctx: *const S3BucketContext,
    _key: *const c_char,
    _owner_id: *const c_char,
    _owner_name: *const c_char,
    _grant_count: c_int,
    _grants: *const c_void,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    not_implemented(handler, data, "SetAcl");
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_server_access_logging(
    _ctx: *const S3BucketContext,
    _target_bucket: *mut c_char,
    _target_prefix: *mut c_char,
    _grant_count: *mut c_int,
    _grants: *mut c_void,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    not_implemented(handler, data, "GetServerAccessLogging");
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_server_access_logging(
    _ctx: *const S3BucketContext,
    _target_bucket: *const c_char,
    _target_prefix: *const c_char,
    _grant_count: c_int,
    _grants: *const c_void,
    _context: *mut c_void,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    not_implemented(handler, data, "SetServerAccessLogging");
}

/// Query-string authentication makes no sense without a network; always fails.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_generate_authenticated_query_string(
    buffer: *mut c_char,
    _ctx: *const S3BucketContext,
    _key: *const c_char,
    _expires: i64,
    _resource: *const c_char,
) -> S3Status {
    if !buffer.is_null() {
        unsafe { *buffer = 0 };
    }
    status("ErrorNotImplemented")
}
