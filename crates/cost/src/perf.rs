//! Price and performance together: the deployment's monthly cost per TB stored, per GiB/s and
//! per thousand metadata operations per second, for each target measured by `isthmus bench`.

use serde::{Deserialize, Serialize};

use crate::model::{CostModel, Scenario};

/// The parts of an `isthmus bench` JSON report this needs.
#[derive(Debug, Deserialize)]
pub struct BenchReport {
    pub results: Vec<BenchResult>,
}

#[derive(Debug, Deserialize)]
pub struct BenchResult {
    pub kind: String,
    pub op: String,
    pub object_size: u64,
    pub ops_per_s: f64,
    pub mib_per_s: f64,
}

/// What one target's measured figures cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerfCost {
    pub target: String,
    /// Best bandwidth measured (PUT or GET), per node.
    pub gib_per_s: f64,
    /// Best small-object (<= 64 KiB) or metadata operation rate, per node, in thousands.
    pub kops_per_s: f64,
    pub onprem_usd_per_gib_s_month: Option<f64>,
    pub onprem_usd_per_kops_month: Option<f64>,
    pub cloud_usd_per_gib_s_month: Option<f64>,
}

/// Figures measured on one node are taken per node: each node runs a gateway over the shared
/// file system, as in the scale-out layout, so the deployment delivers `nodes` times as much.
pub fn perf_costs(scenario: &Scenario, report: &BenchReport, horizon_months: u32, model: CostModel) -> Vec<PerfCost> {
    let mut kinds: Vec<&str> = report.results.iter().map(|r| r.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let nodes = f64::from(scenario.onprem.nodes.max(1));
    let onprem_monthly = scenario.onprem.amortised_monthly_usd(horizon_months, model);
    let cloud_monthly = scenario.cloud.monthly(model);
    let per = |cost: f64, amount: f64| (amount > 0.0).then(|| cost / amount);
    kinds
        .into_iter()
        .map(|kind| {
            let of_kind = || report.results.iter().filter(move |r| r.kind == kind);
            let gib_per_s =
                of_kind().filter(|r| r.op == "put" || r.op == "get").map(|r| r.mib_per_s / 1024.0).fold(0.0, f64::max);
            let kops_per_s = of_kind()
                .filter(|r| r.op != "list" && (r.object_size <= 64 * 1024 || r.op == "head" || r.op == "delete"))
                .map(|r| r.ops_per_s / 1000.0)
                .fold(0.0, f64::max);
            PerfCost {
                target: kind.to_string(),
                gib_per_s,
                kops_per_s,
                onprem_usd_per_gib_s_month: per(onprem_monthly, gib_per_s * nodes),
                onprem_usd_per_kops_month: per(onprem_monthly, kops_per_s * nodes),
                cloud_usd_per_gib_s_month: per(cloud_monthly, gib_per_s * nodes),
            }
        })
        .collect()
}
