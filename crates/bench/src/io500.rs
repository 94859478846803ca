//! The IO500 score computed the official way, from the phases of one target: the bandwidth
//! score is the geometric mean of the four IOR phases in GiB/s, the metadata score the
//! geometric mean of the seven mdtest phases and find in kIOPS, the total the square root of
//! their product. The optional ior-rnd4K phases enter an extended score only, as the IO500's
//! `IO500_PHASE_FLAG_OPTIONAL` phases do. Also: each IO500 phase as a percentage of POSIX, the
//! axes of the radar chart (Figure 10 of Gadban & Kunkel 2021).

use serde::{Deserialize, Serialize};

use crate::workload::{Op, OpResult};

/// The IO500 phases in the bandwidth score (GiB/s).
pub const BANDWIDTH_PHASES: [&str; 4] = ["ior-easy-write", "ior-easy-read", "ior-hard-write", "ior-hard-read"];
/// The IO500 phases in the metadata score (kIOPS). mdtest-easy has no read phase in the IO500.
pub const METADATA_PHASES: [&str; 8] = [
    "mdtest-easy-write",
    "mdtest-easy-stat",
    "mdtest-easy-delete",
    "mdtest-hard-write",
    "mdtest-hard-stat",
    "mdtest-hard-read",
    "mdtest-hard-delete",
    "find",
];
/// Optional bandwidth phases, in the extended score only.
pub const OPTIONAL_BANDWIDTH_PHASES: [&str; 2] = ["ior-rnd4K-write", "ior-rnd4K-read"];

/// One target's IO500 score. Not an official IO500 result (no validated submission, one node,
/// short phases), but computed as the IO500 computes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Io500Score {
    pub kind: String,
    /// Geometric mean of `BANDWIDTH_PHASES`, GiB/s.
    pub bandwidth_gib_s: f64,
    /// Geometric mean of `METADATA_PHASES`, kIOPS.
    pub metadata_kiops: f64,
    /// sqrt(bandwidth_gib_s x metadata_kiops).
    pub score: f64,
    /// Geometric mean of `BANDWIDTH_PHASES` and `OPTIONAL_BANDWIDTH_PHASES` that ran, GiB/s.
    #[serde(default)]
    pub extended_bandwidth_gib_s: f64,
    /// sqrt(extended_bandwidth_gib_s x metadata_kiops).
    #[serde(default)]
    pub extended_score: f64,
    /// Scored phases that did not run: the means are over those that did.
    #[serde(default)]
    pub missing: Vec<String>,
}

/// The IO500 name of a result's phase (`ior-easy-write`, `mdtest-hard-stat`, `find`), or
/// `None` for phases the IO500 does not have (mdtest-easy read, directory phases).
pub fn phase_of(r: &OpResult) -> Option<String> {
    let action = match (r.workload.as_str(), r.op) {
        ("find", Op::Find) => return Some("find".into()),
        (w, Op::Put) if w.starts_with("ior-") => "write",
        (w, Op::Get) if w.starts_with("ior-") => "read",
        ("mdtest-easy" | "mdtest-hard", Op::Put) => "write",
        ("mdtest-easy" | "mdtest-hard", Op::Head) => "stat",
        ("mdtest-hard", Op::Get) => "read",
        ("mdtest-easy" | "mdtest-hard", Op::Delete) => "delete",
        _ => return None,
    };
    Some(format!("{}-{action}", r.workload))
}

/// The figure the IO500 scores a phase by: GiB/s for IOR, kIOPS for mdtest and find.
pub fn phase_figure(r: &OpResult) -> f64 {
    if r.workload.starts_with("ior-") { r.mib_per_s / 1024.0 } else { r.ops_per_s / 1000.0 }
}

fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() || values.iter().any(|v| *v <= 0.0) {
        return 0.0;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// Scores every target that ran IO500 phases.
pub fn io500_scores(results: &[OpResult]) -> Vec<Io500Score> {
    let mut kinds: Vec<&str> = results.iter().filter(|r| phase_of(r).is_some()).map(|r| r.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            // A phase that only failed (find under bucket-per-file) counts as missing, not 0.
            let figure = |phase: &str| {
                results
                    .iter()
                    .find(|r| r.kind == kind && phase_of(r).as_deref() == Some(phase))
                    .filter(|r| r.ops > 0 || r.errors == 0)
                    .map(phase_figure)
            };
            let mut missing = Vec::new();
            let mut collect = |phases: &[&str], required: bool| -> Vec<f64> {
                phases
                    .iter()
                    .filter_map(|p| {
                        let f = figure(p);
                        if f.is_none() && required {
                            missing.push(p.to_string());
                        }
                        f
                    })
                    .collect()
            };
            let bw = collect(&BANDWIDTH_PHASES, true);
            let md = collect(&METADATA_PHASES, true);
            let optional = collect(&OPTIONAL_BANDWIDTH_PHASES, false);
            let (b, m) = (geomean(&bw), geomean(&md));
            let extended_b = geomean(&[bw, optional].concat());
            Io500Score {
                kind: kind.to_string(),
                bandwidth_gib_s: b,
                metadata_kiops: m,
                score: (b * m).sqrt(),
                extended_bandwidth_gib_s: extended_b,
                extended_score: (extended_b * m).sqrt(),
                missing,
            }
        })
        .collect()
}

/// The IO500 phases that ran, in the IO500's order (bandwidth, optional, metadata), and for
/// each target but POSIX its figure as a percentage of POSIX (0 where POSIX measured nothing):
/// the axes and series of the radar chart.
pub fn percent_of_posix(results: &[OpResult]) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let order: Vec<&str> =
        BANDWIDTH_PHASES.iter().chain(&OPTIONAL_BANDWIDTH_PHASES).chain(&METADATA_PHASES).copied().collect();
    let axes: Vec<String> = order
        .into_iter()
        .filter(|p| results.iter().any(|r| r.kind == "posix" && phase_of(r).as_deref() == Some(*p)))
        .map(str::to_string)
        .collect();
    let mut kinds: Vec<&str> = Vec::new();
    for r in results.iter().filter(|r| r.kind != "posix" && phase_of(r).is_some()) {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
    }
    let series = kinds
        .into_iter()
        .map(|kind| {
            let values = axes
                .iter()
                .map(|axis| {
                    let figure = |kind: &str| {
                        results.iter().find(|r| r.kind == kind && phase_of(r).as_ref() == Some(axis)).map(phase_figure)
                    };
                    match (figure(kind), figure("posix")) {
                        (Some(x), Some(posix)) if posix > 0.0 => x / posix * 100.0,
                        _ => 0.0,
                    }
                })
                .collect();
            (door_name(kind).to_string(), values)
        })
        .collect();
    (axes, series)
}

/// What a target is called in the IO500 phase table and the radar chart, after the paper's
/// systems (S3 gateway, S3Embedded, S3Remote).
pub fn door_name(kind: &str) -> &str {
    match kind {
        "posix" => "POSIX",
        "s3" => "HTTP gateway",
        "embedded" => "in-process",
        "local" => "local socket",
        other => other,
    }
}

