//! VPIC-IO and BD-CATS-IO (h5bench's particle workloads) on raw POSIX files and on Zarr arrays.
//! Each rank owns `particles` particles with 8 float32 properties; `vpic-io` writes every
//! property of its particles per time step for `steps` steps with an emulated compute time
//! between steps; `bdcats-io` reads them back property by property, as the clustering code does.
//! The baseline writes one file per property with `pwrite` (fsync per step when durable); the
//! arrays are one Zarr array per property, `steps x (ranks * particles)` chunked
//! `1 x particles` (a rank's step is one whole chunk, never read-merge-written), moved with
//! transfers in one of the modes of `write` (writes) or at strong or session consistency
//! (reads). Reported per target: the client time breakdown (transfer, wait, flush, compute),
//! bandwidth over the exposed I/O, the close overhead and the transfer buffer in use over time.

pub mod cache;
pub mod report;
pub mod run;
pub mod write;

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use isthmus_array::{
    ArraySpec, Consistency, DataType, Direction, Location, Region, Transfer, TransferOptions, Transfers, ZarrArray,
};

use crate::vpic::cache::CacheUsage;
use crate::{BenchError, BenchResult};

/// The properties of a VPIC particle (h5bench: x, y, z, id1, id2, px, py, pz).
pub const PROPERTIES: [&str; 8] = ["x", "y", "z", "id1", "id2", "px", "py", "pz"];

/// The run's shape.
#[derive(Debug, Clone)]
pub struct VpicParams {
    pub particles: u64,
    pub steps: u64,
    /// Ranks this process runs (as threads).
    pub ranks: usize,
    /// The global index of this process's first rank, and the ranks of the whole run (all
    /// processes): files and arrays are laid out for all of them.
    pub first_rank: usize,
    pub total_ranks: usize,
    /// Emulated computation between two time steps.
    pub compute: Duration,
    /// fsync the baseline's files at each step (the engine's strict durability does per chunk).
    pub durable: bool,
    /// Threads of each rank's transfer pool.
    pub threads: usize,
}

/// How the ranks move their regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VpicMode {
    /// PDC-XF's strong consistency: each region's transfer is started and waited for (its
    /// write durable and visible) before the next region's, one region at a time, no batching.
    Strong,
    /// PDC-XF's session consistency: a step's regions are started together and never waited
    /// for during the run; the session has one consistency point, at close (flush, then the
    /// waits, which then only collect outcomes). The transfer buffer bounds what is in flight.
    Session,
    /// h5bench's asynchronous VPIC-IO: session transfers, a step's regions started together,
    /// the previous step's waited for before the next step starts (double buffering). It
    /// measures how much I/O one step of compute hides, not PDC-XF's consistency point.
    SessionPerStep,
}

impl VpicMode {
    /// PDC-XF's two modes, what `isthmus bench vpic-io` runs unless told otherwise.
    pub const PAPER: [VpicMode; 2] = [VpicMode::Strong, VpicMode::Session];

    pub fn name(self) -> &'static str {
        match self {
            VpicMode::Strong => "strong",
            VpicMode::Session => "session",
            VpicMode::SessionPerStep => "session-per-step",
        }
    }

    /// The consistency of the mode's transfers (reads use it too).
    pub fn consistency(self) -> Consistency {
        match self {
            VpicMode::Strong => Consistency::Strong,
            VpicMode::Session | VpicMode::SessionPerStep => Consistency::Session,
        }
    }
}

impl std::str::FromStr for VpicMode {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "strong" => Ok(VpicMode::Strong),
            "session" => Ok(VpicMode::Session),
            "session-per-step" => Ok(VpicMode::SessionPerStep),
            other => Err(format!("unknown vpic mode {other:?}: use strong, session or session-per-step")),
        }
    }
}

/// How the particle arrays are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VpicLayout {
    /// A chunk per rank and step: each region is an object of its own (PDC-XF's region objects).
    #[default]
    Chunks,
    /// Uncompressed shards of many ranks' and steps' regions (inner chunk = one region): each
    /// region is written in place into its shard's file, as into an HDF5 file.
    Shards,
}

impl VpicLayout {
    pub fn name(self) -> &'static str {
        match self {
            VpicLayout::Chunks => "chunks",
            VpicLayout::Shards => "shards",
        }
    }
}

/// The most bytes of one shard of the `shards` layout.
const SHARD_BYTES: u64 = 256 << 20;

