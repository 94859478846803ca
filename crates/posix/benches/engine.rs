//! Hot paths of the engine, each beside the raw POSIX call it stands on: key mapping, metadata
//! decoding, a small GET, a HEAD and a small PUT. Run with `cargo bench -p isthmus-store`;
//! compare each engine figure with its `posix` neighbour of the same run (this machine is
//! shared and noisy, absolute times move).

use std::hint::black_box;
use std::io::Read;

use criterion::{Criterion, criterion_group, criterion_main};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::key::ObjectPath;
use isthmus_store::{Durability, GetRequest, PutRequest, Store, StoreExt};

/// The process acting for itself, as the embedded doors do.
fn cx() -> isthmus_store::RequestContext {
    isthmus_store::RequestContext::process()
}

const KEY: &str = "run-0042/rank-017/checkpoint.000123.h5";
const SMALL: usize = 4096;

fn keys(c: &mut Criterion) {
    c.bench_function("key/parse", |b| b.iter(|| ObjectPath::parse(black_box(KEY)).unwrap()));
}

/// A store on a fresh directory with one small object written through it.
fn store_with_object() -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { durability: Durability::Relaxed, ..StoreOptions::default() };
    let store = PosixStore::open(dir.path(), options).unwrap();
    store.create_bucket(&cx(), "bench", &Default::default()).unwrap();
    store.put_bytes(&cx(), "bench", KEY, &vec![7u8; SMALL], PutRequest::default()).unwrap();
    (dir, store)
}

fn metadata(c: &mut Criterion) {
    let (dir, _store) = store_with_object();
    let file = std::fs::File::open(dir.path().join("bench").join(KEY)).unwrap();
    let bytes = rustix::fs::fgetxattr(&file, isthmus_posix::meta::XATTR_NAME, &mut [0u8; 4096])
        .map(|n| {
            let mut buf = vec![0u8; n];
            rustix::fs::fgetxattr(&file, isthmus_posix::meta::XATTR_NAME, &mut buf).unwrap();
            buf
        })
        .expect("the metadata record is an xattr on this file system");
    c.bench_function("metadata/decode", |b| b.iter(|| isthmus_posix::meta_codec::decode(black_box(&bytes)).unwrap()));
    c.bench_function("metadata/fgetxattr", |b| {
        let mut buf = [0u8; 4096];
        b.iter(|| rustix::fs::fgetxattr(&file, isthmus_posix::meta::XATTR_NAME, &mut buf).unwrap())
    });
}

fn small_objects(c: &mut Criterion) {
    let (dir, store) = store_with_object();
    let path = dir.path().join("bench").join(KEY);
    let mut buf = vec![0u8; SMALL * 2];
    let mut group = c.benchmark_group("get-4KiB");
    group.bench_function("posix", |b| {
        b.iter(|| {
            let mut file = std::fs::File::open(&path).unwrap();
            file.read(&mut buf).unwrap()
        })
    });
    group.bench_function("engine", |b| {
        b.iter(|| {
            let mut body = store.get_object(&cx(), "bench", KEY, &GetRequest::default()).unwrap().body;
            body.read(&mut buf).unwrap()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("head");
    group.bench_function("posix", |b| b.iter(|| rustix::fs::stat(&path).unwrap()));
    group.bench_function("engine", |b| b.iter(|| store.head_object(&cx(), "bench", KEY, &Default::default()).unwrap()));
    group.finish();

    let data = vec![9u8; SMALL];
    let mut group = c.benchmark_group("put-4KiB-relaxed");
    let tmp = dir.path().join("bench").join("posix.tmp");
    let target = dir.path().join("bench").join("posix-object");
    group.bench_function("posix", |b| {
        b.iter(|| {
            std::fs::write(&tmp, &data).unwrap();
            std::fs::rename(&tmp, &target).unwrap();
        })
    });
    group.bench_function("engine", |b| {
        b.iter(|| store.put_bytes(&cx(), "bench", "engine-object", &data, PutRequest::default()).unwrap())
    });
    group.finish();
}

criterion_group!(benches, keys, metadata, small_objects);
criterion_main!(benches);
