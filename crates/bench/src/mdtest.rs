//! mdtest, in the two forms the IO500 defines: `easy` (each rank works in its own directory on
//! empty files) and `hard` (all ranks share one directory, files of 3901 bytes), with mdtest's
//! `-w/-e` (bytes written at create and read back) and `-i` (iterations). As mdtest does
//! without `-F`, the directory phases come first — create, stat, rename, remove — then the file
//! phases — create, stat, read, remove. Every phase starts at a barrier and is timed on its own;
//! an optional stonewall ends the create phases early, the later phases then work on what was
//! created. Over several iterations each phase reports mdtest's summary (`phase_stats`).
//!
//! On object targets a directory is the empty folder object `name/` (a real directory in
//! Isthmus, a folder in S3 consoles) and the rename is a server-side copy of that object then
//! the delete of the old one: S3 has no rename, so reports call it "rename (copy+delete)".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::target::{BenchResult, Connection, Target};
use crate::team::{PhaseBarrier, RankSpan, Team};
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

    /// The bytes the IO500 writes to each file: none for easy, 3901 for hard.
    pub fn default_bytes(self) -> u64 {
        match self {
            Self::Easy => 0,
            Self::Hard => HARD_FILE_SIZE,
        }
    }

    /// The key of file `i` of rank `rank`.
    pub fn key(self, rank: usize, i: usize) -> String {
        self.item(rank, "file", i)
    }

    /// The key of directory `i` of rank `rank`, beside the files.
    pub fn dir_key(self, rank: usize, i: usize) -> String {
        self.item(rank, "dir", i)
    }

    /// The directory (prefix) holding this variant's files.
    pub fn tree(self) -> &'static str {
        self.name()
    }

    fn item(self, rank: usize, kind: &str, i: usize) -> String {
        match self {
            Self::Easy => format!("mdtest-easy/rank{rank}/{kind}.{i}"),
            Self::Hard => format!("mdtest-hard/{kind}.{rank}.{i}"),
        }
    }
}

/// The name the rename phase gives directory `key`.
fn renamed(key: &str) -> String {
    format!("{key}.renamed")
}

/// One mdtest run.
#[derive(Debug, Clone)]
pub struct Mdtest {
    pub variant: Variant,
    pub ranks: usize,
    /// Files, and directories, each rank creates (mdtest's `-n`).
    pub files_per_rank: usize,
    /// Ends the create phases after this long (the IO500's stonewall); `None` creates all.
    pub stonewall: Option<Duration>,
    /// Runs the directory phases before the file phases (the IO500 runs files only, `-F`).
    pub directories: bool,
    /// Bytes written to each file at create and read back by the read phase (mdtest's `-w` and
    /// `-e`; `Variant::default_bytes` is the IO500's choice).
    pub bytes: u64,
    /// Times every phase runs (mdtest's `-i`), each phase reported over them.
    pub iterations: usize,
}

/// Which items a phase works on: a create phase makes each rank's own items and counts them;
/// the later phases take the items another rank created.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Items {
    Create,
    Created,
}

/// How many items each rank of the run created (all processes' ranks), for the phases after.
pub struct Created(Vec<AtomicUsize>);

impl Created {
    fn new(span: RankSpan) -> Self {
        Self((0..span.total).map(|_| AtomicUsize::new(0)).collect())
    }

    /// Files created by all ranks together.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|c| c.load(Ordering::Relaxed) as u64).sum()
    }
}

impl Mdtest {
    /// The IO500's mdtest of `variant`: files only, its file size, one iteration.
    pub fn io500(variant: Variant, ranks: usize, files_per_rank: usize, stonewall: Option<Duration>) -> Self {
        let bytes = variant.default_bytes();
        Self { variant, ranks, files_per_rank, stonewall, directories: false, bytes, iterations: 1 }
    }

    /// Runs the phases `iterations` times; returns one result per phase (directories: mkdir,
    /// statdir, rename, rmdir; files: create = put, stat = head, read = get, delete = delete),
    /// each with its statistics over the iterations.
    pub fn run(&self, target: &dyn Target) -> BenchResult<Vec<OpResult>> {
        self.run_synced(target, &mut None::<Team>)
    }

    /// As `run`, as one process of several: `self.ranks` workers here are ranks among all
    /// processes' workers (so mdtest-hard's directory is shared by all), every timed phase
    /// starts at a barrier, and the counts of files created before the stonewall are shared so
    /// each rank works on what another created.
    pub fn run_synced(&self, target: &dyn Target, phases: PhaseBarrier<'_>) -> BenchResult<Vec<OpResult>> {
        let mut runs = Vec::with_capacity(self.iterations.max(1));
        for _ in 0..self.iterations.max(1) {
            let mut results = Vec::with_capacity(8);
            if self.directories {
                results.extend(self.directory_phases(target, phases)?);
            }
            let (create, created) = self.create_files(target, phases)?;
            results.push(create);
            results.extend(self.after_create(target, phases, &created)?);
            runs.push(results);
        }
        // Nodes are counted when the ranks' reports merge; one process is one node.
        Ok(crate::phase_stats::combine(runs, 1))
    }

