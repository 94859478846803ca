//! vpic-io's writes to arrays in the consistency modes PDC-XF compares (its Figure 10: transfer,
//! wait and flush time under strong and session consistency), and h5bench's asynchronous
//! VPIC-IO (a step's writes waited for before the next step's start), each rank timed by part.

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use isthmus_array::{Direction, Region, Transfer, Transfers, ZarrArray};

use crate::vpic::cache::{CacheSampler, CacheUsage};
use crate::vpic::{
    PROPERTIES, RankTimes, VpicMode, VpicParams, VpicResult, VpicTarget, array_error, open_arrays, prepare,
    property_file, run_ranks, session, summarize, values,
};
use crate::{BenchError, BenchResult};

/// How often the transfer buffer in use is sampled during the write phase.
pub const CACHE_SAMPLE_INTERVAL: Duration = Duration::from_millis(10);

/// Writes every rank's steps to `arrays` (one per property) in `mode`, sampling the transfer
/// buffer in use of this process's sessions meanwhile.
pub(crate) fn write_arrays(
    params: &VpicParams,
    arrays: &[Arc<ZarrArray>],
    mode: VpicMode,
) -> BenchResult<(Vec<RankTimes>, CacheUsage)> {
    let sessions: Vec<Transfers> =
        (0..params.ranks).map(|_| session(params, mode.consistency())).collect::<BenchResult<_>>()?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| CacheSampler::new(CACHE_SAMPLE_INTERVAL).run(&sessions, &stop));
        let times = run_ranks(params, |rank| {
            let session = &sessions[rank - params.first_rank];
            let ranked = Ranked { params, arrays, session, rank };
            match mode {
                VpicMode::Strong => ranked.strong(),
                VpicMode::Session => ranked.session(),
                VpicMode::SessionPerStep => ranked.session_per_step(),
            }
        });
        stop.store(true, Ordering::Release);
        let cache = sampler.join().map_err(|_| BenchError::Setup("the cache sampler panicked".into()))?;
        Ok((times?, cache))
    })
}

/// One rank's view of the run.
struct Ranked<'a> {
    params: &'a VpicParams,
    arrays: &'a [Arc<ZarrArray>],
    session: &'a Transfers,
    rank: usize,
}

