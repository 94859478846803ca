//! What the array layer needs from a store beyond zarrs' get/set/list: a value with its version
//! tag (the ETag) and a write that happens only if the value is still that version. A partial
//! chunk write is then read, merge, write-if-unchanged, retried on a conflict: two writers of
//! different parts of one chunk (threads, processes, gateways) never lose each other's update.

use zarrs::storage::{Bytes, ReadableWritableListableStorageTraits, StorageError, StoreKey};

/// When a conditional write may replace the current value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCondition {
    /// Unconditionally (a chunk the write covers whole).
    Always,
    /// Only if no value exists (`If-None-Match: *`).
    IfAbsent,
    /// Only if the current value still has this tag (`If-Match`).
    IfTag(String),
}

/// A Zarr store that can also read versions and write conditionally.
pub trait ChunkStore: ReadableWritableListableStorageTraits {
    /// The value under `key` with its version tag; `None` when there is none.
    fn get_tagged(&self, key: &StoreKey) -> Result<Option<(Bytes, String)>, StorageError>;

    /// Writes `value` if `condition` holds; `Ok(false)` when it did not (nothing written).
    fn set_if(&self, key: &StoreKey, value: &[u8], condition: WriteCondition) -> Result<bool, StorageError>;

    /// Where the store is (`engine:bucket/prefix`, `s3://host/bucket/prefix`): two handles on
    /// the same array have the same description.
    fn describe(&self) -> String;
}