    /// The directory phases: create, stat, rename, remove.
    fn directory_phases(&self, target: &dyn Target, phases: PhaseBarrier<'_>) -> BenchResult<Vec<OpResult>> {
        let variant = self.variant;
        let made = Created::new(RankSpan::of(phases, self.ranks));
        let mut results = Vec::with_capacity(4);
        results.push(self.phase(target, phases, Op::Mkdir, Items::Create, &made, &|c, rank, i| {
            c.mkdir(&variant.dir_key(rank, i)).map(|()| 0)
        })?);
        results.push(self.phase(target, phases, Op::StatDir, Items::Created, &made, &|c, rank, i| {
            c.stat_dir(&variant.dir_key(rank, i)).map(|()| 0)
        })?);
        results.push(self.phase(target, phases, Op::Rename, Items::Created, &made, &|c, rank, i| {
            let key = variant.dir_key(rank, i);
            c.rename_dir(&key, &renamed(&key)).map(|()| 0)
        })?);
        results.push(self.phase(target, phases, Op::Rmdir, Items::Created, &made, &|c, rank, i| {
            c.rmdir(&renamed(&variant.dir_key(rank, i))).map(|()| 0)
        })?);
        Ok(results)
    }

    /// The file create phase; returns its result and what each rank created. The io500
    /// workload runs `find` between this and `after_create`, as the IO500 does.
    pub fn create_files(&self, target: &dyn Target, phases: PhaseBarrier<'_>) -> BenchResult<(OpResult, Created)> {
        let (variant, bytes) = (self.variant, self.bytes);
        let data = vec![0x5au8; bytes as usize];
        let created = Created::new(RankSpan::of(phases, self.ranks));
        let result = self.phase(target, phases, Op::Put, Items::Create, &created, &|c, rank, i| {
            c.put(&variant.key(rank, i), &data).map(|()| bytes)
        })?;
        Ok((result, created))
    }

    /// The file phases after the create: stat, read, remove.
    pub fn after_create(
        &self,
        target: &dyn Target,
        phases: PhaseBarrier<'_>,
        created: &Created,
    ) -> BenchResult<Vec<OpResult>> {
        let variant = self.variant;
        Ok(vec![
            self.phase(target, phases, Op::Head, Items::Created, created, &|c, rank, i| {
                c.head(&variant.key(rank, i)).map(|()| 0)
            })?,
            self.phase(target, phases, Op::Get, Items::Created, created, &|c, rank, i| c.get(&variant.key(rank, i)))?,
            self.phase(target, phases, Op::Delete, Items::Created, created, &|c, rank, i| {
                c.delete(&variant.key(rank, i)).map(|()| 0)
            })?,
        ])
    }

    /// The operations a run does when no stonewall stops it early, for a progress bar.
    pub fn expected_operations(&self) -> u64 {
        let phases = if self.directories { 8 } else { 4 };
        (self.ranks.max(1) * self.files_per_rank * self.iterations.max(1)) as u64 * phases
    }

    /// One timed phase, after a barrier; a create phase then shares its counts with the other
    /// processes.
    fn phase(
        &self,
        target: &dyn Target,
        phases: PhaseBarrier<'_>,
        op: Op,
        items: Items,
        created: &Created,
        action: &PhaseAction<'_>,
    ) -> BenchResult<OpResult> {
        phases.barrier()?;
        let span = RankSpan::of(phases, self.ranks);
        let size = if op.is_directory_op() { 0 } else { self.bytes };
        let result = self.timed_phase(target, span, op, size, items, &created.0, action)?;
        if items == Items::Create && span.total > span.workers {
            let counts = &created.0;
            let mine: Vec<u64> =
                counts[span.first..][..span.workers].iter().map(|c| c.load(Ordering::Relaxed) as u64).collect();
            for (count, all) in counts.iter().zip(phases.all_gather(&mine)?) {
                count.store(all as usize, Ordering::Relaxed);
            }
        }
        Ok(result)
    }

