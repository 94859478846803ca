//! Zarr v3 arrays from C: `isthmus_array_*` creates, opens, reads and writes regions (offset,
//! count and optional stride per dimension; data as raw bytes in the machine's order) and
//! `isthmus_transfer_*` moves regions asynchronously with strong or session consistency. The
//! caller's buffer is bound when a transfer is created (as PDC does): a write's is read by
//! `isthmus_transfer_start` (copied for a session transfer, so it may be reused at once), a
//! read's is filled by `isthmus_transfer_wait`.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use isthmus_array::{
    ArrayError, ArraySpec, Consistency, Direction, Location, Region, RemoteEndpoint, Status, Transfer, TransferOptions,
    Transfers, ZarrArray,
};
use isthmus_session::door::guard;
use isthmus_store::RequestContext;

use isthmus_store::StoreError;

use crate::{IsthmusStatus, IsthmusStore, fail_with, set_error, text};

/// An open array (see `isthmus_array_create` / `isthmus_array_open`).
pub struct IsthmusArray {
    array: Arc<ZarrArray>,
}

/// A transfer session: a bounded buffer and a pool of chunk I/O threads.
pub struct IsthmusTransfers {
    session: Arc<Transfers>,
}

/// One region moving between a caller's buffer and an array.
pub struct IsthmusTransfer {
    session: Arc<Transfers>,
    transfer: Transfer,
    buffer: *mut u8,
    len: usize,
}

/// A failure of this module: its status and message become the thread's last error.
enum Failure {
    Array(ArrayError),
    Store(StoreError),
}

