//! Presenting a comparison: the terminal table, the JSON document, the SVG chart of
//! cumulative cost with the break-even month marked, and the key figures of the presets under
//! both models for other reports to quote.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use plotters::prelude::*;
use serde::Serialize;

use crate::model::{BillLine, Comparison, CostModel, Scenario, Sensitivity};
use crate::perf::PerfCost;
use crate::{CostError, PRESETS, preset};

/// Everything `isthmus cost` reports, as written with `--json`.
#[derive(Debug, Serialize)]
pub struct CostReport<'a> {
    pub scenario: &'a Scenario,
    pub months: u32,
    /// The equations used: `paper` (as published) or `refined`.
    pub model: CostModel,
    pub cloud_bill: Vec<BillLine>,
    pub cloud_monthly_usd: f64,
    pub onprem_capex_usd: f64,
    pub onprem_opex_monthly_usd: f64,
    pub onprem_electricity_monthly_usd: f64,
    /// Paper model: rate × CapEx / 12, added every month.
    pub onprem_depreciation_monthly_usd: Option<f64>,
    /// Refined model: months after which the hardware is bought again.
    pub onprem_lifetime_months: Option<u32>,
    pub comparison: Comparison,
    pub sensitivity: Vec<Sensitivity>,
    pub performance: Vec<PerfCost>,
}

/// The factors each input is scaled by in the sensitivity table.
pub const SENSITIVITY_FACTORS: [f64; 3] = [0.5, 1.0, 2.0];

impl<'a> CostReport<'a> {
    pub fn new(scenario: &'a Scenario, months: u32, model: CostModel, performance: Vec<PerfCost>) -> Self {
        let onprem = &scenario.onprem;
        Self {
            scenario,
            months,
            model,
            cloud_bill: scenario.cloud.bill(model),
            cloud_monthly_usd: scenario.cloud.monthly(model),
            onprem_capex_usd: onprem.capex_usd(),
            onprem_opex_monthly_usd: onprem.opex_monthly_usd(),
            onprem_electricity_monthly_usd: onprem.electricity_monthly_usd(),
            onprem_depreciation_monthly_usd: (model == CostModel::Paper)
                .then(|| onprem.paper_depreciation_monthly_usd()),
            onprem_lifetime_months: onprem.lifetime_months().filter(|_| model == CostModel::Refined),
            comparison: scenario.compare(months, model),
            sensitivity: scenario.sensitivity(months, &SENSITIVITY_FACTORS, model),
            performance,
        }
    }

    pub fn table(&self) -> String {
        let usd = |x: f64| format!("{x:.0}");
        let equations = match self.model {
            CostModel::Paper => {
                "paper: the published equations (load balancer priced per GB processed, depreciation a yearly percentage of CapEx)"
            }
            CostModel::Refined => {
                "refined: load balancer also billed per hour, hardware bought again every 1/depreciation rate years"
            }
        };
        let mut out = format!(
            "Scenario {} ({} TB), {} months, model {equations}\n\nCloud, per month: {} USD\n",
            self.scenario.name,
            self.scenario.data_tb,
            self.months,
            usd(self.cloud_monthly_usd)
        );
        let mut bill = Table::new();
        bill.load_preset(UTF8_FULL_CONDENSED);
        bill.set_header(["service", "quantity", "unit price USD", "USD/month"]);
        for line in &self.cloud_bill {
            bill.add_row([
                line.service.to_string(),
                format!("{:.1}", line.quantity),
                format!("{}", line.unit_price),
                format!("{:.2}", line.monthly_usd),
            ]);
        }
        out.push_str(&bill.to_string());
        let depreciation = match (self.onprem_depreciation_monthly_usd, self.onprem_lifetime_months) {
            (Some(d), _) if d > 0.0 => format!(
                ", depreciation {} USD/month ({} % of CapEx a year)",
                usd(d),
                self.scenario.onprem.depreciation_rate * 100.0
            ),
            (_, Some(m)) => format!(", hardware replaced every {m} months"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "\n\nOn premises: CapEx {} USD, OpEx {} USD/month (electricity {}){depreciation}\n\n",
            usd(self.onprem_capex_usd),
            usd(self.onprem_opex_monthly_usd),
            usd(self.onprem_electricity_monthly_usd),
        ));
        let mut months = Table::new();
        months.load_preset(UTF8_FULL_CONDENSED);
        months.set_header(["month", "cloud cumulative USD", "on-prem cumulative USD", "on-prem, published formula"]);
        let rows = &self.comparison.months;
        for row in rows.iter().filter(|r| {
            r.month == 1
                || r.month % 12 == 0
                || Some(r.month) == self.comparison.break_even_month
                || r.month as usize == rows.len()
        }) {
            months.add_row([
                row.month.to_string(),
                usd(row.cloud_cumulative_usd),
                usd(row.onprem_cumulative_usd),
                usd(row.onprem_published_formula_usd),
            ]);
        }
        out.push_str(&months.to_string());
        out.push_str(&match self.comparison.break_even_month {
            Some(m) => format!("\n\nBreak-even: on premises costs no more than the cloud from month {m} on.\n"),
            None => format!("\n\nNo break-even within {} months: the cloud stays cheaper.\n", self.months),
        });
        let mut sens = Table::new();
        sens.load_preset(UTF8_FULL_CONDENSED);
        let mut header = vec!["break-even month when ×".to_string()];
        header.extend(SENSITIVITY_FACTORS.iter().map(|f| format!("{f}")));
        sens.set_header(header);
        for input in ["electricity price", "staff cost", "data volume"] {
            let mut row = vec![input.to_string()];
            for f in SENSITIVITY_FACTORS {
                let m = self
                    .sensitivity
                    .iter()
                    .find(|s| s.input == input && s.factor == f)
                    .and_then(|s| s.break_even_month);
                row.push(m.map_or_else(|| "never".to_string(), |m| m.to_string()));
            }
            sens.add_row(row);
        }
        out.push('\n');
        out.push_str(&sens.to_string());
        if !self.performance.is_empty() {
            let mut perf = Table::new();
            perf.load_preset(UTF8_FULL_CONDENSED);
            perf.set_header([
                "target",
                "GiB/s per node",
                "kops/s per node",
                "on-prem USD per GiB/s-month",
                "on-prem USD per kops/s-month",
                "cloud USD per GiB/s-month",
            ]);
            let opt = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
            for p in &self.performance {
                perf.add_row([
                    p.target.clone(),
                    format!("{:.2}", p.gib_per_s),
                    format!("{:.1}", p.kops_per_s),
                    opt(p.onprem_usd_per_gib_s_month),
                    opt(p.onprem_usd_per_kops_month),
                    opt(p.cloud_usd_per_gib_s_month),
                ]);
            }
            let per_tb = self.scenario.onprem.amortised_monthly_usd(self.months, self.model)
                / self.scenario.onprem.capacity_tb.max(f64::MIN_POSITIVE);
            let cloud_per_tb = self.cloud_monthly_usd / self.scenario.data_tb.max(f64::MIN_POSITIVE);
            let spread = match self.model {
                CostModel::Paper => "CapEx spread over the horizon, depreciation added",
                CostModel::Refined => "hardware spread over its lifetime or the horizon",
            };
            out.push_str(&format!(
                "\n\nPrice and performance ({spread}): on premises {per_tb:.2} USD per TB-month, cloud {cloud_per_tb:.2} USD per TB-month\n"
            ));
            out.push_str(&perf.to_string());
        }
        out
    }

