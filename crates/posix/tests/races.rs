//! Races between requests that review found: a DeleteBucket racing a PUT, two uploads of one
//! part number, and part checksums of uploads created without an algorithm.

use std::sync::Barrier;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::BucketSettings;
use isthmus_store::{
    ChecksumAlgorithm, ListPartsRequest, MultipartStore, PartRequest, PutRequest, RequestContext, Store, StoreError,
};

fn cx() -> RequestContext {
    RequestContext::process()
}

fn store() -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { durability: isthmus_store::Durability::Relaxed, ..StoreOptions::default() };
    let store = PosixStore::open(dir.path(), options).unwrap();
    (dir, store)
}

/// Of a DeleteBucket and a PUT that race, either the PUT lands first (the delete answers
/// BucketNotEmpty and the bucket keeps its owner and uploads) or the bucket goes and the PUT
/// fails: never a surviving bucket stripped of its internal state, never a lost acknowledged
/// object.
#[test]
fn delete_bucket_racing_a_put_loses_nothing() {
    let (_dir, store) = store();
    let mut not_empty = 0;
    for trial in 0..200 {
        store.create_bucket(&cx(), "race", &Default::default()).unwrap();
        store.set_bucket_owner(&cx(), "race", "alice").unwrap();
        let upload = store.create_multipart_upload(&cx(), "race", "pending", PutRequest::default()).unwrap();
        let barrier = Barrier::new(2);
        let (put, delete) = std::thread::scope(|s| {
            let put = s.spawn(|| {
                let mut writer = store.put_object(&cx(), "race", "obj", PutRequest::default()).unwrap();
                writer.write_all(b"payload").unwrap();
                barrier.wait();
                writer.commit()
            });
            let delete = s.spawn(|| {
                barrier.wait();
                store.delete_bucket(&cx(), "race")
            });
            (put.join().unwrap(), delete.join().unwrap())
        });
        match (put, delete) {
            (Ok(_), Err(StoreError::BucketNotEmpty)) => {
                not_empty += 1;
                assert_eq!(store.bucket_owner(&cx(), "race").unwrap().as_deref(), Some("alice"), "trial {trial}");
                let parts = ListPartsRequest { after_part: 0, max_parts: 10 };
                store.list_parts(&cx(), "race", "pending", &upload, &parts).unwrap();
                store.delete_object(&cx(), "race", "obj", &Default::default()).unwrap();
                store.delete_bucket(&cx(), "race").unwrap();
            }
            (Err(StoreError::NoSuchBucket), Ok(())) => {
                assert!(matches!(store.head_bucket(&cx(), "race"), Err(StoreError::NoSuchBucket)));
            }
            (put, delete) => panic!("trial {trial}: put {put:?}, delete {delete:?}"),
        }
    }
    eprintln!("{not_empty} of 200 trials: the PUT landed first");
}

/// Two uploads of one part number at once: both are acknowledged, and the part is one of the
/// two bodies, whole.
#[test]
fn racing_uploads_of_one_part_number_leave_one_whole_part() {
    let (_dir, store) = store();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    for trial in 0..300 {
        let id = store.create_multipart_upload(&cx(), "bkt", "mp", PutRequest::default()).unwrap();
        let barrier = Barrier::new(2);
        let etags: Vec<String> = std::thread::scope(|s| {
            let upload = |body: &'static [u8]| {
                let (store, barrier, id) = (&store, &barrier, &id);
                s.spawn(move || {
                    let request = PartRequest { part_number: 1, ..Default::default() };
                    let mut writer = store.upload_part(&cx(), "bkt", "mp", id, &request).unwrap();
                    writer.write_all(body).unwrap();
                    barrier.wait();
                    writer.commit().unwrap().etag
                })
            };
            let (a, b) = (upload(b"first body"), upload(b"second body, longer"));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let parts =
            store.list_parts(&cx(), "bkt", "mp", &id, &ListPartsRequest { after_part: 0, max_parts: 10 }).unwrap();
        assert_eq!(parts.parts.len(), 1, "trial {trial}: part 1 is missing");
        assert!(etags.contains(&parts.parts[0].etag), "trial {trial}");
        store.abort_multipart_upload(&cx(), "bkt", "mp", &id).unwrap();
    }
}

/// A part's declared checksum is computed even when the upload was created without an
/// algorithm, so the door can verify it; an algorithm other than the upload's is refused.
#[test]
fn part_checksums_are_computed_whatever_the_upload_declared() {
    let (_dir, store) = store();
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    let id = store.create_multipart_upload(&cx(), "bkt", "plain", PutRequest::default()).unwrap();
    let request =
        PartRequest { part_number: 1, checksum_algorithm: Some(ChecksumAlgorithm::Crc32), ..PartRequest::default() };
    let mut writer = store.upload_part(&cx(), "bkt", "plain", &id, &request).unwrap();
    writer.write_all(b"hello").unwrap();
    let checksum = writer.digests().checksum.expect("the declared algorithm is computed");
    assert_eq!(checksum.algorithm, ChecksumAlgorithm::Crc32);
    assert_eq!(checksum.value, "NhCmhg==");
    let with_crc32c = PutRequest { checksum_algorithm: Some(ChecksumAlgorithm::Crc32c), ..Default::default() };
    let id = store.create_multipart_upload(&cx(), "bkt", "typed", with_crc32c).unwrap();
    assert!(matches!(store.upload_part(&cx(), "bkt", "typed", &id, &request), Err(StoreError::InvalidRequest(_))));
}
