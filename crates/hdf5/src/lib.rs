//! HDF5 files served in place. A chunked (or contiguous) HDF5 dataset becomes a read-only Zarr
//! array without copying its data: libhdf5 indexes the file once (each chunk's byte offset,
//! size and filter mask, the filter pipeline, the data type), the index is kept in the bucket's
//! hidden area and rebuilt when the file's identity (size, ETag, modification time) changes,
//! and every chunk is read by byte range through the engine, as the requesting user, and
//! decoded here (deflate, shuffle, Fletcher-32, zstd). The whole array layer (selections,
//! threshold queries, region copies, `array import`) then works on it unchanged.
//!
//! Datasets whose filters or types cannot be decoded here (szip, n-bit, scale-offset, LZF,
//! blosc, compound, string...) are listed as not servable, with the reason named.

mod filters;
mod index;
mod source;

pub use filters::FilterStep;
pub use index::{ChunkEntry, DatasetIndex, FileIdentity, FileIndex, build_index, looks_like_hdf5};
pub use source::{Hdf5Chunks, Hdf5File, open_file, open_local};

use isthmus_store::StoreError;

/// What can go wrong serving an HDF5 file.
#[derive(Debug, thiserror::Error)]
pub enum Hdf5Error {
    /// The engine refused or failed (kept with its S3 code).
    #[error("{0}")]
    Store(#[from] StoreError),
    /// libhdf5 could not read the file (not HDF5, damaged).
    #[error("{path}: not a readable HDF5 file: {message}")]
    Unreadable { path: String, message: String },
    /// No such dataset in the file.
    #[error("no dataset {dataset:?} in {file}; datasets: {known}")]
    NoSuchDataset { file: String, dataset: String, known: String },
    /// The dataset cannot be served in place (the reason names the filter or type).
    #[error("dataset {dataset:?} cannot be served in place: {reason}")]
    NotServable { dataset: String, reason: String },
    /// The backend keeps no plain files (HDF5 in place needs a posix pool).
    #[error("{0}: HDF5 files are served in place only from buckets whose objects are plain files")]
    NoFile(String),
    /// The file describes sizes that overflow or exceed what is decoded at once, or links
    /// that leave it (a hostile or damaged file): refused before anything is allocated.
    #[error("dataset {dataset:?}: {reason}")]
    Refused { dataset: String, reason: String },
    /// A chunk did not decode (damaged file, checksum mismatch).
    #[error("{0}")]
    Decode(String),
    /// The dataset's array could not be opened (an engine refusal keeps its error:
    /// `ArrayError::engine_error`).
    #[error(transparent)]
    Array(isthmus_array::ArrayError),
}
