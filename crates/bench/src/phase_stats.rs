//! A phase repeated over iterations (mdtest -i): the max, min, mean and standard deviation of
//! its rate, the mean time of one operation and the mean rate per node, the form of mdtest's
//! SUMMARY and of Table 5 in Gadban & Kunkel (2021); and the merge of the iterations' results.

use crate::workload::OpResult;

pub use crate::workload::PhaseStats;

impl PhaseStats {
    /// The same rates counted over `nodes` nodes, with the mean time of `result`'s histogram.
    pub fn recount(&self, result: &OpResult, nodes: usize) -> Self {
        Self::new(self.rates.clone(), mean_ms(result), nodes)
    }
}

/// The mean operation time of `result` in ms, from its histogram (0 without one).
fn mean_ms(result: &OpResult) -> f64 {
    result.latency_histogram.as_deref().and_then(crate::latency::decode).map_or(0.0, |h| h.mean() / 1000.0)
}

/// One result per phase from the results of every iteration (each run giving the same phases
/// in the same order): counts, bytes and seconds add up, the rates are the mean of the
/// iterations' (mdtest's summary "Mean"), latencies come from every operation, and `iterations`
/// holds the statistics over the iterations.
pub fn combine(runs: Vec<Vec<OpResult>>, nodes: usize) -> Vec<OpResult> {
    let Some(first) = runs.first() else { return Vec::new() };
    let n = runs.len() as f64;
    (0..first.len())
        .map(|phase| {
            let all: Vec<&OpResult> = runs.iter().map(|run| &run[phase]).collect();
            let mut merged = all[0].clone();
            for r in &all[1..] {
                merged.add_counts(r);
                merged.seconds += r.seconds;
            }
            merged.ops_per_s = all.iter().map(|r| r.ops_per_s).sum::<f64>() / n;
            merged.mib_per_s = all.iter().map(|r| r.mib_per_s).sum::<f64>() / n;
            merged.keys_per_s = all.iter().map(|r| r.keys_per_s).sum::<f64>() / n;
            if let Some(latency) = crate::latency::merge(all.iter().map(|r| r.latency_histogram.as_deref())) {
                merged.p50_us = latency.value_at_quantile(0.5);
                merged.p99_us = latency.value_at_quantile(0.99);
                merged.max_us = latency.max();
                merged.latency_histogram = crate::latency::encode(&latency);
            }
            let rates = all.iter().map(|r| r.ops_per_s).collect();
            merged.iterations = Some(PhaseStats::new(rates, mean_ms(&merged), nodes));
            merged
        })
        .collect()
}

/// The iterations' rates of several ranks' results for one phase, added up iteration by
/// iteration (the ranks ran each iteration at the same time); `None` unless all have them.
pub fn add_rates(phases: &[&OpResult]) -> Option<Vec<f64>> {
    let mut total = phases.first()?.iterations.as_ref()?.rates.clone();
    for r in &phases[1..] {
        let rates = &r.iterations.as_ref()?.rates;
        if rates.len() != total.len() {
            return None;
        }
        total.iter_mut().zip(rates).for_each(|(t, r)| *t += r);
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Op, sample_result};

    #[test]
    fn statistics_over_iterations() {
        let s = PhaseStats::new(vec![100.0, 300.0], 2.5, 2);
        assert_eq!((s.max_ops_per_s, s.min_ops_per_s, s.mean_ops_per_s), (300.0, 100.0, 200.0));
        assert!((s.stddev_ops_per_s - 100.0).abs() < 1e-9);
        assert_eq!((s.mean_ms, s.nodes, s.mean_ops_per_s_per_node), (2.5, 2, 100.0));
    }

    #[test]
    fn iterations_combine_phase_by_phase() {
        let run = |create: f64, stat: f64| {
            vec![
                OpResult { ops: 10, ..sample_result("posix", "mdtest-easy", Op::Put, create, 0.0, 0.0) },
                OpResult { ops: 10, ..sample_result("posix", "mdtest-easy", Op::Head, stat, 0.0, 0.0) },
            ]
        };
        let combined = combine(vec![run(10.0, 1000.0), run(30.0, 3000.0), run(20.0, 2000.0)], 1);
        assert_eq!(combined.len(), 2);
        assert_eq!((combined[0].op, combined[0].ops, combined[0].seconds), (Op::Put, 30, 3.0));
        assert_eq!(combined[0].ops_per_s, 20.0);
        let stats = combined[1].iterations.as_ref().unwrap();
        assert_eq!(stats.rates, [1000.0, 3000.0, 2000.0]);
        assert_eq!((stats.min_ops_per_s, stats.max_ops_per_s), (1000.0, 3000.0));
        // Two ranks' iterations add up, iteration by iteration.
        let (a, b) = (&combined[1], &combined[1]);
        assert_eq!(add_rates(&[a, b]).unwrap(), [2000.0, 6000.0, 4000.0]);
        assert!(add_rates(&[a, &run(1.0, 1.0)[1]]).is_none());
    }
}
