//! libisthmus: the engine's S3 semantics (buckets, objects with ETags, ranged reads, ordered
//! listing, multipart uploads, copies) called in-process from C, on the same directory a
//! running gateway serves. Every function returns an `IsthmusStatus`; the message of the last
//! failure on the calling thread is `isthmus_last_error()`. The header `include/isthmus.h` is
//! generated from this file by cbindgen.

mod arrays;

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::io::Read;

use isthmus_posix::StoreOptions;
use isthmus_session::door::{guard, range_of, stream_out};
use isthmus_store::{
    CompletedPart, CopyRequest, Durability, GetRequest, ListPage, ListRequest, ObjectInfo, ObjectMeta, PartRequest,
    PutRequest, RequestContext, Store, StoreError, StoreExt,
};

/// The context of this library's calls: the host process acting for itself.
fn cx() -> RequestContext {
    RequestContext::process()
}

/// What a call did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsthmusStatus {
    Ok = 0,
    /// A listing has no more entries.
    End = 1,
    NoSuchBucket = 2,
    NoSuchKey = 3,
    BucketAlreadyExists = 4,
    BucketNotEmpty = 5,
    InvalidArgument = 6,
    PreconditionFailed = 7,
    InvalidRange = 8,
    NoSuchUpload = 9,
    InvalidPart = 10,
    /// A key needs a directory where a file is, or names a directory holding objects.
    Conflict = 11,
    InsufficientStorage = 12,
    AccessDenied = 13,
    /// The caller's buffer is smaller than the object; `out_len` says how much is needed.
    BufferTooSmall = 14,
    /// A callback asked to stop.
    Aborted = 15,
    IoError = 16,
    /// An array or group already exists where one was to be created.
    AlreadyExists = 17,
    /// A transfer was refused: it overlaps one in flight where one writes, or was not started.
    TransferRefused = 18,
}

/// A data root opened by `isthmus_open` (or a gateway's local socket).
pub struct IsthmusStore {
    store: std::sync::Arc<dyn Store>,
}

/// Size, modification time and ETag of an object.
#[repr(C)]
pub struct IsthmusObjectInfo {
    pub size: u64,
    /// Seconds since the Unix epoch.
    pub mtime: i64,
    /// The ETag without quotes, NUL-terminated (multipart ETags end in "-N").
    pub etag: [c_char; 48],
}

/// One listing entry; `key` stays valid until the next call on the same listing.
#[repr(C)]
pub struct IsthmusListEntry {
    pub key: *const c_char,
    pub size: u64,
    pub mtime: i64,
    pub etag: [c_char; 48],
    /// 1 for a common prefix (delimiter roll-up), 0 for an object.
    pub is_prefix: i32,
}

/// An ordered listing in progress (see `isthmus_list_open`).
pub struct IsthmusList {
    store: *const IsthmusStore,
    bucket: String,
    request: ListRequest,
    page: ListPage,
    /// Entries of the current page in key order: (key, object or prefix).
    entries: Vec<(String, Option<ObjectInfo>)>,
    position: usize,
    current: CString,
    done: bool,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static LAST_CODE: RefCell<CString> = RefCell::new(CString::default());
}

fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', " ")).unwrap_or_default()
}

fn set_error(code: &str, message: &str) {
    LAST_ERROR.with(|e| *e.borrow_mut() = c_text(message));
    LAST_CODE.with(|e| *e.borrow_mut() = c_text(code));
}

/// A failure the door itself finds (a NULL pointer, a small buffer): its code is the status name.
fn fail(status: IsthmusStatus, message: &str) -> IsthmusStatus {
    set_error(status_name(status).to_str().unwrap_or_default(), message);
    status
}

/// An engine error: its S3 code and message become the thread's last error.
fn fail_with(err: &StoreError) -> IsthmusStatus {
    set_error(err.s3_code(), &err.to_string());
    status_of(err)
}

