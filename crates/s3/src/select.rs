//! Arrays served by the gateway: a GET of a Zarr array's path with `?select=[...]` answers only
//! the selected elements (raw little-endian bytes with `x-amz-meta-shape` and
//! `x-amz-meta-dtype`, or a `.npy` file with `format=npy` or `Accept: application/x-npy`);
//! `?where=EXPR` answers the matching coordinates and values as JSON, `limit` at a time with a
//! continuation (`after`); `?array` answers the metadata (shape, data type, chunks,
//! attributes, coordinate variables). The request is authenticated like any GET (the signature
//! covers the query) and every chunk read goes through the engine as the request's user, so
//! permissions are the same as for the chunk objects. Chunks are read in parallel and the
//! result streams slab by slab: memory stays bounded; a selection larger than the limit
//! (`select_max_bytes`) is refused before anything is sent.

use std::sync::Arc;

use bytes::Bytes;
use isthmus_array::select::{Expr, Slabs, find, npy_header, parse_selection};
use isthmus_array::{ArrayError, Location, Region, ZarrArray};
use isthmus_hdf5::{Hdf5Error, looks_like_hdf5};
use isthmus_store::{ObjectRead, RequestContext, StoreResult};
use s3s::dto::GetObjectOutput;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use serde_json::{Value, json};

use crate::Gateway;
use crate::body::ObjectBody;

/// The most bytes of a selection held at once while it streams.
const SLAB_BYTES: u64 = 8 << 20;
/// Threshold matches answered at once unless `limit` says otherwise.
const DEFAULT_MATCHES: usize = 10_000;
const MAX_MATCHES: usize = 1_000_000;

/// What an array request asks for.
pub enum ArrayQuery {
    Select { selection: String, npy: bool },
    Where { expr: String, selection: String, limit: usize, after: u64 },
    Metadata,
}

/// An array request: what it asks for, and of which HDF5 dataset when the key is an HDF5 file
/// (`dataset=/group/name`).
pub struct ArrayRequest {
    pub query: ArrayQuery,
    pub dataset: Option<String>,
}

/// The array request of a GET's query string and Accept header, if it is one.
pub fn array_request<T>(req: &S3Request<T>) -> S3Result<Option<ArrayRequest>> {
    let Some(query) = req.uri.query() else { return Ok(None) };
    let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let dataset = params.iter().find(|(k, _)| k == "dataset").map(|(_, v)| v.clone());
    let query = match array_query(req, &params)? {
        Some(query) => query,
        // `?dataset=` alone asks for that dataset's metadata.
        None if dataset.is_some() => ArrayQuery::Metadata,
        None => return Ok(None),
    };
    Ok(Some(ArrayRequest { query, dataset }))
}

fn array_query<T>(req: &S3Request<T>, params: &[(String, String)]) -> S3Result<Option<ArrayQuery>> {
    let get = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let accept_npy =
        req.headers.get("accept").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("application/x-npy"));
    let number = |name: &str| -> S3Result<Option<u64>> {
        get(name)
            .map(|v| v.parse::<u64>().map_err(|_| s3_error!(InvalidArgument, "{name} must be a non-negative integer")))
            .transpose()
    };
    if let Some(expr) = get("where") {
        let limit = number("limit")?.map_or(DEFAULT_MATCHES, |n| n as usize);
        if limit == 0 || limit > MAX_MATCHES {
            return Err(s3_error!(InvalidArgument, "limit must be between 1 and {MAX_MATCHES}"));
        }
        let selection = get("select").unwrap_or_default();
        return Ok(Some(ArrayQuery::Where { expr, selection, limit, after: number("after")?.unwrap_or(0) }));
    }
    if let Some(selection) = get("select") {
        let npy = accept_npy || get("format").is_some_and(|f| f == "npy");
        return Ok(Some(ArrayQuery::Select { selection, npy }));
    }
    if params.iter().any(|(k, _)| k == "array") {
        return Ok(Some(ArrayQuery::Metadata));
    }
    Ok(None)
}

