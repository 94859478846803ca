//! Results: the terminal table with each figure's ratio to the raw POSIX baseline of the same
//! run, and the JSON file kept for later comparison.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};

use crate::units::format_size;
use crate::workload::{Op, OpResult};

/// A whole benchmark run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub host: String,
    pub durability: String,
    pub results: Vec<OpResult>,
    /// Results of the streams workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<crate::streams::StreamsResult>,
    /// Results of a COSBench workload file, per target, stage and operation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cosbench: Vec<crate::cosbench::StageReport>,
    /// io500: each target's IO500 score, computed the official way (`io500`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io500: Vec<crate::io500::Io500Score>,
}

/// A report holding just these results, for tests.
#[cfg(test)]
pub(crate) fn sample_report(results: Vec<OpResult>) -> Report {
    Report {
        started_unix: 0,
        host: "h".into(),
        durability: "strict".into(),
        results,
        streams: vec![],
        cosbench: vec![],
        io500: vec![],
    }
}

/// The figure a workload is judged by: keys/s for listings, ops/s otherwise (for a fixed
/// object size, the ops/s ratio is also the bandwidth ratio).
pub fn figure(r: &OpResult) -> f64 {
    if r.op == Op::List { r.keys_per_s } else { r.ops_per_s }
}

/// `r` as a fraction of the POSIX result for the same operation, size and workers.
pub fn ratio_to_posix(results: &[OpResult], r: &OpResult) -> Option<f64> {
    let base = results.iter().find(|b| {
        b.kind == "posix"
            && b.workload == r.workload
            && b.op == r.op
            && b.object_size == r.object_size
            && b.workers == r.workers
    })?;
    let base = figure(base);
    (base > 0.0).then(|| figure(r) / base)
}

/// "put", or for mdtest "mdtest-easy create" (create, stat, read, delete; "dir create", "dir stat",
/// "dir rename", "dir remove" for its directory phases).
pub fn phase_name(r: &OpResult) -> String {
    if r.workload == "ops" {
        return r.op.to_string();
    }
    let phase = match r.op {
        // IO500's find: files looked at per second, matches in `keys`.
        Op::Find => return "find".into(),
        Op::Put if r.workload.starts_with("ior") => "write",
        Op::Put if r.workload == "md-workbench-precreate" => return r.workload.clone(),
        Op::Put => "create",
        Op::Head => "stat",
        Op::Get => "read",
        Op::Delete => "delete",
        Op::List => "list",
        Op::Mkdir => "dir create",
        Op::StatDir => "dir stat",
        // S3 has no rename: object targets copy the folder object and delete the old one.
        Op::Rename if r.kind != "posix" => "dir rename (copy+delete)",
        Op::Rename => "dir rename",
        Op::Rmdir => "dir remove",
    };
    format!("{} {phase}", r.workload)
}

/// mdtest's summary of the phases run over iterations, as Table 5 of Gadban & Kunkel (2021)
/// gives it: max, min, mean and standard deviation of the rate, mean time per operation, and
/// the mean rate per node; empty when no result has iterations.
pub fn iterations_table(results: &[OpResult]) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header([
        "phase",
        "target",
        "iterations",
        "max ops/s",
        "min ops/s",
        "mean ops/s",
        "std dev",
        "mean ms/op",
        "nodes",
        "mean ops/s per node",
    ]);
    let mut any = false;
    for r in results {
        let Some(s) = &r.iterations else { continue };
        any = true;
        table.add_row([
            phase_name(r),
            r.kind.clone(),
            s.rates.len().to_string(),
            format!("{:.0}", s.max_ops_per_s),
            format!("{:.0}", s.min_ops_per_s),
            format!("{:.0}", s.mean_ops_per_s),
            format!("{:.0}", s.stddev_ops_per_s),
            format!("{:.3}", s.mean_ms),
            s.nodes.to_string(),
            format!("{:.0}", s.mean_ops_per_s_per_node),
        ]);
    }
    if any { table.to_string() } else { String::new() }
}

