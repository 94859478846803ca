//! A drop-in for libs3 4.1 (`libs3.so.4`), the libs3 HPC sites build IOR, mdtest and
//! md-workbench against: every function of its public header with 4.1's parameter lists, its
//! struct layouts and its status numbering (include/libs3.h here declares them for tools built
//! against this face). Host `isthmus` is served in-process from `ISTHMUS_ROOT`, `unix:PATH`
//! through a gateway's local socket; any other host is refused with NameLookupError (this
//! library speaks no HTTP: a site keeps the real libs3 for HTTP endpoints). Calls complete
//! before they return, with or without a request context; the security token, the signing
//! region and the timeout are not used. ACLs, logging, lifecycle and signed query strings are
//! answered with NotSupported. The calls are crates/libs3-core's, shared with the 2.0 face.
//! This file: the face itself, initialization, status names and request contexts.

#![allow(non_snake_case, clippy::missing_safety_doc)]

mod multipart;
mod objects;
mod status_names;

use std::ffi::{c_char, c_int, c_void};

use isthmus_libs3_core::abi::BucketContext4;
use isthmus_libs3_core::context::{self, RequestContext};
use isthmus_libs3_core::drive::{boundary, text};
use isthmus_libs3_core::{Face, S3Status, engine};

/// libs3 4.1's numbering, its NotSupported, HEAD failures by HTTP status (a HEAD answer has
/// no body to name the error), and 4.1's retryable statuses.
static FACE: Face = Face {
    names: &status_names::NAMES,
    unsupported: "NotSupported",
    head_by_http_status: true,
    retryable: &[
        "NameLookupError",
        "FailedToConnect",
        "ConnectionFailed",
        "ErrorInternalError",
        "ErrorOperationAborted",
        "ErrorRequestTimeout",
    ],
};

/// Records the default host (used when a call's host name is null). Every call answers OK:
/// there is nothing to initialize, so nothing to count either.
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
    boundary(1, || unsafe { isthmus_libs3_core::objects::validate_bucket_name(&FACE, name, uri_style) })
}

/// ACL XML is not parsed here: no grants, NotSupported.
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

/// The curl multi handle and the setup callback are not used: no curl here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_create_request_context_ex(
    out: *mut *mut RequestContext,
    _curl_multi: *mut c_void,
    _setup: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> S3Status>,
    _setup_data: *mut c_void,
) -> S3Status {
    // SAFETY: the caller's return pointer, null or writable.
    unsafe { S3_create_request_context(out) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_destroy_request_context(ctx: *mut RequestContext) {
    // SAFETY: a context from S3_create_request_context(_ex), or null.
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
pub extern "C" fn S3_process_request_context(_ctx: *mut RequestContext) -> S3Status {
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
pub extern "C" fn S3_set_request_context_verify_peer(_ctx: *mut RequestContext, _verify_peer: c_int) {}

/// A signed URL names an HTTP endpoint; the hosts this library serves have none, so the
/// buffer is left empty and the answer is NotSupported.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn S3_generate_authenticated_query_string(
    buffer: *mut c_char,
    _ctx: *const BucketContext4,
    _key: *const c_char,
    _expires: c_int,
    _resource: *const c_char,
    _http_method: *const c_char,
) -> S3Status {
    if !buffer.is_null() {
        // SAFETY: libs3's contract: the buffer holds S3_MAX_AUTHENTICATED_QUERY_STRING_SIZE bytes.
        unsafe { *buffer = 0 };
    }
    FACE.number(FACE.unsupported)
}