fn hdf5_error(err: Hdf5Error) -> S3Error {
    match err {
        Hdf5Error::Store(err) => crate::error::s3_error(err),
        Hdf5Error::NoSuchDataset { .. } => S3Error::with_message(S3ErrorCode::NoSuchKey, err.to_string()),
        Hdf5Error::NotServable { .. } | Hdf5Error::NoFile(_) => {
            S3Error::with_message(S3ErrorCode::NotImplemented, err.to_string())
        }
        Hdf5Error::Unreadable { .. } | Hdf5Error::Refused { .. } => {
            S3Error::with_message(S3ErrorCode::InvalidArgument, err.to_string())
        }
        Hdf5Error::Array(err) => array_error(err),
        Hdf5Error::Decode(_) => S3Error::with_message(S3ErrorCode::InternalError, err.to_string()),
    }
}

fn array_error(err: ArrayError) -> S3Error {
    // An engine error deep in a Zarr read is answered as the engine's (its S3 code).
    if let Some(engine) = err.engine_error() {
        return crate::error::s3_error_of(engine);
    }
    let text = err.to_string();
    match err {
        ArrayError::NotFound(path) => S3Error::with_message(S3ErrorCode::NoSuchKey, format!("no Zarr array at {path}")),
        ArrayError::Spec(_) | ArrayError::Region(_) | ArrayError::Open(_) | ArrayError::Size(_) => {
            S3Error::with_message(S3ErrorCode::InvalidArgument, text)
        }
        _ => S3Error::with_message(S3ErrorCode::InternalError, text),
    }
}

/// A selection's bytes as an object body: the `.npy` header, if asked, then the slabs.
struct SelectionBody {
    header: std::io::Cursor<Vec<u8>>,
    slabs: Slabs,
}

impl std::io::Read for SelectionBody {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self.header.read(out)? {
            0 => self.slabs.read(out),
            n => Ok(n),
        }
    }
}

impl ObjectRead for SelectionBody {
    fn remaining(&self) -> u64 {
        (self.header.get_ref().len() as u64 - self.header.position()) + self.slabs.remaining()
    }
}

/// Serves an array request on `bucket`/`key`: a Zarr array's path, or an HDF5 file (whose
/// datasets are served in place).
pub async fn serve(
    gw: &Gateway,
    cx: RequestContext,
    bucket: String,
    key: String,
    request: ArrayRequest,
) -> S3Result<S3Response<GetObjectOutput>> {
    let store = gw.runner.store();
    let limit = gw.select_max_bytes;
    let hdf5 = request.dataset.is_some() || looks_like_hdf5(&key);
    let ArrayRequest { query, dataset } = request;
    let path = key.trim_end_matches('/').to_string();
    let location =
        Location::Engine { store: store.clone(), cx: cx.clone(), bucket: bucket.clone(), prefix: String::new() };
    // Opening (an HDF5 file may be indexed now), planning and (for where and metadata) the
    // whole answer are blocking work.
    // On the blocking pool as the request's user (the session floor's runner): libhdf5 opens
    // the file it indexes by its descriptor's /proc name, which the kernel checks as the thread.
    let answer = gw.runner.blocking(&cx, move |cx| -> StoreResult<S3Result<(GetObjectOutput, Option<SelectionBody>)>> {
        let cx = cx.clone();
        Ok((|| {
        let (location, path) = if hdf5 {
            let file = isthmus_hdf5::open_file(store, &cx, &bucket, &key).map_err(hdf5_error)?;
            let Some(dataset) = dataset else {
                return match query {
                    ArrayQuery::Metadata => Ok((json_output(&file.describe()), None)),
                    _ => Err(s3_error!(InvalidArgument, "{key} is an HDF5 file: name the dataset with dataset=/path")),
                };
            };
            let chunks = file.chunks(&dataset).map_err(hdf5_error)?;
            (Location::Chunks(chunks), String::new())
        } else {
            (location, path)
        };
        let array = Arc::new(ZarrArray::open(&location, &path).map_err(array_error)?);
        match query {
            ArrayQuery::Metadata => Ok((json_output(&metadata(&location, &path, &array)), None)),
            ArrayQuery::Where { expr, selection, limit: max, after } => {
                let expr = Expr::parse(&expr).map_err(array_error)?;
                let selection = parse_selection(&selection, array.shape()).map_err(array_error)?;
                let found = find(&array, &selection, &expr, after, max, SLAB_BYTES).map_err(array_error)?;
                let body = json!({
                    "coordinates": found.coordinates,
                    "values": found.values,
                    "count": found.values.len(),
                    "next": found.next,
                });
                Ok((json_output(&body), None))
            }
            ArrayQuery::Select { selection, npy } => {
                let selection = parse_selection(&selection, array.shape()).map_err(array_error)?;
                let bytes = array.region_bytes(&selection.region).map_err(array_error)? as u64;
                if bytes > limit {
                    return Err(s3_error!(
                        InvalidArgument,
                        "the selection has {bytes} bytes, more than this gateway answers at once ({limit}, select_max_bytes): select less, or downsample with a step"
                    ));
                }
                let shape = selection.shape();
                let header = if npy { npy_header(array.data_type(), &shape) } else { Vec::new() };
                let mut slabs = Slabs::new(array.clone(), selection.region.clone(), SLAB_BYTES).map_err(array_error)?;
                // The first slab before the answer: a selection of one slab (most) fails as an
                // error response; a later slab that fails cuts the body short of its
                // Content-Length, which every client reports as an error.
                slabs.prefetch().map_err(array_error)?;
                let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
                let mut output = GetObjectOutput {
                    content_length: Some((header.len() as u64 + bytes) as i64),
                    content_type: Some(if npy { "application/x-npy" } else { "application/octet-stream" }.to_string()),
                    ..Default::default()
                };
                output.metadata = Some(
                    [
                        ("shape".to_string(), dims.join(",")),
                        ("dtype".to_string(), array.data_type().numpy().to_string()),
                        ("order".to_string(), "C".to_string()),
                    ]
                    .into_iter()
                    .collect(),
                );
                Ok((output, Some(SelectionBody { header: std::io::Cursor::new(header), slabs })))
            }
        }
        })())
    })
    .await
    .map_err(crate::error::s3_error)??;
    let (mut output, body) = answer;
    if let Some(body) = body {
        output.body = Some(ObjectBody::Stream(Box::new(body)).into_blob(&gw.runner));
    }
    Ok(S3Response::new(output))
}

