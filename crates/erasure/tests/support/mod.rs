//! What the erasure pool's test files share: the request context, test bytes, reading an
//! object whole, and a multipart upload of given parts.
#![allow(dead_code)] // each test file uses its own share of these

use std::io::Read;

use isthmus_erasure::ErasureStore;
use isthmus_store::multipart::CompletedPart;
use isthmus_store::{GetRequest, MultipartStore, PartRequest, PutRequest, RequestContext, Store, StoreError};

pub const BUCKET: &str = "bkt";

pub fn cx() -> RequestContext {
    RequestContext::process()
}

/// `len` bytes that differ with `seed` and along the buffer.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ seed).collect()
}

/// The bytes of `bucket/key`.
pub fn read_in(store: &ErasureStore, bucket: &str, key: &str) -> Result<Vec<u8>, StoreError> {
    let mut response = store.get_object(&cx(), bucket, key, &GetRequest::default())?;
    let mut bytes = Vec::new();
    response.body.read_to_end(&mut bytes).map_err(StoreError::Io)?;
    Ok(bytes)
}

/// The bytes of `BUCKET/key`.
pub fn read(store: &ErasureStore, key: &str) -> Result<Vec<u8>, StoreError> {
    read_in(store, BUCKET, key)
}

/// Uploads `parts` as the multipart object `BUCKET/key`; its bytes.
pub fn put_multipart(store: &ErasureStore, key: &str, parts: &[Vec<u8>]) -> Vec<u8> {
    let id = store.create_multipart_upload(&cx(), BUCKET, key, PutRequest::default()).unwrap();
    let mut completed = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        let request = PartRequest { part_number: n as u32 + 1, ..Default::default() };
        let mut writer = store.upload_part(&cx(), BUCKET, key, &id, &request).unwrap();
        writer.write_all(part).unwrap();
        let info = writer.commit().unwrap();
        completed.push(CompletedPart { part_number: n as u32 + 1, etag: info.etag, checksum: None });
    }
    store.complete_multipart_upload(&cx(), BUCKET, key, &id, &completed, PutRequest::default()).unwrap();
    parts.concat()
}
