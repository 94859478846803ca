//! VPIC-IO and BD-CATS-IO (h5bench's particle workloads) on raw POSIX files and on Zarr arrays.
//! Each rank owns `particles` particles with 8 float32 properties; `vpic-io` writes every
//! property of its particles per time step for `steps` steps with an emulated compute time
//! between steps; `bdcats-io` reads them back property by property, as the clustering code does.
//! The baseline writes one file per property with `pwrite` (fsync per step when durable); the
//! arrays are one Zarr array per property, `steps x (ranks * particles)` chunked
//! `1 x particles` (a rank's step is one whole chunk, never read-merge-written), moved with
//! transfers at strong or session consistency. Reported per target: total time, time in start
//! and in wait (the I/O a rank saw), bandwidth over that time, and the I/O hidden behind compute.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use isthmus_array::{
    ArraySpec, Consistency, DataType, Direction, Location, Region, Transfer, TransferOptions, Transfers, ZarrArray,
};

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

/// Where the particles go.
pub enum VpicTarget {
    /// Raw files in a directory, one per property.
    Posix { dir: PathBuf },
    /// Zarr arrays at a location, moved with transfers at a consistency.
    Arrays { location: Location, label: String, consistency: Consistency },
}

impl VpicTarget {
    pub fn describe(&self) -> String {
        match self {
            VpicTarget::Posix { dir } => format!("posix {}", dir.display()),
            VpicTarget::Arrays { label, consistency, .. } => {
                format!("{label} ({})", if *consistency == Consistency::Strong { "strong" } else { "session" })
            }
        }
    }
}

/// What one phase on one target measured (times are the slowest rank's; start and wait the
/// mean over ranks).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VpicResult {
    pub workload: String,
    pub target: String,
    pub bytes: u64,
    pub total_s: f64,
    pub compute_s: f64,
    pub start_s: f64,
    pub wait_s: f64,
}

impl VpicResult {
    /// The I/O time a rank saw (blocked in start or wait).
    pub fn exposed_s(&self) -> f64 {
        self.start_s + self.wait_s
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
    pub start: Duration,
    pub wait: Duration,
}

impl RankTimes {
    /// As nanoseconds, for gathering across processes.
    pub fn to_nanos(self) -> [u64; 3] {
        [self.total, self.start, self.wait].map(|d| d.as_nanos() as u64)
    }

