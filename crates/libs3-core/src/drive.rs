//! Driving a caller's callbacks the way libs3 does: the properties callback, then the data or
//! listing callbacks, then exactly one complete callback with a status and error details. Also
//! what every entry point needs around that: a boundary no panic crosses, the strings handed
//! to callbacks kept alive after the call returns (IOR keeps the error message and the next
//! marker of a listing, and reads them after the call), and reading the caller's C strings.

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use isthmus_store::{ObjectInfo, ObjectMeta, PutRequest};

use crate::abi::{
    PutDataCallback, PutProperties, S3ErrorDetails, S3NameValue, S3ResponseHandler, S3ResponseProperties,
};
use crate::face::{Face, Failure};

thread_local! {
    /// Strings handed to callbacks: those of the call running now (and the calls it runs from
    /// its callbacks), and those of the previous call on this thread, which stay valid until the
    /// next call after it ends.
    static KEPT: RefCell<(Vec<CString>, Vec<CString>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// How deep this thread is in calls of this library (a callback may call it again).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Keeps `text` alive until the call after the current one ends; returns its C pointer.
pub fn keep(text: &str) -> *const c_char {
    let text = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // The pointer is to the CString's heap buffer, which does not move when the CString does.
    let ptr = text.as_ptr();
    KEPT.with(|kept| kept.borrow_mut().0.push(text));
    ptr
}

/// Runs one entry point: no panic crosses into the caller (it becomes `fallback`), and the
/// strings kept by the call before the previous one are freed when a new outermost call starts.
pub fn boundary<T>(fallback: T, call: impl FnOnce() -> T) -> T {
    let depth = DEPTH.with(|d| d.replace(d.get() + 1));
    if depth == 0 {
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            let current = std::mem::take(&mut kept.0);
            kept.1 = current;
        });
    }
    let result = catch_unwind(AssertUnwindSafe(call)).unwrap_or(fallback);
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    result
}

/// Runs the engine part of a call (a panic in it becomes a failure), then reports the outcome
/// through the handler's complete callback.
///
/// # Safety
/// `handler` is null or points to a valid handler whose callbacks may be called with `data`.
pub unsafe fn finish(
    face: &Face,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
    call: impl FnOnce() -> Result<(), Failure>,
) {
    let result = isthmus_session::door::guard(call);
    // SAFETY: per this function's contract.
    unsafe { complete(face, handler, data, result) };
}

/// A whole entry point: `finish` inside `boundary`.
///
/// # Safety
/// As `finish`.
pub unsafe fn serve(
    face: &Face,
    handler: *const S3ResponseHandler,
    data: *mut c_void,
    call: impl FnOnce() -> Result<(), Failure>,
) {
    // SAFETY: per this function's contract.
    boundary((), || unsafe { finish(face, handler, data, call) })
}

/// Reports the end of a request through the handler's complete callback (no callback, no
/// report). The error details live until the next call after this one ends.
///
/// # Safety
/// `handler` is null or points to a valid handler whose callbacks may be called with `data`.
pub unsafe fn complete(face: &Face, handler: *const S3ResponseHandler, data: *mut c_void, result: Result<(), Failure>) {
    // SAFETY: per this function's contract.
    let Some(done) = (unsafe { handler.as_ref() }).and_then(|h| h.complete) else { return };
    match result {
        // SAFETY: a caller's complete callback, called as libs3 calls it (no details on success).
        Ok(()) => unsafe { done(0, std::ptr::null(), data) },
        Err(failure) => {
            let details = S3ErrorDetails {
                message: keep(&failure.message),
                resource: std::ptr::null(),
                further_details: std::ptr::null(),
                extra_details_count: 0,
                extra_details: std::ptr::null_mut(),
            };
            // SAFETY: the details and the message they point to outlive the callback.
            unsafe { done(face.status_of(&failure.code), &details, data) };
        }
    }
}

/// The response handler at the start of a handler (every libs3 handler begins with one).
pub fn response_of<H>(handler: *const H) -> *const S3ResponseHandler {
    handler.cast()
}

/// Calls the properties callback with an object's description (`length` is the body's).
///
/// # Safety
/// `handler` is null or points to a valid handler whose callbacks may be called with `data`.
pub unsafe fn properties(
    handler: *const S3ResponseHandler,
    data: *mut c_void,
    info: &ObjectInfo,
    length: u64,
) -> Result<(), Failure> {
    // SAFETY: per this function's contract.
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
        uses_server_side_encryption: 0,
    };
    // SAFETY: the caller's callback; `props` and the strings it points to outlive the call.
    callback_result(unsafe { callback(&props, data) }, "the properties callback stopped the request")
}

/// A caller's callback result: 0 goes on, anything else stops the request with that status.
pub fn callback_result(code: c_int, why: &str) -> Result<(), Failure> {
    if code == 0 { Ok(()) } else { Err(Failure::caller(code, why)) }
}

/// Seconds since the Unix epoch, as libs3 reports times.
pub fn unix_seconds(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A caller's C string, if present and UTF-8.
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for `'a`.
pub unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    // SAFETY: per this function's contract.
    if p.is_null() { None } else { unsafe { CStr::from_ptr(p) }.to_str().ok() }
}

/// A required caller string (a key, an upload id), or `ErrorInvalidArgument` naming it.
///
/// # Safety
/// As `text`.
pub unsafe fn required<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: per this function's contract.
    unsafe { text(p) }.ok_or_else(|| Failure::new("ErrorInvalidArgument", format!("no {what} (or not UTF-8)")))
}

