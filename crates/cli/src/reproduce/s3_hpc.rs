//! Gadban and Kunkel's study of the S3 API for HPC workloads: the IO500 phases and MD-Workbench
//! on the file system, through an S3 gateway over HTTP, through S3Embedded (the S3 calls mapped
//! to file calls in-process: Isthmus's embedded door) and through S3Remote (one gateway per node
//! reached without HTTP: Isthmus's local socket); ranks as processes; the IOR/mdtest mappings of
//! files to buckets; MD-Workbench's latency density (Figure 8) and the radar of Figure 10.

use isthmus_bench::Report;
use isthmus_bench::report::{figure, phase_name};
use isthmus_bench::workload::OpResult;
use isthmus_store::Durability;

use super::report::{Section, StudyReport, Table, number, percent, percent_range};
use super::runner::{Runner, path_arg, words};

/// What the study published, as this project quotes it (DESIGN.md and README).
const PUBLISHED_GATEWAY_RANGE: (f64, f64) = (0.015, 0.23);
const PUBLISHED_EMBEDDED_MDTEST_HARD_STAT: f64 = 1.42;

/// The systems of the study, by the kind of target that plays each.
const SYSTEMS: [(&str, &str); 3] =
    [("s3", "S3 gateway over HTTP"), ("embedded", "in-process (S3Embedded)"), ("local", "local socket (S3Remote)")];

/// The targets every run of the study measures besides the POSIX baseline: one gateway
/// (HTTP and local socket) and the engine in-process, on one data root.
struct Doors {
    _gateway: crate::bench_doors::Gateway,
    args: Vec<String>,
}

fn doors(runner: &mut Runner, name: &str) -> Result<Doors, String> {
    let root = runner.fresh_dir(name)?;
    let work = runner.fresh_dir(&format!("{name}-gateway"))?;
    let gateway = crate::bench_doors::start_gateway(&root, &work, Durability::Strict)?;
    runner.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), gateway.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY".into(), gateway.secret_key.clone()),
    ];
    let mut args = vec![
        "--target".into(),
        format!("http://{}", gateway.address),
        "--target".into(),
        format!("embedded://{}", root.display()),
        "--target".into(),
        format!("unix://{}", gateway.socket.display()),
        "--baseline".into(),
    ];
    args.push(path_arg(&runner.fresh_dir(&format!("{name}-posix"))?));
    Ok(Doors { _gateway: gateway, args })
}

/// The ranks and sizes of the run: the paper's Table 3 ran 2 nodes x 5 processes.
fn scale(runner: &Runner) -> Vec<String> {
    if runner.quick {
        words(&["--ranks", "2", "--workers", "1", "--files", "500", "--transfers", "16"])
    } else {
        words(&["--ranks", "5", "--workers", "1", "--files", "5000", "--transfers", "128"])
    }
}

pub fn run(runner: &mut Runner, report: &mut StudyReport) -> Result<(), String> {
    let doors_run = doors(runner, "io500")?;
    let mut args = words(&["io500"]);
    args.extend(scale(runner));
    args.extend(doors_run.args.iter().cloned());
    let radar = runner.output("io500-radar.svg");
    args.extend(["--svg".into(), path_arg(&radar)]);
    let io500: Report = runner.bench("io500", &args)?;
    drop(doors_run);
    report.sections.push(io500_section(&io500, "io500-radar.svg")?);
    Ok(())
}

/// `r` as a share of the POSIX result of the same phase.
fn share(results: &[OpResult], r: &OpResult) -> Option<f64> {
    isthmus_bench::report::ratio_to_posix(results, r)
}

/// The phases of a run in order, POSIX's figure and unit.
fn phases(results: &[OpResult]) -> Vec<&OpResult> {
    results.iter().filter(|r| r.kind == "posix").collect()
}

