//! The index of an HDF5 file, made by libhdf5 in one pass: every dataset's shape, data type,
//! byte order, layout, filter pipeline, fill value and, for a chunked dataset, every allocated
//! chunk's grid position, byte offset, stored size and filter mask (`H5Dchunk_iter`). The index
//! is plain data (serialised as JSON into the bucket's hidden area); it carries the identity of
//! the file it describes, and a file whose identity changed is indexed again.

use std::collections::HashSet;
use std::time::SystemTime;

use hdf5::types::{FloatSize, IntSize, TypeDescriptor};
use hdf5::{LinkType, LocationType};
use serde::{Deserialize, Serialize};

use crate::Hdf5Error;
use crate::filters::{FilterStep, undecodable};

/// Nested groups deeper than this are not walked.
const MAX_GROUP_DEPTH: usize = 64;
/// The most objects (groups and datasets) one file's walk visits: a crafted file cannot make
/// the index unbounded.
const MAX_OBJECTS: usize = 100_000;

/// What identifies one version of a file: any change of content changes one of these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    pub size: u64,
    pub etag: String,
    pub modified_ns: u128,
}

impl FileIdentity {
    pub fn new(size: u64, etag: &str, modified: SystemTime) -> Self {
        let modified_ns = modified.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Self { size, etag: etag.to_string(), modified_ns }
    }
}

/// One allocated chunk: its position in the chunk grid, where its bytes are, how many, and
/// which filters were skipped for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkEntry {
    pub grid: Vec<u64>,
    pub addr: u64,
    pub size: u64,
    pub mask: u32,
}

/// How a dataset's elements are laid out in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    Chunked,
    /// One run of bytes (or none yet, all fill value).
    Contiguous,
    /// Kept in the object header (tiny datasets).
    Compact,
    Virtual,
}

/// One dataset of the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatasetIndex {
    /// The full path (`/group/vel`).
    pub path: String,
    pub shape: Vec<u64>,
    /// The Zarr data type name (`float32`), if the type is one the array layer has.
    pub data_type: Option<String>,
    pub big_endian: bool,
    pub layout: Layout,
    /// The chunk shape (chunked datasets).
    pub chunk_shape: Vec<u64>,
    pub filters: Vec<FilterStep>,
    pub fill_value: f64,
    /// Why the dataset cannot be served in place, naming the filter or type; `None` if it can.
    pub not_servable: Option<String>,
    /// Allocated chunks in grid order (chunked), or the one run of bytes (contiguous; grid
    /// empty).
    pub chunks: Vec<ChunkEntry>,
}

/// Every dataset of one version of a file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileIndex {
    pub identity: FileIdentity,
    pub datasets: Vec<DatasetIndex>,
}

impl FileIndex {
    /// The dataset at `path` (with or without the leading `/`).
    pub fn dataset(&self, path: &str) -> Option<&DatasetIndex> {
        self.position(path).map(|i| &self.datasets[i])
    }

    /// Where the dataset at `path` is in `datasets`.
    pub fn position(&self, path: &str) -> Option<usize> {
        let wanted = format!("/{}", path.trim_start_matches('/'));
        self.datasets.iter().position(|d| d.path == wanted)
    }
}

/// Whether a key names a file that is HDF5 by its extension (netCDF-4 files are HDF5).
pub fn looks_like_hdf5(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    [".h5", ".hdf5", ".hdf", ".he5", ".nc", ".nc4", ".h5part"].iter().any(|ext| lower.ends_with(ext))
}

/// Indexes the open HDF5 `file` (named `name` in messages) with libhdf5, as the calling
/// thread's identity. libhdf5 opens the file through `/proc/self/fd`, so it reads exactly the
/// file the caller opened (beneath its bucket, checked), whatever happens to names meanwhile.
///
/// Only the file itself is read: the walk follows hard links only (an external link would
/// make libhdf5 open another file, anywhere, by name; a soft link names a path that may cross
/// one, and its target is indexed at its hard path anyway), and a virtual dataset is recorded
/// without its extent (asking libhdf5 for it opens the source files).
pub fn build_index(file: &std::fs::File, name: &str, identity: FileIdentity) -> Result<FileIndex, Hdf5Error> {
    use std::os::fd::AsRawFd;
    let unreadable = |e: hdf5::Error| Hdf5Error::Unreadable { path: name.to_string(), message: e.to_string() };
    let by_descriptor = format!("/proc/self/fd/{}", file.as_raw_fd());
    let file = hdf5::File::open(&by_descriptor).map_err(unreadable)?;
    let mut walk = Walk { datasets: Vec::new(), visited: HashSet::new() };
    walk.group(&file, 0).map_err(unreadable)?;
    let mut datasets = walk.datasets;
    datasets.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(FileIndex { identity, datasets })
}

/// One file's walk: what it found, and which objects it has been to (hard links may make a
/// group its own descendant, or one object reachable by many paths).
struct Walk {
    datasets: Vec<DatasetIndex>,
    visited: HashSet<String>,
}

