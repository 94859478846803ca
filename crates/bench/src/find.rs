//! IO500's find phase: every rank walks part of the mdtest trees and matches files as pfind
//! does (`-newer timestampfile -size 3901c -name "*01*"`); on object targets the walk is one
//! LIST after another of the tree's prefix. The rate, as the IO500 scores it, is the files
//! looked at per second, not the matches.

use std::time::{Instant, SystemTime};

use crate::mdtest::Variant;
use crate::target::{BenchResult, Target};
use crate::team::{PhaseBarrier, RankSpan};
use crate::workload::{Op, OpResult, Tally, on_workers, result_of};

/// What a file must be to match, as the IO500 asks pfind.
#[derive(Debug, Clone)]
pub struct FindFilter {
    /// A part of the file name (the IO500's `-name "*01*"`).
    pub name_contains: String,
    /// The exact size (`-size 3901c`).
    pub size: u64,
    /// Modified at or after this time (`-newer timestampfile`, the file made before the run).
    pub newer_than: SystemTime,
}

impl FindFilter {
    /// The IO500's filter, for files modified since `start`; `start` is taken down to the whole
    /// second, as S3 listings and some file systems keep times to the second.
    pub fn io500(start: SystemTime) -> Self {
        let seconds = start.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self {
            name_contains: "01".into(),
            size: crate::mdtest::HARD_FILE_SIZE,
            newer_than: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds),
        }
    }

    pub fn matches(&self, name: &str, size: u64, modified: SystemTime) -> bool {
        size == self.size && modified >= self.newer_than && name.contains(&self.name_contains)
    }
}

/// The trees find walks: each rank's mdtest-easy directory and mdtest-hard's shared one.
fn trees(ranks: usize) -> Vec<String> {
    let easy = (0..ranks).map(|r| format!("{}/rank{r}", Variant::Easy.tree()));
    easy.chain([Variant::Hard.tree().to_string()]).collect()
}

/// One find over the mdtest trees, split among the ranks: tree `t` is walked by rank
/// `t mod ranks` (pfind steals work instead; here mdtest-hard's one directory is one rank's).
/// The result counts every file looked at as an operation (`ops`, the IO500's rate) and the
/// matches as `keys`.
pub fn run_find(
    target: &dyn Target,
    phases: PhaseBarrier<'_>,
    ranks: usize,
    filter: &FindFilter,
) -> BenchResult<OpResult> {
    phases.barrier()?;
    let span = RankSpan::of(phases, ranks);
    let trees = trees(span.total);
    let start = Instant::now();
    let tally = on_workers(target, span.workers, |w, conn| {
        let mut t = Tally::new();
        for tree in trees.iter().skip(span.rank(w)).step_by(span.total) {
            let (mut looked, mut matched) = (0u64, 0u64);
            let started = Instant::now();
            let walked = conn.walk(tree, &mut |name, size, modified| {
                looked += 1;
                matched += u64::from(filter.matches(name, size, modified));
            });
            t.record_many(started, looked, walked.map(|()| matched));
        }
        t
    })?;
    Ok(result_of(target, "find", Op::Find, 0, span.workers, tally, start.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mdtest::Mdtest;
    use crate::target::PosixTarget;
    use crate::team::Team;

    #[test]
    fn filter_is_the_io500_one() {
        let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(10_500);
        let f = FindFilter::io500(start);
        let at = |s| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert!(f.matches("file.0.101", 3901, at(10)));
        assert!(!f.matches("file.0.101", 3901, at(9)));
        assert!(!f.matches("file.0.101", 0, at(11)));
        assert!(!f.matches("file.0.11", 3901, at(11)));
    }

    #[test]
    fn find_looks_at_every_file_and_matches_the_hard_ones_named_01() {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("t"), sync: false };
        target.prepare().unwrap();
        let start = SystemTime::now();
        let (easy, hard) = (Mdtest::io500(Variant::Easy, 2, 120, None), Mdtest::io500(Variant::Hard, 2, 120, None));
        let mut alone = None::<Team>;
        let (_, made_easy) = easy.create_files(&target, &mut alone).unwrap();
        let (_, made_hard) = hard.create_files(&target, &mut alone).unwrap();
        let found = run_find(&target, &mut alone, 2, &FindFilter::io500(start)).unwrap();
        assert_eq!((found.ops, found.errors), (made_easy.total() + made_hard.total(), 0));
        // Only mdtest-hard files have 3901 bytes; of those, the ones with "01" in the name.
        let expected =
            (0..2).flat_map(|r| (0..120).map(move |i| format!("file.{r}.{i}"))).filter(|n| n.contains("01")).count()
                as u64;
        assert!(expected > 0);
        assert_eq!(found.keys, expected);
    }
}