/// The engine's put request for libs3 put properties (none: defaults).
///
/// # Safety
/// `props` is null or points to valid put properties whose `metaData` holds `metaDataCount`
/// pairs.
pub unsafe fn put_request(props: *const PutProperties) -> PutRequest {
    // SAFETY: per this function's contract.
    let Some(p) = (unsafe { props.as_ref() }) else { return PutRequest::default() };
    let mut meta = ObjectMeta {
        // SAFETY: the property strings are null or valid C strings (this function's contract).
        content_type: unsafe { text(p.content_type) }.map(str::to_string),
        // SAFETY: the property strings are null or valid C strings (this function's contract).
        cache_control: unsafe { text(p.cache_control) }.map(str::to_string),
        // SAFETY: the property strings are null or valid C strings (this function's contract).
        content_encoding: unsafe { text(p.content_encoding) }.map(str::to_string),
        // SAFETY: the property strings are null or valid C strings (this function's contract).
        content_disposition: unsafe { text(p.content_disposition_filename) }
            .map(|f| format!("attachment; filename=\"{f}\"")),
        ..Default::default()
    };
    if !p.meta_data.is_null() {
        // A negative count is no metadata; libs3 itself sends at most S3_MAX_METADATA_COUNT.
        for i in 0..usize::try_from(p.meta_data_count).unwrap_or(0) {
            // SAFETY: `metaData` holds `metaDataCount` pairs (the contract).
            let pair = unsafe { &*p.meta_data.add(i) };
            // SAFETY: the pair's strings are null or valid C strings.
            if let (Some(k), Some(v)) = (unsafe { text(pair.name) }, unsafe { text(pair.value) }) {
                meta.user.insert(k.to_ascii_lowercase(), v.to_string());
            }
        }
    }
    PutRequest { meta, ..Default::default() }
}

/// Pulls exactly `length` bytes from a caller's put-data callback into `sink`, in chunks of
/// at most 1 MiB: a callback returning 0 before the end is an incomplete body, a negative
/// return aborts, and a callback handing more than it was asked for counts only what was asked.
///
/// # Safety
/// `source` is a caller's callback that may be called with `data`.
pub unsafe fn pull(
    length: u64,
    source: Option<PutDataCallback>,
    data: *mut c_void,
    mut sink: impl FnMut(&[u8]) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut buf = vec![0u8; (1 << 20).min(length.max(1) as usize)];
    let mut left = length;
    while left > 0 {
        let Some(read) = source else { return Err(Failure::new("ErrorIncompleteBody", "no data callback")) };
        let want = left.min(buf.len() as u64) as c_int;
        // SAFETY: the buffer holds at least `want` writable bytes; the callback may be called.
        let n = unsafe { read(want, buf.as_mut_ptr().cast(), data) };
        if n < 0 {
            return Err(Failure::new("AbortedByCallback", "the data callback aborted the upload"));
        }
        if n == 0 {
            return Err(Failure::new("ErrorIncompleteBody", "the data callback ended before Content-Length"));
        }
        let n = (n as u64).min(want as u64) as usize;
        sink(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Copies a quoted ETag into a caller's buffer of `size` bytes (truncated, always terminated).
///
/// # Safety
/// `out` is null or writable for `size` bytes.
pub unsafe fn etag_out(etag: &str, size: c_int, out: *mut c_char) {
    if out.is_null() || size <= 0 {
        return;
    }
    let quoted = format!("\"{etag}\"");
    let n = quoted.len().min(size as usize - 1);
    // SAFETY: `out` is writable for `size` > n bytes (the contract).
    unsafe {
        std::ptr::copy_nonoverlapping(quoted.as_ptr().cast(), out, n);
        *out.add(n) = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_strings_outlive_the_next_call_and_no_more() {
        let first = boundary(std::ptr::null(), || keep("first"));
        let inner = boundary(std::ptr::null(), || boundary(std::ptr::null(), || keep("inner")));
        // SAFETY: both are still kept: `first` until the call after `inner`'s ends.
        unsafe {
            assert_eq!(CStr::from_ptr(first), c"first");
            assert_eq!(CStr::from_ptr(inner), c"inner");
        }
        boundary((), || {});
        KEPT.with(|kept| assert_eq!(kept.borrow().1.len(), 1, "only the previous call's strings are kept"));
        assert_eq!(boundary(5, || panic!("no unwinding out")), 5);
    }

    #[test]
    fn pull_takes_exactly_the_length_asked() {
        unsafe extern "C" fn fill(size: c_int, buf: *mut c_char, _data: *mut c_void) -> c_int {
            // SAFETY: `pull` hands a buffer of `size` writable bytes.
            unsafe { std::ptr::write_bytes(buf, b'x', size as usize) };
            size + 10 // more than asked: only `size` counts
        }
        let mut got = 0;
        let count = |b: &[u8]| {
            got += b.len();
            Ok(())
        };
        // SAFETY: `fill` may be called with a null data pointer.
        unsafe { pull(3 << 20, Some(fill), std::ptr::null_mut(), count) }.unwrap();
        assert_eq!(got, 3 << 20);
        // SAFETY: as above.
        assert!(unsafe { pull(1, None, std::ptr::null_mut(), |_| Ok(())) }.is_err());
    }
}
