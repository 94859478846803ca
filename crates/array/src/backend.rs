//! What the array layer needs from a store beyond zarrs' get/set/list: a value with its version
//! tag (the ETag) and a write that happens only if the value is still that version. A partial
//! chunk write is then read, merge, write-if-unchanged, retried on a conflict: two writers of
//! different parts of one chunk (threads, processes, gateways) never lose each other's update.

use zarrs::storage::{
    Bytes, OffsetBytesIterator, ReadableWritableListableStorageTraits, StorageError, StoreKey, StoreKeys,
    StoreKeysPrefixes, StorePrefix,
};

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

    /// Writes a copied value, verified on arrival: its MD5 travels with it (`Content-MD5`, or
    /// compared with the engine's MD5 ETag) and `source_tag`, the source's version tag, is kept
    /// with it (`x-amz-meta-isthmus-source-etag`) so a resumed copy can skip it.
    fn put_copy(&self, key: &StoreKey, value: &[u8], source_tag: &str) -> Result<(), StorageError>;

    /// The source version tag `put_copy` kept with the value under `key`, if any.
    fn copied_from(&self, key: &StoreKey) -> Result<Option<String>, StorageError>;

    /// Creates the value under `key` as `zeros` zero bytes then `tail`, if there is none yet
    /// (`Ok(false)`: there was one). A store of files leaves the zeros a hole.
    fn create_zeroed(&self, key: &StoreKey, zeros: u64, tail: &[u8]) -> Result<bool, StorageError> {
        let mut value = vec![0u8; usize::try_from(zeros).map_err(|_| StorageError::Other("value too large".into()))?];
        value.extend_from_slice(tail);
        self.set_if(key, &value, WriteCondition::IfAbsent)
    }

    /// The value under `key` opened for writes in place
    /// (`ObjectFiles::object_file_for_update`), for layouts fixed ahead (uncompressed shards);
    /// `Unsupported` by stores that replace values whole (a remote endpoint).
    fn update_in_place(&self, key: &StoreKey) -> Result<InPlace, StorageError> {
        let _ = key;
        Ok(InPlace::Unsupported)
    }
}

/// What `ChunkStore::update_in_place` found.
pub enum InPlace {
    /// Values are only replaced whole here.
    Unsupported,
    /// There is no value under the key.
    Missing,
    File(isthmus_store::UpdateFile),
}

/// The user metadata name under which a copied object keeps its source's version tag.
pub const SOURCE_TAG: &str = "isthmus-source-etag";

/// What a walk of a prefix found: objects (key relative to the store, size) and, with a
/// delimiter, the common prefixes.
#[derive(Default)]
pub struct Walked {
    pub objects: Vec<(String, u64)>,
    pub prefixes: Vec<String>,
}

impl Walked {
    /// The objects as Zarr keys.
    pub fn keys(self) -> Result<StoreKeys, StorageError> {
        self.objects.into_iter().map(|(key, _)| StoreKey::new(key).map_err(StorageError::from)).collect()
    }

    /// The objects and prefixes as a Zarr directory listing.
    pub fn directory(self) -> Result<StoreKeysPrefixes, StorageError> {
        let keys = self.objects.into_iter().map(|(key, _)| StoreKey::new(key)).collect::<Result<Vec<_>, _>>()?;
        let prefixes = self.prefixes.into_iter().map(StorePrefix::new).collect::<Result<Vec<_>, _>>()?;
        Ok(StoreKeysPrefixes::new(keys, prefixes))
    }

    pub fn size(&self) -> u64 {
        self.objects.iter().map(|(_, size)| size).sum()
    }
}

/// `current` (or nothing) patched at the given offsets, a gap past its end filled with zeros:
/// objects are replaced whole, so a partial set reads, patches and writes back.
pub fn patched(current: Option<Bytes>, offset_values: OffsetBytesIterator) -> Result<Bytes, StorageError> {
    let mut value = current.map(|bytes| bytes.to_vec()).unwrap_or_default();
    for (offset, bytes) in offset_values {
        let start = usize::try_from(offset).map_err(|_| StorageError::Other("offset too large".into()))?;
        if value.len() < start + bytes.len() {
            value.resize(start + bytes.len(), 0);
        }
        value[start..start + bytes.len()].copy_from_slice(&bytes);
    }
    Ok(Bytes::from(value))
}

pub(crate) fn md5_bytes(bytes: &[u8]) -> [u8; 16] {
    use md5::Digest;
    md5::Md5::digest(bytes).into()
}

pub(crate) fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(md5_bytes(bytes))
}
