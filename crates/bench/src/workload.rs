//! Workloads: PUT, GET, HEAD, DELETE and LIST with a chosen object size, worker count and
//! duration, run the same way against any `Target`. Setup (populating objects to read, stat,
//! delete or list) is not timed; each timed operation goes into a latency histogram.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::target::{BenchError, BenchResult, Connection, Target};

/// The operation a workload repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Put,
    Get,
    Head,
    Delete,
    List,
    /// mdtest's directory phases: create, stat, rename (POSIX only) and remove.
    Mkdir,
    StatDir,
    Rename,
    Rmdir,
    /// IO500's find: walk the mdtest trees and match files (`find`).
    Find,
}

impl Op {
    /// Whether this is one of mdtest's directory operations rather than an object operation.
    pub fn is_directory_op(self) -> bool {
        matches!(self, Self::Mkdir | Self::StatDir | Self::Rename | Self::Rmdir)
    }
}

impl std::str::FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "put" => Ok(Self::Put),
            "get" => Ok(Self::Get),
            "head" => Ok(Self::Head),
            "delete" => Ok(Self::Delete),
            "list" => Ok(Self::List),
            other => Err(format!("unknown operation {other:?}: use put, get, head, delete or list")),
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Self::Put => "put",
            Self::Get => "get",
            Self::Head => "head",
            Self::Delete => "delete",
            Self::List => "list",
            Self::Mkdir => "mkdir",
            Self::StatDir => "statdir",
            Self::Rename => "rename",
            Self::Rmdir => "rmdir",
            Self::Find => "find",
        };
        f.write_str(name)
    }
}

/// One measured workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub op: Op,
    pub object_size: u64,
    pub workers: usize,
    pub duration: Duration,
    /// Objects populated beforehand for get/head (shared), delete (split among workers) and list
    /// (one flat prefix): at most this many, the fill stopping after `duration`.
    pub objects: usize,
}

/// What one workload measured on one target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpResult {
    /// The workload this phase belongs to: `ops` for the single-operation workloads,
    /// `mdtest-easy`, `mdtest-hard`, ...
    #[serde(default = "default_workload")]
    pub workload: String,
    pub target: String,
    pub kind: String,
    pub op: Op,
    pub object_size: u64,
    pub workers: usize,
    pub ops: u64,
    pub bytes: u64,
    /// Keys returned, for list.
    pub keys: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub mib_per_s: f64,
    pub keys_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Every latency (µs) as an encoded HdrHistogram, for exact percentiles across ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_histogram: Option<String>,
    /// Interleaved phases (`--interleave-bucket`): this target's rate in each of its slices,
    /// in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slice_ops_per_s: Vec<f64>,
    /// mdtest: the phase over its iterations (max, min, mean, standard deviation of the rate,
    /// mean ms per operation, per node); the rates above are then the iterations' mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<PhaseStats>,
}

/// One phase over its iterations (mdtest -i), all ranks together: the form of mdtest's SUMMARY
/// and of Table 5 in Gadban & Kunkel (2021); `phase_stats` computes and merges them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// The rate (ops/s) of each iteration, all ranks added up.
    pub rates: Vec<f64>,
    pub max_ops_per_s: f64,
    pub min_ops_per_s: f64,
    pub mean_ops_per_s: f64,
    /// Population standard deviation of the rates, as mdtest's summary computes it.
    pub stddev_ops_per_s: f64,
    /// Mean time of one operation, in ms, over every operation of every iteration and rank
    /// (from the latency histogram: Table 5's "mean time").
    pub mean_ms: f64,
    /// Nodes the ranks ran on (distinct host names).
    pub nodes: usize,
    /// `mean_ops_per_s / nodes`: the paper's averaged figure per node.
    pub mean_ops_per_s_per_node: f64,
}

impl PhaseStats {
    pub fn new(rates: Vec<f64>, mean_ms: f64, nodes: usize) -> Self {
        let n = rates.len().max(1) as f64;
        let mean = rates.iter().sum::<f64>() / n;
        let variance = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n;
        Self {
            max_ops_per_s: rates.iter().copied().fold(0.0, f64::max),
            min_ops_per_s: if rates.is_empty() { 0.0 } else { rates.iter().copied().fold(f64::INFINITY, f64::min) },
            mean_ops_per_s: mean,
            stddev_ops_per_s: variance.sqrt(),
            mean_ms,
            nodes: nodes.max(1),
            mean_ops_per_s_per_node: mean / nodes.max(1) as f64,
            rates,
        }
    }
}

