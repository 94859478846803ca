//! A drive that stops answering (every I/O on it waits ten minutes) while objects are written:
//! writes are acknowledged by the write quorum and do not wait for it, also when the drive
//! falls so far behind that its shards are left for heal, and the objects read back byte-exact
//! around it. (Its own test binary: the stall is set through the environment before any pool
//! opens, with no other test running in the process.)

use std::io::Read;
use std::sync::mpsc;
use std::time::Duration;

use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{GetRequest, PutRequest, RequestContext, Store, StoreExt};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ seed).collect()
}

#[test]
fn writes_are_acknowledged_without_a_stalled_drive() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = (0..6).map(|i| dir.path().join(format!("d{i}"))).collect();
    // SAFETY: this test binary runs this one test, and it sets the variable before any thread
    // that could read the environment (the pool's) exists.
    unsafe { std::env::set_var("ISTHMUS_EC_SLOW_DRIVES", format!("{}=600000", paths[1].display())) };
    let config = ErasureConfig { block_size: 4 << 20, inline_limit: 4096, ..ErasureConfig::new(paths, 4, 2) };
    let store = ErasureStore::open("ec", config, StoreOptions::default()).unwrap();
    let cx = RequestContext::process();
    store.create_bucket(&cx, "bkt", &Default::default()).unwrap();
    // Three blocks (the stalled drive is merely behind) and forty (it falls more than the
    // writer's lag bound behind and is left out of the object).
    let objects: Vec<(String, Vec<u8>)> = [(3usize, 1u8), (40, 2)]
        .iter()
        .map(|&(blocks, seed)| (format!("k{blocks}"), pattern(blocks << 22, seed)))
        .collect();
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn({
        let objects = objects.clone();
        move || {
            for (key, bytes) in &objects {
                store.put_bytes(&RequestContext::process(), "bkt", key, bytes, PutRequest::default()).unwrap();
            }
            done_tx.send(()).unwrap();
            store
        }
    });
    // Waiting for the stalled drive would take ten minutes per block.
    done_rx.recv_timeout(Duration::from_secs(120)).expect("the writes were acknowledged without the stalled drive");
    let store = writer.join().unwrap();
    for (key, bytes) in &objects {
        let mut body = store.get_object(&cx, "bkt", key, &GetRequest::default()).unwrap().body;
        let mut read = Vec::new();
        body.read_to_end(&mut read).unwrap();
        assert!(read == *bytes, "{key} reads back byte-exact around the stalled drive");
    }
}
