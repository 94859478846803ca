//! Faults of an erasure-coded pool on real directories: drives removed (up to m read
//! byte-exact, m + 1 is a clear error), shards with flipped bytes (detected, rebuilt, healed),
//! a replaced empty drive rebuilt by heal, and leftovers of a crashed write cleaned.

use std::io::Read;
use std::path::{Path, PathBuf};

use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{DeleteRequest, GetRequest, PutRequest, Store, StoreError, StoreExt};

mod support;

use support::{BUCKET, cx, pattern, put_multipart, read};

fn drives(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.join(format!("d{i}"))).collect()
}

/// A pool without the background rebuild of replaced drives (these tests heal themselves;
/// tests/background_rebuild.rs has the background's).
fn open(paths: &[PathBuf], data: usize, parity: usize) -> ErasureStore {
    let config = ErasureConfig {
        block_size: 64 << 10,
        inline_limit: 4096,
        background_heal: false,
        ..ErasureConfig::new(paths.to_vec(), data, parity)
    };
    ErasureStore::open("ec", config, StoreOptions::default()).unwrap()
}

/// Objects of every shape: inline, one short block, many blocks with a short last one, and
/// a multipart object of two segments.
fn fill(store: &ErasureStore) -> Vec<(String, Vec<u8>)> {
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    let mut objects = Vec::new();
    for (i, len) in [0usize, 100, 4096, 5000, 64 << 10, (64 << 10) * 5 + 17].into_iter().enumerate() {
        let key = format!("obj/{i}");
        let bytes = pattern(len, i as u8);
        store.put_bytes(&cx(), BUCKET, &key, &bytes, PutRequest::default()).unwrap();
        objects.push((key, bytes));
    }
    let parts = [pattern(5 << 20, 7), pattern(123_457, 9)];
    objects.push(("mp".into(), put_multipart(store, "mp", &parts)));
    objects
}

fn check_all(store: &ErasureStore, objects: &[(String, Vec<u8>)]) {
    for (key, bytes) in objects {
        let got = read(store, key).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(got == *bytes, "{key}: bytes differ");
    }
}

/// Every shard file of the pool on drive `d`.
fn shard_files(drive: &Path) -> Vec<PathBuf> {
    let dir = drive.join(".isthmus/ec/data").join(BUCKET);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    files
}

/// Removes a drive's directory for good: a background healer still finishing an object may
/// write a shard into it meanwhile, so the removal is repeated until the directory stays gone.
fn lose_drive(path: &Path) {
    for _ in 0..100 {
        if !path.exists() {
            return;
        }
        if std::fs::remove_dir_all(path).is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            if !path.exists() {
                return;
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    panic!("{} keeps coming back", path.display());
}

#[test]
fn up_to_m_lost_drives_read_byte_exact_and_one_more_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path(), 6);
    let store = open(&paths, 4, 2);
    let objects = fill(&store);
    // Drive 1 deleted, drive 4 emptied of shards: two lost.
    lose_drive(&paths[1]);
    for file in shard_files(&paths[4]) {
        std::fs::remove_file(file).unwrap();
    }
    let store = open(&paths, 4, 2);
    check_all(&store, &objects);
    // A third drive lost: objects with shards needing it fail with ServiceUnavailable, never
    // wrong bytes; inline objects still read.
    // (Drive 4's shards were rebuilt by the healer after the reads above: delete it too.)
    // The healer of the store dropped here may still be finishing one object on drive 4.
    drop(store);
    lose_drive(&paths[2]);
    lose_drive(&paths[4]);
    let store = open(&paths, 4, 2);
    let mut failed = 0;
    for (key, bytes) in &objects {
        match read(&store, key) {
            Ok(got) => assert!(got == *bytes, "{key}: wrong bytes with m + 1 drives lost"),
            Err(err) => {
                assert_eq!(err.s3_code(), "ServiceUnavailable", "{key}: {err}");
                failed += 1;
            }
        }
    }
    assert_eq!(failed, 4, "every object not kept inline spans all six drives and must fail");
}

/// Flips a byte in the middle of every shard file on `drive`; returns the files as rotten.
fn rot(drive: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut rotten = Vec::new();
    for file in shard_files(drive) {
        let mut bytes = std::fs::read(&file).unwrap();
        if bytes.len() > 10 {
            let at = bytes.len() / 2;
            bytes[at] ^= 0x5a;
            std::fs::write(&file, &bytes).unwrap();
            rotten.push((file, bytes));
        }
    }
    assert!(!rotten.is_empty());
    rotten
}

