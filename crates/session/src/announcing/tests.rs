use std::sync::Mutex;
use std::sync::atomic::Ordering;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::notification::NotificationRule;
use isthmus_store::{DeleteRequest, Durability, StoreExt};

use super::*;

/// Keeps what it is given.
#[derive(Default)]
struct Kept(Mutex<Vec<(Announcement, Vec<Target>)>>);

impl Announcer for Kept {
    fn admit(&self, _: &RequestContext) -> StoreResult<()> {
        Ok(())
    }

    fn announce(&self, announcement: Announcement, targets: Vec<Target>) {
        self.0.lock().unwrap().push((announcement, targets));
    }
}

/// An announcing store on a fresh directory, with a bucket per rule set: `created` wants new
/// objects only, `removed` removals only.
fn store() -> (tempfile::TempDir, Announcing, Arc<Kept>) {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { durability: Durability::Relaxed, ..StoreOptions::default() };
    let engine: Arc<dyn Store> = Arc::new(PosixStore::open(dir.path(), options).unwrap());
    let cx = RequestContext::process();
    for (bucket, events) in [("created", "s3:ObjectCreated:*"), ("removed", "s3:ObjectRemoved:*")] {
        engine.create_bucket(&cx, bucket, &Default::default()).unwrap();
        let rule = NotificationRule {
            id: "r".into(),
            list: Default::default(),
            arn: "arn:isthmus:sqs::hook:webhook".into(),
            events: vec![events.into()],
            prefix: String::new(),
            suffix: String::new(),
        };
        let config =
            BucketConfig { notification: Some(NotificationConfig { rules: vec![rule] }), ..Default::default() };
        engine.set_bucket_config(&cx, bucket, &config).unwrap();
    }
    let kept = Arc::new(Kept::default());
    (dir, Announcing::new(engine, kept.clone(), "root"), kept)
}

/// The gateway remembers its own changes only where the watcher would announce them; the
/// others were never claimed, and a bucket whose rules want new objects only filled the
/// memory of the gateway's writes with its deletes (100,000 of them, then evictions on
/// every write).
#[test]
fn only_changes_the_watcher_would_announce_are_remembered() {
    let (_dir, store, kept) = store();
    let cx = RequestContext::process();
    let recent = store.recent_writes();
    recent.watcher_started();
    for i in 0..10 {
        store.put_bytes(&cx, "created", &format!("k{i}"), b"x", PutRequest::default()).unwrap();
    }
    assert_eq!(recent.len(), 10, "writes the watcher will see land");
    for i in 0..10 {
        store.delete_object(&cx, "created", &format!("k{i}"), &DeleteRequest::default()).unwrap();
    }
    assert_eq!(recent.len(), 0, "no rule wants removals: nothing of the deletes is remembered");
    assert_eq!(kept.0.lock().unwrap().len(), 10, "the writes were announced, the deletes not");

    store.put_bytes(&cx, "removed", "k", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 0, "no rule wants new objects");
    store.delete_object(&cx, "removed", "k", &DeleteRequest::default()).unwrap();
    assert_eq!(recent.len(), 1, "the removal the watcher will see go");
    assert!(recent.take("removed", "k", None));
    assert_eq!(kept.0.lock().unwrap().last().unwrap().0.name, "ObjectRemoved:Delete");
}

/// Without a watcher or scanner nothing would ever claim what the gateway remembers of its
/// writes: nothing is remembered (it was, up to 100,000 changes, then every write forgot the
/// oldest and the gateway warned of the bound), and every write is still announced.
#[test]
fn without_a_watcher_nothing_is_remembered_and_everything_announced() {
    let (_dir, store, kept) = store();
    let cx = RequestContext::process();
    let recent = store.recent_writes();
    for i in 0..10 {
        store.put_bytes(&cx, "created", &format!("k{i}"), b"x", PutRequest::default()).unwrap();
    }
    store.delete_object(&cx, "removed", "k0", &DeleteRequest::default()).unwrap();
    assert_eq!(recent.len(), 0, "no watcher: nothing remembered");
    assert_eq!(kept.0.lock().unwrap().len(), 11, "each write and the delete announced");

    recent.watcher_started();
    store.put_bytes(&cx, "created", "after", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 1, "a watcher started: its writes are remembered from then on");
}

/// In a bucket the kernel watcher watches whole, a new key linked into a directory that exists
/// shows the watcher only its name appearing, which it does not announce: nothing of it is
/// remembered (remembering every such write cost a 4 KiB PUT about 4 % of its rate). A write
/// that makes a directory, or replaces a key's file, shows the watcher more: it is remembered
/// (marked before the step the watcher could see), and every write is announced once.
#[test]
fn a_new_key_linked_into_a_bucket_watched_whole_is_not_remembered_the_others_are() {
    let (dir, store, kept) = store();
    let cx = RequestContext::process();
    let recent = store.recent_writes();
    recent.watcher_started();
    store.put_bytes(&cx, "created", "first", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 1, "not watched whole yet: remembered");
    assert!(recent.take("created", "first", Some(&kept.0.lock().unwrap()[0].0.etag.clone().unwrap())));

    let whole = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let test = whole.clone();
    let progress = recent.watcher_progress();
    recent.watchers_watch_whole(
        Arc::new(move |bucket| bucket == "created" && test.load(Ordering::Relaxed)),
        std::slice::from_ref(&progress),
    );
    for i in 0..10 {
        store.put_bytes(&cx, "created", &format!("k{i}"), b"x", PutRequest::default()).unwrap();
    }
    assert_eq!(recent.len(), 0, "new keys linked into the bucket's directory: nothing to remember");

    store.put_bytes(&cx, "created", "new/dir/k", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 1, "a directory made: the watcher lists it and finds the file");
    let etag = kept.0.lock().unwrap().last().unwrap().0.etag.clone().unwrap();
    assert!(recent.take("created", "new/dir/k", Some(&etag)));
    for (key, dir) in [("new/dir/k2", "new/dir"), ("new/k2", "new")] {
        store.put_bytes(&cx, "created", key, b"x", PutRequest::default()).unwrap();
        assert_eq!(recent.len(), 1, "{dir} is young: the watcher may list it after this link");
        let etag = kept.0.lock().unwrap().last().unwrap().0.etag.clone().unwrap();
        assert!(recent.take("created", key, Some(&etag)));
    }
    std::fs::create_dir(dir.path().join("created/older")).unwrap();
    store.put_bytes(&cx, "created", "older/k", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 0, "a directory the watcher listed long ago");
    progress.caught_up(std::time::Instant::now());
    store.put_bytes(&cx, "created", "new/dir/k4", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 0, "the watcher has read past the directory's making: listed");

    store.put_bytes(&cx, "created", "k3", b"y", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 1, "an overwrite is a rename over the key: the watcher sees it arrive");
    let etag = kept.0.lock().unwrap().last().unwrap().0.etag.clone().unwrap();
    assert!(recent.known_file(
        "created",
        "k3",
        1,
        store.head_object(&cx, "created", "k3", &HeadRequest::default()).unwrap().last_modified
    ));
    assert_eq!(recent.len(), 0, "claimed by its size and time");
    assert!(recent.take("created", "k3", Some(&etag)), "and still answers for its file");

    whole.store(false, Ordering::Relaxed);
    store.put_bytes(&cx, "created", "k10", b"x", PutRequest::default()).unwrap();
    assert_eq!(recent.len(), 1, "no longer watched whole (a directory over the watch limit): remembered");
    assert_eq!(kept.0.lock().unwrap().len(), 18, "every write announced once");
}
