//! The erasure code's throughput on one core: encoding a 4 MiB block into 4+2, 8+2 and 16+2
//! framed shards (a CRC per 64 KiB chunk, as pools write them), and decoding it with every data shard present and with the worst loss (m data
//! shards gone). Run with `cargo bench -p isthmus-store --bench erasure`; throughput is bytes of
//! the block per second, beside `memcpy` of the same block in the same run. The second group
//! streams whole objects through erasure-coded pools beside the raw file system (see below).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use isthmus_erasure::codec::{Framing, Layout, decode, encode};

const BLOCK: usize = 4 << 20;

fn erasure(c: &mut Criterion) {
    let block: Vec<u8> = (0..BLOCK).map(|i| (i * 131 % 251) as u8).collect();
    let mut group = c.benchmark_group("erasure");
    group.throughput(Throughput::Bytes(BLOCK as u64));
    group.bench_function("memcpy 4 MiB", |b| b.iter(|| black_box(block.clone())));
    for (k, m) in [(4, 2), (8, 2), (16, 2)] {
        let layout = Layout::new(k, m).unwrap();
        group.bench_function(format!("encode {k}+{m}"), |b| {
            b.iter(|| encode(layout, black_box(&block), Framing::Chunked).unwrap())
        });
        let shards: Vec<Option<Vec<u8>>> =
            encode(layout, &block, Framing::Chunked).unwrap().into_iter().map(Some).collect();
        group.bench_function(format!("decode {k}+{m}, all data shards"), |b| {
            b.iter(|| decode(layout, black_box(&shards), BLOCK, Framing::Chunked).unwrap())
        });
        let mut lost = shards.clone();
        for shard in lost.iter_mut().take(m) {
            *shard = None;
        }
        group.bench_function(format!("decode {k}+{m}, {m} data shards lost"), |b| {
            b.iter(|| decode(layout, black_box(&lost), BLOCK, Framing::Chunked).unwrap())
        });
    }
    group.finish();
}

const OBJECT: usize = 64 << 20;

/// Streaming a 64 MiB object into and out of erasure-coded pools (4+2, 8+2, 16+2; 1 and 4 MiB
/// blocks) over drive directories in one temporary directory, beside the raw baseline of the
/// same file system in the same run: one file written with `write_all` and read back. An ideal
/// pool writes at k/(k+m) of the raw bandwidth (it writes (k+m)/k bytes per byte).
fn erasure_pool(c: &mut Criterion) {
    use std::io::{Read, Write};

    use isthmus_erasure::{ErasureConfig, ErasureStore};
    use isthmus_posix::StoreOptions;
    use isthmus_store::{Durability, RequestContext, Store};

    let object: Vec<u8> = (0..OBJECT).map(|i| (i * 131 % 251) as u8).collect();
    let dir = tempfile::tempdir().unwrap();
    let cx = RequestContext::process();
    let mut group = c.benchmark_group("erasure pool");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(OBJECT as u64));
    let raw = dir.path().join("raw");
    group.bench_function("raw write 64 MiB", |b| {
        b.iter(|| std::fs::File::create(&raw).unwrap().write_all(&object).unwrap())
    });
    group.bench_function("raw read 64 MiB", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(OBJECT);
            std::fs::File::open(&raw).unwrap().read_to_end(&mut out).unwrap();
            out
        })
    });
    for (k, m) in [(4, 2), (8, 2), (16, 2)] {
        for block in [1u64 << 20, 4 << 20] {
            let drives = (0..k + m).map(|i| dir.path().join(format!("{k}+{m}-{block}/d{i}"))).collect();
            let config = ErasureConfig { block_size: block, ..ErasureConfig::new(drives, k, m) };
            let options = StoreOptions { durability: Durability::Relaxed, ..StoreOptions::default() };
            let store = ErasureStore::open("bench", config, options).unwrap();
            store.create_bucket(&cx, "bench", &Default::default()).unwrap();
            let label = format!("{k}+{m}, {} MiB blocks", block >> 20);
            group.bench_function(format!("write {label}"), |b| {
                b.iter(|| {
                    let mut writer = store.put_object(&cx, "bench", "o", Default::default()).unwrap();
                    for piece in object.chunks(1 << 20) {
                        writer.write_all(piece).unwrap();
                    }
                    writer.commit().unwrap()
                })
            });
            group.bench_function(format!("read {label}"), |b| {
                b.iter(|| {
                    let mut response = store.get_object(&cx, "bench", "o", &Default::default()).unwrap();
                    let mut out = Vec::with_capacity(OBJECT);
                    response.body.read_to_end(&mut out).unwrap();
                    out
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, erasure, erasure_pool);
criterion_main!(benches);
