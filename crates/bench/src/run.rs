//! `isthmus bench`: runs the chosen workloads on the raw POSIX baseline and on each target in
//! the same run, prints the table with ratios, and writes JSON.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use isthmus_posix::StoreOptions;
use isthmus_store::Durability;

use crate::args::{BenchArgs, BenchWorkload, SHARED_GATEWAY_VAR};
use crate::gateway::spawn_gateway;
use crate::progress::{Progress, announce};
use crate::{
    EmbeddedTarget, Ior, IorVariant, LocalSocketTarget, Mdtest, Op, PosixTarget, Report, S3Target, Target, Team,
    Variant, Workload,
};

/// Starts a timed phase: waits for the other ranks, if any, then shows what runs (only rank 0
/// speaks, so a many-rank run prints one line per phase; its bar counts its own operations).
fn start_phase(team: &mut Option<Team>, message: String, expected: Option<u64>) -> Result<Progress, String> {
    if let Some(team) = team {
        team.barrier().map_err(|e| e.to_string())?;
        if team.rank != 0 {
            return Ok(Progress(None));
        }
    }
    Ok(announce(message, expected))
}

fn open_target(url: &str, bucket: &str, args: &BenchArgs) -> Result<Box<dyn Target>, String> {
    let durability = args.durability;
    if let Some(path) = url.strip_prefix("posix://") {
        return Ok(Box::new(PosixTarget { dir: PathBuf::from(path), sync: durability == Durability::Strict }));
    }
    if let Some(path) = url.strip_prefix("embedded://") {
        let options = StoreOptions { durability, ..StoreOptions::default() };
        // The data root with its pools, as the gateway sees it.
        let store =
            isthmus_pools::open_root(Path::new(path), options).map_err(|e| format!("cannot open {path}: {e}"))?;
        return Ok(Box::new(EmbeddedTarget { store, root: path.into(), bucket: bucket.to_string() }));
    }
    if let Some(path) = isthmus_local::socket_path(url) {
        let store = isthmus_local::LocalStore::connect(&path).map_err(|e| format!("cannot use {url}: {e}"))?;
        let target = LocalSocketTarget { store: Arc::new(store), address: url.to_string(), bucket: bucket.to_string() };
        return Ok(Box::new(target));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        let key = std::env::var("AWS_ACCESS_KEY_ID")
            .map_err(|_| "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for HTTP targets".to_string())?;
        let secret = std::env::var("AWS_SECRET_ACCESS_KEY")
            .map_err(|_| "set AWS_SECRET_ACCESS_KEY for HTTP targets".to_string())?;
        let target = S3Target::addressed(url, bucket, &key, &secret, args.virtual_host, &args.region);
        return Ok(Box::new(target.map_err(|e| e.to_string())?));
    }
    Err(format!(
        "unknown target {url:?}: use http://host:port, https://host:port, unix:///socket, embedded:///path or posix:///path"
    ))
}

/// Empties and prepares a target for a workload, when this process is the one that prepares,
/// once every rank is done with the target before: a workload's last phase (a cleanup) ends
/// without a barrier, and targets on one data root share the bucket, so emptying it while
/// another rank still deleted its own files failed with "bucket not empty" (seen in the suite).
fn start_fresh(team: &mut Option<Team>, target: &dyn Target, preparing: bool) -> Result<(), String> {
    if let Some(team) = team {
        team.barrier().map_err(|e| e.to_string())?;
    }
    if preparing {
        target.cleanup().map_err(|e| format!("{}: cleanup failed: {e}", target.describe()))?;
        target.prepare().map_err(|e| format!("{}: {e}", target.describe()))?;
    }
    Ok(())
}

fn default_objects(size: u64) -> usize {
    ((1u64 << 30) / size.max(1)).clamp(16, 2000) as usize
}