/// The status of an engine error, from its S3 code (`StoreError::s3_code`, the one mapping
/// every door shares: the HTTP gateway answers it, Python raises it, libs3 names it).
fn status_of(err: &StoreError) -> IsthmusStatus {
    match err.s3_code() {
        "NoSuchBucket" => IsthmusStatus::NoSuchBucket,
        "NoSuchKey" => IsthmusStatus::NoSuchKey,
        "BucketAlreadyExists" | "BucketAlreadyOwnedByYou" => IsthmusStatus::BucketAlreadyExists,
        "BucketNotEmpty" => IsthmusStatus::BucketNotEmpty,
        "PreconditionFailed" | "NotModified" => IsthmusStatus::PreconditionFailed,
        "InvalidRange" | "InvalidPartNumber" => IsthmusStatus::InvalidRange,
        "NoSuchUpload" => IsthmusStatus::NoSuchUpload,
        "InvalidPart" | "InvalidPartOrder" | "EntityTooSmall" => IsthmusStatus::InvalidPart,
        "ParentIsObject" | "ObjectIsDirectory" => IsthmusStatus::Conflict,
        "InsufficientStorage" => IsthmusStatus::InsufficientStorage,
        "AccessDenied" => IsthmusStatus::AccessDenied,
        "InternalError" => IsthmusStatus::IoError,
        _ => IsthmusStatus::InvalidArgument,
    }
}

/// Runs an engine call, turning its error into a status and the thread's last error. A panic
/// becomes an IoError status: it never unwinds into the host program.
fn run(f: impl FnOnce() -> Result<(), StoreError>) -> IsthmusStatus {
    match guard(f) {
        Ok(()) => IsthmusStatus::Ok,
        Err(err) => fail_with(&err),
    }
}

