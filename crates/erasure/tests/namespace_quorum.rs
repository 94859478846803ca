//! The bucket namespace of an erasure-coded pool is decided by the drives together: a drive
//! that lost its bucket directories (the first one included), kept a deleted bucket, holds a
//! bucket nobody made, or missed a settings change decides nothing, and is repaired.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{BucketConfig, ListRequest, PutRequest, Store, StoreError, StoreExt};

mod support;

use support::{BUCKET, cx, pattern, read_in as read};

fn drives(dir: &Path) -> Vec<PathBuf> {
    (0..6).map(|i| dir.join(format!("d{i}"))).collect()
}

/// A fresh view of the 4+2 pool over `paths` (no namespace decision carried over).
fn open(paths: &[PathBuf]) -> ErasureStore {
    let config = ErasureConfig { block_size: 64 << 10, inline_limit: 4096, ..ErasureConfig::new(paths.to_vec(), 4, 2) };
    ErasureStore::open("ec", config, StoreOptions::default()).unwrap()
}

/// A bucket with inline, one-block and many-block objects, some under a folder, and tags.
fn fill(store: &ErasureStore) -> BTreeMap<String, Vec<u8>> {
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    let settings = store.bucket_config(&cx(), BUCKET).unwrap();
    let tagged = BucketConfig { tags: [("team".to_string(), "climate".to_string())].into(), ..settings };
    store.set_bucket_config(&cx(), BUCKET, &tagged).unwrap();
    let mut objects = BTreeMap::new();
    for (i, len) in [10usize, 5000, (64 << 10) * 3 + 5].into_iter().enumerate() {
        for dir in ["", "run/"] {
            let key = format!("{dir}obj{i}");
            let bytes = pattern(len, i as u8);
            store.put_bytes(&cx(), BUCKET, &key, &bytes, PutRequest::default()).unwrap();
            objects.insert(key, bytes);
        }
    }
    objects
}

fn listed_keys(store: &ErasureStore, bucket: &str, max_keys: usize) -> Vec<String> {
    let mut keys = Vec::new();
    let mut request = ListRequest { max_keys, ..Default::default() };
    loop {
        let page = store.list_objects(&cx(), bucket, &request).unwrap();
        keys.extend(page.objects.into_iter().map(|o| o.key));
        if !page.is_truncated {
            return keys;
        }
        request.start_after = page.next_marker;
    }
}

fn assert_whole(store: &ErasureStore, objects: &BTreeMap<String, Vec<u8>>) {
    store.head_bucket(&cx(), BUCKET).unwrap();
    let names: Vec<String> = store.list_buckets(&cx()).unwrap().into_iter().map(|b| b.name).collect();
    assert_eq!(names, [BUCKET]);
    assert_eq!(store.bucket_config(&cx(), BUCKET).unwrap().tags.get("team").map(String::as_str), Some("climate"));
    for max_keys in [1, 2, 1000] {
        assert_eq!(listed_keys(store, BUCKET, max_keys), objects.keys().cloned().collect::<Vec<_>>());
    }
    for (key, bytes) in objects {
        assert_eq!(&read(store, BUCKET, key).unwrap(), bytes, "{key}");
    }
}

/// Polls `done` for up to ten seconds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_first_drive_losing_its_bucket_directories_hides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let objects = fill(&open(&paths));
    // As after an fsck that lost directories: the drive's identity stays.
    std::fs::remove_dir_all(paths[0].join(BUCKET)).unwrap();
    let store = open(&paths);
    assert_whole(&store, &objects);
    // The drive gets the bucket back, with its settings.
    eventually("the bucket is made again on the first drive", || {
        open(&paths).head_bucket(&cx(), BUCKET).unwrap();
        paths[0].join(BUCKET).is_dir()
    });
    // Two drives damaged (m = 2) still hide nothing.
    std::fs::remove_dir_all(paths[1].join(BUCKET)).unwrap();
    std::fs::remove_dir_all(paths[0].join(BUCKET)).unwrap();
    assert_whole(&open(&paths), &objects);
}

#[test]
fn a_drive_missing_some_records_hides_no_key_from_a_listing() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let objects = fill(&open(&paths));
    for drive in &paths[..2] {
        std::fs::remove_dir_all(drive.join(BUCKET).join("run")).unwrap();
        std::fs::remove_file(drive.join(BUCKET).join("obj0")).unwrap();
    }
    assert_whole(&open(&paths), &objects);
}

#[test]
fn a_bucket_on_one_drive_alone_does_not_exist_and_its_name_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    open(&paths).create_bucket(&cx(), "real", &Default::default()).unwrap();
    // Planted (or left by a delete the drive missed) on the first drive only, with an object.
    std::fs::create_dir_all(paths[0].join("ghost")).unwrap();
    std::fs::write(paths[0].join("ghost/old"), b"not a record").unwrap();
    let store = open(&paths);
    assert!(matches!(store.head_bucket(&cx(), "ghost"), Err(StoreError::NoSuchBucket)));
    let names: Vec<String> = store.list_buckets(&cx()).unwrap().into_iter().map(|b| b.name).collect();
    assert_eq!(names, ["real"]);
    store.create_bucket(&cx(), "ghost", &Default::default()).unwrap();
    assert!(listed_keys(&store, "ghost", 1000).is_empty(), "a leftover object became the new bucket's");
    assert!(!paths[0].join("ghost/old").exists());
    assert!(matches!(store.create_bucket(&cx(), "ghost", &Default::default()), Err(StoreError::BucketAlreadyExists)));
}