/// The table "IO500 phases: POSIX / HTTP gateway / in-process / local socket, % of POSIX"
/// (the form of Table 3 in Gadban & Kunkel 2021): one row per IO500 phase that ran, POSIX's
/// figure, then each target's figure and its percentage of POSIX; the scores last.
pub fn phases_table(results: &[OpResult]) -> String {
    let (axes, _) = percent_of_posix(results);
    let mut kinds: Vec<&str> = vec!["posix"];
    for r in results.iter().filter(|r| phase_of(r).is_some()) {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header(std::iter::once("IO500 phase".to_string()).chain(kinds.iter().map(|k| door_name(k).to_string())));
    let figure = |kind: &str, phase: &str| {
        results.iter().find(|r| r.kind == kind && phase_of(r).as_deref() == Some(phase)).map(phase_figure)
    };
    for axis in &axes {
        let unit = if axis.starts_with("ior-") { "GiB/s" } else { "kIOPS" };
        let posix = figure("posix", axis).unwrap_or(0.0);
        let cells = kinds.iter().map(|kind| match figure(kind, axis) {
            None => "-".to_string(),
            Some(x) if *kind == "posix" => format!("{x:.3} {unit}"),
            Some(x) if posix > 0.0 => format!("{x:.3} ({:.1} %)", x / posix * 100.0),
            Some(x) => format!("{x:.3}"),
        });
        table.add_row(std::iter::once(axis.clone()).chain(cells));
    }
    let scores = io500_scores(results);
    let posix_score = scores.iter().find(|s| s.kind == "posix").map_or(0.0, |s| s.score);
    let score_cells = kinds.iter().map(|kind| match scores.iter().find(|s| s.kind == *kind) {
        None => "-".to_string(),
        Some(s) if *kind == "posix" || posix_score <= 0.0 => format!("{:.3}", s.score),
        Some(s) => format!("{:.3} ({:.1} %)", s.score, s.score / posix_score * 100.0),
    });
    table.add_row(std::iter::once("score".to_string()).chain(score_cells));
    table.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::sample_result;

    fn r(kind: &str, workload: &str, op: Op, mib: f64, ops: f64) -> OpResult {
        sample_result(kind, workload, op, ops, mib, 0.0)
    }

    /// Every scored phase of one target, with bandwidths `bw` (MiB/s) and rates `md` (ops/s).
    fn all_phases(kind: &str, bw: [f64; 4], md: [f64; 8]) -> Vec<OpResult> {
        let mut v = vec![
            r(kind, "ior-easy", Op::Put, bw[0], 1.0),
            r(kind, "ior-easy", Op::Get, bw[1], 1.0),
            r(kind, "ior-hard", Op::Put, bw[2], 1.0),
            r(kind, "ior-hard", Op::Get, bw[3], 1.0),
        ];
        let md_ops = [
            ("mdtest-easy", Op::Put),
            ("mdtest-easy", Op::Head),
            ("mdtest-easy", Op::Delete),
            ("mdtest-hard", Op::Put),
            ("mdtest-hard", Op::Head),
            ("mdtest-hard", Op::Get),
            ("mdtest-hard", Op::Delete),
            ("find", Op::Find),
        ];
        v.extend(md_ops.iter().zip(md).map(|(&(w, op), ops)| r(kind, w, op, 0.0, ops)));
        v
    }

    #[test]
    fn score_is_the_root_of_the_two_official_geometric_means() {
        let mut results = all_phases(
            "posix",
            [1024.0, 4096.0, 1024.0, 4096.0],
            [1000.0, 16000.0, 1000.0, 16000.0, 1000.0, 16000.0, 1000.0, 16000.0],
        );
        // Phases outside the score change nothing: mdtest-easy read, a directory phase, and
        // ior-rnd4K (extended score only).
        results.push(r("posix", "mdtest-easy", Op::Get, 0.0, 1.0));
        results.push(r("posix", "mdtest-easy", Op::Mkdir, 0.0, 1.0));
        results.push(r("posix", "ior-rnd4K", Op::Put, 16.0 * 1024.0, 1.0));
        results.push(r("posix", "ior-rnd4K", Op::Get, 16.0 * 1024.0, 1.0));
        let s = &io500_scores(&results)[0];
        assert!((s.bandwidth_gib_s - 2.0).abs() < 1e-9); // geomean(1, 4, 1, 4)
        assert!((s.metadata_kiops - 4.0).abs() < 1e-9); // geomean(1, 16, ...)
        assert!((s.score - 8f64.sqrt()).abs() < 1e-9);
        assert!((s.extended_bandwidth_gib_s - 4.0).abs() < 1e-9); // geomean(1, 4, 1, 4, 16, 16)
        assert!(s.missing.is_empty());
    }

    #[test]
    fn missing_phases_are_named() {
        let results: Vec<OpResult> =
            all_phases("s3", [1.0; 4], [1.0; 8]).into_iter().filter(|r| r.workload != "find").collect();
        assert_eq!(io500_scores(&results)[0].missing, ["find"]);
        // A phase that ran and only failed is missing too, and the score is over the others.
        let mut results = all_phases("s3", [1024.0; 4], [1000.0; 8]);
        let find = results.iter_mut().find(|r| r.workload == "find").unwrap();
        (find.ops, find.errors, find.ops_per_s) = (0, 3, 0.0);
        let s = &io500_scores(&results)[0];
        assert_eq!((s.missing.as_slice(), s.metadata_kiops), (&["find".to_string()][..], 1.0));
    }

    #[test]
    fn radar_axes_are_the_phases_posix_ran_and_series_their_percentages() {
        let mut results = all_phases("posix", [100.0; 4], [100.0; 8]);
        results.extend(all_phases("s3", [50.0; 4], [25.0; 8]));
        let (axes, series) = percent_of_posix(&results);
        assert_eq!(axes.len(), 12);
        assert_eq!((axes[0].as_str(), axes[11].as_str()), ("ior-easy-write", "find"));
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].0, "HTTP gateway");
        assert_eq!(series[0].1[0], 50.0);
        assert_eq!(series[0].1[11], 25.0);
        let table = phases_table(&results);
        assert!(table.contains("HTTP gateway") && table.contains("(50.0 %)") && table.contains("(25.0 %)"), "{table}");
    }
}
