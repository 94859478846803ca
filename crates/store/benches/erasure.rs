//! The erasure code's throughput on one core: encoding a 4 MiB block into 4+2, 8+2 and 16+2
//! framed shards, and decoding it with every data shard present and with the worst loss (m data
//! shards gone). Run with `cargo bench -p isthmus-store --bench erasure`; throughput is bytes of
//! the block per second, beside `memcpy` of the same block in the same run.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use isthmus_store::erasure::codec::{Layout, decode, encode};

const BLOCK: usize = 4 << 20;

fn erasure(c: &mut Criterion) {
    let block: Vec<u8> = (0..BLOCK).map(|i| (i * 131 % 251) as u8).collect();
    let mut group = c.benchmark_group("erasure");
    group.throughput(Throughput::Bytes(BLOCK as u64));
    group.bench_function("memcpy 4 MiB", |b| b.iter(|| black_box(block.clone())));
    for (k, m) in [(4, 2), (8, 2), (16, 2)] {
        let layout = Layout::new(k, m).unwrap();
        group.bench_function(format!("encode {k}+{m}"), |b| b.iter(|| encode(layout, black_box(&block)).unwrap()));
        let shards: Vec<Option<Vec<u8>>> = encode(layout, &block).unwrap().into_iter().map(Some).collect();
        group.bench_function(format!("decode {k}+{m}, all data shards"), |b| {
            b.iter(|| decode(layout, black_box(&shards), BLOCK).unwrap())
        });
        let mut lost = shards.clone();
        for shard in lost.iter_mut().take(m) {
            *shard = None;
        }
        group.bench_function(format!("decode {k}+{m}, {m} data shards lost"), |b| {
            b.iter(|| decode(layout, black_box(&lost), BLOCK).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, erasure);
criterion_main!(benches);
