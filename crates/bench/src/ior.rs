//! IOR, in the forms the IO500 defines: `easy` (a file per process, 2 MiB transfers), `hard`
//! (one shared file, 47008-byte transfers interleaved across processes) and `rnd4K` (one shared
//! file, 4 KiB transfers at random offsets, IO500's ior-rnd4K). A write phase,
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
pub const RND_TRANSFER: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IorVariant {
    Easy,
    Hard,
    /// IO500's ior-rnd4K: every rank writes, then reads, 4 KiB transfers at random offsets of
    /// one shared file.
    #[serde(rename = "rnd4K")]
    Rnd4k,
}

impl IorVariant {
    pub fn name(self) -> &'static str {
        match self {
            Self::Easy => "ior-easy",
            Self::Hard => "ior-hard",
            Self::Rnd4k => "ior-rnd4K",
        }
    }

    pub fn transfer(self) -> u64 {
        match self {
            Self::Easy => EASY_TRANSFER,
            Self::Hard => HARD_TRANSFER,
            Self::Rnd4k => RND_TRANSFER,
        }
    }

    /// Whether all ranks write one shared file.
    pub fn shared(self) -> bool {
        self != Self::Easy
    }

    /// The file rank `rank` (of `ranks`, each doing `transfers`) writes, and the offset of its
    /// `i`-th transfer.
    pub fn place(self, rank: usize, ranks: usize, transfers: usize, i: usize) -> (String, u64) {
        match self {
            Self::Easy => (format!("ior-easy/file.{rank}"), i as u64 * EASY_TRANSFER),
            Self::Hard => ("ior-hard/shared".to_string(), (i * ranks + rank) as u64 * HARD_TRANSFER),
            Self::Rnd4k => {
                let slots = (ranks * transfers) as u64;
                ("ior-rnd4K/shared".to_string(), scatter(i as u64 * ranks as u64 + rank as u64, slots) * RND_TRANSFER)
            }
        }
    }
}

/// Slot `x` of `n` sent to a pseudo-random slot, each slot exactly once: the affine map
/// x -> (x * A + n / 3) mod n with A a large prime not dividing n. Decision: a permutation
/// rather than independent random offsets, so every 4 KiB block is written once and read back
/// (as IOR's -z visits each block of the file once), computed per transfer without a table.
fn scatter(x: u64, n: u64) -> u64 {
    const PRIMES: [u64; 3] = [2_654_435_761, 2_246_822_519, 3_266_489_917];
    let n = n.max(1);
    let a = PRIMES.into_iter().find(|p| !n.is_multiple_of(*p)).unwrap_or(1);
    ((u128::from(x) * u128::from(a) + u128::from(n / 3)) % u128::from(n)) as u64
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
        let removals = if self.variant.shared() { 1 } else { ranks };
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
                let (key, offset) = variant.place(rank, ranks, transfers, i);
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
                let (key, offset) = variant.place(owner, ranks, transfers, i);
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
            let (key, _) = variant.place(rank, ranks, transfers, 0);
            if !variant.shared() || rank == 0 {
                let all: Vec<u64> = if variant.shared() {
                    (0..transfers * ranks).map(|i| i as u64 * size).collect()
                } else {
                    (0..transfers).map(|i| variant.place(rank, ranks, transfers, i).1).collect()
                };
                t.record(Instant::now(), conn.remove_file(&key, &all).map(|()| (0, 0)));
            }
            t
        })?;
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    #[test]
    fn hard_transfers_interleave_and_easy_ones_do_not() {
        assert_eq!(IorVariant::Hard.place(1, 4, 10, 2), ("ior-hard/shared".to_string(), 9 * HARD_TRANSFER));
        assert_eq!(IorVariant::Easy.place(3, 4, 10, 2), ("ior-easy/file.3".to_string(), 2 * EASY_TRANSFER));
    }

    #[test]
    fn random_transfers_cover_the_shared_file_once_out_of_order() {
        let (ranks, transfers) = (3, 100);
        let mut offsets: Vec<u64> = (0..ranks)
            .flat_map(|rank| (0..transfers).map(move |i| IorVariant::Rnd4k.place(rank, ranks, transfers, i).1))
            .collect();
        let written = offsets.clone();
        offsets.sort_unstable();
        // Every 4 KiB block of the file exactly once...
        assert_eq!(offsets, (0..300).map(|s| s * RND_TRANSFER).collect::<Vec<_>>());
        // ...in an order far from sequential: most steps jump by more than one block.
        let jumps = written.windows(2).filter(|w| w[0].abs_diff(w[1]) > RND_TRANSFER).count();
        assert!(jumps > 250, "{jumps}");
    }

    #[test]
    fn posix_ior_writes_real_files_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("t"), sync: false };
        target.prepare().unwrap();
        for variant in [IorVariant::Easy, IorVariant::Hard, IorVariant::Rnd4k] {
            let run = Ior { variant, ranks: 2, transfers: 3 };
            let results = run.run(&target).unwrap();
            // Writes and reads, then one removal per file (one shared file for hard).
            let files = if variant.shared() { 1 } else { 2 };
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
        assert!(!dir.path().join("t/ior-rnd4K/shared").exists());
    }

    #[test]
    fn shared_file_holds_every_rank_transfer_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("t"), sync: false };
        target.prepare().unwrap();
        let mut conn = target.connect().unwrap();
        for (rank, i) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let (key, offset) = IorVariant::Hard.place(rank, 2, 2, i);
            conn.write_at(&key, offset, &[rank as u8 + 1; HARD_TRANSFER as usize]).unwrap();
        }
        conn.close_file("ior-hard/shared").unwrap();
        let bytes = std::fs::read(dir.path().join("t/ior-hard/shared")).unwrap();
        assert_eq!(bytes.len() as u64, 4 * HARD_TRANSFER);
        assert_eq!(bytes[HARD_TRANSFER as usize], 2);
        assert_eq!(bytes[2 * HARD_TRANSFER as usize], 1);
    }
}
