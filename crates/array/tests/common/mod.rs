//! What the array crate's integration tests share: the engine's chunk store behind a wrapper
//! that can slow each chunk write down and counts the chunk writes that returned.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use isthmus_array::EngineStorage;
use isthmus_array::backend::{ChunkStore, WriteCondition};
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits, StorageError,
    StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

/// The engine's store: each chunk write waits `delay` first, and `writes` counts the chunk
/// writes that have returned.
pub struct Watched {
    pub inner: EngineStorage,
    pub delay: Duration,
    pub writes: AtomicUsize,
}

impl Watched {
    pub fn new(inner: EngineStorage, delay: Duration) -> Self {
        Self { inner, delay, writes: AtomicUsize::new(0) }
    }

    /// Chunk writes that have returned.
    pub fn written(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }
}

impl ReadableStorageTraits for Watched {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        self.inner.get_partial_many(key, ranges)
    }
    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }
    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl WritableStorageTraits for Watched {
    fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        self.inner.set(key, value)
    }
    fn set_partial_many(&self, key: &StoreKey, values: OffsetBytesIterator) -> Result<(), StorageError> {
        self.inner.set_partial_many(key, values)
    }
    fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        self.inner.erase(key)
    }
    fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        self.inner.erase_prefix(prefix)
    }
    fn supports_set_partial(&self) -> bool {
        false
    }
}

impl ListableStorageTraits for Watched {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.inner.list()
    }
    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.inner.list_prefix(prefix)
    }
    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.inner.list_dir(prefix)
    }
    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        self.inner.size_prefix(prefix)
    }
}

impl ChunkStore for Watched {
    fn get_tagged(&self, key: &StoreKey) -> Result<Option<(Bytes, String)>, StorageError> {
        self.inner.get_tagged(key)
    }
    fn set_if(&self, key: &StoreKey, value: &[u8], condition: WriteCondition) -> Result<bool, StorageError> {
        let chunk = key.as_str().contains("/c/");
        if chunk && !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let written = self.inner.set_if(key, value, condition)?;
        if chunk {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        Ok(written)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn put_copy(&self, key: &StoreKey, value: &[u8], source_tag: &str) -> Result<(), StorageError> {
        self.inner.put_copy(key, value, source_tag)
    }
    fn copied_from(&self, key: &StoreKey) -> Result<Option<String>, StorageError> {
        self.inner.copied_from(key)
    }
}
