//! Shard reads that fail with EIO (unreadable sectors; `ISTHMUS_EC_EIO_DRIVES` stands in for
//! them, device-mapper's error target being unavailable): reads stay byte-exact while k good
//! shards remain, the failures are counted against the drives, and one drive more is a clear
//! error, never wrong bytes. (Its own test binary: the variable is set before any pool opens,
//! with no other test running in the process.)

use std::io::Read;

use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{GetRequest, PutRequest, RequestContext, Store, StoreError, StoreExt};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ seed).collect()
}

fn read(store: &ErasureStore, key: &str, range: Option<(u64, u64)>) -> Result<Vec<u8>, StoreError> {
    let request = GetRequest {
        range: range.map(|(a, b)| isthmus_store::ByteRange::FromTo { first: a, last: Some(b) }),
        ..Default::default()
    };
    let mut response = store.get_object(&RequestContext::process(), "bkt", key, &request)?;
    let mut bytes = Vec::new();
    response.body.read_to_end(&mut bytes).map_err(StoreError::Io)?;
    Ok(bytes)
}

#[test]
fn reads_are_byte_exact_while_k_shards_read_without_eio() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = (0..6).map(|i| dir.path().join(format!("d{i}"))).collect();
    // SAFETY: this test binary runs this one test, and it sets the variable before any thread
    // that could read the environment (the pool's) exists.
    unsafe { std::env::set_var("ISTHMUS_EC_EIO_DRIVES", format!("{},{}", paths[1].display(), paths[4].display())) };
    let config = ErasureConfig { block_size: 64 << 10, inline_limit: 4096, ..ErasureConfig::new(paths.clone(), 4, 2) };
    let store = ErasureStore::open("ec", config.clone(), StoreOptions::default()).unwrap();
    let cx = RequestContext::process();
    store.create_bucket(&cx, "bkt", &Default::default()).unwrap();
    let objects: Vec<(String, Vec<u8>)> =
        [5000usize, 64 << 10, (64 << 10) * 7 + 333].iter().map(|&n| (format!("k{n}"), pattern(n, n as u8))).collect();
    for (key, bytes) in &objects {
        store.put_bytes(&cx, "bkt", key, bytes, PutRequest::default()).unwrap();
    }
    for (key, bytes) in &objects {
        assert!(read(&store, key, None).unwrap() == *bytes, "{key}: bytes differ");
        let (from, to) = (bytes.len() as u64 / 3, bytes.len() as u64 / 2);
        let part = read(&store, key, Some((from, to))).unwrap();
        assert!(part == bytes[from as usize..=to as usize], "{key}: a range differs");
    }
    let errors: Vec<u64> = store.drive_reports().iter().map(|d| d.errors).collect();
    assert!(errors[1] > 0 && errors[4] > 0, "the failing drives' errors are counted: {errors:?}");
    assert_eq!((errors[0], errors[2], errors[3], errors[5]), (0, 0, 0, 0), "{errors:?}");
    // A third drive lost: fewer than k shards of a block read; an error, never wrong bytes.
    drop(store);
    std::fs::rename(&paths[2], dir.path().join("lost")).unwrap();
    let store = ErasureStore::open("ec", config, StoreOptions::default()).unwrap();
    let (key, _) = &objects[2];
    match read(&store, key, None) {
        Err(StoreError::InsufficientShards(_)) => {}
        Err(StoreError::Io(err)) if err.to_string().contains("cannot be read") => {}
        other => panic!("{key}: {:?}", other.map(|b| b.len())),
    }
}