/// A borrowed C string as UTF-8, or an InvalidArgument error naming the parameter.
///
/// # Safety
/// `ptr` is NULL or a valid NUL-terminated string.
unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, StoreError> {
    if ptr.is_null() {
        return Err(StoreError::InvalidArgument(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string (the function's contract).
    unsafe { CStr::from_ptr(ptr) }.to_str().map_err(|_| StoreError::InvalidArgument(format!("{what} is not UTF-8")))
}

/// # Safety
/// `ptr` is NULL or a valid NUL-terminated string.
unsafe fn optional_text<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>, StoreError> {
    if ptr.is_null() { Ok(None) } else { unsafe { text(ptr, what) }.map(Some) }
}

/// The `len` bytes at `data`; NULL is refused unless `len` is 0.
///
/// # Safety
/// `data` is NULL or points to `len` readable bytes that stay unchanged during the call.
unsafe fn bytes_arg<'a>(data: *const u8, len: usize) -> Result<&'a [u8], StoreError> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(StoreError::InvalidArgument("data is NULL".into()));
    }
    // SAFETY: not NULL, and the caller provides `len` readable bytes (the function's contract).
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

fn fill_etag(dst: &mut [c_char; 48], etag: &str) {
    let bytes = etag.as_bytes();
    let n = bytes.len().min(dst.len() - 1);
    for (d, s) in dst.iter_mut().zip(&bytes[..n]) {
        *d = *s as c_char;
    }
    dst[n] = 0;
}

/// Writes `text` NUL-terminated into a caller's buffer of 48 bytes.
///
/// # Safety
/// `dst` is NULL or points to 48 writable bytes.
unsafe fn write_text48(dst: *mut c_char, text: &str) -> Result<(), StoreError> {
    // SAFETY: the caller provides 48 writable bytes (checked for NULL).
    match unsafe { dst.cast::<[c_char; 48]>().as_mut() } {
        Some(dst) => {
            fill_etag(dst, text);
            Ok(())
        }
        None => Err(StoreError::InvalidArgument("output buffer is NULL".into())),
    }
}

/// # Safety
/// `out` is NULL or points to writable memory for one `IsthmusObjectInfo`.
unsafe fn write_info(out: *mut IsthmusObjectInfo, info: &ObjectInfo) {
    // SAFETY: checked for NULL; the caller provides the memory.
    if let Some(out) = unsafe { out.as_mut() } {
        out.size = info.size;
        out.mtime = info.last_modified.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        fill_etag(&mut out.etag, &info.etag);
    }
}

/// # Safety
/// `store` is NULL or a handle from `isthmus_open` not yet closed.
unsafe fn handle<'a>(store: *const IsthmusStore) -> Result<&'a dyn Store, StoreError> {
    // SAFETY: the caller passes a live handle or NULL.
    unsafe { store.as_ref() }.map(|s| &*s.store).ok_or_else(|| StoreError::InvalidArgument("store is NULL".into()))
}

/// The message of the last failed call on this thread ("" if none). Valid until the next call.
#[unsafe(no_mangle)]
pub extern "C" fn isthmus_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The S3 error code of the last failed call on this thread ("NoSuchKey", "ParentIsObject",
/// ...: the code the HTTP gateway and the Python package report for the same failure; "" if
/// none). Valid until the next call.
#[unsafe(no_mangle)]
pub extern "C" fn isthmus_last_error_code() -> *const c_char {
    LAST_CODE.with(|e| e.borrow().as_ptr())
}

/// A short name for a status ("NoSuchKey", ...), the S3 code where there is one.
#[unsafe(no_mangle)]
pub extern "C" fn isthmus_status_name(status: IsthmusStatus) -> *const c_char {
    status_name(status).as_ptr()
}

fn status_name(status: IsthmusStatus) -> &'static CStr {
    match status {
        IsthmusStatus::Ok => c"Ok",
        IsthmusStatus::End => c"End",
        IsthmusStatus::NoSuchBucket => c"NoSuchBucket",
        IsthmusStatus::NoSuchKey => c"NoSuchKey",
        IsthmusStatus::BucketAlreadyExists => c"BucketAlreadyExists",
        IsthmusStatus::BucketNotEmpty => c"BucketNotEmpty",
        IsthmusStatus::InvalidArgument => c"InvalidArgument",
        IsthmusStatus::PreconditionFailed => c"PreconditionFailed",
        IsthmusStatus::InvalidRange => c"InvalidRange",
        IsthmusStatus::NoSuchUpload => c"NoSuchUpload",
        IsthmusStatus::InvalidPart => c"InvalidPart",
        IsthmusStatus::Conflict => c"Conflict",
        IsthmusStatus::InsufficientStorage => c"InsufficientStorage",
        IsthmusStatus::AccessDenied => c"AccessDenied",
        IsthmusStatus::BufferTooSmall => c"BufferTooSmall",
        IsthmusStatus::Aborted => c"Aborted",
        IsthmusStatus::IoError => c"InternalError",
        IsthmusStatus::AlreadyExists => c"AlreadyExists",
        IsthmusStatus::TransferRefused => c"TransferRefused",
    }
}

/// Opens (creating it if needed) a data root. `strict` = 1: writes are fsynced before they
/// return (as the gateway's default); 0: left to the file system. A `root` of the form
/// `unix:///run/isthmus.sock` connects to a gateway's local socket instead (`isthmus serve
/// --local-socket`): the same calls, served as the S3 user this process's uid maps to, with
/// that user's permissions (`strict` is then the gateway's setting).
///
/// # Safety
/// `root` is a NUL-terminated path; `out` points to writable memory for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_open(root: *const c_char, strict: i32, out: *mut *mut IsthmusStore) -> IsthmusStatus {
    run(|| {
        let root = unsafe { text(root, "root") }?;
        if out.is_null() {
            return Err(StoreError::InvalidArgument("out is NULL".into()));
        }
        let durability = if strict != 0 { Durability::Strict } else { Durability::Relaxed };
        let store = isthmus_session::stack::open(root, StoreOptions { durability, ..StoreOptions::default() })?;
        // SAFETY: checked for NULL above.
        unsafe { *out = Box::into_raw(Box::new(IsthmusStore { store })) };
        Ok(())
    })
}

/// Closes a handle from `isthmus_open`. NULL is ignored.
///
/// # Safety
/// `store` is NULL or a handle not yet closed, used by no other thread any more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_close(store: *mut IsthmusStore) {
    if !store.is_null() {
        // SAFETY: the handle came from Box::into_raw in isthmus_open.
        drop(unsafe { Box::from_raw(store) });
    }
}

/// # Safety
/// `store` is a live handle; `bucket` a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_create_bucket(store: *const IsthmusStore, bucket: *const c_char) -> IsthmusStatus {
    run(|| unsafe { handle(store)?.create_bucket(&cx(), text(bucket, "bucket")?, &Default::default()) })
}

/// # Safety
/// `store` is a live handle; `bucket` a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_delete_bucket(store: *const IsthmusStore, bucket: *const c_char) -> IsthmusStatus {
    run(|| unsafe { handle(store)?.delete_bucket(&cx(), text(bucket, "bucket")?) })
}

/// # Safety
/// `store` is a live handle; `bucket` a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_head_bucket(store: *const IsthmusStore, bucket: *const c_char) -> IsthmusStatus {
    run(|| unsafe { handle(store)?.head_bucket(&cx(), text(bucket, "bucket")?) })
}

