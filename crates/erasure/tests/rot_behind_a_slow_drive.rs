//! A rotten shard on a slow drive is healed even though no reader waits for that drive: the
//! range read gives up on it and the whole-block read has k good shards from the others first,
//! so only the slow drive's own late answer knows of the rot. (Its own test binary: the delay
//! is set through the environment before the pool is opened again.)

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{ByteRange, GetRequest, PutRequest, RequestContext, Store, StoreExt};

const BLOCK: u64 = 64 << 10;

fn open(paths: &[PathBuf]) -> ErasureStore {
    let config = ErasureConfig { block_size: BLOCK, inline_limit: 4096, ..ErasureConfig::new(paths.to_vec(), 4, 2) };
    ErasureStore::open("ec", config, StoreOptions::default()).unwrap()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { out.extend(files_under(&path)) } else { out.push(path) }
    }
    out
}

#[test]
fn a_rotten_shard_nobody_waits_for_is_still_healed() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = (0..6).map(|i| dir.path().join(format!("d{i}"))).collect();
    let object: Vec<u8> = (0..(5 * BLOCK + BLOCK / 2) as usize).map(|i| (i * 7 % 251) as u8).collect();
    {
        let store = open(&paths);
        store.create_bucket(&RequestContext::process(), "bkt", &Default::default()).unwrap();
        store.put_bytes(&RequestContext::process(), "bkt", "obj", &object, PutRequest::default()).unwrap();
    }
    // Data shard 0 of the first block: the shard file whose first data bytes are the object's.
    let mut rotten = None;
    for (d, drive) in paths.iter().enumerate() {
        for file in files_under(&drive.join(".isthmus/ec/data")) {
            let mut bytes = std::fs::read(&file).unwrap();
            if bytes.len() > 64 + 4 && bytes[4..64] == object[..60] {
                bytes[100] ^= 0x5a;
                std::fs::write(&file, &bytes).unwrap();
                rotten = Some((d, file, bytes));
            }
        }
    }
    let (d, file, bad) = rotten.expect("one drive holds data shard 0");
    // SAFETY: this test binary runs this one test; no other thread reads the environment.
    unsafe { std::env::set_var("ISTHMUS_EC_SLOW_DRIVES", format!("{}=400", paths[d].display())) };
    let store = open(&paths);
    let request =
        GetRequest { range: Some(ByteRange::FromTo { first: 10, last: Some(1000) }), ..GetRequest::default() };
    let mut got = Vec::new();
    store.get_object(&RequestContext::process(), "bkt", "obj", &request).unwrap().body.read_to_end(&mut got).unwrap();
    assert!(got == object[10..=1000], "the range reads right around the slow, rotten shard");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read(&file).is_ok_and(|now| now == bad) {
        assert!(Instant::now() < deadline, "the rotten shard on the slow drive was not healed");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The repair is counted (the gateway exports it as isthmus_pool_heal_repaired_total) and
    // the backlog drains.
    while store.heal_backlog() != (0, 1) {
        assert!(Instant::now() < deadline, "heal backlog and repairs: {:?}", store.heal_backlog());
        std::thread::sleep(Duration::from_millis(50));
    }
}
