//! The kernel watcher on real files written with plain std::fs calls in a temporary data root.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isthmus_notify::watch::{Change, WatchOptions, Watcher};

const SETTLE: Duration = Duration::from_millis(50);

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    seen: Arc<Mutex<Vec<Change>>>,
    watcher: Option<Watcher>,
}

impl Fixture {
    /// A data root with the bucket `data` (and `plain`, without rules), watched.
    fn new() -> Fixture {
        Self::with_max_watches(None)
    }

    fn with_max_watches(max_watches: Option<usize>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir(root.join("data")).unwrap();
        std::fs::create_dir(root.join("plain")).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink_seen = seen.clone();
        let watcher = Watcher::start(
            &root,
            Arc::new(|bucket: &str| bucket != "plain" && bucket != "norules"),
            WatchOptions { settle: SETTLE, max_watches, ..WatchOptions::default() },
            Arc::new(move |c| sink_seen.lock().unwrap().push(c)),
        )
        .unwrap();
        Fixture { _dir: dir, root, seen, watcher: Some(watcher) }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Everything announced once the watcher has been quiet for a while (at most 3 s).
    fn settled(&self) -> Vec<Change> {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut last = usize::MAX;
        loop {
            std::thread::sleep(SETTLE * 4);
            let n = self.seen.lock().unwrap().len();
            if (n == last && n > 0) || Instant::now() > deadline {
                break;
            }
            last = n;
        }
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// Asserts nothing at all is announced in a settle time and more.
    fn assert_quiet(&self) {
        std::thread::sleep(SETTLE * 6);
        assert_eq!(std::mem::take(&mut *self.seen.lock().unwrap()), vec![]);
    }
}

fn written(bucket: &str, key: &str) -> Change {
    Change::Written { bucket: bucket.into(), key: key.into() }
}

fn removed(bucket: &str, key: &str) -> Change {
    Change::Removed { bucket: bucket.into(), key: key.into() }
}

#[test]
fn a_closed_file_is_written_once_even_after_three_quick_closes() {
    let f = Fixture::new();
    std::fs::write(f.path("data/one"), b"hello").unwrap();
    assert_eq!(f.settled(), vec![written("data", "one")]);
    for i in 0..3 {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().append(true).open(f.path("data/one")).unwrap();
        file.write_all(format!("{i}").as_bytes()).unwrap();
    }
    assert_eq!(f.settled(), vec![written("data", "one")]);
    let stats = f.watcher.as_ref().unwrap().stats();
    assert_eq!((stats.written, stats.removed, stats.watches), (2, 0, 1));
}

#[test]
fn renames_into_place_count_as_writes_and_staged_names_are_never_keys() {
    let f = Fixture::new();
    std::fs::write(f.path("data/.isthmus.tmp.abc"), b"staged by the gateway").unwrap();
    std::fs::rename(f.path("data/.isthmus.tmp.abc"), f.path("data/key")).unwrap();
    assert_eq!(f.settled(), vec![written("data", "key")]);
    std::fs::rename(f.path("data/key"), f.path("data/moved")).unwrap();
    assert_eq!(f.settled(), vec![removed("data", "key"), written("data", "moved")]);
    let outside = tempfile::tempdir_in(&f.root).unwrap();
    std::fs::write(outside.path().join("in"), b"x").unwrap();
    std::fs::rename(outside.path().join("in"), f.path("data/in")).unwrap();
    std::fs::rename(f.path("data/moved"), f.path("plain/moved")).unwrap();
    assert_eq!(f.settled(), vec![written("data", "in"), removed("data", "moved")]);
}

#[test]
fn an_unlink_is_a_removal() {
    let f = Fixture::new();
    std::fs::write(f.path("data/gone"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "gone")]);
    std::fs::remove_file(f.path("data/gone")).unwrap();
    assert_eq!(f.settled(), vec![removed("data", "gone")]);
}

#[test]
fn files_in_new_directories_are_seen_even_if_written_before_their_watch() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path("data/a/b/c")).unwrap();
    std::fs::write(f.path("data/a/b/c/f"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "a/b/c/f")]);
    // A whole tree moved in from outside the bucket.
    std::fs::create_dir_all(f.path("Not_a_bucket/x/y")).unwrap();
    std::fs::write(f.path("Not_a_bucket/x/y/deep"), b"x").unwrap();
    std::fs::write(f.path("Not_a_bucket/x/top"), b"x").unwrap();
    std::fs::rename(f.path("Not_a_bucket/x"), f.path("data/a/x")).unwrap();
    let mut seen = f.settled();
    seen.sort_by(|a, b| a.key().cmp(b.key()));
    assert_eq!(seen, vec![written("data", "a/x/top"), written("data", "a/x/y/deep")]);
    // Renamed within the bucket: old keys removed, new ones written.
    std::fs::rename(f.path("data/a/x"), f.path("data/z")).unwrap();
    let mut seen = f.settled();
    seen.sort_by(|a, b| {
        (a.key(), matches!(a, Change::Written { .. })).cmp(&(b.key(), matches!(b, Change::Written { .. })))
    });
    assert_eq!(
        seen,
        vec![
            removed("data", "a/x/top"),
            removed("data", "a/x/y/deep"),
            written("data", "z/top"),
            written("data", "z/y/deep")
        ]
    );
    std::fs::write(f.path("data/z/y/later"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "z/y/later")], "the moved directory is watched at its new name");
}

