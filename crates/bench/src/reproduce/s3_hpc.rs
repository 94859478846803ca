//! Gadban and Kunkel's study of the S3 API for HPC workloads: the IO500 phases and MD-Workbench
//! on the file system, through an S3 gateway over HTTP, through S3Embedded (the S3 calls mapped
//! to file calls in-process: Isthmus's embedded door) and through S3Remote (one gateway per node
//! reached without HTTP: Isthmus's local socket); ranks as processes; the IOR/mdtest mappings of
//! files to buckets; MD-Workbench's latency density (Figure 8) and the radar of Figure 10. With
//! `--tools DIR`, the community's own IOR, mdtest and MD-Workbench built with S3-libs3 run through
//! the same doors beside them (`community`).

mod community;
mod tool_output;
mod tools;

pub use tools::Tools;

use isthmus_store::Durability;

use crate::Report;
use crate::io500::{door_name, phase_figure, phase_of};
use crate::report::{figure, phase_name};
use crate::workload::OpResult;

use super::report::{Section, StudyReport, Table, number, percent, percent_range};
use super::runner::{Runner, path_arg, words};

/// What the study published, as this project quotes it (docs/benchmarks/reproduce.md, s3-hpc, and docs/benchmarks/doors.md).
const PUBLISHED_GATEWAY_RANGE: (f64, f64) = (0.015, 0.23);
const PUBLISHED_EMBEDDED_MDTEST_HARD_STAT: f64 = 1.42;

/// The targets every run of the study measures besides the POSIX baseline: one gateway
/// (HTTP and local socket) and the engine in-process, on one data root.
struct Doors {
    gateway: crate::gateway::Gateway,
    /// The gateway's data root, which the in-process door opens too.
    root: std::path::PathBuf,
    /// The POSIX baseline's directory.
    posix: std::path::PathBuf,
    args: Vec<String>,
}

fn start_doors(runner: &mut Runner, name: &str) -> Result<Doors, String> {
    let root = runner.fresh_dir(name)?;
    let work = runner.scratch_dir(name)?;
    let gateway = crate::gateway::start_gateway(&root, &work, Durability::Strict)?;
    runner.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), gateway.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY".into(), gateway.secret_key.clone()),
    ];
    runner.commands.push(format!(
        "# a gateway on {} serving HTTP at {} and the local socket {}, started by the study (its keys in the \
         environment)",
        root.display(),
        gateway.address,
        gateway.socket.display()
    ));
    let mut args = vec![
        "--target".into(),
        format!("http://{}", gateway.address),
        "--target".into(),
        format!("embedded://{}", root.display()),
        "--target".into(),
        format!("unix://{}", gateway.socket.display()),
        "--baseline".into(),
    ];
    let posix = runner.fresh_dir(&format!("{name}-posix"))?;
    args.push(path_arg(&posix));
    Ok(Doors { gateway, root, posix, args })
}

/// The ranks and sizes of the run: the paper's Table 3 ran 2 nodes x 5 processes.
fn scale(runner: &Runner) -> Vec<String> {
    if runner.quick {
        words(&["--ranks", "2", "--workers", "1", "--files", "500", "--transfers", "16"])
    } else {
        words(&["--ranks", "5", "--workers", "1", "--files", "5000", "--transfers", "128"])
    }
}

