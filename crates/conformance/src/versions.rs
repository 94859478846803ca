//! Conformance checks of versioning: kept versions and delete markers, reads and deletes by
//! version id, the suspended state's null version, and ListObjectVersions paging.

use super::{bucket, cx, expect_err, put, read};
use isthmus_store::BucketSettings;
use isthmus_store::{
    CopyRequest, DeleteRequest, GetRequest, HeadRequest, ListVersionsRequest, NULL_VERSION, Store, StoreError,
    Versioning,
};

fn version(id: &str) -> GetRequest {
    GetRequest { version_id: Some(id.to_string()), ..Default::default() }
}

fn delete(store: &dyn Store, b: &str, key: &str, version_id: Option<&str>) -> isthmus_store::DeleteOutcome {
    store.delete_object(&cx(), b, key, &DeleteRequest { version_id: version_id.map(str::to_string) }).unwrap()
}

/// (key, version id, is latest, is delete marker) of every version, through pages of `max`.
fn all_versions(store: &dyn Store, b: &str, prefix: &str, max: usize) -> Vec<(String, String, bool, bool)> {
    let mut request = ListVersionsRequest { prefix: prefix.into(), max_keys: max, ..Default::default() };
    let mut found = Vec::new();
    loop {
        let page = store.list_object_versions(&cx(), b, &request).unwrap();
        assert!(page.versions.len() <= max);
        for v in &page.versions {
            found.push((v.info.key.clone(), v.info.version_id.clone().unwrap(), v.is_latest, v.delete_marker));
        }
        if !page.is_truncated {
            return found;
        }
        request.key_marker = page.next_key_marker;
        request.version_id_marker = page.next_version_id_marker;
    }
}

pub fn versions_are_kept_and_read_by_id(store: &dyn Store) {
    let b = bucket(store, "conformance-versions");
    assert_eq!(store.bucket_versioning(&cx(), &b).unwrap(), None);
    store.set_bucket_versioning(&cx(), &b, Versioning::Enabled).unwrap();
    assert_eq!(store.bucket_versioning(&cx(), &b).unwrap(), Some(Versioning::Enabled));

    let v1 = put(store, &b, "k", b"one").version_id.unwrap();
    let v2 = put(store, &b, "k", b"two!").version_id.unwrap();
    assert!(v1 != NULL_VERSION && v2 != v1);
    let latest = store.get_object(&cx(), &b, "k", &GetRequest::default()).unwrap();
    assert_eq!(latest.info.version_id.as_deref(), Some(v2.as_str()));
    assert_eq!(read(store, &b, "k", &version(&v1)), b"one");
    let head = HeadRequest { version_id: Some(v1.clone()), ..Default::default() };
    assert_eq!(store.head_object(&cx(), &b, "k", &head).unwrap().size, 3);

    let deleted = delete(store, &b, "k", None);
    assert!(deleted.delete_marker);
    let marker = deleted.version_id.unwrap();
    expect_err(
        store.get_object(&cx(), &b, "k", &GetRequest::default()).map(|r| r.info),
        |e| matches!(e, StoreError::LatestIsDeleteMarker { .. }),
        "GET of a deleted key",
    );
    expect_err(
        store.get_object(&cx(), &b, "k", &version(&marker)).map(|r| r.info),
        |e| matches!(e, StoreError::VersionIsDeleteMarker { .. }),
        "GET of a delete marker",
    );
    assert_eq!(read(store, &b, "k", &version(&v2)), b"two!");
    assert!(super::list_all(store, &b, "", None, 10).0.is_empty(), "a deleted key is not listed");
    assert_eq!(
        all_versions(store, &b, "", 100),
        [
            ("k".to_string(), marker.clone(), true, true),
            ("k".to_string(), v2.clone(), false, false),
            ("k".to_string(), v1.clone(), false, false)
        ]
    );

    // A copy from an old version.
    let copy = CopyRequest { source_version_id: Some(v1.clone()), ..Default::default() };
    store.copy_object(&cx(), (&b, "k"), (&b, "copy"), &copy).unwrap();
    assert_eq!(read(store, &b, "copy", &GetRequest::default()), b"one");

    // Removing the delete marker makes the newest version current again; so does removing
    // the current version.
    assert!(delete(store, &b, "k", Some(&marker)).delete_marker);
    assert_eq!(read(store, &b, "k", &GetRequest::default()), b"two!");
    assert!(!delete(store, &b, "k", Some(&v2)).delete_marker);
    let current = store.get_object(&cx(), &b, "k", &GetRequest::default()).unwrap();
    assert_eq!(current.info.version_id.as_deref(), Some(v1.as_str()));

    expect_err(
        store.get_object(&cx(), &b, "k", &version("not-a-version")).map(|r| r.info),
        |e| matches!(e, StoreError::InvalidArgument(_)),
        "a malformed version id",
    );
    expect_err(
        store.get_object(&cx(), &b, "k", &version("0000000000000000deadbeef")).map(|r| r.info),
        |e| matches!(e, StoreError::NoSuchVersion),
        "a version that does not exist",
    );

    // A bucket that keeps versions is not empty.
    delete(store, &b, "copy", None);
    delete(store, &b, "k", None);
    expect_err(store.delete_bucket(&cx(), &b), |e| matches!(e, StoreError::BucketNotEmpty), "versions left");
    for (key, id, _, _) in all_versions(store, &b, "", 100) {
        delete(store, &b, &key, Some(&id));
    }
    assert!(all_versions(store, &b, "", 100).is_empty());
    store.delete_bucket(&cx(), &b).unwrap();
}

