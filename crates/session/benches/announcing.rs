//! What announcing costs a small PUT on the request's own thread, before the queue: the
//! bucket's rules looked up, the gateway's own write remembered for the watcher, and the
//! announcement built. Three figures of one run: the engine alone, the announcing wrapper on a
//! bucket without rules, and on a bucket with one rule (its announcements handed to an
//! announcer that drops them; `cargo bench -p isthmus-notify` measures the queue they would
//! reach). Run with `cargo bench -p isthmus-session`; compare the figures with each other,
//! never across runs (this machine is shared and noisy). `TMPDIR` chooses the file system.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_session::announcing::{Announcement, Announcer, Announcing, Target};
use isthmus_store::notification::{NotificationConfig, NotificationRule};
use isthmus_store::{BucketConfig, Durability, PutRequest, RequestContext, Store, StoreExt, StoreResult};

const SMALL: usize = 4096;

/// Counts what it is given and drops it.
#[derive(Default)]
struct Dropping(AtomicU64);

impl Announcer for Dropping {
    fn admit(&self, _: &RequestContext) -> StoreResult<()> {
        Ok(())
    }

    fn announce(&self, announcement: Announcement, targets: Vec<Target>) {
        self.0.fetch_add(std::hint::black_box((announcement, targets)).1.len() as u64, Ordering::Relaxed);
    }
}

fn put_bytes_loop(c: &mut Criterion, name: &str, store: &dyn Store, bucket: &str) {
    let cx = RequestContext::process();
    let body = vec![7u8; SMALL];
    let mut n = 0u64;
    c.bench_function(name, |b| {
        b.iter(|| {
            n += 1;
            // New keys, as a simulation's results arrive: linked into place, never replaced.
            let key = format!("run-0042/rank-017/checkpoint.{n:08}.h5");
            store.put_bytes(&cx, bucket, &key, &body, PutRequest::default()).unwrap()
        })
    });
}

fn announcing(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { durability: Durability::Relaxed, ..StoreOptions::default() };
    let engine: Arc<dyn Store> = Arc::new(PosixStore::open(dir.path(), options).unwrap());
    let cx = RequestContext::process();
    for bucket in ["plain", "quiet", "ruled"] {
        engine.create_bucket(&cx, bucket, &Default::default()).unwrap();
    }
    let rule = NotificationRule {
        id: "new-results".into(),
        list: Default::default(),
        arn: "arn:isthmus:sqs::hook:webhook".into(),
        events: vec!["s3:ObjectCreated:*".into()],
        prefix: String::new(),
        suffix: String::new(),
    };
    let config = BucketConfig { notification: Some(NotificationConfig { rules: vec![rule] }), ..Default::default() };
    engine.set_bucket_config(&cx, "ruled", &config).unwrap();
    let announcer = Arc::new(Dropping::default());
    let wrapped = Announcing::new(engine.clone(), announcer.clone(), "root");
    put_bytes_loop(c, "put-4KiB/engine", &*engine, "plain");
    put_bytes_loop(c, "put-4KiB/announcing-no-rule", &wrapped, "quiet");
    put_bytes_loop(c, "put-4KiB/announcing-one-rule", &wrapped, "ruled");
    assert!(announcer.0.load(Ordering::Relaxed) > 0, "the rule's bucket announced its writes");
}

criterion_group!(benches, announcing);
criterion_main!(benches);
