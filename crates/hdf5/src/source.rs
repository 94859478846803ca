//! An indexed HDF5 file of the engine (`open_file`: the index from memory, from the bucket's
//! hidden area, or made now), and each servable dataset as a read-only Zarr store
//! (`Hdf5Chunks`): `zarr.json` is made from the index, chunk `c/i/j/...` is read by byte range
//! through the engine as the requesting user (If-Match on the file's ETag, so a file changed
//! since it was indexed is never read as if it were the old one) and its HDF5 filters undone.
//! A contiguous dataset is cut into virtual chunks of whole rows of at most 4 MiB, each one run
//! of bytes. Unfiltered chunks are read only in the byte ranges a selection needs.

use std::io::Read;
use std::sync::{Arc, LazyLock};

use isthmus_array::backend::{ChunkStore, Walked, WriteCondition};
use isthmus_array::{ArraySpec, DataType, Location, ZarrArray};
use isthmus_store::{ByteRange as EngineRange, Conditions, ETagMatch, GetRequest, RequestContext, Store, StoreError};
use serde_json::json;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits, StorageError,
    StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

use crate::filters;
use crate::index::{DatasetIndex, FileIdentity, FileIndex, Layout, build_index};
use crate::{Hdf5Error, Hdf5Error::*};

/// The kind under which the index is kept in the bucket's hidden area.
const INDEX_KIND: &str = "hdf5_index";
/// The largest virtual chunk of a contiguous dataset.
const VIRTUAL_CHUNK_BYTES: u64 = 4 << 20;

/// Chunk entries kept in memory across all recently used indexes (about 64 MiB).
const RECENT_CHUNK_ENTRIES: u64 = 1 << 20;

/// Weighs an index by its chunk entries, so memory stays bounded however large files are.
#[derive(Clone)]
struct ChunkEntries;

impl quick_cache::Weighter<(String, String), Arc<FileIndex>> for ChunkEntries {
    fn weight(&self, _key: &(String, String), index: &Arc<FileIndex>) -> u64 {
        1 + index.datasets.iter().map(|d| d.chunks.len() as u64).sum::<u64>()
    }
}

/// Indexes recently used, by bucket and key (each checked against the file's identity); an
/// index too large for the budget is read from the hidden area each time instead.
static RECENT: LazyLock<quick_cache::sync::Cache<(String, String), Arc<FileIndex>, ChunkEntries>> =
    LazyLock::new(|| quick_cache::sync::Cache::with_weighter(64, RECENT_CHUNK_ENTRIES, ChunkEntries));

/// Where an indexed file's bytes are read from.
#[derive(Clone)]
enum FileBytes {
    /// An object of the engine, read as `cx`, only while its ETag is still `etag`.
    Engine { store: Arc<dyn Store>, cx: RequestContext, bucket: String, key: String, etag: String },
    /// A file outside any data root (`isthmus array import`).
    Local(Arc<std::fs::File>),
}

impl FileBytes {
    /// `length` bytes from `offset`.
    fn read(&self, name: &str, offset: u64, length: u64) -> Result<Vec<u8>, StorageError> {
        if length == 0 {
            return Ok(Vec::new());
        }
        let mut bytes = Vec::with_capacity(length as usize);
        match self {
            FileBytes::Local(file) => {
                bytes.resize(length as usize, 0);
                std::os::unix::fs::FileExt::read_exact_at(&**file, &mut bytes, offset)
                    .map_err(|e| StorageError::Other(format!("{name}: cannot read {length} bytes at {offset}: {e}")))?;
            }
            FileBytes::Engine { store, cx, bucket, key, etag } => {
                let request = GetRequest {
                    range: Some(EngineRange::FromTo { first: offset, last: Some(offset + length - 1) }),
                    conditions: Conditions {
                        if_match: Some(ETagMatch::Tags(vec![etag.clone()])),
                        ..Default::default()
                    },
                    ..GetRequest::default()
                };
                let response = store.get_object(cx, bucket, key, &request).map_err(|err| match err {
                    StoreError::PreconditionFailed => {
                        StorageError::Other(format!("{name} changed since it was indexed: repeat the request"))
                    }
                    other => isthmus_array::engine_storage_error(other),
                })?;
                response.body.take(length).read_to_end(&mut bytes)?;
                if bytes.len() as u64 != length {
                    return Err(StorageError::Other(format!("{name}: a chunk runs past the end of the file")));
                }
            }
        }
        Ok(bytes)
    }
}