/// Where the particles go.
pub enum VpicTarget {
    /// Raw files in a directory, one per property.
    Posix { dir: PathBuf },
    /// Zarr arrays at a location, stored in a layout, moved with transfers in a mode.
    Arrays { location: Location, label: String, mode: VpicMode, layout: VpicLayout },
}

impl VpicTarget {
    /// `posix DIR`, or `LABEL (MODE)` (`LABEL (MODE, shards)` in the shards layout).
    pub fn describe(&self) -> String {
        match self {
            VpicTarget::Posix { dir } => format!("posix {}", dir.display()),
            VpicTarget::Arrays { label, mode, layout: VpicLayout::Chunks, .. } => format!("{label} ({})", mode.name()),
            VpicTarget::Arrays { label, mode, layout, .. } => format!("{label} ({}, {})", mode.name(), layout.name()),
        }
    }

    /// `file` for the baseline, else the arrays' layout.
    pub fn layout_name(&self) -> &'static str {
        match self {
            VpicTarget::Posix { .. } => "file",
            VpicTarget::Arrays { layout, .. } => layout.name(),
        }
    }

    /// `posix`, or the mode's name (`strong`, `session`, `session-per-step`).
    pub fn mode_name(&self) -> &'static str {
        match self {
            VpicTarget::Posix { .. } => "posix",
            VpicTarget::Arrays { mode, .. } => mode.name(),
        }
    }
}

/// What one phase on one target measured: the slowest rank's total, the mean over ranks of
/// each part of the client time (PDC-XF's Figures 8 and 10), every rank's breakdown, and the
/// transfer buffer in use over time (its Figure 7; writes to arrays only).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VpicResult {
    pub workload: String,
    pub target: String,
    /// `posix`, `strong`, `session` or `session-per-step` (see `VpicMode`).
    pub mode: String,
    /// `file` (the baseline), `chunks` or `shards` (see `VpicLayout`).
    pub layout: String,
    pub bytes: u64,
    pub total_s: f64,
    /// Time in emulated computation (measured, mean over ranks).
    pub compute_s: f64,
    /// Time in the calls that start transfers (a strong write's whole I/O; a session write's
    /// copy and any back-pressure), or in `pwrite`/`pread` on the baseline.
    pub transfer_s: f64,
    /// Time waiting for started transfers before the end of the run.
    pub wait_s: f64,
    /// Time in the run's consistency point: the flush at close and the waits after it.
    pub flush_s: f64,
    /// `flush_s` over `total_s`: the overhead of finishing transfers at close (Figure 3b).
    pub close_overhead: f64,
    /// Every rank's breakdown, in rank order.
    pub ranks: Vec<RankBreakdown>,
    /// The transfer buffer in use, sampled (this process's ranks), for array writes.
    pub cache: Option<CacheUsage>,
}

/// One rank's client time, seconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RankBreakdown {
    pub total_s: f64,
    pub transfer_s: f64,
    pub wait_s: f64,
    pub flush_s: f64,
    pub compute_s: f64,
    /// What is left: creating transfers, preparing buffers, the loop itself.
    pub other_s: f64,
}

impl VpicResult {
    /// The I/O time a rank saw (blocked in start, wait or flush).
    pub fn exposed_s(&self) -> f64 {
        self.transfer_s + self.wait_s + self.flush_s
    }

    /// Bytes over the exposed I/O time, MiB/s.
    pub fn bandwidth_mib_s(&self) -> f64 {
        self.bytes as f64 / (1 << 20) as f64 / self.exposed_s().max(1e-9)
    }
}

/// A rank's timings.
#[derive(Debug, Default, Clone, Copy)]
pub struct RankTimes {
    pub total: Duration,
    pub transfer: Duration,
    pub wait: Duration,
    pub flush: Duration,
    pub compute: Duration,
}

impl RankTimes {
    /// How many numbers `to_nanos` gives per rank.
    pub const NANOS: usize = 5;

    /// As nanoseconds, for gathering across processes.
    pub fn to_nanos(self) -> [u64; Self::NANOS] {
        [self.total, self.transfer, self.wait, self.flush, self.compute].map(|d| d.as_nanos() as u64)
    }

    pub fn from_nanos(nanos: &[u64]) -> Self {
        let [total, transfer, wait, flush, compute] =
            [0, 1, 2, 3, 4].map(|i| Duration::from_nanos(nanos.get(i).copied().unwrap_or(0)));
        Self { total, transfer, wait, flush, compute }
    }

