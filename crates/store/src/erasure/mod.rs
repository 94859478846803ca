//! Erasure-coded pools (in progress): the code itself (`codec`), shard placement and the store
//! over N drive directories come next.

pub mod codec;