/// Stores `len` bytes from `data` as an object (atomically: readers see the old or the new
/// object). `content_type` may be NULL. `info` (may be NULL) receives the new object's size,
/// mtime and ETag.
///
/// # Safety
/// `data` points to `len` readable bytes (or is NULL with `len` 0); strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_put(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    data: *const u8,
    len: usize,
    content_type: *const c_char,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    run(|| {
        let store = unsafe { handle(store) }?;
        let bytes = unsafe { bytes_arg(data, len) }?;
        let meta = ObjectMeta {
            content_type: unsafe { optional_text(content_type, "content_type") }?.map(str::to_string),
            ..Default::default()
        };
        let request = PutRequest { meta, ..Default::default() };
        let stored =
            store.put_bytes(&cx(), unsafe { text(bucket, "bucket") }?, unsafe { text(key, "key") }?, bytes, request)?;
        unsafe { write_info(info, &stored) };
        Ok(())
    })
}

/// Stores an object whose bytes come from `read`, streaming with bounded memory. `read` writes
/// up to `cap` bytes into `buf` and returns how many, 0 at the end, or a negative number to
/// abort. Nothing is visible if `read` aborts or any write fails.
///
/// # Safety
/// Strings are NUL-terminated; `read` is safe to call with `ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_put_stream(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    read: Option<extern "C" fn(ctx: *mut c_void, buf: *mut u8, cap: usize) -> isize>,
    ctx: *mut c_void,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    let Some(read) = read else { return fail(IsthmusStatus::InvalidArgument, "read callback is NULL") };
    let mut aborted = false;
    let status = run(|| {
        let store = unsafe { handle(store) }?;
        let mut writer = store.put_object(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            PutRequest::default(),
        )?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = read(ctx, buf.as_mut_ptr(), buf.len());
            if n < 0 {
                aborted = true;
                return Ok(());
            }
            if n == 0 {
                break;
            }
            writer.write_all(&buf[..(n as usize).min(buf.len())])?;
        }
        let stored = writer.commit()?;
        unsafe { write_info(info, &stored) };
        Ok(())
    });
    if aborted { fail(IsthmusStatus::Aborted, "the read callback aborted the upload") } else { status }
}

/// Reads an object, or `length` bytes of it from `offset` (`length` 0: to the end), into
/// `buf`. `out_len` receives the number of bytes read; if `cap` is too small nothing is copied,
/// the status is BufferTooSmall and `out_len` holds the size needed.
///
/// # Safety
/// `buf` points to `cap` writable bytes; `out_len` to one `size_t`; strings are NUL-terminated.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isthmus_get(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    offset: u64,
    length: u64,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    let mut too_small = false;
    let status = run(|| {
        let store = unsafe { handle(store) }?;
        let response = store.get_object(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            &range_request(offset, length)?,
        )?;
        let mut body = response.body;
        let needed = usize::try_from(body.remaining()).unwrap_or(usize::MAX);
        unsafe { write_info(info, &response.info) };
        if !out_len.is_null() {
            // SAFETY: checked for NULL; provided by the caller.
            unsafe { *out_len = needed };
        }
        if needed > cap {
            too_small = true;
            return Ok(());
        }
        if needed > 0 {
            // SAFETY: the caller provides `cap` >= `needed` writable bytes.
            let dst = unsafe { std::slice::from_raw_parts_mut(buf, needed) };
            body.read_exact(dst)?;
        }
        Ok(())
    });
    if too_small { fail(IsthmusStatus::BufferTooSmall, "the buffer is smaller than the object") } else { status }
}

/// The request for `length` bytes from `offset` (`length` 0: to the end).
fn range_request(offset: u64, length: u64) -> Result<GetRequest, StoreError> {
    Ok(GetRequest { range: range_of(offset, std::num::NonZeroU64::new(length))?, ..Default::default() })
}

/// Streams an object (or a range, as in `isthmus_get`) to `write` in chunks of up to 1 MiB;
/// `write` returns 0 to go on, non-zero to stop.
///
/// # Safety
/// Strings are NUL-terminated; `write` is safe to call with `ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_get_stream(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    offset: u64,
    length: u64,
    write: Option<extern "C" fn(ctx: *mut c_void, data: *const u8, len: usize) -> i32>,
    ctx: *mut c_void,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    let Some(write) = write else { return fail(IsthmusStatus::InvalidArgument, "write callback is NULL") };
    let mut aborted = false;
    let status = run(|| {
        let store = unsafe { handle(store) }?;
        let response = store.get_object(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            &range_request(offset, length)?,
        )?;
        unsafe { write_info(info, &response.info) };
        let mut body = response.body;
        aborted = !stream_out(&mut body, |chunk| write(ctx, chunk.as_ptr(), chunk.len()) == 0)?;
        Ok(())
    });
    if aborted { fail(IsthmusStatus::Aborted, "the write callback stopped the download") } else { status }
}