impl Ranked<'_> {
    /// The rank's region of a step: one whole chunk of each property's array.
    fn region(&self, step: u64) -> Region {
        Region::new(vec![step, self.rank as u64 * self.params.particles], vec![1, self.params.particles])
    }

    /// The step's buffers, one per property (made before any timing starts).
    fn data(&self, step: u64) -> Vec<Vec<u8>> {
        (0..PROPERTIES.len()).map(|p| values(self.rank, step, p, self.params.particles)).collect()
    }

    /// A write transfer of the step's region on every array.
    fn create_step(&self, step: u64) -> BenchResult<Vec<Transfer>> {
        let region = self.region(step);
        self.arrays
            .iter()
            .map(|a| self.session.create(a, region.clone(), Direction::Write))
            .collect::<Result<_, _>>()
            .map_err(array_error)
    }

    /// Starts a step's transfers together (`start_all`), timed as transfer.
    fn start_step(&self, transfers: &[Transfer], data: &[Vec<u8>], times: &mut RankTimes) -> BenchResult<()> {
        let batch: Vec<(&Transfer, Option<&[u8]>)> =
            transfers.iter().zip(data).map(|(t, d)| (t, Some(d.as_slice()))).collect();
        let io = Instant::now();
        self.session.start_all(&batch).map_err(array_error)?;
        times.transfer += io.elapsed();
        Ok(())
    }

    fn wait(&self, transfers: &[Transfer]) -> BenchResult<()> {
        transfers.iter().try_for_each(|t| self.session.wait(t, None).map_err(array_error))
    }

    /// Region by region: start (the I/O is done when it returns), then wait.
    fn strong(&self) -> BenchResult<RankTimes> {
        let (began, mut times) = (Instant::now(), RankTimes::default());
        for step in 0..self.params.steps {
            let data = self.data(step);
            for (transfer, bytes) in self.create_step(step)?.iter().zip(&data) {
                let io = Instant::now();
                self.session.start(transfer, Some(bytes)).map_err(array_error)?;
                times.transfer += io.elapsed();
                let io = Instant::now();
                self.session.wait(transfer, None).map_err(array_error)?;
                times.wait += io.elapsed();
            }
            times.compute(self.params.compute);
        }
        // The end of the session: nothing is left to make visible, measured all the same.
        let io = Instant::now();
        self.session.flush();
        times.flush += io.elapsed();
        times.total = began.elapsed();
        Ok(times)
    }

    /// Every step started, none waited for until the session's one consistency point.
    fn session(&self) -> BenchResult<RankTimes> {
        let (began, mut times) = (Instant::now(), RankTimes::default());
        let mut started: Vec<Transfer> = Vec::new();
        for step in 0..self.params.steps {
            let data = self.data(step);
            let transfers = self.create_step(step)?;
            self.start_step(&transfers, &data, &mut times)?;
            started.extend(transfers);
            times.compute(self.params.compute);
        }
        let io = Instant::now();
        self.session.flush();
        self.wait(&started)?;
        times.flush += io.elapsed();
        times.total = began.elapsed();
        Ok(times)
    }

    /// A step's transfers waited for before the next step's are started.
    fn session_per_step(&self) -> BenchResult<RankTimes> {
        let (began, mut times) = (Instant::now(), RankTimes::default());
        let mut in_flight: Vec<Transfer> = Vec::new();
        for step in 0..self.params.steps {
            let data = self.data(step);
            let transfers = self.create_step(step)?;
            self.start_step(&transfers, &data, &mut times)?;
            let io = Instant::now();
            self.wait(&std::mem::replace(&mut in_flight, transfers))?;
            times.wait += io.elapsed();
            times.compute(self.params.compute);
        }
        let io = Instant::now();
        self.session.flush();
        self.wait(&in_flight)?;
        times.flush += io.elapsed();
        times.total = began.elapsed();
        Ok(times)
    }
}

/// `vpic-io`: every rank of this process writes its particles' 8 properties per step. Array
/// targets also answer the transfer buffer in use over the run.
pub fn write(params: &VpicParams, target: &VpicTarget) -> BenchResult<(Vec<RankTimes>, Option<CacheUsage>)> {
    match target {
        VpicTarget::Posix { dir } => {
            let files: Vec<std::fs::File> = PROPERTIES
                .iter()
                .map(|p| std::fs::OpenOptions::new().write(true).open(property_file(dir, p)))
                .collect::<Result<_, _>>()?;
            let times = run_ranks(params, |rank| {
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
                    times.transfer += io.elapsed();
                    times.compute(params.compute);
                }
                times.total = began.elapsed();
                Ok(times)
            })?;
            Ok((times, None))
        }
        VpicTarget::Arrays { location, mode, .. } => {
            let arrays = open_arrays(location)?;
            let (times, cache) = write_arrays(params, &arrays, *mode)?;
            Ok((times, Some(cache)))
        }
    }
}