fn io500_section(result: &Report, radar: &str) -> Result<Section, String> {
    let results = &result.results;
    let mut section = Section::new("IO500 phases through every door (the paper's Table 3 and Figure 10)");
    section.text.push(
        "Each phase on the file system (POSIX) and, in the same run on the same files' file system, through \
         Isthmus's S3 gateway over HTTP, in-process (the role of the paper's S3Embedded) and through the \
         gateway's local socket (the role of S3Remote), as a share of POSIX. Ranks are processes, each its own \
         client, as MPI ranks are."
            .into(),
    );
    let mut header = vec!["phase", "POSIX"];
    header.extend(SYSTEMS.iter().map(|(_, name)| *name));
    let mut table = Table::new(&header);
    let posix_phases = phases(results);
    if posix_phases.is_empty() {
        return Err("the IO500 run reported no POSIX phases".into());
    }
    for base in &posix_phases {
        let unit = if base.workload.starts_with("ior") { "MiB/s" } else { "op/s" };
        let value = if unit == "MiB/s" { base.mib_per_s } else { figure(base) };
        let mut row = vec![phase_name(base), format!("{} {unit}", number(value))];
        for (kind, _) in SYSTEMS {
            let cell = results
                .iter()
                .find(|r| r.kind == kind && r.workload == base.workload && r.op == base.op)
                .and_then(|r| share(results, r))
                .map(percent);
            row.push(cell.unwrap_or_else(|| "-".into()));
        }
        table.row(row);
    }
    let scores = isthmus_bench::io500_scores(results);
    let mut score_row = vec!["score (bandwidth GiB/s x metadata kIOPS, root)".to_string()];
    let posix_score = scores.iter().find(|s| s.kind == "posix").map_or(0.0, |s| s.score);
    score_row.push(number(posix_score));
    for (kind, _) in SYSTEMS {
        let cell = scores
            .iter()
            .find(|s| s.kind == kind)
            .map(|s| format!("{} ({})", number(s.score), percent(s.score / posix_score)));
        score_row.push(cell.unwrap_or_else(|| "-".into()));
    }
    table.row(score_row);
    section.tables.push(table);
    section.figures.push((radar.into(), "IO500 phases as % of POSIX, per door (Figure 10's radar)".into()));
    let shares = |kind: &str| -> Vec<f64> {
        results.iter().filter(|r| r.kind == kind).filter_map(|r| share(results, r)).collect()
    };
    let (lo, hi) = PUBLISHED_GATEWAY_RANGE;
    section.differences.push(format!(
        "The paper's MinIO gateway on Lustre reached {}-{} of the file system across the IO500 phases (4 nodes x \
         20 processes); Isthmus's HTTP gateway reaches {} here.",
        percent(lo),
        percent(hi),
        percent_range(&shares("s3"))
    ));
    let hard_stat = results
        .iter()
        .find(|r| r.kind == "embedded" && phase_name(r) == "mdtest-hard stat")
        .and_then(|r| share(results, r));
    section.differences.push(format!(
        "S3Embedded reached {} of Lustre on mdtest-hard stat; Isthmus in-process reaches {} (all phases: {}).",
        percent(PUBLISHED_EMBEDDED_MDTEST_HARD_STAT),
        hard_stat.map_or_else(|| "-".into(), percent),
        percent_range(&shares("embedded"))
    ));
    let median = |kind: &str| {
        let mut values = shares(kind);
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let (http, socket, embedded) = (median("s3"), median("local"), median("embedded"));
    let between = http <= socket && socket <= embedded;
    section.differences.push(format!(
        "The paper found S3Remote between the HTTP gateway and S3Embedded; the local socket's median share of \
         POSIX here is {} against {} (HTTP) and {} (in-process): {}.",
        percent(socket),
        percent(http),
        percent(embedded),
        if between { "the same order" } else { "not the same order" }
    ));
    section.differences.push(
        "The paper's own Table 3 values (2 nodes x 5 processes on Mistral's Lustre) are not in this repository; \
         this run is one node of 2 cores with an ext4 file system, so shares, not rates, compare."
            .into(),
    );
    Ok(section)
}
