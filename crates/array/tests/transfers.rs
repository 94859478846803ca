//! Transfers: strong ones are visible when `start` returns, session ones after `wait`; a batch
//! is merged chunk by chunk (one write per chunk however many transfers touch it); overlapping
//! transfers in flight are refused when one writes; the transfer buffer bounds memory (a full
//! buffer makes `start` wait, reads nobody waits for are a clear error); concurrent writers of
//! different parts of the same chunks from many threads produce the reference.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use isthmus_access::Authorized;
use isthmus_array::{
    ArraySpec, Consistency, DataType, Direction, EngineStorage, Location, Region, Status, TransferOptions, Transfers,
    ZarrArray,
};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{RequestContext, Store};

use common::Watched;

fn engine(dir: &std::path::Path) -> Arc<dyn Store> {
    let store = Authorized::without_grants(PosixStore::open(dir, StoreOptions::default()).unwrap());
    store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    Arc::new(store)
}

fn counting(dir: &std::path::Path) -> Arc<Watched> {
    let inner = EngineStorage::new(engine(dir), RequestContext::process(), "arrays", "");
    Arc::new(Watched::new(inner, Duration::ZERO))
}

/// A 1-D uint8 array of `len` elements in chunks of `chunk`.
fn vector(location: &Location, len: u64, chunk: u64) -> Arc<ZarrArray> {
    Arc::new(ZarrArray::create(location, "v", &ArraySpec::new(vec![len], DataType::UInt8, vec![chunk])).unwrap())
}

fn span(offset: u64, count: u64) -> Region {
    Region::new(vec![offset], vec![count])
}

#[test]
fn strong_writes_are_visible_at_start_and_session_writes_after_wait() {
    let dir = tempfile::tempdir().unwrap();
    let array = vector(&Location::Chunks(counting(dir.path())), 16, 4);
    let transfers = Transfers::new(TransferOptions::default()).unwrap();
    let strong = transfers.create_with(&array, span(0, 8), Direction::Write, Consistency::Strong).unwrap();
    let mut data = vec![7u8; 8];
    transfers.start(&strong, Some(&data)).unwrap();
    assert_eq!(transfers.status(&strong), Status::Done, "strong: done when start returns");
    assert_eq!(array.read_vec(&span(0, 8)).unwrap(), vec![7; 8]);

    let session = transfers.create_with(&array, span(8, 8), Direction::Write, Consistency::Session).unwrap();
    data.fill(9);
    transfers.start(&session, Some(&data)).unwrap();
    data.fill(0); // the caller reuses its buffer at once: the transfer copied it
    transfers.wait(&session, None).unwrap();
    assert_eq!(transfers.status(&session), Status::Done);
    assert_eq!(array.read_vec(&span(8, 8)).unwrap(), vec![9; 8]);

    let read = transfers.create(&array, span(4, 8), Direction::Read).unwrap();
    transfers.start(&read, None).unwrap();
    let mut out = vec![0u8; 8];
    transfers.wait(&read, Some(&mut out)).unwrap();
    assert_eq!(out, [7, 7, 7, 7, 9, 9, 9, 9]);
    let unstarted = transfers.create(&array, span(0, 1), Direction::Read).unwrap();
    let err = transfers.wait(&unstarted, Some(&mut [0])).unwrap_err();
    assert!(err.to_string().contains("not started"), "{err}");
}

#[test]
fn a_batch_is_merged_into_one_write_per_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let store = counting(dir.path());
    let array = vector(&Location::Chunks(store.clone()), 64, 16);
    let transfers = Transfers::new(TransferOptions::default()).unwrap();
    // 64 one-element writes, shuffled: four chunks.
    let order: Vec<u64> = (0..64).map(|i| (i * 37) % 64).collect();
    let batch: Vec<_> =
        order.iter().map(|&i| transfers.create(&array, span(i, 1), Direction::Write).unwrap()).collect();
    let values: Vec<[u8; 1]> = order.iter().map(|&i| [i as u8 + 1]).collect();
    let starts: Vec<_> = batch.iter().zip(&values).map(|(t, v)| (t, Some(&v[..]))).collect();
    transfers.start_all(&starts).unwrap();
    let mut waits: Vec<_> = batch.iter().map(|t| (t, None)).collect();
    transfers.wait_all(&mut waits).unwrap();
    assert_eq!(store.written(), 4, "one write per chunk");
    assert_eq!(array.read_vec(&span(0, 64)).unwrap(), (1..=64).collect::<Vec<u8>>());

    // The same one at a time: one read-merge-write each.
    store.writes.store(0, Ordering::SeqCst);
    for (transfer, value) in batch.iter().zip(&values) {
        transfers.start(transfer, Some(&value[..])).unwrap();
        transfers.wait(transfer, None).unwrap();
    }
    assert_eq!(store.written(), 64);

    // Reads of a batch land in their own buffers.
    let reads: Vec<_> = (0..8).map(|i| transfers.create(&array, span(i * 8, 8), Direction::Read).unwrap()).collect();
    let starts: Vec<_> = reads.iter().map(|t| (t, None)).collect();
    transfers.start_all(&starts).unwrap();
    let mut outs = vec![vec![0u8; 8]; 8];
    let mut waits: Vec<_> = reads.iter().zip(outs.iter_mut()).map(|(t, o)| (t, Some(&mut o[..]))).collect();
    transfers.wait_all(&mut waits).unwrap();
    assert_eq!(outs.concat(), (1..=64).collect::<Vec<u8>>());
}

