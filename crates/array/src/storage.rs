//! Zarr storage over the engine: a `zarrs` store whose keys are the objects of one bucket under
//! a prefix. On a posix pool an array is then a directory of plain files (`zarr.json`,
//! `c/0/0`...) that zarr-python reads from the file system, and every chunk read and write goes
//! through the `Store` interface: authorization, atomic writes (a chunk is the old or the new
//! one, never torn), the request's Unix identity, and later pools.

use std::io::Read;
use std::sync::Arc;

use isthmus_store::{
    ByteRange as EngineRange, ETagMatch, GetRequest, ListRequest, PutRequest, RequestContext, Store, StoreError,
    StoreExt,
};

use crate::backend::{ChunkStore, InPlace, SOURCE_TAG, Walked, WriteCondition, patched};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits, StorageError,
    StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

/// A listing page's size when walking a prefix.
const PAGE: usize = 1000;

/// The engine's `bucket`, under `prefix`, as a Zarr store, acting as `cx`. Chunk I/O runs on
/// pool threads, not on the thread that switched for the request: the store stack's identity
/// wrapper (the session floor's) runs each call as `cx`'s Unix identity on the thread that
/// makes it.
pub struct EngineStorage {
    store: Arc<dyn Store>,
    cx: RequestContext,
    bucket: String,
    /// "" or a prefix ending in '/'.
    prefix: String,
}

impl EngineStorage {
    pub fn new(store: Arc<dyn Store>, cx: RequestContext, bucket: &str, prefix: &str) -> Self {
        let prefix = prefix.trim_matches('/');
        let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        Self { store, cx, bucket: bucket.to_string(), prefix }
    }

    /// The whole value under `object` and its ETag; `None` when there is none.
    fn get_whole(&self, object: &str) -> Result<Option<(Bytes, String)>, StorageError> {
        let response = match self.store.get_object(&self.cx, &self.bucket, object, &GetRequest::default()) {
            Ok(response) => response,
            Err(StoreError::NoSuchKey) => return Ok(None),
            Err(err) => return Err(storage_error(err)),
        };
        let mut body = response.body;
        let mut bytes = Vec::with_capacity(usize::try_from(response.info.size).unwrap_or(0));
        body.read_to_end(&mut bytes)?;
        Ok(Some((Bytes::from(bytes), response.info.etag)))
    }

    fn object_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Every object under `prefix` (relative to this store), page by page, with its size.
    fn walk(&self, prefix: &str, delimiter: bool) -> Result<Walked, StorageError> {
        let mut walked = Walked::default();
        let mut request = ListRequest {
            prefix: self.object_key(prefix),
            delimiter: delimiter.then(|| "/".to_string()),
            start_after: None,
            max_keys: PAGE,
        };
        loop {
            let page = match self.store.list_objects(&self.cx, &self.bucket, &request) {
                Ok(page) => page,
                Err(StoreError::NoSuchBucket) => return Ok(walked),
                Err(err) => return Err(storage_error(err)),
            };
            let strip = |key: &str| key.strip_prefix(&self.prefix).unwrap_or(key).to_string();
            let files = page.objects.iter().filter(|o| !o.key.ends_with('/'));
            walked.objects.extend(files.map(|o| (strip(&o.key), o.size)));
            walked.prefixes.extend(page.common_prefixes.iter().map(|p| strip(p)));
            if !page.is_truncated {
                return Ok(walked);
            }
            request.start_after = page.next_marker;
        }
    }
}

/// An engine error as zarrs reports storage errors: the S3 code and message kept.
fn storage_error(err: StoreError) -> StorageError {
    crate::engine_storage_error(err)
}

/// A zarrs byte range as the engine's (`None` for a range with nothing in it).
fn engine_range(range: ByteRange) -> Option<Option<EngineRange>> {
    match range {
        ByteRange::FromStart(0, None) => Some(None),
        ByteRange::FromStart(first, None) => Some(Some(EngineRange::FromTo { first, last: None })),
        ByteRange::FromStart(_, Some(0)) | ByteRange::Suffix(0) => None,
        ByteRange::FromStart(first, Some(length)) => {
            Some(Some(EngineRange::FromTo { first, last: Some(first + length - 1) }))
        }
        ByteRange::Suffix(length) => Some(Some(EngineRange::Suffix(length))),
    }
}

