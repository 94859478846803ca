//! A drop-in for the libs3 2.0 that Debian ships (`libs3.so.2`): the same functions and types,
//! served in-process by the Isthmus engine when the bucket context's host name is `isthmus`
//! (the data root comes from `ISTHMUS_ROOT`), or through a gateway's local socket when it is
//! `unix:PATH`. Programs built against Debian's libs3, such as its `s3` tool, run unchanged
//! with this library first on the library path, and see the same buckets and objects a running
//! gateway serves. Calls complete synchronously; a request context is only a token. ACL,
//! logging and query-string signing are answered with ErrorNotImplemented. The calls
//! themselves are crates/libs3-core's, shared with the libs3 4.x face (crates/libs3-4); this
//! crate gives them 2.0's parameter lists and status numbers.

#![allow(non_snake_case, clippy::missing_safety_doc)]

mod status_names;

use std::ffi::{c_char, c_int, c_void};

use isthmus_libs3_core::abi::{
    BucketContext, PutProperties, S3GetConditions, S3GetObjectHandler, S3ListBucketHandler, S3ListServiceHandler,
    S3PutObjectHandler, S3ResponseHandler,
};
use isthmus_libs3_core::context::{self, RequestContext};
use isthmus_libs3_core::drive::{boundary, text};
use isthmus_libs3_core::objects::{self, CopyReturn};
use isthmus_libs3_core::{Face, S3Status, engine};

