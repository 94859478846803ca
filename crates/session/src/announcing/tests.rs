use std::sync::Mutex;

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