/// # Safety
/// `store` is a live handle; strings are NUL-terminated; `info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_head(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    run(|| {
        let store = unsafe { handle(store) }?;
        let found = store.head_object(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            &Default::default(),
        )?;
        unsafe { write_info(info, &found) };
        Ok(())
    })
}

/// Deleting a key that does not exist succeeds, as in S3.
///
/// # Safety
/// `store` is a live handle; strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_delete(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
) -> IsthmusStatus {
    run(|| unsafe {
        handle(store)?.delete_object(&cx(), text(bucket, "bucket")?, text(key, "key")?, &Default::default()).map(drop)
    })
}

/// Server-side copy (metadata kept), done by the file system where it can.
///
/// # Safety
/// `store` is a live handle; strings are NUL-terminated; `info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_copy(
    store: *const IsthmusStore,
    src_bucket: *const c_char,
    src_key: *const c_char,
    dst_bucket: *const c_char,
    dst_key: *const c_char,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    run(|| {
        let store = unsafe { handle(store) }?;
        let copied = unsafe {
            store.copy_object(
                &cx(),
                (text(src_bucket, "src_bucket")?, text(src_key, "src_key")?),
                (text(dst_bucket, "dst_bucket")?, text(dst_key, "dst_key")?),
                &CopyRequest::default(),
            )
        }?;
        unsafe { write_info(info, &copied) };
        Ok(())
    })
}

/// Starts an ordered listing of `bucket` (keys in UTF-8 byte order). `prefix` and `delimiter`
/// may be NULL. Returns NULL on failure (see `isthmus_last_error`).
///
/// # Safety
/// `store` is a live handle that outlives the listing; strings are NUL-terminated or NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_list_open(
    store: *const IsthmusStore,
    bucket: *const c_char,
    prefix: *const c_char,
    delimiter: *const c_char,
) -> *mut IsthmusList {
    let opened = (|| -> Result<IsthmusList, StoreError> {
        unsafe { handle(store) }?;
        let request = ListRequest {
            prefix: unsafe { optional_text(prefix, "prefix") }?.unwrap_or_default().to_string(),
            delimiter: unsafe { optional_text(delimiter, "delimiter") }?.filter(|d| !d.is_empty()).map(str::to_string),
            start_after: None,
            max_keys: 1000,
        };
        Ok(IsthmusList {
            store,
            bucket: unsafe { text(bucket, "bucket") }?.to_string(),
            request,
            page: ListPage::default(),
            entries: Vec::new(),
            position: 0,
            current: CString::default(),
            done: false,
        })
    })();
    match opened {
        Ok(list) => Box::into_raw(Box::new(list)),
        Err(err) => {
            fail_with(&err);
            std::ptr::null_mut()
        }
    }
}

/// The next entry: Ok with `entry` filled, End when the listing is complete, or an error.
///
/// # Safety
/// `list` comes from `isthmus_list_open` and is not closed; `entry` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_list_next(list: *mut IsthmusList, entry: *mut IsthmusListEntry) -> IsthmusStatus {
    // SAFETY: the caller passes a live listing and a writable entry.
    let (Some(list), Some(entry)) = (unsafe { list.as_mut() }, unsafe { entry.as_mut() }) else {
        return fail(IsthmusStatus::InvalidArgument, "list or entry is NULL");
    };
    if list.position >= list.entries.len() {
        if list.done {
            return IsthmusStatus::End;
        }
        let fetched = guard(|| -> Result<(), StoreError> {
            let store = unsafe { handle(list.store) }?;
            list.page = store.list_objects(&cx(), &list.bucket, &list.request)?;
            let mut entries: Vec<(String, Option<ObjectInfo>)> =
                std::mem::take(&mut list.page.objects).into_iter().map(|o| (o.key.clone(), Some(o))).collect();
            entries.extend(std::mem::take(&mut list.page.common_prefixes).into_iter().map(|p| (p, None)));
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            list.entries = entries;
            list.position = 0;
            list.done = !list.page.is_truncated;
            list.request.start_after = list.page.next_marker.take();
            Ok(())
        });
        if let Err(err) = fetched {
            return fail_with(&err);
        }
        if list.entries.is_empty() {
            return IsthmusStatus::End;
        }
    }
    let (key, info) = &list.entries[list.position];
    list.position += 1;
    list.current = CString::new(key.as_str()).unwrap_or_default();
    entry.key = list.current.as_ptr();
    match info {
        Some(info) => {
            entry.size = info.size;
            entry.mtime = info.last_modified.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
            fill_etag(&mut entry.etag, &info.etag);
            entry.is_prefix = 0;
        }
        None => {
            entry.size = 0;
            entry.mtime = 0;
            fill_etag(&mut entry.etag, "");
            entry.is_prefix = 1;
        }
    }
    IsthmusStatus::Ok
}