/// What the single-operation workload will do, said before it starts: how many timed phases
/// of --duration, and the objects get/head/delete and list fill before their phases, each fill
/// stopping after --duration at most (so the whole run is bounded by twice the timed work).
fn ops_plan(args: &BenchArgs, targets: usize) -> String {
    let phase_count = |ops: &mut dyn Iterator<Item = &Op>| -> usize {
        ops.map(|&op| if op == Op::List { 1 } else { args.size.len() }).sum::<usize>() * args.workers.len() * targets
    };
    let phases = phase_count(&mut args.ops.iter());
    let fills = phase_count(&mut args.ops.iter().filter(|op| matches!(op, Op::Get | Op::Head | Op::Delete | Op::List)));
    let seconds = args.duration.as_secs_f64();
    let mut plan = format!(
        "isthmus bench: {phases} timed phase(s) of {seconds:.1} s each on {targets} target(s), about {:.0} s",
        (phases as f64 * seconds).ceil()
    );
    if fills > 0 {
        let mut sizes: Vec<String> = Vec::new();
        if args.ops.iter().any(|op| matches!(op, Op::Get | Op::Head | Op::Delete)) {
            for &size in &args.size {
                let objects = args.objects.unwrap_or_else(|| default_objects(size));
                sizes.push(format!("{objects} x {}", crate::units::format_size(size)));
            }
        }
        if args.ops.contains(&Op::List) {
            sizes.push(format!("{} empty objects to list", args.list_objects));
        }
        plan += &format!(
            "; {fills} fill(s) before their phases ({}), each stopped after {seconds:.1} s at most: at most {:.0} s in all",
            sizes.join(", "),
            ((phases + fills) as f64 * seconds).ceil()
        );
    }
    plan
}

/// What the workloads run here will do, said before they start: the targets, the phases, how
/// many operations, and that they are bounded by counts (not by --duration).
fn workload_plan(args: &BenchArgs, targets: &[Box<dyn Target>]) -> String {
    let names: Vec<String> = targets.iter().map(|t| t.describe()).collect();
    let ranks = format!("{:?} rank(s)", args.workers);
    let mdtest = |variant: &str, bytes: u64| {
        let stonewall = args.stonewall.map_or(String::new(), |s| format!(", create stopped after {s:?}"));
        format!(
            "{variant}: {} files of {bytes} bytes per rank{} x {} iteration(s), create/stat/read/remove{stonewall}",
            args.files,
            if args.files_only { "" } else { " and their directories" },
            args.mdtest_iterations.max(1)
        )
    };
    let ior = |variant: &str, transfer: &str| {
        format!("{variant}: {} transfers of {transfer} per rank, write then read", args.transfers)
    };
    let work = match args.workload {
        BenchWorkload::MdtestEasy => mdtest("mdtest-easy", args.mdtest_bytes.unwrap_or(Variant::Easy.default_bytes())),
        BenchWorkload::MdtestHard => mdtest("mdtest-hard", args.mdtest_bytes.unwrap_or(Variant::Hard.default_bytes())),
        BenchWorkload::IorEasy => ior("ior-easy", "2 MiB"),
        BenchWorkload::IorHard => ior("ior-hard", "47008 bytes"),
        BenchWorkload::Io500 => format!(
            "io500: ior-easy, ior-hard, ior-rnd4K ({} transfers per rank), mdtest-easy, mdtest-hard ({} files per \
             rank), find, then the score",
            args.transfers, args.files
        ),
        BenchWorkload::MdWorkbench => format!(
            "md-workbench: {} datasets x {} objects per rank created, then {} round(s) of stat, read, delete, create",
            args.datasets, args.files, args.iterations
        ),
        BenchWorkload::Streams => format!(
            "streams: each of {:?} parallel streams writes then reads one object of {}",
            args.workers,
            crate::units::format_size(args.size[0])
        ),
        BenchWorkload::Cosbench => "cosbench: the workload file's stages, as many operations as it says".into(),
        _ => return String::new(),
    };
    format!(
        "isthmus bench {work}; {ranks}; on {} target(s): {}; bounded by these counts, not by --duration",
        targets.len(),
        names.join(", ")
    )
}

fn compare(args: &BenchArgs) -> Result<(), String> {
    if args.results.is_empty() {
        return Err("bench compare needs result files: isthmus bench compare a.json b.json".into());
    }
    let mut files = Vec::new();
    for path in &args.results {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let report: Report = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not an `isthmus bench --json` result: {e}", path.display()))?;
        files.push((
            path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned()),
            report,
        ));
    }
    let rows = crate::compare::rows(&files, false);
    println!("{}", crate::compare::table(&rows));
    if let Some(path) = &args.csv {
        std::fs::write(path, crate::compare::csv(&rows))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        crate::compare::write_svg(&rows, path)?;
    }
    Ok(())
}

