//! The incremental scanner on real files: a silent first pass, then new, changed and removed
//! files; a restart resuming from the index on disk; and (ignored, run by hand) the cost of
//! passes over a million files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use isthmus_notify::watch::{Change, ScanStats, Scanner};
use isthmus_store::state_dir::{StateDir, StateTrust};

fn index_of(root: &Path) -> StateDir {
    let state = StateDir::open_path(root, StateTrust::Gateway).unwrap();
    state.subdir("notify-scan", true).unwrap().unwrap()
}

fn scanner(root: &Path) -> (Scanner, Arc<Mutex<Vec<Change>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let scanner = Scanner::new(root, index_of(root), Arc::new(move |c| sink.lock().unwrap().push(c))).unwrap();
    (scanner, seen)
}

fn take(seen: &Mutex<Vec<Change>>) -> Vec<Change> {
    let mut changes = std::mem::take(&mut *seen.lock().unwrap());
    changes.sort_by(|a, b| a.key().cmp(b.key()));
    changes
}

fn written(key: &str) -> Change {
    Change::Written { bucket: "data".into(), key: key.into() }
}

fn removed(key: &str) -> Change {
    Change::Removed { bucket: "data".into(), key: key.into() }
}

#[test]
fn the_first_pass_records_and_later_ones_announce_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let data = root.join("data");
    std::fs::create_dir_all(data.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(data.join("old")).unwrap();
    for rel in ["keep", "change", "remove", "sub/deeper/f", "old/a", "old/b"] {
        std::fs::write(data.join(rel), b"1").unwrap();
    }
    std::fs::write(data.join(".isthmus.tmp.x"), b"staging").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", data.join("link")).unwrap();
    let (scan, seen) = scanner(root);
    let first = scan.pass("data").unwrap();
    assert_eq!(take(&seen), vec![], "the first pass only records");
    assert_eq!((first.files, first.dirs, first.dirs_listed), (6, 4, 4));

    std::fs::write(data.join("change"), b"22").unwrap();
    std::fs::remove_file(data.join("remove")).unwrap();
    std::fs::write(data.join("sub/deeper/f"), b"2").unwrap(); // same size, new mtime and ctime
    std::fs::create_dir(data.join("new")).unwrap();
    std::fs::write(data.join("new/n"), b"1").unwrap();
    std::fs::remove_dir_all(data.join("old")).unwrap();
    let second = scan.pass("data").unwrap();
    assert_eq!(
        take(&seen),
        vec![
            written("change"),
            written("new/n"),
            removed("old/a"),
            removed("old/b"),
            removed("remove"),
            written("sub/deeper/f")
        ]
    );
    assert_eq!((second.written, second.removed), (3, 3));

    // A restart: a new scanner on the same index announces nothing that was announced.
    drop(scan);
    let (scan, seen) = scanner(root);
    scan.pass("data").unwrap();
    assert_eq!(take(&seen), vec![]);
    std::fs::write(data.join("keep"), b"now changed").unwrap();
    scan.pass("data").unwrap();
    assert_eq!(take(&seen), vec![written("keep")]);
}

#[test]
fn unchanged_directories_are_not_listed_again_but_their_files_are_statted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("d")).unwrap();
    std::fs::write(data.join("d/f"), b"1").unwrap();
    // Directory times three seconds in the past: not "racy", so a later pass may trust them.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3);
    for d in [data.join("d"), data.clone()] {
        std::fs::File::open(&d).unwrap().set_modified(past).unwrap();
    }
    let (scan, seen) = scanner(dir.path());
    scan.pass("data").unwrap();
    std::fs::write(data.join("d/f"), b"2").unwrap();
    let stats: ScanStats = scan.pass("data").unwrap();
    assert_eq!((stats.dirs, stats.dirs_listed, stats.files), (2, 0, 1));
    assert_eq!(take(&seen), vec![written("d/f")]);
}

#[test]
fn a_damaged_index_table_means_announcing_again_not_failing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("f"), b"1").unwrap();
    let (scan, seen) = scanner(dir.path());
    scan.pass("data").unwrap();
    let tables = dir.path().join(".isthmus/notify-scan/data");
    for entry in std::fs::read_dir(&tables).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_str().unwrap().starts_with('d') {
            std::fs::write(&path, b"isthmus-scan-1\n\xff\xff\xff\xff").unwrap();
        }
    }
    scan.pass("data").unwrap();
    assert_eq!(take(&seen), vec![written("f")], "at least once");
    assert!(scan.pass("no_such").is_err());
    assert!(scan.pass("../etc").is_err());
}

