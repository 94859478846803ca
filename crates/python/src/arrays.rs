//! The array part of `isthmus._native`: `Location` (an engine bucket or a remote S3 bucket),
//! `Array` (create, open, read and write regions as raw bytes) and `Transfers` / `Transfer`
//! (asynchronous regions with a consistency point). The numpy face is `isthmus/array.py`. All
//! I/O runs without the GIL; data cross as bytes of any contiguous buffer.

use std::sync::Arc;

use isthmus_array::{
    ArrayError, ArraySpec, DataType, Direction, Location, Region, RemoteEndpoint, Status, Transfer, TransferOptions,
    Transfers, ZarrArray,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::{IsthmusError, PyStore, copy_into, with_bytes, writable};

fn to_py(err: ArrayError) -> PyErr {
    let code = match &err {
        ArrayError::NotFound(_) => "NoSuchKey".to_string(),
        ArrayError::Exists(_) => "AlreadyExists".to_string(),
        ArrayError::Spec(_) | ArrayError::Region(_) => "InvalidArgument".to_string(),
        ArrayError::Transfer(_) => "InvalidRequest".to_string(),
        // The engine's refusals keep their S3 code, so callers can tell a permission from a
        // broken array.
        _ => err.engine_error().map_or_else(|| "ArrayError".into(), |engine| engine.s3_code().to_string()),
    };
    IsthmusError::new_err((code, err.to_string()))
}

/// Where arrays live.
#[pyclass(frozen, name = "Location")]
pub struct PyLocation {
    inner: Location,
}

#[pymethods]
impl PyLocation {
    /// Arrays in `bucket` of a `Store` (in-process or a gateway's local socket), under `prefix`.
    #[staticmethod]
    #[pyo3(signature = (store, bucket, prefix = ""))]
    fn engine(store: &PyStore, bucket: &str, prefix: &str) -> Self {
        let inner = Location::Engine {
            store: store.inner.clone(),
            cx: store.cx.clone(),
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        };
        Self { inner }
    }

    /// Arrays in `bucket` of a remote S3 endpoint (`http(s)://host:port`), under `prefix`;
    /// `ca_bundle`: a PEM file of the CA (or the self-signed certificate) to trust for https.
    #[staticmethod]
    #[pyo3(signature = (endpoint, bucket, access_key, secret_key, region = "us-east-1", prefix = "", ca_bundle = None))]
    fn remote(
        endpoint: &str,
        bucket: &str,
        access_key: &str,
        secret_key: &str,
        region: &str,
        prefix: &str,
        ca_bundle: Option<std::path::PathBuf>,
    ) -> Self {
        let endpoint = RemoteEndpoint {
            endpoint: endpoint.to_string(),
            bucket: bucket.to_string(),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            region: region.to_string(),
            ca_bundle,
        };
        Self { inner: Location::Remote { endpoint, prefix: prefix.to_string() } }
    }

    /// Creates a group at `path` with `attributes` (a JSON object as text).
    #[pyo3(signature = (path, attributes = "{}"))]
    fn create_group(&self, py: Python<'_>, path: &str, attributes: &str) -> PyResult<()> {
        let attributes = serde_json::from_str(attributes).map_err(|e| PyValueError::new_err(e.to_string()))?;
        py.detach(|| isthmus_array::create_group(&self.inner, path, attributes)).map_err(to_py)
    }
}

fn region(offset: Vec<u64>, count: Vec<u64>, stride: Option<Vec<u64>>) -> Region {
    let region = Region::new(offset, count);
    match stride {
        Some(stride) => region.with_stride(stride),
        None => region,
    }
}

/// An open Zarr v3 array.
#[pyclass(frozen, name = "Array")]
pub struct PyArray {
    inner: Arc<ZarrArray>,
}

#[pymethods]
impl PyArray {
    /// Creates an array at `path`; `codecs` in short forms (`"zstd:3,crc32c"`), `attributes`
    /// a JSON object as text.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (location, path, shape, dtype, chunks, codecs = "", inner_chunks = None,
                        fill_value = None, attributes = "{}", dimension_names = None))]
    fn create(
        py: Python<'_>,
        location: &PyLocation,
        path: &str,
        shape: Vec<u64>,
        dtype: &str,
        chunks: Vec<u64>,
        codecs: &str,
        inner_chunks: Option<Vec<u64>>,
        fill_value: Option<f64>,
        attributes: &str,
        dimension_names: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let data_type: DataType = dtype.parse().map_err(to_py)?;
        let mut spec = ArraySpec::new(shape, data_type, chunks);
        spec.codecs = ArraySpec::parse_codecs(codecs).map_err(to_py)?;
        spec.inner_chunks = inner_chunks;
        spec.fill_value = fill_value;
        spec.attributes = serde_json::from_str(attributes).map_err(|e| PyValueError::new_err(e.to_string()))?;
        spec.dimension_names = dimension_names;
        let array = py.detach(|| ZarrArray::create(&location.inner, path, &spec)).map_err(to_py)?;
        Ok(Self { inner: Arc::new(array) })
    }

    #[staticmethod]
    fn open(py: Python<'_>, location: &PyLocation, path: &str) -> PyResult<Self> {
        let array = py.detach(|| ZarrArray::open(&location.inner, path)).map_err(to_py)?;
        Ok(Self { inner: Arc::new(array) })
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.inner.shape().to_vec()
    }

    /// The Zarr v3 data type name (`float32`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.data_type().name()
    }

    #[getter]
    fn chunks(&self) -> Vec<u64> {
        self.inner.chunk_shape()
    }

    #[getter]
    fn path(&self) -> String {
        self.inner.path().to_string()
    }

    /// The attributes, a JSON object as text.
    #[getter]
    fn attributes(&self) -> String {
        serde_json::Value::Object(self.inner.attributes().clone()).to_string()
    }

    /// The `zarr.json` as text.
    #[getter]
    fn metadata(&self) -> String {
        self.inner.metadata().to_string()
    }

    /// Reads a region into `out` (a writable contiguous buffer of exactly its bytes).
    #[pyo3(signature = (offset, count, out, stride = None))]
    fn read_into(
        &self,
        py: Python<'_>,
        offset: Vec<u64>,
        count: Vec<u64>,
        out: &Bound<'_, PyAny>,
        stride: Option<Vec<u64>>,
    ) -> PyResult<()> {
        let view = writable(out)?;
        let region = region(offset, count, stride);
        let bytes = self.inner.region_bytes(&region).map_err(to_py)?;
        if view.len_bytes() != bytes {
            return Err(PyValueError::new_err(format!(
                "the buffer has {} bytes, the region {bytes}",
                view.len_bytes()
            )));
        }
        let data = py.detach(|| self.inner.read_vec(&region)).map_err(to_py)?;
        copy_into(py, &view, &data)
    }

    /// Writes a region from `data` (any contiguous buffer of exactly its bytes).
    #[pyo3(signature = (offset, count, data, stride = None))]
    fn write(
        &self,
        py: Python<'_>,
        offset: Vec<u64>,
        count: Vec<u64>,
        data: &Bound<'_, PyAny>,
        stride: Option<Vec<u64>>,
    ) -> PyResult<()> {
        let region = region(offset, count, stride);
        with_bytes(py, data, |bytes| self.inner.write(&region, bytes))?.map_err(to_py)
    }

    /// Creates every missing shard of an array of uncompressed shards now, so every later
    /// region write goes in place into an existing file; answers how many were created.
    fn allocate_shards(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.inner.allocate_shards()).map_err(to_py)
    }
}