#[test]
fn a_bucket_deleted_while_a_drive_was_away_stays_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths);
    store.create_bucket(&cx(), "gone", &Default::default()).unwrap();
    let away = dir.path().join("away");
    std::fs::rename(&paths[5], &away).unwrap();
    let store = open(&paths);
    store.delete_bucket(&cx(), "gone").unwrap();
    std::fs::rename(&away, &paths[5]).unwrap();
    let store = open(&paths);
    assert!(matches!(store.head_bucket(&cx(), "gone"), Err(StoreError::NoSuchBucket)));
    assert!(store.list_buckets(&cx()).unwrap().is_empty());
    store.heal(|_, _| {}).unwrap();
    assert!(!paths[5].join("gone").exists(), "heal clears the leftover");
}

#[test]
fn objects_deleted_while_a_drive_was_away_stay_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let objects = fill(&open(&paths));
    let away = dir.path().join("away");
    std::fs::rename(&paths[4], &away).unwrap();
    let store = open(&paths);
    for key in objects.keys() {
        store.delete_object(&cx(), BUCKET, key, &Default::default()).unwrap();
    }
    drop(store);
    std::fs::rename(&away, &paths[4]).unwrap();
    let store = open(&paths);
    for key in objects.keys() {
        assert!(matches!(read(&store, BUCKET, key), Err(StoreError::NoSuchKey)), "{key} came back");
    }
    assert!(listed_keys(&store, BUCKET, 1000).is_empty());
    // Heal takes the delete to the drive that missed it, then drops the tombstones.
    store.heal(|_, _| {}).unwrap();
    for key in objects.keys() {
        assert!(matches!(read(&open(&paths), BUCKET, key), Err(StoreError::NoSuchKey)), "{key} came back");
        assert!(!paths[4].join(BUCKET).join(key).exists(), "{key}");
    }
    store.delete_bucket(&cx(), BUCKET).unwrap();
}

#[test]
fn the_latest_settings_win_over_a_drive_that_missed_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths);
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    let away = dir.path().join("away");
    std::fs::rename(&paths[0], &away).unwrap();
    let store = open(&paths);
    let settings = store.bucket_config(&cx(), BUCKET).unwrap();
    let tagged = BucketConfig { tags: [("v".to_string(), "2".to_string())].into(), ..settings };
    store.set_bucket_config(&cx(), BUCKET, &tagged).unwrap();
    std::fs::rename(&away, &paths[0]).unwrap();
    let store = open(&paths);
    assert_eq!(store.bucket_config(&cx(), BUCKET).unwrap().tags.get("v").map(String::as_str), Some("2"));
    // The drive that missed the change is brought up to date.
    // (Each look decides again: the drive is repaired once it answers in time.)
    eventually("the first drive's record is updated", || {
        open(&paths).bucket_config(&cx(), BUCKET).unwrap();
        std::fs::read_to_string(paths[0].join(".isthmus/ec/buckets/bkt.json")).is_ok_and(|t| t.contains("\"v\""))
    });
    // A write naming a version it did not read is refused, as on any pool.
    let stale = BucketConfig { version: Some("0".repeat(24)), ..Default::default() };
    assert!(store.set_bucket_config(&cx(), BUCKET, &stale).is_err());
}

#[test]
fn a_damaged_settings_record_is_outvoted() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let objects = fill(&open(&paths));
    let record = paths[0].join(".isthmus/ec/buckets/bkt.json");
    std::fs::write(&record, vec![b'{'; 1 << 20]).unwrap();
    assert_whole(&open(&paths), &objects);
    eventually("the damaged record is rewritten", || {
        open(&paths).bucket_config(&cx(), BUCKET).unwrap();
        std::fs::read_to_string(&record).is_ok_and(|t| t.contains("climate"))
    });
}

#[test]
fn a_bucket_whose_first_keys_were_deleted_is_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&drives(dir.path()));
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    for key in ["a-deleted", "b-deleted"] {
        store.put_bytes(&cx(), BUCKET, key, b"x", PutRequest::default()).unwrap();
        store.delete_object(&cx(), BUCKET, key, &Default::default()).unwrap();
    }
    store.put_bytes(&cx(), BUCKET, "kept", b"", PutRequest::default()).unwrap();
    assert!(matches!(store.delete_bucket(&cx(), BUCKET), Err(StoreError::BucketNotEmpty)));
    store.delete_object(&cx(), BUCKET, "kept", &Default::default()).unwrap();
    store.delete_bucket(&cx(), BUCKET).unwrap();
}
