//! IOR, in the two forms the IO500 defines: `easy` (a file per process, 2 MiB transfers) and
//! `hard` (one shared file, 47008-byte transfers interleaved across processes). A write phase,
//! then a read phase in which each rank reads another rank's data (IOR's -C), each timed on
//! its own; files are removed afterwards, untimed. On object targets every transfer is one
//! object keyed by its offset, as IOR's S3 backend maps a file.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::target::{BenchResult, Target};
use crate::team::{PhaseBarrier, RankSpan, Team};
use crate::workload::{Op, OpResult, Tally, on_workers, payload, result_of};

/// The IO500 transfer sizes.
pub const EASY_TRANSFER: u64 = 2 << 20;
pub const HARD_TRANSFER: u64 = 47_008;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IorVariant {
    Easy,
    Hard,
}

impl IorVariant {
    pub fn name(self) -> &'static str {
        match self {
            Self::Easy => "ior-easy",
            Self::Hard => "ior-hard",
        }
    }

    pub fn transfer(self) -> u64 {
        match self {
            Self::Easy => EASY_TRANSFER,
            Self::Hard => HARD_TRANSFER,
        }
    }

    /// The file rank `rank` writes, and the offset of its `i`-th transfer.
    pub fn place(self, rank: usize, ranks: usize, i: usize) -> (String, u64) {
        match self {
            Self::Easy => (format!("ior-easy/file.{rank}"), i as u64 * EASY_TRANSFER),
            Self::Hard => ("ior-hard/shared".to_string(), (i * ranks + rank) as u64 * HARD_TRANSFER),
        }
    }
}

/// One IOR run: `transfers` transfers per rank.
#[derive(Debug, Clone)]
pub struct Ior {
    pub variant: IorVariant,
    pub ranks: usize,
    pub transfers: usize,
}

impl Ior {
    /// The operations a run does (every transfer written and read, then the removals), for a
    /// progress bar.
    pub fn expected_operations(&self) -> u64 {
        let ranks = self.ranks.max(1) as u64;
        let removals = if self.variant == IorVariant::Easy { ranks } else { 1 };
        2 * ranks * self.transfers as u64 + removals
    }

    /// Write and read phases (op Put and Get in the results).
    pub fn run(&self, target: &dyn Target) -> BenchResult<Vec<OpResult>> {
        self.run_synced(target, &mut None::<Team>)
    }

    /// As `run`, as one process of several: `self.ranks` workers here are ranks among all
    /// processes' workers (so ior-hard's file is shared by all), and the read phase and the
    /// removal start at a barrier.
    pub fn run_synced(&self, target: &dyn Target, phases: PhaseBarrier<'_>) -> BenchResult<Vec<OpResult>> {
        let span = RankSpan::of(phases, self.ranks);
        let (workers, ranks) = (span.workers, span.total);
        let (variant, transfers) = (self.variant, self.transfers);
        let size = variant.transfer();
        let data = payload(size);
        let mut results = Vec::with_capacity(2);

        let start = Instant::now();
        let tally = on_workers(target, workers, |w, conn| {
            let rank = span.rank(w);
            let mut t = Tally::new();
            let mut file = String::new();
            for i in 0..transfers {
                let (key, offset) = variant.place(rank, ranks, i);
                let started = Instant::now();
                t.record(started, conn.write_at(&key, offset, &data).map(|()| (size, 0)));
                file = key;
            }
            if let Err(e) = conn.close_file(&file) {
                t.record(Instant::now(), Err(e));
            }
            t
        })?;
        results.push(result_of(target, variant.name(), Op::Put, size, workers, tally, start.elapsed().as_secs_f64()));

        phases.barrier()?;
        let start = Instant::now();
        let tally = on_workers(target, workers, |w, conn| {
            let rank = span.rank(w);
            let mut t = Tally::new();
            let owner = (rank + 1) % ranks;
            for i in 0..transfers {
                let (key, offset) = variant.place(owner, ranks, i);
                let started = Instant::now();
                t.record(started, conn.read_at(&key, offset, size as usize).map(|n| (n, 0)));
            }
            t
        })?;
        results.push(result_of(target, variant.name(), Op::Get, size, workers, tally, start.elapsed().as_secs_f64()));

        // Untimed cleanup, once every rank has read: each rank removes its own transfers (the
        // shared file once).
        phases.barrier()?;
        on_workers(target, workers, |w, conn| {
            let rank = span.rank(w);
            let mut t = Tally::new();
            let offsets: Vec<u64> = (0..transfers).map(|i| variant.place(rank, ranks, i).1).collect();
            let (key, _) = variant.place(rank, ranks, 0);
            if variant == IorVariant::Easy || rank == 0 {
                let all: Vec<u64> = if variant == IorVariant::Hard {
                    (0..transfers * ranks).map(|i| i as u64 * HARD_TRANSFER).collect()
                } else {
                    offsets
                };
                t.record(Instant::now(), conn.remove_file(&key, &all).map(|()| (0, 0)));
            }
            t
        })?;
        Ok(results)
    }
}