impl ReadableStorageTraits for EngineStorage {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let object = self.object_key(key.as_str());
        let mut parts = Vec::new();
        for byte_range in byte_ranges {
            let Some(range) = engine_range(byte_range) else {
                if self.size_key(key)?.is_none() {
                    return Ok(None);
                }
                parts.push(Ok(Bytes::new()));
                continue;
            };
            let request = GetRequest { range, ..GetRequest::default() };
            let response = match self.store.get_object(&self.cx, &self.bucket, &object, &request) {
                Ok(response) => response,
                Err(StoreError::NoSuchKey) => return Ok(None),
                Err(err) => return Err(storage_error(err)),
            };
            let mut body = response.body;
            let mut bytes = Vec::with_capacity(usize::try_from(body.remaining()).unwrap_or(0));
            body.read_to_end(&mut bytes)?;
            // HTTP clamps a range at the end of the value; a Zarr store must not.
            let wanted = match byte_range {
                ByteRange::FromStart(_, Some(length)) | ByteRange::Suffix(length) => Some(length),
                ByteRange::FromStart(_, None) => None,
            };
            if wanted.is_some_and(|length| length != bytes.len() as u64) {
                return Err(StorageError::Other(format!("{byte_range} is past the end of {key}")));
            }
            parts.push(Ok(Bytes::from(bytes)));
        }
        Ok(Some(Box::new(parts.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        let object = self.object_key(key.as_str());
        match self.store.head_object(&self.cx, &self.bucket, &object, &Default::default()) {
            Ok(info) => Ok(Some(info.size)),
            Err(StoreError::NoSuchKey) => Ok(None),
            Err(err) => Err(storage_error(err)),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl WritableStorageTraits for EngineStorage {
    /// One atomic PUT: readers see the old value or the new one.
    fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        self.set_if(key, &value, WriteCondition::Always).map(drop)
    }

    /// Objects are replaced whole: the value is read, patched (a gap past its end is zeros)
    /// and written back in one atomic PUT. zarrs itself never asks for this
    /// (`supports_set_partial` is false: it merges partial chunks before it writes).
    fn set_partial_many(&self, key: &StoreKey, offset_values: OffsetBytesIterator) -> Result<(), StorageError> {
        self.set(key, patched(self.get(key)?, offset_values)?)
    }

    fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        let object = self.object_key(key.as_str());
        match self.store.delete_object(&self.cx, &self.bucket, &object, &Default::default()) {
            Ok(_) | Err(StoreError::NoSuchKey) => Ok(()),
            Err(err) => Err(storage_error(err)),
        }
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        for (key, _) in self.walk(prefix.as_str(), false)?.objects {
            self.erase(&StoreKey::new(key)?)?;
        }
        Ok(())
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

impl ListableStorageTraits for EngineStorage {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.walk(prefix.as_str(), false)?.keys()
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.walk(prefix.as_str(), true)?.directory()
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        Ok(self.walk(prefix.as_str(), false)?.size())
    }
}

impl ChunkStore for EngineStorage {
    fn get_tagged(&self, key: &StoreKey) -> Result<Option<(Bytes, String)>, StorageError> {
        self.get_whole(&self.object_key(key.as_str()))
    }

    fn set_if(&self, key: &StoreKey, value: &[u8], condition: WriteCondition) -> Result<bool, StorageError> {
        let object = self.object_key(key.as_str());
        // Chunks need no MD5 ETag (only one that changes with every write); metadata keeps one.
        let mut request =
            PutRequest { etag_without_md5: !key.as_str().ends_with("zarr.json"), ..PutRequest::default() };
        match condition {
            WriteCondition::Always => {}
            WriteCondition::IfAbsent => request.if_none_match = Some(ETagMatch::Any),
            WriteCondition::IfTag(tag) => request.if_match = Some(ETagMatch::Tags(vec![tag])),
        }
        match self.store.put_bytes(&self.cx, &self.bucket, &object, value, request) {
            Ok(_) => Ok(true),
            Err(StoreError::PreconditionFailed) => Ok(false),
            Err(err) => Err(storage_error(err)),
        }
    }

    fn describe(&self) -> String {
        format!("engine:{}/{}", self.bucket, self.prefix)
    }

    fn put_copy(&self, key: &StoreKey, value: &[u8], source_tag: &str) -> Result<(), StorageError> {
        let object = self.object_key(key.as_str());
        let mut request = PutRequest::default();
        request.meta.user.insert(SOURCE_TAG.to_string(), source_tag.to_string());
        let written = self.store.put_bytes(&self.cx, &self.bucket, &object, value, request).map_err(storage_error)?;
        let md5 = crate::backend::md5_hex(value);
        if written.etag != md5 {
            return Err(StorageError::Other(format!("{key}: stored with MD5 {}, sent {md5}", written.etag)));
        }
        Ok(())
    }

    fn create_zeroed(&self, key: &StoreKey, zeros: u64, tail: &[u8]) -> Result<bool, StorageError> {
        let object = self.object_key(key.as_str());
        let request =
            PutRequest { etag_without_md5: true, if_none_match: Some(ETagMatch::Any), ..PutRequest::default() };
        let created = (|| {
            let mut writer = self.store.put_object(&self.cx, &self.bucket, &object, request)?;
            writer.write_zeros(zeros)?;
            writer.write_all(tail)?;
            writer.commit()
        })();
        match created {
            Ok(_) => Ok(true),
            Err(StoreError::PreconditionFailed) => Ok(false),
            Err(err) => Err(storage_error(err)),
        }
    }

    fn update_in_place(&self, key: &StoreKey) -> Result<InPlace, StorageError> {
        let object = self.object_key(key.as_str());
        match self.store.files().map_or(Ok(None), |files| files.object_file_for_update(&self.cx, &self.bucket, &object))
        {
            Ok(Some(file)) => Ok(InPlace::File(file)),
            Ok(None) => Ok(InPlace::Unsupported),
            Err(StoreError::NoSuchKey) => Ok(InPlace::Missing),
            Err(err) => Err(storage_error(err)),
        }
    }

    fn copied_from(&self, key: &StoreKey) -> Result<Option<String>, StorageError> {
        let object = self.object_key(key.as_str());
        match self.store.head_object(&self.cx, &self.bucket, &object, &Default::default()) {
            Ok(info) => Ok(info.meta.user.get(SOURCE_TAG).cloned()),
            Err(StoreError::NoSuchKey) => Ok(None),
            Err(err) => Err(storage_error(err)),
        }
    }
}
