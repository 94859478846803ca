//! The libs3 drop-in's shared core. Two faces export it under libs3's names: `libs3.so.2`
//! (crates/libs3, the libs3 2.0 that Debian ships) and `libs3.so.4` (crates/libs3-4, the
//! libs3 4.1 that HPC sites build IOR against). Here: the C types (`abi`), the status numbering
//! of a face and the status of each engine error (`face`), the engine a host name selects
//! (`engine`), callback driving (`drive`), and the calls (`objects`, `multipart`, `context`).
//! Nothing here is `#[no_mangle]`: each face exports its own symbols.

#![allow(clippy::missing_safety_doc)]

pub mod abi;
pub mod context;
pub mod drive;
pub mod engine;
pub mod face;
pub mod multipart;
pub mod objects;

pub use abi::S3Status;
pub use face::Face;
