//! Arrays and groups where they live: a `Location` (this engine's bucket and prefix, or a bucket
//! on a remote S3 endpoint), a `ZarrArray` opened or created there, region reads into a
//! caller's buffer and region writes from one. Data cross this interface as raw bytes in the
//! machine's order (little-endian here), so the Python and C doors pass their buffers as they are.

use std::sync::Arc;

use isthmus_store::{RequestContext, Store};
use serde_json::{Map, Value, json};
use zarrs::array::{Array, ArrayMetadata};
use zarrs::storage::{ReadableWritableListableStorageTraits, StoreKey};

use crate::backend::{ChunkStore, WriteCondition};
use crate::chunk_reads::{self, Target};
use crate::chunk_writes;
use crate::chunks::{self, Extent, Source, ZArray};
use crate::in_place::FixedShards;
use crate::remote::{RemoteEndpoint, S3Storage};
use crate::spec::{ArraySpec, DataType};
use crate::storage::EngineStorage;
use crate::{ArrayError, Region, RegionError};

/// Where arrays live.
#[derive(Clone)]
pub enum Location {
    /// A bucket of this engine, under a prefix, acting as `cx`.
    Engine { store: Arc<dyn Store>, cx: RequestContext, bucket: String, prefix: String },
    /// A bucket on a remote S3 endpoint, under a prefix.
    Remote { endpoint: RemoteEndpoint, prefix: String },
    /// Any other Zarr store that reads versions and writes conditionally.
    Chunks(Arc<dyn ChunkStore>),
}

impl Location {
    /// The Zarr store at this location.
    pub fn chunk_store(&self) -> Result<Arc<dyn ChunkStore>, ArrayError> {
        Ok(match self {
            Location::Engine { store, cx, bucket, prefix } => {
                Arc::new(EngineStorage::new(store.clone(), cx.clone(), bucket, prefix))
            }
            Location::Remote { endpoint, prefix } => Arc::new(S3Storage::new(endpoint, prefix)?),
            Location::Chunks(store) => store.clone(),
        })
    }
}

/// A node path as zarrs writes it: `/a/b`, or `/` for the root.
fn node_path(path: &str) -> String {
    format!("/{}", path.trim_matches('/'))
}

/// The key of a node's `zarr.json`.
fn metadata_key(path: &str) -> Result<StoreKey, ArrayError> {
    let trimmed = path.trim_matches('/');
    let key = if trimmed.is_empty() { "zarr.json".to_string() } else { format!("{trimmed}/zarr.json") };
    Ok(StoreKey::new(key)?)
}

/// Writes a node's `zarr.json` only if there is none yet.
fn create_node(store: &dyn ChunkStore, path: &str, metadata: &Value) -> Result<(), ArrayError> {
    let body = serde_json::to_vec_pretty(metadata).map_err(|e| ArrayError::Spec(e.to_string()))?;
    if store.set_if(&metadata_key(path)?, &body, WriteCondition::IfAbsent)? {
        Ok(())
    } else {
        Err(ArrayError::Exists(node_path(path)))
    }
}

/// Creates a group (a `zarr.json` with `node_type: group`) at `path`.
pub fn create_group(location: &Location, path: &str, attributes: Map<String, Value>) -> Result<(), ArrayError> {
    let store = location.chunk_store()?;
    create_node(store.as_ref(), path, &json!({"zarr_format": 3, "node_type": "group", "attributes": attributes}))
}

/// Removes the array or group at `path` and everything under it (nothing there is not an error).
pub fn remove_node(location: &Location, path: &str) -> Result<(), ArrayError> {
    let store = location.chunk_store()?;
    let trimmed = path.trim_matches('/');
    let prefix = if trimmed.is_empty() { String::new() } else { format!("{trimmed}/") };
    Ok(store.erase_prefix(&zarrs::storage::StorePrefix::new(prefix)?)?)
}

