//! The local door (the "S3Remote" layout: one gateway per node): applications on the node
//! reach the gateway's engine over a Unix socket, without HTTP and without keys. The kernel
//! tells the gateway the peer's uid (`SO_PEERCRED`), which maps to an S3 user and, with
//! `identity = "posix"`, to the Unix identity its calls run as. `protocol` is the wire format,
//! `server` the gateway's side, `client` a `Store` that the in-process doors use for `unix:`
//! addresses (its connections in `pool`), `in_place` in-place writes as requests (both sides).

pub mod client;
mod in_place;
mod pool;
pub mod protocol;
pub mod server;
pub mod transport;

pub use client::{LocalStore, socket_path};
pub use server::{LocalSocket, Peers};
