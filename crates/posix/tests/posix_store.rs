//! Behaviour of PosixStore on a real temporary directory.

use std::io::Read;
use std::time::Duration;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{
    ByteRange, Conditions, CopyRequest, Durability, ETagMatch, GetRequest, ListRequest, MetadataMode, MultipartStore,
    ObjectMeta, PutRequest, Store, StoreError, StoreExt,
};

/// The process acting for itself, as the embedded doors do.
fn cx() -> isthmus_store::RequestContext {
    isthmus_store::RequestContext::process()
}

fn store_with(metadata: MetadataMode) -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { metadata, ..StoreOptions::default() };
    let store = PosixStore::open(dir.path(), options).unwrap();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    (dir, store)
}

fn store() -> (tempfile::TempDir, PosixStore) {
    store_with(MetadataMode::Auto)
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    hex::encode(md5::Md5::digest(bytes))
}

fn read_all(store: &PosixStore, key: &str, request: &GetRequest) -> Vec<u8> {
    let mut out = Vec::new();
    store.get_object(&cx(), "bkt", key, request).unwrap().body.read_to_end(&mut out).unwrap();
    out
}

fn put(store: &PosixStore, key: &str, bytes: &[u8]) {
    store.put_bytes(&cx(), "bkt", key, bytes, PutRequest::default()).unwrap();
}

fn list_all(store: &PosixStore, prefix: &str, delimiter: Option<&str>, page: usize) -> (Vec<String>, Vec<String>) {
    isthmus_conformance::list_all(store, "bkt", prefix, delimiter, page)
}

#[test]
fn put_is_a_plain_file_with_md5_etag_and_metadata() {
    let (dir, store) = store();
    let mut meta = ObjectMeta { content_type: Some("text/csv".into()), ..Default::default() };
    meta.user.insert("run".into(), "42".into());
    let info = store
        .put_bytes(
            &cx(),
            "bkt",
            "results/2026/a.csv",
            b"x,y\n1,2\n",
            PutRequest { meta: meta.clone(), ..Default::default() },
        )
        .unwrap();
    assert_eq!(info.etag, md5_hex(b"x,y\n1,2\n"));
    assert_eq!(std::fs::read(dir.path().join("bkt/results/2026/a.csv")).unwrap(), b"x,y\n1,2\n");
    let head = store.head_object(&cx(), "bkt", "results/2026/a.csv", &Default::default()).unwrap();
    assert_eq!(head.meta, meta);
    assert_eq!(head.size, 8);
    assert_eq!(head.etag, info.etag);
    // No temporary file is left behind.
    assert!(staging_is_empty(dir.path()));
}

/// Whether the bucket's staging area holds nothing (absent: writes were staged unnamed).
fn staging_is_empty(root: &std::path::Path) -> bool {
    std::fs::read_dir(root.join("bkt/.isthmus/tmp")).map_or(true, |mut entries| entries.next().is_none())
}

#[test]
fn posix_written_and_changed_files_get_correct_etags() {
    let (dir, store) = store();
    std::fs::write(dir.path().join("bkt/sim.out"), b"step 1").unwrap();
    assert_eq!(store.head_object(&cx(), "bkt", "sim.out", &Default::default()).unwrap().etag, md5_hex(b"step 1"));
    put(&store, "via-s3", b"original");
    std::thread::sleep(Duration::from_millis(20));
    // Same size, different bytes: the identity (mtime) changes, so the ETag is recomputed.
    std::fs::write(dir.path().join("bkt/via-s3"), b"ORIGINAL").unwrap();
    let head = store.head_object(&cx(), "bkt", "via-s3", &Default::default()).unwrap();
    assert_eq!(head.etag, md5_hex(b"ORIGINAL"));
    assert_eq!(read_all(&store, "via-s3", &GetRequest::default()), b"ORIGINAL");
}

#[test]
fn abandoned_writes_leave_nothing() {
    let (dir, store) = store();
    put(&store, "k", b"old");
    let mut writer = store.put_object(&cx(), "bkt", "k", PutRequest::default()).unwrap();
    writer.write_all(b"half of the new").unwrap();
    drop(writer);
    assert_eq!(read_all(&store, "k", &GetRequest::default()), b"old");
    // The new bytes were staged unnamed: neither the bucket nor its staging area keeps a trace.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("bkt")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(staging_is_empty(dir.path()));
}

