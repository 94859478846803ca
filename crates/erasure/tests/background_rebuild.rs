//! A replaced drive is rebuilt without the operator: a drive directory emptied between opens
//! or while the pool is open gets back every object's record and shards from the others in the
//! background (no `heal` call), reads stay byte-exact meanwhile, progress is shown, the drive
//! turns online, and it then carries its share (two other drives lost, everything reads). A
//! rebuild interrupted by closing the pool resumes where it stopped.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isthmus_erasure::{DriveState, ErasureConfig, ErasureStore, HealProgress};
use isthmus_posix::StoreOptions;
use isthmus_store::{GetRequest, PutRequest, Store, StoreExt};

mod support;

use support::{BUCKET, cx, pattern, put_multipart};
/// The longest any condition is waited for.
const PATIENCE: Duration = Duration::from_secs(60);

fn drives(dir: &Path) -> Vec<PathBuf> {
    (0..6).map(|i| dir.join(format!("d{i}"))).collect()
}

/// A 4+2 pool whose background rebuild runs at `heal_rate_mib` (0: none).
fn open(paths: &[PathBuf], heal_rate_mib: u64) -> ErasureStore {
    let config = ErasureConfig {
        block_size: 64 << 10,
        inline_limit: 4096,
        heal_rate_mib,
        background_heal: heal_rate_mib > 0,
        ..ErasureConfig::new(paths.to_vec(), 4, 2)
    };
    ErasureStore::open("ec", config, StoreOptions::default()).unwrap()
}

/// Objects of every shape (inline, one block, many blocks, a folder, a multipart object of
/// two segments) and `small` more of 20 KiB in a second bucket.
fn fill(store: &ErasureStore, small: usize) -> Vec<(String, String, Vec<u8>)> {
    store.create_bucket(&cx(), BUCKET, &Default::default()).unwrap();
    let mut objects = Vec::new();
    for (i, len) in [0usize, 100, 5000, 64 << 10, (64 << 10) * 5 + 17].into_iter().enumerate() {
        let bytes = pattern(len, i as u8);
        store.put_bytes(&cx(), BUCKET, &format!("obj/{i}"), &bytes, PutRequest::default()).unwrap();
        objects.push((BUCKET.to_string(), format!("obj/{i}"), bytes));
    }
    store.put_bytes(&cx(), BUCKET, "folder/", b"", PutRequest::default()).unwrap();
    objects.push((BUCKET.to_string(), "folder/".to_string(), Vec::new()));
    let parts = [pattern(5 << 20, 7), pattern(123_457, 9)];
    objects.push((BUCKET.to_string(), "mp".to_string(), put_multipart(store, "mp", &parts)));
    objects.extend(fill_small(store, small));
    objects
}

/// `n` objects of 20 KiB in bucket "many".
fn fill_small(store: &ErasureStore, n: usize) -> Vec<(String, String, Vec<u8>)> {
    store.create_bucket(&cx(), "many", &Default::default()).unwrap();
    let mut objects = Vec::new();
    for i in 0..n {
        let bytes = pattern(20 << 10, i as u8);
        store.put_bytes(&cx(), "many", &format!("s{i:04}"), &bytes, PutRequest::default()).unwrap();
        objects.push(("many".to_string(), format!("s{i:04}"), bytes));
    }
    objects
}

fn check_all(store: &ErasureStore, objects: &[(String, String, Vec<u8>)]) {
    for (bucket, key, bytes) in objects {
        let mut response = store
            .get_object(&cx(), bucket, key, &GetRequest::default())
            .unwrap_or_else(|e| panic!("{bucket}/{key}: {e}"));
        let mut got = Vec::new();
        response.body.read_to_end(&mut got).unwrap();
        assert!(got == *bytes, "{bucket}/{key}: bytes differ");
    }
}

