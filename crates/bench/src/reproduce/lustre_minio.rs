//! The MinIO-on-Lustre study: an S3 gateway in front of the parallel file system against the
//! file system itself, with COSBench's stages, mdtest's Table 5 (`mdtest -n N -w 3901 -e 3901`,
//! max/min/mean/std dev over iterations) and the cost model of its equations 5 and 9. Isthmus
//! stands where MinIO's gateway stood; the POSIX baseline is the file system under test.

use isthmus_cost::model::CostModel;
use isthmus_cost::report::KeyFigures;

use crate::Report;
use crate::cosbench::StageReport;

use super::report::{Section, StudyReport, Table, number, percent};
use super::runner::{Runner, path_arg, words};

/// What the study published, as this project quotes it (docs/benchmarks/reproduce.md, lustre-minio).
const PUBLISHED_GATEWAY_ADVANTAGE: &str =
    "Lustre with an S3 gateway measured 20-30 % better than Ceph RGW and JuiceFS (COSBench, mdtest)";
const PUBLISHED_BREAK_EVEN_MONTHS: u32 = 12;

/// Where the targets of a run live: the gateway's root and the POSIX baseline beside it.
fn targets(runner: &Runner, name: &str) -> Result<Vec<String>, String> {
    let root = runner.fresh_dir(name)?;
    let mut args = words(&["--serve"]);
    args.push(path_arg(&root));
    args.push("--target".into());
    args.push(format!("embedded://{}", root.display()));
    args.push("--baseline".into());
    args.push(path_arg(&runner.fresh_dir(&format!("{name}-posix"))?));
    Ok(args)
}

pub fn run(runner: &mut Runner, report: &mut StudyReport) -> Result<(), String> {
    report.sections.push(cosbench(runner)?);
    report.sections.push(mdtest(runner)?);
    report.sections.push(cost()?);
    Ok(())
}

/// A target's name as the report shows it.
fn system(kind: &str) -> &str {
    match kind {
        "posix" => "file system (POSIX)",
        "s3" => "Isthmus S3 gateway (HTTP)",
        "embedded" => "Isthmus in-process",
        "local" => "Isthmus local socket",
        other => other,
    }
}

/// The study's COSBench workloads (crates/bench/cosbench/), quick and full.
const WORKLOADS: [(&str, &str); 2] = [
    ("lustre-minio-quick.xml", include_str!("../../cosbench/lustre-minio-quick.xml")),
    ("lustre-minio.xml", include_str!("../../cosbench/lustre-minio.xml")),
];

fn cosbench(runner: &mut Runner) -> Result<Section, String> {
    let (file, text) = WORKLOADS[usize::from(!runner.quick)];
    let workload = runner.output(file);
    std::fs::write(&workload, text).map_err(|e| format!("cannot write {}: {e}", workload.display()))?;
    let mut args = words(&["cosbench"]);
    args.push(path_arg(&workload));
    args.extend(targets(runner, "cosbench")?);
    let result: Report = runner.bench("cosbench", &args)?;
    let mut section = cosbench_section(&result.cosbench, file)?;
    section.figures.extend(cosbench_figures(runner, &result.cosbench)?);
    Ok(section)
}

/// The paper's charts of the COSBench runs: throughput and response time per system, for each
/// main-stage operation (the stages that read and write for a fixed time).
fn cosbench_figures(runner: &Runner, stages: &[StageReport]) -> Result<Vec<(String, String)>, String> {
    let main: Vec<&StageReport> = stages.iter().filter(|s| s.stage.starts_with("main")).collect();
    let label = |s: &StageReport| format!("{} {} {}", s.stage, s.op, system(&s.kind));
    let throughput: Vec<(String, f64)> = main.iter().map(|s| (label(s), s.throughput_ops)).collect();
    let response: Vec<(String, f64)> = main.iter().map(|s| (label(s), s.avg_res_time_ms)).collect();
    let charts = [
        ("cosbench-throughput.svg", "COSBench main stages: throughput per system", "op/s", throughput),
        ("cosbench-response.svg", "COSBench main stages: mean response time per system", "ms", response),
    ];
    let mut figures = Vec::new();
    for (file, title, axis, bars) in charts {
        crate::bars::write_svg(&runner.output(file), title, axis, &bars, None)?;
        figures.push((
            file.to_string(),
            format!("{title} (the paper's chart; its systems' values are not in this repository)"),
        ));
    }
    Ok(figures)
}