/// One region moving between memory and an array.
#[pyclass(frozen, name = "Transfer")]
pub struct PyTransfer {
    inner: Transfer,
}

#[pymethods]
impl PyTransfer {
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.bytes()
    }

    #[getter]
    fn is_write(&self) -> bool {
        self.inner.direction() == Direction::Write
    }
}

/// A transfer session: a bounded buffer and a bounded pool of chunk I/O threads.
#[pyclass(frozen, name = "Transfers")]
pub struct PyTransfers {
    inner: Transfers,
}

#[pymethods]
impl PyTransfers {
    #[new]
    #[pyo3(signature = (buffer_bytes = None, threads = None, consistency = "session"))]
    fn new(buffer_bytes: Option<u64>, threads: Option<usize>, consistency: &str) -> PyResult<Self> {
        let defaults = TransferOptions::default();
        let options = TransferOptions {
            buffer_bytes: buffer_bytes.unwrap_or(defaults.buffer_bytes),
            threads: threads.unwrap_or(defaults.threads),
            consistency: consistency.parse().map_err(to_py)?,
        };
        Ok(Self { inner: Transfers::new(options).map_err(to_py)? })
    }

    /// A transfer of a region of `array`, `direction` "read" or "write".
    #[pyo3(signature = (array, direction, offset, count, stride = None, consistency = None))]
    fn create(
        &self,
        array: &PyArray,
        direction: &str,
        offset: Vec<u64>,
        count: Vec<u64>,
        stride: Option<Vec<u64>>,
        consistency: Option<&str>,
    ) -> PyResult<PyTransfer> {
        let direction = match direction {
            "read" => Direction::Read,
            "write" => Direction::Write,
            other => return Err(PyValueError::new_err(format!("direction {other:?}: use read or write"))),
        };
        let consistency = match consistency {
            Some(text) => text.parse().map_err(to_py)?,
            None => self.inner.options().consistency,
        };
        let region = region(offset, count, stride);
        let inner = self.inner.create_with(&array.inner, region, direction, consistency).map_err(to_py)?;
        Ok(PyTransfer { inner })
    }

