//! Streams: N parallel streams each write one object of size S, then read it back, the way
//! large-file streaming tests on erasure-coded storage report: per-stream rate (average and
//! sigma over the streams), p99 and maximum stream time, and the aggregate bandwidth.

use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::target::{BenchResult, Target};
use crate::workload::{Op, payload};

/// What one phase (write or read) of a streams run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamsResult {
    pub kind: String,
    pub op: Op,
    pub streams: usize,
    pub object_size: u64,
    pub errors: u64,
    /// Mean and standard deviation of the per-stream rates, MiB/s.
    pub mean_mib_s: f64,
    pub sigma_mib_s: f64,
    /// 99th percentile and maximum of the per-stream times, seconds.
    pub p99_seconds: f64,
    pub max_seconds: f64,
    /// All bytes over the phase's wall time, MiB/s.
    pub aggregate_mib_s: f64,
    /// Each successful stream's time and the phase's wall time, seconds: what merges several
    /// ranks' results exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_seconds: Vec<f64>,
    #[serde(default)]
    pub wall_seconds: f64,
}

impl StreamsResult {
    /// Whether `other` is the same phase with as many streams of the same size (on any target).
    pub fn same_phase(&self, other: &Self) -> bool {
        (self.op, self.streams, self.object_size) == (other.op, other.streams, other.object_size)
    }

    /// One result for a phase several ranks ran together (they start at a barrier), as if all
    /// their streams were one run: statistics over every stream's time, and the aggregate over
    /// the slowest rank's wall time. Results without stream times (older files) pool mean and
    /// sigma, add aggregates and keep the worst p99, an upper bound.
    pub fn merge(rows: &[&Self]) -> Self {
        if rows.iter().all(|r| r.stream_seconds.len() as u64 + r.errors == r.streams as u64) {
            let times = rows.iter().flat_map(|r| r.stream_seconds.iter().copied()).collect();
            let wall = rows.iter().map(|r| r.wall_seconds).fold(0.0, f64::max);
            let (streams, errors) = (rows.iter().map(|r| r.streams).sum(), rows.iter().map(|r| r.errors).sum());
            return summarise(&rows[0].kind, rows[0].op, streams, rows[0].object_size, times, errors, wall);
        }
        let mut merged = rows[0].clone();
        let streams: usize = rows.iter().map(|r| r.streams).sum();
        let n = streams.max(1) as f64;
        let mean = rows.iter().map(|r| r.mean_mib_s * r.streams as f64).sum::<f64>() / n;
        let variance = rows
            .iter()
            .map(|r| r.streams as f64 * (r.sigma_mib_s.powi(2) + (r.mean_mib_s - mean).powi(2)))
            .sum::<f64>()
            / n;
        merged.streams = streams;
        merged.mean_mib_s = mean;
        merged.sigma_mib_s = variance.sqrt();
        for r in &rows[1..] {
            merged.errors += r.errors;
            merged.p99_seconds = merged.p99_seconds.max(r.p99_seconds);
            merged.max_seconds = merged.max_seconds.max(r.max_seconds);
            merged.aggregate_mib_s += r.aggregate_mib_s;
        }
        merged
    }
}

