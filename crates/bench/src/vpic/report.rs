//! What the particle workloads report: the table (client time breakdown, bandwidth over the
//! exposed I/O, % of POSIX, close overhead) and the gain of session over strong consistency on
//! each array target (PDC-XF's "session halves transfer time").

use crate::vpic::VpicResult;

/// Strong against session on one array target: each figure is strong's time over session's
/// (2.0: session takes half the time).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConsistencyGain {
    pub workload: String,
    /// The target without its mode (`arrays in-process /path`).
    pub target: String,
    /// The arrays' layout (`chunks`, `shards`).
    pub layout: String,
    /// On time in the calls that start transfers.
    pub transfer_speedup: f64,
    /// On the exposed I/O time (transfer + wait + flush): the paper's transfer time.
    pub exposed_speedup: f64,
    /// On the whole run.
    pub total_speedup: f64,
}

/// The target's label without the ` (mode[, layout])` suffix.
fn label(target: &str) -> &str {
    target.rsplit_once(" (").map_or(target, |(label, _)| label)
}

/// Whether `a` and `b` are the same workload on the same arrays (target and layout).
fn same_arrays(a: &VpicResult, b: &VpicResult) -> bool {
    a.workload == b.workload && a.layout == b.layout && label(&a.target) == label(&b.target)
}

/// Every (workload, target, layout) measured in both modes.
pub fn consistency_gains(results: &[VpicResult]) -> Vec<ConsistencyGain> {
    let ratio = |strong: f64, session: f64| strong / session.max(1e-9);
    results
        .iter()
        .filter(|r| r.mode == "session")
        .filter_map(|session| {
            let strong = results.iter().find(|s| s.mode == "strong" && same_arrays(s, session))?;
            Some(ConsistencyGain {
                workload: session.workload.clone(),
                target: label(&session.target).to_string(),
                layout: session.layout.clone(),
                transfer_speedup: ratio(strong.transfer_s, session.transfer_s),
                exposed_speedup: ratio(strong.exposed_s(), session.exposed_s()),
                total_speedup: ratio(strong.total_s, session.total_s),
            })
        })
        .collect()
}

/// The results as a table, and the session gains below it.
pub fn table(results: &[VpicResult]) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED).set_header([
        "workload",
        "target",
        "total s",
        "compute s",
        "transfer s",
        "wait s",
        "flush s",
        "close %",
        "MiB/s (exposed I/O)",
        "% of POSIX",
        "hidden s",
    ]);
    for r in results {
        let posix = results.iter().find(|p| p.workload == r.workload && p.mode == "posix");
        let strong = (r.mode != "strong" && r.mode != "posix")
            .then(|| results.iter().find(|s| s.mode == "strong" && same_arrays(s, r)))
            .flatten();
        table.add_row([
            r.workload.clone(),
            r.target.clone(),
            format!("{:.3}", r.total_s),
            format!("{:.3}", r.compute_s),
            format!("{:.3}", r.transfer_s),
            format!("{:.3}", r.wait_s),
            format!("{:.3}", r.flush_s),
            format!("{:.1}", 100.0 * r.close_overhead),
            format!("{:.1}", r.bandwidth_mib_s()),
            posix.map_or("-".into(), |p| format!("{:.0} %", 100.0 * r.bandwidth_mib_s() / p.bandwidth_mib_s())),
            strong.map_or("-".into(), |s| format!("{:.3}", (s.exposed_s() - r.exposed_s()).max(0.0))),
        ]);
    }
    let mut out = table.to_string();
    for gain in consistency_gains(results) {
        out.push_str(&format!(
            "\n{} on {} ({}): session over strong {:.2}x on transfer (start calls), {:.2}x on exposed I/O \
             (transfer + wait + flush), {:.2}x on the whole run",
            gain.workload, gain.target, gain.layout, gain.transfer_speedup, gain.exposed_speedup, gain.total_speedup
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(target: &str, mode: &str, transfer_s: f64, flush_s: f64, total_s: f64) -> VpicResult {
        VpicResult {
            workload: "vpic-io".into(),
            target: target.into(),
            mode: mode.into(),
            layout: if mode == "posix" { "file" } else { "chunks" }.into(),
            bytes: 1 << 20,
            total_s,
            compute_s: 0.0,
            transfer_s,
            wait_s: 0.0,
            flush_s,
            close_overhead: flush_s / total_s,
            ranks: Vec::new(),
            cache: None,
        }
    }

    #[test]
    fn gains_pair_strong_and_session_of_the_same_target() {
        let results = [
            result("posix /p", "posix", 1.0, 0.0, 2.0),
            result("arrays a (strong)", "strong", 2.0, 0.0, 4.0),
            result("arrays a (session)", "session", 0.5, 0.5, 2.0),
            result("arrays b (strong)", "strong", 9.0, 0.0, 9.0),
            // The same arrays in the shards layout pair with nothing: not with a's chunks.
            VpicResult { layout: "shards".into(), ..result("arrays a (session, shards)", "session", 0.1, 0.1, 1.0) },
        ];
        let gains = consistency_gains(&results);
        assert_eq!(gains.len(), 1, "{gains:?}");
        let gain = &gains[0];
        assert_eq!(gain.target, "arrays a");
        assert!((gain.transfer_speedup - 4.0).abs() < 1e-9);
        assert!((gain.exposed_speedup - 2.0).abs() < 1e-9);
        assert!((gain.total_speedup - 2.0).abs() < 1e-9);
        let text = table(&results);
        assert!(text.contains("4.00x on transfer"), "{text}");
    }
}
