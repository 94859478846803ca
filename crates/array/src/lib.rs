//! n-dimensional arrays on the Isthmus engine. Arrays are Zarr v3 (through the `zarrs` crate,
//! so zarr-python, xarray and tensorstore read them), stored through the engine's `Store` or on
//! a remote S3 endpoint: on a posix pool an array is at once a directory of plain files and
//! readable over S3. `spec` says what an array is, `array` opens and creates arrays and groups
//! and moves regions, `chunks` does the chunk-by-chunk work (`in_place`: into
//! uncompressed shards), `transfer` runs regions
//! asynchronously with a chosen consistency point, `storage` and `remote` are the Zarr stores.

mod array;
pub mod backend;
mod chunk_reads;
mod chunk_writes;
mod chunks;
mod in_place;
mod io_threads;
mod region;
pub mod region_copy;
pub mod remote;
pub mod select;
pub mod size;
pub mod spec;
pub mod storage;
pub mod transfer;

pub use array::{Location, ZarrArray, create_group, remove_node};
pub use region::{Region, RegionError};
pub use region_copy::{CopyMode, CopyReport, CopyTimes, copy_region};
pub use remote::{RemoteEndpoint, S3Storage};
pub use select::{Expr, Selection, Slabs, parse_selection};
pub use spec::{ArraySpec, Codec, DataType};
pub use storage::EngineStorage;
pub use transfer::{Consistency, Direction, Status, Transfer, TransferOptions, Transfers};

/// Why an array operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ArrayError {
    #[error("{0}")]
    Spec(String),
    #[error(transparent)]
    Region(#[from] RegionError),
    /// A size from the array's metadata or a region that overflows or is too large.
    #[error(transparent)]
    Size(#[from] size::SizeError),
    #[error("no array or group at {0}")]
    NotFound(String),
    #[error("an array or group already exists at {0}")]
    Exists(String),
    #[error("chunk {key}: gave up after too many concurrent writers changed it")]
    Conflict { key: String },
    #[error("{0}")]
    Transfer(String),
    #[error(transparent)]
    Zarr(#[from] zarrs::array::ArrayError),
    #[error(transparent)]
    Open(#[from] zarrs::array::ArrayCreateError),
    #[error(transparent)]
    Codec(#[from] zarrs::array::CodecError),
    #[error("storage: {0}")]
    Storage(#[from] zarrs::storage::StorageError),
}

impl ArrayError {
    /// The engine's error, when an engine call failed beneath a Zarr read or write (carried
    /// through zarrs as the storage error `engine_storage_error` made): its S3 code is the
    /// answer's, not the array's.
    pub fn engine_error(&self) -> Option<&isthmus_store::StoreError> {
        use zarrs::array::{ArrayCreateError, ArrayError as Zarr, CodecError};
        let storage = match self {
            Self::Storage(storage)
            | Self::Zarr(Zarr::StorageError(storage))
            | Self::Zarr(Zarr::CodecError(CodecError::StorageError(storage)))
            | Self::Open(ArrayCreateError::StorageError(storage))
            | Self::Codec(CodecError::StorageError(storage)) => storage,
            _ => return None,
        };
        engine_error_of(storage)
    }
}

/// A zarrs storage error that carries an engine error, typed, to whoever reads the array
/// (`ArrayError::engine_error`, `engine_error_of`).
pub fn engine_storage_error(err: isthmus_store::StoreError) -> zarrs::storage::StorageError {
    zarrs::storage::StorageError::IOError(std::sync::Arc::new(std::io::Error::other(err)))
}

/// The engine error a zarrs storage error carries, if `engine_storage_error` made it.
pub fn engine_error_of(err: &zarrs::storage::StorageError) -> Option<&isthmus_store::StoreError> {
    match err {
        zarrs::storage::StorageError::IOError(io) => io.get_ref()?.downcast_ref::<isthmus_store::StoreError>(),
        _ => None,
    }
}

impl From<zarrs::storage::StorePrefixError> for ArrayError {
    fn from(err: zarrs::storage::StorePrefixError) -> Self {
        Self::Spec(err.to_string())
    }
}

impl From<zarrs::storage::StoreKeyError> for ArrayError {
    fn from(err: zarrs::storage::StoreKeyError) -> Self {
        Self::Spec(err.to_string())
    }
}

/// A new pool thread inherits the credentials of the thread that created it, which may be
/// switched to a request's user: it starts as the process (the gateway) instead, and each chunk
/// call runs as its own request (the store stack's identity wrapper).
fn reset_thread_identity() {
    if let Err(err) = isthmus_store::identity::init_request_thread() {
        eprintln!("isthmus-array: cannot reset a pool thread's identity: {err}");
    }
}