fn cosbench_section(stages: &[StageReport], file: &str) -> Result<Section, String> {
    if stages.is_empty() {
        return Err("the COSBench run reported no stages".into());
    }
    let mut section = Section::new("COSBench: every stage on every system");
    section.text.push(format!(
        "The workload `{file}` (shipped in crates/bench/cosbench/), with COSBench's five stages per object size: init \
         makes the containers, prepare writes the objects, main reads (80 %) and writes (20 %) for a fixed \
         time, cleanup deletes every object (one already gone counts as deleted, as COSBench counts it) and \
         dispose removes the containers. Each system runs the same stages in the same run."
    ));
    let mut table = Table::new(&[
        "stage", "op", "system", "ops", "bytes", "avg ms", "95th ms", "op/s", "MB/s", "success", "of POSIX",
    ]);
    for s in stages {
        let posix = stages.iter().find(|p| p.kind == "posix" && p.stage == s.stage && p.op == s.op);
        let share = posix.filter(|p| p.throughput_ops > 0.0).map(|p| percent(s.throughput_ops / p.throughput_ops));
        table.row(vec![
            s.stage.clone(),
            s.op.clone(),
            system(&s.kind).into(),
            s.op_count.to_string(),
            s.byte_count.to_string(),
            number(s.avg_res_time_ms),
            number(s.p95_ms),
            number(s.throughput_ops),
            number(s.bandwidth_mb_s),
            percent(s.succ_ratio),
            share.unwrap_or_default(),
        ]);
    }
    section.tables.push(table);
    let main: Vec<f64> = stages
        .iter()
        .filter(|s| s.kind == "s3" && s.stage.starts_with("main"))
        .filter_map(|s| {
            let posix = stages.iter().find(|p| p.kind == "posix" && p.stage == s.stage && p.op == s.op)?;
            (posix.throughput_ops > 0.0).then(|| s.throughput_ops / posix.throughput_ops)
        })
        .collect();
    section.differences.push(format!(
        "The paper compared gateways with each other: {PUBLISHED_GATEWAY_ADVANTAGE}. Ceph RGW and JuiceFS are not \
         run here; what this table adds is the gateway against the file system it serves: the main stages \
         through Isthmus's S3 gateway reach {} of the file system's operation rate.",
        super::report::percent_range(&main)
    ));
    Ok(section)
}

fn mdtest(runner: &mut Runner) -> Result<Section, String> {
    let (files, iterations) = if runner.quick { ("500", "3") } else { ("10000", "5") };
    let mut args = words(&[
        "mdtest-easy",
        "--workers",
        "2",
        "--files",
        files,
        "--mdtest-iterations",
        iterations,
        "--mdtest-bytes",
        "3901",
    ]);
    args.extend(targets(runner, "mdtest")?);
    let result: Report = runner.bench("mdtest", &args)?;
    let mut section = mdtest_section(&result)?;
    let bars: Vec<(String, f64)> = result
        .results
        .iter()
        .filter_map(|r| {
            Some((
                format!("{} {}", crate::report::phase_name(r), system(&r.kind)),
                r.iterations.as_ref()?.mean_ops_per_s,
            ))
        })
        .collect();
    let file = "mdtest.svg";
    crate::bars::write_svg(
        &runner.output(file),
        "mdtest: mean operations per second per phase and system",
        "op/s",
        &bars,
        None,
    )?;
    section.figures.push((
        file.into(),
        "mdtest operations per system, per phase (the paper's chart; mean over iterations)".into(),
    ));
    Ok(section)
}

fn mdtest_section(result: &Report) -> Result<Section, String> {
    let mut section = Section::new("mdtest: Table 5 (directories and files, over iterations)");
    section.text.push(
        "`mdtest -n N -w 3901 -e 3901` as the paper ran it: each rank creates, stats, renames and removes its \
         directories, then creates files with 3901 bytes written, stats them, renames them, reads the 3901 bytes \
         back and removes them, repeated over iterations. Per phase: the max, min, mean and standard deviation \
         of the rate over the iterations, the mean time of one operation (ms, Table 5's form) and the mean rate \
         per node. S3 has no rename: the S3 door renames as a server-side copy and a delete, reported as such."
            .into(),
    );
    let mut table = Table::new(&[
        "phase",
        "system",
        "max op/s",
        "min op/s",
        "mean op/s",
        "std dev",
        "mean ms/op",
        "op/s per node",
        "of POSIX",
    ]);
    let mut rows = 0;
    for r in &result.results {
        let Some(stats) = &r.iterations else { continue };
        let posix = result.results.iter().find(|p| p.kind == "posix" && p.workload == r.workload && p.op == r.op);
        let share = posix
            .and_then(|p| p.iterations.as_ref())
            .filter(|p| p.mean_ops_per_s > 0.0)
            .map(|p| percent(stats.mean_ops_per_s / p.mean_ops_per_s));
        table.row(vec![
            crate::report::phase_name(r),
            system(&r.kind).into(),
            number(stats.max_ops_per_s),
            number(stats.min_ops_per_s),
            number(stats.mean_ops_per_s),
            number(stats.stddev_ops_per_s),
            number(stats.mean_ms),
            number(stats.mean_ops_per_s_per_node),
            share.unwrap_or_default(),
        ]);
        rows += 1;
    }
    if rows == 0 {
        return Err("the mdtest run reported no per-iteration statistics".into());
    }
    section.tables.push(table);
    section.differences.push(
        "The paper's Table 5 ran on its cluster's Lustre through MinIO; its values are not in this repository, so \
         the table gives ours with the file system as the reference in place of theirs."
            .into(),
    );
    Ok(section)
}

