//! `isthmus bench pools`: the streaming tables of CERN's erasure-coding evaluation, on this
//! machine. Parallel streams each write one large object, then read it back with ranged reads
//! of each --read-sizes size, on erasure-coded pools of every --layouts layout and
//! --block-sizes block size, beside raw files on the same file system in the same run: average
//! stream time, sigma, rate per stream, p99 and maximum, aggregate bandwidth, and a write's
//! bandwidth as a ratio of the ideal k/(k+m) x the raw bandwidth. With --slow-drive-ms, one
//! drive of the first layout is slowed and reads are timed with and without hedging.
//!
//! Several --pool-dir directories (one shared file system mounted at several places, such as
//! two ceph-fuse mounts of one CephFS) each get their own engine, as that many gateways would:
//! streams alternate between them and each stream reads back through the next engine.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use isthmus_posix::StoreOptions;
use isthmus_store::{
    ByteRange, CreateBucketRequest, Durability, GetRequest, PutRequest, RequestContext, Store, StoreError,
};
use serde::Serialize;

use crate::bench_setup::BenchArgs;

/// One erasure layout: k data and m parity shards.
#[derive(Debug, Clone, Copy)]
struct Layout {
    data: usize,
    parity: usize,
}

fn parse_layout(text: &str) -> Result<Layout, String> {
    let (k, m) = text.split_once('+').ok_or_else(|| format!("{text:?}: write a layout as k+m, such as 8+2"))?;
    let number =
        |s: &str| s.trim().parse::<usize>().map_err(|_| format!("{text:?}: write a layout as k+m, such as 8+2"));
    Ok(Layout { data: number(k)?, parity: number(m)? })
}

/// A pool under test: its name in the pool table, and what it is.
#[derive(Debug, Clone)]
struct PoolUnderTest {
    name: String,
    layout: Layout,
    block_size: u64,
    hedged: bool,
    slow: bool,
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct PoolRow {
    pub pool: String,
    pub layout: String,
    pub block_size: u64,
    pub op: &'static str,
    pub read_size: Option<u64>,
    pub streams: usize,
    pub engines: usize,
    pub object_size: u64,
    pub mean_seconds: f64,
    pub sigma_seconds: f64,
    pub rate_per_stream_mib_s: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    pub aggregate_mib_s: f64,
    /// Writes on erasure pools: aggregate / (k/(k+m) x the raw write aggregate).
    pub ratio_of_ideal: Option<f64>,
    pub errors: usize,
    /// Each stream's seconds (the box plots, and any statistic a reader wants).
    pub stream_seconds: Vec<f64>,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// Times `streams` calls of `stream` in parallel and summarises them.
fn timed(streams: usize, stream: impl Fn(usize) -> Result<(), String> + Sync) -> (Vec<f64>, f64, usize) {
    let times = Mutex::new(Vec::new());
    let errors = Mutex::new(0usize);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for i in 0..streams {
            let (times, errors, stream) = (&times, &errors, &stream);
            scope.spawn(move || {
                let t0 = Instant::now();
                match stream(i) {
                    Ok(()) => times.lock().expect("not poisoned").push(t0.elapsed().as_secs_f64()),
                    Err(err) => {
                        eprintln!("stream {i}: {err}");
                        *errors.lock().expect("not poisoned") += 1;
                    }
                }
            });
        }
    });
    (
        times.into_inner().expect("not poisoned"),
        start.elapsed().as_secs_f64(),
        errors.into_inner().expect("not poisoned"),
    )
}