impl Walk {
    fn group(&mut self, group: &hdf5::Group, depth: usize) -> hdf5::Result<()> {
        let hard_links = group.iter_visit_default(Vec::new(), |_, name, link, names: &mut Vec<String>| {
            if link.link_type == LinkType::Hard {
                names.push(name.to_string());
            }
            true
        })?;
        for name in hard_links {
            let info = group.loc_info_by_name(&name)?;
            if !self.visited.insert(format!("{:?}", info.token)) {
                continue;
            }
            if self.visited.len() > MAX_OBJECTS {
                return Err(format!("the file has more than {MAX_OBJECTS} groups and datasets").into());
            }
            match info.loc_type {
                LocationType::Dataset => self.datasets.push(index_dataset(&group.dataset(&name)?)?),
                LocationType::Group if depth < MAX_GROUP_DEPTH => self.group(&group.group(&name)?, depth + 1)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// The Zarr data type of an HDF5 type, or why there is none.
fn data_type_of(descriptor: &TypeDescriptor) -> Result<&'static str, String> {
    Ok(match descriptor {
        TypeDescriptor::Integer(IntSize::U1) => "int8",
        TypeDescriptor::Integer(IntSize::U2) => "int16",
        TypeDescriptor::Integer(IntSize::U4) => "int32",
        TypeDescriptor::Integer(IntSize::U8) => "int64",
        TypeDescriptor::Unsigned(IntSize::U1) => "uint8",
        TypeDescriptor::Unsigned(IntSize::U2) => "uint16",
        TypeDescriptor::Unsigned(IntSize::U4) => "uint32",
        TypeDescriptor::Unsigned(IntSize::U8) => "uint64",
        TypeDescriptor::Float(FloatSize::U4) => "float32",
        TypeDescriptor::Float(FloatSize::U8) => "float64",
        TypeDescriptor::Boolean => "bool",
        other => return Err(format!("the data type {other} is not one the array service has")),
    })
}

fn index_dataset(dataset: &hdf5::Dataset) -> hdf5::Result<DatasetIndex> {
    let path = dataset.name();
    // libhdf5 opens a virtual dataset's source files (anywhere, by name) to tell its extent.
    let is_virtual = matches!(dataset.layout(), hdf5::dataset::Layout::Virtual);
    let shape: Vec<u64> = if is_virtual { Vec::new() } else { dataset.shape().iter().map(|&n| n as u64).collect() };
    let datatype = dataset.dtype()?;
    let big_endian = matches!(datatype.byte_order(), hdf5::datatype::ByteOrder::BigEndian);
    let data_type = datatype.to_descriptor().map_err(|e| e.to_string()).and_then(|d| data_type_of(&d));
    let filters: Vec<FilterStep> = dataset.filters().iter().map(|f| FilterStep::new(f.id() as u32)).collect();
    let create = dataset.dcpl().ok();
    let fill_value = create.as_ref().and_then(|pl| pl.get_fill_value_as::<f64>().ok().flatten()).unwrap_or(0.0);
    // Raw data in external files (H5Pset_external) is never read: the index points into this
    // file only.
    let external = create.as_ref().map(|pl| pl.external()).unwrap_or_default();
    let mut chunks = Vec::new();
    let (layout, chunk_shape) = match dataset.layout() {
        hdf5::dataset::Layout::Chunked => {
            let chunk_shape: Vec<u64> = dataset.chunk().unwrap_or_default().iter().map(|&n| n as u64).collect();
            dataset.chunks_visit(|info| {
                let grid = info.offset.iter().zip(&chunk_shape).map(|(offset, extent)| offset / extent).collect();
                chunks.push(ChunkEntry { grid, addr: info.addr, size: info.size, mask: info.filter_mask });
                0
            })?;
            (Layout::Chunked, chunk_shape)
        }
        hdf5::dataset::Layout::Contiguous => {
            if let Some(addr) = dataset.offset() {
                chunks.push(ChunkEntry { grid: Vec::new(), addr, size: dataset.storage_size(), mask: 0 });
            }
            (Layout::Contiguous, Vec::new())
        }
        hdf5::dataset::Layout::Compact => (Layout::Compact, Vec::new()),
        _ => (Layout::Virtual, Vec::new()),
    };
    chunks.sort_by(|a, b| a.grid.cmp(&b.grid));
    let not_servable = match (&data_type, layout) {
        (Err(why), _) => Some(why.clone()),
        (_, Layout::Compact) => Some("compact datasets (kept in the object header) are not indexed".into()),
        (_, Layout::Virtual) => Some("virtual datasets (views of other files) are not indexed".into()),
        _ if !external.is_empty() => Some("datasets whose raw data is kept in external files are not served".into()),
        _ if shape.is_empty() => Some("scalar datasets have no chunks to serve".into()),
        _ => undecodable(&filters),
    };
    Ok(DatasetIndex {
        path,
        shape,
        data_type: data_type.ok().map(str::to_string),
        big_endian,
        layout,
        chunk_shape,
        filters,
        fill_value,
        not_servable,
        chunks,
    })
}
