//! Files written outside the gateway (by POSIX programs): their ETag is available at once,
//! never stale, stable while the file is unchanged, and no request hashes a large one; a
//! request that may not block is told so before any hashing starts.

use std::os::unix::fs::FileExt;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{GetRequest, ListRequest, PutRequest, RequestContext, Store, StoreError, StoreExt};

fn cx() -> RequestContext {
    RequestContext::process()
}

/// A store whose MD5 limit is 1 KiB, so "large" files stay small in tests.
fn store() -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PosixStore::open(dir.path(), StoreOptions { etag_md5_limit: 1024, ..StoreOptions::default() }).unwrap();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    (dir, store)
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    hex::encode(md5::Md5::digest(bytes))
}

#[test]
fn large_foreign_files_get_an_identity_etag_without_being_read() {
    let (dir, store) = store();
    let path = dir.path().join("bkt/big.h5");
    // Sparse: 10 GiB that nothing could hash in a request's time.
    std::fs::File::create(&path).unwrap().set_len(10 << 30).unwrap();
    let head = store.head_object(&cx(), "bkt", "big.h5", &Default::default()).unwrap();
    assert_eq!(head.size, 10 << 30);
    assert!(head.etag.ends_with("-1") && head.etag.len() == 34, "{}", head.etag);
    // Stable while the file does not change, the same in listings, GET and a second store
    // (another gateway on the same file system).
    assert_eq!(store.head_object(&cx(), "bkt", "big.h5", &Default::default()).unwrap().etag, head.etag);
    let listed = store.list_objects(&cx(), "bkt", &ListRequest { max_keys: 10, ..Default::default() }).unwrap();
    assert_eq!(listed.objects[0].etag, head.etag);
    let other = PosixStore::open(dir.path(), StoreOptions { etag_md5_limit: 1024, ..StoreOptions::default() }).unwrap();
    assert_eq!(other.head_object(&cx(), "bkt", "big.h5", &Default::default()).unwrap().etag, head.etag);
    let got = store.get_object(&cx(), "bkt", "big.h5", &GetRequest::default()).unwrap();
    assert_eq!(got.info.etag, head.etag);
    // A request that may not block still answers at once: nothing to hash.
    let inline = cx().with_may_block(false);
    assert_eq!(store.head_object(&inline, "bkt", "big.h5", &Default::default()).unwrap().etag, head.etag);
    // Any change (here one byte in place, which moves the mtime) gives a new ETag.
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all_at(b"x", 5).unwrap();
    let changed = store.head_object(&cx(), "bkt", "big.h5", &Default::default()).unwrap();
    assert_ne!(changed.etag, head.etag);
}

#[test]
fn small_foreign_files_get_their_md5_where_blocking_is_allowed() {
    let (dir, store) = store();
    std::fs::write(dir.path().join("bkt/small.csv"), b"a,b\n1,2\n").unwrap();
    let inline = cx().with_may_block(false);
    assert!(matches!(store.head_object(&inline, "bkt", "small.csv", &Default::default()), Err(StoreError::WouldBlock)));
    let request = ListRequest { max_keys: 10, ..Default::default() };
    assert!(matches!(store.list_objects(&inline, "bkt", &request), Err(StoreError::WouldBlock)));
    let head = store.head_object(&cx(), "bkt", "small.csv", &Default::default()).unwrap();
    assert_eq!(head.etag, md5_hex(b"a,b\n1,2\n"));
    // Stored: now an inline request gets it without hashing.
    assert_eq!(store.head_object(&inline, "bkt", "small.csv", &Default::default()).unwrap().etag, head.etag);
    assert_eq!(store.list_objects(&inline, "bkt", &request).unwrap().objects[0].etag, head.etag);
}

#[test]
fn objects_written_through_the_engine_keep_their_md5_whatever_their_size() {
    let (_dir, store) = store();
    let body = vec![7u8; 4096];
    let info = store.put_bytes(&cx(), "bkt", "k", &body, PutRequest::default()).unwrap();
    assert_eq!(info.etag, md5_hex(&body));
    let inline = cx().with_may_block(false);
    assert_eq!(store.head_object(&inline, "bkt", "k", &Default::default()).unwrap().etag, md5_hex(&body));
}