/// An open Zarr v3 array with a fixed-size data type.
pub struct ZarrArray {
    store: Arc<dyn ChunkStore>,
    array: ZArray,
    /// The layout of its shards when they are uncompressed: then written in place.
    shards: Option<FixedShards>,
    /// Where the array is (`identity`), made once: every transfer asks.
    identity: String,
    data_type: DataType,
    path: String,
}

impl ZarrArray {
    /// Creates an array at `path`; refused if an array or group is already there.
    pub fn create(location: &Location, path: &str, spec: &ArraySpec) -> Result<Self, ArrayError> {
        let store = location.chunk_store()?;
        let metadata = spec.metadata()?;
        let parsed: ArrayMetadata =
            serde_json::from_value(metadata.clone()).map_err(|e| ArrayError::Spec(e.to_string()))?;
        let storage: Arc<dyn ReadableWritableListableStorageTraits> = store.clone();
        let array = Array::new_with_metadata(storage, &node_path(path), parsed)?;
        let shards = FixedShards::of(&metadata, spec.data_type.size());
        let identity = format!("{}{}", store.describe(), node_path(path));
        let created = Self { store, array, shards, identity, data_type: spec.data_type, path: node_path(path) };
        created.check_sizes()?;
        create_node(created.store.as_ref(), path, &metadata)?;
        Ok(created)
    }

    /// Opens the array at `path`.
    pub fn open(location: &Location, path: &str) -> Result<Self, ArrayError> {
        let store = location.chunk_store()?;
        let storage: Arc<dyn ReadableWritableListableStorageTraits> = store.clone();
        let array = Array::open(storage, &node_path(path)).map_err(|err| match err {
            zarrs::array::ArrayCreateError::MissingMetadata => ArrayError::NotFound(node_path(path)),
            other => other.into(),
        })?;
        let metadata = serde_json::to_value(array.metadata()).map_err(|e| ArrayError::Spec(e.to_string()))?;
        let name = metadata["data_type"].as_str().unwrap_or_default();
        let data_type: DataType = name.parse()?;
        let shards = FixedShards::of(&metadata, data_type.size());
        let identity = format!("{}{}", store.describe(), node_path(path));
        let opened = Self { store, array, shards, identity, data_type, path: node_path(path) };
        opened.check_sizes()?;
        Ok(opened)
    }

    /// Refuses an array whose size does not fit in 64 bits, or whose (first) chunk is larger
    /// than this engine decodes (`size::MAX_CHUNK_BYTES`): its `zarr.json` is anyone's file.
    /// Every region of an array that passes is smaller than the array, so the arithmetic on
    /// regions and their pieces cannot wrap; each chunk a read or write touches is checked
    /// again (`chunks::pieces`), for grids whose chunks differ.
    fn check_sizes(&self) -> Result<(), ArrayError> {
        let element = self.data_type.size() as u64;
        crate::size::bytes("the array", self.shape(), element)?;
        let chunk = self.chunk_shape();
        if !chunk.is_empty() || self.shape().is_empty() {
            crate::size::chunk_bytes(&chunk, element)?;
        }
        Ok(())
    }

    pub fn shape(&self) -> &[u64] {
        self.array.shape()
    }

    pub fn data_type(&self) -> DataType {
        self.data_type
    }