/// Ends a listing. NULL is ignored.
///
/// # Safety
/// `list` is NULL or from `isthmus_list_open`, not yet closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_list_close(list: *mut IsthmusList) {
    if !list.is_null() {
        // SAFETY: the listing came from Box::into_raw in isthmus_list_open.
        drop(unsafe { Box::from_raw(list) });
    }
}

/// Starts a multipart upload; `upload_id` (48 bytes) receives its id, NUL-terminated.
///
/// # Safety
/// Strings are NUL-terminated; `upload_id` points to 48 writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_multipart_create(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    upload_id: *mut c_char,
) -> IsthmusStatus {
    run(|| {
        let store = unsafe { handle(store) }?;
        let id = store.create_multipart_upload(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            PutRequest::default(),
        )?;
        unsafe { write_text48(upload_id, &id) }
    })
}

/// Uploads part `part_number` (1..10000) from a buffer; `etag` receives the part's ETag.
///
/// # Safety
/// `data` points to `len` readable bytes; strings are NUL-terminated; `etag` to 48 writable bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isthmus_multipart_put_part(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    upload_id: *const c_char,
    part_number: u32,
    data: *const u8,
    len: usize,
    etag: *mut c_char,
) -> IsthmusStatus {
    run(|| {
        let store = unsafe { handle(store) }?;
        let bytes = unsafe { bytes_arg(data, len) }?;
        let mut writer = store.upload_part(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            unsafe { text(upload_id, "upload_id") }?,
            &PartRequest { part_number, ..Default::default() },
        )?;
        writer.write_all(bytes)?;
        let part = writer.commit()?;
        unsafe { write_text48(etag, &part.etag) }
    })
}

/// Completes an upload from `count` parts in ascending order (numbers and ETags).
///
/// # Safety
/// `part_numbers` and `etags` point to `count` entries; strings are NUL-terminated.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isthmus_multipart_complete(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    upload_id: *const c_char,
    part_numbers: *const u32,
    etags: *const *const c_char,
    count: usize,
    info: *mut IsthmusObjectInfo,
) -> IsthmusStatus {
    run(|| {
        let store = unsafe { handle(store) }?;
        if count > 0 && (part_numbers.is_null() || etags.is_null()) {
            return Err(StoreError::InvalidArgument("part_numbers or etags is NULL".into()));
        }
        let mut parts = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: the caller provides `count` entries in each array.
            let (number, tag) = unsafe { (*part_numbers.add(i), *etags.add(i)) };
            parts.push(CompletedPart {
                part_number: number,
                etag: unsafe { text(tag, "etag") }?.to_string(),
                checksum: None,
            });
        }
        let done = store.complete_multipart_upload(
            &cx(),
            unsafe { text(bucket, "bucket") }?,
            unsafe { text(key, "key") }?,
            unsafe { text(upload_id, "upload_id") }?,
            &parts,
            PutRequest::default(),
        )?;
        unsafe { write_info(info, &done) };
        Ok(())
    })
}

/// # Safety
/// `store` is a live handle; strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_multipart_abort(
    store: *const IsthmusStore,
    bucket: *const c_char,
    key: *const c_char,
    upload_id: *const c_char,
) -> IsthmusStatus {
    run(|| unsafe {
        handle(store)?.abort_multipart_upload(
            &cx(),
            text(bucket, "bucket")?,
            text(key, "key")?,
            text(upload_id, "upload_id")?,
        )
    })
}
