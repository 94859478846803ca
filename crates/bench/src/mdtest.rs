//! mdtest, in the two forms the IO500 defines: `easy` (each rank works in its own directory on
//! empty files) and `hard` (all ranks share one directory, files of 3901 bytes). Phases run one
//! after the other with a barrier between them — create, stat, read, delete — and each is
//! timed on its own. An optional stonewall ends the create phase early; the later phases then
//! work on the files that were created.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::target::{BenchResult, Target};
use crate::team::PhaseBarrier;
use crate::workload::{Op, OpResult, Tally, on_workers, result_of};

/// The IO500 size of an mdtest-hard file.
pub const HARD_FILE_SIZE: u64 = 3901;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Easy,
    Hard,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Self::Easy => "mdtest-easy",
            Self::Hard => "mdtest-hard",
        }
    }

    fn size(self) -> u64 {
        match self {
            Self::Easy => 0,
            Self::Hard => HARD_FILE_SIZE,
        }
    }

    /// The key of file `i` of rank `rank`.
    pub fn key(self, rank: usize, i: usize) -> String {
        match self {
            Self::Easy => format!("mdtest-easy/rank{rank}/file.{i}"),
            Self::Hard => format!("mdtest-hard/file.{rank}.{i}"),
        }
    }
}

/// One mdtest run.
#[derive(Debug, Clone)]
pub struct Mdtest {
    pub variant: Variant,
    pub ranks: usize,
    pub files_per_rank: usize,
    /// Ends the create phase after this long (the IO500's stonewall); `None` creates all files.
    pub stonewall: Option<Duration>,
}

impl Mdtest {
    /// Runs the four phases; returns one result per phase (create = put, stat = head,
    /// read = get, delete = delete).
    pub fn run(&self, target: &dyn Target) -> BenchResult<Vec<OpResult>> {
        self.run_synced(target, &mut || Ok(()))
    }

    /// As `run`, calling `between_phases` before each timed phase after the first, so that
    /// ranks in other processes start every phase together.
    pub fn run_synced(&self, target: &dyn Target, between_phases: PhaseBarrier<'_>) -> BenchResult<Vec<OpResult>> {
        let ranks = self.ranks.max(1);
        let variant = self.variant;
        let size = variant.size();
        let data = vec![0x5au8; size as usize];
        // How many files each rank created (the stonewall may stop it early); the later phases
        // touch exactly those.
        let created: Vec<AtomicUsize> = (0..ranks).map(|_| AtomicUsize::new(0)).collect();
        let mut results = Vec::with_capacity(4);

        let start = Instant::now();
        let deadline = self.stonewall.map(|d| start + d);
        let tally = on_workers(target, ranks, |rank, conn| {
            let mut t = Tally::new();
            for i in 0..self.files_per_rank {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let started = Instant::now();
                t.record(started, conn.put(&variant.key(rank, i), &data).map(|()| (size, 0)));
                created[rank].store(i + 1, Ordering::Relaxed);
            }
            t
        })?;
        results.push(result_of(target, variant.name(), Op::Put, size, ranks, tally, start.elapsed().as_secs_f64()));

        for op in [Op::Head, Op::Get, Op::Delete] {
            between_phases()?;
            let start = Instant::now();
            let tally = on_workers(target, ranks, |rank, conn| {
                let mut t = Tally::new();
                // Ranks work on another rank's files, as mdtest does, so no client reads what
                // it just wrote from its own cache.
                let owner = (rank + 1) % ranks;
                for i in 0..created[owner].load(Ordering::Relaxed) {
                    let key = variant.key(owner, i);
                    let started = Instant::now();
                    let outcome = match op {
                        Op::Head => conn.head(&key).map(|()| (0, 0)),
                        Op::Get => conn.get(&key).map(|n| (n, 0)),
                        _ => conn.delete(&key).map(|()| (0, 0)),
                    };
                    t.record(started, outcome);
                }
                t
            })?;
            results.push(result_of(target, variant.name(), op, size, ranks, tally, start.elapsed().as_secs_f64()));
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    fn files_under(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .map_or(0, |rd| rd.flatten().map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum())
    }

    #[test]
    fn each_phase_touches_every_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("md"), sync: false };
        target.prepare().unwrap();
        for variant in [Variant::Easy, Variant::Hard] {
            let run = Mdtest { variant, ranks: 3, files_per_rank: 40, stonewall: None };
            let results = run.run(&target).unwrap();
            let ops: Vec<(Op, u64, u64)> = results.iter().map(|r| (r.op, r.ops, r.errors)).collect();
            assert_eq!(
                ops,
                [(Op::Put, 120, 0), (Op::Head, 120, 0), (Op::Get, 120, 0), (Op::Delete, 120, 0)],
                "{variant:?}"
            );
            // Reads return the file sizes; everything created was removed.
            assert_eq!(results[2].bytes, 120 * variant.size());
            assert_eq!(files_under(&dir.path().join("md")), 0);
            assert!(results.iter().all(|r| r.workload == variant.name()));
        }
    }

    #[test]
    fn hard_files_share_one_directory_and_easy_ranks_do_not() {
        assert_eq!(
            Variant::Hard.key(0, 1).rsplit_once('/').unwrap().0,
            Variant::Hard.key(5, 9).rsplit_once('/').unwrap().0
        );
        assert_ne!(
            Variant::Easy.key(0, 1).rsplit_once('/').unwrap().0,
            Variant::Easy.key(5, 9).rsplit_once('/').unwrap().0
        );
    }

    #[test]
    fn stonewall_stops_creation_and_later_phases_follow_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("md"), sync: false };
        target.prepare().unwrap();
        let run = Mdtest {
            variant: Variant::Hard,
            ranks: 2,
            files_per_rank: 10_000_000,
            stonewall: Some(Duration::from_millis(200)),
        };
        let results = run.run(&target).unwrap();
        let created = results[0].ops;
        assert!(created > 0 && created < 20_000_000);
        assert!(results.iter().all(|r| r.ops == created && r.errors == 0));
    }
}
