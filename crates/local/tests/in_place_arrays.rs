//! Arrays of uncompressed shards written through the local socket: regions land in the
//! shard's existing file (same inode, same size) through in-place requests, whole inner chunks
//! in one request and partial ones read, merged and written under the lock the connection
//! holds; concurrent writers lose no update; a shard replaced meanwhile is written where the
//! object is now.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_array::{ArraySpec, DataType, Location, Region, ZarrArray};
use isthmus_local::{LocalSocket, LocalStore};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{PutRequest, RequestContext, Store, StoreExt};

/// A gateway on `dir` serving every peer as a user with the gateway's identity, and a client.
fn gateway(dir: &std::path::Path) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let engine: Arc<dyn Store> =
        Arc::new(Authorized::without_grants(PosixStore::open(dir.join("data"), StoreOptions::default()).unwrap()));
    engine.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    let path = dir.join("isthmus.sock");
    let resolve = |_uid: u32| Some(RequestContext::user("local-user", true));
    LocalSocket::bind(&path).unwrap().serve(engine.clone(), Arc::new(resolve), 16).unwrap();
    (engine, Arc::new(LocalStore::connect(&path).unwrap()))
}

fn location(store: &Arc<dyn Store>) -> Location {
    Location::Engine {
        store: store.clone(),
        cx: RequestContext::process(),
        bucket: "arrays".into(),
        prefix: String::new(),
    }
}

/// A float32 array of 8 x 16, one shard of 4 x 16 per 4 rows, inner chunks of 1 x 8.
fn spec() -> ArraySpec {
    let mut spec = ArraySpec::new(vec![8, 16], DataType::Float32, vec![4, 16]);
    spec.inner_chunks = Some(vec![1, 8]);
    spec.fill_value = Some(-1.0);
    spec
}

fn floats(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn read_floats(array: &ZarrArray, region: &Region) -> Vec<f32> {
    array.read_vec(region).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

#[test]
fn regions_through_the_socket_are_written_into_the_existing_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, socket) = gateway(dir.path());
    let array = ZarrArray::create(&location(&socket), "a", &spec()).unwrap();
    let shard = dir.path().join("data/arrays/a/c/0/0");
    array.write(&Region::new(vec![1, 0], vec![1, 8]), &floats((0..8).map(|i| i as f32))).unwrap();
    let created = std::fs::metadata(&shard).unwrap();
    // A whole inner chunk, part of one, and a strided region across two.
    array.write(&Region::new(vec![2, 8], vec![1, 8]), &floats((0..8).map(|i| 100.0 + i as f32))).unwrap();
    array.write(&Region::new(vec![1, 2], vec![1, 3]), &floats([7.0, 8.0, 9.0])).unwrap();
    array
        .write(&Region::new(vec![3, 1], vec![1, 5]).with_stride(vec![1, 3]), &floats([50.0, 51.0, 52.0, 53.0, 54.0]))
        .unwrap();
    let written = std::fs::metadata(&shard).unwrap();
    assert_eq!((written.ino(), written.len()), (created.ino(), created.len()), "written in place, never grown");
    let mut expected = vec![-1.0f32; 8 * 16];
    for i in 0..8 {
        expected[16 + i] = i as f32;
        expected[2 * 16 + 8 + i] = 100.0 + i as f32;
    }
    expected[16 + 2..16 + 5].copy_from_slice(&[7.0, 8.0, 9.0]);
    for (k, column) in [1, 4, 7, 10, 13].into_iter().enumerate() {
        expected[3 * 16 + column] = 50.0 + k as f32;
    }
    let in_process = ZarrArray::open(&location(&engine), "a").unwrap();
    assert_eq!(read_floats(&in_process, &Region::whole(&[8, 16])), expected);

    // The shard replaced by a copy of itself (a new file): the next write, through the handle
    // the array keeps, lands in the object as it is now.
    let bytes = std::fs::read(&shard).unwrap();
    engine.put_bytes(&RequestContext::process(), "arrays", "a/c/0/0", &bytes, PutRequest::default()).unwrap();
    let replaced = std::fs::metadata(&shard).unwrap().ino();
    assert_ne!(replaced, created.ino());
    array.write(&Region::new(vec![0, 0], vec![1, 8]), &floats([5.0; 8])).unwrap();
    assert_eq!(std::fs::metadata(&shard).unwrap().ino(), replaced);
    assert_eq!(read_floats(&in_process, &Region::new(vec![0, 0], vec![1, 8])), [5.0; 8]);
}

#[test]
fn concurrent_writers_through_the_socket_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, socket) = gateway(dir.path());
    ZarrArray::create(&location(&socket), "a", &spec()).unwrap().allocate_shards().unwrap();
    let handles: Vec<ZarrArray> = (0..3).map(|_| ZarrArray::open(&location(&socket), "a").unwrap()).collect();
    // Four writers of one inner chunk, each its own element (a read-merge-write under the
    // file's lock each time); the last two share a handle.
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let array = &handles[writer.min(2)];
            scope.spawn(move || {
                for round in 0..50 {
                    let value = (writer * 1000 + round) as f32;
                    let element = Region::new(vec![0, writer as u64 * 2], vec![1, 1]);
                    array.write(&element, &floats([value])).unwrap();
                    assert_eq!(read_floats(array, &element), [value], "writer {writer} round {round}");
                }
            });
        }
    });
    let row = read_floats(&handles[0], &Region::new(vec![0, 0], vec![1, 8]));
    assert_eq!(row, [49.0, -1.0, 1049.0, -1.0, 2049.0, -1.0, 3049.0, -1.0]);
}