/// A JSON answer.
fn json_output(value: &Value) -> GetObjectOutput {
    let bytes = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
    GetObjectOutput {
        content_length: Some(bytes.len() as i64),
        content_type: Some("application/json".into()),
        body: Some(ObjectBody::whole(bytes)),
        ..Default::default()
    }
}

/// Shape, data type, chunks, attributes, dimension names, and the coordinate variables: the
/// arrays beside this one (in its group) named like one of its dimensions, with their values
/// when they are small.
fn metadata(location: &Location, path: &str, array: &ZarrArray) -> Value {
    let stored = array.metadata();
    let names: Vec<String> = stored["dimension_names"]
        .as_array()
        .map(|names| names.iter().map(|n| n.as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default();
    let parent = path.rsplit_once('/').map_or("", |(parent, _)| parent);
    let mut coordinates = serde_json::Map::new();
    for (dim, name) in names.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        let sibling = if parent.is_empty() { name.clone() } else { format!("{parent}/{name}") };
        let Ok(coordinate) = ZarrArray::open(location, &sibling) else { continue };
        if coordinate.shape() != [array.shape()[dim]] {
            continue;
        }
        let mut entry = json!({"path": sibling, "shape": coordinate.shape(), "dtype": coordinate.data_type().name()});
        if coordinate.shape()[0] <= 100_000
            && let Ok(bytes) = coordinate.read_vec(&Region::whole(coordinate.shape()))
        {
            let count = coordinate.shape()[0] as usize;
            let values: Vec<f64> = (0..count).map(|i| coordinate.data_type().value_at(&bytes, i)).collect();
            entry["values"] = json!(values);
        }
        coordinates.insert(name.clone(), entry);
    }
    json!({
        "path": path,
        "shape": array.shape(),
        "dtype": array.data_type().name(),
        "numpy_dtype": array.data_type().numpy(),
        "chunks": array.chunk_shape(),
        "attributes": array.attributes(),
        "dimension_names": stored["dimension_names"],
        "fill_value": stored["fill_value"],
        "codecs": stored["codecs"],
        "coordinates": coordinates,
    })
}
