//! `isthmus bench compare`: several result files side by side, every figure next to the raw
//! POSIX baseline measured in the same run ("% of POSIX"), as a table, CSV and an SVG chart.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use crate::report::{Report, figure, phase_name, ratio_to_posix};
use crate::units::format_size;

/// One compared figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub file: String,
    pub phase: String,
    pub size: String,
    /// Workers, ranks or streams; `None` where the result does not say (COSBench stages).
    pub workers: Option<usize>,
    pub kind: String,
    pub figure: f64,
    pub unit: &'static str,
    pub percent_of_posix: Option<f64>,
}

impl Row {
    fn workers_label(&self) -> String {
        self.workers.map_or_else(|| "-".to_string(), |w| w.to_string())
    }
}

/// Every result of every file — phases, streams and COSBench stages — with its ratio to the
/// POSIX result of its own file; POSIX rows themselves only when `with_posix`.
pub fn rows(files: &[(String, Report)], with_posix: bool) -> Vec<Row> {
    let keep = |kind: &str| with_posix || kind != "posix";
    let mut rows = Vec::new();
    for (file, report) in files {
        for r in report.results.iter().filter(|r| keep(&r.kind)) {
            rows.push(Row {
                file: file.clone(),
                phase: phase_name(r),
                size: format_size(r.object_size),
                workers: Some(r.workers),
                kind: r.kind.clone(),
                figure: figure(r),
                unit: if r.op == crate::Op::List { "keys/s" } else { "ops/s" },
                percent_of_posix: ratio_to_posix(&report.results, r).map(|x| x * 100.0),
            });
        }
        for r in report.streams.iter().filter(|r| keep(&r.kind)) {
            let posix = report.streams.iter().find(|b| b.kind == "posix" && b.same_phase(r));
            rows.push(Row {
                file: file.clone(),
                phase: format!("streams {}", if r.op == crate::Op::Put { "write" } else { "read" }),
                size: format_size(r.object_size),
                workers: Some(r.streams),
                kind: r.kind.clone(),
                figure: r.aggregate_mib_s,
                unit: "MiB/s",
                percent_of_posix: posix.and_then(|b| percent(r.aggregate_mib_s, b.aggregate_mib_s)),
            });
        }
        for r in report.cosbench.iter().filter(|r| keep(&r.kind)) {
            // Bandwidth where bytes moved, operations per second otherwise (list, delete).
            let measure = |s: &crate::cosbench::StageReport| {
                if r.byte_count > 0 { s.bandwidth_mb_s } else { s.throughput_ops }
            };
            let posix = report.cosbench.iter().find(|b| b.kind == "posix" && (&b.stage, &b.op) == (&r.stage, &r.op));
            rows.push(Row {
                file: file.clone(),
                phase: format!("cosbench {} {}", r.stage, r.op),
                size: "-".to_string(),
                workers: None,
                kind: r.kind.clone(),
                figure: measure(r),
                unit: if r.byte_count > 0 { "MB/s" } else { "ops/s" },
                percent_of_posix: posix.and_then(|b| percent(measure(r), measure(b))),
            });
        }
    }
    rows
}

fn percent(figure: f64, posix: f64) -> Option<f64> {
    (posix > 0.0).then(|| figure / posix * 100.0)
}

pub fn table(rows: &[Row]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["file", "phase", "size", "workers", "target", "figure", "% of POSIX"]);
    for r in rows {
        t.add_row([
            r.file.clone(),
            r.phase.clone(),
            r.size.clone(),
            r.workers_label(),
            r.kind.clone(),
            format!("{:.0} {}", r.figure, r.unit),
            r.percent_of_posix.map_or("-".into(), |p| format!("{p:.1} %")),
        ]);
    }
    t.to_string()
}

pub fn csv(rows: &[Row]) -> String {
    let quote =
        |s: &str| if s.contains([',', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() };
    let mut out = String::from("file,phase,size,workers,target,figure,unit,percent_of_posix\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{:.3},{},{}\n",
            quote(&r.file),
            quote(&r.phase),
            r.size,
            r.workers_label(),
            r.kind,
            r.figure,
            r.unit,
            r.percent_of_posix.map_or(String::new(), |p| format!("{p:.2}"))
        ));
    }
    out
}