/// vpic-io on one target by this process alone, prepared first: what a report calls (`isthmus
/// bench vpic-io` adds the barriers and gathering of a run over several processes).
pub fn measure_write(params: &VpicParams, target: &VpicTarget) -> BenchResult<VpicResult> {
    prepare(params, target)?;
    let (times, cache) = write(params, target)?;
    Ok(summarize("vpic-io", target, params, &times, cache))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vpic::{VpicLayout, VpicTarget, prepare};
    use isthmus_array::Location;
    use isthmus_posix::{PosixStore, StoreOptions};
    use isthmus_store::{RequestContext, Store};

    fn engine(dir: &std::path::Path) -> Location {
        let store = PosixStore::open(dir, StoreOptions::default()).unwrap();
        store.create_bucket(&RequestContext::process(), "particles", &Default::default()).unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        Location::Engine { store, cx: RequestContext::process(), bucket: "particles".into(), prefix: String::new() }
    }

    /// The files under `dir`, relative, sorted.
    fn walk_files(dir: &std::path::Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(at) = pending.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    found.push(path.strip_prefix(dir).unwrap().display().to_string());
                }
            }
        }
        found.sort();
        found
    }

    /// Every mode in each layout leaves every rank's steps in the arrays; session copies buffers (its peak
    /// is at least one step's regions) where strong copies nothing; each rank's parts add up
    /// to no more than its total.
    #[test]
    fn every_mode_writes_every_region_and_times_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        let location = engine(dir.path());
        let params = VpicParams {
            particles: 64,
            steps: 3,
            ranks: 2,
            first_rank: 0,
            total_ranks: 2,
            compute: Duration::from_millis(2),
            durable: true,
            threads: 2,
        };
        let step_bytes = 64 * 4 * PROPERTIES.len() as u64;
        let modes = [VpicMode::Strong, VpicMode::Session, VpicMode::SessionPerStep];
        for (mode, layout) in modes.into_iter().flat_map(|m| [(m, VpicLayout::Chunks), (m, VpicLayout::Shards)]) {
            let target = VpicTarget::Arrays { location: location.clone(), label: "engine".into(), mode, layout };
            prepare(&params, &target).unwrap();
            let (times, cache) = write(&params, &target).unwrap();
            let cache = cache.unwrap();
            assert_eq!(times.len(), 2);
            for t in &times {
                assert!(t.transfer + t.wait + t.flush + t.compute <= t.total, "{mode:?}: {t:?}");
                assert!(t.compute >= Duration::from_millis(6), "{mode:?}: {t:?}");
            }
            let result = crate::vpic::summarize("vpic-io", &target, &params, &times, Some(cache.clone()));
            assert_eq!((result.mode.as_str(), result.ranks.len()), (mode.name(), 2));
            assert_eq!(result.layout, layout.name());
            assert!((result.close_overhead - result.flush_s / result.total_s).abs() < 1e-9);
            match mode {
                VpicMode::Strong => assert_eq!(cache.peak_bytes, 0, "strong copies nothing"),
                _ => assert!(cache.peak_bytes >= step_bytes, "{mode:?}: peak {}", cache.peak_bytes),
            }
            assert!(!cache.samples.is_empty());
            for (p, property) in PROPERTIES.iter().enumerate() {
                let array = ZarrArray::open(&location, &format!("vpic/{property}")).unwrap();
                for rank in 0..2 {
                    for step in 0..3 {
                        let region = Region::new(vec![step, rank as u64 * 64], vec![1, 64]);
                        assert_eq!(array.read_vec(&region).unwrap(), values(rank, step, p, 64), "{mode:?}");
                    }
                }
                // Sharded: both ranks' three steps in one object, written in place.
                let objects = dir.path().join(format!("particles/vpic/{property}/c"));
                let files = walk_files(&objects);
                match layout {
                    VpicLayout::Shards => assert_eq!(files, ["0/0"], "{mode:?}"),
                    VpicLayout::Chunks => assert_eq!(files.len(), 6, "{mode:?}"),
                }
            }
        }
        // What a report calls: prepared, written and summarized in one.
        let target = VpicTarget::Arrays {
            location,
            label: "engine".into(),
            mode: VpicMode::Session,
            layout: Default::default(),
        };
        let result = measure_write(&params, &target).unwrap();
        assert_eq!((result.bytes, result.mode.as_str()), (2 * 3 * step_bytes, "session"));
        assert!(result.cache.is_some_and(|c| c.peak_bytes >= step_bytes));
    }
}