    /// Sleeps the emulated computation, counted as compute.
    pub(crate) fn compute(&mut self, time: Duration) {
        let began = Instant::now();
        std::thread::sleep(time);
        self.compute += began.elapsed();
    }

    fn breakdown(&self) -> RankBreakdown {
        let s = |d: Duration| d.as_secs_f64();
        let parts = self.transfer + self.wait + self.flush + self.compute;
        RankBreakdown {
            total_s: s(self.total),
            transfer_s: s(self.transfer),
            wait_s: s(self.wait),
            flush_s: s(self.flush),
            compute_s: s(self.compute),
            other_s: s(self.total.saturating_sub(parts)),
        }
    }
}

pub(crate) fn values(rank: usize, step: u64, property: usize, particles: u64) -> Vec<u8> {
    let base = (step * 1000 + rank as u64 * 10 + property as u64) as f32;
    (0..particles).flat_map(|i| (base + i as f32 * 1e-3).to_le_bytes()).collect()
}

/// Runs this process's ranks as threads; each gets its global rank index.
pub(crate) fn run_ranks(
    params: &VpicParams,
    rank: impl Fn(usize) -> BenchResult<RankTimes> + Sync,
) -> BenchResult<Vec<RankTimes>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..params.ranks)
            .map(|r| {
                scope.spawn({
                    let rank = &rank;
                    move || rank(params.first_rank + r)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().map_err(|_| BenchError::Setup("a rank panicked".into()))?).collect()
    })
}

/// The result of a phase from the timings of every rank of the run.
pub fn summarize(
    workload: &str,
    target: &VpicTarget,
    params: &VpicParams,
    times: &[RankTimes],
    cache: Option<CacheUsage>,
) -> VpicResult {
    let ranks: Vec<RankBreakdown> = times.iter().map(RankTimes::breakdown).collect();
    let n = ranks.len().max(1) as f64;
    let mean = |part: fn(&RankBreakdown) -> f64| ranks.iter().map(part).sum::<f64>() / n;
    let total_s = ranks.iter().map(|r| r.total_s).fold(0.0, f64::max);
    let flush_s = mean(|r| r.flush_s);
    VpicResult {
        workload: workload.to_string(),
        target: target.describe(),
        mode: target.mode_name().to_string(),
        layout: target.layout_name().to_string(),
        bytes: params.total_ranks as u64 * params.steps * params.particles * 4 * PROPERTIES.len() as u64,
        total_s,
        compute_s: mean(|r| r.compute_s),
        transfer_s: mean(|r| r.transfer_s),
        wait_s: mean(|r| r.wait_s),
        flush_s,
        close_overhead: flush_s / total_s.max(1e-9),
        ranks,
        cache,
    }
}

/// The arrays of a run (created by `prepare`).
pub(crate) fn open_arrays(location: &Location) -> BenchResult<Vec<Arc<ZarrArray>>> {
    PROPERTIES
        .iter()
        .map(|p| ZarrArray::open(location, &format!("vpic/{p}")).map(Arc::new))
        .collect::<Result<_, _>>()
        .map_err(|e| BenchError::Setup(format!("cannot open the particle arrays: {e}")))
}

pub(crate) fn property_file(dir: &std::path::Path, property: &str) -> PathBuf {
    dir.join(format!("vpic-{property}.bin"))
}

/// Creates the target's files or arrays, empty.
pub fn prepare(params: &VpicParams, target: &VpicTarget) -> BenchResult<()> {
    match target {
        VpicTarget::Posix { dir } => {
            std::fs::create_dir_all(dir)?;
            for p in PROPERTIES {
                std::fs::File::create(property_file(dir, p))?;
            }
            Ok(())
        }
        VpicTarget::Arrays { location, layout, .. } => {
            let chunk = params.particles.max(1);
            for p in PROPERTIES {
                let shape = vec![params.steps, params.total_ranks as u64 * chunk];
                let spec = match layout {
                    VpicLayout::Chunks => ArraySpec::new(shape, DataType::Float32, vec![1, chunk]),
                    VpicLayout::Shards => {
                        // As many ranks' regions per shard row, then as many steps, as fit.
                        let row = chunk * 4;
                        let ranks = (SHARD_BYTES / row).clamp(1, params.total_ranks.max(1) as u64);
                        let steps = (SHARD_BYTES / (row * ranks)).clamp(1, params.steps.max(1));
                        let mut spec = ArraySpec::new(shape, DataType::Float32, vec![steps, ranks * chunk]);
                        spec.inner_chunks = Some(vec![1, chunk]);
                        spec
                    }
                };
                // A fresh array: the previous run's, if any, is removed first.
                isthmus_array::remove_node(location, &format!("vpic/{p}")).map_err(array_error)?;
                let array = ZarrArray::create(location, &format!("vpic/{p}"), &spec)
                    .map_err(|e| BenchError::Setup(e.to_string()))?;
                // Shards are made here, as the baseline's files are: the run writes regions.
                if *layout == VpicLayout::Shards {
                    array.allocate_shards().map_err(array_error)?;
                }
            }
            Ok(())
        }
    }
}