    /// Times one phase: every rank applies `action` to its items and the tallies merge.
    #[allow(clippy::too_many_arguments)]
    fn timed_phase(
        &self,
        target: &dyn Target,
        span: RankSpan,
        op: Op,
        size: u64,
        items: Items,
        counts: &[AtomicUsize],
        action: &PhaseAction<'_>,
    ) -> BenchResult<OpResult> {
        let ranks = counts.len();
        let start = Instant::now();
        let deadline = self.stonewall.filter(|_| items == Items::Create).map(|d| start + d);
        let tally = on_workers(target, span.workers, |w, conn| {
            let rank = span.rank(w);
            let mut t = Tally::new();
            // Later phases work on another rank's items, as mdtest does, so no client reads
            // what it just wrote from its own cache.
            let (owner, count) = match items {
                Items::Create => (rank, self.files_per_rank),
                Items::Created => ((rank + 1) % ranks, counts[(rank + 1) % ranks].load(Ordering::Relaxed)),
            };
            for i in 0..count {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let started = Instant::now();
                t.record(started, action(conn, owner, i).map(|bytes| (bytes, 0)));
                if items == Items::Create {
                    counts[rank].store(i + 1, Ordering::Relaxed);
                }
            }
            t
        })?;
        Ok(result_of(target, self.variant.name(), op, size, span.workers, tally, start.elapsed().as_secs_f64()))
    }
}

