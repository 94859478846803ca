//! The `isthmus._native` Python module: the engine in-process. Calls release the GIL while they
//! do I/O; object bodies are read straight into the returned `bytes` (or a caller's writable
//! buffer) and written from any contiguous buffer (bytes, bytearray, memoryview, numpy) without
//! an intermediate copy. Objects of any size stream through `open_object` (an `ObjectReader`)
//! and `put_stream` (from any object with `read`) in bounded pieces.

mod arrays;

use std::io::Read;

use std::num::NonZeroU64;

use isthmus_posix::StoreOptions;
use isthmus_session::door::{http_range, range_of};
use isthmus_store::{
    BoxedReader, CompletedPart, CopyRequest, Durability, GetRequest, ListPartsRequest, ListRequest, ObjectInfo,
    ObjectMeta, PartRequest, PutRequest, RequestContext, Store, StoreError, StoreExt,
};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3::{create_exception, intern};

create_exception!(_native, IsthmusError, PyException, "An engine error; args are (S3 error code, message).");

fn to_py(err: StoreError) -> PyErr {
    IsthmusError::new_err((err.s3_code(), err.to_string()))
}

/// The buffer of any buffer-protocol object, seen as bytes: typed buffers (numpy float arrays,
/// `array.array`) are recast as unsigned bytes through a memoryview, without copying.
fn byte_buffer(obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    match PyBuffer::<u8>::get(obj) {
        Ok(buffer) => Ok(buffer),
        Err(_) => {
            let view = obj.py().import("builtins")?.getattr("memoryview")?.call1((obj,))?;
            PyBuffer::<u8>::get(&view.call_method1("cast", ("B",))?)
        }
    }
}

/// Runs `f` without the GIL on the bytes of any buffer-protocol object. A read-only buffer
/// (`bytes`, a read-only memoryview) cannot change while it is exported, so its memory is used
/// in place. A writable one (bytearray, numpy array) could be changed by another thread while
/// the GIL is released, which would be a data race on memory Rust reads: it is copied first,
/// with the GIL held.
fn with_bytes<R>(py: Python<'_>, data: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R + Send) -> PyResult<R>
where
    R: Send,
{
    let buffer = byte_buffer(data)?;
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err("the buffer must be C-contiguous"));
    }
    let (ptr, len) = (buffer.buf_ptr() as usize, buffer.len_bytes());
    if !buffer.readonly() {
        let copy = buffer.to_vec(py)?;
        return Ok(py.detach(|| f(&copy)));
    }
    // SAFETY: the buffer is read-only, contiguous, `len` bytes long, and stays exported (so
    // alive and unchanged) until `buffer` drops after the call.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    Ok(py.detach(|| f(bytes)))
}

/// Copies `bytes` into a writable buffer-protocol object, with the GIL held.
fn copy_into(py: Python<'_>, view: &PyBuffer<u8>, bytes: &[u8]) -> PyResult<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    if view.readonly() || !view.is_c_contiguous() || view.len_bytes() < bytes.len() {
        return Err(PyValueError::new_err("the buffer must be writable, C-contiguous and large enough"));
    }
    let _gil_held = py;
    // SAFETY: the exported buffer is writable, contiguous and at least `bytes.len()` bytes; it
    // stays exported while `view` lives; the GIL is held (we have `py`), so no Python code runs
    // meanwhile, and `bytes` is our own memory, which cannot overlap it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), view.buf_ptr().cast::<u8>(), bytes.len()) };
    Ok(())
}

/// A writable, C-contiguous byte view of `buffer`.
fn writable(buffer: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    let view = byte_buffer(buffer)?;
    if view.readonly() || !view.is_c_contiguous() {
        return Err(PyValueError::new_err("the buffer must be writable and C-contiguous"));
    }
    Ok(view)
}

/// Reads exactly `len` bytes from `body` without the GIL into a new vector.
fn read_vec(py: Python<'_>, body: &mut BoxedReader, len: usize) -> PyResult<Vec<u8>> {
    py.detach(|| {
        let mut buf = vec![0u8; len];
        body.read_exact(&mut buf).map(|()| buf)
    })
    .map_err(|e| to_py(StoreError::from(e)))
}

