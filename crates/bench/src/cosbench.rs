//! COSBench workload files: `<workload>` / `<workflow>` / `<workstage>` / `<work>` /
//! `<operation>`, with the init, prepare, main, cleanup and dispose stages, workers, runtime,
//! totalOps, totalBytes and rampup, operations read, write, delete and list with ratios, and the
//! config keys containers, objects, sizes, cprefix and oprefix with the selectors c(), u(), r(),
//! s() and h(). Each stage is reported as COSBench reports it (Op-Count, Byte-Count,
//! Avg-ResTime, Avg-ProcTime, Throughput, Bandwidth, Succ-Ratio) plus p50/p90/p99.
//!
//! Containers are key prefixes (`<cprefix><n>/`) inside the target's bucket, so one bucket
//! serves any number of COSBench containers; init and dispose have nothing to create or remove.
//! Size units are decimal, as in COSBench (KB = 1000 bytes).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::target::{BenchError, BenchResult, Connection, Target};
use crate::workload::payload;

/// A value selector.
#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// c(n)
    Constant(u64),
    /// u(a,b): uniformly random in [a, b]
    Uniform(u64, u64),
    /// r(a,b): every value of [a, b] once, split among the workers
    Range(u64, u64),
    /// s(a,b): sequential through [a, b], wrapping
    Sequential(u64, u64),
    /// h(a|b|weight,...): a weighted choice of uniform ranges
    Histogram(Vec<(u64, u64, u64)>),
}

impl Selector {
    /// Parses `c(64)KB`, `u(1,100)`, `h(1|64|50,64|256|50)KB`; `unit` multiplies the values.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let open = text.find('(').ok_or_else(|| format!("selector {text:?}: expected kind(args)"))?;
        let close = text.rfind(')').ok_or_else(|| format!("selector {text:?}: missing ')'"))?;
        let (kind, args, unit) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
        let multiplier: u64 = match unit.trim().to_ascii_uppercase().as_str() {
            "" | "B" => 1,
            "KB" => 1000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            other => return Err(format!("selector {text:?}: unknown unit {other:?} (B, KB, MB or GB)")),
        };
        let number = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map(|n| n * multiplier)
                .map_err(|_| format!("selector {text:?}: {s:?} is not a number"))
        };
        let pair = |args: &str| -> Result<(u64, u64), String> {
            let (a, b) = args.split_once(',').ok_or_else(|| format!("selector {text:?}: expected two values"))?;
            let (a, b) = (number(a)?, number(b)?);
            if a > b {
                return Err(format!("selector {text:?}: the range is empty"));
            }
            Ok((a, b))
        };
        match kind.trim() {
            "c" => Ok(Self::Constant(number(args)?)),
            "u" => pair(args).map(|(a, b)| Self::Uniform(a, b)),
            "r" => pair(args).map(|(a, b)| Self::Range(a, b)),
            "s" => pair(args).map(|(a, b)| Self::Sequential(a, b)),
            "h" => {
                let mut buckets = Vec::new();
                for part in args.split(',') {
                    let fields: Vec<&str> = part.split('|').collect();
                    let [a, b, w] = fields[..] else {
                        return Err(format!("selector {text:?}: h() takes lo|hi|weight,..."));
                    };
                    let weight = w.trim().parse::<u64>().map_err(|_| format!("selector {text:?}: bad weight {w:?}"))?;
                    buckets.push((number(a)?, number(b)?, weight));
                }
                if buckets.iter().map(|b| b.2).sum::<u64>() == 0 {
                    return Err(format!("selector {text:?}: the weights add up to zero"));
                }
                Ok(Self::Histogram(buckets))
            }
            other => Err(format!("selector {text:?}: unknown kind {other:?} (c, u, r, s or h)")),
        }
    }

    /// The values a worker takes from an r() range: its share of [a, b].
    fn share(&self, worker: usize, workers: usize) -> Vec<u64> {
        match self {
            Self::Range(a, b) | Self::Sequential(a, b) => {
                (*a..=*b).filter(|v| ((v - a) as usize) % workers == worker).collect()
            }
            Self::Constant(n) => vec![*n],
            Self::Uniform(a, b) => (*a..=*b).filter(|v| ((v - a) as usize) % workers == worker).collect(),
            Self::Histogram(h) => h.first().map(|&(a, _, _)| vec![a]).unwrap_or_default(),
        }
    }

    fn next(&self, rng: &mut Rng, counter: &AtomicU64) -> u64 {
        match self {
            Self::Constant(n) => *n,
            Self::Uniform(a, b) => a + rng.below(b - a + 1),
            Self::Range(a, b) | Self::Sequential(a, b) => a + counter.fetch_add(1, Ordering::Relaxed) % (b - a + 1),
            Self::Histogram(buckets) => {
                let total: u64 = buckets.iter().map(|b| b.2).sum();
                let mut pick = rng.below(total);
                for &(a, b, w) in buckets {
                    if pick < w {
                        return a + rng.below(b - a + 1);
                    }
                    pick -= w;
                }
                buckets[0].0
            }
        }
    }
}