fn row(
    pool: &PoolUnderTest,
    op: &'static str,
    read_size: Option<u64>,
    engines: usize,
    size: u64,
    run: (Vec<f64>, f64, usize),
) -> PoolRow {
    let (mut times, wall, errors) = run;
    let stream_seconds = times.clone();
    let n = times.len().max(1) as f64;
    let mean = times.iter().sum::<f64>() / n;
    let sigma = (times.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / n).sqrt();
    let rate = times.iter().map(|t| mib(size) / t.max(1e-9)).sum::<f64>() / n;
    times.sort_by(f64::total_cmp);
    let p99 = isthmus_bench::streams::p99(&times);
    PoolRow {
        pool: pool.name.clone(),
        layout: if pool.layout.data == 0 {
            "raw".into()
        } else {
            format!("{}+{}", pool.layout.data, pool.layout.parity)
        },
        block_size: pool.block_size,
        op,
        read_size,
        streams: times.len() + errors,
        engines,
        object_size: size,
        mean_seconds: mean,
        sigma_seconds: sigma,
        rate_per_stream_mib_s: rate,
        p99_seconds: p99,
        max_seconds: times.last().copied().unwrap_or(0.0),
        aggregate_mib_s: mib(size) * times.len() as f64 / wall.max(1e-9),
        ratio_of_ideal: None,
        errors,
        stream_seconds,
    }
}

/// The bytes every stream writes, 1 MiB repeated (objects are streamed, never held whole).
fn chunk() -> Vec<u8> {
    isthmus_bench::workload::payload(1 << 20)
}

fn write_raw(path: &Path, size: u64, strict: bool, chunk: &[u8]) -> Result<(), String> {
    let mut file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).map_err(|e| e.to_string())?;
        left -= n as u64;
    }
    if strict {
        file.sync_all().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn read_raw(path: &Path, size: u64, read_size: u64) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buffer = vec![0u8; read_size.min(size).max(1) as usize];
    let mut offset = 0;
    while offset < size {
        let want = (size - offset).min(read_size) as usize;
        let mut done = 0;
        while done < want {
            let n = file.read_at(&mut buffer[done..want], offset + done as u64).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("short file".into());
            }
            done += n;
        }
        offset += want as u64;
    }
    Ok(())
}

fn write_object(store: &dyn Store, bucket: &str, key: &str, size: u64, chunk: &[u8]) -> Result<(), String> {
    let cx = RequestContext::process();
    let mut writer = store.put_object(&cx, bucket, key, PutRequest::default()).map_err(|e| e.to_string())?;
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        writer.write_all(&chunk[..n]).map_err(|e| e.to_string())?;
        left -= n as u64;
    }
    writer.commit().map(drop).map_err(|e| e.to_string())
}

