//! Ranged reads of erasure-coded objects, which fetch only the data shards holding the range
//! when they can: every range (inside one shard, across shards, across blocks, the short last
//! block) reads byte-exact, also when a shard it needs rotted on its drive, which then gets
//! healed.

use std::io::Read;
use std::path::{Path, PathBuf};

use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::StoreOptions;
use isthmus_store::{ByteRange, GetRequest, PutRequest, RequestContext, Store, StoreExt};

const BLOCK: u64 = 64 << 10;

fn store(dir: &Path) -> (ErasureStore, Vec<PathBuf>) {
    store_with_blocks(dir, BLOCK)
}

fn store_with_blocks(dir: &Path, block_size: u64) -> (ErasureStore, Vec<PathBuf>) {
    let paths: Vec<PathBuf> = (0..6).map(|i| dir.join(format!("d{i}"))).collect();
    let config = ErasureConfig { block_size, inline_limit: 4096, ..ErasureConfig::new(paths.clone(), 4, 2) };
    let store = ErasureStore::open("ec", config, StoreOptions::default()).unwrap();
    store.create_bucket(&RequestContext::process(), "bkt", &Default::default()).unwrap();
    (store, paths)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ (i >> 12) as u8).collect()
}

fn range(store: &ErasureStore, first: u64, last: u64) -> Vec<u8> {
    let request = GetRequest { range: Some(ByteRange::FromTo { first, last: Some(last) }), ..GetRequest::default() };
    let mut body = store.get_object(&RequestContext::process(), "bkt", "obj", &request).unwrap().body;
    let mut bytes = Vec::new();
    body.read_to_end(&mut bytes).unwrap();
    bytes
}

/// Ranges of every shape over an object of 5.5 blocks (a shard is a quarter block).
fn ranges(size: u64, block: u64) -> Vec<(u64, u64)> {
    let shard = block / 4;
    let mut out = vec![(0, 0), (0, 99), (5, shard - 1), (shard - 10, shard + 10), (shard, 3 * shard - 1)];
    out.extend([(block - 1, block), (block + 7, 2 * block + 300), (3 * shard + 1, block + shard)]);
    out.extend([(5 * block, size - 1), (size - 1, size - 1), (0, size - 1), (4 * block + 100, 5 * block + 20)]);
    let mut seed = 12345u64;
    for _ in 0..200 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let first = (seed >> 33) % size;
        let len = 1 + (seed >> 11) % (2 * shard);
        out.push((first, (first + len - 1).min(size - 1)));
    }
    out
}

#[test]
fn every_range_reads_byte_exact() {
    // Shards of 16 KiB (one checksum each) and of 256 KiB (four 64 KiB chunks, read alone).
    for block in [BLOCK, 1 << 20] {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = store_with_blocks(dir.path(), block);
        let object = pattern((5 * block + block / 2) as usize);
        store.put_bytes(&RequestContext::process(), "bkt", "obj", &object, PutRequest::default()).unwrap();
        for (first, last) in ranges(object.len() as u64, block) {
            assert!(range(&store, first, last) == object[first as usize..=last as usize], "{block}: {first}-{last}");
        }
    }
}

#[test]
fn a_rotten_shard_a_range_needs_is_read_around_and_healed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, paths) = store(dir.path());
    let object = pattern((5 * BLOCK + BLOCK / 2) as usize);
    store.put_bytes(&RequestContext::process(), "bkt", "obj", &object, PutRequest::default()).unwrap();
    // Rot the first data shard of every block (on whichever drive it is): a range inside the
    // block's first 16 KiB needs exactly that shard.
    let shard_files: Vec<PathBuf> = paths.iter().flat_map(|d| walk(&d.join(".isthmus/ec/data"))).collect();
    let framed = 4 + BLOCK / 4;
    let mut rotten = Vec::new();
    for file in &shard_files {
        let mut bytes = std::fs::read(file).unwrap();
        // Data shard 0 of a block is the one whose bytes equal the block's first bytes.
        if bytes.len() as u64 >= framed && bytes[4..64] == object[..60] {
            bytes[100] ^= 0x5a;
            std::fs::write(file, &bytes).unwrap();
            rotten.push((file.clone(), bytes));
        }
    }
    assert_eq!(rotten.len(), 1, "one file holds data shard 0 of the first block");
    assert!(range(&store, 10, 1000) == object[10..=1000]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while rotten.iter().all(|(file, bad)| std::fs::read(file).is_ok_and(|now| now == *bad)) {
        assert!(std::time::Instant::now() < deadline, "the rotten shard was not healed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out
}