/// The study; with `tools`, the community's tools' section last, their rows beside those of
/// the first IO500 run, and every other section says its rows are the project's own.
pub fn run(runner: &mut Runner, report: &mut StudyReport, tools: Option<&Tools>) -> Result<(), String> {
    let mut first_io500 = None;
    for (i, mapping) in MAPPINGS.iter().enumerate() {
        let name = format!("io500-{mapping}");
        let run_doors = start_doors(runner, &name)?;
        let mut args = words(&["io500", "--s3-mapping", mapping]);
        args.extend(scale(runner));
        args.extend(run_doors.args.iter().cloned());
        let radar = format!("{name}-radar.svg");
        args.extend(["--svg".into(), path_arg(&runner.output(&radar))]);
        let result: Report = runner.bench(&name, &args)?;
        drop(run_doors);
        let mut section = if i == 0 {
            io500_section(&result, &radar)?
        } else {
            let mut section = Section::new(&format!("IO500 with one {}", mapping.replace('-', " ")));
            section.tables.push(phases_table(&result.results)?);
            section.figures.push((radar, format!("IO500 phases as % of POSIX, {mapping}")));
            section.differences.push(
                "The paper ran IOR and mdtest with three mappings of files to buckets; which of its figures used \
                 which mapping is not in this repository, so this table is ours alone (its own run, its own POSIX \
                 baseline)."
                    .into(),
            );
            section
        };
        section
            .text
            .insert(usize::from(i == 0), format!("S3 mapping `--s3-mapping {mapping}`: {}", mapping_text(mapping)));
        report.sections.push(section);
        first_io500.get_or_insert(result);
    }
    report.sections.push(md_workbench(runner)?);
    if let Some(tools) = tools {
        for section in &mut report.sections {
            section.text.insert(0, OWN_ROWS.into());
        }
        let measured = community::measure(runner, tools)?;
        report.sections.push(community::section(&measured, first_io500.as_ref(), tools, runner.quick));
    }
    Ok(())
}

/// What a section of `isthmus bench`'s own figures says when the community's tools ran too.
const OWN_ROWS: &str = "Rows from `isthmus bench`: the project's own implementations of these workloads (the \
    community's IOR, mdtest and MD-Workbench have their own section, last).";

/// `--s3-mapping` values, the bench's default first.
const MAPPINGS: [&str; 3] = ["prefix-per-rank", "bucket-per-dataset", "bucket-per-file"];

fn mapping_text(mapping: &str) -> &'static str {
    match mapping {
        "prefix-per-rank" => {
            "one bucket for the run, one object per file named by its path (each rank's files under its rank's prefix), IOR transfers as objects named by offset."
        }
        "bucket-per-dataset" => {
            "one bucket per dataset (a directory of the benchmark: ior-easy, each rank's mdtest-easy directory, mdtest-hard), its files objects in it."
        }
        _ => {
            "one bucket per file, as IOR's libs3 bucket-per-file: creating a file creates its bucket, stat is HeadBucket, removing it deletes the bucket; an mdtest directory is a bucket too."
        }
    }
}

/// The doors of a run besides POSIX, in the order they appear.
fn doors_of(results: &[OpResult]) -> Vec<&str> {
    let mut kinds: Vec<&str> = Vec::new();
    for r in results.iter().filter(|r| r.kind != "posix" && phase_of(r).is_some()) {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
    }
    kinds
}

/// A door's result for an IO500 phase, if it measured one (a phase a mapping cannot run is
/// reported with errors and no operations).
fn measured<'a>(results: &'a [OpResult], kind: &str, phase: &str) -> Option<&'a OpResult> {
    results.iter().find(|r| r.kind == kind && phase_of(r).as_deref() == Some(phase) && r.ops > 0)
}

/// One row per IO500 phase that ran: POSIX's figure, then each door's share of it; the
/// scores last (over the phases each door measured).
fn phases_table(results: &[OpResult]) -> Result<Table, String> {
    let (axes, _) = crate::io500::percent_of_posix(results);
    if axes.is_empty() {
        return Err("the IO500 run reported no POSIX phases".into());
    }
    let kinds = doors_of(results);
    let mut header = vec!["phase".to_string(), "POSIX".to_string()];
    header.extend(kinds.iter().map(|kind| format!("{}, % of POSIX", door_name(kind))));
    let mut table = Table { header, rows: Vec::new() };
    for axis in &axes {
        let posix = measured(results, "posix", axis).map(phase_figure).unwrap_or(f64::NAN);
        let unit = if axis.starts_with("ior") { "GiB/s" } else { "kIOPS" };
        let mut row = vec![axis.clone(), format!("{} {unit}", number(posix))];
        row.extend(kinds.iter().map(|kind| match measured(results, kind, axis) {
            Some(r) => percent(phase_figure(r) / posix),
            None => "not measured".into(),
        }));
        table.row(row);
    }
    let scores = crate::io500::io500_scores(results);
    let score = |kind: &str| scores.iter().find(|s| s.kind == kind);
    let posix = score("posix").map_or(f64::NAN, |s| s.score);
    let mut row = vec!["IO500 score (official formula)".to_string(), number(posix)];
    row.extend(kinds.iter().map(|kind| {
        let unmeasured: Vec<&str> =
            axes.iter().filter(|a| measured(results, kind, a).is_none()).map(String::as_str).collect();
        match score(kind) {
            Some(s) if unmeasured.is_empty() => format!("{} ({})", number(s.score), percent(s.score / posix)),
            _ => format!("none: {} not measured", unmeasured.join(", ")),
        }
    }));
    table.row(row);
    Ok(table)
}