/// A small xorshift generator: reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if n == 0 { 0 } else { self.0 % n }
    }
}

/// The config string of a work or operation: `key=value;key=value`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config(HashMap<String, String>);

impl Config {
    fn parse(text: &str) -> Self {
        Self(
            text.split(';')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
        )
    }

    fn merged(&self, over: &Config) -> Config {
        let mut map = self.0.clone();
        map.extend(over.0.clone());
        Config(map)
    }

    fn selector(&self, key: &str) -> Result<Option<Selector>, String> {
        self.0.get(key).map(|v| Selector::parse(v)).transpose()
    }

    fn prefix(&self, key: &str, default: &str) -> String {
        self.0.get(key).cloned().unwrap_or_else(|| default.to_string())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub kind: String,
    pub ratio: u64,
    pub config: Config,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    pub name: String,
    /// init, prepare, normal (main), cleanup or dispose.
    pub kind: String,
    pub workers: usize,
    pub runtime: Option<Duration>,
    pub rampup: Duration,
    pub total_ops: Option<u64>,
    pub total_bytes: Option<u64>,
    pub config: Config,
    pub operations: Vec<Operation>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub name: String,
    pub works: Vec<Work>,
}

/// A parsed workload file.
#[derive(Debug, Clone, PartialEq)]
pub struct CosbenchWorkload {
    pub name: String,
    /// The `<storage config>` endpoint and keys, if given.
    pub endpoint: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub stages: Vec<Stage>,
}

/// The child elements of `node` named `tag`.
fn child<'a, 'input>(node: roxmltree::Node<'a, 'input>, tag: &str) -> Vec<roxmltree::Node<'a, 'input>> {
    node.children().filter(|c| c.is_element() && c.tag_name().name() == tag).collect()
}

fn attr_u64(node: roxmltree::Node<'_, '_>, name: &str) -> Result<Option<u64>, String> {
    node.attribute(name)
        .map(|v| {
            v.trim().parse::<u64>().map_err(|_| format!("<{}> {name}={v:?} is not a number", node.tag_name().name()))
        })
        .transpose()
}

impl CosbenchWorkload {
    pub fn parse(xml: &str) -> Result<Self, String> {
        let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not well-formed XML: {e}"))?;
        let root = doc.root_element();
        if root.tag_name().name() != "workload" {
            return Err(format!("the root element is <{}>, expected <workload>", root.tag_name().name()));
        }
        let storage = child(root, "storage")
            .first()
            .map(|s| Config::parse(s.attribute("config").unwrap_or_default()))
            .unwrap_or_default();
        let workflow = child(root, "workflow").into_iter().next().ok_or("the workload has no <workflow>")?;
        let mut stages = Vec::new();
        for stage in child(workflow, "workstage") {
            let mut works = Vec::new();
            for work in child(stage, "work") {
                let kind = work.attribute("type").unwrap_or("normal").to_string();
                let operations = child(work, "operation")
                    .into_iter()
                    .map(|op| -> Result<Operation, String> {
                        Ok(Operation {
                            kind: op.attribute("type").ok_or("an <operation> has no type")?.to_string(),
                            ratio: attr_u64(op, "ratio")?.unwrap_or(100),
                            config: Config::parse(op.attribute("config").unwrap_or_default()),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if kind == "normal" && operations.is_empty() {
                    return Err(format!("work {:?} has no <operation>", work.attribute("name").unwrap_or("")));
                }
                if let Some(op) =
                    operations.iter().find(|o| !["read", "write", "delete", "list"].contains(&o.kind.as_str()))
                {
                    return Err(format!("operation type {:?} is not supported (read, write, delete, list)", op.kind));
                }
                if kind == "normal" && operations.iter().map(|o| o.ratio).sum::<u64>() != 100 {
                    return Err(format!(
                        "the ratios of work {:?} do not add up to 100",
                        work.attribute("name").unwrap_or("")
                    ));
                }
                let runtime = attr_u64(work, "runtime")?.map(Duration::from_secs);
                let total_ops = attr_u64(work, "totalOps")?;
                let total_bytes = attr_u64(work, "totalBytes")?;
                if kind == "normal" && runtime.is_none() && total_ops.is_none() && total_bytes.is_none() {
                    return Err(format!(
                        "work {:?} needs runtime, totalOps or totalBytes",
                        work.attribute("name").unwrap_or("")
                    ));
                }
                works.push(Work {
                    name: work.attribute("name").unwrap_or(&kind).to_string(),
                    kind,
                    workers: attr_u64(work, "workers")?.unwrap_or(1).max(1) as usize,
                    runtime,
                    rampup: Duration::from_secs(attr_u64(work, "rampup")?.unwrap_or(0)),
                    total_ops,
                    total_bytes,
                    config: Config::parse(work.attribute("config").unwrap_or_default()),
                    operations,
                });
            }
            stages.push(Stage { name: stage.attribute("name").unwrap_or("stage").to_string(), works });
        }
        Ok(Self {
            name: root.attribute("name").unwrap_or("workload").to_string(),
            endpoint: storage.0.get("endpoint").cloned(),
            access_key: storage.0.get("accesskey").cloned(),
            secret_key: storage.0.get("secretkey").cloned(),
            stages,
        })
    }
}

/// One stage's figures for one operation type, as COSBench reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub kind: String,
    pub stage: String,
    pub op: String,
    pub op_count: u64,
    /// Operations that failed (Succ-Ratio is op_count over op_count + failed_count).
    #[serde(default)]
    pub failed_count: u64,
    pub byte_count: u64,
    pub avg_res_time_ms: f64,
    pub avg_proc_time_ms: f64,
    pub throughput_ops: f64,
    pub bandwidth_mb_s: f64,
    pub succ_ratio: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    /// COSBench's "95%-ResTime".
    #[serde(default)]
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// Every response time (µs) as an encoded HdrHistogram, for exact percentiles across ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_histogram: Option<String>,
}

impl StageReport {
    /// Whether two reports are the same stage and operation on the same kind of target.
    pub fn same_row(&self, other: &Self) -> bool {
        (&self.kind, &self.stage, &self.op) == (&other.kind, &other.stage, &other.op)
    }

    /// One row for a stage several ranks ran together: counts, throughput and bandwidth add,
    /// mean times are weighted by operations, percentiles come from the ranks' histograms added
    /// together (the worst rank's, an upper bound, for rows without histograms).
    pub fn merge(rows: &[&Self]) -> Self {
        let mut merged = rows[0].clone();
        let weighted = |time: fn(&Self) -> f64| {
            let ops: u64 = rows.iter().map(|r| r.op_count).sum();
            if ops == 0 { 0.0 } else { rows.iter().map(|r| time(r) * r.op_count as f64).sum::<f64>() / ops as f64 }
        };
        merged.avg_res_time_ms = weighted(|r| r.avg_res_time_ms);
        merged.avg_proc_time_ms = weighted(|r| r.avg_proc_time_ms);
        for r in &rows[1..] {
            merged.op_count += r.op_count;
            merged.failed_count += r.failed_count;
            merged.byte_count += r.byte_count;
            merged.throughput_ops += r.throughput_ops;
            merged.bandwidth_mb_s += r.bandwidth_mb_s;
            merged.p50_ms = merged.p50_ms.max(r.p50_ms);
            merged.p90_ms = merged.p90_ms.max(r.p90_ms);
            merged.p95_ms = merged.p95_ms.max(r.p95_ms);
            merged.p99_ms = merged.p99_ms.max(r.p99_ms);
        }
        merged.latency_histogram = None;
        if let Some(latency) = crate::latency::merge(rows.iter().map(|r| r.latency_histogram.as_deref())) {
            let ms = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
            (merged.p50_ms, merged.p90_ms, merged.p95_ms, merged.p99_ms) = (ms(0.5), ms(0.9), ms(0.95), ms(0.99));
            merged.latency_histogram = crate::latency::encode(&latency);
        }
        let total = merged.op_count + merged.failed_count;
        merged.succ_ratio = if total == 0 { 1.0 } else { merged.op_count as f64 / total as f64 };
        merged
    }
}

#[derive(Default)]
struct OpStats {
    ok: u64,
    failed: u64,
    bytes: u64,
    latency: Option<Histogram<u64>>,
}

impl OpStats {
    fn record(&mut self, micros: u64, outcome: BenchResult<u64>) {
        crate::workload::count_done(1);
        match outcome {
            Ok(bytes) => {
                self.ok += 1;
                self.bytes += bytes;
                let h = self.latency.get_or_insert_with(|| Histogram::new(3).expect("valid precision"));
                let _ = h.record(micros.max(1));
            }
            Err(_) => self.failed += 1,
        }
    }

    fn merge(&mut self, other: OpStats) {
        self.ok += other.ok;
        self.failed += other.failed;
        self.bytes += other.bytes;
        if let Some(h) = other.latency {
            match &mut self.latency {
                Some(mine) => {
                    let _ = mine.add(&h);
                }
                None => self.latency = Some(h),
            }
        }
    }
}

/// A delete as S3 counts it: a key that is already gone is deleted (S3 answers 204, and
/// COSBench counts that as a success); the POSIX baseline's ENOENT counts the same.
fn deleted(outcome: BenchResult<()>) -> BenchResult<()> {
    match outcome {
        Err(BenchError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// A container that an earlier run left is there, as COSBench's init finds it.
fn already_there(err: &BenchError) -> bool {
    matches!(err, BenchError::Io(e) if e.kind() == std::io::ErrorKind::AlreadyExists)
}

fn key(config: &Config, container: u64, object: u64) -> String {
    format!("{}{container}/{}{object}", config.prefix("cprefix", "mycontainers"), config.prefix("oprefix", "myobjects"))
}

/// Runs every stage on `target` and reports each.
pub fn run(workload: &CosbenchWorkload, target: &dyn Target) -> BenchResult<Vec<StageReport>> {
    run_synced(workload, target, &mut None::<crate::team::Team>)
}

/// As `run`, calling `between_stages` before each stage after the first, so that ranks in other
/// processes start every stage together, as COSBench's controller starts its drivers.
pub fn run_synced(
    workload: &CosbenchWorkload,
    target: &dyn Target,
    between_stages: crate::team::PhaseBarrier<'_>,
) -> BenchResult<Vec<StageReport>> {
    let mut reports = Vec::new();
    for (i, stage) in workload.stages.iter().enumerate() {
        if i > 0 {
            between_stages.barrier()?;
        }
        for work in &stage.works {
            let stats = run_work(work, target).map_err(BenchError::Setup)?;
            let mut ops: Vec<_> = stats.into_iter().collect();
            ops.sort_by(|a, b| a.0.cmp(&b.0));
            for (op, s) in ops {
                reports.push(report_of(target.kind(), &stage.name, &op, s.0, s.1));
            }
        }
    }
    Ok(reports)
}

fn report_of(kind: &str, stage: &str, op: &str, stats: OpStats, seconds: f64) -> StageReport {
    let quantile = |q: f64| stats.latency.as_ref().map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1000.0);
    let mean = stats.latency.as_ref().map_or(0.0, |h| h.mean() / 1000.0);
    let total = stats.ok + stats.failed;
    StageReport {
        kind: kind.to_string(),
        stage: stage.to_string(),
        op: op.to_string(),
        op_count: stats.ok,
        failed_count: stats.failed,
        byte_count: stats.bytes,
        avg_res_time_ms: mean,
        avg_proc_time_ms: mean,
        throughput_ops: stats.ok as f64 / seconds.max(1e-9),
        bandwidth_mb_s: stats.bytes as f64 / 1e6 / seconds.max(1e-9),
        succ_ratio: if total == 0 { 1.0 } else { stats.ok as f64 / total as f64 },
        p50_ms: quantile(0.5),
        p90_ms: quantile(0.9),
        p95_ms: quantile(0.95),
        p99_ms: quantile(0.99),
        latency_histogram: stats.latency.as_ref().and_then(crate::latency::encode),
    }
}

type WorkStats = HashMap<String, (OpStats, f64)>;

fn run_work(work: &Work, target: &dyn Target) -> Result<WorkStats, String> {
    let containers = work.config.selector("containers")?.unwrap_or(Selector::Constant(1));
    let objects = work.config.selector("objects")?;
    let sizes = work.config.selector("sizes")?;
    let workers = work.workers;
    let mut connections =
        (0..workers).map(|_| target.connect()).collect::<BenchResult<Vec<_>>>().map_err(|e| e.to_string())?;
    let collected: Mutex<WorkStats> = Mutex::new(HashMap::new());
    let start = Instant::now();
    match work.kind.as_str() {
        // COSBench's init creates the containers and dispose removes them, one operation each
        // (op types "init" and "dispose"). A container is a directory (or, on S3 targets, the
        // prefix the objects share, with its folder object).
        "init" | "dispose" => {
            let mut stats = OpStats::default();
            let conn = connections.first_mut().ok_or("a work needs workers")?;
            for c in containers.share(0, 1) {
                let container = format!("{}{c}", work.config.prefix("cprefix", "mycontainers"));
                let started = Instant::now();
                let outcome = if work.kind == "init" {
                    conn.mkdir(&container).or_else(|e| if already_there(&e) { Ok(()) } else { Err(e) })
                } else {
                    deleted(conn.rmdir(&container))
                };
                stats.record(started.elapsed().as_micros() as u64, outcome.map(|()| 0));
            }
            collected.lock().expect("not poisoned").insert(work.kind.clone(), (stats, 0.0));
        }
        "prepare" | "cleanup" => {
            let objects = objects.ok_or_else(|| format!("{} work {:?} needs objects=", work.kind, work.name))?;
            let op_name = if work.kind == "prepare" { "write" } else { "delete" };
            let cache: Mutex<HashMap<u64, std::sync::Arc<Vec<u8>>>> = Mutex::new(HashMap::new());
            std::thread::scope(|scope| {
                for (w, conn) in connections.iter_mut().enumerate() {
                    let (containers, objects, sizes, collected, cache) =
                        (&containers, &objects, &sizes, &collected, &cache);
                    scope.spawn(move || {
                        let mut stats = OpStats::default();
                        let mut rng = Rng(0x9E37_79B9 + w as u64);
                        let counter = AtomicU64::new(0);
                        for c in containers.share(0, 1) {
                            for o in objects.share(w, workers) {
                                let started = Instant::now();
                                let outcome = if op_name == "write" {
                                    let size = sizes.as_ref().map_or(0, |s| s.next(&mut rng, &counter));
                                    let data = cache
                                        .lock()
                                        .expect("not poisoned")
                                        .entry(size)
                                        .or_insert_with(|| std::sync::Arc::new(payload(size)))
                                        .clone();
                                    conn.put(&key(&work.config, c, o), &data).map(|()| size)
                                } else {
                                    deleted(conn.delete(&key(&work.config, c, o))).map(|()| 0)
                                };
                                stats.record(started.elapsed().as_micros() as u64, outcome);
                            }
                        }
                        let mut all = collected.lock().expect("not poisoned");
                        all.entry(op_name.to_string()).or_insert_with(|| (OpStats::default(), 0.0)).0.merge(stats);
                    });
                }
            });
        }
        _ => run_main(work, &mut connections, &collected)?,
    }
    let seconds = start.elapsed().as_secs_f64() - work.rampup.as_secs_f64();
    let mut stats = collected.into_inner().expect("not poisoned");
    for value in stats.values_mut() {
        value.1 = seconds.max(1e-9);
    }
    Ok(stats)
}

fn run_main(work: &Work, connections: &mut [Box<dyn Connection>], collected: &Mutex<WorkStats>) -> Result<(), String> {
    struct Prepared {
        kind: String,
        ratio: u64,
        config: Config,
        containers: Selector,
        objects: Selector,
        sizes: Option<Selector>,
        counter: AtomicU64,
    }
    let mut ops = Vec::new();
    for op in &work.operations {
        let config = work.config.merged(&op.config);
        ops.push(Prepared {
            kind: op.kind.clone(),
            ratio: op.ratio,
            containers: config.selector("containers")?.unwrap_or(Selector::Constant(1)),
            objects: config.selector("objects")?.unwrap_or(Selector::Constant(1)),
            sizes: config.selector("sizes")?,
            config,
            counter: AtomicU64::new(0),
        });
    }
    if let Some(op) = ops.iter().find(|o| o.kind == "write" && o.sizes.is_none()) {
        return Err(format!("the write operation of work {:?} needs sizes= (config {:?})", work.name, op.config));
    }
    let start = Instant::now();
    let measure_from = start + work.rampup;
    let deadline = work.runtime.map(|r| measure_from + r);
    let done_ops = AtomicU64::new(0);
    let done_bytes = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for (w, conn) in connections.iter_mut().enumerate() {
            let (ops, done_ops, done_bytes) = (&ops, &done_ops, &done_bytes);
            scope.spawn(move || {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ (w as u64 + 1));
                let mut stats: HashMap<String, OpStats> = HashMap::new();
                let mut payloads: HashMap<u64, Vec<u8>> = HashMap::new();
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d)
                        || work.total_ops.is_some_and(|t| done_ops.load(Ordering::Relaxed) >= t)
                        || work.total_bytes.is_some_and(|t| done_bytes.load(Ordering::Relaxed) >= t)
                    {
                        break;
                    }
                    let mut pick = rng.below(100);
                    let op = ops.iter().find(|o| {
                        let hit = pick < o.ratio;
                        pick = pick.saturating_sub(o.ratio);
                        hit
                    });
                    let Some(op) = op else { continue };
                    let c = op.containers.next(&mut rng, &op.counter);
                    let o = op.objects.next(&mut rng, &op.counter);
                    let k = key(&op.config, c, o);
                    let started = Instant::now();
                    let outcome = match op.kind.as_str() {
                        "read" => conn.get(&k),
                        "write" => {
                            let size = op.sizes.as_ref().map_or(0, |s| s.next(&mut rng, &op.counter));
                            let data = payloads.entry(size).or_insert_with(|| payload(size));
                            conn.put(&k, data).map(|()| size)
                        }
                        "delete" => conn.delete(&k).map(|()| 0),
                        _ => {
                            let prefix = format!("{}{c}/", op.config.prefix("cprefix", "mycontainers"));
                            conn.list_page(&prefix, None, 1000).map(|_| 0)
                        }
                    };
                    let micros = started.elapsed().as_micros() as u64;
                    if let Ok(bytes) = &outcome {
                        done_bytes.fetch_add(*bytes, Ordering::Relaxed);
                    }
                    done_ops.fetch_add(1, Ordering::Relaxed);
                    if started >= measure_from {
                        stats.entry(op.kind.clone()).or_default().record(micros, outcome);
                    }
                }
                let mut all = collected.lock().expect("not poisoned");
                for (kind, s) in stats {
                    all.entry(kind).or_insert_with(|| (OpStats::default(), 0.0)).0.merge(s);
                }
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    #[test]
    fn merged_ranks_add_counts_and_weight_times() {
        let row = |ok: u64, failed: u64, avg: f64, p99: f64| StageReport {
            kind: "s3".into(),
            stage: "main".into(),
            op: "read".into(),
            op_count: ok,
            failed_count: failed,
            byte_count: ok * 10,
            avg_res_time_ms: avg,
            avg_proc_time_ms: avg,
            throughput_ops: ok as f64,
            bandwidth_mb_s: 1.0,
            succ_ratio: ok as f64 / (ok + failed) as f64,
            p50_ms: avg,
            p90_ms: avg,
            p95_ms: avg,
            p99_ms: p99,
            latency_histogram: None,
        };
        let merged = StageReport::merge(&[&row(30, 0, 1.0, 5.0), &row(10, 10, 5.0, 9.0)]);
        assert_eq!((merged.op_count, merged.failed_count, merged.byte_count), (40, 10, 400));
        assert!((merged.avg_res_time_ms - 2.0).abs() < 1e-9); // (30 x 1 + 10 x 5) / 40
        assert!((merged.succ_ratio - 0.8).abs() < 1e-9);
        assert_eq!((merged.throughput_ops, merged.bandwidth_mb_s, merged.p99_ms), (40.0, 2.0, 9.0));
    }

    const SAMPLE: &str = r#"<?xml version="1.0" encoding="UTF-8" ?>
<workload name="s3-sample" description="sample benchmark for s3">
  <storage type="s3" config="accesskey=AK;secretkey=SK;endpoint=http://127.0.0.1:9000" />
  <workflow>
    <workstage name="init"><work type="init" workers="1" config="cprefix=cos;containers=r(1,2)" /></workstage>
    <workstage name="prepare"><work type="prepare" workers="2" config="cprefix=cos;containers=r(1,2);objects=r(1,10);sizes=c(4)KB" /></workstage>
    <workstage name="main">
      <work name="main" workers="2" totalOps="200">
        <operation type="read" ratio="80" config="cprefix=cos;containers=u(1,2);objects=u(1,10)" />
        <operation type="write" ratio="20" config="cprefix=cos;containers=u(1,2);objects=u(11,20);sizes=c(2)KB" />
      </work>
    </workstage>
    <workstage name="cleanup"><work type="cleanup" workers="1" config="cprefix=cos;containers=r(1,2);objects=r(1,20)" /></workstage>
    <workstage name="dispose"><work type="dispose" workers="1" config="cprefix=cos;containers=r(1,2)" /></workstage>
  </workflow>
</workload>"#;

    #[test]
    fn selectors_and_units() {
        assert_eq!(Selector::parse("c(64)KB").unwrap(), Selector::Constant(64_000));
        assert_eq!(Selector::parse("u(1,100)").unwrap(), Selector::Uniform(1, 100));
        assert_eq!(Selector::parse("r(1,10)").unwrap(), Selector::Range(1, 10));
        assert_eq!(Selector::parse("s(5,6)MB").unwrap(), Selector::Sequential(5_000_000, 6_000_000));
        assert_eq!(
            Selector::parse("h(1|64|50,64|256|50)KB").unwrap(),
            Selector::Histogram(vec![(1000, 64_000, 50), (64_000, 256_000, 50)])
        );
        for bad in ["x(1)", "c(1)TB", "u(5,1)", "u(1)", "h(1|2)", "c()", "c1"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
        let mut rng = Rng(7);
        let counter = AtomicU64::new(0);
        let u = Selector::Uniform(3, 5);
        assert!((0..100).map(|_| u.next(&mut rng, &counter)).all(|v| (3..=5).contains(&v)));
        let r = Selector::Range(1, 10);
        assert_eq!(r.share(0, 3), [1, 4, 7, 10]);
        assert_eq!(r.share(2, 3), [3, 6, 9]);
    }

    #[test]
    fn parses_the_sample_and_refuses_broken_files() {
        let w = CosbenchWorkload::parse(SAMPLE).unwrap();
        assert_eq!(
            w.stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["init", "prepare", "main", "cleanup", "dispose"]
        );
        assert_eq!(w.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        let main = &w.stages[2].works[0];
        assert_eq!((main.workers, main.total_ops), (2, Some(200)));
        assert_eq!(
            main.operations.iter().map(|o| (o.kind.as_str(), o.ratio)).collect::<Vec<_>>(),
            [("read", 80), ("write", 20)]
        );
        for (broken, why) in [
            ("<workload/>", "workflow"),
            ("<job/>", "expected <workload>"),
            (
                "<workload><workflow><workstage><work name=\"m\" runtime=\"1\"><operation type=\"read\" ratio=\"50\"/></work></workstage></workflow></workload>",
                "add up to 100",
            ),
            (
                "<workload><workflow><workstage><work name=\"m\" runtime=\"1\"><operation type=\"fly\" ratio=\"100\"/></work></workstage></workflow></workload>",
                "not supported",
            ),
            (
                "<workload><workflow><workstage><work name=\"m\"><operation type=\"read\" ratio=\"100\"/></work></workstage></workflow></workload>",
                "runtime",
            ),
            (
                "<workload><workflow><workstage><work type=\"init\" workers=\"x\"/></workstage></workflow></workload>",
                "not a number",
            ),
            ("<workload", "well-formed"),
        ] {
            let err = CosbenchWorkload::parse(broken).unwrap_err();
            assert!(err.contains(why), "{broken}: {err}");
        }
    }

    #[test]
    fn shipped_sweeps_parse() {
        let sizes = CosbenchWorkload::parse(include_str!("../cosbench/sweep-sizes.xml")).unwrap();
        let mains: Vec<&Work> = sizes.stages.iter().flat_map(|s| &s.works).filter(|w| w.kind == "normal").collect();
        assert_eq!(mains.len(), 5);
        let workers = CosbenchWorkload::parse(include_str!("../cosbench/sweep-workers.xml")).unwrap();
        let counts: Vec<usize> =
            workers.stages.iter().flat_map(|s| &s.works).filter(|w| w.kind == "normal").map(|w| w.workers).collect();
        assert_eq!(counts, [1, 4, 16, 64]);
    }

    #[test]
    fn runs_every_stage_with_the_counts_the_file_asks_for() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("c"), sync: false };
        target.prepare().unwrap();
        let reports = run(&CosbenchWorkload::parse(SAMPLE).unwrap(), &target).unwrap();
        let find = |stage: &str, op: &str| {
            reports.iter().find(|r| r.stage == stage && r.op == op).unwrap_or_else(|| panic!("{stage} {op}"))
        };
        let prepared = find("prepare", "write");
        assert_eq!((prepared.op_count, prepared.byte_count), (20, 20 * 4000));
        let main_ops = find("main", "read").op_count + find("main", "write").op_count;
        assert!((200..=201).contains(&main_ops), "{main_ops}");
        assert_eq!(find("main", "read").succ_ratio, 1.0);
        // Cleanup removes objects 1..20 of both containers: keys never written or already gone
        // count as deleted, as S3 (and so COSBench) counts them.
        let cleanup = find("cleanup", "delete");
        assert_eq!((cleanup.op_count, cleanup.failed_count, cleanup.succ_ratio), (40, 0, 1.0));
        // Init makes the containers, dispose removes them: one operation each.
        assert_eq!((find("init", "init").op_count, find("init", "init").failed_count), (2, 0));
        assert_eq!((find("dispose", "dispose").op_count, find("dispose", "dispose").failed_count), (2, 0));
        assert!(!target.dir.join("cos1").exists(), "dispose removed the emptied container");
    }
}