/// The IO500-style score of one target's results: sqrt(geomean(bandwidths in GiB/s) ×
/// geomean(metadata rates in kIOPS)). Not an official IO500 result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Io500Score {
    pub kind: String,
    pub bandwidth_gib_s: f64,
    pub metadata_kiops: f64,
    pub score: f64,
}

fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() || values.iter().any(|v| *v <= 0.0) {
        return 0.0;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// Scores every target that ran the IOR and mdtest phases.
pub fn io500_scores(results: &[OpResult]) -> Vec<Io500Score> {
    let mut kinds: Vec<&str> = results.iter().map(|r| r.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let mine = || results.iter().filter(move |r| r.kind == kind);
            let bw: Vec<f64> =
                mine().filter(|r| r.workload.starts_with("ior-")).map(|r| r.mib_per_s / 1024.0).collect();
            let md: Vec<f64> = mine()
                .filter(|r| r.workload.starts_with("mdtest-") && !r.op.is_directory_op())
                .map(|r| r.ops_per_s / 1000.0)
                .collect();
            let (b, m) = (geomean(&bw), geomean(&md));
            Io500Score { kind: kind.to_string(), bandwidth_gib_s: b, metadata_kiops: m, score: (b * m).sqrt() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    #[test]
    fn hard_transfers_interleave_and_easy_ones_do_not() {
        assert_eq!(IorVariant::Hard.place(1, 4, 2), ("ior-hard/shared".to_string(), 9 * HARD_TRANSFER));
        assert_eq!(IorVariant::Easy.place(3, 4, 2), ("ior-easy/file.3".to_string(), 2 * EASY_TRANSFER));
    }

    #[test]
    fn posix_ior_writes_real_files_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("t"), sync: false };
        target.prepare().unwrap();
        for variant in [IorVariant::Easy, IorVariant::Hard] {
            let run = Ior { variant, ranks: 2, transfers: 3 };
            let results = run.run(&target).unwrap();
            // Writes and reads, then one removal per file (one shared file for hard).
            let files = if variant == IorVariant::Easy { 2 } else { 1 };
            assert_eq!(run.expected_operations(), results.iter().map(|r| r.ops).sum::<u64>() + files);
            assert_eq!(
                results.iter().map(|r| (r.op, r.ops, r.errors)).collect::<Vec<_>>(),
                [(Op::Put, 6, 0), (Op::Get, 6, 0)],
                "{variant:?}"
            );
            assert_eq!(results[0].bytes, 6 * variant.transfer());
            assert_eq!(results[1].bytes, results[0].bytes);
        }
        // Files are removed after the run.
        assert!(std::fs::read_dir(dir.path().join("t/ior-easy")).unwrap().next().is_none());
        assert!(!dir.path().join("t/ior-hard/shared").exists());
    }

    #[test]
    fn shared_file_holds_every_rank_transfer_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("t"), sync: false };
        target.prepare().unwrap();
        let mut conn = target.connect().unwrap();
        for (rank, i) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let (key, offset) = IorVariant::Hard.place(rank, 2, i);
            conn.write_at(&key, offset, &[rank as u8 + 1; HARD_TRANSFER as usize]).unwrap();
        }
        conn.close_file("ior-hard/shared").unwrap();
        let bytes = std::fs::read(dir.path().join("t/ior-hard/shared")).unwrap();
        assert_eq!(bytes.len() as u64, 4 * HARD_TRANSFER);
        assert_eq!(bytes[HARD_TRANSFER as usize], 2);
        assert_eq!(bytes[2 * HARD_TRANSFER as usize], 1);
    }

    #[test]
    fn score_is_the_root_of_the_two_geometric_means() {
        let r = |workload: &str, mib: f64, ops: f64| {
            crate::workload::sample_result("posix", workload, Op::Put, ops, mib, 0.0)
        };
        let results = [
            r("ior-easy", 1024.0, 0.0),
            r("ior-hard", 4096.0, 0.0),
            r("mdtest-easy", 0.0, 1000.0),
            r("mdtest-hard", 0.0, 16000.0),
        ];
        let score = &io500_scores(&results)[0];
        assert!((score.bandwidth_gib_s - 2.0).abs() < 1e-9); // geomean(1, 4)
        assert!((score.metadata_kiops - 4.0).abs() < 1e-9); // geomean(1, 16)
        assert!((score.score - 8f64.sqrt()).abs() < 1e-9);
    }
}
