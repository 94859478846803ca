//! Drive events of an erasure-coded pool over real directories: the identity each drive carries
//! (format version 2, old formats upgraded), drives with damaged formats, another pool's drive,
//! drives swapped or copied into another slot, an empty directory where a mounted disk was (at
//! start and while serving), a pool restarted with a drive missing, and a write refused by too
//! many drives that leaves the object as it was. Each time: nothing is written where it must
//! not be, reads are byte-exact, writes go on with the quorum.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isthmus_erasure::{DriveState, ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{ObjectChange, PutRequest, Store, StoreError, StoreExt};

mod support;

use support::{BUCKET, cx, pattern, put_multipart, read};

fn drives(dir: &Path) -> Vec<PathBuf> {
    (0..6).map(|i| dir.join(format!("d{i}"))).collect()
}

fn try_open(paths: &[PathBuf]) -> Result<ErasureStore, StoreError> {
    let config = ErasureConfig { block_size: 64 << 10, inline_limit: 4096, ..ErasureConfig::new(paths.to_vec(), 4, 2) };
    ErasureStore::open("ec", config, StoreOptions::default())
}

fn open(paths: &[PathBuf]) -> ErasureStore {
    try_open(paths).unwrap()
}

/// Objects of every shape under `prefix` (inline, one block, many blocks, an upload), created
/// in the bucket (made if missing); what was written.
fn write(store: &ErasureStore, prefix: &str, seed: u8) -> Vec<(String, Vec<u8>)> {
    if store.head_bucket(&cx(), BUCKET).is_err() {
        store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    }
    let mut objects = Vec::new();
    for (i, len) in [100usize, 5000, (64 << 10) * 3 + 17].into_iter().enumerate() {
        let key = format!("{prefix}/{i}");
        let bytes = pattern(len, seed.wrapping_add(i as u8));
        store.put_bytes(&cx(), BUCKET, &key, &bytes, PutRequest::default()).unwrap_or_else(|e| panic!("{key}: {e}"));
        objects.push((key, bytes));
    }
    let key = format!("{prefix}/mp");
    // One part (the last part of an upload may be small): the upload's records and shards.
    let parts = [pattern(200_001, seed ^ 0x55)];
    let bytes = put_multipart(store, &key, &parts);
    objects.push((key, bytes));
    objects
}

fn check_all(store: &ErasureStore, objects: &[(String, Vec<u8>)]) {
    for (key, bytes) in objects {
        let got = read(store, key).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(got == *bytes, "{key}: bytes differ");
    }
}

/// Every file and directory beneath `dir` with its size and modification time.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            found.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    found
}

fn states(store: &ErasureStore) -> Vec<DriveState> {
    store.drive_reports().into_iter().map(|d| d.state).collect()
}

/// Polls until drive `i` is in `state` (drives are looked at again once a second).
fn wait_for(store: &ErasureStore, i: usize, state: DriveState) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while states(store)[i] != state {
        assert!(Instant::now() < deadline, "drive {i} is {:?}, not {state:?}", states(store)[i]);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn format_of(drive: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(drive.join(".isthmus/ec/drive.json")).unwrap()).unwrap()
}

fn set_format(drive: &Path, format: &serde_json::Value) {
    std::fs::write(drive.join(".isthmus/ec/drive.json"), serde_json::to_vec(format).unwrap()).unwrap();
}

fn swap(a: &Path, b: &Path) {
    let aside = a.with_extension("swap");
    std::fs::rename(a, &aside).unwrap();
    std::fs::rename(b, a).unwrap();
    std::fs::rename(&aside, b).unwrap();
}

fn lose(drive: &Path) {
    std::fs::rename(drive, drive.with_extension("lost")).unwrap();
}

/// After heal, the pool holds every object with m drives other than `keep` gone.
fn healed_and_whole(paths: &[PathBuf], keep: usize, objects: &[(String, Vec<u8>)]) {
    let store = open(paths);
    let report = store.heal(|_, _| {}).unwrap();
    assert!(report.unreadable.is_empty(), "{:?}", report.unreadable);
    drop(store);
    let others: Vec<usize> = (0..paths.len()).filter(|&i| i != keep).take(2).collect();
    for &i in &others {
        lose(&paths[i]);
    }
    check_all(&open(paths), objects);
}