fn summarise(
    kind: &str,
    op: Op,
    streams: usize,
    size: u64,
    mut times: Vec<f64>,
    errors: u64,
    wall: f64,
) -> StreamsResult {
    let mib = size as f64 / f64::from(1 << 20);
    let rates: Vec<f64> = times.iter().map(|t| mib / t.max(1e-9)).collect();
    let n = rates.len().max(1) as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let sigma = (rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    let stream_seconds = times.clone();
    times.sort_by(f64::total_cmp);
    let p99 = p99(&times);
    StreamsResult {
        kind: kind.to_string(),
        op,
        streams,
        object_size: size,
        errors,
        mean_mib_s: mean,
        sigma_mib_s: sigma,
        p99_seconds: p99,
        max_seconds: times.last().copied().unwrap_or(0.0),
        aggregate_mib_s: mib * times.len() as f64 / wall.max(1e-9),
        stream_seconds,
        wall_seconds: wall,
    }
}

/// The 99th percentile of `sorted` times (nearest rank; 0 when there are none).
pub fn p99(sorted: &[f64]) -> f64 {
    sorted.get(((sorted.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0.0)
}

/// Writes then reads `streams` objects of `size` bytes in parallel.
pub fn run_streams(target: &dyn Target, streams: usize, size: u64) -> BenchResult<Vec<StreamsResult>> {
    run_streams_synced(target, streams, size, &mut None::<crate::team::Team>)
}

/// As `run_streams`, calling `between_phases` before the read phase, so that ranks in other
/// processes read only once all have written.
pub fn run_streams_synced(
    target: &dyn Target,
    streams: usize,
    size: u64,
    between_phases: crate::team::PhaseBarrier<'_>,
) -> BenchResult<Vec<StreamsResult>> {
    let streams = streams.max(1);
    let data = payload(size);
    let mut results = Vec::with_capacity(2);
    for op in [Op::Put, Op::Get] {
        if op == Op::Get {
            between_phases.barrier()?;
        }
        let mut connections = (0..streams).map(|_| target.connect()).collect::<BenchResult<Vec<_>>>()?;
        let times = Mutex::new(Vec::with_capacity(streams));
        let errors = Mutex::new(0u64);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for (i, conn) in connections.iter_mut().enumerate() {
                let (times, errors, data) = (&times, &errors, &data);
                scope.spawn(move || {
                    let key = format!("streams/stream{i}");
                    let t0 = Instant::now();
                    let ok = match op {
                        Op::Put => conn.put(&key, data).is_ok(),
                        _ => conn.get(&key).is_ok_and(|n| n == size),
                    };
                    crate::workload::count_done(1);
                    if ok {
                        times.lock().expect("not poisoned").push(t0.elapsed().as_secs_f64());
                    } else {
                        *errors.lock().expect("not poisoned") += 1;
                    }
                });
            }
        });
        let wall = start.elapsed().as_secs_f64();
        results.push(summarise(
            target.kind(),
            op,
            streams,
            size,
            times.into_inner().expect("not poisoned"),
            errors.into_inner().expect("not poisoned"),
            wall,
        ));
    }
    let mut conn = target.connect()?;
    for i in 0..streams {
        let _ = conn.delete(&format!("streams/stream{i}"));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    #[test]
    fn statistics_by_hand() {
        // Two streams of 1 MiB taking 1 s and 0.5 s: rates 1 and 2 MiB/s.
        let r = summarise("posix", Op::Put, 2, 1 << 20, vec![1.0, 0.5], 0, 1.0);
        assert!((r.mean_mib_s - 1.5).abs() < 1e-9);
        assert!((r.sigma_mib_s - 0.5).abs() < 1e-9);
        assert_eq!(r.max_seconds, 1.0);
        assert_eq!(r.p99_seconds, 1.0);
        assert!((r.aggregate_mib_s - 2.0).abs() < 1e-9);
    }

    #[test]
    fn merged_ranks_pool_their_streams() {
        // Rates 1 and 2 MiB/s on one rank, 4 MiB/s on the other: as one run of three streams.
        let a = summarise("s3", Op::Get, 2, 1 << 20, vec![1.0, 0.5], 0, 1.0);
        let b = summarise("s3", Op::Get, 1, 1 << 20, vec![0.25], 0, 0.25);
        let whole = summarise("s3", Op::Get, 3, 1 << 20, vec![1.0, 0.5, 0.25], 0, 1.0);
        assert_eq!(StreamsResult::merge(&[&a, &b]), whole);
        // Without stream times (older result files): pooled mean and sigma, summed aggregates.
        let bare = |r: &StreamsResult| StreamsResult { stream_seconds: Vec::new(), ..r.clone() };
        let merged = StreamsResult::merge(&[&bare(&a), &bare(&b)]);
        assert_eq!((merged.streams, merged.errors, merged.max_seconds), (3, 0, 1.0));
        assert!((merged.mean_mib_s - whole.mean_mib_s).abs() < 1e-9);
        assert!((merged.sigma_mib_s - whole.sigma_mib_s).abs() < 1e-9);
        assert!((merged.aggregate_mib_s - (2.0 + 4.0)).abs() < 1e-9);
        assert!(!a.same_phase(&b) && !b.same_phase(&summarise("s3", Op::Put, 1, 1 << 20, vec![1.0], 0, 1.0)));
    }

    #[test]
    fn every_stream_writes_and_reads_its_object() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("s"), sync: false };
        target.prepare().unwrap();
        let results = run_streams(&target, 3, 256 << 10).unwrap();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|r| r.errors == 0 && r.streams == 3 && r.mean_mib_s > 0.0));
        assert!(std::fs::read_dir(dir.path().join("s/streams")).unwrap().next().is_none());
    }
}