impl OpResult {
    /// Adds `other`'s counts (operations, bytes, keys, errors) to this result's, keeping the
    /// first error seen: what merging ranks and merging iterations share.
    pub fn add_counts(&mut self, other: &OpResult) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.keys += other.keys;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

fn default_workload() -> String {
    "ops".to_string()
}

/// Operations this process has finished (timed or setup, in any workload, failed ones too),
/// read by the command line's progress bar: one relaxed atomic add per operation.
pub static OPERATIONS_DONE: AtomicU64 = AtomicU64::new(0);

/// Counts finished operations for the progress bar.
pub(crate) fn count_done(operations: u64) {
    OPERATIONS_DONE.fetch_add(operations, Ordering::Relaxed);
}

/// Workers report to the progress counter every this many operations, so the shared counter
/// is not a contended cache line on every fast operation (a cached stat takes under 1 µs).
const REPORT_EVERY: u64 = 64;

/// Per-worker tallies.
pub(crate) struct Tally {
    ops: u64,
    bytes: u64,
    keys: u64,
    errors: u64,
    first_error: Option<String>,
    latency: Histogram<u64>,
    /// Operations not yet added to `OPERATIONS_DONE`.
    unreported: u64,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            ops: 0,
            bytes: 0,
            keys: 0,
            errors: 0,
            first_error: None,
            latency: Histogram::new(3).expect("valid precision"),
            unreported: 0,
        }
    }

    pub(crate) fn errors(&self) -> u64 {
        self.errors
    }

    pub(crate) fn record(&mut self, started: Instant, outcome: BenchResult<(u64, u64)>) {
        self.unreported += 1;
        if self.unreported == REPORT_EVERY {
            count_done(std::mem::take(&mut self.unreported));
        }
        match outcome {
            Ok((bytes, keys)) => {
                self.ops += 1;
                self.bytes += bytes;
                self.keys += keys;
                let _ = self.latency.record(started.elapsed().as_micros().max(1) as u64);
            }
            Err(err) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| err.to_string());
            }
        }
    }

    /// Records one call that did `count` operations (a walk looking at `count` files) and
    /// returned `keys` (the files it matched); its latency is the call's.
    pub(crate) fn record_many(&mut self, started: Instant, count: u64, outcome: BenchResult<u64>) {
        count_done(count);
        match outcome {
            Ok(keys) => {
                self.ops += count;
                self.keys += keys;
                let _ = self.latency.record(started.elapsed().as_micros().max(1) as u64);
            }
            Err(err) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| err.to_string());
            }
        }
    }

    /// Adds `other` in; its operations not yet reported to the progress bar are reported now.
    pub(crate) fn merge(&mut self, other: Self) {
        count_done(other.unreported);
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.keys += other.keys;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        let _ = self.latency.add(&other.latency);
    }
}

/// A worker gives up after this many failed operations.
pub(crate) const MAX_ERRORS: u64 = 100;

/// Deterministic, incompressible-looking payload.
pub fn payload(size: u64) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn data_key(i: usize) -> String {
    format!("data/o{i:08}")
}

fn delete_key(worker: usize, i: usize) -> String {
    format!("del/w{worker}/o{i:08}")
}

fn list_prefix() -> &'static str {
    "list/"
}

/// Runs `f(worker, connection)` on `workers` threads and merges their tallies.
pub(crate) fn on_workers<F>(target: &dyn Target, workers: usize, f: F) -> BenchResult<Tally>
where
    F: Fn(usize, &mut dyn Connection) -> Tally + Sync,
{
    let tallies = on_workers_of(&[target], workers, |w, connections| f(w, connections[0].as_mut()))?;
    let mut total = Tally::new();
    for t in tallies {
        total.merge(t);
    }
    Ok(total)
}