#[test]
fn a_new_bucket_is_watched_when_it_has_rules() {
    let f = Fixture::new();
    std::fs::create_dir(f.path("fresh")).unwrap();
    std::fs::create_dir(f.path("norules")).unwrap();
    std::thread::sleep(SETTLE);
    std::fs::write(f.path("fresh/f"), b"x").unwrap();
    std::fs::write(f.path("norules/f"), b"x").unwrap();
    std::fs::write(f.path("plain/f"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("fresh", "f")]);
    // A bucket renamed away, then written to under its new name: nothing breaks.
    std::fs::rename(f.path("fresh"), f.path("renamed")).unwrap();
    std::fs::write(f.path("renamed/g"), b"x").unwrap();
    let seen = f.settled();
    assert!(seen.contains(&written("renamed", "g")), "{seen:?}");
    assert!(seen.contains(&removed("fresh", "f")), "{seen:?}");
}

#[test]
fn internal_names_symlinks_and_odd_files_are_not_keys() {
    let f = Fixture::new();
    std::fs::create_dir(f.path("data/.isthmus")).unwrap();
    std::fs::write(f.path("data/.isthmus/state"), b"x").unwrap();
    std::fs::create_dir(f.path(".isthmus")).unwrap();
    std::fs::write(f.path(".isthmus/users"), b"x").unwrap();
    std::fs::write(f.path("loose-file-in-root"), b"x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", f.path("data/link")).unwrap();
    std::os::unix::fs::symlink(f.path("plain"), f.path("data/dirlink")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.path("data/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    std::fs::write(f.path("plain/through-the-link"), b"x").unwrap();
    std::fs::write(f.path("data/").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"x").unwrap();
    f.assert_quiet();
    std::fs::write(f.path("data/new\nline"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "new\nline")]);
}

#[test]
fn a_tree_deeper_than_the_limit_does_not_break_the_watcher() {
    let f = Fixture::new();
    let mut deep = f.path("data");
    for _ in 0..300 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("too-deep"), b"x").unwrap();
    let shallow: PathBuf = Path::new("data").join("d/d/d/ok");
    std::fs::write(f.path(shallow.to_str().unwrap()), b"x").unwrap();
    let seen = f.settled();
    assert!(seen.contains(&written("data", "d/d/d/ok")), "{seen:?}");
    assert!(seen.iter().all(|c| !c.key().ends_with("too-deep")), "nothing beyond the depth limit");
    assert!(f.watcher.as_ref().unwrap().stats().watches <= 258);
    f.watcher.as_ref().unwrap();
    drop(f);
}

#[test]
fn a_directory_moved_out_of_the_watched_tree_is_no_longer_watched() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path("data/out/inner")).unwrap();
    std::fs::write(f.path("data/out/inner/f"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "out/inner/f")]);
    std::fs::rename(f.path("data/out"), f.path("plain/out")).unwrap();
    std::fs::write(f.path("plain/out/inner/g"), b"x").unwrap();
    std::fs::remove_file(f.path("plain/out/inner/f")).unwrap();
    f.assert_quiet();
    assert_eq!(f.watcher.as_ref().unwrap().stats().watches, 1, "only the bucket directory is left");
    assert!(f.watcher.as_ref().unwrap().buckets_over_limit().is_empty());
}

#[test]
fn directories_past_the_watch_limit_name_their_bucket_for_a_scanner() {
    // One directory may be watched: the bucket's own.
    let f = Fixture::with_max_watches(Some(1));
    let watcher = f.watcher.as_ref().unwrap();
    let over_limit = watcher.over_limit();
    assert!(!over_limit("data"));
    std::fs::write(f.path("data/top"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "top")]);
    // A directory made elsewhere (with its file) and moved in: listed when it arrives (its
    // file announced), but not watched.
    std::fs::create_dir(f.path("plain/deep")).unwrap();
    std::fs::write(f.path("plain/deep/f"), b"x").unwrap();
    std::fs::rename(f.path("plain/deep"), f.path("data/deep")).unwrap();
    assert_eq!(f.settled(), vec![written("data", "deep/f")]);
    std::fs::write(f.path("data/deep/g"), b"x").unwrap();
    f.assert_quiet();
    let stats = watcher.stats();
    assert_eq!((stats.watches, stats.watch_limit_hits), (1, 1));
    assert_eq!(watcher.buckets_over_limit(), ["data"]);
    assert!(over_limit("data") && !over_limit("plain"));
    // The bucket's directory itself stays watched.
    std::fs::write(f.path("data/top2"), b"x").unwrap();
    assert_eq!(f.settled(), vec![written("data", "top2")]);
}