/// An HDF5 file (of the engine, or a local one) with its index.
pub struct Hdf5File {
    bytes: FileBytes,
    /// How messages name the file (its key, or its path).
    name: String,
    index: Arc<FileIndex>,
}

/// Opens `bucket`/`key` as an HDF5 file, as `cx`: its index comes from memory or the bucket's
/// hidden area when it describes the file as it is now, and is made with libhdf5 otherwise
/// (then kept for the next reader). `store` is the session floor's stack (each call runs as
/// `cx`); libhdf5 opens the file by its descriptor's /proc name, which the kernel checks as the
/// calling thread, so a gateway calls this on its runner's thread for `cx` (`Runner::blocking`).
pub fn open_file(store: Arc<dyn Store>, cx: &RequestContext, bucket: &str, key: &str) -> Result<Hdf5File, Hdf5Error> {
    let identity = current_identity(&*store, cx, bucket, key)?;
    let cache_key = (bucket.to_string(), key.to_string());
    let remembered = RECENT.get(&cache_key).filter(|index| index.identity == identity).or_else(|| {
        let bytes =
            store.files().map_or(Ok(None), |files| files.read_derived(cx, bucket, key, INDEX_KIND)).ok().flatten()?;
        let index: FileIndex = serde_json::from_slice(&bytes).ok()?;
        (index.identity == identity).then(|| Arc::new(index))
    });
    let index = match remembered {
        Some(index) => index,
        None => {
            let file = store
                .files()
                .map_or(Ok(None), |files| files.object_file(cx, bucket, key))?
                .ok_or_else(|| NoFile(key.to_string()))?;
            let changed = || Decode(format!("{key} changed while it was indexed: repeat the request"));
            // The file opened is the version the identity describes, before and after it is
            // indexed, and the object is still that version afterwards.
            if !is_version(&file, &identity) {
                return Err(changed());
            }
            let index = build_index(&file, key, identity.clone())?;
            if !is_version(&file, &identity) || current_identity(&*store, cx, bucket, key)? != identity {
                return Err(changed());
            }
            let bytes = serde_json::to_vec(&index).expect("an index serialises");
            if let Err(err) =
                store.files().map_or(Ok(()), |files| files.write_derived(cx, bucket, key, INDEX_KIND, &bytes))
            {
                tracing::warn!(bucket, key, error = %err, "could not keep an HDF5 index in the hidden area");
            }
            Arc::new(index)
        }
    };
    RECENT.insert(cache_key, index.clone());
    let etag = index.identity.etag.clone();
    let bytes = FileBytes::Engine { store, cx: cx.clone(), bucket: bucket.to_string(), key: key.to_string(), etag };
    Ok(Hdf5File { bytes, name: key.to_string(), index })
}

/// Opens a local HDF5 file (outside any data root) and indexes it.
pub fn open_local(path: &std::path::Path) -> Result<Hdf5File, Hdf5Error> {
    let unreadable = |e: std::io::Error| Unreadable { path: path.display().to_string(), message: e.to_string() };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let stat = file.metadata().map_err(unreadable)?;
    let identity = FileIdentity::new(stat.len(), "", stat.modified().map_err(unreadable)?);
    let index = Arc::new(build_index(&file, &path.display().to_string(), identity)?);
    Ok(Hdf5File { bytes: FileBytes::Local(Arc::new(file)), name: path.display().to_string(), index })
}

/// Whether the open `file` has the size and modification time `identity` records.
fn is_version(file: &std::fs::File, identity: &FileIdentity) -> bool {
    file.metadata().and_then(|stat| Ok(FileIdentity::new(stat.len(), &identity.etag, stat.modified()?))).ok().as_ref()
        == Some(identity)
}

