//! The ranks of a multi-process run as one report: each rank's report gathered through the
//! team's sync directory, then merged phase by phase (rates add up, a phase lasts as long as
//! its slowest rank, latency percentiles come from the ranks' histograms added together).

use crate::cosbench::StageReport;
use crate::phase_stats::PhaseStats;
use crate::report::Report;
use crate::streams::StreamsResult;
use crate::team::Team;
use crate::workload::OpResult;

/// Publishes this rank's report, waits for all, and on rank 0 returns the merged report.
pub fn gather(team: &mut Team, report: &Report) -> Result<Option<Report>, String> {
    let json = serde_json::to_vec(report).map_err(|e| e.to_string())?;
    let Some(all) = team.gather_bytes(&json)? else { return Ok(None) };
    let reports = all
        .iter()
        .enumerate()
        .map(|(rank, bytes)| serde_json::from_slice(bytes).map_err(|e| format!("the report of rank {rank}: {e}")))
        .collect::<Result<Vec<Report>, String>>()?;
    merge(reports).map(Some)
}

/// One result for a phase all ranks ran at the same time: counts and rates add up, the phase
/// lasts as long as its slowest rank, and latency percentiles come from the ranks' histograms
/// added together (the worst rank's, an upper bound, for results without histograms).
fn merge_phase(phases: &[&OpResult]) -> OpResult {
    let mut merged = phases[0].clone();
    for r in &phases[1..] {
        merged.workers += r.workers;
        merged.add_counts(r);
        merged.seconds = merged.seconds.max(r.seconds);
        merged.ops_per_s += r.ops_per_s;
        merged.mib_per_s += r.mib_per_s;
        merged.keys_per_s += r.keys_per_s;
        merged.p50_us = merged.p50_us.max(r.p50_us);
        merged.p99_us = merged.p99_us.max(r.p99_us);
        merged.max_us = merged.max_us.max(r.max_us);
    }
    merged.latency_histogram = None;
    if let Some(latency) = crate::latency::merge(phases.iter().map(|r| r.latency_histogram.as_deref())) {
        merged.p50_us = latency.value_at_quantile(0.5);
        merged.p99_us = latency.value_at_quantile(0.99);
        merged.max_us = latency.max();
        merged.latency_histogram = crate::latency::encode(&latency);
    }
    // Node counts are set once all phases are merged (`merge`), from the ranks' hosts.
    merged.iterations = crate::phase_stats::add_rates(phases).map(|rates| PhaseStats::new(rates, 0.0, 1));
    merged
}

/// Merges the ranks' reports phase by phase; every rank must have run the same phases.
pub fn merge(reports: Vec<Report>) -> Result<Report, String> {
    let Some(first) = reports.first() else {
        return Err("no rank reported".into());
    };
    let same_phase = |a: &OpResult, b: &OpResult| {
        (&a.workload, &a.kind, a.op, a.object_size) == (&b.workload, &b.kind, b.op, b.object_size)
    };
    // A node is a host: ranks on the same host name share one.
    let mut hosts: Vec<&str> = reports.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut results = merge_rows(&reports, |r| &r.results, same_phase, merge_phase)?;
    for r in &mut results {
        if let Some(stats) = &r.iterations {
            r.iterations = Some(stats.recount(r, hosts.len()));
        }
    }
    Ok(Report {
        started_unix: reports.iter().map(|r| r.started_unix).min().unwrap_or(first.started_unix),
        host: first.host.clone(),
        durability: first.durability.clone(),
        results,
        streams: merge_rows(
            &reports,
            |r| &r.streams,
            |a: &StreamsResult, b| a.kind == b.kind && a.same_phase(b),
            StreamsResult::merge,
        )?,
        cosbench: merge_rows(&reports, |r| &r.cosbench, StageReport::same_row, StageReport::merge)?,
        // Scores come from the merged phases, never from one rank's.
        io500: Vec::new(),
    })
}

/// Merges row `i` of every rank's `rows` into row `i` of the result.
fn merge_rows<T>(
    reports: &[Report],
    rows: fn(&Report) -> &Vec<T>,
    same: impl Fn(&T, &T) -> bool,
    merge: fn(&[&T]) -> T,
) -> Result<Vec<T>, String> {
    let first = rows(&reports[0]);
    if let Some(rank) = reports.iter().position(|r| rows(r).len() != first.len()) {
        return Err(format!("rank {rank} did not run as many phases as rank 0"));
    }
    let mut merged = Vec::with_capacity(first.len());
    for (i, row) in first.iter().enumerate() {
        let mut group = vec![row];
        for (rank, report) in reports.iter().enumerate().skip(1) {
            let other = &rows(report)[i];
            if !same(row, other) {
                return Err(format!("rank {rank} did not run the same phases as rank 0 (phase {i})"));
            }
            group.push(other);
        }
        merged.push(merge(&group));
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Op;

    fn result(op: Op, ops: u64, ops_per_s: f64, p99_us: u64) -> OpResult {
        OpResult { ops, p99_us, ..crate::workload::sample_result("posix", "ops", op, ops_per_s, 0.0, 0.0) }
    }

    #[test]
    fn merged_phases_add_rates_and_keep_the_worst_latency() {
        let report = crate::report::sample_report;
        let merged =
            merge(vec![report(vec![result(Op::Put, 100, 50.0, 900)]), report(vec![result(Op::Put, 300, 150.0, 400)])])
                .unwrap();
        let r = &merged.results[0];
        assert_eq!((r.ops, r.ops_per_s, r.p99_us), (400, 200.0, 900));
        assert!(
            merge(vec![report(vec![result(Op::Put, 1, 1.0, 1)]), report(vec![result(Op::Get, 1, 1.0, 1)])]).is_err()
        );
    }

    #[test]
    fn iterations_add_up_and_nodes_are_distinct_hosts() {
        let with_rates = |rates: Vec<f64>| OpResult {
            iterations: Some(PhaseStats::new(rates, 0.0, 1)),
            ..result(Op::Put, 10, 1.0, 1)
        };
        let on = |host: &str, rates: Vec<f64>| Report {
            host: host.into(),
            ..crate::report::sample_report(vec![with_rates(rates)])
        };
        let merged =
            merge(vec![on("a", vec![10.0, 20.0]), on("b", vec![30.0, 40.0]), on("a", vec![5.0, 5.0])]).unwrap();
        let stats = merged.results[0].iterations.as_ref().unwrap();
        assert_eq!(stats.rates, [45.0, 65.0]);
        assert_eq!((stats.nodes, stats.mean_ops_per_s, stats.mean_ops_per_s_per_node), (2, 55.0, 27.5));
    }

    #[test]
    fn merged_phases_with_histograms_have_exact_percentiles() {
        let with_latencies = |values: std::ops::Range<u64>| {
            let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
            values.clone().for_each(|v| h.record(v).unwrap());
            OpResult { latency_histogram: crate::latency::encode(&h), ..result(Op::Get, values.count() as u64, 1.0, 0) }
        };
        let report = crate::report::sample_report;
        // 900 fast operations on one rank, 100 slow ones on the other: the median is a fast one.
        let merged =
            merge(vec![report(vec![with_latencies(1..901)]), report(vec![with_latencies(10_000..10_100)])]).unwrap();
        let r = &merged.results[0];
        assert_eq!((r.ops, r.p50_us), (1000, 500)); // the worst rank's median would be 10,049
        assert!(r.p99_us >= 10_000 && r.max_us >= 10_099);
    }
}
