//! The request path's share of a notification: one PUT's event queued (`Queue::enqueue`), with
//! relaxed and strict durability, beside the raw `pwrite` of a frame of the same size that it
//! stands on. Run with `cargo bench -p isthmus-notify`; compare each figure with its `pwrite`
//! neighbour of the same run (this machine is shared and noisy, absolute times move). The queue
//! lives in a temporary directory (`TMPDIR`: point it at the file system to measure).

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use isthmus_notify::event::{Event, EventName};
use isthmus_notify::queue::{Queue, QueueLimits, Target, WhenFull};
use isthmus_store::state_dir::{StateDir, StateTrust};

const ARN: &str = "arn:isthmus:sqs::hook:webhook";

/// What a 4 KiB PUT through the HTTP door announces.
fn put_event(n: u64) -> Event {
    Event {
        name: EventName::ObjectCreatedPut,
        bucket: "simulation-results".into(),
        key: format!("run-0042/rank-017/checkpoint.{n:06}.h5"),
        size: 4096,
        etag: Some("0f343b0931126a20f133d67c2b018a3b".into()),
        version_id: None,
        principal: "alice".into(),
        source_ip: "127.0.0.1".into(),
        time: SystemTime::now(),
        region: "us-east-1".into(),
        bucket_owner: "alice".into(),
    }
}

fn targets() -> Vec<Target> {
    vec![Target { configuration_id: "new-results".into(), arn: ARN.into() }]
}

fn open(strict_sync: bool) -> (tempfile::TempDir, std::sync::Arc<Queue>) {
    let root = tempfile::tempdir().unwrap();
    let dir = StateDir::open_path(root.path(), StateTrust::Gateway).unwrap().subdir("notify", true).unwrap().unwrap();
    let limits = QueueLimits { max_bytes: 1 << 30, when_full: WhenFull::Refuse, strict_sync };
    (root, Queue::open(dir, vec![ARN.into()], limits).unwrap())
}

/// `n` events queued, timed; then taken and acknowledged, untimed (so the queue stays small).
fn enqueue_timed(queue: &Queue, n: u64) -> Duration {
    let events: Vec<Event> = (0..n).map(put_event).collect();
    let start = Instant::now();
    for event in events {
        queue.enqueue(event, targets()).unwrap();
    }
    let took = start.elapsed();
    loop {
        let batch = queue.next_batch(0, 4096).unwrap();
        if batch.is_empty() {
            break;
        }
        queue.ack_all(0, batch.iter().map(|(seq, _)| *seq));
    }
    took
}

fn enqueue(c: &mut Criterion) {
    for (name, strict) in [("queue/enqueue-relaxed", false), ("queue/enqueue-strict", true)] {
        let (_root, queue) = open(strict);
        c.bench_function(name, |b| b.iter_custom(|n| enqueue_timed(&queue, n)));
    }
    // The ceiling: the one write(2) of a frame the queue's enqueue stands on.
    let root = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(root.path().join("raw")).unwrap();
    let frame = vec![b'x'; 420];
    let mut offset = 0u64;
    c.bench_function("queue/pwrite-420B", |b| {
        b.iter(|| {
            file.write_all_at(&frame, offset).unwrap();
            offset = (offset + frame.len() as u64) % (64 << 20);
        })
    });
}

criterion_group!(benches, enqueue);
criterion_main!(benches);
