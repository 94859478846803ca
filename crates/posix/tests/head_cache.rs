//! Kept object descriptions never answer for a file that changed: HEAD and GET after a PUT,
//! after a POSIX program rewrote the file in place (same size), after another store (another
//! gateway on the same file system) changed the object's tags, after the file was replaced by
//! a rename, and after it was removed.

use std::io::Read;
use std::os::unix::fs::FileExt;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{
    GetRequest, HeadRequest, MetadataMode, ObjectChange, PutRequest, RequestContext, Store, StoreError, StoreExt,
};

fn cx() -> RequestContext {
    RequestContext::process()
}

fn open(root: &std::path::Path) -> PosixStore {
    PosixStore::open(root, StoreOptions { metadata: MetadataMode::Xattr, ..StoreOptions::default() }).unwrap()
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    hex::encode(md5::Md5::digest(bytes))
}

fn head(store: &PosixStore, key: &str) -> Result<isthmus_store::ObjectInfo, StoreError> {
    store.head_object(&cx(), "bkt", key, &HeadRequest::default())
}

fn get(store: &PosixStore, key: &str) -> (isthmus_store::ObjectInfo, Vec<u8>) {
    let mut response = store.get_object(&cx(), "bkt", key, &GetRequest::default()).unwrap();
    let mut body = Vec::new();
    response.body.read_to_end(&mut body).unwrap();
    (response.info, body)
}

#[test]
fn a_kept_description_never_outlives_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    let put = store.put_bytes(&cx(), "bkt", "k", b"first content", PutRequest::default()).unwrap();
    assert_eq!(head(&store, "k").unwrap().etag, put.etag);
    assert_eq!(get(&store, "k").0.etag, put.etag);

    // A POSIX program rewrites the file in place, same size.
    let file = std::fs::OpenOptions::new().write(true).open(dir.path().join("bkt/k")).unwrap();
    file.write_all_at(b"other content", 0).unwrap();
    drop(file);
    assert_eq!(head(&store, "k").unwrap().etag, md5_hex(b"other content"));
    let (info, body) = get(&store, "k");
    assert_eq!((info.etag, body), (md5_hex(b"other content"), b"other content".to_vec()));

    // Another gateway on the same file system changes the object's tags.
    let other = open(dir.path());
    let tags = std::collections::BTreeMap::from([("team".to_string(), "climate".to_string())]);
    other.update_object(&cx(), "bkt", "k", ObjectChange::Tags(tags.clone())).unwrap();
    assert_eq!(head(&store, "k").unwrap().meta.tags, tags);
    assert_eq!(get(&store, "k").0.meta.tags, tags);

    // The file is replaced by a rename, then removed.
    std::fs::write(dir.path().join("new"), b"replaced").unwrap();
    std::fs::rename(dir.path().join("new"), dir.path().join("bkt/k")).unwrap();
    assert_eq!(head(&store, "k").unwrap().etag, md5_hex(b"replaced"));
    std::fs::remove_file(dir.path().join("bkt/k")).unwrap();
    assert!(matches!(head(&store, "k"), Err(StoreError::NoSuchKey)));
}

#[test]
fn a_put_by_another_gateway_is_seen_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    let other = open(dir.path());
    store.put_bytes(&cx(), "bkt", "k", b"one", PutRequest::default()).unwrap();
    assert_eq!(head(&store, "k").unwrap().etag, md5_hex(b"one"));
    other.put_bytes(&cx(), "bkt", "k", b"two", PutRequest::default()).unwrap();
    assert_eq!(head(&store, "k").unwrap().etag, md5_hex(b"two"));
    assert_eq!(get(&store, "k").1, b"two");
}

#[test]
fn a_bucket_removed_by_posix_tools_answers_no_such_bucket_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    store.put_bytes(&cx(), "bkt", "k", b"one", PutRequest::default()).unwrap();
    assert_eq!(head(&store, "k").unwrap().etag, md5_hex(b"one"));
    std::fs::remove_dir_all(dir.path().join("bkt")).unwrap();
    assert!(matches!(head(&store, "k"), Err(StoreError::NoSuchBucket)), "{:?}", head(&store, "k"));
}