#[test]
fn overlapping_transfers_in_flight_are_refused_when_one_writes() {
    let dir = tempfile::tempdir().unwrap();
    let array = vector(&Location::Chunks(counting(dir.path())), 32, 8);
    let transfers = Transfers::new(TransferOptions::default()).unwrap();
    let write = transfers.create(&array, span(0, 10), Direction::Write).unwrap();
    transfers.start(&write, Some(&[1; 10])).unwrap();
    // In flight until waited for, however fast the I/O was.
    let read = transfers.create(&array, span(9, 4), Direction::Read).unwrap();
    let err = transfers.start(&read, None).unwrap_err();
    assert!(err.to_string().contains("overlaps a transfer in flight"), "{err}");
    let disjoint = transfers.create(&array, span(10, 4), Direction::Read).unwrap();
    transfers.start(&disjoint, None).unwrap();
    let second_read = transfers.create(&array, span(10, 2), Direction::Read).unwrap();
    transfers.start(&second_read, None).expect("two reads may overlap");
    transfers.wait(&write, None).unwrap();
    transfers.start(&read, None).expect("after the wait the region is free");
    let mut out = [0u8; 4];
    transfers.wait(&read, Some(&mut out)).unwrap();
    assert_eq!(out, [1, 0, 0, 0]);

    // Within one batch too, and nothing of a refused batch is started.
    let a = transfers.create(&array, span(20, 4), Direction::Write).unwrap();
    let b = transfers.create(&array, span(22, 4), Direction::Write).unwrap();
    let err = transfers.start_all(&[(&a, Some(&[5; 4])), (&b, Some(&[6; 4]))]).unwrap_err();
    assert!(err.to_string().contains("overlaps"), "{err}");
    assert_eq!(transfers.status(&a), Status::Created);
    assert_eq!(array.read_vec(&span(20, 4)).unwrap(), vec![0; 4]);
}

#[test]
fn the_transfer_buffer_bounds_memory_with_back_pressure() {
    let dir = tempfile::tempdir().unwrap();
    let array = vector(&Location::Chunks(counting(dir.path())), 4096, 256);
    let options = TransferOptions { buffer_bytes: 1024, threads: 2, consistency: Consistency::Session };
    let transfers = Transfers::new(options).unwrap();
    let all: Vec<_> =
        (0..16).map(|i| transfers.create(&array, span(i * 256, 256), Direction::Write).unwrap()).collect();
    for (i, transfer) in all.iter().enumerate() {
        transfers.start(transfer, Some(&[i as u8; 256])).unwrap();
    }
    transfers.flush();
    assert!(transfers.buffer_peak() <= 1024, "peak {} passed the buffer", transfers.buffer_peak());
    let expected: Vec<u8> = (0..16u8).flat_map(|i| [i; 256]).collect();
    assert_eq!(array.read_vec(&span(0, 4096)).unwrap(), expected);

    // Reads hold their data until waited for: a buffer full of them is a clear error.
    let reads: Vec<_> =
        (0..5).map(|i| transfers.create(&array, span(i * 256, 256), Direction::Read).unwrap()).collect();
    let mut refused = None;
    for read in &reads {
        if let Err(err) = transfers.start(read, None) {
            refused = Some(err);
            break;
        }
    }
    let err = refused.expect("five reads of 256 bytes in a 1024-byte buffer");
    assert!(err.to_string().contains("finished reads nobody waited for"), "{err}");
    let mut out = [0u8; 256];
    transfers.wait(&reads[0], Some(&mut out)).unwrap();
    assert_eq!(out, [0; 256]);
    transfers.start(&reads[4], None).expect("a wait freed its part of the buffer");
}

#[test]
fn concurrent_writers_of_shared_chunks_from_threads_produce_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let location = Location::Chunks(counting(dir.path()));
    let mut spec = ArraySpec::new(vec![6, 40], DataType::Int32, vec![4, 16]);
    spec.codecs = ArraySpec::parse_codecs("zstd:1").unwrap();
    let array = Arc::new(ZarrArray::create(&location, "m", &spec).unwrap());
    // Eight writers, each a column band of width 5: every chunk is shared by several writers.
    // Many rounds, each with new values, so that races happen on this machine's two cores.
    for round in 0..25i32 {
        std::thread::scope(|scope| {
            for writer in 0..8u64 {
                let array = array.clone();
                scope.spawn(move || {
                    let region = Region::new(vec![0, writer * 5], vec![6, 5]);
                    let data: Vec<u8> =
                        (0..30).flat_map(|i| (round * 1000 + writer as i32 * 100 + i).to_le_bytes()).collect();
                    array.write(&region, &data).unwrap();
                });
            }
        });
        let whole = array.read_vec(&Region::whole(&[6, 40])).unwrap();
        let got: Vec<i32> = whole.chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
        for row in 0..6 {
            for column in 0..40 {
                let writer = column / 5;
                let expected = round * 1000 + writer as i32 * 100 + (row * 5 + column % 5) as i32;
                assert_eq!(got[row * 40 + column], expected, "round {round} row {row} column {column}");
            }
        }
    }
}