fn info_dict<'py>(py: Python<'py>, info: &ObjectInfo) -> PyResult<Bound<'py, PyDict>> {
    // The dictionary's keys are interned once (a HEAD from Python is a few microseconds: making
    // six key strings per call was a measurable share of it).
    let d = PyDict::new(py);
    d.set_item(intern!(py, "key"), &info.key)?;
    d.set_item(intern!(py, "size"), info.size)?;
    d.set_item(intern!(py, "etag"), &info.etag)?;
    d.set_item(
        intern!(py, "last_modified"),
        info.last_modified.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |t| t.as_secs_f64()),
    )?;
    d.set_item(intern!(py, "content_type"), info.meta.content_type.as_deref())?;
    d.set_item(intern!(py, "metadata"), &info.meta.user)?;
    Ok(d)
}

/// The range of `length` bytes from `offset` (to the end without a length); `None` for a
/// length of 0, which reads nothing.
fn requested_range(offset: u64, length: Option<u64>) -> Result<Option<Option<isthmus_store::ByteRange>>, StoreError> {
    match length {
        Some(0) => Ok(None),
        other => range_of(offset, other.and_then(NonZeroU64::new)).map(Some),
    }
}

/// The next `len` bytes of `body`, read without the GIL straight into a new `bytes`.
fn read_new_bytes<'py>(py: Python<'py>, body: &mut BoxedReader, len: usize) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, len, |dst| {
        let dst_addr = (dst.as_mut_ptr() as usize, dst.len());
        let result = py.detach(move || {
            // SAFETY: `dst` is the new bytes object's buffer, alive and unshared until we return.
            let dst = unsafe { std::slice::from_raw_parts_mut(dst_addr.0 as *mut u8, dst_addr.1) };
            body.read_exact(dst)
        });
        result.map_err(|e| to_py(StoreError::from(e)))
    })
}

/// How much `put_stream` asks its source for at a time.
const STREAM_CHUNK: usize = 1 << 20;

/// An object open for reading, from `Store.open_object`. `info` describes the open file the
/// bytes come from (so ETag and body always match); `read` and `readinto` return the next
/// bytes without holding the GIL, so an object of any size streams in bounded pieces.
#[pyclass(name = "ObjectReader")]
struct PyObjectReader {
    body: Option<BoxedReader>,
    /// The object's description: key, size, etag, last_modified, content_type, metadata.
    #[pyo3(get)]
    info: Py<PyDict>,
    /// (first, last) byte of the object served, when a range was asked for.
    #[pyo3(get)]
    range: Option<(u64, u64)>,
}

#[pymethods]
impl PyObjectReader {
    /// Bytes left to read.
    #[getter]
    fn remaining(&self) -> u64 {
        self.body.as_ref().map_or(0, |b| b.remaining())
    }

    /// Up to `size` next bytes (all that remain when `size` is omitted or negative); empty at
    /// the end. A file truncated under the reader is an error, never a short object.
    #[pyo3(signature = (size = -1))]
    fn read<'py>(&mut self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let Some(body) = self.body.as_mut() else {
            return Err(PyValueError::new_err("read of a closed ObjectReader"));
        };
        let left = body.remaining();
        let want = if size < 0 { left } else { left.min(size as u64) };
        let len = usize::try_from(want).map_err(|_| PyValueError::new_err("object too large to read at once"))?;
        read_new_bytes(py, body, len)
    }

    /// Reads the next bytes into a writable contiguous buffer; returns how many (0 at the end).
    fn readinto(&mut self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let Some(body) = self.body.as_mut() else {
            return Err(PyValueError::new_err("read of a closed ObjectReader"));
        };
        let view = writable(buffer)?;
        let want = view.len_bytes().min(usize::try_from(body.remaining()).unwrap_or(usize::MAX));
        // Read without the GIL into memory of our own, then copy in with the GIL held: the
        // caller's buffer may be used by other threads meanwhile.
        let bytes = read_vec(py, body, want)?;
        copy_into(py, &view, &bytes)?;
        Ok(want)
    }

    fn close(&mut self) {
        self.body = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&mut self, _exc_type: Py<PyAny>, _exc: Py<PyAny>, _tb: Py<PyAny>) {
        self.close();
    }
}

