//! `isthmus bench pools`: the streaming tables of CERN's erasure-coding evaluation, on this
//! machine. Parallel streams each write one large object, then read it back with ranged reads
//! of each --read-sizes size, on erasure-coded pools of every --layouts layout and
//! --block-sizes block size, beside raw files on the same file system in the same run: average
//! stream time, sigma, rate per stream, p99 and maximum, aggregate bandwidth, and a write's
//! bandwidth as a ratio of the ideal k/(k+m) x the raw bandwidth. With --slow-drive-ms, one
//! drive of the first layout is slowed and reads are timed with and without hedging. The
//! data root's plain pool (objects as files) runs the same streams. With --fill-levels, writes
//! are timed again with the file system filled to each level (CERN's Figure 6).
//!
//! Several --pool-dir directories (one shared file system mounted at several places, such as
//! two ceph-fuse mounts of one CephFS) each get their own engine, as that many gateways would:
//! streams alternate between them and each stream reads back through the next engine.

mod fill;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use isthmus_posix::StoreOptions;
use isthmus_store::{
    ByteRange, CreateBucketRequest, Durability, GetRequest, PutRequest, RequestContext, Store, StoreError,
};
use serde::Serialize;

use crate::args::BenchArgs;

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
    /// The data root's plain pool (objects as files), not raw files.
    posix: bool,
}

impl PoolUnderTest {
    /// Raw files, the plain (posix) pool, or an erasure layout.
    fn layout_label(&self) -> String {
        match (self.layout.data, self.posix) {
            (0, true) => "posix".into(),
            (0, false) => "raw".into(),
            (k, _) => format!("{k}+{}", self.layout.parity),
        }
    }

    /// Bytes on the drives per byte of object.
    fn expansion(&self) -> f64 {
        match self.layout.data {
            0 => 1.0,
            k => (k + self.layout.parity) as f64 / k as f64,
        }
    }

    /// A bench pool of no erasure layout: raw files, or the data root's plain pool.
    fn unencoded(name: &str) -> Self {
        let (layout, posix) = (Layout { data: 0, parity: 0 }, name == PLAIN);
        Self { name: name.into(), layout, block_size: 0, hedged: false, slow: false, posix }
    }
}

/// The bucket (and row name) of the data root's plain pool: objects as files, no erasure code.
const PLAIN: &str = "plain";

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
    /// CPU seconds the process spent during the streams (all its threads), where known.
    pub cpu_seconds: Option<f64>,
    /// With --fill-levels: how full the file system was (percent) when the streams started.
    pub fill_percent: Option<f64>,
    /// Each stream's seconds (the box plots, and any statistic a reader wants).
    pub stream_seconds: Vec<f64>,
}