/// Puts an empty directory where a drive was, at once (as mounting a blank replacement disk
/// there does; emptied file by file, a drive could be taken for a blank one half way).
fn blank(path: &Path) {
    let failed = path.with_extension("failed");
    std::fs::rename(path, &failed).unwrap();
    std::fs::create_dir(path).unwrap();
    std::fs::remove_dir_all(failed).unwrap();
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

/// Polls `drive`'s report until it is online; returns the healing progress seen meanwhile.
fn wait_online(store: &ErasureStore, drive: usize) -> Vec<HealProgress> {
    let started = Instant::now();
    let mut seen = Vec::new();
    loop {
        let report = &store.drive_reports()[drive];
        match report.state {
            DriveState::Online => return seen,
            DriveState::Rebuilding => seen.extend(report.healing),
            other => panic!("drive {drive} is {other:?}"),
        }
        assert!(started.elapsed() < PATIENCE, "drive {drive} not rebuilt in {PATIENCE:?}: {report:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The rebuilt drive holds its share: with two other drives lost every object reads.
fn holds_its_share(paths: &[PathBuf], rebuilt: usize, objects: &[(String, String, Vec<u8>)]) {
    let others: Vec<usize> = (0..paths.len()).filter(|&d| d != rebuilt).take(2).collect();
    for d in others {
        std::fs::remove_dir_all(&paths[d]).unwrap();
    }
    check_all(&open(paths, 0), objects);
}

#[test]
fn a_drive_blanked_between_opens_is_rebuilt_in_the_background_while_reads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths, 0);
    let objects = fill(&store, 0);
    let shards_before = files_under(&paths[2].join(".isthmus/ec/data"));
    assert!(shards_before > 0);
    drop(store);
    blank(&paths[2]);
    // About 6 MiB of objects at 4 MiB/s: long enough to watch, short enough for a test.
    let store = open(&paths, 4);
    let started = Instant::now();
    let mut reads = 0;
    while store.drive_reports()[2].state == DriveState::Rebuilding && started.elapsed() < PATIENCE {
        check_all(&store, &objects);
        reads += 1;
    }
    wait_online(&store, 2);
    assert!(reads > 0, "the drive was online before any read: nothing was rebuilt in the background");
    assert!(files_under(&paths[2].join(".isthmus/ec/data")) >= shards_before, "every shard is back");
    for (bucket, key, _) in &objects {
        assert!(paths[2].join(bucket).join(key).exists(), "{bucket}/{key}: its record is back");
    }
    assert!(!paths[2].join(".isthmus/ec/rebuild.json").exists(), "the progress is removed when done");
    drop(store);
    holds_its_share(&paths, 2, &objects);
}

#[test]
fn a_drive_blanked_while_the_pool_is_open_is_rebuilt_and_shows_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths, 4);
    let objects = fill(&store, 8);
    blank(&paths[3]);
    // The pool looks at a drive again within a second.
    let started = Instant::now();
    while store.drive_reports()[3].state == DriveState::Online {
        assert!(started.elapsed() < PATIENCE, "the blanked drive is still taken for online");
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = wait_online(&store, 3);
    let counted: Vec<&HealProgress> = seen.iter().filter(|p| p.total.is_some()).collect();
    assert!(!counted.is_empty(), "no progress shown while healing: {seen:?}");
    assert!(counted.iter().all(|p| p.total == Some(objects.len() as u64)), "{counted:?}");
    assert!(counted.iter().any(|p| p.left() > Some(0)), "objects left never shown: {counted:?}");
    assert!(counted.windows(2).all(|w| w[0].done <= w[1].done), "progress goes forward: {counted:?}");
    check_all(&store, &objects);
    drop(store);
    holds_its_share(&paths, 3, &objects);
}

#[test]
fn a_rebuild_interrupted_by_a_restart_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let paths = drives(dir.path());
    let store = open(&paths, 0);
    // Each small object costs 64 KiB of the rate: 48 of them take about 3 s at 1 MiB/s.
    let objects = fill_small(&store, 48);
    drop(store);
    blank(&paths[1]);
    let store = open(&paths, 1);
    let started = Instant::now();
    let stopped_at = loop {
        let report = &store.drive_reports()[1];
        assert_eq!(report.state, DriveState::Rebuilding, "finished before the restart: {report:?}");
        // Past the first save (every second, about 16 objects here).
        if let Some(progress) = report.healing.filter(|p| p.done >= 24) {
            break progress.done;
        }
        assert!(started.elapsed() < PATIENCE);
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(store);
    // Saved at least every second and when stopped: the new pass starts no further back.
    let store = open(&paths, 1);
    let resumed = loop {
        let report = &store.drive_reports()[1];
        if let Some(progress) = report.healing.filter(|p| p.total.is_some()) {
            break progress;
        }
        assert_eq!(report.state, DriveState::Rebuilding);
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(resumed.done + 20 >= stopped_at, "started over: {resumed:?}, stopped at {stopped_at}");
    wait_online(&store, 1);
    drop(store);
    holds_its_share(&paths, 1, &objects);
}