impl Report {
    pub fn table(&self) -> String {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        table.set_header([
            "op", "size", "workers", "target", "ops/s", "MiB/s", "keys/s", "p50 ms", "p99 ms", "errors", "vs POSIX",
        ]);
        for r in &self.results {
            let ratio =
                ratio_to_posix(&self.results, r).map_or_else(|| "-".to_string(), |x| format!("{:.1} %", x * 100.0));
            table.add_row([
                phase_name(r),
                if matches!(r.op, Op::List | Op::Find) || r.op.is_directory_op() {
                    "-".into()
                } else {
                    format_size(r.object_size)
                },
                r.workers.to_string(),
                r.kind.clone(),
                format!("{:.0}", r.ops_per_s),
                if r.bytes > 0 { format!("{:.1}", r.mib_per_s) } else { "-".into() },
                if r.op == Op::List { format!("{:.0}", r.keys_per_s) } else { "-".into() },
                format!("{:.3}", r.p50_us as f64 / 1000.0),
                format!("{:.3}", r.p99_us as f64 / 1000.0),
                r.errors.to_string(),
                ratio,
            ]);
        }
        let mut out = if self.results.is_empty() { String::new() } else { table.to_string() };
        let iterations = iterations_table(&self.results);
        if !iterations.is_empty() {
            out.push_str("\nover the iterations (mdtest's summary, Table 5's form):\n");
            out.push_str(&iterations);
        }
        if !self.streams.is_empty() {
            let mut streams = Table::new();
            streams.load_preset(UTF8_FULL_CONDENSED);
            streams.set_header([
                "phase",
                "streams",
                "size",
                "target",
                "mean MiB/s per stream",
                "sigma",
                "p99 s",
                "max s",
                "aggregate MiB/s",
                "errors",
            ]);
            for r in &self.streams {
                streams.add_row([
                    if r.op == Op::Put { "write".to_string() } else { "read".to_string() },
                    r.streams.to_string(),
                    format_size(r.object_size),
                    r.kind.clone(),
                    format!("{:.1}", r.mean_mib_s),
                    format!("{:.1}", r.sigma_mib_s),
                    format!("{:.3}", r.p99_seconds),
                    format!("{:.3}", r.max_seconds),
                    format!("{:.1}", r.aggregate_mib_s),
                    r.errors.to_string(),
                ]);
            }
            out.push_str(&streams.to_string());
        }
        if !self.cosbench.is_empty() {
            let mut cos = Table::new();
            cos.load_preset(UTF8_FULL_CONDENSED);
            cos.set_header([
                "target",
                "stage",
                "op",
                "Op-Count",
                "Byte-Count",
                "Avg-ResTime ms",
                "Avg-ProcTime ms",
                "Throughput op/s",
                "Bandwidth MB/s",
                "Succ-Ratio",
                "p50 ms",
                "p90 ms",
                "95%-ResTime ms",
                "p99 ms",
            ]);
            for r in &self.cosbench {
                cos.add_row([
                    r.kind.clone(),
                    r.stage.clone(),
                    r.op.clone(),
                    r.op_count.to_string(),
                    r.byte_count.to_string(),
                    format!("{:.3}", r.avg_res_time_ms),
                    format!("{:.3}", r.avg_proc_time_ms),
                    format!("{:.1}", r.throughput_ops),
                    format!("{:.2}", r.bandwidth_mb_s),
                    format!("{:.2} %", r.succ_ratio * 100.0),
                    format!("{:.3}", r.p50_ms),
                    format!("{:.3}", r.p90_ms),
                    format!("{:.3}", r.p95_ms),
                    format!("{:.3}", r.p99_ms),
                ]);
            }
            out.push_str(&cos.to_string());
        }
        for r in self.results.iter().filter(|r| r.errors > 0) {
            out.push_str(&format!(
                "\n{} {} on {}: first error: {}",
                r.op,
                format_size(r.object_size),
                r.kind,
                r.first_error.as_deref().unwrap_or("?")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(kind: &str, op: Op, ops_per_s: f64, keys_per_s: f64) -> OpResult {
        crate::workload::sample_result(kind, "ops", op, ops_per_s, 0.0, keys_per_s)
    }

    #[test]
    fn ratios_compare_like_with_like() {
        let results = vec![
            result("posix", Op::Put, 1000.0, 0.0),
            result("s3", Op::Put, 600.0, 0.0),
            result("posix", Op::List, 5.0, 100_000.0),
            result("s3", Op::List, 50.0, 50_000.0),
            result("s3", Op::Get, 10.0, 0.0),
        ];
        assert_eq!(ratio_to_posix(&results, &results[1]), Some(0.6));
        assert_eq!(ratio_to_posix(&results, &results[3]), Some(0.5));
        assert_eq!(ratio_to_posix(&results, &results[4]), None);
        let report = Report {
            started_unix: 0,
            host: "h".into(),
            durability: "strict".into(),
            results,
            streams: Vec::new(),
            cosbench: Vec::new(),
            io500: Vec::new(),
        };
        let table = report.table();
        assert!(table.contains("60.0 %") && table.contains("50.0 %"), "{table}");
    }
}