fn current_identity(
    store: &dyn Store,
    cx: &RequestContext,
    bucket: &str,
    key: &str,
) -> Result<FileIdentity, Hdf5Error> {
    let info = store.head_object(cx, bucket, key, &Default::default())?;
    Ok(FileIdentity::new(info.size, &info.etag, info.last_modified))
}

impl Hdf5File {
    pub fn index(&self) -> &FileIndex {
        &self.index
    }

    /// The dataset at `path` as a read-only Zarr store.
    pub fn chunks(&self, path: &str) -> Result<Arc<Hdf5Chunks>, Hdf5Error> {
        let Some(position) = self.index.position(path) else {
            let known: Vec<&str> = self.index.datasets.iter().map(|d| d.path.as_str()).collect();
            return Err(NoSuchDataset { file: self.name.clone(), dataset: path.to_string(), known: known.join(", ") });
        };
        let dataset = &self.index.datasets[position];
        if let Some(reason) = &dataset.not_servable {
            return Err(NotServable { dataset: dataset.path.clone(), reason: reason.clone() });
        }
        Ok(Arc::new(Hdf5Chunks::new(self, position)?))
    }

    /// The dataset at `path` as a read-only array.
    pub fn array(&self, path: &str) -> Result<ZarrArray, Hdf5Error> {
        let chunks: Arc<dyn ChunkStore> = self.chunks(path)?;
        ZarrArray::open(&Location::Chunks(chunks), "").map_err(Hdf5Error::Array)
    }

    /// Every dataset, servable or not (with the reason), as JSON.
    pub fn describe(&self) -> serde_json::Value {
        let datasets: Vec<_> = self
            .index
            .datasets
            .iter()
            .map(|d| {
                json!({
                    "path": d.path,
                    "shape": d.shape,
                    "dtype": d.data_type,
                    "byte_order": if d.big_endian { "big" } else { "little" },
                    "layout": d.layout,
                    "chunks": d.chunk_shape,
                    "chunks_allocated": d.chunks.len(),
                    "filters": d.filters.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
                    "servable": d.not_servable.is_none(),
                    "reason": d.not_servable,
                })
            })
            .collect();
        json!({"file": self.name, "format": "hdf5", "size": self.index.identity.size, "datasets": datasets})
    }
}

/// Where one chunk's bytes are in the file.
struct Stored {
    addr: u64,
    size: u64,
    mask: u32,
}

/// One dataset of an indexed HDF5 file as a read-only Zarr store.
pub struct Hdf5Chunks {
    bytes: FileBytes,
    name: String,
    index: Arc<FileIndex>,
    position: usize,
    element_size: usize,
    /// The (possibly virtual) chunk shape.
    chunk_shape: Vec<u64>,
    chunk_bytes: u64,
    metadata: Bytes,
}

impl Hdf5Chunks {
    fn new(file: &Hdf5File, position: usize) -> Result<Self, Hdf5Error> {
        let dataset = &file.index.datasets[position];
        let data_type: DataType = dataset
            .data_type
            .as_deref()
            .unwrap_or_default()
            .parse()
            .map_err(|e| NotServable { dataset: dataset.path.clone(), reason: format!("{e}") })?;
        let element_size = data_type.size();
        // The dataspace and chunk dimensions are the file author's: checked and bounded before
        // any arithmetic or allocation depends on them (issue 28, finding 1).
        let refuse = |e: isthmus_array::size::SizeError| Hdf5Error::Refused {
            dataset: dataset.path.clone(),
            reason: e.to_string(),
        };
        isthmus_array::size::bytes("the dataset", &dataset.shape, element_size as u64).map_err(refuse)?;
        let chunk_shape = match dataset.layout {
            Layout::Chunked => dataset.chunk_shape.clone(),
            _ => virtual_chunk_shape(&dataset.shape, element_size as u64),
        };
        let chunk_bytes = isthmus_array::size::chunk_bytes(&chunk_shape, element_size as u64).map_err(refuse)?;
        let mut spec = ArraySpec::new(dataset.shape.clone(), data_type, chunk_shape.clone());
        spec.fill_value = Some(dataset.fill_value);
        spec.attributes.insert(
            "hdf5".into(),
            json!({
                "file": file.name,
                "dataset": dataset.path,
                "filters": dataset.filters.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
            }),
        );
        let mut metadata = spec.metadata().map_err(|e| Decode(e.to_string()))?;
        if dataset.big_endian && element_size > 1 {
            metadata["codecs"][0]["configuration"]["endian"] = json!("big");
        }
        Ok(Self {
            bytes: file.bytes.clone(),
            name: file.name.clone(),
            index: file.index.clone(),
            position,
            element_size,
            chunk_shape,
            chunk_bytes,
            metadata: Bytes::from(serde_json::to_vec(&metadata).expect("metadata serialises")),
        })
    }