#[test]
fn file_directory_conflicts_get_errors() {
    let (_dir, store) = store();
    put(&store, "f", b"file");
    assert!(matches!(
        store.put_bytes(&cx(), "bkt", "f/child", b"x", PutRequest::default()),
        Err(StoreError::ParentIsObject(_))
    ));
    put(&store, "d/child", b"x");
    assert!(matches!(
        store.put_bytes(&cx(), "bkt", "d", b"x", PutRequest::default()),
        Err(StoreError::ObjectIsDirectory(_))
    ));
    assert!(matches!(store.head_object(&cx(), "bkt", "d", &Default::default()), Err(StoreError::NoSuchKey)));
}

#[test]
fn directory_objects_and_pruning() {
    let (dir, store) = store();
    let info = store.put_bytes(&cx(), "bkt", "folder/", b"", PutRequest::default()).unwrap();
    assert_eq!(info.etag, "d41d8cd98f00b204e9800998ecf8427e");
    assert!(dir.path().join("bkt/folder").is_dir());
    put(&store, "folder/x", b"1");
    put(&store, "deep/er/y", b"2");
    let (keys, _) = list_all(&store, "", None, 10);
    assert_eq!(keys, ["deep/er/y", "folder/", "folder/x"]);
    store.delete_object(&cx(), "bkt", "deep/er/y", &Default::default()).unwrap();
    assert!(!dir.path().join("bkt/deep").exists(), "empty parents are pruned");
    store.delete_object(&cx(), "bkt", "folder/x", &Default::default()).unwrap();
    assert!(dir.path().join("bkt/folder").is_dir(), "a directory object stays");
    store.delete_object(&cx(), "bkt", "folder/", &Default::default()).unwrap();
    assert!(!dir.path().join("bkt/folder").exists());
    // Deleting what is not there succeeds.
    store.delete_object(&cx(), "bkt", "never/was", &Default::default()).unwrap();
}

#[test]
fn directory_objects_refuse_bytes_from_a_put_a_copy_or_parts() {
    let (dir, store) = store();
    put(&store, "full", b"data");
    put(&store, "empty", b"");
    let refused = |result: Result<isthmus_store::ObjectInfo, StoreError>| {
        assert!(matches!(result, Err(StoreError::InvalidKey(ref m)) if m.contains("cannot hold data")), "{result:?}");
    };
    refused(store.put_bytes(&cx(), "bkt", "d1/", b"bytes", PutRequest::default()));
    refused(store.copy_object(&cx(), ("bkt", "full"), ("bkt", "d2/"), &CopyRequest::default()));
    let id = store.create_multipart_upload(&cx(), "bkt", "d3/", PutRequest::default()).unwrap();
    let mut part = store
        .upload_part(&cx(), "bkt", "d3/", &id, &isthmus_store::PartRequest { part_number: 1, ..Default::default() })
        .unwrap();
    part.write_all(b"abc").unwrap();
    let etag = part.commit().unwrap().etag;
    let parts = [isthmus_store::CompletedPart { part_number: 1, etag: format!("\"{etag}\""), checksum: None }];
    refused(store.complete_multipart_upload(&cx(), "bkt", "d3/", &id, &parts, PutRequest::default()));
    for name in ["d1", "d2", "d3"] {
        assert!(!dir.path().join("bkt").join(name).exists(), "{name}");
    }
    // An empty source copies to a directory object.
    assert_eq!(
        store.copy_object(&cx(), ("bkt", "empty"), ("bkt", "d4/"), &CopyRequest::default()).unwrap().etag,
        md5_hex(b"")
    );
    assert!(dir.path().join("bkt/d4").is_dir());
}

#[cfg(unix)]
#[test]
fn planted_symlinks_do_not_leak_outside_data() {
    let (dir, store) = store();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"secret").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("bkt/leak")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("bkt/leakdir")).unwrap();
    assert!(matches!(store.get_object(&cx(), "bkt", "leak", &GetRequest::default()), Err(StoreError::NoSuchKey)));
    assert!(matches!(
        store.get_object(&cx(), "bkt", "leakdir/secret", &GetRequest::default()),
        Err(StoreError::NoSuchKey)
    ));
    assert!(store.put_bytes(&cx(), "bkt", "leakdir/new", b"x", PutRequest::default()).is_err());
    assert!(!outside.path().join("new").exists());
    let (keys, _) = list_all(&store, "", None, 100);
    assert!(keys.is_empty(), "{keys:?}");
    // Overwriting the symlink replaces the link, not its target.
    put(&store, "leak", b"mine");
    assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"secret");
}