/// A horizontal bar per figure: its percentage of the POSIX baseline.
pub fn write_svg(rows: &[Row], path: &std::path::Path) -> Result<(), String> {
    let bars: Vec<(String, f64)> = rows
        .iter()
        .filter_map(|r| {
            r.percent_of_posix
                .map(|p| (format!("{} {} {} {}w {}", r.file, r.phase, r.size, r.workers_label(), r.kind), p))
        })
        .collect();
    crate::bars::write_svg(path, "% of the POSIX baseline of the same run", "% of POSIX", &bars, Some(100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Op, OpResult};

    fn result(kind: &str, op: Op, ops_per_s: f64) -> OpResult {
        crate::workload::sample_result(kind, "ops", op, ops_per_s, 0.0, 0.0)
    }

    use crate::report::sample_report as report;

    #[test]
    fn each_file_is_compared_with_its_own_baseline() {
        let files = vec![
            ("a.json".to_string(), report(vec![result("posix", Op::Put, 1000.0), result("s3", Op::Put, 500.0)])),
            (
                "b.json".to_string(),
                report(vec![
                    result("posix", Op::Put, 2000.0),
                    result("s3", Op::Put, 500.0),
                    result("embedded", Op::Get, 1.0),
                ]),
            ),
        ];
        let rows = rows(&files, false);
        assert_eq!(rows.iter().map(|r| r.percent_of_posix).collect::<Vec<_>>(), [Some(50.0), Some(25.0), None]);
        let csv = csv(&rows);
        assert!(csv.starts_with("file,phase,size,workers,target,figure,unit,percent_of_posix\n"));
        assert!(csv.contains("a.json,put,4KiB,4,s3,500.000,ops/s,50.00\n"));
        assert!(table(&rows).contains("25.0 %"));
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("c.svg");
        write_svg(&rows, &svg).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    }

    #[test]
    fn streams_and_cosbench_stages_have_their_posix_ratio() {
        let stream = |kind: &str, aggregate: f64| crate::StreamsResult {
            kind: kind.into(),
            op: Op::Get,
            streams: 2,
            object_size: 1 << 20,
            errors: 0,
            mean_mib_s: 1.0,
            sigma_mib_s: 0.0,
            p99_seconds: 1.0,
            max_seconds: 1.0,
            aggregate_mib_s: aggregate,
            stream_seconds: vec![],
            wall_seconds: 1.0,
        };
        let stage = |kind: &str, op: &str, bytes: u64, bandwidth: f64, throughput: f64| crate::cosbench::StageReport {
            kind: kind.into(),
            stage: "main".into(),
            op: op.into(),
            op_count: 10,
            failed_count: 0,
            byte_count: bytes,
            avg_res_time_ms: 1.0,
            avg_proc_time_ms: 1.0,
            throughput_ops: throughput,
            bandwidth_mb_s: bandwidth,
            succ_ratio: 1.0,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p95_ms: 1.0,
            p99_ms: 1.0,
            latency_histogram: None,
        };
        let mut run = report(vec![]);
        run.streams = vec![stream("posix", 400.0), stream("s3", 100.0)];
        run.cosbench = vec![
            stage("posix", "read", 100, 50.0, 1.0),
            stage("embedded", "read", 100, 40.0, 1.0),
            stage("posix", "delete", 0, 0.0, 200.0),
            stage("embedded", "delete", 0, 0.0, 50.0),
        ];
        let rows = rows(&[("r.json".to_string(), run.clone())], false);
        let got: Vec<(&str, &str, Option<f64>)> =
            rows.iter().map(|r| (r.phase.as_str(), r.unit, r.percent_of_posix)).collect();
        assert_eq!(
            got,
            [
                ("streams read", "MiB/s", Some(25.0)),
                ("cosbench main read", "MB/s", Some(80.0)),
                ("cosbench main delete", "ops/s", Some(25.0)),
            ]
        );
        assert!(csv(&rows).contains("r.json,cosbench main read,-,-,embedded,40.000,MB/s,80.00\n"));
        // A run's own CSV keeps the POSIX rows, each at 100 %.
        let all = super::rows(&[("r.json".to_string(), run)], true);
        assert_eq!(all.len(), 6);
        assert!(all.iter().filter(|r| r.kind == "posix").all(|r| r.percent_of_posix == Some(100.0)));
    }
}