/// A data root: buckets are its top-level directories, objects are files.
#[pyclass(frozen, name = "Store")]
pub(crate) struct PyStore {
    /// The engine in-process, or a gateway's local socket (`connect`).
    pub(crate) inner: std::sync::Arc<dyn Store>,
    /// The package acts as the Python process itself.
    pub(crate) cx: RequestContext,
}

#[pymethods]
impl PyStore {
    /// Opens (creating it if needed) a data root. `durability` is "strict" (fsync before a
    /// write returns, as the gateway's default) or "relaxed".
    #[new]
    #[pyo3(signature = (root, durability = "strict"))]
    fn new(root: &str, durability: &str) -> PyResult<Self> {
        let durability: Durability = durability.parse().map_err(PyValueError::new_err)?;
        // The data root with its pools (ROOT/.isthmus/pools.toml), as the gateway sees it.
        let inner = isthmus_session::stack::open_root(
            std::path::Path::new(root),
            StoreOptions { durability, ..StoreOptions::default() },
        )
        .map_err(to_py)?;
        Ok(Self { inner, cx: RequestContext::process() })
    }

    fn create_bucket(&self, py: Python<'_>, bucket: &str) -> PyResult<()> {
        py.detach(|| self.inner.create_bucket(&self.cx, bucket, &Default::default())).map_err(to_py)
    }

    fn delete_bucket(&self, py: Python<'_>, bucket: &str) -> PyResult<()> {
        py.detach(|| self.inner.delete_bucket(&self.cx, bucket)).map_err(to_py)
    }

    fn head_bucket(&self, py: Python<'_>, bucket: &str) -> PyResult<()> {
        py.detach(|| self.inner.head_bucket(&self.cx, bucket)).map_err(to_py)
    }

    fn list_buckets(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let buckets = py.detach(|| self.inner.list_buckets(&self.cx)).map_err(to_py)?;
        Ok(buckets.into_iter().map(|b| b.name).collect())
    }

