//! Multi-process runs: which rank this process is and how many there are (from `isthmus bench
//! --ranks`, mpirun or srun), a barrier through files in a directory every rank sees, and the
//! gathering of what each rank sends (the merge of their reports is `merge`).
//!
//! Decision: the barrier uses files, not MPI, so no MPI library is linked and the same binary
//! runs under any launcher; the sync directory must be on a file system all ranks share (the
//! parallel file system under test is one), which is exactly what an HPC user has.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::target::{BenchError, BenchResult};

/// The environment variables `isthmus bench --ranks` sets for the processes it starts.
pub const RANK_VAR: &str = "ISTHMUS_BENCH_RANK";
pub const SIZE_VAR: &str = "ISTHMUS_BENCH_SIZE";
pub const SYNC_VAR: &str = "ISTHMUS_BENCH_SYNC";

/// What a workload needs from the other processes of its run: a barrier between phases, and
/// the sharing of a few counts (how many files each rank created before the stonewall).
/// `None::<Team>` is a process running alone.
pub trait Phases {
    /// This process's rank and the number of processes.
    fn process(&self) -> (usize, usize);
    /// Waits until every process has reached the same point.
    fn barrier(&mut self) -> BenchResult<()>;
    /// Every process's `mine`, concatenated in rank order (all pass slices of one length).
    fn all_gather(&mut self, mine: &[u64]) -> BenchResult<Vec<u64>>;
}

/// The phases of a workload, passed down to it.
pub type PhaseBarrier<'a> = &'a mut dyn Phases;

impl Phases for Option<Team> {
    fn process(&self) -> (usize, usize) {
        self.as_ref().map_or((0, 1), |t| (t.rank, t.size))
    }

    fn barrier(&mut self) -> BenchResult<()> {
        self.as_mut().map_or(Ok(()), Team::barrier)
    }

    fn all_gather(&mut self, mine: &[u64]) -> BenchResult<Vec<u64>> {
        match self {
            None => Ok(mine.to_vec()),
            Some(team) => team.all_gather(mine),
        }
    }
}

/// The global ranks of one process's workers: worker `w` of process `p` is rank
/// `p × workers + w` of `processes × workers`, so keys, shared files and "another rank's data"
/// mean the same across processes as inside one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankSpan {
    pub first: usize,
    pub workers: usize,
    pub total: usize,
}

impl RankSpan {
    pub fn of(phases: &dyn Phases, workers: usize) -> Self {
        let (process, processes) = phases.process();
        let workers = workers.max(1);
        Self { first: process * workers, workers, total: processes * workers }
    }

    /// The global rank of local worker `w`.
    pub fn rank(&self, w: usize) -> usize {
        self.first + w
    }
}

/// How long a rank waits at a barrier for the others before giving up.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(1800);

/// This process's place among the ranks of one run.
#[derive(Debug, Clone)]
pub struct Team {
    pub rank: usize,
    pub size: usize,
    /// The shared directory holding barrier marks and each rank's report.
    pub sync_dir: PathBuf,
    barriers_passed: usize,
}

/// Rank and size from the first launcher whose variables are set: Isthmus's own, Open MPI,
/// PMI (MPICH, Intel MPI, Slurm's PMI) and Slurm.
fn rank_and_size(var: impl Fn(&str) -> Option<String>) -> Option<(usize, usize)> {
    let pairs = [
        (RANK_VAR, SIZE_VAR),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
    ];
    pairs.iter().find_map(|(rank, size)| {
        let rank = var(rank)?.trim().parse().ok()?;
        let size: usize = var(size)?.trim().parse().ok()?;
        (size > 1 && rank < size).then_some((rank, size))
    })
}

