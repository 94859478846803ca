//! The engine calls of local protocol 5 through a real socket: bucket facts and settings,
//! object changes, the versions and uploads listings, and what a client does with a gateway
//! that predates them.

use std::io::{Read, Write};

use isthmus_local::LocalStore;
use isthmus_store::{MultipartStore, PutRequest, Store, StoreError, StoreExt};

mod common;
use common::{cx, me, serve};

/// The calls of protocol 5: bucket facts and settings (a stale write still conflicts), object
/// ACL and tag changes, the versions and uploads listings.
#[test]
fn the_bucket_settings_object_changes_and_listings_work_through_the_socket() {
    use isthmus_store::{Acl, CannedAcl, ListUploadsRequest, ListVersionsRequest, ObjectChange};
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = serve(dir.path(), me());
    let local = LocalStore::connect(&path).unwrap();
    local.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    let facts = local.bucket_facts(&cx(), "bkt").unwrap();
    assert_eq!(facts, store.bucket_facts(&cx(), "bkt").unwrap());
    assert!(matches!(local.bucket_facts(&cx(), "nope"), Err(StoreError::NoSuchBucket)));
    let read = local.bucket_config(&cx(), "bkt").unwrap();
    assert_eq!(read, store.bucket_config(&cx(), "bkt").unwrap(), "with its version");
    let mut changed = read.clone();
    changed.tags.insert("project".into(), "climate".into());
    local.set_bucket_config(&cx(), "bkt", &changed).unwrap();
    assert_eq!(store.bucket_config(&cx(), "bkt").unwrap().tags, changed.tags);
    let stale = local.set_bucket_config(&cx(), "bkt", &read);
    assert!(matches!(stale, Err(StoreError::ConfigConflict)), "{stale:?}");
    local.put_bytes(&cx(), "bkt", "k", b"data", PutRequest::default()).unwrap();
    let tags = std::collections::BTreeMap::from([("a".to_string(), "b".to_string())]);
    local.update_object(&cx(), "bkt", "k", ObjectChange::Tags(tags.clone())).unwrap();
    local.update_object(&cx(), "bkt", "k", ObjectChange::Acl(Acl::canned(CannedAcl::PublicRead))).unwrap();
    let meta = store.head_object(&cx(), "bkt", "k", &Default::default()).unwrap().meta;
    assert_eq!((meta.tags, meta.acl), (tags, Some(CannedAcl::PublicRead)));
    let versions = ListVersionsRequest { max_keys: 10, ..Default::default() };
    let listed = local.list_object_versions(&cx(), "bkt", &versions).unwrap();
    assert_eq!(listed, store.list_object_versions(&cx(), "bkt", &versions).unwrap());
    assert_eq!(listed.versions.len(), 1);
    let id = local.create_multipart_upload(&cx(), "bkt", "mp", PutRequest::default()).unwrap();
    let uploads =
        local.list_multipart_uploads(&cx(), "bkt", &ListUploadsRequest { max_uploads: 10, ..Default::default() });
    assert_eq!(uploads.unwrap().uploads.iter().map(|u| u.upload_id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
}

/// An older gateway takes a request it does not know for garbage and ends the connection: the
/// client asks it none of protocol 5's calls (NotImplemented), and the connection serves on.
#[test]
fn calls_an_older_gateway_does_not_know_are_not_sent_to_it() {
    use isthmus_local::protocol::{self, MAGIC, Reply, Request, WireError};
    use isthmus_store::{ListUploadsRequest, ObjectChange};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let gateway = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut hello = [0u8; 12];
        stream.read_exact(&mut hello).unwrap();
        stream.write_all(MAGIC).unwrap();
        stream.write_all(&4u16.to_le_bytes()).unwrap();
        protocol::write_frame(&mut stream, &Ok::<_, WireError>("old-user".to_string())).unwrap();
        let mut asked = Vec::new();
        while let Ok(request) = protocol::read_frame::<Request>(&mut stream) {
            asked.push(format!("{request:?}"));
            protocol::write_frame(&mut stream, &Ok::<_, WireError>(Reply::Done)).unwrap();
        }
        asked
    });
    let local = LocalStore::connect(&path).unwrap();
    let refused = [
        local.bucket_facts(&cx(), "bkt").map(drop),
        local.bucket_config(&cx(), "bkt").map(drop),
        local.update_object(&cx(), "bkt", "k", ObjectChange::Tags(Default::default())),
        local.list_multipart_uploads(&cx(), "bkt", &ListUploadsRequest::default()).map(drop),
    ];
    for result in refused {
        assert!(matches!(&result, Err(StoreError::NotImplemented(why)) if why.contains("version 5")), "{result:?}");
    }
    local.head_bucket(&cx(), "bkt").unwrap();
    drop(local);
    let asked = gateway.join().unwrap();
    assert!(asked.len() == 1 && asked[0].starts_with("HeadBucket"), "{asked:?}");
}
