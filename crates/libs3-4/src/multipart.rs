//! libs3 4.1's multipart calls over the shared ones (crates/libs3-core/src/multipart.rs):
//! initiate, upload a part, complete, abort, and list parts and uploads.

use std::ffi::{c_char, c_int, c_void};

use isthmus_libs3_core::abi::{
    BucketContext4, PutProperties4, S3AbortMultipartUploadHandler, S3ListMultipartUploadsHandler, S3ListPartsHandler,
    S3MultipartCommitHandler, S3MultipartInitialHandler, S3PutObjectHandler,
};
use isthmus_libs3_core::context::RequestContext;
use isthmus_libs3_core::multipart;

use crate::FACE;
use crate::objects::{base, base_props};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_initiate_multipart(
    ctx: *const BucketContext4,
    key: *const c_char,
    props: *const PutProperties4,
    handler: *const S3MultipartInitialHandler,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { multipart::initiate(&FACE, base(ctx), key, base_props(props), handler, data) }
}

/// The put properties of a part are not used (a part has no metadata of its own).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_upload_part(
    ctx: *const BucketContext4,
    key: *const c_char,
    _props: *const PutProperties4,
    handler: *const S3PutObjectHandler,
    seq: c_int,
    upload_id: *const c_char,
    part_length: c_int,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { multipart::upload_part(&FACE, base(ctx), key, handler, seq, upload_id, part_length, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_complete_multipart_upload(
    ctx: *const BucketContext4,
    key: *const c_char,
    handler: *const S3MultipartCommitHandler,
    upload_id: *const c_char,
    xml_length: c_int,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { multipart::complete_upload(&FACE, base(ctx), key, handler, upload_id, xml_length, data) }
}

/// The encoding type is not used (keys are given as they are).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_parts(
    ctx: *const BucketContext4,
    key: *const c_char,
    part_number_marker: *const c_char,
    upload_id: *const c_char,
    _encoding_type: *const c_char,
    max_parts: c_int,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ListPartsHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { multipart::list_parts(&FACE, base(ctx), key, part_number_marker, upload_id, max_parts, handler, data) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_abort_multipart_upload(
    ctx: *const BucketContext4,
    key: *const c_char,
    upload_id: *const c_char,
    _timeout_ms: c_int,
    handler: *const S3AbortMultipartUploadHandler,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe { multipart::abort(&FACE, base(ctx), key, upload_id, handler) }
}

/// The encoding type and the delimiter are not used (no common prefixes are reported).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_list_multipart_uploads(
    ctx: *const BucketContext4,
    prefix: *const c_char,
    key_marker: *const c_char,
    upload_id_marker: *const c_char,
    _encoding_type: *const c_char,
    _delimiter: *const c_char,
    max_uploads: c_int,
    _context: *mut RequestContext,
    _timeout_ms: c_int,
    handler: *const S3ListMultipartUploadsHandler,
    data: *mut c_void,
) {
    // SAFETY: the caller's arguments, as libs3 documents them.
    unsafe {
        multipart::list_uploads(&FACE, base(ctx), prefix, key_marker, upload_id_marker, max_uploads, handler, data)
    }
}