    /// The chunk shape of a regular grid (of a sharded array: the shard shape).
    pub fn chunk_shape(&self) -> Vec<u64> {
        let origin = vec![0; self.shape().len()];
        self.array.chunk_shape(&origin).map(|s| s.iter().map(|n| n.get()).collect()).unwrap_or_default()
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the array is, the same for two handles on one array.
    pub fn identity(&self) -> String {
        self.identity.clone()
    }

    pub fn attributes(&self) -> &Map<String, Value> {
        self.array.attributes()
    }

    /// The array's `zarr.json` as stored.
    pub fn metadata(&self) -> Value {
        serde_json::to_value(self.array.metadata()).unwrap_or(Value::Null)
    }

    /// Replaces the attributes (one atomic rewrite of `zarr.json`).
    pub fn set_attributes(&mut self, attributes: Map<String, Value>) -> Result<(), ArrayError> {
        *self.array.attributes_mut() = attributes;
        self.array.store_metadata()?;
        Ok(())
    }

    /// The region checked against the array, and the bytes a buffer for it must have.
    pub(crate) fn checked(&self, region: &Region, buffer: usize) -> Result<Extent, ArrayError> {
        let extent = region.extent(self.shape())?;
        let bytes = crate::size::bytes("the region", &extent.count, self.data_type.size() as u64)?;
        if bytes != buffer as u64 {
            return Err(RegionError::BufferSize {
                buffer,
                region: bytes,
                elements: bytes / self.data_type.size() as u64,
                element_size: self.data_type.size(),
            }
            .into());
        }
        Ok(extent)
    }

    /// The bytes a region's buffer holds.
    pub fn region_bytes(&self, region: &Region) -> Result<usize, ArrayError> {
        let extent = region.extent(self.shape())?;
        let bytes = crate::size::bytes("the region", &extent.count, self.data_type.size() as u64)?;
        usize::try_from(bytes)
            .map_err(|_| ArrayError::Spec(format!("a region of {bytes} bytes does not fit in memory")))
    }

    /// Reads `region` into `out` (row-major, the region's shape, native byte order).
    pub fn read(&self, region: &Region, out: &mut [u8]) -> Result<(), ArrayError> {
        let extent = self.checked(region, out.len())?;
        let shape = region.shape();
        let targets = chunks::pieces(&self.array, &extent)?
            .into_iter()
            .map(|piece| Target { piece, output: 0, shape: &shape })
            .collect();
        crate::io_threads::io_pool().install(|| chunk_reads::read_pieces(&self.array, targets, &mut [out]))
    }

    /// Reads `region` into a new buffer.
    pub fn read_vec(&self, region: &Region) -> Result<Vec<u8>, ArrayError> {
        let mut out = vec![0; self.region_bytes(region)?];
        self.read(region, &mut out)?;
        Ok(out)
    }

    /// Writes `data` (row-major, the region's shape) into `region`: chunks covered whole are
    /// written without being read, the others read, merged and written back atomically.
    pub fn write(&self, region: &Region, data: &[u8]) -> Result<(), ArrayError> {
        let extent = self.checked(region, data.len())?;
        let shape = region.shape();
        let sources = chunks::pieces(&self.array, &extent)?
            .into_iter()
            .map(|piece| Source { piece, data, shape: &shape })
            .collect();
        crate::io_threads::io_pool().install(|| self.write_pieces(sources))
    }

    /// Creates every missing shard of an array of uncompressed shards now (HDF5's early
    /// allocation), so later writes of regions are all in place; the number created. Refused
    /// for other arrays, whose chunks are objects made when written.
    pub fn allocate_shards(&self) -> Result<u64, ArrayError> {
        match &self.shards {
            Some(layout) => layout.allocate(&self.array, self.store.as_ref()),
            None => Err(ArrayError::Spec(format!(
                "{}: only arrays of uncompressed shards (sharding_indexed with the bytes codec alone, index at \
                 the end) are allocated ahead",
                self.path
            ))),
        }
    }

    /// Writes pieces of this array, chunk by chunk (shard by shard, in place when it can).
    pub(crate) fn write_pieces(&self, sources: Vec<Source<'_>>) -> Result<(), ArrayError> {
        chunk_writes::write_pieces(&self.array, self.shards.as_ref(), self.store.as_ref(), sources)
    }

    pub(crate) fn inner(&self) -> &ZArray {
        &self.array
    }

    pub(crate) fn store(&self) -> &dyn ChunkStore {
        self.store.as_ref()
    }
}