impl From<ArrayError> for Failure {
    fn from(err: ArrayError) -> Self {
        Self::Array(err)
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        Self::Store(err)
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::Store(StoreError::InvalidArgument(message.into()))
}

fn status_of(err: &ArrayError) -> (IsthmusStatus, &'static str) {
    match err {
        ArrayError::NotFound(_) => (IsthmusStatus::NoSuchKey, "NoSuchKey"),
        ArrayError::Exists(_) => (IsthmusStatus::AlreadyExists, "AlreadyExists"),
        ArrayError::Spec(_) | ArrayError::Region(_) => (IsthmusStatus::InvalidArgument, "InvalidArgument"),
        ArrayError::Transfer(_) => (IsthmusStatus::TransferRefused, "TransferRefused"),
        _ => (IsthmusStatus::IoError, "InternalError"),
    }
}

/// Runs an array call; a panic becomes an IoError status and never unwinds into C.
fn run(f: impl FnOnce() -> Result<(), Failure>) -> IsthmusStatus {
    match guard(f) {
        Ok(()) => IsthmusStatus::Ok,
        Err(Failure::Array(err)) => {
            let (status, code) = status_of(&err);
            set_error(code, &err.to_string());
            status
        }
        Err(Failure::Store(err)) => fail_with(&err),
    }
}

/// `ndim` values at `ptr`.
///
/// # Safety
/// `ptr` is NULL or points to `ndim` readable values.
unsafe fn dims<'a>(ptr: *const u64, ndim: u32, what: &str) -> Result<&'a [u64], Failure> {
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller provides `ndim` values (the function's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, ndim as usize) })
}

/// The region of `ndim` offsets, counts and strides (`stride` may be NULL: all 1).
///
/// # Safety
/// Each pointer is NULL or points to `ndim` readable values.
unsafe fn region(ndim: u32, offset: *const u64, count: *const u64, stride: *const u64) -> Result<Region, Failure> {
    // SAFETY: forwarded contract.
    let region = unsafe { Region::new(dims(offset, ndim, "offset")?.to_vec(), dims(count, ndim, "count")?.to_vec()) };
    if stride.is_null() {
        return Ok(region);
    }
    // SAFETY: forwarded contract.
    Ok(region.with_stride(unsafe { dims(stride, ndim, "stride")? }.to_vec()))
}

/// # Safety
/// `array` is NULL or a live handle.
unsafe fn array_handle<'a>(array: *const IsthmusArray) -> Result<&'a Arc<ZarrArray>, Failure> {
    // SAFETY: the caller passes a live handle or NULL.
    unsafe { array.as_ref() }.map(|a| &a.array).ok_or_else(|| invalid("array is NULL"))
}

/// # Safety
/// `out` is NULL or writable for one pointer.
unsafe fn give<T>(out: *mut *mut T, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(invalid("out is NULL"));
    }
    // SAFETY: checked for NULL; the caller provides the memory.
    unsafe { *out = Box::into_raw(Box::new(value)) };
    Ok(())
}

/// # Safety
/// `store` is a live handle; `bucket` and `prefix` NUL-terminated (prefix may be NULL).
unsafe fn engine(store: *const IsthmusStore, bucket: *const c_char) -> Result<Location, Failure> {
    // SAFETY: the caller passes a live handle or NULL.
    let store = unsafe { store.as_ref() }.ok_or_else(|| invalid("store is NULL"))?;
    Ok(Location::Engine {
        store: store.store.clone(),
        cx: RequestContext::process(),
        // SAFETY: forwarded contract.
        bucket: unsafe { text(bucket, "bucket") }?.to_string(),
        prefix: String::new(),
    })
}

/// Creates an array at `path` in `bucket`: `ndim` dimensions of `shape`, chunks of `chunks`,
/// data type `dtype` ("float32", "int64", "uint8"...), `codecs` in short forms ("zstd:3,crc32c",
/// "blosc:lz4:5:shuffle", "" or NULL for none); `inner_chunks` (may be NULL) makes each chunk a
/// shard of inner chunks; `attributes_json` (may be NULL) is a JSON object.
///
/// # Safety
/// `store` is a live handle; strings are NUL-terminated; `shape` and `chunks` (and
/// `inner_chunks` unless NULL) point to `ndim` values; `out` is writable for one pointer.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isthmus_array_create(
    store: *const IsthmusStore,
    bucket: *const c_char,
    path: *const c_char,
    ndim: u32,
    shape: *const u64,
    chunks: *const u64,
    dtype: *const c_char,
    codecs: *const c_char,
    inner_chunks: *const u64,
    attributes_json: *const c_char,
    out: *mut *mut IsthmusArray,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let location = engine(store, bucket)?;
        let data_type = text(dtype, "dtype")?.parse()?;
        let mut spec =
            ArraySpec::new(dims(shape, ndim, "shape")?.to_vec(), data_type, dims(chunks, ndim, "chunks")?.to_vec());
        if !codecs.is_null() {
            spec.codecs = ArraySpec::parse_codecs(text(codecs, "codecs")?)?;
        }
        if !inner_chunks.is_null() {
            spec.inner_chunks = Some(dims(inner_chunks, ndim, "inner_chunks")?.to_vec());
        }
        if !attributes_json.is_null() {
            spec.attributes = serde_json::from_str(text(attributes_json, "attributes_json")?)
                .map_err(|e| invalid(format!("attributes_json: {e}")))?;
        }
        let array = ZarrArray::create(&location, text(path, "path")?, &spec)?;
        give(out, IsthmusArray { array: Arc::new(array) })
    })
}

/// Opens the array at `path` in `bucket`.
///
/// # Safety
/// `store` is a live handle; strings are NUL-terminated; `out` is writable for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_open(
    store: *const IsthmusStore,
    bucket: *const c_char,
    path: *const c_char,
    out: *mut *mut IsthmusArray,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let array = ZarrArray::open(&engine(store, bucket)?, text(path, "path")?)?;
        give(out, IsthmusArray { array: Arc::new(array) })
    })
}