/// Reads the object with ranged GETs of `read_size` bytes, each streamed through 1 MiB.
fn read_object(store: &dyn Store, bucket: &str, key: &str, size: u64, read_size: u64) -> Result<(), String> {
    let cx = RequestContext::process();
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = 0;
    while offset < size {
        let last = (offset + read_size).min(size) - 1;
        let request =
            GetRequest { range: Some(ByteRange::FromTo { first: offset, last: Some(last) }), ..GetRequest::default() };
        let mut body = store.get_object(&cx, bucket, key, &request).map_err(|e| e.to_string())?.body;
        let mut got = 0u64;
        loop {
            let n = body.read(&mut buffer).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        if got != last - offset + 1 {
            return Err(format!("range {offset}-{last}: {got} bytes"));
        }
        offset = last + 1;
    }
    Ok(())
}

/// The pool table for the pools under test; drives relative to the root, so every mount of a
/// shared file system finds them through itself.
fn pool_table(pools: &[PoolUnderTest]) -> String {
    let mut text = String::from("# written by isthmus bench pools\n");
    for pool in pools {
        let drives: Vec<String> =
            (0..pool.layout.data + pool.layout.parity).map(|d| format!("\"../drives/{}/d{d}\"", pool.name)).collect();
        text += &format!(
            "[[pool]]\nname = \"{}\"\nkind = \"erasure\"\ndrives = [{}]\ndata = {}\nparity = {}\nblock_size = {}\nhedged_reads = {}\n",
            pool.name,
            drives.join(", "),
            pool.layout.data,
            pool.layout.parity,
            pool.block_size,
            pool.hedged
        );
    }
    text
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    let dirs: Vec<PathBuf> =
        if args.pool_dir.is_empty() { vec![PathBuf::from("./bench-pools")] } else { args.pool_dir.clone() };
    // Unless told otherwise, CERN's shape scaled to one machine: 64 concurrent streams (theirs:
    // 80 of 2 GiB) of 32 MiB each. (The shared defaults of --size and --workers mean "not given".)
    let size = if args.size == [4096] { 32 << 20 } else { args.size[0] };
    let streams = if args.workers == [4] { 64 } else { args.workers.first().copied().unwrap_or(64).max(1) };
    let layouts = args.layouts.iter().map(|l| parse_layout(l)).collect::<Result<Vec<_>, _>>()?;
    let strict = args.durability == Durability::Strict;
    let mut pools = Vec::new();
    for layout in &layouts {
        for &block_size in &args.block_sizes {
            pools.push(PoolUnderTest {
                name: format!("ec{}p{}-{}k", layout.data, layout.parity, block_size >> 10),
                layout: *layout,
                block_size,
                hedged: true,
                slow: false,
            });
        }
    }
    if let (Some(ms), Some(first)) = (args.slow_drive_ms, pools.first().cloned()) {
        for hedged in [true, false] {
            let name = format!("{}-slow-{}", first.name, if hedged { "hedged" } else { "unhedged" });
            pools.push(PoolUnderTest { name, hedged, slow: true, ..first.clone() });
        }
        // Every drive d0 of the slow pools answers `ms` late (read by the engine at open).
        let slow: Vec<String> = pools
            .iter()
            .filter(|p| p.slow)
            .map(|p| format!("{}={ms}", dirs[0].join("root").join(format!("../drives/{}/d0", p.name)).display()))
            .collect();
        // SAFETY: no other thread runs yet: the engines and streams start below.
        unsafe { std::env::set_var("ISTHMUS_EC_SLOW_DRIVES", slow.join(",")) };
    }
    let root_of = |dir: &Path| dir.join("root");
    std::fs::create_dir_all(root_of(&dirs[0]).join(".isthmus")).map_err(|e| e.to_string())?;
    std::fs::write(root_of(&dirs[0]).join(isthmus_pools::POOLS_FILE), pool_table(&pools)).map_err(|e| e.to_string())?;
    let options = StoreOptions { durability: args.durability, ..StoreOptions::default() };
    let engines: Vec<Arc<dyn Store>> = dirs
        .iter()
        .map(|d| isthmus_pools::open_root(&root_of(d), options).map_err(|e| format!("{}: {e}", d.display())))
        .collect::<Result<_, _>>()?;
    let cx = RequestContext::process();
    for pool in &pools {
        match engines[0].create_bucket(&cx, &pool.name, &CreateBucketRequest { location: Some(pool.name.clone()) }) {
            Ok(()) | Err(StoreError::BucketAlreadyOwnedByYou) => {}
            Err(err) => return Err(format!("bucket {}: {err}", pool.name)),
        }
    }
    let n = engines.len();
    println!(
        "isthmus bench pools: {streams} streams of {} MiB through {n} engine(s) on {}; durability {:?}",
        size >> 20,
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        args.durability
    );
    let chunk = chunk();
    let mut rows = Vec::new();
    // The raw baseline: files on the same file system(s), written and read the same way.
    let raw = PoolUnderTest {
        name: "raw".into(),
        layout: Layout { data: 0, parity: 0 },
        block_size: 0,
        hedged: false,
        slow: false,
    };
    // Stream i's file, through mount `via` (streams write through their own, read through the
    // next, as with the engines).
    let raw_path = |i: usize, via: usize| dirs[via % n].join("raw").join(format!("stream{i}"));
    for d in &dirs {
        std::fs::create_dir_all(d.join("raw")).map_err(|e| e.to_string())?;
    }
    let write = timed(streams, |i| write_raw(&raw_path(i, i), size, strict, &chunk));
    let raw_write = row(&raw, "write", None, n, size, write);
    let raw_write_mib_s = raw_write.aggregate_mib_s;
    rows.push(raw_write);
    for &read_size in &args.read_sizes {
        let read = timed(streams, |i| read_raw(&raw_path(i, i + 1), size, read_size));
        rows.push(row(&raw, "read", Some(read_size), n, size, read));
    }
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d.join("raw"));
    }
    for pool in &pools {
        // Stream i's object starts on drive i (mod N) in every pool, so pools compare on the
        // same placement: which drive holds which shard decides how many blocks a slow drive
        // forces to be decoded (with a hash of the name alone, two pools differ by chance).
        let drives = pool.layout.data + pool.layout.parity;
        let keys: Vec<String> = (0..streams)
            .map(|i| {
                (0..)
                    .map(|j| format!("stream{i}-{j}"))
                    .find(|k| isthmus_erasure::ErasureStore::placement_start(&pool.name, k, drives) == i % drives)
                    .expect("some name lands on each drive")
            })
            .collect();
        let key = |i: usize| keys[i].clone();
        let write = timed(streams, |i| write_object(&*engines[i % n], &pool.name, &key(i), size, &chunk));
        let mut written = row(pool, "write", None, n, size, write);
        let k = pool.layout.data as f64;
        written.ratio_of_ideal =
            Some(written.aggregate_mib_s / (k / (k + pool.layout.parity as f64) * raw_write_mib_s));
        rows.push(written);
        for &read_size in &args.read_sizes {
            let read = timed(streams, |i| read_object(&*engines[(i + 1) % n], &pool.name, &key(i), size, read_size));
            rows.push(row(pool, "read", Some(read_size), n, size, read));
        }
        for i in 0..streams {
            let _ = engines[0].delete_object(&cx, &pool.name, &key(i), &Default::default());
        }
        eprintln!("{}: done", pool.name);
    }
    print_table(&rows);
    if let Some(path) = &args.svg {
        let groups: Vec<(String, Vec<f64>)> = rows
            .iter()
            .map(|r| {
                let read =
                    r.read_size.map(|b| format!(" {} reads", isthmus_bench::units::format_size(b))).unwrap_or_default();
                (format!("{} {}{read}", r.pool, r.op), r.stream_seconds.clone())
            })
            .collect();
        let title = format!("{streams} streams of {} MiB: seconds per stream", size >> 20);
        isthmus_bench::boxplot::write_svg(&title, &groups, path)?;
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn print_table(rows: &[PoolRow]) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header([
        "pool",
        "layout",
        "block",
        "op",
        "read size",
        "streams",
        "avg s",
        "sigma s",
        "MiB/s per stream",
        "p99 s",
        "max s",
        "aggregate MiB/s",
        "of ideal",
    ]);
    let size = |b: u64| match b {
        0 => "-".to_string(),
        b if b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    };
    for r in rows {
        table.add_row([
            r.pool.clone(),
            r.layout.clone(),
            size(r.block_size),
            r.op.to_string(),
            r.read_size.map_or("-".into(), size),
            format!("{}{}", r.streams, if r.errors > 0 { format!(" ({} failed)", r.errors) } else { String::new() }),
            format!("{:.3}", r.mean_seconds),
            format!("{:.3}", r.sigma_seconds),
            format!("{:.1}", r.rate_per_stream_mib_s),
            format!("{:.3}", r.p99_seconds),
            format!("{:.3}", r.max_seconds),
            format!("{:.1}", r.aggregate_mib_s),
            r.ratio_of_ideal.map_or("-".into(), |x| format!("{x:.2}")),
        ]);
    }
    println!("{table}");
}
