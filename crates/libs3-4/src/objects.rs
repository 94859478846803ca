//! libs3 4.1's bucket and object calls: 4.1's parameter lists (a security token, a signing
//! region and a timeout that are not used) over the shared calls. A 4.1 bucket context or put
//! properties starts with the 2.0 one, which is all the shared calls read.

use std::ffi::{c_char, c_int, c_void};

use isthmus_libs3_core::abi::{
    BucketContext, BucketContext4, PutProperties, PutProperties4, S3GetConditions, S3GetObjectHandler,
    S3ListBucketHandler, S3ListServiceHandler, S3PutObjectHandler, S3ResponseHandler,
};
use isthmus_libs3_core::context::RequestContext;
use isthmus_libs3_core::objects::{self, CopyReturn, PartTarget};

use crate::FACE;

/// The 2.0 prefix of a 4.1 bucket context (a 4.1 context begins with it; null stays null).
pub fn base(ctx: *const BucketContext4) -> *const BucketContext {
    ctx.cast()
}

/// The 2.0 prefix of 4.1 put properties (they begin with it; null stays null).
pub fn base_props(props: *const PutProperties4) -> *const PutProperties {
    props.cast()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_service(
    _protocol: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    _security_token: *const c_char,
    host: *const c_char,
    _auth_region: *const c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ListServiceHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::list_service(&FACE, host, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_test_bucket(
    _protocol: c_int,
    _uri_style: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    _security_token: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    _auth_region: *const c_char,
    location_size: c_int,
    location: *mut c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::test_bucket(&FACE, host, bucket, location_size, location, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_create_bucket(
    _protocol: c_int,
    _access_key: *const c_char,
    _secret_key: *const c_char,
    _security_token: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    _auth_region: *const c_char,
    _canned_acl: c_int,
    _location: *const c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
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
    _security_token: *const c_char,
    host: *const c_char,
    bucket: *const c_char,
    _auth_region: *const c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::delete_bucket(&FACE, host, bucket, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_bucket(
    ctx: *const BucketContext4,
    prefix: *const c_char,
    marker: *const c_char,
    delimiter: *const c_char,
    max_keys: c_int,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ListBucketHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::list_bucket(&FACE, base(ctx), prefix, marker, delimiter, max_keys, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_put_object(
    ctx: *const BucketContext4,
    key: *const c_char,
    content_length: u64,
    props: *const PutProperties4,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3PutObjectHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::put_object(&FACE, base(ctx), key, content_length, base_props(props), handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_copy_object(
    ctx: *const BucketContext4,
    key: *const c_char,
    destination_bucket: *const c_char,
    destination_key: *const c_char,
    props: *const PutProperties4,
    last_modified: *mut i64,
    etag_size: c_int,
    etag: *mut c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let out = CopyReturn { last_modified, etag_size, etag };
    let (ctx, props) = (base(ctx), base_props(props));
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe {
        objects::copy_object(&FACE, ctx, key, destination_bucket, destination_key, None, props, out, handler, data)
    }
}

/// A part number above 0 copies `count` bytes of the source from `start` (0: all of it) into
/// that part of the upload; otherwise a whole-object copy, as S3_copy_object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_copy_object_range(
    ctx: *const BucketContext4,
    key: *const c_char,
    destination_bucket: *const c_char,
    destination_key: *const c_char,
    part_number: c_int,
    upload_id: *const c_char,
    start: std::ffi::c_ulong,
    count: std::ffi::c_ulong,
    props: *const PutProperties4,
    last_modified: *mut i64,
    etag_size: c_int,
    etag: *mut c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    let out = CopyReturn { last_modified, etag_size, etag };
    let (ctx, props) = (base(ctx), base_props(props));
    // SAFETY: the caller's upload id, null or a valid C string.
    let upload_id = unsafe { isthmus_libs3_core::drive::text(upload_id) };
    let part = match (u32::try_from(part_number), upload_id) {
        (Ok(part_number @ 1..), Some(upload_id)) => Some(PartTarget { part_number, upload_id, first: start, count }),
        _ => None,
    };
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe {
        objects::copy_object(&FACE, ctx, key, destination_bucket, destination_key, part, props, out, handler, data)
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_object(
    ctx: *const BucketContext4,
    key: *const c_char,
    conditions: *const S3GetConditions,
    start_byte: u64,
    byte_count: u64,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3GetObjectHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::get_object(&FACE, base(ctx), key, conditions, start_byte, byte_count, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_head_object(
    ctx: *const BucketContext4,
    key: *const c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::head_object(&FACE, base(ctx), key, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_delete_object(
    ctx: *const BucketContext4,
    key: *const c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { objects::delete_object(&FACE, base(ctx), key, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_acl(
    _ctx: *const BucketContext4,
    _key: *const c_char,
    _owner_id: *mut c_char,
    _owner_name: *mut c_char,
    grant_count: *mut c_int,
    _grants: *mut c_void,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    if !grant_count.is_null() {
        // SAFETY: the caller's writable count.
        unsafe { *grant_count = 0 };
    }
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "GetAcl") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_acl(
    _ctx: *const BucketContext4,
    _key: *const c_char,
    _owner_id: *const c_char,
    _owner_name: *const c_char,
    _grant_count: c_int,
    _grants: *const c_void,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "SetAcl") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_lifecycle(
    _ctx: *const BucketContext4,
    xml_return: *mut c_char,
    xml_size: c_int,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    if !xml_return.is_null() && xml_size > 0 {
        // SAFETY: the caller's buffer, writable for `xml_size` > 0 bytes.
        unsafe { *xml_return = 0 };
    }
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "GetBucketLifecycle") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_lifecycle(
    _ctx: *const BucketContext4,
    _xml: *const c_char,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "PutBucketLifecycle") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_get_server_access_logging(
    _ctx: *const BucketContext4,
    _target_bucket: *mut c_char,
    _target_prefix: *mut c_char,
    grant_count: *mut c_int,
    _grants: *mut c_void,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    if !grant_count.is_null() {
        // SAFETY: the caller's writable count.
        unsafe { *grant_count = 0 };
    }
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "GetServerAccessLogging") }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_set_server_access_logging(
    _ctx: *const BucketContext4,
    _target_bucket: *const c_char,
    _target_prefix: *const c_char,
    _grant_count: c_int,
    _grants: *const c_void,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's handler, null or valid.
    unsafe { objects::unsupported(&FACE, handler, data, "SetServerAccessLogging") }
}