impl PoolRow {
    /// The operation, and how full the file system was for the fill-level rows.
    fn op_label(&self) -> String {
        match self.fill_percent {
            Some(fill) => format!("{} at {fill:.0} % full", self.op),
            None => self.op.to_string(),
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// What `timed` measured: each finished stream's seconds, the wall time, the streams that
/// failed, and the CPU seconds the process spent meanwhile (every thread: the engines' I/O
/// lanes and healers too), when known.
struct Run {
    times: Vec<f64>,
    wall: f64,
    errors: usize,
    cpu: Option<f64>,
}

/// The CPU time this process has used (user and system, all its threads), from
/// /proc/self/stat; `None` where there is none.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's closing parenthesis, from the state (field 3) on: utime
    // and stime are fields 14 and 15, in clock ticks.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
    Some((ticks(14)? + ticks(15)?) as f64 / rustix::param::clock_ticks_per_second() as f64)
}

/// Times `streams` calls of `stream` in parallel and summarises them.
fn timed(streams: usize, stream: impl Fn(usize) -> Result<(), String> + Sync) -> Run {
    let times = Mutex::new(Vec::new());
    let errors = Mutex::new(0usize);
    let cpu = cpu_seconds();
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
    Run {
        times: times.into_inner().expect("not poisoned"),
        wall: start.elapsed().as_secs_f64(),
        errors: errors.into_inner().expect("not poisoned"),
        cpu: cpu_seconds().zip(cpu).map(|(after, before)| after - before),
    }
}

fn row(pool: &PoolUnderTest, op: &'static str, read_size: Option<u64>, engines: usize, size: u64, run: Run) -> PoolRow {
    let Run { mut times, wall, errors, cpu } = run;
    let stream_seconds = times.clone();
    let n = times.len().max(1) as f64;
    let mean = times.iter().sum::<f64>() / n;
    let sigma = (times.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / n).sqrt();
    let rate = times.iter().map(|t| mib(size) / t.max(1e-9)).sum::<f64>() / n;
    times.sort_by(f64::total_cmp);
    let p99 = crate::streams::p99(&times);
    PoolRow {
        pool: pool.name.clone(),
        layout: pool.layout_label(),
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
        cpu_seconds: cpu,
        fill_percent: None,
        stream_seconds,
    }
}

/// The bytes every stream writes, 1 MiB repeated (objects are streamed, never held whole).
fn chunk() -> Vec<u8> {
    crate::workload::payload(1 << 20)
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
fn pool_table(pools: &[PoolUnderTest], etag: &str) -> String {
    let mut text = String::from("# written by isthmus bench pools\n");
    for pool in pools {
        let drives: Vec<String> =
            (0..pool.layout.data + pool.layout.parity).map(|d| format!("\"../drives/{}/d{d}\"", pool.name)).collect();
        text += &format!(
            "[[pool]]\nname = \"{}\"\nkind = \"erasure\"\ndrives = [{}]\ndata = {}\nparity = {}\nblock_size = {}\nhedged_reads = {}\netag = \"{etag}\"\n",
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
    let streams = match (args.streams, args.workers.as_slice()) {
        (Some(n), _) => n.max(1),
        (None, [4]) => 64,
        (None, workers) => workers.first().copied().unwrap_or(64).max(1),
    };
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
                posix: false,
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
    // Room for the streams' shards with a tenth to spare (block rounding, manifests).
    let widest = pools.iter().map(PoolUnderTest::expansion).fold(1.0, f64::max);
    let headroom = (streams as f64 * size as f64 * widest * 1.1) as u64 + (64 << 20);
    if !args.fill_levels.is_empty() {
        fill::check_own_file_system(&dirs[0])?;
        fill::Filler::check_room(&dirs[0], &args.fill_levels, headroom)?;
    }
    let root_of = |dir: &Path| dir.join("root");
    std::fs::create_dir_all(root_of(&dirs[0]).join(".isthmus")).map_err(|e| e.to_string())?;
    std::fs::write(root_of(&dirs[0]).join(isthmus_pools::POOLS_FILE), pool_table(&pools, &args.etag))
        .map_err(|e| e.to_string())?;
    let options = StoreOptions { durability: args.durability, ..StoreOptions::default() };
    let engines: Vec<Arc<dyn Store>> = dirs
        .iter()
        .map(|d| isthmus_pools::open_root(&root_of(d), options).map_err(|e| format!("{}: {e}", d.display())))
        .collect::<Result<_, _>>()?;
    let cx = RequestContext::process();
    // Every erasure pool's bucket is placed in it; the plain pool's is the data root's.
    let buckets = pools.iter().map(|p| (p.name.clone(), Some(p.name.clone()))).chain([(PLAIN.to_string(), None)]);
    for (bucket, location) in buckets {
        match engines[0].create_bucket(&cx, &bucket, &CreateBucketRequest { location }) {
            // Left by an earlier run in the same directory (an erasure pool says "exists": whose
            // it is, is for the S3 door to judge).
            Ok(()) | Err(StoreError::BucketAlreadyOwnedByYou | StoreError::BucketAlreadyExists) => {}
            Err(err) => return Err(format!("bucket {bucket}: {err}")),
        }
    }
    println!(
        "isthmus bench pools: {streams} streams of {} MiB through {} engine(s) on {}; durability {:?}; ETags {}",
        size >> 20,
        engines.len(),
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        args.durability,
        args.etag
    );
    let bench = Streams { dirs: &dirs, engines: &engines, streams, size, strict, chunk: chunk() };
    let plain = PoolUnderTest::unencoded(PLAIN);
    let mut rows = bench.raw(&args.read_sizes, None)?;
    let raw_write_mib_s = rows[0].aggregate_mib_s;
    for pool in std::iter::once(&plain).chain(&pools) {
        rows.extend(bench.pool(pool, &args.read_sizes, raw_write_mib_s, None));
        eprintln!("{}: done", pool.name);
    }
    if args.via_gateway {
        // One gateway per mount, on the same data root, as a site would run them.
        let gateways = dirs
            .iter()
            .map(|d| crate::gateway::spawn_gateway(&root_of(d), args.durability))
            .collect::<Result<Vec<_>, _>>()?;
        let targets = gateways
            .iter()
            .map(|(_, endpoint, key, secret)| (endpoint.as_str(), key.as_str(), secret.as_str()))
            .collect::<Vec<_>>();
        for pool in std::iter::once(&plain).chain(pools.first()) {
            rows.extend(bench.via_gateway(pool, &targets, raw_write_mib_s)?);
            eprintln!("{} via the gateway: done", pool.name);
        }
    }
    if !args.fill_levels.is_empty() {
        let mut filler = fill::Filler::new(&dirs[0])?;
        for &level in &args.fill_levels {
            let filled = filler.fill_to(level, headroom)?.percent();
            let raw = bench.raw(&[], Some(filled))?;
            let raw_write_mib_s = raw[0].aggregate_mib_s;
            rows.extend(raw);
            for pool in std::iter::once(&plain).chain(pools.iter().filter(|p| !p.slow)) {
                rows.extend(bench.pool(pool, &[], raw_write_mib_s, Some(filled)));
            }
        }
    }
    print_table(&rows);
    if let Some(path) = &args.svg {
        let groups: Vec<(String, Vec<f64>)> = rows
            .iter()
            .map(|r| {
                let read = r.read_size.map(|b| format!(" {} reads", crate::units::format_size(b))).unwrap_or_default();
                (format!("{} {}{read}", r.pool, r.op_label()), r.stream_seconds.clone())
            })
            .collect();
        let title = format!("{streams} streams of {} MiB: seconds per stream", size >> 20);
        crate::boxplot::write_svg(&title, &groups, path)?;
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// What every row's streams share: where they write, through which engines, how many, how
/// large.
struct Streams<'a> {
    dirs: &'a [PathBuf],
    engines: &'a [Arc<dyn Store>],
    streams: usize,
    size: u64,
    strict: bool,
    chunk: Vec<u8>,
}

impl Streams<'_> {
    /// Stream i's raw file, through mount `via` (streams write through their own mount and
    /// read through the next, as with the engines).
    fn raw_path(&self, i: usize, via: usize) -> PathBuf {
        self.dirs[via % self.dirs.len()].join("raw").join(format!("stream{i}"))
    }

    /// The raw baseline: files on the same file system(s), written and read the same way; the
    /// write row first.
    fn raw(&self, read_sizes: &[u64], fill: Option<f64>) -> Result<Vec<PoolRow>, String> {
        let raw = PoolUnderTest::unencoded("raw");
        let n = self.engines.len();
        for d in self.dirs {
            std::fs::create_dir_all(d.join("raw")).map_err(|e| e.to_string())?;
        }
        let write = timed(self.streams, |i| write_raw(&self.raw_path(i, i), self.size, self.strict, &self.chunk));
        let mut rows = vec![row(&raw, "write", None, n, self.size, write)];
        for &read_size in read_sizes {
            let read = timed(self.streams, |i| read_raw(&self.raw_path(i, i + 1), self.size, read_size));
            rows.push(row(&raw, "read", Some(read_size), n, self.size, read));
        }
        for d in self.dirs {
            let _ = std::fs::remove_dir_all(d.join("raw"));
        }
        rows.iter_mut().for_each(|r| r.fill_percent = fill);
        Ok(rows)
    }

    /// A pool's rows: its streams write their objects (the ratio to the ideal against
    /// `raw_write_mib_s`), read them back with each of `read_sizes`, and delete them.
    fn pool(&self, pool: &PoolUnderTest, read_sizes: &[u64], raw_write_mib_s: f64, fill: Option<f64>) -> Vec<PoolRow> {
        let (n, size, cx) = (self.engines.len(), self.size, RequestContext::process());
        // Stream i's object starts on drive i (mod N) in every pool, so pools compare on the
        // same placement: which drive holds which shard decides how many blocks a slow drive
        // forces to be decoded (with a hash of the name alone, two pools differ by chance).
        let drives = pool.layout.data + pool.layout.parity;
        let keys: Vec<String> = (0..self.streams)
            .map(|i| match drives {
                0 => format!("stream{i}"),
                _ => (0..)
                    .map(|j| format!("stream{i}-{j}"))
                    .find(|k| isthmus_erasure::ErasureStore::placement_start(&pool.name, k, drives) == i % drives)
                    .expect("some name lands on each drive"),
            })
            .collect();
        let engine = |i: usize| &*self.engines[i % n];
        let write = timed(self.streams, |i| write_object(engine(i), &pool.name, &keys[i], size, &self.chunk));
        let mut written = row(pool, "write", None, n, size, write);
        // The ideal: k/(k+m) of the raw bandwidth (all of it for a plain pool).
        written.ratio_of_ideal = Some(written.aggregate_mib_s / (raw_write_mib_s / pool.expansion()));
        let mut rows = vec![written];
        for &read_size in read_sizes {
            let read = timed(self.streams, |i| read_object(engine(i + 1), &pool.name, &keys[i], size, read_size));
            rows.push(row(pool, "read", Some(read_size), n, size, read));
        }
        for key in &keys {
            let _ = self.engines[0].delete_object(&cx, &pool.name, key, &Default::default());
        }
        rows.iter_mut().for_each(|r| r.fill_percent = fill);
        rows
    }
}

impl Streams<'_> {
    /// A pool's rows through S3 gateways (stream i through `gateways[i % n]`, reading back
    /// through the next): each object one PUT of the whole object and one GET, streamed.
    fn via_gateway(
        &self,
        pool: &PoolUnderTest,
        gateways: &[(&str, &str, &str)],
        raw_write_mib_s: f64,
    ) -> Result<Vec<PoolRow>, String> {
        use crate::{S3Target, Target};
        let targets = gateways
            .iter()
            .map(|(endpoint, key, secret)| S3Target::new(endpoint, &pool.name, key, secret).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let n = targets.len();
        let via = PoolUnderTest { name: format!("{} via gateway", pool.name), ..pool.clone() };
        let body = crate::workload::payload(self.size);
        let key = |i: usize| format!("gateway-stream{i}");
        let connect = |i: usize| targets[i % n].connect().map_err(|e| e.to_string());
        let write = timed(self.streams, |i| connect(i)?.put(&key(i), &body).map_err(|e| e.to_string()));
        let mut written = row(&via, "write", None, n, self.size, write);
        written.ratio_of_ideal = Some(written.aggregate_mib_s / (raw_write_mib_s / pool.expansion()));
        let read = timed(self.streams, |i| match connect(i + 1)?.get(&key(i)) {
            Ok(got) if got == self.size => Ok(()),
            Ok(got) => Err(format!("GET {}: {got} bytes", key(i))),
            Err(e) => Err(e.to_string()),
        });
        let rows = vec![written, row(&via, "read", None, n, self.size, read)];
        let mut connection = connect(0)?;
        for i in 0..self.streams {
            let _ = connection.delete(&key(i));
        }
        Ok(rows)
    }
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
        "CPU s",
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
            r.op_label(),
            r.read_size.map_or("-".into(), size),
            format!("{}{}", r.streams, if r.errors > 0 { format!(" ({} failed)", r.errors) } else { String::new() }),
            format!("{:.3}", r.mean_seconds),
            format!("{:.3}", r.sigma_seconds),
            format!("{:.1}", r.rate_per_stream_mib_s),
            format!("{:.3}", r.p99_seconds),
            format!("{:.3}", r.max_seconds),
            format!("{:.1}", r.aggregate_mib_s),
            r.ratio_of_ideal.map_or("-".into(), |x| format!("{x:.2}")),
            r.cpu_seconds.map_or("-".into(), |x| format!("{x:.1}")),
        ]);
    }
    println!("{table}");
}
