//! Presenting a comparison: the terminal table, the JSON document and the SVG chart of
//! cumulative cost with the break-even month marked.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use plotters::prelude::*;
use serde::Serialize;

use crate::model::{BillLine, Comparison, Scenario, Sensitivity};
use crate::perf::PerfCost;

/// Everything `isthmus cost` reports, as written with `--json`.
#[derive(Debug, Serialize)]
pub struct CostReport<'a> {
    pub scenario: &'a Scenario,
    pub months: u32,
    pub cloud_bill: Vec<BillLine>,
    pub cloud_monthly_usd: f64,
    pub onprem_capex_usd: f64,
    pub onprem_opex_monthly_usd: f64,
    pub onprem_electricity_monthly_usd: f64,
    pub onprem_lifetime_months: Option<u32>,
    pub comparison: Comparison,
    pub sensitivity: Vec<Sensitivity>,
    pub performance: Vec<PerfCost>,
}

/// The factors each input is scaled by in the sensitivity table.
pub const SENSITIVITY_FACTORS: [f64; 3] = [0.5, 1.0, 2.0];

impl<'a> CostReport<'a> {
    pub fn new(scenario: &'a Scenario, months: u32, performance: Vec<PerfCost>) -> Self {
        Self {
            scenario,
            months,
            cloud_bill: scenario.cloud.bill(),
            cloud_monthly_usd: scenario.cloud.monthly(),
            onprem_capex_usd: scenario.onprem.capex_usd(),
            onprem_opex_monthly_usd: scenario.onprem.opex_monthly_usd(),
            onprem_electricity_monthly_usd: scenario.onprem.electricity_monthly_usd(),
            onprem_lifetime_months: scenario.onprem.lifetime_months(),
            comparison: scenario.compare(months),
            sensitivity: scenario.sensitivity(months, &SENSITIVITY_FACTORS),
            performance,
        }
    }

    pub fn table(&self) -> String {
        let usd = |x: f64| format!("{x:.0}");
        let mut out = format!(
            "Scenario {} ({} TB), {} months\n\nCloud, per month: {} USD\n",
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
        out.push_str(&format!(
            "\n\nOn premises: CapEx {} USD, OpEx {} USD/month (electricity {}){}\n\n",
            usd(self.onprem_capex_usd),
            usd(self.onprem_opex_monthly_usd),
            usd(self.onprem_electricity_monthly_usd),
            self.onprem_lifetime_months.map_or(String::new(), |m| format!(", hardware replaced every {m} months"))
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
            let per_tb = self.scenario.onprem.amortised_monthly_usd(self.months)
                / self.scenario.onprem.capacity_tb.max(f64::MIN_POSITIVE);
            let cloud_per_tb = self.cloud_monthly_usd / self.scenario.data_tb.max(f64::MIN_POSITIVE);
            out.push_str(&format!(
                "\n\nPrice and performance (hardware spread over its lifetime or the horizon): on premises {per_tb:.2} USD per TB-month, cloud {cloud_per_tb:.2} USD per TB-month\n"
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
                .caption(format!("Cumulative cost: {} scenario", self.scenario.name), ("sans-serif", 22))
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
