//! `isthmus bench vpic-io` and `bdcats-io`: the particle workloads on the raw POSIX baseline and
//! on Zarr arrays, in-process (`--target embedded:///path`), through a gateway's local socket
//! (`--target unix:///socket`) and through a gateway over HTTP (`--serve` or
//! `--target http://...`), each array target in PDC-XF's strong and session modes (or the modes
//! `ISTHMUS_VPIC_MODES` names). `--svg` draws the transfer buffer in use over time. Ranks are
//! `--workers` threads in each of the run's processes (`--ranks`, or mpirun/srun with
//! `--sync-dir`): rank 0 prepares, barriers start each phase together, timings are gathered.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use isthmus_array::{Location, RemoteEndpoint};
use isthmus_posix::StoreOptions;
use isthmus_store::{Durability, RequestContext, Store};

use crate::Team;
use crate::args::{ArrayLayoutArg, BenchArgs, BenchWorkload, SHARED_GATEWAY_VAR};
use crate::engine::{create_bucket, open_engine};
use crate::gateway::spawn_gateway;
use crate::vpic::cache::CacheUsage;
use crate::vpic::write;
use crate::vpic::{self, RankTimes, VpicMode, VpicParams, VpicResult, VpicTarget};

impl From<ArrayLayoutArg> for vpic::VpicLayout {
    fn from(arg: ArrayLayoutArg) -> Self {
        match arg {
            ArrayLayoutArg::Chunks => Self::Chunks,
            ArrayLayoutArg::Shards => Self::Shards,
        }
    }
}

/// The array locations of the run, with their labels.
fn array_locations(
    args: &BenchArgs,
    endpoints: &[(String, String, String)],
) -> Result<Vec<(String, Location)>, String> {
    let mut locations = Vec::new();
    for url in &args.targets {
        if let Some(path) = url.strip_prefix("embedded://") {
            let options = StoreOptions { durability: args.durability, ..StoreOptions::default() };
            let store = open_engine(Path::new(path), options)?;
            create_bucket(&*store, &args.bucket)?;
            let location = Location::Engine {
                store,
                cx: RequestContext::process(),
                bucket: args.bucket.clone(),
                prefix: String::new(),
            };
            locations.push((format!("arrays in-process {path}"), location));
        } else if let Some(path) = isthmus_local::socket_path(url) {
            // A gateway's local socket: the engine's calls over the socket, as this process's
            // uid is served there.
            let store: Arc<dyn Store> =
                Arc::new(isthmus_local::LocalStore::connect(&path).map_err(|e| format!("cannot use {url}: {e}"))?);
            create_bucket(&*store, &args.bucket)?;
            let location = Location::Engine {
                store,
                cx: RequestContext::process(),
                bucket: args.bucket.clone(),
                prefix: String::new(),
            };
            locations.push((format!("arrays via socket {url}"), location));
        } else if url.starts_with("http://") || url.starts_with("https://") {
            let key = std::env::var("AWS_ACCESS_KEY_ID").map_err(|_| "set AWS_ACCESS_KEY_ID for HTTP targets")?;
            let secret =
                std::env::var("AWS_SECRET_ACCESS_KEY").map_err(|_| "set AWS_SECRET_ACCESS_KEY for HTTP targets")?;
            locations.push((format!("arrays via {url}"), remote(url, &key, &secret, args)?));
        } else {
            return Err(format!(
                "{url}: vpic-io and bdcats-io take embedded:///path, unix:///socket and http(s):// targets"
            ));
        }
    }
    for (endpoint, key, secret) in endpoints {
        locations.push((format!("arrays via gateway {endpoint}"), remote(endpoint, key, secret, args)?));
    }
    Ok(locations)
}

/// A gateway's bucket as an array location, the bucket created if needed.
fn remote(endpoint: &str, key: &str, secret: &str, args: &BenchArgs) -> Result<Location, String> {
    let target = crate::S3Target::addressed(endpoint, &args.bucket, key, secret, false, &args.region)
        .map_err(|e| e.to_string())?;
    crate::Target::prepare(&target).map_err(|e| format!("{endpoint}: {e}"))?;
    let endpoint = RemoteEndpoint {
        endpoint: endpoint.to_string(),
        bucket: args.bucket.clone(),
        access_key: key.to_string(),
        secret_key: secret.to_string(),
        region: args.region.clone(),
        ca_bundle: None,
    };
    Ok(Location::Remote { endpoint, prefix: String::new() })
}

/// Waits for every process of the run, when there are several.
fn barrier(team: &mut Option<Team>) -> Result<(), String> {
    team.as_mut().map_or(Ok(()), |t| t.barrier().map_err(|e| e.to_string()))
}

/// Every rank's timings of the run (this process's alone without a team).
fn gather(team: &mut Option<Team>, mine: Vec<RankTimes>) -> Result<Vec<RankTimes>, String> {
    let Some(team) = team else { return Ok(mine) };
    let flat: Vec<u64> = mine.iter().flat_map(|t| t.to_nanos()).collect();
    let all = team.all_gather(&flat).map_err(|e| e.to_string())?;
    Ok(all.chunks(RankTimes::NANOS).map(RankTimes::from_nanos).collect())
}