/// What a phase does to item `i` of rank `rank`; returns the bytes moved.
type PhaseAction<'a> = dyn Fn(&mut dyn Connection, usize, usize) -> BenchResult<u64> + Sync + 'a;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PosixTarget;

    /// A POSIX target in `md` under a new temporary directory.
    fn posix_target(sync: bool) -> (tempfile::TempDir, PosixTarget) {
        let dir = tempfile::tempdir().unwrap();
        let target = PosixTarget { dir: dir.path().join("md"), sync };
        target.prepare().unwrap();
        (dir, target)
    }

    /// (operation, count, errors) of each phase.
    fn phase_counts(results: &[OpResult]) -> Vec<(Op, u64, u64)> {
        results.iter().map(|r| (r.op, r.ops, r.errors)).collect()
    }

    fn files_under(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .map_or(0, |rd| rd.flatten().map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum())
    }

    #[test]
    fn each_phase_touches_every_file_once() {
        let (dir, target) = posix_target(false);
        for variant in [Variant::Easy, Variant::Hard] {
            let run = Mdtest {
                variant,
                ranks: 3,
                files_per_rank: 40,
                stonewall: None,
                directories: false,
                bytes: variant.default_bytes(),
                iterations: 1,
            };
            let results = run.run(&target).unwrap();
            let ops = phase_counts(&results);
            assert_eq!(
                ops,
                [(Op::Put, 120, 0), (Op::Head, 120, 0), (Op::Get, 120, 0), (Op::Delete, 120, 0)],
                "{variant:?}"
            );
            // Reads return the file sizes; everything created was removed.
            assert_eq!(results[2].bytes, 120 * variant.default_bytes());
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
        let (_dir, target) = posix_target(false);
        let run = Mdtest {
            variant: Variant::Hard,
            ranks: 2,
            files_per_rank: 10_000_000,
            stonewall: Some(Duration::from_millis(200)),
            directories: true,
            bytes: HARD_FILE_SIZE,
            iterations: 1,
        };
        let results = run.run(&target).unwrap();
        // Four directory phases then four file phases, each group following its create phase.
        assert_eq!(results.len(), 8);
        for group in results.chunks(4) {
            let created = group[0].ops;
            assert!(created > 0 && created < 20_000_000);
            assert!(group.iter().all(|r| r.ops == created && r.errors == 0), "{group:?}");
        }
    }

    fn entries_named(dir: &std::path::Path, part: &str) -> usize {
        std::fs::read_dir(dir).map_or(0, |rd| {
            rd.flatten()
                .map(|e| {
                    let mine = usize::from(e.file_name().to_string_lossy().contains(part));
                    mine + if e.path().is_dir() { entries_named(&e.path(), part) } else { 0 }
                })
                .sum()
        })
    }

    #[test]
    fn posix_directory_phases_create_stat_rename_and_remove_real_directories() {
        let (dir, target) = posix_target(true);
        for variant in [Variant::Easy, Variant::Hard] {
            let run = Mdtest {
                variant,
                ranks: 2,
                files_per_rank: 15,
                stonewall: None,
                directories: true,
                bytes: variant.default_bytes(),
                iterations: 1,
            };
            let results = run.run(&target).unwrap();
            let ops = phase_counts(&results);
            // Removing the renamed names succeeds only if the rename phase really renamed them.
            assert_eq!(
                ops,
                [
                    (Op::Mkdir, 30, 0),
                    (Op::StatDir, 30, 0),
                    (Op::Rename, 30, 0),
                    (Op::Rmdir, 30, 0),
                    (Op::Put, 30, 0),
                    (Op::Head, 30, 0),
                    (Op::Get, 30, 0),
                    (Op::Delete, 30, 0),
                ],
                "{variant:?}"
            );
            assert_eq!(entries_named(&dir.path().join("md"), "dir."), 0);
            assert_eq!(files_under(&dir.path().join("md")), 0);
            assert_eq!(run.expected_operations(), results.iter().map(|r| r.ops).sum::<u64>());
        }
    }

    #[test]
    fn object_targets_make_directory_objects_and_rename_by_copy_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = isthmus_posix::PosixStore::open(dir.path(), isthmus_posix::StoreOptions::default()).unwrap();
        let target = crate::target_engine::EmbeddedTarget {
            store: std::sync::Arc::new(store),
            root: dir.path().into(),
            bucket: "mdtest".into(),
        };
        target.prepare().unwrap();
        // A directory object is a real directory in the bucket.
        let mut conn = target.connect().unwrap();
        conn.mkdir("a/b").unwrap();
        assert!(dir.path().join("mdtest/a/b").is_dir());
        conn.stat_dir("a/b").unwrap();
        assert!(conn.stat_dir("a/missing").is_err());
        // The rename copies the folder object and deletes the old one.
        conn.rename_dir("a/b", "a/c").unwrap();
        assert!(conn.stat_dir("a/b").is_err());
        conn.stat_dir("a/c").unwrap();
        conn.rmdir("a/c").unwrap();
        assert!(!dir.path().join("mdtest/a/c").exists());

        let run = Mdtest { directories: true, ..Mdtest::io500(Variant::Hard, 2, 10, None) };
        let results = run.run(&target).unwrap();
        let ops = phase_counts(&results);
        // Stat fails on a directory that does not exist, and the remove finds only renamed
        // names, so 20 successes each mean 20 directories made, renamed and removed.
        assert_eq!(ops[..4], [(Op::Mkdir, 20, 0), (Op::StatDir, 20, 0), (Op::Rename, 20, 0), (Op::Rmdir, 20, 0)]);
        assert_eq!(run.expected_operations(), results.iter().map(|r| r.ops).sum::<u64>());
        assert_eq!(entries_named(&dir.path().join("mdtest"), "dir."), 0);
        assert_eq!(crate::report::phase_name(&results[2]), "mdtest-hard dir rename (copy+delete)");
    }

    #[test]
    fn iterations_repeat_every_phase_with_the_bytes_asked_for() {
        let (dir, target) = posix_target(false);
        let run = Mdtest { bytes: 100, iterations: 3, directories: true, ..Mdtest::io500(Variant::Easy, 2, 5, None) };
        let results = run.run(&target).unwrap();
        assert_eq!(results.len(), 8);
        for r in &results {
            // Three iterations of 2 ranks x 5 items, each one with its own rate.
            assert_eq!((r.ops, r.errors), (30, 0), "{:?}", r.op);
            let stats = r.iterations.as_ref().unwrap();
            assert_eq!(stats.rates.len(), 3);
            assert!(stats.min_ops_per_s <= stats.mean_ops_per_s && stats.mean_ops_per_s <= stats.max_ops_per_s);
            assert!(stats.mean_ms > 0.0 && stats.nodes == 1);
        }
        // mdtest -w/-e: every create wrote 100 bytes and every read read them back.
        assert_eq!((results[4].bytes, results[6].bytes), (3000, 3000));
        assert_eq!(files_under(&dir.path().join("md")), 0);
    }

    #[test]
    fn processes_share_mdtest_hard_and_the_stonewall_counts() {
        let (dir, target) = posix_target(false);
        let run = Mdtest {
            variant: Variant::Hard,
            ranks: 2,
            files_per_rank: 10_000_000,
            stonewall: Some(Duration::from_millis(150)),
            directories: false,
            bytes: HARD_FILE_SIZE,
            iterations: 1,
        };
        // Two processes of two workers: four ranks in one directory. Each rank stats, reads
        // and removes the files of the next rank, two of which live in the other process, so
        // every phase matches the creates only if the counts cross the processes.
        let (run, target_ref) = (&run, &target);
        let results: Vec<Vec<OpResult>> = std::thread::scope(|scope| {
            let handles: Vec<_> = crate::team::ThreadTeam::of(2)
                .into_iter()
                .map(|mut team| scope.spawn(move || run.run_synced(target_ref, &mut team).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total = |phase: usize| {
            results.iter().map(|r| (r[phase].ops, r[phase].errors)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let (created, _) = total(0);
        assert!(created > 0);
        for phase in 1..4 {
            assert_eq!(total(phase), (created, 0), "phase {phase}");
        }
        let names: Vec<String> = std::fs::read_dir(dir.path().join("md/mdtest-hard"))
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        assert!(names.is_empty(), "{names:?}");
    }
}