#[test]
fn flipped_bytes_are_detected_rebuilt_and_healed() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path(), 6);
    let store = open(&paths, 4, 2);
    let objects = fill(&store);
    // Rot one byte in every shard file of drive 0, then read: the bytes are right and the
    // background healer rewrites the rotten shards the reads met (those holding data shards;
    // parity shards are not read while the data shards are good).
    let rotten = rot(&paths[0]);
    check_all(&store, &objects);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while rotten.iter().all(|(file, bad)| std::fs::read(file).is_ok_and(|now| now == *bad)) {
        assert!(std::time::Instant::now() < deadline, "reads did not get the rotten shards healed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Rot drive 3's shards and heal the pool without reading: every rotten shard (and those
    // of drive 0 the reads did not meet) is rewritten.
    let rotten = [rotten, rot(&paths[3])].concat();
    let report = store.heal(|_, _| {}).unwrap();
    assert!(report.unreadable.is_empty(), "{:?}", report.unreadable);
    assert!(report.shards_rebuilt > 0, "{report:?}");
    for (file, bad) in &rotten {
        assert_ne!(&std::fs::read(file).unwrap(), bad, "{} was not rewritten", file.display());
    }
    // Healed: two other drives may now be lost.
    lose_drive(&paths[1]);
    lose_drive(&paths[5]);
    check_all(&open(&paths, 4, 2), &objects);
    let again = open(&paths, 4, 2);
    assert_eq!(again.heal(|_, _| {}).unwrap().shards_rebuilt, 0, "nothing left to heal on the remaining drives");
}

#[test]
fn a_replaced_empty_drive_is_rebuilt_by_heal() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path(), 5);
    let store = open(&paths, 3, 2);
    let objects = fill(&store);
    drop(store);
    lose_drive(&paths[2]);
    std::fs::create_dir(&paths[2]).unwrap();
    let store = open(&paths, 3, 2);
    let states: Vec<_> = store.drive_reports().into_iter().map(|d| d.state).collect();
    assert_eq!(states[2], isthmus_erasure::DriveState::Rebuilding);
    check_all(&store, &objects);
    let mut seen = Vec::new();
    let report = store.heal(|done, total| seen.push((done, total))).unwrap();
    assert!(report.unreadable.is_empty(), "{:?}", report.unreadable);
    assert_eq!(seen.last().map(|p| p.0), Some(objects.len() as u64), "progress reaches every object");
    assert!(report.shards_rebuilt > 0 && report.manifests_repaired >= objects.len() as u64, "{report:?}");
    assert_eq!(store.drive_reports()[2].state, isthmus_erasure::DriveState::Online);
    // The rebuilt drive carries its share: two others lost, everything still reads.
    drop(store);
    lose_drive(&paths[0]);
    lose_drive(&paths[4]);
    check_all(&open(&paths, 3, 2), &objects);
}

#[test]
fn replaced_objects_leave_nothing_behind_and_deletes_remove_every_copy() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path(), 4);
    let store = open(&paths, 2, 2);
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    for round in 0..3u8 {
        store.put_bytes(&cx(), BUCKET, "k", &pattern(200_000, round), PutRequest::default()).unwrap();
    }
    assert_eq!(read(&store, "k").unwrap(), pattern(200_000, 2));
    for path in &paths {
        assert_eq!(shard_files(path).len(), 1, "only the current object's shard on {}", path.display());
    }
    store.delete_object(&cx(), BUCKET, "k", &DeleteRequest::default()).unwrap();
    assert!(matches!(read(&store, "k"), Err(StoreError::NoSuchKey)));
    for path in &paths {
        assert!(shard_files(path).is_empty());
    }
    // The delete's tombstones go once every drive has one.
    store.heal(|_, _| {}).unwrap();
    for path in &paths {
        assert!(!path.join(BUCKET).join("k").exists(), "manifest left on {}", path.display());
    }
    // A write whose stripe cannot reach the write quorum fails and leaves no shard.
    for path in &paths[1..3] {
        std::fs::remove_dir_all(path).unwrap();
    }
    let store = open(&paths, 2, 2);
    let err = store.put_bytes(&cx(), BUCKET, "new", &pattern(100_000, 1), PutRequest::default()).unwrap_err();
    assert_eq!(err.s3_code(), "ServiceUnavailable", "{err}");
    for path in [&paths[0], &paths[3]] {
        assert!(shard_files(path).is_empty(), "a failed write left shards on {}", path.display());
    }
}

#[test]
fn a_read_under_way_finishes_with_the_old_bytes_when_the_object_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path(), 6);
    let store = open(&paths, 4, 2);
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    let old = pattern(1 << 20, 1);
    store.put_bytes(&cx(), BUCKET, "k", &old, PutRequest::default()).unwrap();
    let mut response = store.get_object(&cx(), BUCKET, "k", &GetRequest::default()).unwrap();
    let mut first = vec![0u8; 1000];
    response.body.read_exact(&mut first).unwrap();
    store.put_bytes(&cx(), BUCKET, "k", &pattern(1 << 20, 2), PutRequest::default()).unwrap();
    store.delete_object(&cx(), BUCKET, "k", &DeleteRequest::default()).unwrap();
    let mut rest = Vec::new();
    response.body.read_to_end(&mut rest).unwrap();
    assert!([first, rest].concat() == old, "the read in flight saw the replacement");
    assert!(paths.iter().all(|p| shard_files(p).is_empty()), "the deleted object's shards are gone");
}