pub fn run(args: &BenchArgs, data_root: &Path) -> Result<(), String> {
    let mut team = Team::from_env(args.sync_dir.as_deref())?;
    let (rank, size) = team.as_ref().map_or((0, 1), |t| (t.rank, t.size));
    let threads = args.workers.first().copied().unwrap_or(1).max(1);
    let params = VpicParams {
        particles: args.particles,
        steps: args.steps,
        ranks: threads,
        first_rank: rank * threads,
        total_ranks: size * threads,
        compute: args.compute,
        durable: args.durability == Durability::Strict,
        threads: 4,
    };
    // `--ranks` started one gateway for all processes and named it in the environment.
    let shared = std::env::var(SHARED_GATEWAY_VAR).ok();
    let gateway = match (&args.serve, &shared) {
        (Some(root), None) => Some(spawn_gateway(root, args.durability)?),
        _ => None,
    };
    let mut endpoints: Vec<(String, String, String)> =
        gateway.iter().map(|(_, e, k, s)| (e.clone(), k.clone(), s.clone())).collect();
    if let (Some(_), Some(shared)) = (&args.serve, &shared)
        && let [endpoint, key, secret] = shared.split(' ').collect::<Vec<_>>()[..]
    {
        endpoints.push((endpoint.to_string(), key.to_string(), secret.to_string()));
    }
    let baseline = args.baseline.clone().unwrap_or_else(|| data_root.join(".isthmus").join("bench-posix"));
    let mut targets = vec![VpicTarget::Posix { dir: baseline }];
    let modes = modes()?;
    for (label, location) in array_locations(args, &endpoints)? {
        for &layout in &args.array_layout {
            for &mode in &modes {
                let (location, label, layout) = (location.clone(), label.clone(), layout.into());
                targets.push(VpicTarget::Arrays { location, label, mode, layout });
            }
        }
    }
    let name = workload_name(args.workload);
    if rank == 0 {
        eprintln!(
            "isthmus bench {name}: {} rank(s) x 8 properties x {} steps of {} particles ({} per region), {:?} of \
             compute between steps; {} target(s), each one run: {}",
            params.total_ranks,
            params.steps,
            params.particles,
            crate::units::format_size(params.particles * 4),
            params.compute,
            targets.len(),
            targets.iter().map(VpicTarget::describe).collect::<Vec<_>>().join(", ")
        );
    }
    let mut results: Vec<VpicResult> = Vec::new();
    for target in &targets {
        let context = |e: crate::BenchError| format!("{}: {e}", target.describe());
        if rank == 0 {
            eprintln!("{name} on {}", target.describe());
            vpic::prepare(&params, target).map_err(context)?;
        }
        barrier(&mut team)?;
        if args.workload == BenchWorkload::BdcatsIo {
            let untimed = VpicParams { compute: std::time::Duration::ZERO, ..params.clone() };
            write::write(&untimed, target).map_err(context)?;
            barrier(&mut team)?;
        }
        let (mine, cache) = match args.workload {
            BenchWorkload::VpicIo => write::write(&params, target),
            _ => vpic::read(&params, target).map(|times| (times, None)),
        }
        .map_err(context)?;
        let all = gather(&mut team, mine)?;
        // With several processes the cache samples are this process's (rank 0's) sessions.
        results.push(vpic::summarize(name, target, &VpicParams { ranks: all.len(), ..params.clone() }, &all, cache));
    }
    barrier(&mut team)?;
    if rank != 0 {
        return Ok(());
    }
    if let VpicTarget::Posix { dir } = &targets[0] {
        let _ = std::fs::remove_dir_all(dir);
    }
    println!("{}", crate::vpic::report::table(&results));
    if let Some(path) = &args.json {
        write_json(path, &params, &results)?;
    }
    if let Some(path) = &args.svg {
        let runs: Vec<(String, &CacheUsage)> =
            results.iter().filter_map(|r| r.cache.as_ref().map(|c| (r.target.clone(), c))).collect();
        let title = format!("{name}: transfer buffer in use per session (sampled every 10 ms) against its bound");
        crate::vpic::cache::write_svg(&title, &runs, path)?;
    }
    Ok(())
}

/// The array modes to run: PDC-XF's strong and session unless `ISTHMUS_VPIC_MODES` names others
/// (comma-separated: strong, session, session-per-step). An environment variable, not a flag:
/// the bench's flags live in a file this part does not own.
fn modes() -> Result<Vec<VpicMode>, String> {
    match std::env::var("ISTHMUS_VPIC_MODES") {
        Ok(list) => list.split(',').map(str::parse).collect(),
        Err(_) => Ok(VpicMode::PAPER.to_vec()),
    }
}

fn workload_name(workload: BenchWorkload) -> &'static str {
    if workload == BenchWorkload::VpicIo { "vpic-io" } else { "bdcats-io" }
}

fn write_json(path: &PathBuf, params: &VpicParams, results: &[VpicResult]) -> Result<(), String> {
    let document = serde_json::json!({
        "particles": params.particles, "steps": params.steps, "ranks": params.total_ranks,
        "compute_s": params.compute.as_secs_f64(), "results": results,
        "consistency_gains": crate::vpic::report::consistency_gains(results),
    });
    std::fs::write(path, serde_json::to_vec_pretty(&document).unwrap_or_default())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