/// The shares of POSIX of one door over the IO500 phases both measured.
fn door_shares(results: &[OpResult], kind: &str) -> Vec<f64> {
    let (axes, _) = crate::io500::percent_of_posix(results);
    axes.iter()
        .filter_map(|axis| {
            let (door, posix) = (measured(results, kind, axis)?, measured(results, "posix", axis)?);
            Some(phase_figure(door) / phase_figure(posix))
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn io500_section(result: &Report, radar: &str) -> Result<Section, String> {
    let results = &result.results;
    let mut section = Section::new("IO500 phases through every door (the paper's Table 3 and Figure 10)");
    section.text.push(
        "Each IO500 phase on the file system (POSIX) and, in the same run, through Isthmus's S3 gateway over \
         HTTP (the paper's MinIO), in-process (the role of its S3Embedded) and through the gateway's local \
         socket (the role of S3Remote), as a share of POSIX. Ranks are processes, each its own client, as MPI \
         ranks are. The score is the IO500's: the geometric mean of the four IOR phases (GiB/s) times that of \
         the mdtest phases and find (kIOPS), square-rooted; ior-rnd4K is optional in the IO500 and outside it."
            .into(),
    );
    section.tables.push(phases_table(results)?);
    section.figures.push((radar.into(), "IO500 phases as % of POSIX, per door (Figure 10's radar)".into()));
    let (lo, hi) = PUBLISHED_GATEWAY_RANGE;
    section.differences.push(format!(
        "The paper's MinIO gateway on Lustre reached {} of the file system across the IO500 phases (4 nodes x \
         20 processes); Isthmus's HTTP gateway reaches {} here.",
        percent_range(&[lo, hi]),
        percent_range(&door_shares(results, "s3"))
    ));
    let hard_stat = results
        .iter()
        .find(|r| r.kind == "embedded" && phase_of(r).as_deref() == Some("mdtest-hard-stat"))
        .and_then(|r| crate::report::ratio_to_posix(results, r));
    section.differences.push(format!(
        "S3Embedded reached {} of Lustre on mdtest-hard-stat; Isthmus in-process reaches {} (all phases: {}).",
        percent(PUBLISHED_EMBEDDED_MDTEST_HARD_STAT),
        hard_stat.map_or_else(|| "-".into(), percent),
        percent_range(&door_shares(results, "embedded"))
    ));
    let (http, socket, embedded) = (
        median(door_shares(results, "s3")),
        median(door_shares(results, "local")),
        median(door_shares(results, "embedded")),
    );
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
         this run is one node of 2 cores with a local file system, so shares, not rates, compare."
            .into(),
    );
    Ok(section)
}

fn md_workbench(runner: &mut Runner) -> Result<Section, String> {
    let run_doors = start_doors(runner, "md-workbench")?;
    let sizes = if runner.quick {
        ["--ranks", "2", "--workers", "1", "--datasets", "5", "--files", "100", "--iterations", "20"]
    } else {
        ["--ranks", "5", "--workers", "1", "--datasets", "10", "--files", "1000", "--iterations", "100"]
    };
    let mut args = words(&["md-workbench"]);
    args.extend(words(&sizes));
    args.extend(run_doors.args.iter().cloned());
    args.extend(["--svg".into(), path_arg(&runner.output("md-workbench-density.svg"))]);
    let result: Report = runner.bench("md-workbench", &args)?;
    drop(run_doors);
    md_workbench_section(&result)
}

fn md_workbench_section(result: &Report) -> Result<Section, String> {
    let mut section = Section::new("MD-Workbench: time per operation (the paper's Figure 8)");
    section.text.push(
        "Each rank pre-creates its datasets' objects, then in every iteration stats, reads and deletes the oldest \
         and writes a new one, as MD-Workbench does; the figure is the density of the time per operation (a \
         smoothed histogram on a log scale) per system."
            .into(),
    );
    let mut table = Table::new(&["phase", "system", "op/s", "p50 ms", "p99 ms", "of POSIX"]);
    for r in result.results.iter().filter(|r| r.workload.starts_with("md-workbench")) {
        let share = crate::report::ratio_to_posix(&result.results, r);
        table.row(vec![
            phase_name(r),
            door_name(&r.kind).into(),
            number(figure(r)),
            number(r.p50_us as f64 / 1000.0),
            number(r.p99_us as f64 / 1000.0),
            share.map_or_else(|| "-".into(), percent),
        ]);
    }
    if table.rows.is_empty() {
        return Err("the MD-Workbench run reported no phases".into());
    }
    section.tables.push(table);
    section.figures.push(("md-workbench-density.svg".into(), "density of the time per operation, per system".into()));
    section.differences.push(
        "The paper's densities (Figure 8) are drawn for its systems on Mistral; their values are not in this \
         repository, so the figure shows ours: compare where each door's mass sits against POSIX's."
            .into(),
    );
    Ok(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(kind: &str, workload: &str, op: &str, ops_per_s: f64, mib_per_s: f64) -> OpResult {
        serde_json::from_value(serde_json::json!({
            "workload": workload, "target": kind, "kind": kind, "op": op, "object_size": 0, "workers": 1,
            "ops": 1, "bytes": 0, "keys": 0, "errors": 0, "first_error": null, "seconds": 1.0,
            "ops_per_s": ops_per_s, "mib_per_s": mib_per_s, "keys_per_s": 0.0, "p50_us": 1, "p99_us": 2, "max_us": 3
        }))
        .expect("an OpResult")
    }

    fn report(results: Vec<OpResult>) -> Report {
        serde_json::from_value(serde_json::json!({
            "started_unix": 0, "host": "h", "durability": "strict", "results": results
        }))
        .expect("a Report")
    }

    #[test]
    fn shares_and_sentences_come_from_the_run() {
        let results = vec![
            result("posix", "ior-easy", "put", 0.0, 1024.0),
            result("s3", "ior-easy", "put", 0.0, 102.4),
            result("embedded", "ior-easy", "put", 0.0, 512.0),
            result("local", "ior-easy", "put", 0.0, 256.0),
            result("posix", "mdtest-hard", "head", 1000.0, 0.0),
            result("s3", "mdtest-hard", "head", 20.0, 0.0),
            result("embedded", "mdtest-hard", "head", 1500.0, 0.0),
            result("local", "mdtest-hard", "head", 100.0, 0.0),
        ];
        let section = io500_section(&report(results), "r.svg").expect("a section");
        let table = &section.tables[0];
        assert_eq!(
            table.header[1..],
            ["POSIX", "HTTP gateway, % of POSIX", "in-process, % of POSIX", "local socket, % of POSIX"]
        );
        assert_eq!(table.rows[0], ["ior-easy-write", "1.00 GiB/s", "10.0 %", "50.0 %", "25.0 %"]);
        assert_eq!(table.rows[1][..3], ["mdtest-hard-stat".to_string(), "1.00 kIOPS".into(), "2.0 %".into()]);
        let text = section.differences.join("\n");
        assert!(text.contains("HTTP gateway reaches 2.00-10.0 %"), "{text}");
        assert!(text.contains("Isthmus in-process reaches 150.0 %"), "{text}");
        // Medians: HTTP 10 %, socket 25 %, in-process 150 %.
        assert!(text.contains("25.0 % against 10.0 % (HTTP) and 150.0 % (in-process): the same order"), "{text}");
        assert!(io500_section(&report(vec![]), "r.svg").is_err());
        // A phase a door could not run is said so, and scores no zero.
        let mut find = result("s3", "find", "find", 0.0, 0.0);
        find.ops = 0;
        let results = vec![result("posix", "find", "find", 1000.0, 0.0), find];
        let table = phases_table(&results).expect("a table");
        assert_eq!(table.rows[0][2], "not measured");
        assert!(table.rows[1][2].starts_with("none: find not measured"), "{:?}", table.rows[1]);
    }
}