fn cost() -> Result<Section, String> {
    let figures = isthmus_cost::report::preset_key_figures().map_err(|e| e.to_string())?;
    cost_section(&figures)
}

fn cost_section(figures: &[KeyFigures]) -> Result<Section, String> {
    let mut section = Section::new("Cost: cloud against on premises (equations 5 and 9)");
    section.text.push(
        "The study's three configurations (Budget, Standard, High; crates/cost/scenarios/) under the paper's \
         equations (`paper`: the load balancer priced per GB processed x volume x months, eq. 5; depreciation a \
         percentage of CapEx per year, eq. 9 and Table 7) and under Isthmus's refinement (`refined`: the load \
         balancer also billed per hour, depreciation as buying the hardware again every 1/rate years). \
         `isthmus cost --preset NAME --model paper|refined` gives the month-by-month detail."
            .into(),
    );
    let mut table = Table::new(&[
        "configuration",
        "model",
        "cloud USD/month",
        "CapEx USD",
        "break-even month",
        "1 year cloud / on-prem",
        "5 years cloud / on-prem",
    ]);
    let total = |f: &KeyFigures, years: u32| {
        f.totals
            .iter()
            .find(|t| t.years == years)
            .map(|t| format!("{} / {}", number(t.cloud_usd), number(t.onprem_usd)))
            .unwrap_or_default()
    };
    for f in figures {
        table.row(vec![
            f.scenario.clone(),
            f.model.name().into(),
            number(f.cloud_monthly_usd),
            number(f.onprem_capex_usd),
            f.break_even_month.map_or_else(|| "none in 5 years".into(), |m| m.to_string()),
            total(f, 1),
            total(f, 5),
        ]);
    }
    section.tables.push(table);
    let paper: Vec<String> = figures
        .iter()
        .filter(|f| f.model == CostModel::Paper)
        .map(|f| {
            format!("{} {}", f.scenario, f.break_even_month.map_or_else(|| "never".into(), |m| format!("month {m}")))
        })
        .collect();
    section.differences.push(format!(
        "The paper found on premises cheaper than the cloud beyond about {PUBLISHED_BREAK_EVEN_MONTHS} months; its \
         equations here break even at: {}. What the publication does not give (data volume, traffic, electricity \
         price) is stated in each scenario file, so the months depend on those assumptions.",
        paper.join(", ")
    ));
    Ok(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_rows_come_from_the_model() {
        let figures = isthmus_cost::report::preset_key_figures().expect("presets");
        let section = cost_section(&figures).expect("a section");
        assert_eq!(section.tables[0].rows.len(), figures.len());
        let budget = figures.iter().find(|f| f.scenario == "budget" && f.model == CostModel::Paper).expect("budget");
        let expected =
            budget.break_even_month.map_or_else(|| "budget never".to_string(), |m| format!("budget month {m}"));
        assert!(section.differences[0].contains(&expected), "{}", section.differences[0]);
    }

    fn stage(kind: &str, stage: &str, op: &str, ops_per_s: f64) -> StageReport {
        StageReport {
            kind: kind.into(),
            stage: stage.into(),
            op: op.into(),
            op_count: 10,
            failed_count: 0,
            byte_count: 0,
            avg_res_time_ms: 1.0,
            avg_proc_time_ms: 1.0,
            throughput_ops: ops_per_s,
            bandwidth_mb_s: 0.0,
            succ_ratio: 1.0,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p95_ms: 1.0,
            p99_ms: 1.0,
            latency_histogram: None,
        }
    }

    #[test]
    fn the_shipped_workloads_have_every_stage() {
        for (file, text) in WORKLOADS {
            let workload = crate::cosbench::CosbenchWorkload::parse(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            let kinds: std::collections::BTreeSet<String> =
                workload.stages.iter().flat_map(|s| s.works.iter().map(|w| w.kind.clone())).collect();
            assert_eq!(
                kinds.into_iter().collect::<Vec<_>>(),
                ["cleanup", "dispose", "init", "normal", "prepare"],
                "{file}"
            );
        }
    }

    #[test]
    fn cosbench_shares_are_against_posix_in_the_same_stage() {
        let stages = vec![
            stage("posix", "main-64KB", "read", 1000.0),
            stage("s3", "main-64KB", "read", 250.0),
            stage("posix", "main-64KB", "write", 100.0),
            stage("s3", "main-64KB", "write", 50.0),
        ];
        let section = cosbench_section(&stages, "x.xml").expect("a section");
        assert_eq!(section.tables[0].rows[1][10], "25.0 %");
        assert!(section.differences[0].contains("25.0-50.0 %"), "{}", section.differences[0]);
        assert!(cosbench_section(&[], "x.xml").is_err());
    }
}
