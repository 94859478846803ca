//! Versioning on a real directory: the current version is the plain file at the key's path,
//! kept versions live in the hidden area, and POSIX programs see and change the current one.

use std::io::Read;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::BucketSettings;
use isthmus_store::{GetRequest, ListRequest, PutRequest, Store, StoreExt, Versioning};

fn cx() -> isthmus_store::RequestContext {
    isthmus_store::RequestContext::process()
}

fn read(store: &PosixStore, key: &str, version_id: Option<&str>) -> Vec<u8> {
    let request = GetRequest { version_id: version_id.map(str::to_string), ..Default::default() };
    let mut out = Vec::new();
    store.get_object(&cx(), "bkt", key, &request).unwrap().body.read_to_end(&mut out).unwrap();
    out
}

fn versioned_store() -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    store.set_bucket_versioning(&cx(), "bkt", Versioning::Enabled).unwrap();
    (dir, store)
}

#[test]
fn the_current_version_is_the_plain_file_and_posix_changes_it() {
    let (dir, store) = versioned_store();
    let put = |bytes: &[u8]| store.put_bytes(&cx(), "bkt", "run/out.dat", bytes, PutRequest::default()).unwrap();
    let first = put(b"first").version_id.unwrap();
    let second = put(b"second").version_id.unwrap();
    let path = dir.path().join("bkt/run/out.dat");
    assert_eq!(std::fs::read(&path).unwrap(), b"second");

    // Only the current version is a file of the bucket's tree, and only it is listed.
    let files: Vec<_> = walkdir(&dir.path().join("bkt"));
    assert_eq!(files, ["run/out.dat"]);
    let listed = store.list_objects(&cx(), "bkt", &ListRequest { max_keys: 100, ..Default::default() }).unwrap();
    assert_eq!(listed.objects.len(), 1);

    // A POSIX program rewriting the file in place changes the current version, not the kept one.
    std::fs::write(&path, b"changed by a simulation").unwrap();
    assert_eq!(read(&store, "run/out.dat", None), b"changed by a simulation");
    assert_eq!(read(&store, "run/out.dat", Some(&second)), b"changed by a simulation");
    assert_eq!(read(&store, "run/out.dat", Some(&first)), b"first");

    // The state survives a restart (it is stored beside the data).
    drop(store);
    let store = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.bucket_versioning(&cx(), "bkt").unwrap(), Some(Versioning::Enabled));
    assert_eq!(read(&store, "run/out.dat", Some(&first)), b"first");
}

#[test]
fn a_deleted_key_leaves_no_file_and_comes_back_when_its_marker_goes() {
    let (dir, store) = versioned_store();
    store.put_bytes(&cx(), "bkt", "a/b/c", b"data", PutRequest::default()).unwrap();
    let marker = store.delete_object(&cx(), "bkt", "a/b/c", &Default::default()).unwrap();
    assert!(marker.delete_marker);
    assert!(!dir.path().join("bkt/a").exists(), "the prefix directories went with the file");
    let request = isthmus_store::DeleteRequest { version_id: marker.version_id };
    store.delete_object(&cx(), "bkt", "a/b/c", &request).unwrap();
    assert_eq!(std::fs::read(dir.path().join("bkt/a/b/c")).unwrap(), b"data");
}

/// Files beneath `root`, relative, without the hidden area.
fn walkdir(root: &std::path::Path) -> Vec<String> {
    fn visit(base: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_name() == ".isthmus" {
                continue;
            }
            if path.is_dir() {
                visit(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    visit(root, root, &mut out);
    out.sort();
    out
}