/// Opens the array at `path` in `bucket` of a remote S3 endpoint ("http://host:port"),
/// signing for region us-east-1 with the given keys.
///
/// # Safety
/// Strings are NUL-terminated; `out` is writable for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_open_s3(
    endpoint: *const c_char,
    bucket: *const c_char,
    access_key: *const c_char,
    secret_key: *const c_char,
    path: *const c_char,
    out: *mut *mut IsthmusArray,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let endpoint = RemoteEndpoint {
            endpoint: text(endpoint, "endpoint")?.to_string(),
            bucket: text(bucket, "bucket")?.to_string(),
            access_key: text(access_key, "access_key")?.to_string(),
            secret_key: text(secret_key, "secret_key")?.to_string(),
            region: "us-east-1".into(),
            ca_bundle: None,
        };
        let array = ZarrArray::open(&Location::Remote { endpoint, prefix: String::new() }, text(path, "path")?)?;
        give(out, IsthmusArray { array: Arc::new(array) })
    })
}

/// The number of dimensions (0 for NULL).
///
/// # Safety
/// `array` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_ndim(array: *const IsthmusArray) -> u32 {
    // SAFETY: the caller passes a live handle or NULL.
    unsafe { array.as_ref() }.map_or(0, |a| a.array.shape().len() as u32)
}

/// Writes the shape (`isthmus_array_ndim` values) to `shape`.
///
/// # Safety
/// `array` is a live handle; `shape` is writable for `isthmus_array_ndim(array)` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_shape(array: *const IsthmusArray, shape: *mut u64) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let array = array_handle(array)?;
        if shape.is_null() {
            return Err(invalid("shape is NULL"));
        }
        std::ptr::copy_nonoverlapping(array.shape().as_ptr(), shape, array.shape().len());
        Ok(())
    })
}

/// The bytes of one element (0 for NULL).
///
/// # Safety
/// `array` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_element_size(array: *const IsthmusArray) -> usize {
    // SAFETY: the caller passes a live handle or NULL.
    unsafe { array.as_ref() }.map_or(0, |a| a.array.data_type().size())
}

/// Reads a region into `buffer` (`len` must be exactly the region's bytes). `stride` may be
/// NULL (every element).
///
/// # Safety
/// `array` is a live handle; `offset`, `count` (and `stride` unless NULL) point to ndim values;
/// `buffer` is writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_read(
    array: *const IsthmusArray,
    offset: *const u64,
    count: *const u64,
    stride: *const u64,
    buffer: *mut c_void,
    len: usize,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let array = array_handle(array)?;
        let region = region(array.shape().len() as u32, offset, count, stride)?;
        if buffer.is_null() && len > 0 {
            return Err(invalid("buffer is NULL"));
        }
        let out: &mut [u8] = if len == 0 { &mut [] } else { std::slice::from_raw_parts_mut(buffer.cast(), len) };
        Ok(array.read(&region, out)?)
    })
}

/// Writes a region from `data` (`len` must be exactly the region's bytes). `stride` may be NULL.
///
/// # Safety
/// As `isthmus_array_read`, with `data` readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_write(
    array: *const IsthmusArray,
    offset: *const u64,
    count: *const u64,
    stride: *const u64,
    data: *const c_void,
    len: usize,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let array = array_handle(array)?;
        let region = region(array.shape().len() as u32, offset, count, stride)?;
        if data.is_null() && len > 0 {
            return Err(invalid("data is NULL"));
        }
        let data: &[u8] = if len == 0 { &[] } else { std::slice::from_raw_parts(data.cast(), len) };
        Ok(array.write(&region, data)?)
    })
}

/// Closes an array handle (transfers created on it keep the array alive). NULL is ignored.
///
/// # Safety
/// `array` is NULL or a handle not yet closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_array_close(array: *mut IsthmusArray) {
    if !array.is_null() {
        // SAFETY: the handle came from Box::into_raw.
        drop(unsafe { Box::from_raw(array) });
    }
}