impl Team {
    /// The team this process belongs to, or `None` when it runs alone. `sync_dir` is used when
    /// the launcher did not name one (mpirun, srun); it must be shared by all ranks.
    pub fn from_env(sync_dir: Option<&Path>) -> Result<Option<Self>, String> {
        let Some((rank, size)) = rank_and_size(|name| std::env::var(name).ok()) else {
            return Ok(None);
        };
        let sync_dir = match (std::env::var_os(SYNC_VAR), sync_dir) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(dir)) => dir.to_path_buf(),
            (None, None) => {
                return Err(format!(
                    "rank {rank} of {size}: pass --sync-dir DIR, a directory on a file system all ranks share"
                ));
            }
        };
        std::fs::create_dir_all(&sync_dir).map_err(|e| format!("cannot create {}: {e}", sync_dir.display()))?;
        let team = Self { rank, size, sync_dir, barriers_passed: 0 };
        // Barriers are counted from zero, so a directory an earlier run left would let every
        // barrier pass at once.
        if team.report_path(rank).exists() {
            return Err(format!(
                "{} holds an earlier run's reports: remove it or pass another --sync-dir",
                team.sync_dir.display()
            ));
        }
        Ok(Some(team))
    }

    /// Waits until every rank has reached the same barrier (barriers are counted, so every
    /// rank must pass the same number of them, which identical arguments guarantee).
    pub fn barrier(&mut self) -> BenchResult<()> {
        let dir = self.sync_dir.join(format!("barrier-{}", self.barriers_passed));
        self.barriers_passed += 1;
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("rank-{}", self.rank)), b"")?;
        let started = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            if std::fs::read_dir(&dir)?.count() >= self.size {
                return Ok(());
            }
            if started.elapsed() > BARRIER_TIMEOUT {
                return Err(BenchError::Setup(format!(
                    "rank {}: the other ranks did not reach barrier {} within {} s",
                    self.rank,
                    self.barriers_passed - 1,
                    BARRIER_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// Every rank's `mine`, in rank order: each writes its values beside the next barrier's
    /// marks, passes the barrier, and reads the others'.
    pub fn all_gather(&mut self, mine: &[u64]) -> BenchResult<Vec<u64>> {
        let path = |rank: usize| self.sync_dir.join(format!("gather-{}-rank{rank}", self.barriers_passed));
        let mine_path = path(self.rank);
        let partial = mine_path.with_extension("partial");
        std::fs::write(&partial, mine.iter().map(u64::to_string).collect::<Vec<_>>().join(" "))?;
        std::fs::rename(&partial, &mine_path)?;
        let paths: Vec<PathBuf> = (0..self.size).map(path).collect();
        self.barrier()?;
        let mut all = Vec::with_capacity(mine.len() * self.size);
        for path in paths {
            let text = std::fs::read_to_string(&path)?;
            for value in text.split_whitespace() {
                all.push(value.parse().map_err(|_| BenchError::Setup(format!("{}: not a count", path.display())))?);
            }
        }
        Ok(all)
    }

    fn report_path(&self, rank: usize) -> PathBuf {
        self.sync_dir.join(format!("report-{rank}.json"))
    }

    /// Publishes this rank's `bytes` (a report), waits for all ranks, and on rank 0 returns
    /// every rank's, in rank order.
    pub fn gather_bytes(&mut self, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, String> {
        let path = self.report_path(self.rank);
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, bytes)
            .and_then(|()| std::fs::rename(&partial, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.barrier().map_err(|e| e.to_string())?;
        if self.rank != 0 {
            return Ok(None);
        }
        (0..self.size)
            .map(|rank| {
                let path = self.report_path(rank);
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// Processes simulated by threads, for tests of workloads run by several processes.
#[cfg(test)]
pub(crate) struct ThreadTeam {
    pub rank: usize,
    pub size: usize,
    pub barrier: std::sync::Arc<std::sync::Barrier>,
    pub slots: std::sync::Arc<std::sync::Mutex<Vec<Vec<u64>>>>,
}

#[cfg(test)]
impl ThreadTeam {
    /// One member per simulated process.
    pub(crate) fn of(size: usize) -> Vec<Self> {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(size));
        let slots = std::sync::Arc::new(std::sync::Mutex::new(vec![Vec::new(); size]));
        (0..size).map(|rank| Self { rank, size, barrier: barrier.clone(), slots: slots.clone() }).collect()
    }
}

#[cfg(test)]
impl Phases for ThreadTeam {
    fn process(&self) -> (usize, usize) {
        (self.rank, self.size)
    }

    fn barrier(&mut self) -> BenchResult<()> {
        self.barrier.wait();
        Ok(())
    }

    fn all_gather(&mut self, mine: &[u64]) -> BenchResult<Vec<u64>> {
        self.slots.lock().unwrap()[self.rank] = mine.to_vec();
        self.barrier.wait();
        let all = self.slots.lock().unwrap().concat();
        self.barrier.wait();
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_variables_give_rank_and_size() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(rank_and_size(env(&[("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "8")])), Some((3, 8)));
        assert_eq!(rank_and_size(env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")])), Some((1, 2)));
        // A single task, or a rank outside the size, is no team.
        assert_eq!(rank_and_size(env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")])), None);
        assert_eq!(rank_and_size(env(&[("PMI_RANK", "4"), ("PMI_SIZE", "4")])), None);
        assert_eq!(rank_and_size(env(&[])), None);
    }

    #[test]
    fn all_gather_through_files_returns_every_rank_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let teams: Vec<Team> =
            (0..3).map(|rank| Team { rank, size: 3, sync_dir: dir.path().to_path_buf(), barriers_passed: 0 }).collect();
        let gathered: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = teams
                .into_iter()
                .map(|mut team| {
                    scope.spawn(move || {
                        let r = team.rank as u64;
                        let first = team.all_gather(&[r, 10 * r]).unwrap();
                        // A second round must not see the first one's values.
                        let second = team.all_gather(&[100 + r]).unwrap();
                        (first, second)
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| {
                    let (a, b) = h.join().unwrap();
                    [a, b]
                })
                .collect()
        });
        for pair in gathered.chunks(2) {
            assert_eq!(pair[0], [0, 0, 1, 10, 2, 20]);
            assert_eq!(pair[1], [100, 101, 102]);
        }
    }
}
