//! Request contexts. libs3 runs requests added to a context from a curl multi handle; here
//! every call completes before it returns, so a context is only a token: calls given one run
//! at once, and running the context finds nothing left to do.

use std::ffi::{c_int, c_void};

/// What a request context is here: nothing but a distinct allocation the caller holds.
pub struct RequestContext {
    _verify_peer: bool,
}

/// S3_create_request_context(_ex): a new token in `*out` (the curl handle and setup callback
/// of the `_ex` form are not used). Returns whether one was made.
///
/// # Safety
/// `out` is null or writable.
pub unsafe fn create(out: *mut *mut RequestContext) -> bool {
    if out.is_null() {
        return false;
    }
    let context = Box::into_raw(Box::new(RequestContext { _verify_peer: true }));
    // SAFETY: `out` is writable (the contract).
    unsafe { *out = context };
    true
}

/// S3_destroy_request_context.
///
/// # Safety
/// `context` is null or came from `create` and was not destroyed before.
pub unsafe fn destroy(context: *mut RequestContext) {
    if !context.is_null() {
        // SAFETY: it came from `Box::into_raw` in `create` and is freed once (the contract).
        drop(unsafe { Box::from_raw(context) });
    }
}

/// S3_runonce_request_context: no request is ever left running.
///
/// # Safety
/// `remaining` is null or writable.
pub unsafe fn run_once(remaining: *mut c_int) {
    if !remaining.is_null() {
        // SAFETY: writable (the contract).
        unsafe { *remaining = 0 };
    }
}

/// S3_get_request_context_fdsets: no descriptor to wait on; the sets are cleared and the
/// highest descriptor is -1.
///
/// # Safety
/// Each set is null or a writable `fd_set`; `max_fd` is null or writable.
pub unsafe fn fdsets(sets: [*mut c_void; 3], max_fd: *mut c_int) {
    for set in sets {
        let set = set.cast::<libc::fd_set>();
        if !set.is_null() {
            // SAFETY: a writable fd_set (the contract).
            unsafe { libc::FD_ZERO(set) };
        }
    }
    if !max_fd.is_null() {
        // SAFETY: writable (the contract).
        unsafe { *max_fd = -1 };
    }
}
