//! The pool's ETag policy: "md5" (the default) gives S3's MD5 ETags; "unique" skips the MD5
//! unless the door needs one (a declared Content-MD5), and its ETags are never mistaken for an
//! MD5; multipart uploads complete either way with the usual MD5-of-parts ETag shape.

use std::io::Read;

use isthmus_erasure::{ErasureConfig, ErasureStore, EtagPolicy};
use isthmus_posix::StoreOptions;
use isthmus_store::{CompletedPart, GetRequest, MultipartStore, PartRequest, PutRequest, RequestContext, Store};
use md5::{Digest, Md5};

fn store(dir: &std::path::Path, etag: EtagPolicy) -> ErasureStore {
    let paths = (0..6).map(|i| dir.join(format!("d{i}"))).collect();
    let config = ErasureConfig { block_size: 64 << 10, inline_limit: 4096, etag, ..ErasureConfig::new(paths, 4, 2) };
    let store = ErasureStore::open("ec", config, StoreOptions::default()).unwrap();
    store.create_bucket(&RequestContext::process(), "bkt", &Default::default()).unwrap();
    store
}

/// Bytes larger than the second-thread hashing threshold, so both hashing paths run.
fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

fn put(store: &ErasureStore, key: &str, bytes: &[u8], request: PutRequest) -> (String, Option<[u8; 16]>) {
    let mut writer = store.put_object(&RequestContext::process(), "bkt", key, request).unwrap();
    writer.write_all(&bytes[..1000]).unwrap();
    writer.write_all(&bytes[1000..]).unwrap();
    let md5 = writer.digests().md5;
    (writer.commit().unwrap().etag, md5)
}

fn read(store: &ErasureStore, key: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let object = store.get_object(&RequestContext::process(), "bkt", key, &GetRequest::default()).unwrap();
    object.body.take(u64::MAX).read_to_end(&mut got).unwrap();
    got
}

#[test]
fn md5_policy_gives_the_md5_of_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), EtagPolicy::Md5);
    let bytes = body(1 << 20);
    let (etag, md5) = put(&store, "k", &bytes, PutRequest::default());
    assert_eq!(etag, hex::encode(Md5::digest(&bytes)));
    assert_eq!(md5, Some(Md5::digest(&bytes).into()));
    assert_eq!(read(&store, "k"), bytes);
}

#[test]
fn unique_policy_skips_the_md5_unless_the_door_verifies_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), EtagPolicy::Unique);
    let bytes = body(1 << 20);
    let (first, md5) = put(&store, "k", &bytes, PutRequest::default());
    assert_eq!(md5, None, "no MD5 computed");
    assert!(first.ends_with("-1"), "a unique ETag looks like no MD5: {first}");
    let (second, _) = put(&store, "k", &bytes, PutRequest::default());
    assert_ne!(first, second, "each write has its own ETag");
    assert_eq!(read(&store, "k"), bytes);
    // A declared Content-MD5: computed, and then it is the ETag.
    let (etag, md5) = put(&store, "k", &bytes, PutRequest { md5_required: true, ..PutRequest::default() });
    assert_eq!(md5, Some(Md5::digest(&bytes).into()));
    assert_eq!(etag, hex::encode(Md5::digest(&bytes)));
}

#[test]
fn unique_policy_multipart_uploads_complete() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), EtagPolicy::Unique);
    let cx = RequestContext::process();
    let id = store.create_multipart_upload(&cx, "bkt", "mp", PutRequest::default()).unwrap();
    let parts: Vec<Vec<u8>> = vec![body(5 << 20), body(300 << 10)];
    let mut completed = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let number = i as u32 + 1;
        let request = PartRequest { part_number: number, md5_required: number == 2, ..Default::default() };
        let mut writer = store.upload_part(&cx, "bkt", "mp", &id, &request).unwrap();
        writer.write_all(part).unwrap();
        let info = writer.commit().unwrap();
        assert_eq!(info.etag.len(), 32, "a part's ETag is 16 bytes of hex: {}", info.etag);
        if number == 2 {
            assert_eq!(info.etag, hex::encode(Md5::digest(part)), "a verified part's ETag is its MD5");
        } else {
            assert_ne!(info.etag, hex::encode(Md5::digest(part)));
        }
        completed.push(CompletedPart { part_number: number, etag: info.etag, checksum: None });
    }
    let info = store.complete_multipart_upload(&cx, "bkt", "mp", &id, &completed, PutRequest::default()).unwrap();
    assert!(info.etag.ends_with("-2"), "{}", info.etag);
    assert_eq!(read(&store, "mp"), parts.concat());
}