/// Runs `f(worker, connections)` on `workers` threads, each with a connection to every target
/// of `targets` (in their order), and answers what each returned, in worker order.
pub(crate) fn on_workers_of<F, T>(targets: &[&dyn Target], workers: usize, f: F) -> BenchResult<Vec<T>>
where
    F: Fn(usize, &mut [Box<dyn Connection>]) -> T + Sync,
    T: Send,
{
    let mut connections = (0..workers)
        .map(|_| targets.iter().map(|target| target.connect()).collect::<BenchResult<Vec<_>>>())
        .collect::<BenchResult<Vec<Vec<Box<dyn Connection>>>>>()?;
    let f = &f;
    Ok(std::thread::scope(|scope| {
        let handles: Vec<_> =
            connections.iter_mut().enumerate().map(|(w, conn)| scope.spawn(move || f(w, conn))).collect();
        handles.into_iter().map(|h| h.join().expect("benchmark worker panicked")).collect()
    }))
}

/// Creates up to `count` objects with keys from `key`, spread over the workers, untimed, and
/// stops at `deadline`: answers how many it made (keys 0..n, whatever each worker got to).
fn populate(
    target: &dyn Target,
    workers: usize,
    count: usize,
    size: u64,
    deadline: Instant,
    key: impl Fn(usize) -> String + Sync,
) -> BenchResult<usize> {
    let data = payload(size);
    let made = std::sync::Mutex::new(vec![0usize; workers]);
    let tally = on_workers(target, workers, |w, conn| {
        let mut t = Tally::new();
        let mut mine = 0;
        for i in (w..count).step_by(workers) {
            if Instant::now() >= deadline {
                break;
            }
            let started = Instant::now();
            t.record(started, conn.put(&key(i), &data).map(|()| (0, 0)));
            if t.errors > 0 {
                break;
            }
            mine += 1;
        }
        made.lock().unwrap_or_else(|e| e.into_inner())[w] = mine;
        t
    })?;
    if let Some(err) = tally.first_error {
        return Err(BenchError::Setup(format!("populating objects failed: {err}")));
    }
    let n = contiguous_keys(&made.into_inner().unwrap_or_else(|e| e.into_inner())).min(count);
    if n == 0 && count > 0 {
        return Err(BenchError::Setup("populating objects made none before the deadline".into()));
    }
    Ok(n)
}

/// How many keys 0..n exist when worker w (of `made.len()`) made keys w, w + W, w + 2W, ...,
/// `made[w]` of them: every whole round, then the next round's keys up to the first worker that
/// did not get that far.
fn contiguous_keys(made: &[usize]) -> usize {
    let rounds = made.iter().copied().min().unwrap_or(0);
    rounds * made.len() + made.iter().take_while(|&&m| m > rounds).count()
}

impl Workload {
    /// Runs the workload against `target` (which must be prepared) and reports it.
    pub fn run(&self, target: &dyn Target) -> BenchResult<OpResult> {
        self.run_with_fill(target).map(|(result, _)| result)
    }