    /// Draws cumulative cost over the months, with the break-even month marked.
    pub fn write_svg(&self, path: &std::path::Path) -> Result<(), String> {
        let rows = &self.comparison.months;
        let max_y = rows.iter().map(|r| r.cloud_cumulative_usd.max(r.onprem_cumulative_usd)).fold(1.0, f64::max) * 1.05;
        let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
        let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    format!("Cumulative cost: {} scenario, {} model", self.scenario.name, self.model),
                    ("sans-serif", 22),
                )
                .margin(20)
                .x_label_area_size(40)
                .y_label_area_size(90)
                .build_cartesian_2d(0u32..self.months, 0f64..max_y)?;
            chart.configure_mesh().x_desc("month").y_desc("USD").draw()?;
            chart
                .draw_series(LineSeries::new(rows.iter().map(|r| (r.month, r.cloud_cumulative_usd)), &BLUE))?
                .label("cloud")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
            chart
                .draw_series(LineSeries::new(rows.iter().map(|r| (r.month, r.onprem_cumulative_usd)), &RED))?
                .label("on premises")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
            if let Some(m) = self.comparison.break_even_month {
                chart
                    .draw_series(LineSeries::new([(m, 0.0), (m, max_y)], BLACK.stroke_width(1)))?
                    .label(format!("break-even: month {m}"))
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
            }
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
            root.present()?;
            Ok(())
        };
        draw().map_err(|e| format!("cannot draw {}: {e}", path.display()))
    }
}

/// The years at which `key_figures` gives cumulative totals; the break-even month is sought
/// within the last of them.
pub const KEY_FIGURE_YEARS: [u32; 3] = [1, 3, 5];

/// The headline figures of one scenario under one model, for reports that set presets and
/// models side by side (`isthmus bench reproduce lustre-minio`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyFigures {
    pub scenario: String,
    pub model: CostModel,
    pub cloud_monthly_usd: f64,
    pub onprem_capex_usd: f64,
    /// First month within `KEY_FIGURE_YEARS`' last year at whose end on premises has cost no
    /// more than the cloud (None: the cloud stays cheaper).
    pub break_even_month: Option<u32>,
    /// Cumulative totals at the end of each of `KEY_FIGURE_YEARS`.
    pub totals: Vec<YearTotal>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YearTotal {
    pub years: u32,
    pub cloud_usd: f64,
    pub onprem_usd: f64,
}

/// The key figures of `scenario` under `model`.
pub fn key_figures(scenario: &Scenario, model: CostModel) -> KeyFigures {
    let horizon_years = KEY_FIGURE_YEARS[KEY_FIGURE_YEARS.len() - 1];
    let comparison = scenario.compare(horizon_years * 12, model);
    let totals = KEY_FIGURE_YEARS
        .iter()
        .map(|&years| {
            let row = &comparison.months[(years * 12 - 1) as usize];
            YearTotal { years, cloud_usd: row.cloud_cumulative_usd, onprem_usd: row.onprem_cumulative_usd }
        })
        .collect();
    KeyFigures {
        scenario: scenario.name.clone(),
        model,
        cloud_monthly_usd: scenario.cloud.monthly(model),
        onprem_capex_usd: scenario.onprem.capex_usd(),
        break_even_month: comparison.break_even_month,
        totals,
    }
}

/// The key figures of every shipped preset (budget, standard, high) under every model
/// (paper, then refined), preset by preset.
pub fn preset_key_figures() -> Result<Vec<KeyFigures>, CostError> {
    let mut out = Vec::new();
    for (name, _) in PRESETS {
        let scenario = preset(name)?;
        out.extend(CostModel::ALL.into_iter().map(|model| key_figures(&scenario, model)));
    }
    Ok(out)
}