/// libs3 2.0's numbering; it has no NotSupported status and reports HEAD failures by their
/// S3 error names. Nothing is retryable: there is no network between the caller and the data.
static FACE: Face = Face {
    names: &status_names::NAMES,
    unsupported: "ErrorNotImplemented",
    head_by_http_status: false,
    retryable: &[],
};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_initialize(
    _user_agent: *const c_char,
    _flags: c_int,
    default_host: *const c_char,
) -> S3Status {
    boundary(1, || {
        // SAFETY: the caller's string, null or valid.
        if let Some(host) = unsafe { text(default_host) } {
            engine::set_default_host(host);
        }
        0
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn S3_deinitialize() {}

#[unsafe(no_mangle)]
pub extern "C" fn S3_get_status_name(code: S3Status) -> *const c_char {
    FACE.name(code)
}

#[unsafe(no_mangle)]
pub extern "C" fn S3_status_is_retryable(code: S3Status) -> c_int {
    FACE.is_retryable(code)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_validate_bucket_name(name: *const c_char, uri_style: c_int) -> S3Status {
    // SAFETY: the caller's string, null or valid.
    boundary(1, || unsafe { objects::validate_bucket_name(&FACE, name, uri_style) })
}

/// ACL XML is not parsed here: no grants, ErrorNotImplemented.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_convert_acl(
    _acl_xml: *mut c_char,
    _owner_id: *mut c_char,
    _owner_name: *mut c_char,
    grant_count: *mut c_int,
    _grants: *mut c_void,
) -> S3Status {
    if !grant_count.is_null() {
        // SAFETY: the caller's writable count.
        unsafe { *grant_count = 0 };
    }
    FACE.number(FACE.unsupported)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_create_request_context(out: *mut *mut RequestContext) -> S3Status {
    // SAFETY: the caller's return pointer, null or writable.
    if unsafe { context::create(out) } { 0 } else { FACE.number("InternalError") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_destroy_request_context(ctx: *mut RequestContext) {
    // SAFETY: a context from S3_create_request_context, or null.
    unsafe { context::destroy(ctx) }
}

#[unsafe(no_mangle)]
pub extern "C" fn S3_runall_request_context(_ctx: *mut RequestContext) -> S3Status {
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_runonce_request_context(_ctx: *mut RequestContext, remaining: *mut c_int) -> S3Status {
    // SAFETY: the caller's return pointer, null or writable.
    unsafe { context::run_once(remaining) };
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_request_context_fdsets(
    _ctx: *mut RequestContext,
    read: *mut c_void,
    write: *mut c_void,
    except: *mut c_void,
    max_fd: *mut c_int,
) -> S3Status {
    // SAFETY: the caller's fd_sets and return pointer, each null or writable.
    unsafe { context::fdsets([read, write, except], max_fd) };
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn S3_get_request_context_timeout(_ctx: *mut RequestContext) -> i64 {
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
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::create_bucket(&FACE, host, bucket, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_delete_bucket(
    _protocol: c_int,
    _uri_style: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::delete_bucket(&FACE, host, bucket, handler, data) }
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
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::test_bucket(&FACE, host, bucket, location_size, location, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_service(
    _protocol: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    host: *const c_char,
    _context: *mut RequestContext,
    handler: *const S3ListServiceHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::list_service(&FACE, host, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_bucket(
    ctx: *const BucketContext,
    prefix: *const c_char,
    marker: *const c_char,
    delimiter: *const c_char,
    max_keys: c_int,
    _context: *mut RequestContext,
    handler: *const S3ListBucketHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::list_bucket(&FACE, ctx, prefix, marker, delimiter, max_keys, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_put_object(
    ctx: *const BucketContext,
    key: *const c_char,
    content_length: u64,
    props: *const PutProperties,
    _context: *mut RequestContext,
    handler: *const S3PutObjectHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::put_object(&FACE, ctx, key, content_length, props, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_object(
    ctx: *const BucketContext,
    key: *const c_char,
    conditions: *const S3GetConditions,
    start_byte: u64,
    byte_count: u64,
    _context: *mut RequestContext,
    handler: *const S3GetObjectHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::get_object(&FACE, ctx, key, conditions, start_byte, byte_count, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_head_object(
    ctx: *const BucketContext,
    key: *const c_char,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::head_object(&FACE, ctx, key, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_delete_object(
    ctx: *const BucketContext,
    key: *const c_char,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::delete_object(&FACE, ctx, key, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_copy_object(
    ctx: *const BucketContext,
    key: *const c_char,
    destination_bucket: *const c_char,
    destination_key: *const c_char,
    props: *const PutProperties,
    last_modified: *mut i64,
    etag_size: c_int,
    etag: *mut c_char,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let out = CopyReturn { last_modified, etag_size, etag };
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe {
        objects::copy_object(&FACE, ctx, key, destination_bucket, destination_key, None, props, out, handler, data)
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_acl(
    _ctx: *const BucketContext,
    _key: *const c_char,
    _owner_id: *mut c_char,
    _owner_name: *mut c_char,
    _grant_count: *mut c_int,
    _grants: *mut c_void,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "GetAcl") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_acl(
    _ctx: *const BucketContext,
    _key: *const c_char,
    _owner_id: *const c_char,
    _owner_name: *const c_char,
    _grant_count: c_int,
    _grants: *const c_void,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "SetAcl") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_server_access_logging(
    _ctx: *const BucketContext,
    _target_bucket: *mut c_char,
    _target_prefix: *mut c_char,
    _grant_count: *mut c_int,
    _grants: *mut c_void,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "GetServerAccessLogging") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_server_access_logging(
    _ctx: *const BucketContext,
    _target_bucket: *const c_char,
    _target_prefix: *const c_char,
    _grant_count: c_int,
    _grants: *const c_void,
    _context: *mut RequestContext,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "SetServerAccessLogging") }
}

/// Query-string authentication makes no sense without a network; always fails.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_generate_authenticated_query_string(
    buffer: *mut c_char,
    _ctx: *const BucketContext,
    _key: *const c_char,
    _expires: i64,
    _resource: *const c_char,
) -> S3Status {
    if !buffer.is_null() {
        // SAFETY: libs3's contract: the buffer holds S3_MAX_AUTHENTICATED_QUERY_STRING_SIZE bytes.
        unsafe { *buffer = 0 };
    }
    FACE.number("ErrorNotImplemented")
}
