//! The community's tools through every door: each experiment of `tools::experiments` run on
//! POSIX, through the HTTP gateway, in-process and through the local socket, and the report's
//! section with the tools' rows beside the project's own (`isthmus bench`) for the same phases.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::Report;
use crate::io500::{door_name, phase_figure, phase_of};

use super::super::report::{Section, Table, number, percent};
use super::super::runner::{Runner, quoted};
use super::tool_output::ToolOutput;
use super::tools::{Door, Tool, ToolCommand, ToolRun, Tools, command, door_specs, experiments, run_logged};

/// The doors in the order of the report's columns.
const KINDS: [&str; 4] = ["posix", "s3", "embedded", "local"];

/// One experiment through one door: what the tool printed, or why it did not finish.
pub struct Measured {
    pub run: ToolRun,
    pub kind: &'static str,
    pub outcome: Result<ToolOutput, String>,
}

/// The ranks of the run: as many as the project's own IO500 run of the study.
pub fn ranks(quick: bool) -> usize {
    if quick { 2 } else { 5 }
}

/// Runs every experiment through every door, one gateway (HTTP and socket) on one data root
/// for the S3 doors; the tools' outputs go to OUT/tools/RUN-DOOR.txt.
pub fn measure(runner: &mut Runner, tools: &Tools) -> Result<Vec<Measured>, String> {
    let run_doors = super::start_doors(runner, "tools")?;
    let logs = runner.output("tools");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    for dir in ["ior-easy", "ior-hard"] {
        let dir = run_doors.posix.join(dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let gateway = &run_doors.gateway;
    let inherited = std::env::var("LD_LIBRARY_PATH").ok();
    let doors: Vec<Door> = door_specs(
        &tools.libs3_dir,
        inherited.as_deref(),
        &gateway.address.to_string(),
        &gateway.socket,
        &run_doors.root,
        &run_doors.posix,
    );
    let keys = (gateway.access_key.as_str(), gateway.secret_key.as_str());
    let as_root = rustix::process::getuid().is_root();
    let limit = Duration::from_secs(if runner.quick { 600 } else { 3600 });
    let mut measured = Vec::new();
    for run in experiments(runner.quick, "BASE") {
        for door in &doors {
            let command = command(tools, &run, door, ranks(runner.quick), as_root, keys);
            let log = logs.join(format!("{}-{}.txt", run.name, door.kind));
            let outcome = run_one(runner, &command, &log, limit).and_then(|text| run.tool.parse(&text));
            redact(&log, keys);
            if let Err(why) = &outcome {
                eprintln!("== {} through the {}: {why} (see {})", run.name, door_name(door.kind), log.display());
            }
            measured.push(Measured { run: run.clone(), kind: door.kind, outcome });
        }
    }
    Ok(measured)
}

fn run_one(runner: &mut Runner, command: &ToolCommand, log: &Path, limit: Duration) -> Result<String, String> {
    // The keys are shown as the variables the study's environment holds them in.
    let line: Vec<String> =
        command.shown.iter().map(|w| if w.contains('$') { format!("\"{w}\"") } else { quoted(w) }).collect();
    let line = line.join(" ");
    eprintln!("\n== {line}");
    let started = Instant::now();
    let result = run_logged(command, log, limit);
    eprintln!("== done in {:.1} s", started.elapsed().as_secs_f64());
    runner.commands.push(line);
    result
}

/// The tools echo their command line: the gateway's keys do not stay in the kept output.
fn redact(log: &Path, (access, secret): (&str, &str)) {
    if let Ok(text) = std::fs::read_to_string(log) {
        let text = text.replace(secret, "$AWS_SECRET_ACCESS_KEY").replace(access, "$AWS_ACCESS_KEY_ID");
        let _ = std::fs::write(log, text);
    }
}

/// The label of a tool's rows: its name, version and backend.
fn source(measured: &[Measured], tool: Tool) -> String {
    let version = measured
        .iter()
        .filter(|m| m.run.tool == tool)
        .find_map(|m| m.outcome.as_ref().ok().and_then(|o| o.version.clone()));
    format!("{} {} (S3-libs3)", tool.title(), version.unwrap_or_else(|| "4.x".into()))
}

/// The unit a tool's figure is in, and how many of that unit the IO500's figure is.
fn unit(tool: Tool) -> (&'static str, f64) {
    if tool == Tool::Ior { ("MiB/s", 1024.0) } else { ("op/s", 1000.0) }
}

/// A row's figures per door (NaN where none), and a mark per door whose run had problems.
type Figures = [(f64, bool); 4];

/// A row: the phase, its source, POSIX's figure, each door's with its share of POSIX, and the
/// in-process and socket figures as multiples of HTTP's.
fn row(phase: &str, source: &str, unit: &str, figures: &Figures, failed: &[Option<&str>; 4]) -> Vec<String> {
    let posix = figures[0].0;
    let mark = |text: String, problem: bool| if problem { format!("{text} *") } else { text };
    let mut cells = vec![phase.to_string(), source.to_string()];
    cells.push(match failed[0] {
        Some(_) => "failed".into(),
        None => mark(format!("{} {unit}", number(posix)), figures[0].1),
    });
    for (i, (value, problem)) in figures.iter().enumerate().skip(1) {
        cells.push(match (failed[i], value.is_finite()) {
            (Some(_), _) => "failed".into(),
            (None, false) => "-".into(),
            (None, true) => mark(format!("{} ({})", number(*value), percent(value / posix)), *problem),
        });
    }
    let times =
        |x: f64| if x.is_finite() && figures[1].0 > 0.0 { format!("{:.2}x", x / figures[1].0) } else { "-".into() };
    cells.push(times(figures[2].0));
    cells.push(times(figures[3].0));
    cells
}

/// The section: the tools' rows (and the project's own beside them where the phase is an IO500
/// phase the study's first IO500 run measured), then what the checks found.
pub fn section(measured: &[Measured], bench: Option<&Report>, tools: &Tools, quick: bool) -> Section {
    let mut section =
        Section::new("The community's tools: IOR, mdtest and MD-Workbench with S3-libs3, through every door");
    section.text.push(format!(
        "The HPC community's own benchmarks ({}, {}, {}) from `{}`, built against libs3 4.1 with hpc/ior's \
         `./configure --with-S3-libs3`, run unchanged under mpirun ({} ranks as processes): on POSIX (`-a POSIX`), \
         through the study's HTTP gateway on the tools' own libs3, and in-process (host `isthmus`, `ISTHMUS_ROOT`) \
         and through the gateway's local socket (host `unix:PATH`) on Isthmus's libs3.so.4 drop-in from `{}`, put \
         in libs3's place by `LD_LIBRARY_PATH`. Rows labelled `isthmus bench` are the project's own \
         implementations of the same phases, from the first IO500 run above (its own POSIX baseline). Each door's \
         cell is its figure and its share of its own source's POSIX figure; the last two columns are the \
         in-process and socket figures as multiples of HTTP's. The tools' outputs are in `tools/`.",
        source(measured, Tool::Ior),
        source(measured, Tool::Mdtest),
        source(measured, Tool::MdWorkbench),
        tools.dir.display(),
        ranks(quick),
        tools.libs3_dir.display(),
    ));
    let mut table = Table::new(&[
        "phase",
        "source",
        "POSIX",
        "HTTP gateway",
        "in-process",
        "local socket",
        "in-process ÷ HTTP",
        "socket ÷ HTTP",
    ]);
    let mut runs: Vec<&ToolRun> = Vec::new();
    for m in measured {
        if !runs.iter().any(|r| r.name == m.run.name) {
            runs.push(&m.run);
        }
    }
    for run in runs {
        let of_run: Vec<&Measured> = measured.iter().filter(|m| m.run.name == run.name).collect();
        let by_kind = |kind: &str| of_run.iter().find(|m| m.kind == kind).map(|m| &m.outcome);
        let failed: [Option<&str>; 4] = KINDS.map(|k| match by_kind(k) {
            Some(Err(why)) => Some(why.as_str()),
            None => Some("not run"),
            Some(Ok(_)) => None,
        });
        let mut phases: Vec<&str> = Vec::new();
        for out in of_run.iter().filter_map(|m| m.outcome.as_ref().ok()) {
            for p in &out.phases {
                if !phases.contains(&p.name.as_str()) {
                    phases.push(&p.name);
                }
            }
        }
        let (unit, per_io500) = unit(run.tool);
        for phase in phases {
            let label = if run.tool == Tool::MdWorkbench {
                format!("md-workbench {phase}")
            } else {
                format!("{}-{phase}", run.name)
            };
            let figures: Figures = KINDS.map(|k| match by_kind(k) {
                Some(Ok(out)) => (
                    out.phases.iter().find(|p| p.name == phase).map_or(f64::NAN, |p| p.figure),
                    !out.problems.is_empty(),
                ),
                _ => (f64::NAN, false),
            });
            table.row(row(&label, &source(measured, run.tool), unit, &figures, &failed));
            let Some(bench) = bench else { continue };
            let ours: Figures = KINDS.map(|k| {
                let r =
                    bench.results.iter().find(|r| r.kind == k && r.ops > 0 && phase_of(r).as_deref() == Some(&label));
                (r.map_or(f64::NAN, |r| phase_figure(r) * per_io500), false)
            });
            if ours[0].0.is_finite() {
                table.row(row(&label, "isthmus bench", unit, &ours, &[None; 4]));
            }
        }
    }
    section.tables.push(table);
    section.text.push(checks(measured));
    section.differences.push(
        "IOR's S3-libs3 backend writes each transfer as an object of its own and stats a file by its first \
         transfer (IOR warns of the file's size); its directories are objects it names one way when it creates \
         them and another when it stats them, so mdtest runs on files only (-F). These are the tools' own \
         mappings, the same on any S3 server."
            .into(),
    );
    section
}

/// What the checks found: IOR's write and read checks (-W -R, each rank reading another's data
/// with -C), mdtest's and MD-Workbench's read verification (-X), every S3 call's status.
fn checks(measured: &[Measured]) -> String {
    let mut found = Vec::new();
    for m in measured {
        let door = door_name(m.kind);
        match &m.outcome {
            Err(why) => found.push(format!("{} through the {door} failed: {why}", m.run.name)),
            Ok(out) if !out.problems.is_empty() => {
                found.push(format!("{} through the {door} (marked *): {}", m.run.name, out.problems.join("; ")))
            }
            Ok(_) => {}
        }
    }
    let what = "IOR's write and read checks (-W -R, each rank reading what another wrote with -C), mdtest's and \
                MD-Workbench's read verification (-X) and the status of every S3 call";
    if found.is_empty() {
        format!("Checks: every run clean ({what}).")
    } else {
        format!("Checks ({what}):\n\n{}", found.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce::s3_hpc::tool_output::Phase;

    fn output(phases: &[(&str, f64)], problems: &[&str]) -> ToolOutput {
        ToolOutput {
            version: Some("4.1.0+dev".into()),
            phases: phases
                .iter()
                .map(|(n, f)| Phase { name: n.to_string(), figure: *f, medians: Vec::new() })
                .collect(),
            problems: problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn bench_result(kind: &str, workload: &str, op: &str, mib_per_s: f64) -> serde_json::Value {
        serde_json::json!({
            "workload": workload, "target": kind, "kind": kind, "op": op, "object_size": 0, "workers": 1,
            "ops": 1, "bytes": 0, "keys": 0, "errors": 0, "first_error": null, "seconds": 1.0,
            "ops_per_s": 0.0, "mib_per_s": mib_per_s, "keys_per_s": 0.0, "p50_us": 1, "p99_us": 2, "max_us": 3
        })
    }

    #[test]
    fn kept_outputs_lose_the_keys() {
        let dir = tempfile::tempdir().expect("a directory");
        let log = dir.path().join("ior.txt");
        std::fs::write(&log, "ior --S3-libs3.access-key=AK1 --S3-libs3.secret-key=S/K+\nwrite 1\n").expect("written");
        redact(&log, ("AK1", "S/K+"));
        let text = std::fs::read_to_string(&log).expect("read");
        assert_eq!(
            text,
            "ior --S3-libs3.access-key=$AWS_ACCESS_KEY_ID --S3-libs3.secret-key=$AWS_SECRET_ACCESS_KEY\nwrite 1\n"
        );
    }

    #[test]
    fn rows_name_their_source_and_failures_are_said() {
        let runs = experiments(true, "B");
        let ior = &runs[0];
        let measured = vec![
            Measured {
                run: ior.clone(),
                kind: "posix",
                outcome: Ok(output(&[("write", 1000.0), ("read", 4000.0)], &[])),
            },
            Measured { run: ior.clone(), kind: "s3", outcome: Ok(output(&[("write", 250.0), ("read", 1000.0)], &[])) },
            Measured {
                run: ior.clone(),
                kind: "embedded",
                outcome: Ok(output(
                    &[("write", 500.0), ("read", 3000.0)],
                    &["Incorrect data on read (# errors found)."],
                )),
            },
            Measured {
                run: ior.clone(),
                kind: "local",
                outcome: Err("exit status: 1: S3_init \"ErrorInterrupted\"".into()),
            },
        ];
        let bench: Report = serde_json::from_value(serde_json::json!({
            "started_unix": 0, "host": "h", "durability": "strict", "results": [
                bench_result("posix", "ior-easy", "put", 2048.0),
                bench_result("s3", "ior-easy", "put", 512.0),
                bench_result("embedded", "ior-easy", "put", 1024.0),
                bench_result("local", "ior-easy", "put", 768.0),
            ]
        }))
        .expect("a report");
        let tools = Tools { dir: "/t".into(), libs3_dir: "/l".into() };
        let section = section(&measured, Some(&bench), &tools, true);
        let rows = &section.tables[0].rows;
        assert_eq!(
            rows[0],
            [
                "ior-easy-write",
                "IOR 4.1.0+dev (S3-libs3)",
                "1,000 MiB/s",
                "250 (25.0 %)",
                "500 (50.0 %) *",
                "failed",
                "2.00x",
                "-"
            ]
        );
        assert_eq!(rows[1][..4], ["ior-easy-write", "isthmus bench", "2,048 MiB/s", "512 (25.0 %)"]);
        assert_eq!(rows[1][6..], ["2.00x", "1.50x"]);
        // No bench row for a phase the bench did not measure.
        assert_eq!(rows[2][..2], ["ior-easy-read", "IOR 4.1.0+dev (S3-libs3)"]);
        assert_eq!(rows.len(), 3);
        let checks = &section.text[1];
        assert!(checks.contains("- ior-easy through the in-process (marked *): Incorrect data on read"), "{checks}");
        assert!(
            checks.contains("- ior-easy through the local socket failed: exit status: 1: S3_init \"ErrorInterrupted\"")
        );
        let clean = vec![Measured { run: ior.clone(), kind: "posix", outcome: Ok(output(&[("write", 1.0)], &[])) }];
        assert!(super::checks(&clean).starts_with("Checks: every run clean"));
        // Without the bench's report, the tools' rows alone.
        assert_eq!(super::section(&measured, None, &tools, true).tables[0].rows.len(), 2);
    }
}