pub fn suspended_versioning_replaces_the_null_version(store: &dyn Store) {
    let b = bucket(store, "conformance-suspended");
    assert_eq!(put(store, &b, "k", b"before").version_id, None);
    store.set_bucket_versioning(&cx(), &b, Versioning::Enabled).unwrap();
    let enabled = put(store, &b, "k", b"enabled").version_id.unwrap();
    assert_eq!(read(store, &b, "k", &version(NULL_VERSION)), b"before");
    store.set_bucket_versioning(&cx(), &b, Versioning::Suspended).unwrap();
    assert_eq!(put(store, &b, "k", b"first null").version_id.as_deref(), Some(NULL_VERSION));
    put(store, &b, "k", b"second null");
    let ids = |store: &dyn Store| -> Vec<(String, bool)> {
        all_versions(store, &b, "", 100).into_iter().map(|(_, id, _, marker)| (id, marker)).collect()
    };
    assert_eq!(ids(store), [(NULL_VERSION.to_string(), false), (enabled.clone(), false)]);
    assert_eq!(read(store, &b, "k", &version(NULL_VERSION)), b"second null");
    let deleted = delete(store, &b, "k", None);
    assert_eq!((deleted.version_id.as_deref(), deleted.delete_marker), (Some(NULL_VERSION), true));
    assert_eq!(ids(store), [(NULL_VERSION.to_string(), true), (enabled, false)]);
}

pub fn version_listing_pages_and_prefixes(store: &dyn Store) {
    let b = bucket(store, "conformance-version-list");
    store.set_bucket_versioning(&cx(), &b, Versioning::Enabled).unwrap();
    // `a` is deleted before `a/b` is written (a file system cannot hold both at once); its
    // versions stay beside those of `a/b`.
    for key in ["a", "a-c", "a/b", "b/x/y"] {
        put(store, &b, key, b"1");
        put(store, &b, key, b"22");
        if key == "a" {
            delete(store, &b, key, None);
        }
    }
    let everything = all_versions(store, &b, "", 1000);
    let keys: Vec<&str> = everything.iter().map(|(k, ..)| k.as_str()).collect();
    assert_eq!(keys, ["a", "a", "a", "a-c", "a-c", "a/b", "a/b", "b/x/y", "b/x/y"]);
    for max in [1, 2, 4] {
        assert_eq!(all_versions(store, &b, "", max), everything, "pages of {max}");
    }
    assert_eq!(all_versions(store, &b, "a/", 1000).len(), 2);
    let request = ListVersionsRequest { delimiter: Some("/".into()), max_keys: 1000, ..Default::default() };
    let page = store.list_object_versions(&cx(), &b, &request).unwrap();
    assert_eq!(page.common_prefixes, ["a/", "b/"]);
    let keys: Vec<&str> = page.versions.iter().map(|v| v.info.key.as_str()).collect();
    assert_eq!(keys, ["a", "a", "a", "a-c", "a-c"]);
    assert_eq!(page.versions.iter().filter(|v| v.delete_marker).count(), 1);
    // Pages that end on a common prefix continue after it.
    let mut request = ListVersionsRequest { delimiter: Some("/".into()), max_keys: 1, ..Default::default() };
    let mut prefixes = Vec::new();
    loop {
        let page = store.list_object_versions(&cx(), &b, &request).unwrap();
        prefixes.extend(page.common_prefixes);
        if !page.is_truncated {
            break;
        }
        request.key_marker = page.next_key_marker;
        request.version_id_marker = page.next_version_id_marker;
    }
    assert_eq!(prefixes, ["a/", "b/"]);
}