    /// Starts a batch of (transfer, data) pairs (`data` None for reads); a single transfer is a
    /// batch of one. Session writes copy their data before this returns.
    fn start_all(&self, py: Python<'_>, batch: Vec<(PyRef<'_, PyTransfer>, Option<Bound<'_, PyAny>>)>) -> PyResult<()> {
        // Copies of the writes' data, taken with the GIL held (a writable buffer could change).
        let mut copies: Vec<Option<Vec<u8>>> = Vec::with_capacity(batch.len());
        for (_, data) in &batch {
            copies.push(match data {
                Some(data) => Some(with_bytes(py, data, <[u8]>::to_vec)?),
                None => None,
            });
        }
        let entries: Vec<(&Transfer, Option<&[u8]>)> =
            batch.iter().zip(&copies).map(|((t, _), data)| (&t.inner, data.as_deref())).collect();
        py.detach(|| self.inner.start_all(&entries)).map_err(to_py)
    }

    /// "created", "pending", "done" or "failed: why".
    fn status(&self, transfer: &PyTransfer) -> String {
        match self.inner.status(&transfer.inner) {
            Status::Created => "created".into(),
            Status::Pending => "pending".into(),
            Status::Done => "done".into(),
            Status::Failed(why) => format!("failed: {why}"),
        }
    }

    /// Waits for a transfer; a read's data lands in `out` (writable, exactly its bytes).
    #[pyo3(signature = (transfer, out = None))]
    fn wait(&self, py: Python<'_>, transfer: &PyTransfer, out: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let view = out.map(writable).transpose()?;
        let bytes = transfer.inner.bytes() as usize;
        if let Some(view) = &view
            && view.len_bytes() != bytes
        {
            return Err(PyValueError::new_err(format!(
                "the buffer has {} bytes, the region {bytes}",
                view.len_bytes()
            )));
        }
        let mut data = vec![0u8; if view.is_some() { bytes } else { 0 }];
        let target = view.is_some().then_some(data.as_mut_slice());
        py.detach(|| self.inner.wait(&transfer.inner, target)).map_err(to_py)?;
        match view {
            Some(view) => copy_into(py, &view, &data),
            None => Ok(()),
        }
    }

    /// Waits until no session I/O runs: every session write is visible.
    fn flush(&self, py: Python<'_>) {
        py.detach(|| self.inner.flush());
    }

    /// The most bytes of the transfer buffer held at once so far.
    #[getter]
    fn buffer_peak(&self) -> u64 {
        self.inner.buffer_peak()
    }
}

/// Registers the array classes in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLocation>()?;
    m.add_class::<PyArray>()?;
    m.add_class::<PyTransfer>()?;
    m.add_class::<PyTransfers>()?;
    Ok(())
}