/// Starts a transfer session: at most `buffer_bytes` copied or read ahead at once (0: 256 MiB),
/// `threads` chunk I/O threads (0: twice the cores), `session` 1 for session consistency by
/// default, 0 for strong.
///
/// # Safety
/// `out` is writable for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfers_new(
    buffer_bytes: u64,
    threads: u32,
    session: i32,
    out: *mut *mut IsthmusTransfers,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let defaults = TransferOptions::default();
        let options = TransferOptions {
            buffer_bytes: if buffer_bytes == 0 { defaults.buffer_bytes } else { buffer_bytes },
            threads: if threads == 0 { defaults.threads } else { threads as usize },
            consistency: if session != 0 { Consistency::Session } else { Consistency::Strong },
        };
        give(out, IsthmusTransfers { session: Arc::new(Transfers::new(options)?) })
    })
}

/// Waits until every session write is visible, then frees the session. NULL is ignored.
///
/// # Safety
/// `transfers` is NULL or a handle not yet closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfers_close(transfers: *mut IsthmusTransfers) {
    if !transfers.is_null() {
        // SAFETY: the handle came from Box::into_raw.
        let transfers = unsafe { Box::from_raw(transfers) };
        let _ = guard(|| {
            transfers.session.flush();
            Ok::<(), StoreError>(())
        });
    }
}

/// Creates a transfer of a region of `array`: `write` 1 sends `buffer` to the array, 0 reads the
/// region into it; `consistency` 0 strong, 1 session, -1 the session's default. `buffer` (`len`
/// bytes, exactly the region's) must stay valid until `isthmus_transfer_start` returns (write)
/// or `isthmus_transfer_wait` returns (read).
///
/// # Safety
/// Handles are live; `offset`, `count` (and `stride` unless NULL) point to ndim values; `out` is
/// writable for one pointer; `buffer` as above.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn isthmus_transfer_create(
    transfers: *const IsthmusTransfers,
    array: *const IsthmusArray,
    write: i32,
    offset: *const u64,
    count: *const u64,
    stride: *const u64,
    buffer: *mut c_void,
    len: usize,
    consistency: i32,
    out: *mut *mut IsthmusTransfer,
) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let session = transfers.as_ref().ok_or_else(|| invalid("transfers is NULL"))?.session.clone();
        let array = array_handle(array)?;
        let region = region(array.shape().len() as u32, offset, count, stride)?;
        let direction = if write != 0 { Direction::Write } else { Direction::Read };
        let consistency = match consistency {
            0 => Consistency::Strong,
            1 => Consistency::Session,
            _ => session.options().consistency,
        };
        let transfer = session.create_with(array, region, direction, consistency)?;
        if transfer.bytes() as usize != len || (buffer.is_null() && len > 0) {
            return Err(invalid(format!("the buffer has {len} bytes, the region needs {}", transfer.bytes())));
        }
        give(out, IsthmusTransfer { session, transfer, buffer: buffer.cast(), len })
    })
}

/// The caller's buffer of a write, for `start`.
///
/// # Safety
/// The transfer's buffer is valid for `len` bytes (the create contract).
unsafe fn write_source<'a>(transfer: &IsthmusTransfer) -> Option<&'a [u8]> {
    match transfer.transfer.direction() {
        Direction::Read => None,
        Direction::Write if transfer.len == 0 => Some(&[]),
        // SAFETY: the create contract: valid for `len` bytes until start returns.
        Direction::Write => Some(unsafe { std::slice::from_raw_parts(transfer.buffer, transfer.len) }),
    }
}