#[test]
fn every_drive_carries_the_pools_identity_and_old_formats_are_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths);
    let objects = write(&store, "a", 1);
    drop(store);
    let formats: Vec<_> = paths.iter().map(|p| format_of(p)).collect();
    let pool_id = formats[0]["pool_id"].as_str().expect("a pool id").to_string();
    assert_eq!(pool_id.len(), 32);
    let mut drive_ids = std::collections::BTreeSet::new();
    for (i, format) in formats.iter().enumerate() {
        assert_eq!(format["version"], 2, "{format}");
        assert_eq!((format["pool"].as_str(), format["pool_id"].as_str()), (Some("ec"), Some(pool_id.as_str())));
        assert_eq!((format["index"].as_u64(), format["drives"].as_u64()), (Some(i as u64), Some(6)));
        assert_eq!(format["mounts"], serde_json::json!(vec![false; 6]), "plain directories are no mount points");
        drive_ids.insert(format["drive_id"].as_str().expect("a drive id").to_string());
    }
    assert_eq!(drive_ids.len(), 6, "each drive has an id of its own");
    // A pool formatted before pool ids: its version 1 formats keep working and are upgraded.
    for (i, path) in paths.iter().enumerate() {
        set_format(path, &serde_json::json!({"pool": "ec", "index": i, "drives": 6, "rebuilding": false}));
    }
    let store = open(&paths);
    assert_eq!(states(&store), vec![DriveState::Online; 6]);
    check_all(&store, &objects);
    let upgraded: Vec<_> = paths.iter().map(|p| format_of(p)).collect();
    assert!(upgraded.iter().all(|f| f["version"] == 2 && f["pool_id"] == upgraded[0]["pool_id"]), "{upgraded:?}");
    assert_ne!(upgraded[0]["pool_id"].as_str(), Some(pool_id.as_str()), "a new id for the old pool");
}

#[test]
fn drives_with_damaged_formats_are_foreign_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let objects = write(&open(&paths), "a", 1);
    std::fs::write(paths[1].join(".isthmus/ec/drive.json"), b"\x00\x9f{{ not a format").unwrap();
    let huge = [b"{\"pool\":\"ec\",\"pad\":\"".as_slice(), &vec![b'x'; 4 << 20], b"\"}"].concat();
    std::fs::write(paths[2].join(".isthmus/ec/drive.json"), huge).unwrap();
    let before = [tree(&paths[1]), tree(&paths[2])];
    let store = try_open(&paths).expect("the pool opens with two damaged drives");
    let found = states(&store);
    assert_eq!((found[1], found[2]), (DriveState::Foreign, DriveState::Foreign), "{found:?}");
    let later = write(&store, "b", 2);
    store.create_bucket(&cx(), "second", &Default::default()).unwrap();
    check_all(&store, &objects);
    check_all(&store, &later);
    assert_eq!([tree(&paths[1]), tree(&paths[2])], before, "a drive with a damaged format was written");
}

#[test]
fn a_drive_of_another_pool_of_the_same_name_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(&dir.path().join("a"));
    let other = drives(&dir.path().join("b"));
    let objects = write(&open(&paths), "a", 1);
    write(&open(&other), "other", 9);
    std::fs::rename(&paths[3], dir.path().join("a-d3")).unwrap();
    std::fs::rename(&other[3], &paths[3]).unwrap();
    let before = tree(&paths[3]);
    let store = open(&paths);
    assert_eq!(states(&store)[3], DriveState::Foreign);
    let later = write(&store, "b", 2);
    check_all(&store, &objects);
    check_all(&store, &later);
    assert_eq!(tree(&paths[3]), before, "another pool's drive was written");
}

#[test]
fn swapped_drives_are_foreign_until_put_back_and_never_get_the_wrong_slots_data() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths);
    let mut objects = write(&store, "a", 1);
    // Swapped while the pool serves: writes right after (before the drives are looked at
    // again) and once they are found foreign.
    swap(&paths[1], &paths[2]);
    objects.extend(write(&store, "during", 2));
    wait_for(&store, 1, DriveState::Foreign);
    wait_for(&store, 2, DriveState::Foreign);
    let before = [tree(&paths[1]), tree(&paths[2])];
    objects.extend(write(&store, "after", 3));
    check_all(&store, &objects);
    assert_eq!([tree(&paths[1]), tree(&paths[2])], before, "a swapped drive was written");
    drop(store);
    // Restarted with the drives still swapped: both foreign, the pool serves from the others.
    let store = try_open(&paths).expect("the pool opens with two drives swapped");
    let found = states(&store);
    assert_eq!((found[1], found[2]), (DriveState::Foreign, DriveState::Foreign), "{found:?}");
    objects.extend(write(&store, "restarted", 4));
    check_all(&store, &objects);
    assert_eq!([tree(&paths[1]), tree(&paths[2])], before, "a swapped drive was written");
    // Put back: both drives are used again and, healed, carry their share.
    swap(&paths[1], &paths[2]);
    wait_for(&store, 1, DriveState::Online);
    wait_for(&store, 2, DriveState::Online);
    check_all(&store, &objects);
    drop(store);
    healed_and_whole(&paths, 1, &objects);
}

#[test]
fn a_drive_copied_into_another_slot_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let objects = write(&open(&paths), "a", 1);
    std::fs::remove_dir_all(&paths[4]).unwrap();
    let copied = std::process::Command::new("cp").arg("-a").arg(&paths[1]).arg(&paths[4]).status().unwrap();
    assert!(copied.success());
    let before = tree(&paths[4]);
    let store = open(&paths);
    let found = states(&store);
    assert_eq!((found[1], found[4]), (DriveState::Online, DriveState::Foreign), "{found:?}");
    let later = write(&store, "b", 2);
    check_all(&store, &objects);
    check_all(&store, &later);
    assert_eq!(tree(&paths[4]), before, "the copy in the wrong slot was written");
}

