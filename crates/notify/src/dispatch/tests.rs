use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::*;
use crate::destination::Settings;
use crate::queue::tests::{event, state, to};
use crate::webhook::tests::{Received, serve, status};

fn webhook(id: &str, url: &str, token: Option<&str>) -> Destination {
    Destination {
        id: id.into(),
        settings: Settings::Webhook { endpoint: url.into(), auth_token: token.map(str::to_string) },
    }
}

fn limits() -> QueueLimits {
    QueueLimits { max_bytes: 1 << 20, when_full: WhenFull::Refuse, strict_sync: false }
}

/// Waits (at most 10 s) until `done` holds.
fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The keys of the records a server took (the requests answered 2xx are the last ones of
/// each retry; the body's key decoded).
fn keys_of(bodies: &[Received]) -> Vec<String> {
    bodies
        .iter()
        .map(|r| {
            let doc: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            doc["Records"][0]["s3"]["object"]["key"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn records_reach_a_webhook_in_order_once_each_after_failures_with_the_token() {
    let server = serve(|n| if n < 3 { status(503, "") } else { status(200, "") });
    let hook = webhook("hook", &server.url, Some("s3cret"));
    let arn = hook.arn();
    let (_root, dir) = state();
    let notifier = Notifier::start(dir, vec![hook], limits()).unwrap();
    for i in 0..5 {
        notifier.enqueue(event(&format!("k{i}")), to(&[&arn])).unwrap();
    }
    until("five delivered", || notifier.metrics().delivered == 5);
    let received = server.received.lock().unwrap().clone();
    assert_eq!(received.len(), 8, "three refusals, then five deliveries");
    assert!(received.iter().all(|r| r.authorization.as_deref() == Some("Bearer s3cret")));
    assert!(received.iter().all(|r| r.content_type.as_deref() == Some("application/json")));
    assert_eq!(keys_of(&received[..3]), ["k0", "k0", "k0"], "the first record retried");
    assert_eq!(keys_of(&received[3..]), ["k0", "k1", "k2", "k3", "k4"], "then each once, in order");
    let sequencers: Vec<String> = received[3..]
        .iter()
        .map(|r| {
            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["Records"][0]["s3"]["object"]["sequencer"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(sequencers.windows(2).all(|w| w[0] < w[1]), "{sequencers:?}");
    let metrics = notifier.metrics();
    assert_eq!((metrics.queued, metrics.delivered, metrics.failed, metrics.pending, metrics.dropped), (5, 5, 3, 0, 0));
    let text = notifier.prometheus();
    assert!(text.contains(&format!("isthmus_notify_failed_total{{destination=\"{arn}\"}} 3")), "{text}");
    assert!(matches!(
        notifier.enqueue(event("x"), to(&["arn:isthmus:sqs::other:webhook"])),
        Err(NotifyError::UnknownDestination(_))
    ));
    notifier.shutdown();
    assert!(matches!(notifier.enqueue(event("late"), to(&[&arn])), Err(NotifyError::Closed)));
}

#[test]
fn a_backlog_goes_in_batches_of_one_record_per_key_and_a_batch_taken_in_part_resumes_where_it_stopped() {
    // The third request is refused: the batch [k0, k1, k2] is taken in part (two records),
    // and the rest of it is sent again.
    let server = serve(|n| if n == 2 { status(503, "") } else { status(200, "") });
    let hook = webhook("hook", &server.url, None);
    let arn = hook.arn();
    let (_root, dir) = state();
    // Queued before the notifier starts: the whole backlog is there for its first batch.
    let queue = Queue::open(dir.clone(), vec![arn.clone()], limits()).unwrap();
    for key in ["k0", "k1", "k2", "k1", "k3"] {
        queue.enqueue(event(key), to(&[&arn])).unwrap();
    }
    queue.close().unwrap();
    drop(queue);
    let notifier = Notifier::start(dir, vec![hook], limits()).unwrap();
    until("five delivered", || notifier.metrics().delivered == 5);
    let received = server.received.lock().unwrap().clone();
    // k1's second record waits for the next batch: a batch holds one record per key, so k1's
    // two records can never arrive out of order, even when a batch is sent again in part.
    assert_eq!(keys_of(&received), ["k0", "k1", "k2", "k2", "k1", "k3"]);
    let metrics = notifier.metrics();
    assert_eq!((metrics.delivered, metrics.failed, metrics.pending), (5, 1, 0));
    notifier.shutdown();
}

#[test]
fn a_redirect_is_never_followed_and_counts_as_a_failure() {
    let trap = serve(|_| status(200, ""));
    let redirect = format!("Location: {}\r\n", trap.url);
    let server = serve(move |_| status(302, &redirect));
    let hook = webhook("moved", &server.url, Some("s3cret"));
    let arn = hook.arn();
    let (_root, dir) = state();
    let notifier = Notifier::start(dir, vec![hook], limits()).unwrap();
    notifier.enqueue(event("k"), to(&[&arn])).unwrap();
    until("retried twice", || notifier.metrics().failed >= 2);
    std::thread::sleep(Duration::from_millis(50));
    let metrics = notifier.metrics();
    assert_eq!((metrics.delivered, metrics.pending), (0, 1));
    assert!(metrics.lag_seconds > 0.0);
    assert_eq!(trap.connections.load(Ordering::SeqCst), 0, "the redirect's target never saw the gateway");
    let started = Instant::now();
    notifier.shutdown();
    assert!(started.elapsed() < Duration::from_secs(2), "a shutdown interrupts the backoff");
}

#[test]
fn a_notifier_dropped_without_shutdown_resumes_at_its_last_saved_cursor() {
    let failing = Arc::new(AtomicBool::new(false));
    let fail = failing.clone();
    let server = serve(move |_| if fail.load(Ordering::SeqCst) { status(500, "") } else { status(204, "") });
    let hook = webhook("hook", &server.url, None);
    let arn = hook.arn();
    let (_root, dir) = state();
    let notifier = Notifier::start(dir.clone(), vec![hook.clone()], limits()).unwrap();
    for key in ["k0", "k1", "k2"] {
        notifier.enqueue(event(key), to(&[&arn])).unwrap();
    }
    until("three delivered", || notifier.metrics().delivered == 3);
    // Caught up: its position is saved within a second (not at once: a save costs fsyncs).
    let cursor = dir.path().join("cursor.webhook.hook");
    until("the position saved", || std::fs::read_to_string(&cursor).is_ok_and(|text| !text.is_empty()));
    failing.store(true, Ordering::SeqCst);
    for key in ["k3", "k4"] {
        notifier.enqueue(event(key), to(&[&arn])).unwrap();
    }
    until("a failure", || notifier.metrics().failed >= 1);
    drop(notifier); // as a crash leaves it: no cursor saved now
    failing.store(false, Ordering::SeqCst);
    server.received.lock().unwrap().clear();
    let notifier = Notifier::start(dir, vec![hook], limits()).unwrap();
    assert_eq!(notifier.metrics().pending, 2, "k3 and k4 survived");
    until("two delivered", || notifier.metrics().delivered == 2);
    assert_eq!(keys_of(&server.received.lock().unwrap()), ["k3", "k4"]);
    notifier.shutdown();
}

#[test]
fn a_destination_kind_without_a_sender_yet_only_delays_its_own_records() {
    let server = serve(|_| status(200, ""));
    let hook = webhook("hook", &server.url, None);
    let broken = webhook("broken", "ftp://nowhere", None);
    let (hook_arn, broken_arn) = (hook.arn(), broken.arn());
    let (_root, dir) = state();
    let notifier = Notifier::start(dir, vec![broken, hook], limits()).unwrap();
    notifier.enqueue(event("both"), to(&[&broken_arn, &hook_arn])).unwrap();
    notifier.enqueue(event("hook"), to(&[&hook_arn])).unwrap();
    until("the hook has both", || server.received.lock().unwrap().len() == 2);
    // The server keeps a request before it answers: the hook's cursor moves once the answer is back.
    until("the hook's records are acknowledged", || notifier.metrics().destinations[1].delivered == 2);
    until("the broken one failed", || notifier.metrics().destinations[0].failed >= 1);
    let metrics = notifier.metrics();
    assert_eq!((metrics.destinations[0].pending, metrics.destinations[1].pending), (1, 0));
    notifier.shutdown();
}

/// The scheduling policy (`/proc/self/task/TID/stat` field 41) of each thread of this process
/// whose name starts with `prefix`.
fn policies_of(prefix: &str) -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| {
            let path = task.ok()?.path();
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            name.starts_with(prefix).then(|| fields[41 - 3].parse().unwrap())
        })
        .collect()
}

#[test]
fn delivery_threads_do_not_preempt_request_threads() {
    let server = serve(|_| status(200, ""));
    let (_root, dir) = state();
    let notifier = Notifier::start(dir, vec![webhook("sched", &server.url, None)], limits()).unwrap();
    // Every delivery thread and the queue's flusher (each `isthmus-notify-*`) under SCHED_BATCH.
    until("the notifier's threads are under SCHED_BATCH", || {
        let policies = policies_of("isthmus-notify");
        !policies.is_empty() && policies.iter().all(|&p| p == libc::SCHED_BATCH as u32)
    });
    notifier.shutdown();
}