    fn dataset(&self) -> &DatasetIndex {
        &self.index.datasets[self.position]
    }

    /// The grid position named by a chunk key (`c/1/0/2`).
    fn grid_of(&self, key: &StoreKey) -> Option<Vec<u64>> {
        let rest = key.as_str().strip_prefix("c/")?;
        let grid: Option<Vec<u64>> = rest.split('/').map(|p| p.parse().ok()).collect();
        grid.filter(|g| g.len() == self.chunk_shape.len())
    }

    /// Where chunk `grid` is stored, and how many of `chunk_bytes` are there (a contiguous
    /// dataset's last virtual chunk of a row run is shorter; the rest is padding).
    fn stored(&self, grid: &[u64]) -> Option<Stored> {
        let dataset = self.dataset();
        match dataset.layout {
            Layout::Chunked => {
                // The index is in grid order: found without building a map per request.
                let found = dataset.chunks.binary_search_by(|c| c.grid.as_slice().cmp(grid)).ok()?;
                let entry = &dataset.chunks[found];
                Some(Stored { addr: entry.addr, size: entry.size, mask: entry.mask })
            }
            _ => {
                let run = dataset.chunks.first()?;
                let (start, length) =
                    contiguous_span(&dataset.shape, &self.chunk_shape, grid, self.element_size as u64)?;
                Some(Stored { addr: run.addr + start, size: length, mask: u32::MAX })
            }
        }
    }

    /// Whether a chunk's stored bytes are its elements as they are (no filter applied).
    fn unfiltered(&self, stored: &Stored) -> bool {
        let filters = self.dataset().filters.len().min(32);
        (0..filters).all(|i| stored.mask & (1 << i) != 0)
    }

    /// `length` bytes of the file from `offset`, for a chunk: the sizes come from the file's
    /// chunk index, which anyone who may write the file wrote, so no more is read (or
    /// allocated) than a chunk of `chunk_bytes` can take stored, filters' overhead included.
    fn read_file(&self, offset: u64, length: u64) -> Result<Vec<u8>, StorageError> {
        let most = stored_bound(self.chunk_bytes);
        if length > most {
            return Err(StorageError::Other(format!(
                "{}: {} has a chunk stored in {length} bytes, more than a chunk of {} bytes takes (at most {most})",
                self.name,
                self.dataset().path,
                self.chunk_bytes
            )));
        }
        self.bytes.read(&self.name, offset, length)
    }

    /// Chunk `grid`'s elements, decoded; `None` if it was never written (fill value).
    fn chunk(&self, grid: &[u64]) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(stored) = self.stored(grid) else { return Ok(None) };
        let raw = self.read_file(stored.addr, stored.size)?;
        let mut decoded =
            filters::decode(&self.dataset().filters, stored.mask, self.element_size, self.chunk_bytes as usize, raw)
                .map_err(|e| StorageError::Other(e.to_string()))?;
        if self.dataset().layout != Layout::Chunked {
            decoded.resize(self.chunk_bytes as usize, 0);
        }
        if decoded.len() as u64 != self.chunk_bytes {
            return Err(StorageError::Other(format!(
                "{}: chunk {grid:?} of {} decoded to {} bytes, not {}",
                self.name,
                self.dataset().path,
                decoded.len(),
                self.chunk_bytes
            )));
        }
        Ok(Some(decoded))
    }

    fn value(&self, key: &StoreKey) -> Result<Option<Bytes>, StorageError> {
        if key.as_str() == "zarr.json" {
            return Ok(Some(self.metadata.clone()));
        }
        let Some(grid) = self.grid_of(key) else { return Ok(None) };
        Ok(self.chunk(&grid)?.map(Bytes::from))
    }
}