/// Records in every drive's format that slot `slot`'s drive was a mount point when formatted.
fn plant_mount_point(paths: &[PathBuf], slot: usize) {
    for path in paths {
        let mut format = format_of(path);
        let mut mounts = vec![false; paths.len()];
        mounts[slot] = true;
        format["mounts"] = serde_json::json!(mounts);
        set_format(path, &format);
    }
}

/// Everything in a directory (an unmounted disk's mount point must stay empty).
fn entries(dir: &Path) -> Vec<PathBuf> {
    tree(dir).into_keys().collect()
}

#[test]
fn an_empty_directory_where_a_mounted_disk_was_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let mut objects = write(&open(&paths), "a", 1);
    plant_mount_point(&paths, 3);
    // The disk is not mounted when the pool starts: its mount point is an empty directory on
    // the parent's disk.
    let disk = dir.path().join("disk3");
    std::fs::rename(&paths[3], &disk).unwrap();
    std::fs::create_dir(&paths[3]).unwrap();
    let store = open(&paths);
    assert_eq!(states(&store)[3], DriveState::Unformatted);
    objects.extend(write(&store, "b", 2));
    store.create_bucket(&cx(), "second", &Default::default()).unwrap();
    store.delete_object(&cx(), BUCKET, "a/0", &Default::default()).unwrap();
    objects.retain(|(key, _)| key != "a/0");
    let mut tags = BTreeMap::new();
    tags.insert("t".to_string(), "v".to_string());
    store.update_object(&cx(), BUCKET, "a/1", ObjectChange::Tags(tags)).unwrap();
    assert_eq!(store.heal(|_, _| {}).unwrap().unreadable, Vec::<String>::new());
    check_all(&store, &objects);
    assert_eq!(entries(&paths[3]), Vec::<PathBuf>::new(), "the empty mount point was written");
    assert_eq!(states(&store)[3], DriveState::Unformatted);
    // Mounted again: the drive is back and, healed, carries what it missed.
    std::fs::remove_dir(&paths[3]).unwrap();
    std::fs::rename(&disk, &paths[3]).unwrap();
    wait_for(&store, 3, DriveState::Online);
    check_all(&store, &objects);
    drop(store);
    healed_and_whole(&paths, 3, &objects);
}

#[test]
fn a_disk_unmounted_while_serving_is_not_written_through_its_mount_point() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let mut objects = write(&open(&paths), "a", 1);
    plant_mount_point(&paths, 2);
    let store = open(&paths);
    assert_eq!(states(&store), vec![DriveState::Online; 6]);
    // Unmounted (lazily, as a busy disk is): its path is now an empty directory, and the pool
    // has not looked at the drive again yet.
    let disk = dir.path().join("disk2");
    std::fs::rename(&paths[2], &disk).unwrap();
    std::fs::create_dir(&paths[2]).unwrap();
    objects.extend(write(&store, "at-once", 2));
    assert_eq!(entries(&paths[2]), Vec::<PathBuf>::new(), "written through the empty mount point");
    wait_for(&store, 2, DriveState::Unformatted);
    objects.extend(write(&store, "later", 3));
    check_all(&store, &objects);
    assert_eq!(entries(&paths[2]), Vec::<PathBuf>::new(), "written through the empty mount point");
    std::fs::remove_dir(&paths[2]).unwrap();
    std::fs::rename(&disk, &paths[2]).unwrap();
    wait_for(&store, 2, DriveState::Online);
    check_all(&store, &objects);
    drop(store);
    healed_and_whole(&paths, 2, &objects);
}

#[test]
fn a_pool_restarted_with_a_drive_missing_serves_and_takes_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let mut objects = write(&open(&paths), "a", 1);
    let away = dir.path().join("away4");
    std::fs::rename(&paths[4], &away).unwrap();
    let store = open(&paths);
    assert_eq!(states(&store)[4], DriveState::Offline);
    objects.extend(write(&store, "b", 2));
    check_all(&store, &objects);
    assert!(!paths[4].exists(), "nothing is made where a drive is missing");
    std::fs::rename(&away, &paths[4]).unwrap();
    wait_for(&store, 4, DriveState::Online);
    check_all(&store, &objects);
    drop(store);
    healed_and_whole(&paths, 4, &objects);
}

#[test]
fn a_write_too_few_drives_take_is_refused_and_leaves_the_object_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths);
    let old = pattern(200_000, 1);
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    store.put_bytes(&cx(), BUCKET, "k", &old, PutRequest::default()).unwrap();
    drop(store);
    // One drive gone, two refuse the record (a directory where it goes): three of the five
    // left take it, one short of the write quorum.
    lose(&paths[5]);
    for path in &paths[..2] {
        let record = path.join(BUCKET).join("k");
        std::fs::remove_file(&record).unwrap();
        std::fs::create_dir_all(record.join("blocked")).unwrap();
    }
    let store = open(&paths);
    let new = pattern(300_000, 2);
    assert!(store.put_bytes(&cx(), BUCKET, "k", &new, PutRequest::default()).is_err(), "the write is refused");
    for _ in 0..20 {
        assert!(read(&store, "k").expect("the object as it was") == old, "a refused write changed the object");
    }
}