/// `bdcats-io`: every rank of this process reads back its particles, property by property.
pub fn read(params: &VpicParams, target: &VpicTarget) -> BenchResult<Vec<RankTimes>> {
    let times = match target {
        VpicTarget::Posix { dir } => {
            let files: Vec<std::fs::File> =
                PROPERTIES.iter().map(|p| std::fs::File::open(property_file(dir, p))).collect::<Result<_, _>>()?;
            run_ranks(params, |rank| {
                let (began, mut times) = (Instant::now(), RankTimes::default());
                let mut buf = vec![0u8; params.particles as usize * 4];
                for step in 0..params.steps {
                    let io = Instant::now();
                    for (p, file) in files.iter().enumerate() {
                        let offset = (step * params.total_ranks as u64 + rank as u64) * params.particles * 4;
                        file.read_exact_at(&mut buf, offset)?;
                        check(&buf, rank, step, p, params.particles)?;
                    }
                    times.transfer += io.elapsed();
                    times.compute(params.compute);
                }
                times.total = began.elapsed();
                Ok(times)
            })?
        }
        VpicTarget::Arrays { location, mode, .. } => {
            let arrays = open_arrays(location)?;
            run_ranks(params, |rank| {
                let session = session(params, mode.consistency())?;
                let (began, mut times) = (Instant::now(), RankTimes::default());
                let mut buf = vec![0u8; params.particles as usize * 4];
                // Reads are started one step ahead: step t+1 is in flight while t is used.
                let start_step = |step: u64, times: &mut RankTimes| -> BenchResult<Vec<Transfer>> {
                    let region = Region::new(vec![step, rank as u64 * params.particles], vec![1, params.particles]);
                    let transfers: Vec<Transfer> = arrays
                        .iter()
                        .map(|a| session.create(a, region.clone(), Direction::Read))
                        .collect::<Result<_, _>>()
                        .map_err(array_error)?;
                    let io = Instant::now();
                    let batch: Vec<(&Transfer, Option<&[u8]>)> = transfers.iter().map(|t| (t, None)).collect();
                    session.start_all(&batch).map_err(array_error)?;
                    times.transfer += io.elapsed();
                    Ok(transfers)
                };
                let mut next = start_step(0, &mut times)?;
                for step in 0..params.steps {
                    let current = std::mem::take(&mut next);
                    let io = Instant::now();
                    for (p, t) in current.iter().enumerate() {
                        session.wait(t, Some(&mut buf)).map_err(array_error)?;
                        check(&buf, rank, step, p, params.particles)?;
                    }
                    times.wait += io.elapsed();
                    if step + 1 < params.steps {
                        next = start_step(step + 1, &mut times)?;
                    }
                    times.compute(params.compute);
                }
                times.total = began.elapsed();
                Ok(times)
            })?
        }
    };
    Ok(times)
}

pub(crate) fn session(params: &VpicParams, consistency: Consistency) -> BenchResult<Transfers> {
    let options = TransferOptions { threads: params.threads, consistency, ..TransferOptions::default() };
    Transfers::new(options).map_err(array_error)
}

pub(crate) fn array_error(err: isthmus_array::ArrayError) -> BenchError {
    BenchError::Setup(format!("array: {err}"))
}

/// A read must give back what was written.
fn check(buf: &[u8], rank: usize, step: u64, property: usize, particles: u64) -> BenchResult<()> {
    let expected = values(rank, step, property, particles.min(4));
    if buf[..expected.len()] != expected[..] {
        return Err(BenchError::Setup(format!("rank {rank} step {step} property {property}: wrong data read back")));
    }
    Ok(())
}
