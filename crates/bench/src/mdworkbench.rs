//! MD-Workbench: each rank pre-creates `datasets` × `objects` small objects; in the benchmark
//! phase every iteration, for each dataset, stats and reads the oldest object, deletes it and
//! writes a new one (a FIFO of constant size), the pattern of interactive workloads on shared
//! storage; cleanup removes what is left. Latency is recorded per operation type. Ranks work
//! on the datasets of the next rank, as MD-Workbench's offset does, so nothing is read from a
//! client's own cache of what it just wrote.

use std::time::Instant;

use crate::target::{BenchResult, Target};
use crate::team::{PhaseBarrier, RankSpan, Team};
use crate::workload::{Op, OpResult, Tally, on_workers, result_of};

/// MD-Workbench's default object size.
pub const OBJECT_SIZE: u64 = 3901;

#[derive(Debug, Clone)]
pub struct MdWorkbench {
    pub ranks: usize,
    pub datasets: usize,
    pub objects: usize,
    pub iterations: usize,
}

fn key(owner: usize, dataset: usize, n: usize) -> String {
    format!("md-workbench/rank{owner}/ds{dataset}/obj{n}")
}

impl MdWorkbench {
    /// The operations a run does (pre-creation and the four of each benchmark step), for a
    /// progress bar.
    pub fn expected_operations(&self) -> u64 {
        (self.ranks.max(1) * self.datasets * (self.objects + 4 * self.iterations)) as u64
    }

    /// Results: `md-workbench-precreate` put, then `md-workbench` head, get, delete and put of
    /// the benchmark phase (each with its own latency statistics), then the untimed cleanup.
    pub fn run(&self, target: &dyn Target) -> BenchResult<Vec<OpResult>> {
        self.run_synced(target, &mut None::<Team>)
    }

    /// As `run`, as one process of several: `self.ranks` workers here are ranks among all
    /// processes' workers (each works on the next rank's datasets, wherever it runs), and the
    /// benchmark phase and the cleanup start at a barrier.
    pub fn run_synced(&self, target: &dyn Target, phases: PhaseBarrier<'_>) -> BenchResult<Vec<OpResult>> {
        let span = RankSpan::of(phases, self.ranks);
        let (workers, ranks) = (span.workers, span.total);
        let data = vec![0x42u8; OBJECT_SIZE as usize];
        let mut results = Vec::new();

        let start = Instant::now();
        let tally = on_workers(target, workers, |w, conn| {
            let rank = span.rank(w);
            let mut t = Tally::new();
            for d in 0..self.datasets {
                for n in 0..self.objects {
                    let started = Instant::now();
                    t.record(started, conn.put(&key(rank, d, n), &data).map(|()| (OBJECT_SIZE, 0)));
                }
            }
            t
        })?;
        results.push(result_of(
            target,
            "md-workbench-precreate",
            Op::Put,
            OBJECT_SIZE,
            workers,
            tally,
            start.elapsed().as_secs_f64(),
        ));

        // One tally per operation type, merged across ranks.
        let phase_tallies = std::sync::Mutex::new(Vec::<[Tally; 4]>::new());
        phases.barrier()?;
        let start = Instant::now();
        on_workers(target, workers, |w, conn| {
            let owner = (span.rank(w) + 1) % ranks;
            let mut t = [Tally::new(), Tally::new(), Tally::new(), Tally::new()];
            for it in 0..self.iterations {
                for d in 0..self.datasets {
                    let (oldest, newest) = (key(owner, d, it), key(owner, d, self.objects + it));
                    let s = Instant::now();
                    t[0].record(s, conn.head(&oldest).map(|()| (0, 0)));
                    let s = Instant::now();
                    t[1].record(s, conn.get(&oldest).map(|n| (n, 0)));
                    let s = Instant::now();
                    t[2].record(s, conn.delete(&oldest).map(|()| (0, 0)));
                    let s = Instant::now();
                    t[3].record(s, conn.put(&newest, &data).map(|()| (OBJECT_SIZE, 0)));
                }
            }
            phase_tallies.lock().expect("not poisoned").push(t);
            Tally::new()
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let mut merged = [Tally::new(), Tally::new(), Tally::new(), Tally::new()];
        for t in phase_tallies.into_inner().expect("not poisoned") {
            for (m, t) in merged.iter_mut().zip(t) {
                m.merge(t);
            }
        }
        for (op, tally) in [Op::Head, Op::Get, Op::Delete, Op::Put].into_iter().zip(merged) {
            results.push(result_of(target, "md-workbench", op, OBJECT_SIZE, workers, tally, seconds));
        }

        // Untimed cleanup, once every rank is done with the datasets it works on.
        phases.barrier()?;
        on_workers(target, workers, |w, conn| {
            let rank = span.rank(w);
            for d in 0..self.datasets {
                for n in self.iterations..self.objects + self.iterations {
                    let _ = conn.delete(&key(rank, d, n));
                }
            }
            Tally::new()
        })?;
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    #[test]
    fn fifo_keeps_the_dataset_size_and_cleanup_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("w"), sync: false };
        target.prepare().unwrap();
        let run = MdWorkbench { ranks: 2, datasets: 3, objects: 5, iterations: 4 };
        let results = run.run(&target).unwrap();
        assert_eq!(results[0].ops, 2 * 3 * 5);
        // Every benchmark operation ran once per rank, iteration and dataset, without errors.
        for r in &results[1..] {
            assert_eq!((r.ops, r.errors), (2 * 4 * 3, 0), "{:?}", r.op);
        }
        assert_eq!(results[2].bytes, 2 * 4 * 3 * OBJECT_SIZE);
        assert_eq!(run.expected_operations(), results.iter().map(|r| r.ops).sum::<u64>());
        let left: usize = walk(&dir.path().join("w"));
        assert_eq!(left, 0);
    }

    fn walk(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .map_or(0, |rd| rd.flatten().map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum())
    }
}
