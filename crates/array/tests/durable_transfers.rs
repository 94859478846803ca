//! The durability promise of transfers on a strict engine, where it can be observed without a
//! crash: when a strong `start` returns (one chunk, written on the caller's thread, or several,
//! on the pool) or a session `flush` returns, every chunk write has completed, each chunk is a
//! plain file in its place holding the region's bytes, and no staged (temporary) file remains.
//! Chunk writes are slowed down so that a `start` or `flush` returning early would be caught.

mod common;

use std::sync::Arc;
use std::time::Duration;

use isthmus_array::{
    ArraySpec, Consistency, DataType, Direction, EngineStorage, Location, Region, TransferOptions, Transfers, ZarrArray,
};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{Durability, RequestContext, Store};

use common::Watched;

/// Every file under `dir`, relative paths.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                out.push(entry.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// Row `row` of the 4 x 64 uint8 array (chunks 1 x 8): its chunk files hold `row * 64 + column`.
fn check_row_on_disk(bucket: &std::path::Path, row: u64) {
    for chunk in 0..8u64 {
        let path = bucket.join(format!("v/c/{row}/{chunk}"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let expected: Vec<u8> = (0..8).map(|i| (row * 64 + chunk * 8 + i) as u8).collect();
        assert_eq!(bytes, expected, "{}", path.display());
    }
}

fn row_data(row: u64) -> Vec<u8> {
    (0..64).map(|i| (row * 64 + i) as u8).collect()
}

#[test]
fn strict_transfers_have_every_chunk_in_place_when_start_or_flush_returns() {
    assert_eq!(StoreOptions::default().durability, Durability::Strict);
    let dir = tempfile::tempdir().unwrap();
    let engine = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
    engine.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    let engine: Arc<dyn Store> = Arc::new(engine);
    let slow = Arc::new(Watched::new(
        EngineStorage::new(engine, RequestContext::process(), "arrays", ""),
        Duration::from_millis(3),
    ));
    let location = Location::Chunks(slow.clone());
    let spec = ArraySpec::new(vec![4, 64], DataType::UInt8, vec![1, 8]);
    let array = Arc::new(ZarrArray::create(&location, "v", &spec).unwrap());
    let bucket = dir.path().join("arrays");
    let options = TransferOptions { threads: 2, ..TransferOptions::default() };
    let transfers = Transfers::new(options).unwrap();

    // Strong, one chunk at a time (each on the caller's thread): row 0.
    let data = row_data(0);
    for chunk in 0..8u64 {
        let region = Region::new(vec![0, chunk * 8], vec![1, 8]);
        let t = transfers.create_with(&array, region, Direction::Write, Consistency::Strong).unwrap();
        transfers.start(&t, Some(&data[chunk as usize * 8..][..8])).unwrap();
        assert_eq!(slow.written(), chunk as usize + 1, "start returned before its write");
    }
    check_row_on_disk(&bucket, 0);

    // Strong, a whole row (8 chunks, on the pool): row 1.
    let t = transfers.create_with(&array, Region::new(vec![1, 0], vec![1, 64]), Direction::Write, Consistency::Strong);
    transfers.start(&t.unwrap(), Some(&row_data(1))).unwrap();
    assert_eq!(slow.written(), 16, "start returned before its writes");
    check_row_on_disk(&bucket, 1);

    // Session, rows 2 and 3 started and never waited for: in place once flush returns.
    let started: Vec<_> = (2..4u64)
        .map(|row| {
            let t = transfers
                .create_with(&array, Region::new(vec![row, 0], vec![1, 64]), Direction::Write, Consistency::Session)
                .unwrap();
            transfers.start(&t, Some(&row_data(row))).unwrap();
            t
        })
        .collect();
    transfers.flush();
    assert_eq!(slow.written(), 32, "flush returned before every write");
    check_row_on_disk(&bucket, 2);
    check_row_on_disk(&bucket, 3);
    drop(started);

    // Staged files were linked or renamed into place: nothing but the chunks and zarr.json.
    let mut found = files(&bucket);
    found.retain(|f| !f.starts_with(".isthmus/") || f.contains("tmp"));
    found.sort();
    let mut expected: Vec<String> =
        (0..4).flat_map(|row| (0..8).map(move |chunk| format!("v/c/{row}/{chunk}"))).collect();
    expected.push("v/zarr.json".into());
    expected.sort();
    assert_eq!(found, expected);
}