/// The most bytes a chunk of `chunk_bytes` takes stored: deflate and the other filters grow
/// incompressible data by far less than an eighth, plus a few bytes of their own.
fn stored_bound(chunk_bytes: u64) -> u64 {
    chunk_bytes.saturating_add(chunk_bytes / 8).saturating_add(4096)
}

/// A contiguous dataset's virtual chunks: ones in the leading dimensions, then as many rows of
/// dimension d as fit in `VIRTUAL_CHUNK_BYTES`, then every later dimension whole, with d the
/// first dimension whose later ones fit. Each virtual chunk is then one run of bytes.
fn virtual_chunk_shape(shape: &[u64], element_size: u64) -> Vec<u64> {
    let dims = shape.len();
    let mut chunk: Vec<u64> = shape.iter().map(|&n| n.max(1)).collect();
    for d in 0..dims {
        // Saturating: a shape with empty dimensions holds nothing, whatever the others say.
        let inner = shape[d + 1..].iter().fold(element_size, |n, &e| n.saturating_mul(e.max(1)));
        if inner.saturating_mul(shape[d].max(1)) <= VIRTUAL_CHUNK_BYTES || d + 1 == dims || inner <= VIRTUAL_CHUNK_BYTES
        {
            chunk[d] = (VIRTUAL_CHUNK_BYTES / inner.max(1)).clamp(1, shape[d].max(1));
            for c in chunk.iter_mut().take(d) {
                *c = 1;
            }
            return chunk;
        }
    }
    chunk
}

/// Where virtual chunk `grid` of a contiguous dataset starts in its run of bytes, and how many
/// bytes of it exist (the last chunk along the split dimension is shorter).
fn contiguous_span(shape: &[u64], chunk: &[u64], grid: &[u64], element_size: u64) -> Option<(u64, u64)> {
    let dims = shape.len();
    let mut start_element = 0u64;
    for d in 0..dims {
        let first = grid[d] * chunk[d];
        if first >= shape[d].max(1) {
            return None;
        }
        start_element = start_element * shape[d] + first;
    }
    let split = (0..dims).find(|&d| chunk[d] != 1 || d + 1 == dims).unwrap_or(0);
    let inner: u64 = shape[split + 1..].iter().product();
    let rows = chunk[split].min(shape[split] - grid[split] * chunk[split]);
    Some((start_element * element_size, rows * inner * element_size))
}