    pub fn from_nanos(nanos: &[u64]) -> Self {
        let [total, start, wait] = [0, 1, 2].map(|i| Duration::from_nanos(nanos.get(i).copied().unwrap_or(0)));
        Self { total, start, wait }
    }
}

fn values(rank: usize, step: u64, property: usize, particles: u64) -> Vec<u8> {
    let base = (step * 1000 + rank as u64 * 10 + property as u64) as f32;
    (0..particles).flat_map(|i| (base + i as f32 * 1e-3).to_le_bytes()).collect()
}

/// Runs this process's ranks as threads; each gets its global rank index.
fn run_ranks(
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
pub fn summarize(workload: &str, target: &VpicTarget, params: &VpicParams, times: &[RankTimes]) -> VpicResult {
    let n = times.len().max(1) as f64;
    VpicResult {
        workload: workload.to_string(),
        target: target.describe(),
        bytes: params.total_ranks as u64 * params.steps * params.particles * 4 * PROPERTIES.len() as u64,
        total_s: times.iter().map(|t| t.total.as_secs_f64()).fold(0.0, f64::max),
        compute_s: params.compute.as_secs_f64() * params.steps as f64,
        start_s: times.iter().map(|t| t.start.as_secs_f64()).sum::<f64>() / n,
        wait_s: times.iter().map(|t| t.wait.as_secs_f64()).sum::<f64>() / n,
    }
}

/// The arrays of a run (created by `prepare`).
fn open_arrays(location: &Location) -> BenchResult<Vec<Arc<ZarrArray>>> {
    PROPERTIES
        .iter()
        .map(|p| ZarrArray::open(location, &format!("vpic/{p}")).map(Arc::new))
        .collect::<Result<_, _>>()
        .map_err(|e| BenchError::Setup(format!("cannot open the particle arrays: {e}")))
}

fn property_file(dir: &std::path::Path, property: &str) -> PathBuf {
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
        VpicTarget::Arrays { location, .. } => {
            let chunk = params.particles.max(1);
            for p in PROPERTIES {
                let spec = ArraySpec::new(
                    vec![params.steps, params.total_ranks as u64 * chunk],
                    DataType::Float32,
                    vec![1, chunk],
                );
                // A fresh array: the previous run's, if any, is removed first.
                isthmus_array::remove_node(location, &format!("vpic/{p}")).map_err(array_error)?;
                ZarrArray::create(location, &format!("vpic/{p}"), &spec)
                    .map_err(|e| BenchError::Setup(e.to_string()))?;
            }
            Ok(())
        }
    }
}

/// `vpic-io`: every rank of this process writes its particles' 8 properties per step.
pub fn write(params: &VpicParams, target: &VpicTarget) -> BenchResult<Vec<RankTimes>> {
    let times = match target {
        VpicTarget::Posix { dir } => {
            let files: Vec<std::fs::File> = PROPERTIES
                .iter()
                .map(|p| std::fs::OpenOptions::new().write(true).open(property_file(dir, p)))
                .collect::<Result<_, _>>()?;
            run_ranks(params, |rank| {
                let (began, mut times) = (Instant::now(), RankTimes::default());
                for step in 0..params.steps {
                    let io = Instant::now();
                    for (p, file) in files.iter().enumerate() {
                        let offset = (step * params.total_ranks as u64 + rank as u64) * params.particles * 4;
                        file.write_all_at(&values(rank, step, p, params.particles), offset)?;
                        if params.durable {
                            file.sync_data()?;
                        }
                    }
                    times.start += io.elapsed();
                    std::thread::sleep(params.compute);
                }
                times.total = began.elapsed();
                Ok(times)
            })?
        }
        VpicTarget::Arrays { location, consistency, .. } => {
            let arrays = open_arrays(location)?;
            run_ranks(params, |rank| {
                let session = session(params, *consistency)?;
                let (began, mut times) = (Instant::now(), RankTimes::default());
                let mut in_flight: Vec<Transfer> = Vec::new();
                for step in 0..params.steps {
                    let data: Vec<Vec<u8>> =
                        (0..PROPERTIES.len()).map(|p| values(rank, step, p, params.particles)).collect();
                    let region = Region::new(vec![step, rank as u64 * params.particles], vec![1, params.particles]);
                    let transfers: Vec<Transfer> = arrays
                        .iter()
                        .map(|a| session.create(a, region.clone(), Direction::Write))
                        .collect::<Result<_, _>>()
                        .map_err(array_error)?;
                    let io = Instant::now();
                    let batch: Vec<(&Transfer, Option<&[u8]>)> =
                        transfers.iter().zip(&data).map(|(t, d)| (t, Some(d.as_slice()))).collect();
                    session.start_all(&batch).map_err(array_error)?;
                    times.start += io.elapsed();
                    // The previous step's writes must be done before this step's buffers are
                    // reused (h5bench waits the same way).
                    let io = Instant::now();
                    for t in in_flight.drain(..) {
                        session.wait(&t, None).map_err(array_error)?;
                    }
                    times.wait += io.elapsed();
                    in_flight = transfers;
                    std::thread::sleep(params.compute);
                }
                let io = Instant::now();
                for t in in_flight.drain(..) {
                    session.wait(&t, None).map_err(array_error)?;
                }
                times.wait += io.elapsed();
                times.total = began.elapsed();
                Ok(times)
            })?
        }
    };
    Ok(times)
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
                    times.start += io.elapsed();
                    std::thread::sleep(params.compute);
                }
                times.total = began.elapsed();
                Ok(times)
            })?
        }
        VpicTarget::Arrays { location, consistency, .. } => {
            let arrays = open_arrays(location)?;
            run_ranks(params, |rank| {
                let session = session(params, *consistency)?;
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
                    times.start += io.elapsed();
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
                    std::thread::sleep(params.compute);
                }
                times.total = began.elapsed();
                Ok(times)
            })?
        }
    };
    Ok(times)
}

fn session(params: &VpicParams, consistency: Consistency) -> BenchResult<Transfers> {
    let options = TransferOptions { threads: params.threads, consistency, ..TransferOptions::default() };
    Transfers::new(options).map_err(array_error)
}

fn array_error(err: isthmus_array::ArrayError) -> BenchError {
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

/// The results as a table: bandwidth over exposed I/O, % of the POSIX baseline of the same
/// workload, and the I/O hidden behind compute (a session run against the strong run of the
/// same target).
pub fn table(results: &[VpicResult]) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED).set_header([
        "workload",
        "target",
        "total s",
        "compute s",
        "in start s",
        "in wait s",
        "MiB/s (exposed I/O)",
        "% of POSIX",
        "hidden s",
    ]);
    for r in results {
        let posix = results.iter().find(|p| p.workload == r.workload && p.target.starts_with("posix"));
        let strong = r.target.strip_suffix(" (session)").and_then(|label| {
            results.iter().find(|s| s.workload == r.workload && s.target == format!("{label} (strong)"))
        });
        table.add_row([
            r.workload.clone(),
            r.target.clone(),
            format!("{:.3}", r.total_s),
            format!("{:.3}", r.compute_s),
            format!("{:.3}", r.start_s),
            format!("{:.3}", r.wait_s),
            format!("{:.1}", r.bandwidth_mib_s()),
            posix.map_or("-".into(), |p| format!("{:.0} %", 100.0 * r.bandwidth_mib_s() / p.bandwidth_mib_s())),
            strong.map_or("-".into(), |s| format!("{:.3}", (s.exposed_s() - r.exposed_s()).max(0.0))),
        ]);
    }
    table.to_string()
}
