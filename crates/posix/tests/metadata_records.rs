//! How object metadata records sit on the file: small in the inode, and records written by
//! earlier versions (JSON) still read.

use std::os::unix::fs::MetadataExt;

use isthmus_posix::meta::{EMPTY_ETAG, FileIdentity, MetaRecord, XATTR_NAME};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{ObjectMeta, PutRequest, Store, StoreExt};

fn cx() -> isthmus_store::RequestContext {
    isthmus_store::RequestContext::process()
}

fn store() -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    (dir, store)
}

fn attribute(path: &std::path::Path) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = rustix::fs::getxattr(path, XATTR_NAME, &mut buf).expect("the record is an xattr here");
    buf.truncate(n);
    buf
}

#[test]
fn a_plain_object_record_fits_the_inode() {
    let (dir, store) = store();
    let request = PutRequest {
        meta: ObjectMeta { content_type: Some("binary/octet-stream".into()), ..ObjectMeta::default() },
        ..PutRequest::default()
    };
    store.put_bytes(&cx(), "bkt", "d/empty", b"", request).unwrap();
    let path = dir.path().join("bkt/d/empty");
    let record = attribute(&path);
    assert!(record.len() <= 64, "{} bytes: too large for the inode", record.len());
    // On ext4 (where the suite runs) an attribute outside the inode takes a block of its own.
    if rustix::fs::statfs(&path).unwrap().f_type == 0xEF53 {
        assert_eq!(std::fs::metadata(&path).unwrap().blocks(), 0, "the record took a block");
    }
    let head = store.head_object(&cx(), "bkt", "d/empty", &Default::default()).unwrap();
    assert_eq!(head.etag, EMPTY_ETAG);
    assert_eq!(head.meta.content_type.as_deref(), Some("binary/octet-stream"));
}

#[test]
fn records_written_as_json_by_earlier_versions_still_read() {
    let (dir, store) = store();
    let path = dir.path().join("bkt/old");
    std::fs::write(&path, b"abc").unwrap();
    let stat = rustix::fs::stat(&path).unwrap();
    let mut meta = ObjectMeta { content_type: Some("text/plain".into()), ..ObjectMeta::default() };
    meta.user.insert("run".into(), "42".into());
    // Not the MD5 of "abc": proves the stored record, not a recomputation, answers.
    let record = MetaRecord {
        etag: "0123456789abcdef0123456789abcdef".into(),
        identity: FileIdentity::of(&stat),
        checksum: None,
        parts: Vec::new(),
        meta: meta.clone(),
        version_id: None,
        acl_seal: None,
    };
    let json = serde_json::to_vec(&record).unwrap();
    rustix::fs::setxattr(&path, XATTR_NAME, &json, rustix::fs::XattrFlags::empty()).unwrap();
    let head = store.head_object(&cx(), "bkt", "old", &Default::default()).unwrap();
    assert_eq!(head.etag, record.etag);
    assert_eq!(head.meta, meta);
}

#[test]
fn a_forged_compact_record_for_another_file_is_not_believed() {
    let (dir, store) = store();
    store.put_bytes(&cx(), "bkt", "a", b"first", PutRequest::default()).unwrap();
    store.put_bytes(&cx(), "bkt", "b", b"second", PutRequest::default()).unwrap();
    // Someone with write access copies a's record onto b: its identity names a's inode.
    let forged = attribute(&dir.path().join("bkt/a"));
    rustix::fs::setxattr(dir.path().join("bkt/b"), XATTR_NAME, &forged, rustix::fs::XattrFlags::empty()).unwrap();
    let head = store.head_object(&cx(), "bkt", "b", &Default::default()).unwrap();
    use md5::Digest;
    assert_eq!(head.etag, hex::encode(md5::Md5::digest(b"second")));
}