#[test]
fn sidecar_mode_keeps_metadata_outside_the_file() {
    let (dir, store) = store_with(MetadataMode::Sidecar);
    let meta = ObjectMeta { content_type: Some("a/b".into()), ..Default::default() };
    store.put_bytes(&cx(), "bkt", "k/v", b"data", PutRequest { meta: meta.clone(), ..Default::default() }).unwrap();
    assert!(xattr_absent(&dir.path().join("bkt/k/v")));
    assert_eq!(store.head_object(&cx(), "bkt", "k/v", &Default::default()).unwrap().meta, meta);
    store.delete_object(&cx(), "bkt", "k/v", &Default::default()).unwrap();
    let sidecars = walk_files(&dir.path().join("bkt/.isthmus/meta"));
    assert!(sidecars.is_empty(), "{sidecars:?}");
}

fn xattr_absent(path: &std::path::Path) -> bool {
    let mut buf = [0u8; 256];
    rustix::fs::getxattr(path, "user.isthmus", &mut buf).is_err()
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(walk_files(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn buckets_lifecycle() {
    let (dir, store) = store();
    assert!(matches!(store.create_bucket(&cx(), "bkt", &Default::default()), Err(StoreError::BucketAlreadyExists)));
    assert!(matches!(
        store.create_bucket(&cx(), "Bad_Name", &Default::default()),
        Err(StoreError::InvalidBucketName(_))
    ));
    store.create_bucket(&cx(), "zeta", &Default::default()).unwrap();
    std::fs::create_dir(dir.path().join("made-by-posix")).unwrap();
    std::fs::create_dir(dir.path().join("Not_A_Bucket")).unwrap();
    let names: Vec<_> = store.list_buckets(&cx()).unwrap().into_iter().map(|b| b.name).collect();
    assert_eq!(names, ["bkt", "made-by-posix", "zeta"]);
    put(&store, "x", b"1");
    assert!(matches!(store.delete_bucket(&cx(), "bkt"), Err(StoreError::BucketNotEmpty)));
    store.delete_object(&cx(), "bkt", "x", &Default::default()).unwrap();
    store.delete_bucket(&cx(), "bkt").unwrap();
    assert!(matches!(store.head_bucket(&cx(), "bkt"), Err(StoreError::NoSuchBucket)));
    assert!(matches!(store.get_object(&cx(), "nope", "x", &GetRequest::default()), Err(StoreError::NoSuchBucket)));
}

#[test]
fn concurrent_writers_of_one_key_leave_one_whole_version() {
    let (_dir, store) = store();
    let store = std::sync::Arc::new(store);
    let payloads: Vec<Vec<u8>> = (0..4u8).map(|i| vec![b'a' + i; 3 << 20]).collect();
    std::thread::scope(|s| {
        for p in &payloads {
            let store = store.clone();
            s.spawn(move || {
                for _ in 0..3 {
                    let mut w = store.put_object(&cx(), "bkt", "race", PutRequest::default()).unwrap();
                    for chunk in p.chunks(64 << 10) {
                        w.write_all(chunk).unwrap();
                    }
                    w.commit().unwrap();
                }
            });
        }
    });
    let got = read_all(&store, "race", &GetRequest::default());
    assert!(payloads.contains(&got));
    assert_eq!(store.head_object(&cx(), "bkt", "race", &Default::default()).unwrap().etag, md5_hex(&got));
}

#[test]
fn relaxed_durability_and_stale_temporaries() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        PosixStore::open(dir.path(), StoreOptions { durability: Durability::Relaxed, ..Default::default() }).unwrap();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    store.put_bytes(&cx(), "bkt", "k", b"v", PutRequest::default()).unwrap();
    std::fs::create_dir_all(dir.path().join("bkt/.isthmus/tmp")).unwrap();
    std::fs::write(dir.path().join("bkt/.isthmus/tmp/crashed-writer"), b"partial").unwrap();
    assert_eq!(store.clean_stale_temporaries(Duration::from_secs(3600)).unwrap(), 0);
    assert_eq!(store.clean_stale_temporaries(Duration::ZERO).unwrap(), 1);
}

mod multipart {
    use super::*;
    use isthmus_store::{CompletedPart, ListUploadsRequest};
    use md5::Digest;

    fn upload_part(store: &PosixStore, key: &str, id: &str, n: u32, data: &[u8]) -> String {
        let mut w = store
            .upload_part(&cx(), "bkt", key, id, &isthmus_store::PartRequest { part_number: n, ..Default::default() })
            .unwrap();
        w.write_all(data).unwrap();
        w.commit().unwrap().etag
    }

    fn part(n: u32, etag: &str) -> CompletedPart {
        CompletedPart { part_number: n, etag: format!("\"{etag}\""), checksum: None }
    }

    #[test]
    fn complete_assembles_parts_with_the_s3_etag() {
        let (dir, store) = store();
        let meta = ObjectMeta { content_type: Some("application/x-hdf5".into()), ..Default::default() };
        let id = store
            .create_multipart_upload(
                &cx(),
                "bkt",
                "big/file.h5",
                PutRequest { meta: meta.clone(), ..Default::default() },
            )
            .unwrap();
        let p1 = vec![1u8; 5 << 20];
        let p2 = b"tail".to_vec();
        let e1 = upload_part(&store, "big/file.h5", &id, 1, &p1);
        // Uploading a part again replaces it.
        upload_part(&store, "big/file.h5", &id, 2, b"first try");
        let e2 = upload_part(&store, "big/file.h5", &id, 2, &p2);
        let page = store
            .list_parts(
                &cx(),
                "bkt",
                "big/file.h5",
                &id,
                &isthmus_store::ListPartsRequest { after_part: 0, max_parts: 1000 },
            )
            .unwrap();
        assert_eq!(page.parts.iter().map(|p| (p.part_number, p.size)).collect::<Vec<_>>(), [(1, 5 << 20), (2, 4)]);
        let info = store
            .complete_multipart_upload(
                &cx(),
                "bkt",
                "big/file.h5",
                &id,
                &[part(1, &e1), part(2, &e2)],
                PutRequest::default(),
            )
            .unwrap();
        let mut concat = Vec::new();
        concat.extend(md5::Md5::digest(&p1));
        concat.extend(md5::Md5::digest(&p2));
        assert_eq!(info.etag, format!("{}-2", md5_hex(&concat)));
        let head = store.head_object(&cx(), "bkt", "big/file.h5", &Default::default()).unwrap();
        assert_eq!(head.etag, info.etag);
        assert_eq!(head.meta, meta);
        let mut expected = p1.clone();
        expected.extend(&p2);
        assert_eq!(std::fs::read(dir.path().join("bkt/big/file.h5")).unwrap(), expected);
        assert!(matches!(
            store.list_parts(
                &cx(),
                "bkt",
                "big/file.h5",
                &id,
                &isthmus_store::ListPartsRequest { after_part: 0, max_parts: 10 }
            ),
            Err(StoreError::NoSuchUpload)
        ));
        // The parts are gone; a small record of the completion stays a day for retried Completes.
        let left: Vec<String> = std::fs::read_dir(dir.path().join("bkt/.isthmus/uploads"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, [format!("done.{id}")]);
    }

    #[test]
    fn s3_rules_are_enforced_and_the_upload_survives_a_bad_complete() {
        let (_dir, store) = store();
        let id = store.create_multipart_upload(&cx(), "bkt", "k", PutRequest::default()).unwrap();
        let e1 = upload_part(&store, "k", &id, 1, b"small");
        let e2 = upload_part(&store, "k", &id, 2, b"also small");
        let complete = |parts: &[CompletedPart]| {
            store.complete_multipart_upload(&cx(), "bkt", "k", &id, parts, PutRequest::default())
        };
        assert!(matches!(complete(&[part(2, &e2), part(1, &e1)]), Err(StoreError::InvalidPartOrder)));
        assert!(matches!(complete(&[part(1, "00000000000000000000000000000000")]), Err(StoreError::InvalidPart(1))));
        assert!(matches!(complete(&[part(1, &e1), part(2, &e2)]), Err(StoreError::EntityTooSmall)));
        assert!(matches!(
            store.upload_part(
                &cx(),
                "bkt",
                "k",
                &id,
                &isthmus_store::PartRequest { part_number: 0, ..Default::default() }
            ),
            Err(StoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            store.upload_part(
                &cx(),
                "bkt",
                "k",
                &id,
                &isthmus_store::PartRequest { part_number: 10_001, ..Default::default() }
            ),
            Err(StoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            store.upload_part(
                &cx(),
                "bkt",
                "other-key",
                &id,
                &isthmus_store::PartRequest { part_number: 1, ..Default::default() }
            ),
            Err(StoreError::NoSuchUpload)
        ));
        assert!(matches!(
            store.upload_part(
                &cx(),
                "bkt",
                "k",
                "../../etc",
                &isthmus_store::PartRequest { part_number: 1, ..Default::default() }
            ),
            Err(StoreError::NoSuchUpload)
        ));
        // A single small part is a valid (last) part.
        complete(&[part(1, &e1)]).unwrap();
        assert_eq!(read_all(&store, "k", &GetRequest::default()), b"small");
    }

    #[test]
    fn abort_and_complete_cannot_both_win() {
        let (_dir, store) = store();
        for _ in 0..20 {
            let id = store.create_multipart_upload(&cx(), "bkt", "race", PutRequest::default()).unwrap();
            let e1 = upload_part(&store, "race", &id, 1, b"data");
            let (a, c) = std::thread::scope(|s| {
                let a = s.spawn(|| store.abort_multipart_upload(&cx(), "bkt", "race", &id));
                let c = s.spawn(|| {
                    store.complete_multipart_upload(&cx(), "bkt", "race", &id, &[part(1, &e1)], PutRequest::default())
                });
                (a.join().unwrap(), c.join().unwrap())
            });
            assert!(a.is_ok() != c.is_ok(), "abort {a:?} complete {c:?}");
            store.delete_object(&cx(), "bkt", "race", &Default::default()).unwrap();
        }
    }

    #[test]
    fn uploads_are_listed_by_key_and_paged() {
        let (_dir, store) = store();
        let mut ids = Vec::new();
        for key in ["b", "a", "a/x", "c"] {
            ids.push((key, store.create_multipart_upload(&cx(), "bkt", key, PutRequest::default()).unwrap()));
        }
        let all = store
            .list_multipart_uploads(&cx(), "bkt", &ListUploadsRequest { max_uploads: 1000, ..Default::default() })
            .unwrap();
        assert_eq!(all.uploads.iter().map(|u| u.key.as_str()).collect::<Vec<_>>(), ["a", "a/x", "b", "c"]);
        let page = store
            .list_multipart_uploads(&cx(), "bkt", &ListUploadsRequest { max_uploads: 2, ..Default::default() })
            .unwrap();
        assert!(page.is_truncated);
        let next = store
            .list_multipart_uploads(
                &cx(),
                "bkt",
                &ListUploadsRequest {
                    max_uploads: 10,
                    key_marker: page.next_key_marker.clone(),
                    upload_id_marker: page.next_upload_id_marker.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(next.uploads.iter().map(|u| u.key.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        let prefixed = store
            .list_multipart_uploads(
                &cx(),
                "bkt",
                &ListUploadsRequest { prefix: "a".into(), max_uploads: 10, ..Default::default() },
            )
            .unwrap();
        assert_eq!(prefixed.uploads.len(), 2);
        // Listing objects does not show uploads in progress.
        assert!(
            store
                .list_objects(&cx(), "bkt", &ListRequest { max_keys: 10, ..Default::default() })
                .unwrap()
                .objects
                .is_empty()
        );
        let (key, id) = &ids[0];
        store.abort_multipart_upload(&cx(), "bkt", key, id).unwrap();
        assert!(matches!(store.abort_multipart_upload(&cx(), "bkt", key, id), Err(StoreError::NoSuchUpload)));
    }
}

mod checksums {
    use super::*;
    use isthmus_store::{ChecksumAlgorithm, ChecksumType, CompletedPart};

    #[test]
    fn put_computes_stores_and_returns_the_checksum() {
        let (dir, store) = store();
        let request = PutRequest { checksum_algorithm: Some(ChecksumAlgorithm::Crc32), ..Default::default() };
        let mut w = store.put_object(&cx(), "bkt", "c", request).unwrap();
        w.write_all(b"hello ").unwrap();
        w.write_all(b"world").unwrap();
        let digests = w.digests();
        assert_eq!(digests.checksum.as_ref().unwrap().value, "DUoRhQ==");
        assert_eq!(hex::encode(digests.md5.unwrap()), md5_hex(b"hello world"));
        let info = w.commit().unwrap();
        assert_eq!(info.checksum.unwrap().value, "DUoRhQ==");
        let head = store.head_object(&cx(), "bkt", "c", &Default::default()).unwrap();
        assert_eq!(head.checksum.as_ref().unwrap().algorithm, ChecksumAlgorithm::Crc32);
        // A copy carries the checksum over.
        let copy = store.copy_object(&cx(), ("bkt", "c"), ("bkt", "c2"), &CopyRequest::default()).unwrap();
        assert_eq!(copy.checksum.unwrap().value, "DUoRhQ==");
        // Changed by a POSIX program: the old checksum is no longer served.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(dir.path().join("bkt/c"), b"other bytes").unwrap();
        assert!(store.head_object(&cx(), "bkt", "c", &Default::default()).unwrap().checksum.is_none());
    }

    #[test]
    fn multipart_checksums_full_object_and_composite() {
        let (_dir, store) = store();
        let p1 = vec![3u8; 5 << 20];
        let p2 = b"end".to_vec();
        let mut whole = p1.clone();
        whole.extend(&p2);
        for (algorithm, kind) in [
            (ChecksumAlgorithm::Crc32c, ChecksumType::FullObject),
            (ChecksumAlgorithm::Sha256, ChecksumType::Composite),
        ] {
            let request = PutRequest { checksum_algorithm: Some(algorithm), checksum_type: kind, ..Default::default() };
            let id = store.create_multipart_upload(&cx(), "bkt", "mp", request).unwrap();
            let mut parts = Vec::new();
            for (n, data) in [(1u32, &p1), (2, &p2)] {
                let mut w = store
                    .upload_part(
                        &cx(),
                        "bkt",
                        "mp",
                        &id,
                        &isthmus_store::PartRequest { part_number: n, ..Default::default() },
                    )
                    .unwrap();
                w.write_all(data).unwrap();
                let info = w.commit().unwrap();
                parts.push(CompletedPart { part_number: n, etag: info.etag, checksum: info.checksum.map(|c| c.value) });
            }
            let listed = store
                .list_parts(&cx(), "bkt", "mp", &id, &isthmus_store::ListPartsRequest { after_part: 0, max_parts: 10 })
                .unwrap();
            assert_eq!(listed.parts[1].checksum.as_ref().unwrap().value, parts[1].checksum.clone().unwrap());
            let mut wrong = parts.clone();
            wrong[0].checksum = Some("AAAAAA==".into());
            assert!(matches!(
                store.complete_multipart_upload(&cx(), "bkt", "mp", &id, &wrong, PutRequest::default()),
                Err(StoreError::InvalidPart(1))
            ));
            let info = store.complete_multipart_upload(&cx(), "bkt", "mp", &id, &parts, PutRequest::default()).unwrap();
            let checksum = info.checksum.unwrap();
            if kind == ChecksumType::FullObject {
                let mut w = store
                    .put_object(
                        &cx(),
                        "bkt",
                        "ref",
                        PutRequest { checksum_algorithm: Some(algorithm), ..Default::default() },
                    )
                    .unwrap();
                w.write_all(&whole).unwrap();
                assert_eq!(checksum.value, w.digests().checksum.unwrap().value);
            } else {
                assert!(checksum.value.ends_with("-2"));
                assert_eq!(checksum.kind, ChecksumType::Composite);
            }
        }
    }
}

#[test]
fn part_numbers_and_part_copies() {
    let (_dir, store) = store();
    let source: Vec<u8> = (0..(6u32 << 20)).map(|i| (i % 251) as u8).collect();
    put(&store, "source", &source);
    let id = store.create_multipart_upload(&cx(), "bkt", "assembled", PutRequest::default()).unwrap();
    let range =
        |first, last| GetRequest { range: Some(ByteRange::FromTo { first, last: Some(last) }), ..Default::default() };
    let p1 = store
        .upload_part_copy(
            &cx(),
            "bkt",
            "assembled",
            &id,
            &isthmus_store::PartRequest { part_number: 1, ..Default::default() },
            ("bkt", "source"),
            &range(0, (5 << 20) - 1),
        )
        .unwrap();
    let p2 = store
        .upload_part_copy(
            &cx(),
            "bkt",
            "assembled",
            &id,
            &isthmus_store::PartRequest { part_number: 2, ..Default::default() },
            ("bkt", "source"),
            &range(5 << 20, (6 << 20) - 1),
        )
        .unwrap();
    assert_eq!(p1.etag, md5_hex(&source[..5 << 20]));
    let parts = [
        isthmus_store::CompletedPart { part_number: 1, etag: p1.etag, checksum: None },
        isthmus_store::CompletedPart { part_number: 2, etag: p2.etag, checksum: None },
    ];
    let info = store.complete_multipart_upload(&cx(), "bkt", "assembled", &id, &parts, PutRequest::default()).unwrap();
    assert_eq!(info.part_count(), 2);
    assert_eq!(read_all(&store, "assembled", &GetRequest::default()), source);
    let part2 = read_all(&store, "assembled", &GetRequest { part_number: Some(2), ..Default::default() });
    assert_eq!(part2, &source[5 << 20..]);
    let bad = store.get_object(&cx(), "bkt", "assembled", &GetRequest { part_number: Some(3), ..Default::default() });
    assert!(matches!(bad, Err(StoreError::InvalidPartNumber)));
    // A copy source condition that fails fails the part copy.
    let cond = GetRequest {
        conditions: Conditions {
            if_match: Some(ETagMatch::Any),
            if_none_match: Some(ETagMatch::Any),
            ..Default::default()
        },
        ..Default::default()
    };
    let id2 = store.create_multipart_upload(&cx(), "bkt", "x", PutRequest::default()).unwrap();
    assert!(matches!(
        store.upload_part_copy(
            &cx(),
            "bkt",
            "x",
            &id2,
            &isthmus_store::PartRequest { part_number: 1, ..Default::default() },
            ("bkt", "source"),
            &cond
        ),
        Err(StoreError::PreconditionFailed)
    ));
}

#[test]
fn racing_if_match_writers_never_lose_an_update() {
    let (_dir, store) = store();
    put(&store, "counter", b"0");
    let successes = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                for _ in 0..40 {
                    let current = read_all(&store, "counter", &GetRequest::default());
                    let etag = md5_hex(&current);
                    let next = (String::from_utf8(current).unwrap().parse::<u64>().unwrap() + 1).to_string();
                    let request = PutRequest { if_match: Some(ETagMatch::Tags(vec![etag])), ..Default::default() };
                    match store.put_bytes(&cx(), "bkt", "counter", next.as_bytes(), request) {
                        Ok(_) => {
                            successes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(StoreError::PreconditionFailed) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    let final_value: u64 =
        String::from_utf8(read_all(&store, "counter", &GetRequest::default())).unwrap().parse().unwrap();
    assert_eq!(final_value, successes.into_inner());
    assert!(final_value > 0);
}

#[test]
fn leftovers_of_dead_writers_are_cleaned_at_once() {
    let (dir, store) = store();
    put(&store, "k", b"v");
    // This process's writer tag, as the engine names its own staged files.
    let tmp = dir.path().join("bkt/.isthmus/tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let host = isthmus_posix::writer_names::unique_suffix().split('.').next().unwrap().to_string();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let dead = format!("tmp.{host}.{dead_pid:x}.0123456789abcdef.0");
    let alive = format!("tmp.{host}.{:x}.0123456789abcdef.1", std::process::id());
    let elsewhere = format!("tmp.ffffffff.{dead_pid:x}.0123456789abcdef.2");
    for name in [&dead, &alive, &elsewhere] {
        std::fs::write(tmp.join(name), b"partial").unwrap();
    }
    assert_eq!(store.clean_stale_temporaries(Duration::from_secs(3600)).unwrap(), 1);
    assert!(!tmp.join(&dead).exists());
    assert!(tmp.join(&alive).exists() && tmp.join(&elsewhere).exists());
    // An upload whose Complete was interrupted is given back under its id.
    let id = store.create_multipart_upload(&cx(), "bkt", "mp", PutRequest::default()).unwrap();
    let uploads = dir.path().join("bkt/.isthmus/uploads");
    std::fs::rename(uploads.join(&id), uploads.join(format!("claimed.{id}.{host}.{dead_pid:x}.0123456789abcdef.3")))
        .unwrap();
    assert!(matches!(
        store.list_parts(&cx(), "bkt", "mp", &id, &isthmus_store::ListPartsRequest { after_part: 0, max_parts: 10 }),
        Err(StoreError::NoSuchUpload)
    ));
    store.clean_stale_temporaries(Duration::from_secs(3600)).unwrap();
    assert!(
        store
            .list_parts(&cx(), "bkt", "mp", &id, &isthmus_store::ListPartsRequest { after_part: 0, max_parts: 10 })
            .is_ok()
    );
}

#[test]
fn a_bucket_removed_and_recreated_by_posix_tools_is_used_at_once() {
    let (dir, store) = store();
    put(&store, "k", b"v");
    std::fs::remove_dir_all(dir.path().join("bkt")).unwrap();
    std::fs::create_dir(dir.path().join("bkt")).unwrap();
    // No stale directory handle: the new, empty directory is the bucket now.
    assert!(matches!(store.head_object(&cx(), "bkt", "k", &Default::default()), Err(StoreError::NoSuchKey)));
    put(&store, "k2", b"after");
    assert_eq!(std::fs::read(dir.path().join("bkt/k2")).unwrap(), b"after");
}

#[test]
fn a_write_without_md5_gets_an_etag_unique_to_the_write_that_conditions_use() {
    let (_dir, store) = store();
    let unhashed = || PutRequest { etag_without_md5: true, ..PutRequest::default() };
    let first = store.put_bytes(&cx(), "bkt", "c/0", b"chunk", unhashed()).unwrap();
    assert!(first.etag.ends_with("-1") && first.etag != md5_hex(b"chunk"), "{}", first.etag);
    let head = store.head_object(&cx(), "bkt", "c/0", &Default::default()).unwrap();
    assert_eq!(head.etag, first.etag, "the stored ETag is served");
    let second = store.put_bytes(&cx(), "bkt", "c/0", b"chunk", unhashed()).unwrap();
    assert_ne!(second.etag, first.etag, "the same bytes written again: a new ETag");
    let stale = PutRequest { if_match: Some(ETagMatch::Tags(vec![first.etag.clone()])), ..unhashed() };
    let err = store.put_bytes(&cx(), "bkt", "c/0", b"other", stale).unwrap_err();
    assert!(matches!(err, StoreError::PreconditionFailed), "{err:?}");
    let current = PutRequest { if_match: Some(ETagMatch::Tags(vec![second.etag.clone()])), ..unhashed() };
    store.put_bytes(&cx(), "bkt", "c/0", b"other", current).unwrap();
    assert_eq!(read_all(&store, "c/0", &GetRequest::default()), b"other");
}

#[test]
fn zeros_are_a_hole_unless_something_hashes_them() {
    use std::os::unix::fs::MetadataExt;
    let (dir, store) = store();
    let mut bytes = vec![0u8; 1 << 20];
    bytes.extend_from_slice(b"tail");
    for (key, without_md5) in [("hashed", false), ("sparse", true)] {
        let request = PutRequest { etag_without_md5: without_md5, ..PutRequest::default() };
        let mut writer = store.put_object(&cx(), "bkt", key, request).unwrap();
        writer.write_zeros(1 << 20).unwrap();
        writer.write_all(b"tail").unwrap();
        let info = writer.commit().unwrap();
        assert_eq!(read_all(&store, key, &GetRequest::default()), bytes, "{key}");
        let file = std::fs::metadata(dir.path().join("bkt").join(key)).unwrap();
        assert_eq!(file.len(), bytes.len() as u64);
        if without_md5 {
            assert!(file.blocks() * 512 < 1 << 19, "{} bytes allocated for a hole", file.blocks() * 512);
        } else {
            assert_eq!(info.etag, md5_hex(&bytes), "the zeros are hashed");
        }
    }
}