pub fn run(args: BenchArgs) -> Result<(), String> {
    if args.workload == BenchWorkload::Compare {
        return compare(&args);
    }
    // `bench cosbench FILE.xml` names its workload file like `--cosbench FILE.xml` does.
    let cosbench_file = match (&args.cosbench, &args.results[..]) {
        (Some(file), []) => Some(file.clone()),
        (None, [file]) if args.workload == BenchWorkload::Cosbench => Some(file.clone()),
        (_, []) => None,
        (_, files) => {
            return Err(format!(
                "unexpected file arguments {files:?}: only `bench compare` takes files, and `bench cosbench` one workload file"
            ));
        }
    };
    let data_root = args.serve.clone().unwrap_or_else(|| PathBuf::from("./data"));
    if args.ranks == 0 {
        return Err("--ranks must be at least 1".into());
    }
    if args.ranks > 1 && std::env::var_os(crate::team::RANK_VAR).is_none() {
        return crate::ranks::launch_ranks(&args, &data_root);
    }
    if matches!(args.workload, BenchWorkload::VpicIo | BenchWorkload::BdcatsIo) {
        return crate::vpic::run::run(&args, &data_root);
    }
    if args.workload == BenchWorkload::Eqsim {
        return crate::eqsim::run(&args, &data_root);
    }
    if args.workload == BenchWorkload::Pools {
        return crate::pools::run(&args);
    }
    if args.workload == BenchWorkload::Doors {
        return crate::doors::run::run(&args);
    }
    let mut team = Team::from_env(args.sync_dir.as_deref())?;
    // The IO500 workloads (mdtest, IOR, MD-Workbench) place every worker of every process as one
    // rank of the run, in one directory and bucket: mdtest-hard's directory and ior-hard's file
    // are shared by all ranks, and rank 0 alone prepares and removes them. The other workloads
    // name their keys per worker, so each process works in its own directory and bucket.
    let shared_namespace = matches!(
        args.workload,
        BenchWorkload::MdtestEasy
            | BenchWorkload::MdtestHard
            | BenchWorkload::IorEasy
            | BenchWorkload::IorHard
            | BenchWorkload::Io500
            | BenchWorkload::MdWorkbench
    );
    let preparing = team.as_ref().is_none_or(|t| t.rank == 0 || !shared_namespace);
    let rank_suffix = team.as_ref().filter(|_| !shared_namespace).map(|t| format!("rank{}", t.rank));
    let in_rank_dir = |dir: PathBuf| match &rank_suffix {
        Some(suffix) => dir.join(suffix),
        None => dir,
    };
    let bucket = match &rank_suffix {
        Some(suffix) => format!("{}-{suffix}", args.bucket),
        None => args.bucket.clone(),
    };
    let baseline_dir = args.baseline.clone().unwrap_or_else(|| data_root.join(".isthmus").join("bench-posix"));
    let mut targets: Vec<Box<dyn Target>> =
        vec![Box::new(PosixTarget { dir: in_rank_dir(baseline_dir), sync: args.durability == Durability::Strict })];
    let shared_gateway = std::env::var(SHARED_GATEWAY_VAR).ok();
    let _gateway = match (&args.serve, shared_gateway) {
        (Some(_), Some(shared)) => {
            let [endpoint, key, secret] = shared.split(' ').collect::<Vec<_>>()[..] else {
                return Err(format!("{SHARED_GATEWAY_VAR} must be \"ENDPOINT ACCESS_KEY SECRET_KEY\""));
            };
            targets.push(Box::new(S3Target::new(endpoint, &bucket, key, secret).map_err(|e| e.to_string())?));
            None
        }
        (Some(root), None) => {
            let (gateway, endpoint, key, secret) = spawn_gateway(root, args.durability)?;
            targets.push(Box::new(S3Target::new(&endpoint, &bucket, &key, &secret).map_err(|e| e.to_string())?));
            Some(gateway)
        }
        (None, _) => None,
    };
    // --interleave-bucket: each object target's twin on the other bucket, by index.
    let mut twins: Vec<Option<Box<dyn Target>>> = targets.iter().map(|_| None).collect();
    for url in &args.targets {
        let url = match (url.strip_prefix("posix://"), &rank_suffix) {
            (Some(path), Some(suffix)) => format!("posix://{}", Path::new(path).join(suffix).display()),
            _ => url.clone(),
        };
        let twin = match &args.interleave_bucket {
            Some(other) if !url.starts_with("posix://") => Some(open_target(&url, other, &args)?),
            _ => None,
        };
        targets.push(open_target(&url, &bucket, &args)?);
        twins.push(twin);
    }
    if args.interleave_bucket.is_some()
        && (args.workload != BenchWorkload::Ops || args.ops != [Op::Put] || twins.iter().all(Option::is_none))
    {
        return Err(
            "--interleave-bucket takes the ops workload with --ops put and an S3, socket or embedded --target".into()
        );
    }
    let mapping = crate::mapping::S3Mapping::from(args.s3_mapping);
    if mapping != crate::mapping::S3Mapping::default() {
        if !shared_namespace {
            return Err("--s3-mapping applies to mdtest, ior, io500 and md-workbench".into());
        }
        // Every object target goes through the mapping; the POSIX baseline stays files.
        targets = targets
            .into_iter()
            .map(|t| -> Box<dyn Target> {
                if t.kind() == "posix" { t } else { Box::new(crate::mapping::MappedTarget::new(t, mapping, &bucket)) }
            })
            .collect();
    }
    let plan = workload_plan(&args, &targets);
    if preparing && !plan.is_empty() {
        eprintln!("{plan}");
    }
    let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut results = Vec::new();
    let (iors, mdtests): (&[IorVariant], &[Variant]) = match args.workload {
        BenchWorkload::Ops => (&[], &[]),
        BenchWorkload::MdtestEasy => (&[], &[Variant::Easy]),
        BenchWorkload::MdtestHard => (&[], &[Variant::Hard]),
        BenchWorkload::IorEasy => (&[IorVariant::Easy], &[]),
        BenchWorkload::IorHard => (&[IorVariant::Hard], &[]),
        BenchWorkload::Io500 => {
            (&[IorVariant::Easy, IorVariant::Hard, IorVariant::Rnd4k], &[Variant::Easy, Variant::Hard])
        }
        BenchWorkload::Streams
        | BenchWorkload::MdWorkbench
        | BenchWorkload::Cosbench
        | BenchWorkload::Compare
        | BenchWorkload::VpicIo
        | BenchWorkload::BdcatsIo
        | BenchWorkload::Eqsim
        | BenchWorkload::Pools
        | BenchWorkload::Doors => (&[], &[]),
    };
    let mut cosbench = Vec::new();
    if args.workload == BenchWorkload::Cosbench {
        let path =
            cosbench_file.as_ref().ok_or("the cosbench workload needs its file: isthmus bench cosbench FILE.xml")?;
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let workload =
            crate::cosbench::CosbenchWorkload::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if args.targets.is_empty()
            && args.serve.is_none()
            && let (Some(endpoint), Some(key), Some(secret)) =
                (&workload.endpoint, &workload.access_key, &workload.secret_key)
        {
            let target = S3Target::addressed(endpoint, &bucket, key, secret, args.virtual_host, &args.region);
            targets.push(Box::new(target.map_err(|e| e.to_string())?));
        }
        for target in &targets {
            start_fresh(&mut team, target.as_ref(), preparing)?;
            let _progress = start_phase(
                &mut team,
                format!("running COSBench workload {:?} on {}", workload.name, target.describe()),
                None,
            )?;
            cosbench.extend(
                crate::cosbench::run_synced(&workload, target.as_ref(), &mut team)
                    .map_err(|e| format!("{}: {e}", target.describe()))?,
            );
        }
    }
    if args.workload == BenchWorkload::MdWorkbench {
        for target in &targets {
            start_fresh(&mut team, target.as_ref(), preparing)?;
            for &ranks in &args.workers {
                let run = crate::MdWorkbench {
                    ranks,
                    datasets: args.datasets,
                    objects: args.files,
                    iterations: args.iterations,
                };
                let _progress = start_phase(
                    &mut team,
                    format!("running md-workbench ranks={ranks} on {}", target.describe()),
                    Some(run.expected_operations()),
                )?;
                results.extend(
                    run.run_synced(target.as_ref(), &mut team).map_err(|e| format!("{}: {e}", target.describe()))?,
                );
            }
        }
    }
    let mut streams = Vec::new();
    if args.workload == BenchWorkload::Streams {
        let size = args.size[0];
        for target in &targets {
            start_fresh(&mut team, target.as_ref(), preparing)?;
            for &n in &args.workers {
                let _progress = start_phase(
                    &mut team,
                    format!("running streams n={n} size={} on {}", crate::units::format_size(size), target.describe()),
                    Some(2 * n as u64),
                )?;
                streams.extend(
                    crate::run_streams_synced(target.as_ref(), n, size, &mut team)
                        .map_err(|e| format!("{}: {e}", target.describe()))?,
                );
            }
        }
    }
    if !iors.is_empty() || !mdtests.is_empty() {
        for target in &targets {
            start_fresh(&mut team, target.as_ref(), preparing)?;
        }
    }
    for &ranks in if iors.is_empty() && mdtests.is_empty() { &[][..] } else { &args.workers[..] } {
        for target in &targets {
            let fail = |e: crate::BenchError| format!("{}: {e}", target.describe());
            for &variant in iors {
                let run = Ior { variant, ranks, transfers: args.transfers };
                let _progress = start_phase(
                    &mut team,
                    format!(
                        "running {} ranks={ranks} transfers/rank={} on {}",
                        variant.name(),
                        args.transfers,
                        target.describe()
                    ),
                    Some(run.expected_operations()),
                )?;
                results.extend(run.run_synced(target.as_ref(), &mut team).map_err(fail)?);
            }
            if args.workload == BenchWorkload::Io500 {
                results.extend(io500_metadata(&args, target.as_ref(), ranks, &mut team).map_err(fail)?);
                continue;
            }
            for &variant in mdtests {
                let run = Mdtest {
                    directories: !args.files_only,
                    bytes: args.mdtest_bytes.unwrap_or(variant.default_bytes()),
                    iterations: args.mdtest_iterations.max(1),
                    ..Mdtest::io500(variant, ranks, args.files, args.stonewall)
                };
                let _progress = start_phase(
                    &mut team,
                    format!(
                        "running {} ranks={ranks} files/rank={} iterations={} on {}",
                        variant.name(),
                        args.files,
                        run.iterations,
                        target.describe()
                    ),
                    Some(run.expected_operations()),
                )?;
                results.extend(run.run_synced(target.as_ref(), &mut team).map_err(fail)?);
            }
        }
    }
    if args.workload == BenchWorkload::Ops {
        eprintln!("{}", ops_plan(&args, targets.len()));
    }
    for &size in if args.workload == BenchWorkload::Ops { &args.size[..] } else { &[] } {
        for target in targets.iter().chain(twins.iter().flatten()) {
            start_fresh(&mut team, target.as_ref(), preparing)?;
        }
        for &op in &args.ops {
            if op == Op::List && size != args.size[0] {
                continue;
            }
            for &workers in &args.workers {
                let objects = match op {
                    Op::List => args.list_objects,
                    _ => args.objects.unwrap_or_else(|| default_objects(size)),
                };
                let workload = Workload { op, object_size: size, workers, duration: args.duration, objects };
                for (target, twin) in targets.iter().zip(&twins) {
                    if let Some(twin) = twin {
                        let _progress = start_phase(
                            &mut team,
                            format!(
                                "running put size={} workers={workers} on {} and {} in turn, {:?} slices",
                                crate::units::format_size(size),
                                target.describe(),
                                twin.describe(),
                                args.slice
                            ),
                            None,
                        )?;
                        let pair = [target.as_ref(), twin.as_ref()];
                        let rows = crate::interleave::run_put(pair, size, workers, args.duration, args.slice)
                            .map_err(|e| format!("{}: {e}", target.describe()))?;
                        if let Some(ratio) =
                            crate::interleave::paired_ratio(&rows[0].slice_ops_per_s, &rows[1].slice_ops_per_s)
                        {
                            eprintln!(
                                "interleaved put: {} ÷ {}, median of the paired slices: {ratio:.3}",
                                target.describe(),
                                twin.describe()
                            );
                        }
                        results.extend(rows);
                        continue;
                    }
                    let _progress = start_phase(
                        &mut team,
                        format!(
                            "running {op} size={} workers={workers} on {}",
                            crate::units::format_size(size),
                            target.describe()
                        ),
                        None,
                    )?;
                    let (result, filled) =
                        workload.run_with_fill(target.as_ref()).map_err(|e| format!("{}: {e}", target.describe()))?;
                    if let Some(filled) = filled.filter(|&n| n < objects) {
                        eprintln!(
                            "{op} on {}: the fill made {filled} of {objects} objects within --duration",
                            target.describe()
                        );
                    }
                    results.push(result);
                }
            }
        }
    }
    // Ranks sharing a namespace remove it once, after all are done with it.
    if shared_namespace && let Some(team) = &mut team {
        team.barrier().map_err(|e| e.to_string())?;
    }
    for target in targets.iter().chain(twins.iter().flatten()) {
        // The process that prepared removes everything; the others what they alone made.
        let removed = if preparing { target.cleanup() } else { target.release() };
        if let Err(e) = removed {
            eprintln!("warning: {}: cleanup failed: {e}", target.describe());
        }
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
    let durability = format!("{:?}", args.durability).to_lowercase();
    let report = Report { started_unix, host, durability, results, streams, cosbench, io500: Vec::new() };
    let mut report = match &mut team {
        Some(team) => match crate::merge::gather(team, &report)? {
            Some(merged) => {
                println!(
                    "{} ranks, results merged: rates add up, latency percentiles over all ranks' operations",
                    team.size
                );
                merged
            }
            None => return Ok(()),
        },
        None => report,
    };
    println!("{}", report.table());
    if args.workload == BenchWorkload::Io500 {
        report.io500 = crate::io500_scores(&report.results);
        println!("\nIO500 phases: POSIX / HTTP gateway / in-process / local socket, % of POSIX");
        println!("{}", crate::io500::phases_table(&report.results));
        println!("\nIO500 score, computed as the IO500 does (NOT an official IO500 result: one node, short phases):");
        for s in &report.io500 {
            println!(
                "  {:9} bandwidth {:.3} GiB/s, metadata {:.2} kIOPS, score {:.3} (with ior-rnd4K: {:.3}){}",
                s.kind,
                s.bandwidth_gib_s,
                s.metadata_kiops,
                s.score,
                s.extended_score,
                if s.missing.is_empty() { String::new() } else { format!(", missing {}", s.missing.join(", ")) }
            );
        }
        if let Some(path) = &args.svg {
            let (axes, series) = crate::io500::percent_of_posix(&report.results);
            crate::radar::write_svg(path, "IO500 phases, % of POSIX", &axes, &series)?;
            println!("radar chart written to {}", path.display());
        }
    }
    if args.workload == BenchWorkload::MdWorkbench
        && let Some(path) = &args.svg
    {
        let series = crate::density::md_workbench_series(&report.results);
        let title = "MD-Workbench: density of the time per operation (stat, read, delete, create)";
        crate::density::write_svg(path, title, &series)?;
        println!("latency density written to {}", path.display());
    }
    if let Some(path) = &args.csv {
        let name = args.json.as_ref().and_then(|p| p.file_name()).map_or("run".into(), |n| n.to_string_lossy());
        let rows = crate::compare::rows(&[(name.into_owned(), report.clone())], true);
        std::fs::write(path, crate::compare::csv(&rows))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("results written to {}", path.display());
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("results written to {}", path.display());
    }
    Ok(())
}

/// The IO500's metadata phases in its order: both mdtest create phases, then find over what
/// they made, then the stat, read and delete phases of each (IO500 sizes, files only, one
/// iteration). Decision: IOR runs before (write then read per variant) rather than interleaved
/// with mdtest as the IO500 does, so find sees the mdtest trees only, which is what it matches.
fn io500_metadata(
    args: &BenchArgs,
    target: &dyn Target,
    ranks: usize,
    team: &mut Option<Team>,
) -> crate::BenchResult<Vec<crate::OpResult>> {
    let setup = |e: String| crate::BenchError::Setup(e);
    let easy = Mdtest::io500(Variant::Easy, ranks, args.files, args.stonewall);
    let hard = Mdtest::io500(Variant::Hard, ranks, args.files, args.stonewall);
    // The IO500's timestamp file: find matches what was modified since.
    let filter = crate::find::FindFilter::io500(SystemTime::now());
    let expected = easy.expected_operations() + hard.expected_operations();
    let message = format!(
        "running IO500 mdtest-easy, mdtest-hard and find ranks={ranks} files/rank={} on {}",
        args.files,
        target.describe()
    );
    let _progress = start_phase(team, message, Some(expected)).map_err(setup)?;
    let (easy_create, made_easy) = easy.create_files(target, team)?;
    let (hard_create, made_hard) = hard.create_files(target, team)?;
    let find = crate::find::run_find(target, team, ranks, &filter)?;
    let mut results = vec![easy_create];
    results.extend(easy.after_create(target, team, &made_easy)?);
    results.push(hard_create);
    results.extend(hard.after_create(target, team, &made_hard)?);
    results.push(find);
    Ok(results)
}
