//! Interleaved PUT phases (`ops --ops put --interleave-bucket B`): the workers PUT to two
//! targets, two buckets of one endpoint, in alternating slices of time (A B B A, A B B A, ...),
//! all switching together, and each target's rate is reported per slice beside its row.
//!
//! Why: on a shared machine the rate of one phase moves by a third from one five-second run to
//! the next (other tenants, the host's caches), more than the effect of a bucket's setting (a
//! notification rule) that a comparison is after. Slices a fraction of a second long, in the
//! A B B A order, put both buckets under the same conditions; the ratio of the medians of the
//! paired slices is then the setting's effect. The work a slice leaves behind in the gateway
//! (events still to deliver) spills into the next slice, of either bucket, for a few
//! milliseconds: slices of 100 ms or longer keep that small.

use std::time::{Duration, Instant};

use crate::Op;
use crate::target::{BenchError, BenchResult, Target};
use crate::workload::{OpResult, Tally, on_workers_of, payload, result_of};

/// The shortest slice: below it, a slice holds a few dozen PUTs and the switch itself counts.
pub const MIN_SLICE: Duration = Duration::from_millis(20);

/// Which of the pair slice `index` goes to: 0 (A) or 1 (B), in the order A B B A.
pub fn side_of(index: u64) -> usize {
    usize::from(matches!(index % 4, 1 | 2))
}

/// The number of slices of `slice` in `duration`: a multiple of 4 (whole A B B A groups), at
/// least one group.
pub fn slice_count(duration: Duration, slice: Duration) -> u64 {
    let whole = (duration.as_nanos() / slice.as_nanos().max(1)) as u64;
    (whole / 4).max(1) * 4
}

/// Runs 4 KiB-style PUT phases on `pair` alternately, `workers` workers each holding a
/// connection to both, for `duration` (rounded to whole A B B A groups of `slice`). Answers
/// one row per target; each row's `slice_ops_per_s` holds its rate in each of its slices.
pub fn run_put(
    pair: [&dyn Target; 2],
    size: u64,
    workers: usize,
    duration: Duration,
    slice: Duration,
) -> BenchResult<[OpResult; 2]> {
    if slice < MIN_SLICE {
        return Err(BenchError::Setup(format!("--slice must be at least {MIN_SLICE:?}")));
    }
    let workers = workers.max(1);
    let slices = slice_count(duration, slice);
    let data = payload(size);
    let start = Instant::now();
    let slice_nanos = slice.as_nanos();
    let per_worker = on_workers_of(&pair, workers, |w, connections| {
        let mut tallies = [Tally::new(), Tally::new()];
        let mut counts = vec![0u64; slices as usize];
        let mut n = 0usize;
        loop {
            let index = (start.elapsed().as_nanos() / slice_nanos) as u64;
            if index >= slices || tallies.iter().any(|t| t.errors() >= crate::workload::MAX_ERRORS) {
                break;
            }
            let side = side_of(index);
            let started = Instant::now();
            let outcome = connections[side].put(&format!("put/w{w}/o{n:08}"), &data).map(|()| (size, 0));
            if outcome.is_ok() {
                counts[index as usize] += 1;
            }
            tallies[side].record(started, outcome);
            n += 1;
        }
        (tallies, counts)
    })?;
    let mut tallies = [Tally::new(), Tally::new()];
    let mut counts = vec![0u64; slices as usize];
    for (worker_tallies, worker_counts) in per_worker {
        for (total, tally) in tallies.iter_mut().zip(worker_tallies) {
            total.merge(tally);
        }
        for (total, count) in counts.iter_mut().zip(worker_counts) {
            *total += count;
        }
    }
    // Each target had half the slices.
    let seconds = slice.as_secs_f64() * (slices / 2) as f64;
    let [a, b] = tallies;
    let mut rows = [
        result_of(pair[0], "ops", Op::Put, size, workers, a, seconds),
        result_of(pair[1], "ops", Op::Put, size, workers, b, seconds),
    ];
    for (index, count) in counts.into_iter().enumerate() {
        rows[side_of(index as u64)].slice_ops_per_s.push(count as f64 / slice.as_secs_f64());
    }
    Ok(rows)
}

/// The median of the ratios of each A slice's rate to the B slice beside it (slices 0 and 1,
/// 3 and 2, ...: each A B B A group gives two pairs): the effect of what differs between the
/// buckets, with what drifts slower than a slice cancelled.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<f64> {
    let mut ratios: Vec<f64> = a.iter().zip(b).filter(|(_, b)| **b > 0.0).map(|(a, b)| a / b).collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let mid = ratios.len() / 2;
    Some(if ratios.len().is_multiple_of(2) { (ratios[mid - 1] + ratios[mid]) / 2.0 } else { ratios[mid] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_alternate_a_b_b_a_and_come_in_whole_groups() {
        let order: Vec<usize> = (0..8).map(side_of).collect();
        assert_eq!(order, [0, 1, 1, 0, 0, 1, 1, 0]);
        assert_eq!(slice_count(Duration::from_secs(2), Duration::from_millis(250)), 8);
        assert_eq!(slice_count(Duration::from_millis(1100), Duration::from_millis(250)), 4);
        assert_eq!(slice_count(Duration::from_millis(100), Duration::from_millis(250)), 4);
    }

    #[test]
    fn the_paired_ratio_is_the_median_of_the_pairs_ratios() {
        // The machine slows down in the second group: the pairs still show A at 90 % of B.
        let a = [900.0, 900.0, 450.0, 450.0];
        let b = [1000.0, 1000.0, 500.0, 500.0];
        assert!((paired_ratio(&a, &b).unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(paired_ratio(&[1.0], &[0.0]), None);
    }

    #[test]
    fn an_interleaved_phase_puts_to_both_targets_and_reports_each_slice() {
        let dir = tempfile::tempdir().unwrap();
        let a = crate::target::PosixTarget { dir: dir.path().join("a"), sync: false };
        let b = crate::target::PosixTarget { dir: dir.path().join("b"), sync: false };
        a.prepare().unwrap();
        b.prepare().unwrap();
        let [ra, rb] = run_put([&a, &b], 4096, 1, Duration::from_millis(400), Duration::from_millis(50)).unwrap();
        assert_eq!(ra.slice_ops_per_s.len(), 4);
        assert_eq!(rb.slice_ops_per_s.len(), 4);
        assert!(ra.ops > 0 && rb.ops > 0, "{ra:?} {rb:?}");
        assert_eq!(ra.errors + rb.errors, 0);
        let files = |dir: &std::path::Path| walk(dir);
        assert_eq!(files(&a.dir), ra.ops);
        assert_eq!(files(&b.dir), rb.ops);
        assert!(run_put([&a, &b], 4096, 1, Duration::from_millis(400), Duration::from_millis(5)).is_err());
    }

    fn walk(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() { walk(&e.path()) } else { 1 }
            })
            .sum()
    }
}
