//! `isthmus cost`: the cloud versus on-premises cost model from a preset or a scenario file.

use std::path::PathBuf;

use clap::Args;
use isthmus_cost::CostModel;
use isthmus_cost::perf::{BenchReport, perf_costs};
use isthmus_cost::report::CostReport;

#[derive(Debug, Args)]
pub struct CostArgs {
    /// A shipped scenario: budget, standard or high [required, or --scenario]
    #[arg(long, conflicts_with = "scenario")]
    pub preset: Option<String>,
    /// A scenario TOML file (see crates/cost/scenarios/ for the format) [required, or --preset]
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Months to model
    #[arg(long, default_value_t = 60)]
    pub months: u32,
    /// The equations: paper (as published: load balancer priced per GB processed, depreciation
    /// a yearly percentage of CapEx) or refined (load balancer also billed per hour, hardware
    /// bought again every 1/depreciation rate years)
    #[arg(long, default_value = "paper", value_parser = crate::config::listed::<CostModel>(CostModel::NAMES))]
    pub model: CostModel,
    /// Print the whole report as JSON instead of tables
    #[arg(long)]
    pub json: bool,
    /// Write an SVG chart of cumulative cost with the break-even month marked [default: none:
    /// no chart]
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// An `isthmus bench --json` result file: adds cost per GiB/s and per kops/s per target
    /// [default: none: no performance costs]
    #[arg(long)]
    pub bench: Option<PathBuf>,
}

pub fn run(args: CostArgs) -> Result<(), String> {
    if args.months == 0 {
        return Err("--months must be at least 1".into());
    }
    let scenario = match (&args.preset, &args.scenario) {
        (Some(name), None) => isthmus_cost::preset(name),
        (None, Some(path)) => isthmus_cost::load(path),
        _ => return Err("choose a scenario: --preset budget|standard|high or --scenario FILE.toml".into()),
    }
    .map_err(|e| e.to_string())?;
    let performance = match &args.bench {
        None => Vec::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let report: BenchReport = serde_json::from_str(&text)
                .map_err(|e| format!("{} is not an `isthmus bench --json` result: {e}", path.display()))?;
            perf_costs(&scenario, &report, args.months, args.model)
        }
    };
    let report = CostReport::new(&scenario, args.months, args.model, performance);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        println!("{}", report.table());
    }
    if let Some(path) = &args.svg {
        report.write_svg(path)?;
        if !args.json {
            println!("chart written to {}", path.display());
        }
    }
    Ok(())
}