    /// Stores `data` (any contiguous buffer) atomically; returns size and ETag.
    #[pyo3(signature = (bucket, key, data, content_type = None, metadata = None))]
    fn put_object<'py>(
        &self,
        py: Python<'py>,
        bucket: &str,
        key: &str,
        data: &Bound<'py, PyAny>,
        content_type: Option<String>,
        metadata: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let meta = ObjectMeta { content_type, user: metadata.unwrap_or_default(), ..Default::default() };
        let request = PutRequest { meta, ..Default::default() };
        let info = with_bytes(py, data, |bytes| self.inner.put_bytes(&self.cx, bucket, key, bytes, request))?
            .map_err(to_py)?;
        info_dict(py, &info)
    }

    /// The object's bytes (or `length` bytes from `offset`), read straight into a new `bytes`.
    #[pyo3(signature = (bucket, key, offset = 0, length = None))]
    fn get_object<'py>(
        &self,
        py: Python<'py>,
        bucket: &str,
        key: &str,
        offset: u64,
        length: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let Some(range) = requested_range(offset, length).map_err(to_py)? else {
            // Nothing to read, but the object must exist.
            py.detach(|| self.inner.head_object(&self.cx, bucket, key, &Default::default())).map_err(to_py)?;
            return Ok(PyBytes::new(py, b""));
        };
        let request = GetRequest { range, ..Default::default() };
        let response = py.detach(|| self.inner.get_object(&self.cx, bucket, key, &request)).map_err(to_py)?;
        let mut body = response.body;
        let len = usize::try_from(body.remaining()).map_err(|_| PyValueError::new_err("object too large"))?;
        read_new_bytes(py, &mut body, len)
    }

    /// Opens the object (or `length` bytes from `offset`, or the HTTP `range` such as
    /// "bytes=0-99" or "bytes=-100") for reading in pieces.
    #[pyo3(signature = (bucket, key, offset = 0, length = None, range = None))]
    fn open_object(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        offset: u64,
        length: Option<u64>,
        range: Option<&str>,
    ) -> PyResult<PyObjectReader> {
        let range = match range {
            Some(header) => Some(http_range(header).map_err(to_py)?),
            None => requested_range(offset, length)
                .map_err(to_py)?
                .ok_or_else(|| PyValueError::new_err("length must be positive (or None: to the end)"))?,
        };
        let request = GetRequest { range, ..Default::default() };
        let response = py.detach(|| self.inner.get_object(&self.cx, bucket, key, &request)).map_err(to_py)?;
        let info = info_dict(py, &response.info)?.unbind();
        Ok(PyObjectReader { body: Some(response.body), info, range: response.range })
    }

    /// Stores what `source.read(n)` returns until it returns nothing, in pieces of 1 MiB, so a
    /// file of any size goes in with bounded memory; the object appears whole or not at all.
    /// `content_md5` (the 16-byte digest) is checked before the object becomes visible.
    #[pyo3(signature = (bucket, key, source, content_type = None, metadata = None, content_md5 = None))]
    #[allow(clippy::too_many_arguments)]
    fn put_stream<'py>(
        &self,
        py: Python<'py>,
        bucket: &str,
        key: &str,
        source: &Bound<'py, PyAny>,
        content_type: Option<String>,
        metadata: Option<std::collections::BTreeMap<String, String>>,
        content_md5: Option<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let meta = ObjectMeta { content_type, user: metadata.unwrap_or_default(), ..Default::default() };
        let request = PutRequest { meta, ..Default::default() };
        let mut writer = py.detach(|| self.inner.put_object(&self.cx, bucket, key, request)).map_err(to_py)?;
        loop {
            let chunk = source.call_method1("read", (STREAM_CHUNK,))?;
            let chunk = match chunk.cast::<pyo3::types::PyString>() {
                Ok(text) => PyBytes::new(py, text.to_str()?.as_bytes()).into_any(),
                Err(_) => chunk,
            };
            if chunk.len()? == 0 {
                break;
            }
            with_bytes(py, &chunk, |bytes| writer.write_all(bytes))?.map_err(to_py)?;
        }
        if let Some(expected) = content_md5
            && writer.digests().md5.is_some_and(|md5| md5[..] != expected[..])
        {
            // Dropping the writer removes its temporary file: nothing becomes visible.
            return Err(to_py(StoreError::BadDigest(
                "The Content-MD5 you specified did not match what we received.".into(),
            )));
        }
        let info = py.detach(|| writer.commit()).map_err(to_py)?;
        info_dict(py, &info)
    }

    /// Reads the object (or a range) into a writable contiguous buffer (bytearray, memoryview,
    /// numpy array); returns the number of bytes read. The buffer must be large enough.
    #[pyo3(signature = (bucket, key, buffer, offset = 0))]
    fn get_object_into(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        buffer: &Bound<'_, PyAny>,
        offset: u64,
    ) -> PyResult<usize> {
        let view = writable(buffer)?;
        let cap = view.len_bytes();
        let request = GetRequest { range: range_of(offset, None).map_err(to_py)?, ..Default::default() };
        let mut body = py.detach(|| self.inner.get_object(&self.cx, bucket, key, &request)).map_err(to_py)?.body;
        let len = usize::try_from(body.remaining()).unwrap_or(usize::MAX);
        if len > cap {
            return Err(to_py(StoreError::InvalidArgument(format!(
                "the buffer holds {cap} bytes, the object has {len}"
            ))));
        }
        // Read without the GIL into memory of our own, then copy in with the GIL held: the
        // caller's buffer may be used by other threads meanwhile.
        let bytes = read_vec(py, &mut body, len)?;
        copy_into(py, &view, &bytes)?;
        Ok(len)
    }

    fn head_object<'py>(&self, py: Python<'py>, bucket: &str, key: &str) -> PyResult<Bound<'py, PyDict>> {
        let info = py.detach(|| self.inner.head_object(&self.cx, bucket, key, &Default::default())).map_err(to_py)?;
        info_dict(py, &info)
    }

    fn delete_object(&self, py: Python<'_>, bucket: &str, key: &str) -> PyResult<()> {
        py.detach(|| self.inner.delete_object(&self.cx, bucket, key, &Default::default())).map(drop).map_err(to_py)
    }

    fn copy_object<'py>(
        &self,
        py: Python<'py>,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let info = py
            .detach(|| {
                self.inner.copy_object(&self.cx, (src_bucket, src_key), (dst_bucket, dst_key), &CopyRequest::default())
            })
            .map_err(to_py)?;
        info_dict(py, &info)
    }

    /// One page of keys in UTF-8 byte order: {"objects": [...], "common_prefixes": [...],
    /// "is_truncated": bool, "next_marker": str | None}.
    #[pyo3(signature = (bucket, prefix = String::new(), delimiter = None, start_after = None, max_keys = 1000))]
    fn list_objects<'py>(
        &self,
        py: Python<'py>,
        bucket: &str,
        prefix: String,
        delimiter: Option<String>,
        start_after: Option<String>,
        max_keys: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let request = ListRequest { prefix, delimiter, start_after, max_keys };
        let page = py.detach(|| self.inner.list_objects(&self.cx, bucket, &request)).map_err(to_py)?;
        let d = PyDict::new(py);
        let objects = page.objects.iter().map(|o| info_dict(py, o)).collect::<PyResult<Vec<_>>>()?;
        d.set_item("objects", objects)?;
        d.set_item("common_prefixes", page.common_prefixes)?;
        d.set_item("is_truncated", page.is_truncated)?;
        d.set_item("next_marker", page.next_marker)?;
        Ok(d)
    }

    #[pyo3(signature = (bucket, key, content_type = None, metadata = None))]
    fn create_multipart_upload(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        content_type: Option<String>,
        metadata: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<String> {
        let meta = ObjectMeta { content_type, user: metadata.unwrap_or_default(), ..Default::default() };
        py.detach(|| {
            self.inner.create_multipart_upload(&self.cx, bucket, key, PutRequest { meta, ..Default::default() })
        })
        .map_err(to_py)
    }

    /// Uploads one part from any contiguous buffer; returns its ETag.
    fn upload_part(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: u32,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        with_bytes(py, data, |bytes| -> Result<String, StoreError> {
            let mut writer = self.inner.upload_part(
                &self.cx,
                bucket,
                key,
                upload_id,
                &PartRequest { part_number, ..Default::default() },
            )?;
            writer.write_all(bytes)?;
            Ok(writer.commit()?.etag)
        })?
        .map_err(to_py)
    }

    /// Completes an upload from [(part_number, etag), ...] in ascending order.
    fn complete_multipart_upload<'py>(
        &self,
        py: Python<'py>,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: Vec<(u32, String)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let parts: Vec<CompletedPart> =
            parts.into_iter().map(|(part_number, etag)| CompletedPart { part_number, etag, checksum: None }).collect();
        let info = py
            .detach(|| {
                self.inner.complete_multipart_upload(&self.cx, bucket, key, upload_id, &parts, PutRequest::default())
            })
            .map_err(to_py)?;
        info_dict(py, &info)
    }

    fn abort_multipart_upload(&self, py: Python<'_>, bucket: &str, key: &str, upload_id: &str) -> PyResult<()> {
        py.detach(|| self.inner.abort_multipart_upload(&self.cx, bucket, key, upload_id)).map_err(to_py)
    }

    /// [(part_number, etag, size), ...]
    fn list_parts(
        &self,
        py: Python<'_>,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> PyResult<Vec<(u32, String, u64)>> {
        let page = py
            .detach(|| {
                self.inner.list_parts(
                    &self.cx,
                    bucket,
                    key,
                    upload_id,
                    &ListPartsRequest { after_part: 0, max_parts: 10_000 },
                )
            })
            .map_err(to_py)?;
        Ok(page.parts.into_iter().map(|p| (p.part_number, p.etag, p.size)).collect())
    }
}

/// A gateway's engine through its local socket (`unix:///run/isthmus.sock`): the same calls as
/// a `Store` opened in-process, served by `isthmus serve --local-socket` as the S3 user this
/// process's uid maps to, with that user's permissions.
#[pyfunction]
fn connect(py: Python<'_>, address: &str) -> PyResult<PyStore> {
    if isthmus_local::socket_path(address).is_none() {
        return Err(PyValueError::new_err(format!(
            "{address:?} is not a local socket address: use unix:///path/to/socket"
        )));
    }
    let inner = py.detach(|| isthmus_session::stack::open(address, StoreOptions::default())).map_err(to_py)?;
    Ok(PyStore { inner, cx: RequestContext::process() })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(connect, m)?)?;
    m.add_class::<PyStore>()?;
    m.add_class::<PyObjectReader>()?;
    arrays::register(m)?;
    m.add("IsthmusError", m.py().get_type::<IsthmusError>())?;
    Ok(())
}