impl ReadableStorageTraits for Hdf5Chunks {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let direct = self.grid_of(key).and_then(|grid| self.stored(&grid)).filter(|s| self.unfiltered(s));
        let mut parts = Vec::new();
        let mut whole: Option<Bytes> = None;
        let total = if key.as_str() == "zarr.json" { self.metadata.len() as u64 } else { self.chunk_bytes };
        for range in byte_ranges {
            let (start, end) = match range {
                ByteRange::FromStart(first, Some(length)) => (first, first + length),
                ByteRange::FromStart(first, None) => (first, total),
                ByteRange::Suffix(length) => (total.saturating_sub(length), total),
            };
            // An unfiltered chunk is read only where asked (padding past its stored bytes is
            // zeros); any other is read and decoded once.
            if let Some(stored) = &direct
                && end <= stored.size
            {
                parts.push(Ok(Bytes::from(self.read_file(stored.addr + start, end - start)?)));
                continue;
            }
            if whole.is_none() {
                match self.value(key)? {
                    Some(value) => whole = Some(value),
                    None => return Ok(None),
                }
            }
            let value = whole.as_ref().expect("read above");
            if end as usize > value.len() || start > end {
                return Err(StorageError::Other(format!("{range} is past the end of {key}")));
            }
            parts.push(Ok(value.slice(start as usize..end as usize)));
        }
        Ok(Some(Box::new(parts.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        if key.as_str() == "zarr.json" {
            return Ok(Some(self.metadata.len() as u64));
        }
        Ok(self.grid_of(key).and_then(|grid| self.stored(&grid)).map(|_| self.chunk_bytes))
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

fn read_only() -> StorageError {
    isthmus_array::engine_storage_error(StoreError::Denied("an HDF5 dataset served in place is read-only".into()))
}

impl WritableStorageTraits for Hdf5Chunks {
    fn set(&self, _key: &StoreKey, _value: Bytes) -> Result<(), StorageError> {
        Err(read_only())
    }

    fn set_partial_many(&self, _key: &StoreKey, _offset_values: OffsetBytesIterator) -> Result<(), StorageError> {
        Err(read_only())
    }

    fn erase(&self, _key: &StoreKey) -> Result<(), StorageError> {
        Err(read_only())
    }

    fn erase_prefix(&self, _prefix: &StorePrefix) -> Result<(), StorageError> {
        Err(read_only())
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

impl Hdf5Chunks {
    /// Every key: `zarr.json` and the allocated chunks.
    fn keys(&self) -> Vec<String> {
        let mut keys = vec!["zarr.json".to_string()];
        let dataset = self.dataset();
        if dataset.layout == Layout::Chunked {
            for entry in &dataset.chunks {
                let parts: Vec<String> = entry.grid.iter().map(u64::to_string).collect();
                keys.push(format!("c/{}", parts.join("/")));
            }
        }
        keys
    }
}

impl ListableStorageTraits for Hdf5Chunks {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.keys()
            .into_iter()
            .filter(|k| k.starts_with(prefix.as_str()))
            .map(|k| StoreKey::new(k).map_err(StorageError::from))
            .collect()
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        let mut walked = Walked::default();
        let mut dirs = std::collections::BTreeSet::new();
        for key in self.keys().into_iter().filter(|k| k.starts_with(prefix.as_str())) {
            match key[prefix.as_str().len()..].split_once('/') {
                Some((dir, _)) => drop(dirs.insert(format!("{}{dir}/", prefix.as_str()))),
                None => walked.objects.push((key, 0)),
            }
        }
        walked.prefixes = dirs.into_iter().collect();
        walked.directory()
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        let keys = self.list_prefix(prefix)?;
        Ok(keys.iter().filter_map(|k| self.size_key(k).ok().flatten()).sum())
    }
}

impl ChunkStore for Hdf5Chunks {
    fn get_tagged(&self, key: &StoreKey) -> Result<Option<(Bytes, String)>, StorageError> {
        let version = &self.index.identity;
        Ok(self.value(key)?.map(|value| (value, format!("{}-{}-{}", version.size, version.modified_ns, version.etag))))
    }

    fn set_if(&self, _key: &StoreKey, _value: &[u8], _condition: WriteCondition) -> Result<bool, StorageError> {
        Err(read_only())
    }

    fn describe(&self) -> String {
        format!("hdf5:{}#{}", self.name, self.dataset().path)
    }

    fn put_copy(&self, _key: &StoreKey, _value: &[u8], _source_tag: &str) -> Result<(), StorageError> {
        Err(read_only())
    }

    fn copied_from(&self, _key: &StoreKey) -> Result<Option<String>, StorageError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_chunks_of_a_contiguous_dataset_are_runs_of_whole_rows() {
        // 1000 x 100 float32: 400 B rows, 10485 rows fit in 4 MiB: one chunk of every row.
        assert_eq!(virtual_chunk_shape(&[1000, 100], 4), vec![1000, 100]);
        // 100 x 2000 x 1000 float32: a 2-D slab is 8 MB, so one slab's rows are split.
        let chunk = virtual_chunk_shape(&[100, 2000, 1000], 4);
        assert_eq!(chunk, vec![1, 1048, 1000]);
        // The last virtual chunk of slab 3 holds the remaining 952 rows.
        let (start, length) = contiguous_span(&[100, 2000, 1000], &chunk, &[3, 1, 0], 4).unwrap();
        assert_eq!(start, (3 * 2000 + 1048) * 1000 * 4);
        assert_eq!(length, 952 * 1000 * 4);
        assert_eq!(contiguous_span(&[100, 2000, 1000], &chunk, &[3, 2, 0], 4), None);
    }
}
