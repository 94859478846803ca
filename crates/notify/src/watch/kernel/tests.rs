//! Tests of the kernel watcher: what it announces, what it tells of, what it watches.

use super::*;

/// A queue overflow (which cannot be caused here without changing a system-wide limit)
/// rescans: files modified since shortly before the last read are announced, older ones
/// not, and directories made meanwhile are watched.
#[test]
fn an_overflow_rescans_and_announces_recent_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("old"), b"x").unwrap();
    let past = SystemTime::now() - Duration::from_secs(60);
    std::fs::File::options().write(true).open(data.join("old")).unwrap().set_modified(past).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let options = WatchOptions { settle: Duration::from_millis(10), ..WatchOptions::default() };
    let sink: Sink = Arc::new(move |c| sink_seen.lock().unwrap().push(c));
    let mut state = State::new(dir.path(), Arc::new(|_: &str| true), options, sink).unwrap();
    assert_eq!(state.dirs.len(), 1);
    let last_read = SystemTime::now();
    std::fs::create_dir(data.join("sub")).unwrap();
    std::fs::write(data.join("sub/new"), b"x").unwrap();
    std::fs::write(data.join("new"), b"x").unwrap();
    state.overflow(last_read);
    state.flush(Instant::now() + Duration::from_secs(1));
    let mut keys: Vec<String> = seen.lock().unwrap().iter().map(|c| c.key().to_string()).collect();
    keys.sort();
    assert_eq!(keys, vec!["new", "sub/new"]);
    assert_eq!(state.dirs.len(), 2, "the directory made during the overflow is watched");
    assert_eq!(state.counters.overflows.load(Ordering::Relaxed), 1);
}

/// A file linked into place from an unnamed one (as the gateway writes new keys) shows no
/// close under its name: the watcher tells `created` of it and announces nothing. A file
/// made by open(2) is told of too, and announced at its close.
#[test]
fn a_linked_file_is_told_as_created_and_an_opened_one_is_also_announced_at_its_close() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let created_seen = Arc::new(Mutex::new(Vec::new()));
    let told = created_seen.clone();
    let options = WatchOptions {
        settle: Duration::from_millis(10),
        created: Some(Arc::new(move |bucket: &str, key: &str| told.lock().unwrap().push(format!("{bucket}/{key}")))),
        ..WatchOptions::default()
    };
    let sink: Sink = Arc::new(move |c| sink_seen.lock().unwrap().push(c));
    let mut state = State::new(dir.path(), Arc::new(|_: &str| true), options, sink).unwrap();
    let data_dir = std::fs::File::open(&data).unwrap();
    let unnamed = rustix::fs::openat(&data_dir, ".", OFlags::TMPFILE | OFlags::WRONLY, Mode::from_raw_mode(0o644))
        .expect("O_TMPFILE on the test's file system");
    let mut unnamed = std::fs::File::from(unnamed);
    unnamed.write_all(b"linked").unwrap();
    let through_fd = format!("/proc/self/fd/{}", unnamed.as_raw_fd());
    rustix::fs::linkat(rustix::fs::CWD, through_fd.as_str(), &data_dir, "linked", AtFlags::SYMLINK_FOLLOW).unwrap();
    drop(unnamed);
    std::fs::write(data.join("opened"), b"x").unwrap();
    // A user's file named as the kernel names unnamed ones, created while watched.
    std::fs::write(data.join("#12"), b"x").unwrap();
    // The kernel queues inotify events before the calls that cause them return: no wait.
    let mut buffer = vec![0u8; 64 << 10];
    state.drain(&mut buffer);
    let mut closed: Vec<&str> = state.pending.keys().map(|(_, key)| key.as_str()).collect();
    closed.sort();
    assert_eq!(closed, ["#12", "opened"], "the unnamed file's close (as #<inode>) is not looked up");
    state.flush(Instant::now() + Duration::from_secs(1));
    assert_eq!(*created_seen.lock().unwrap(), ["data/linked", "data/opened", "data/#12"]);
    let mut written: Vec<String> = seen.lock().unwrap().iter().map(|c| c.key().to_string()).collect();
    written.sort();
    assert_eq!(written, ["#12", "opened"]);
}

/// A bucket is watched whole (the gateway need not remember its new keys linked there)
/// from when its directory is watched and listed, until a directory of it is left
/// unwatched at the limit (a scanner then covers the bucket) or the bucket goes; a bucket
/// without rules never is.
#[test]
fn a_bucket_is_watched_whole_until_a_directory_is_over_the_limit_or_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    for bucket in ["data", "other", "norules"] {
        std::fs::create_dir(dir.path().join(bucket)).unwrap();
    }
    let options = WatchOptions { max_watches: Some(3), ..WatchOptions::default() };
    let sink: Sink = Arc::new(|_| {});
    let mut state = State::new(dir.path(), Arc::new(|b: &str| b != "norules"), options, sink).unwrap();
    let whole = watched_whole(state.counters.clone());
    assert!(whole("data") && whole("other") && !whole("norules") && !whole("absent"));
    let mut buffer = vec![0u8; 64 << 10];
    std::fs::create_dir(dir.path().join("data/a")).unwrap();
    state.drain(&mut buffer);
    assert!(whole("data"), "a new directory within the limit is watched");
    std::fs::create_dir(dir.path().join("data/b")).unwrap();
    state.drain(&mut buffer);
    assert!(!whole("data"), "a directory left unwatched at the limit: scanned, not whole");
    assert!(whole("other"));
    std::fs::remove_dir(dir.path().join("other")).unwrap();
    state.drain(&mut buffer);
    assert!(!whole("other"), "the bucket's directory went");
    std::fs::create_dir(dir.path().join("other")).unwrap();
    state.drain(&mut buffer);
    assert!(whole("other"), "made again (its old watch freed room): watched whole once listed");
    assert!(!whole("data"));
}

/// Once the watcher says it has read to an instant after a directory was made, that directory
/// is watched (listed): what the gateway links into it from then on shows the watcher only its
/// name appearing.
#[test]
fn once_caught_up_past_a_directorys_making_the_directory_is_watched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let read_to = Arc::new(Mutex::new(None::<Instant>));
    let told = read_to.clone();
    let options = WatchOptions {
        caught_up: Some(Arc::new(move |at| *told.lock().unwrap() = Some(at))),
        ..WatchOptions::default()
    };
    let watcher = Watcher::start(dir.path(), Arc::new(|_: &str| true), options, Arc::new(|_| {})).unwrap();
    let watches = watcher.stats().watches;
    std::fs::create_dir(dir.path().join("data/new")).unwrap();
    let made = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_to.lock().unwrap().is_some_and(|at| at > made) {
        assert!(Instant::now() < deadline, "the watcher never said it read past the directory");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(watcher.stats().watches, watches + 1, "listed and watched before it said so");
    watcher.stop();
}