    /// `run`, and how many objects the fill before the phase made (get, head, delete, list):
    /// fewer than `objects` when the fill stopped after `duration`.
    pub fn run_with_fill(&self, target: &dyn Target) -> BenchResult<(OpResult, Option<usize>)> {
        let workers = self.workers.max(1);
        let size = self.object_size;
        // The fill takes at most --duration too: a duration means the duration.
        let fill_deadline = Instant::now() + self.duration;
        let filled = match self.op {
            Op::Get | Op::Head => populate(target, workers, self.objects.max(1), size, fill_deadline, data_key)?,
            Op::Delete => populate(target, workers, self.objects.max(workers), size, fill_deadline, |i| {
                delete_key(i % workers, i / workers)
            })?,
            Op::List => populate(target, workers, self.objects.max(1), 0, fill_deadline, |i| {
                format!("{}o{i:08}", list_prefix())
            })?,
            Op::Put => 0,
            op => {
                return Err(BenchError::Setup(format!("{op} is an mdtest or IO500 phase, not a workload of its own")));
            }
        };
        let data = Arc::new(payload(if self.op == Op::Put { size } else { 0 }));
        let objects = filled.max(1);
        // Deletes take each worker's own keys: the rounds every worker completed.
        let per_worker_deletes = filled / workers;
        let start = Instant::now();
        let deadline = start + self.duration;
        let tally = on_workers(target, workers, |w, conn| {
            let mut t = Tally::new();
            let mut n = 0usize;
            let mut marker: Option<String> = None;
            while Instant::now() < deadline && t.errors < MAX_ERRORS {
                let started = Instant::now();
                let outcome = match self.op {
                    Op::Put => conn.put(&format!("put/w{w}/o{n:08}"), &data).map(|()| (size, 0)),
                    Op::Get => conn.get(&data_key((w + n * workers) % objects)).map(|b| (b, 0)),
                    Op::Head => conn.head(&data_key((w + n * workers) % objects)).map(|()| (0, 0)),
                    Op::Delete => {
                        if n >= per_worker_deletes {
                            break;
                        }
                        conn.delete(&delete_key(w, n)).map(|()| (0, 0))
                    }
                    Op::List => conn.list_page(list_prefix(), marker.as_deref(), 1000).map(|(keys, next)| {
                        marker = next;
                        (0, keys as u64)
                    }),
                    // Refused before the workers started.
                    Op::Mkdir | Op::StatDir | Op::Rename | Op::Rmdir | Op::Find => break,
                };
                t.record(started, outcome);
                n += 1;
            }
            t
        })?;
        let result = result_of(target, "ops", self.op, size, workers, tally, start.elapsed().as_secs_f64());
        Ok((result, (self.op != Op::Put).then_some(filled)))
    }
}

/// A result with the given figures and neutral everything else, for tests.
#[cfg(test)]
pub(crate) fn sample_result(
    kind: &str,
    workload: &str,
    op: Op,
    ops_per_s: f64,
    mib_per_s: f64,
    keys_per_s: f64,
) -> OpResult {
    OpResult {
        workload: workload.into(),
        target: kind.into(),
        kind: kind.into(),
        op,
        object_size: 4096,
        workers: 4,
        ops: 1,
        bytes: 0,
        keys: 0,
        errors: 0,
        first_error: None,
        seconds: 1.0,
        ops_per_s,
        mib_per_s,
        keys_per_s,
        p50_us: 1,
        p99_us: 2,
        max_us: 3,
        latency_histogram: None,
        slice_ops_per_s: Vec::new(),
        iterations: None,
    }
}

/// Turns a phase's merged tallies into its reported figures.
pub(crate) fn result_of(
    target: &dyn Target,
    workload: &str,
    op: Op,
    size: u64,
    workers: usize,
    tally: Tally,
    seconds: f64,
) -> OpResult {
    OpResult {
        workload: workload.to_string(),
        target: target.describe(),
        kind: target.kind().to_string(),
        op,
        object_size: size,
        workers,
        ops: tally.ops,
        bytes: tally.bytes,
        keys: tally.keys,
        errors: tally.errors,
        first_error: tally.first_error,
        seconds,
        ops_per_s: tally.ops as f64 / seconds,
        mib_per_s: tally.bytes as f64 / seconds / f64::from(1 << 20),
        keys_per_s: tally.keys as f64 / seconds,
        p50_us: tally.latency.value_at_quantile(0.5),
        p99_us: tally.latency.value_at_quantile(0.99),
        max_us: tally.latency.max(),
        latency_histogram: crate::latency::encode(&tally.latency),
        slice_ops_per_s: Vec::new(),
        iterations: None,
    }
}

#[cfg(test)]
mod fill_tests {
    use super::contiguous_keys;

    #[test]
    fn only_keys_every_earlier_worker_made_count() {
        // Keys 0..8 by workers 0-3 (two rounds), then worker 0 made 8, worker 1 did not make 9.
        assert_eq!(contiguous_keys(&[3, 2, 2, 2]), 9);
        // Worker 3 got further but worker 0 did not: key 8 is missing, so 8.
        assert_eq!(contiguous_keys(&[2, 2, 2, 3]), 8);
        assert_eq!(contiguous_keys(&[0, 5, 5, 5]), 0);
        assert_eq!(contiguous_keys(&[]), 0);
    }
}