/// The cost of scanning a million files (1000 directories of 1000 empty files), on the local
/// disk (`ISTHMUS_SCAN_BENCH_DIR`, default /var/tmp; not tmpfs). Run by hand:
/// `cargo test -p isthmus-notify --release --test watch_scan -- --ignored --nocapture`.
#[test]
#[ignore = "a million files: minutes and 1 GB of inodes; run by hand"]
fn scan_cost_on_a_million_files() {
    let base = std::env::var_os("ISTHMUS_SCAN_BENCH_DIR").map_or(PathBuf::from("/var/tmp"), PathBuf::from);
    let dir = tempfile::tempdir_in(base).unwrap();
    let data = dir.path().join("data");
    let t = std::time::Instant::now();
    for d in 0..1000 {
        let sub = data.join(format!("d{d:04}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::File::create(sub.join(format!("f{f:04}"))).unwrap();
        }
    }
    println!("made 1,000,000 files in {:?}", t.elapsed());
    // Directory times in the past, as on a tree that is not being written right now.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    for d in 0..1000 {
        std::fs::File::open(data.join(format!("d{d:04}"))).unwrap().set_modified(past).unwrap();
    }
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sink_count = count.clone();
    let sink = Arc::new(move |_c: Change| {
        sink_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let scan = Scanner::new(dir.path(), index_of(dir.path()), sink).unwrap();
    let measure = |label: &str| {
        let cpu = cpu_time();
        let stats = scan.pass("data").unwrap();
        println!(
            "{label}: {:?} wall, {:?} CPU, {} files, {} dirs listed, {} written, {} removed",
            stats.elapsed,
            cpu_time() - cpu,
            stats.files,
            stats.dirs_listed,
            stats.written,
            stats.removed
        );
        stats
    };
    measure("first pass (index)");
    let idle = measure("nothing changed");
    assert_eq!(idle.written + idle.removed, 0);
    for i in 0..100 {
        std::fs::write(data.join(format!("d{:04}/f{:04}", i * 10, i)), b"touched").unwrap();
    }
    let touched = measure("100 files touched");
    assert_eq!(touched.written, 100);
    let index_bytes: u64 = std::fs::read_dir(dir.path().join(".isthmus/notify-scan/data"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    println!("index: {index_bytes} bytes; peak RSS: {}", peak_rss());
}

fn cpu_time() -> std::time::Duration {
    // utime and stime, fields 14 and 15 of /proc/self/stat, in clock ticks.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<u64> =
        stat.rsplit_once(')').unwrap().1.split_whitespace().skip(11).take(2).map(|f| f.parse().unwrap()).collect();
    let ticks = rustix::param::clock_ticks_per_second();
    std::time::Duration::from_millis((fields[0] + fields[1]) * 1000 / ticks)
}

fn peak_rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find(|l| l.starts_with("VmHWM")).unwrap_or("VmHWM: ?").to_string()
}

/// A pass killed halfway (here: its sink panics on the second change) leaves the directories
/// it finished in the index; the next scanner announces the rest, repeating at most the
/// directory that was in flight.
#[test]
fn a_pass_killed_halfway_resumes_without_losing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for d in ["a", "b", "c"] {
        std::fs::create_dir_all(data.join(d)).unwrap();
        std::fs::write(data.join(d).join("f"), b"1").unwrap();
    }
    scanner(dir.path()).0.pass("data").unwrap();
    for d in ["a", "b", "c"] {
        std::fs::write(data.join(d).join("f"), b"changed").unwrap();
    }
    let before_crash = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = before_crash.clone();
    let dying = Scanner::new(
        dir.path(),
        index_of(dir.path()),
        Arc::new(move |c: Change| {
            let mut seen = sink_seen.lock().unwrap();
            seen.push(c);
            if seen.len() == 2 {
                drop(seen);
                panic!("killed");
            }
        }),
    )
    .unwrap();
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dying.pass("data")));
    assert!(crashed.is_err());
    let first: Vec<Change> = before_crash.lock().unwrap().clone();
    assert_eq!(first.len(), 2);
    let (scan, seen) = scanner(dir.path());
    scan.pass("data").unwrap();
    let after = take(&seen);
    assert!(after.contains(&first[1]), "the directory in flight is announced again: {after:?}");
    assert!(!after.contains(&first[0]), "a finished directory is not: {after:?}");
    let mut all: Vec<Change> = first.into_iter().chain(after).collect();
    all.sort_by(|a, b| a.key().cmp(b.key()));
    all.dedup();
    assert_eq!(all, vec![written("a/f"), written("b/f"), written("c/f")]);
}

#[test]
fn the_scan_loop_announces_changes_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::create_dir_all(dir.path().join("other")).unwrap();
    let (scan, seen) = scanner(dir.path());
    let running = scan.start(std::time::Duration::from_millis(20), Arc::new(|b: &str| b == "data")).unwrap();
    // Let the first (recording) pass finish, then change files in both buckets.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while !dir.path().join(".isthmus/notify-scan/data/baseline").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::write(dir.path().join("data/new"), b"x").unwrap();
    std::fs::write(dir.path().join("other/new"), b"x").unwrap();
    while seen.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    running.stop();
    assert_eq!(take(&seen), vec![written("new")]);
}