/// # Safety
/// `list` points to `n` live transfer handles of one session.
unsafe fn transfer_list<'a>(list: *const *mut IsthmusTransfer, n: usize) -> Result<Vec<&'a IsthmusTransfer>, Failure> {
    if list.is_null() && n > 0 {
        return Err(invalid("transfers is NULL"));
    }
    // SAFETY: `list` points to `n` handles (the contract; checked for NULL).
    let handles = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(list, n) } };
    let transfers: Vec<&IsthmusTransfer> = handles
        .iter()
        // SAFETY: each handle is live or NULL (the contract).
        .map(|t| unsafe { t.as_ref() }.ok_or_else(|| invalid("a transfer is NULL")))
        .collect::<Result<_, _>>()?;
    if transfers.windows(2).any(|w| !Arc::ptr_eq(&w[0].session, &w[1].session)) {
        return Err(invalid("a batch must belong to one transfer session"));
    }
    Ok(transfers)
}

/// Starts `n` transfers as one batch: their pieces are merged chunk by chunk and issued in chunk
/// order. Strong transfers have finished when this returns; session ones run in the background.
///
/// # Safety
/// `list` points to `n` live transfer handles of one session, whose buffers are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfer_start_all(list: *const *mut IsthmusTransfer, n: usize) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let transfers = transfer_list(list, n)?;
        let Some(first) = transfers.first() else { return Ok(()) };
        let batch: Vec<(&Transfer, Option<&[u8]>)> = transfers.iter().map(|t| (&t.transfer, write_source(t))).collect();
        Ok(first.session.start_all(&batch)?)
    })
}

/// Starts one transfer (a batch of one).
///
/// # Safety
/// `transfer` is a live handle whose buffer is valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfer_start(transfer: *mut IsthmusTransfer) -> IsthmusStatus {
    // SAFETY: a list of one live handle.
    unsafe { isthmus_transfer_start_all(&transfer, 1) }
}

/// 0 created, 1 pending, 2 done, 3 failed (the reason comes with `isthmus_transfer_wait`), -1 NULL.
///
/// # Safety
/// `transfer` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfer_status(transfer: *const IsthmusTransfer) -> i32 {
    // SAFETY: the caller passes a live handle or NULL.
    match unsafe { transfer.as_ref() } {
        None => -1,
        Some(t) => match t.session.status(&t.transfer) {
            Status::Created => 0,
            Status::Pending => 1,
            Status::Done => 2,
            Status::Failed(_) => 3,
        },
    }
}

/// Waits for `n` transfers; reads fill their buffers. Every transfer is waited for; the first
/// failure is returned.
///
/// # Safety
/// `list` points to `n` live transfer handles of one session, whose buffers are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfer_wait_all(list: *const *mut IsthmusTransfer, n: usize) -> IsthmusStatus {
    // SAFETY: every pointer is as this function's contract (its # Safety section) states.
    run(|| unsafe {
        let transfers = transfer_list(list, n)?;
        let mut first_error = None;
        for t in transfers {
            let out = match t.transfer.direction() {
                Direction::Read if t.len > 0 => Some(std::slice::from_raw_parts_mut(t.buffer, t.len)),
                _ => None,
            };
            if let Err(err) = t.session.wait(&t.transfer, out) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), |err| Err(err.into()))
    })
}

/// Waits for one transfer.
///
/// # Safety
/// `transfer` is a live handle whose buffer is valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfer_wait(transfer: *mut IsthmusTransfer) -> IsthmusStatus {
    // SAFETY: a list of one live handle.
    unsafe { isthmus_transfer_wait_all(&transfer, 1) }
}

/// Frees a transfer (waiting for it first if it is in flight). NULL is ignored.
///
/// # Safety
/// `transfer` is NULL or a handle not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isthmus_transfer_free(transfer: *mut IsthmusTransfer) {
    if transfer.is_null() {
        return;
    }
    // SAFETY: the handle came from Box::into_raw.
    let transfer = unsafe { Box::from_raw(transfer) };
    if transfer.session.status(&transfer.transfer) == Status::Pending {
        let _ = guard(|| {
            let _ = transfer.session.wait(&transfer.transfer, None);
            Ok::<(), StoreError>(())
        });
    }
}
