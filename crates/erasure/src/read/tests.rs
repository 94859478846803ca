//! Reads around a slow or stalled drive: which drives reads ask, counted on the drives.

use std::io::Read;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{ByteRange, GetRequest, PutRequest, RequestContext, Store, StoreExt};

const BLOCK: u64 = 64 << 10;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ seed).collect()
}

fn pool(dir: &std::path::Path, hedged: bool) -> ErasureStore {
    let paths = (0..6).map(|i| dir.join(format!("d{i}"))).collect();
    let config = ErasureConfig {
        block_size: BLOCK,
        inline_limit: 4096,
        hedged_reads: hedged,
        ..ErasureConfig::new(paths, 4, 2)
    };
    ErasureStore::open("ec", config, StoreOptions::default()).unwrap()
}

/// Polls `done` until it holds or `within` has passed; whether it held.
fn until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// A drive whose I/O hangs (its lane's threads stuck in I/O that never returns, as on a disk
/// that stopped answering) is found stalled, and reads go around it: whole objects and small
/// ranges of its data shards read byte-exact from eight readers at once, and of all their
/// shard reads the stalled drive is asked one, a probe nobody waits for. The pool does not
/// hedge, so a read that asked the drive for a shard it needed would never return.
#[test]
fn reads_go_around_a_stalled_drive_without_asking_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(pool(dir.path(), false));
    let cx = RequestContext::process();
    store.create_bucket(&cx, "bkt", &Default::default()).unwrap();
    let objects: Vec<(String, Vec<u8>)> =
        (0..12u8).map(|i| (format!("obj{i}"), pattern((5 * BLOCK + BLOCK / 3) as usize, i))).collect();
    for (key, bytes) in &objects {
        store.put_bytes(&cx, "bkt", key, bytes, PutRequest::default()).unwrap();
    }
    let inner = store.inner().clone();
    let stalled = inner.drives[0].clone();
    // Hold every thread of the drive's lane in an I/O that returns when released.
    let (release, held) = mpsc::channel::<()>();
    let held = Arc::new(Mutex::new(held));
    for _ in 0..8 {
        let (drive, held) = (stalled.clone(), held.clone());
        stalled.lane.spawn(move || {
            let _ = drive.timed(|| held.lock().unwrap().recv());
        });
    }
    // It is taken for slow half a second after its last answer (the reads below find out
    // whether it was).
    until(Duration::from_secs(2), || inner.is_slow(&stalled, inner.median_latency_us()));
    let asked_before = stalled.latency.asks();
    let (done_tx, done_rx) = mpsc::channel();
    for reader in 0..8 {
        let (store, objects, done_tx) = (store.clone(), objects.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let cx = RequestContext::process();
            for (n, (key, bytes)) in objects.iter().enumerate().filter(|(n, _)| n % 2 == reader % 2) {
                let mut whole = Vec::new();
                let mut body = store.get_object(&cx, "bkt", key, &GetRequest::default()).unwrap().body;
                body.read_to_end(&mut whole).unwrap();
                assert!(whole == *bytes, "{key} reads back byte-exact");
                // A range inside one data shard of a block (the ranged path).
                let first = (n as u64 % 4) * (BLOCK / 4) + BLOCK + 100;
                let range = ByteRange::FromTo { first, last: Some(first + 999) };
                let request = GetRequest { range: Some(range), ..GetRequest::default() };
                let mut part = Vec::new();
                store.get_object(&cx, "bkt", key, &request).unwrap().body.read_to_end(&mut part).unwrap();
                assert!(part == bytes[first as usize..first as usize + 1000], "a range of {key} reads byte-exact");
            }
            let _ = done_tx.send(());
        });
    }
    drop(done_tx);
    let finished = (0..8).all(|_| done_rx.recv_timeout(Duration::from_secs(20)).is_ok());
    let asked = stalled.latency.asks() - asked_before;
    drop(release);
    assert!(finished, "the reads finished (a reader failed, or waited for the stalled drive)");
    assert!(asked <= 1, "the stalled drive was asked for {asked} shards; only one probe was to go to it");
}

/// A drive is judged slow on its own service time, not on how long its answers wait in its
/// queue: under many streams every drive's queue is long now and then, and a slow drive that
/// reads go around has a short one.
#[test]
fn slow_is_judged_on_service_time_not_on_queues() {
    let dir = tempfile::tempdir().unwrap();
    let store = pool(dir.path(), true);
    let inner = store.inner();
    let (ms, us) = (Duration::from_millis, Duration::from_micros);
    for _ in 0..32 {
        // Four busy drives (answers wait 60 ms in their queues, served in 0.3 ms each).
        for drive in &inner.drives[2..] {
            drive.latency.record(us(300), ms(60));
        }
        // A slow drive that reads go around: served in 80 ms, its queue short.
        inner.drives[0].latency.record(ms(80), ms(90));
        // A drive as fast as the others, its queue the longest.
        inner.drives[1].latency.record(us(300), ms(500));
    }
    let median = inner.median_latency_us();
    assert!(inner.is_slow(&inner.drives[0], median), "the drive 250 times slower than its peers is slow");
    assert!(!inner.is_slow(&inner.drives[1], median), "a busy drive that serves as fast as its peers is not slow");
    assert!(inner.drives[2..].iter().all(|d| !inner.is_slow(d, median)));
}

/// A slow drive gets one probe at a time: none while one is unanswered.
#[test]
fn a_slow_drive_is_probed_one_read_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = pool(dir.path(), true);
    let latency = &store.inner().drives[3].latency;
    let every = Duration::from_millis(20);
    assert!(latency.claim_probe(every), "a first probe goes");
    assert!(!latency.claim_probe(every), "no second probe while the first is unanswered");
    latency.probed();
    assert!(
        until(Duration::from_secs(10), || latency.claim_probe(every)),
        "a probe goes again once the last one answered and its interval passed"
    );
}
