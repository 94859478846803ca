//! n-dimensional arrays on the Isthmus engine. Arrays are Zarr v3 (through the `zarrs` crate,
//! so zarr-python, xarray and tensorstore read them), stored through the engine's `Store`:
//! on a posix pool an array is at once a directory of plain files and readable over S3.
//! `storage` is the Zarr store over the engine, `region` reads and writes regions.

pub mod region;
pub mod storage;

pub use region::{Region, RegionError, read_region, write_region};
pub use storage::EngineStorage;
