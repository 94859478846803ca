//! The cost model: cloud pay-as-you-go (unit price × quantity per month, summed over services)
//! against on-premises (CapEx once, OpEx per month, maintenance as an annual rate of the
//! hardware cost, depreciation), month by month, under the published equations or the
//! project's refinement of them (`CostModel`).

use serde::{Deserialize, Serialize};

use crate::CostError;

/// Hours in an average month (8760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Which equations price the load balancer and the hardware's depreciation; every other term is
/// the same in both.
///
/// The published equations are the default so that `isthmus cost` reproduces the paper's
/// figures; the refinement is kept as an explicit choice because it prices what AWS and a
/// hardware budget actually charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CostModel {
    /// As published: the load balancer is priced on the data it processes only
    /// (cost_ELB = price per GB processed × GB processed per month × months, eq. 5), and
    /// depreciation is a yearly percentage of CapEx added to the on-premises total
    /// (rate × CapEx per year, counted monthly as rate × CapEx / 12, eq. 9 and Table 7).
    #[default]
    Paper,
    /// The refinement: the load balancer is also billed for every hour it runs (ALB or NLB
    /// hourly price × 730 h a month), and depreciation is a replacement cycle: the hardware
    /// is bought again every 1/rate years.
    Refined,
}

impl CostModel {
    pub const ALL: [CostModel; 2] = [CostModel::Paper, CostModel::Refined];
    /// The names of `ALL`, in order, as written on the command line and in JSON.
    pub const NAMES: &'static [&'static str] = &["paper", "refined"];

    pub fn name(self) -> &'static str {
        match self {
            CostModel::Paper => "paper",
            CostModel::Refined => "refined",
        }
    }
}

impl std::str::FromStr for CostModel {
    type Err = CostError;

    fn from_str(s: &str) -> Result<Self, CostError> {
        Self::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| CostError::UnknownModel(s.into()))
    }
}

impl std::fmt::Display for CostModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Cloud unit prices in USD. Defaults are the figures used in the literature the project
/// starts from (AWS us-east-1); every one can be edited in a scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CloudPrices {
    /// FSx for Lustre HDD capacity, per GB-month.
    pub fsx_hdd_gb_month: f64,
    /// FSx for Lustre SSD capacity, per GB-month.
    pub fsx_ssd_gb_month: f64,
    /// FSx for Lustre backups, per GB-month.
    pub fsx_backup_gb_month: f64,
    /// Provisioned throughput beyond what the capacity includes, per MB/s-month.
    pub fsx_throughput_mbps_month: f64,
    /// S3 Standard, first 50 TB, per GB-month.
    pub s3_standard_first_50tb_gb_month: f64,
    /// S3 Standard beyond 50 TB, per GB-month.
    pub s3_standard_beyond_gb_month: f64,
    /// S3 Glacier Deep Archive, per GB-month.
    pub glacier_deep_archive_gb_month: f64,
    /// PUT, COPY, POST, LIST requests, per 1000.
    pub s3_write_requests_per_1000: f64,
    /// GET and other requests, per 1000.
    pub s3_read_requests_per_1000: f64,
    /// Data transfer out to the internet, per GB.
    pub transfer_out_gb: f64,
    /// Application load balancer, per hour (refined model only).
    pub alb_hour: f64,
    /// Network load balancer, per hour (refined model only).
    pub nlb_hour: f64,
    /// Load balancer data processing, per GB: the published ELB price (eq. 5), in both models.
    pub lb_data_processing_gb: f64,
}

impl Default for CloudPrices {
    fn default() -> Self {
        Self {
            fsx_hdd_gb_month: 0.088,
            fsx_ssd_gb_month: 0.794,
            fsx_backup_gb_month: 0.054,
            fsx_throughput_mbps_month: 0.0,
            s3_standard_first_50tb_gb_month: 0.0245,
            s3_standard_beyond_gb_month: 0.0235,
            glacier_deep_archive_gb_month: 0.00099,
            s3_write_requests_per_1000: 0.005,
            s3_read_requests_per_1000: 0.0004,
            transfer_out_gb: 0.09,
            alb_hour: 0.008,
            nlb_hour: 0.006,
            lb_data_processing_gb: 0.008,
        }
    }
}

/// Which load balancer fronts the cloud deployment; it selects the hourly price of the refined
/// model (the published model prices only the data processed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LoadBalancer {
    #[default]
    None,
    Alb,
    Nlb,
}

/// Monthly quantities of each cloud service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CloudUsage {
    pub fsx_hdd_gb: f64,
    pub fsx_ssd_gb: f64,
    pub fsx_backup_gb: f64,
    pub fsx_throughput_mbps: f64,
    pub s3_standard_gb: f64,
    pub glacier_deep_archive_gb: f64,
    pub s3_write_requests: f64,
    pub s3_read_requests: f64,
    pub transfer_out_gb: f64,
    pub load_balancer: LoadBalancer,
    pub lb_processed_gb: f64,
}

/// The cloud side of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Cloud {
    pub prices: CloudPrices,
    pub usage: CloudUsage,
}

/// One priced line of a monthly bill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BillLine {
    pub service: &'static str,
    pub quantity: f64,
    pub unit_price: f64,
    pub monthly_usd: f64,
}

impl Cloud {
    /// The monthly bill under `model`, line by line (lines with zero quantity left out). The
    /// two models differ only in the load balancer's hourly line, which the published ELB term
    /// (price per GB processed × GB processed, eq. 5) does not have.
    pub fn bill(&self, model: CostModel) -> Vec<BillLine> {
        let (p, u) = (&self.prices, &self.usage);
        let first_tier_gb = 50_000.0;
        let s3_first = u.s3_standard_gb.min(first_tier_gb);
        let s3_beyond = (u.s3_standard_gb - first_tier_gb).max(0.0);
        let lb_hour = match u.load_balancer {
            LoadBalancer::None => 0.0,
            LoadBalancer::Alb => p.alb_hour,
            LoadBalancer::Nlb => p.nlb_hour,
        };
        let lb_hours = match (model, u.load_balancer) {
            (CostModel::Paper, _) | (CostModel::Refined, LoadBalancer::None) => 0.0,
            (CostModel::Refined, LoadBalancer::Alb | LoadBalancer::Nlb) => HOURS_PER_MONTH,
        };
        let lines = [
            ("FSx for Lustre HDD (GB-month)", u.fsx_hdd_gb, p.fsx_hdd_gb_month),
            ("FSx for Lustre SSD (GB-month)", u.fsx_ssd_gb, p.fsx_ssd_gb_month),
            ("FSx for Lustre backup (GB-month)", u.fsx_backup_gb, p.fsx_backup_gb_month),
            ("FSx provisioned throughput (MB/s-month)", u.fsx_throughput_mbps, p.fsx_throughput_mbps_month),
            ("S3 Standard, first 50 TB (GB-month)", s3_first, p.s3_standard_first_50tb_gb_month),
            ("S3 Standard, beyond 50 TB (GB-month)", s3_beyond, p.s3_standard_beyond_gb_month),
            ("S3 Glacier Deep Archive (GB-month)", u.glacier_deep_archive_gb, p.glacier_deep_archive_gb_month),
            ("S3 write requests (1000s)", u.s3_write_requests / 1000.0, p.s3_write_requests_per_1000),
            ("S3 read requests (1000s)", u.s3_read_requests / 1000.0, p.s3_read_requests_per_1000),
            ("Data transfer out (GB)", u.transfer_out_gb, p.transfer_out_gb),
            ("Load balancer (hours)", lb_hours, lb_hour),
            ("Load balancer data processing (GB)", u.lb_processed_gb, p.lb_data_processing_gb),
        ];
        lines
            .into_iter()
            .filter(|(_, q, _)| *q > 0.0)
            .map(|(service, quantity, unit_price)| BillLine {
                service,
                quantity,
                unit_price,
                monthly_usd: quantity * unit_price,
            })
            .collect()
    }

    pub fn monthly(&self, model: CostModel) -> f64 {
        self.bill(model).iter().map(|l| l.monthly_usd).sum()
    }

    /// The same services for `factor` times the data (capacity and traffic scale together).
    pub fn scaled(&self, factor: f64) -> Self {
        let u = &self.usage;
        Self {
            prices: self.prices.clone(),
            usage: CloudUsage {
                fsx_hdd_gb: u.fsx_hdd_gb * factor,
                fsx_ssd_gb: u.fsx_ssd_gb * factor,
                fsx_backup_gb: u.fsx_backup_gb * factor,
                fsx_throughput_mbps: u.fsx_throughput_mbps,
                s3_standard_gb: u.s3_standard_gb * factor,
                glacier_deep_archive_gb: u.glacier_deep_archive_gb * factor,
                s3_write_requests: u.s3_write_requests * factor,
                s3_read_requests: u.s3_read_requests * factor,
                transfer_out_gb: u.transfer_out_gb * factor,
                load_balancer: u.load_balancer,
                lb_processed_gb: u.lb_processed_gb * factor,
            },
        }
    }
}

/// The on-premises side of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnPrem {
    pub nodes: u32,
    pub node_cost_usd: f64,
    pub storage_cost_usd: f64,
    pub network_cost_usd: f64,
    pub facilities_cost_usd: f64,
    pub node_power_w: f64,
    pub network_power_w: f64,
    pub cooling_power_w: f64,
    pub electricity_usd_per_kwh: f64,
    pub staff_count: f64,
    pub staff_monthly_usd: f64,
    pub licences_monthly_usd: f64,
    /// Annual maintenance, as a fraction of the hardware cost.
    pub maintenance_rate: f64,
    /// Annual depreciation rate. Published model: this fraction of CapEx is a cost every year
    /// (Table 7). Refined model: the hardware is bought again every 1/rate years (0: never).
    pub depreciation_rate: f64,
    /// Usable capacity, for cost per TB-month.
    pub capacity_tb: f64,
}

impl Default for OnPrem {
    fn default() -> Self {
        Self {
            nodes: 0,
            node_cost_usd: 0.0,
            storage_cost_usd: 0.0,
            network_cost_usd: 0.0,
            facilities_cost_usd: 0.0,
            node_power_w: 0.0,
            network_power_w: 0.0,
            cooling_power_w: 0.0,
            electricity_usd_per_kwh: 0.15,
            staff_count: 0.0,
            staff_monthly_usd: 0.0,
            licences_monthly_usd: 0.0,
            maintenance_rate: 0.0,
            depreciation_rate: 0.0,
            capacity_tb: 0.0,
        }
    }
}

impl OnPrem {
    /// Servers, storage and network: what wears out and is maintained.
    pub fn hardware_usd(&self) -> f64 {
        f64::from(self.nodes) * self.node_cost_usd + self.storage_cost_usd + self.network_cost_usd
    }

    /// Paid once at the start: hardware and facilities.
    pub fn capex_usd(&self) -> f64 {
        self.hardware_usd() + self.facilities_cost_usd
    }

    pub fn power_w(&self) -> f64 {
        f64::from(self.nodes) * self.node_power_w + self.network_power_w + self.cooling_power_w
    }

    pub fn electricity_monthly_usd(&self) -> f64 {
        self.power_w() / 1000.0 * HOURS_PER_MONTH * self.electricity_usd_per_kwh
    }

    pub fn staff_monthly(&self) -> f64 {
        self.staff_count * self.staff_monthly_usd
    }

    pub fn maintenance_monthly_usd(&self) -> f64 {
        self.maintenance_rate * self.hardware_usd() / 12.0
    }

    /// Everything paid every month.
    pub fn opex_monthly_usd(&self) -> f64 {
        self.electricity_monthly_usd()
            + self.staff_monthly()
            + self.licences_monthly_usd
            + self.maintenance_monthly_usd()
    }

    /// The published depreciation (eq. 9, Table 7), per month: rate × CapEx a year, spread over
    /// its twelve months. Decision: it is not capped at CapEx (a rate × years above 1 keeps
    /// counting), because the published equation has no cap; the presets stay below it within
    /// 5 years (High: 10 % a year).
    pub fn paper_depreciation_monthly_usd(&self) -> f64 {
        self.depreciation_rate * self.capex_usd() / 12.0
    }

    /// Months the hardware lasts in the refined model, from the depreciation rate.
    pub fn lifetime_months(&self) -> Option<u32> {
        (self.depreciation_rate > 0.0).then(|| (12.0 / self.depreciation_rate).round().max(1.0) as u32)
    }

    /// Total paid by the end of month `m` (1-based): CapEx once and OpEx every month, plus
    /// depreciation as `model` counts it: rate × CapEx / 12 every month (paper), or the
    /// hardware bought again at the start of each new lifetime (refined).
    pub fn cumulative_usd(&self, m: u32, model: CostModel) -> f64 {
        let depreciation = match model {
            CostModel::Paper => f64::from(m) * self.paper_depreciation_monthly_usd(),
            CostModel::Refined => {
                let replacements = self.lifetime_months().map_or(0, |life| (m.saturating_sub(1)) / life);
                f64::from(replacements) * self.hardware_usd()
            }
        };
        self.capex_usd() + f64::from(m) * self.opex_monthly_usd() + depreciation
    }

    /// The published form of the on-premises total, kept for comparison:
    /// Σ_{k=1..m} (CapEx / k + OpEx + rate × CapEx / 12). It divides CapEx by the month index
    /// inside the sum, so the CapEx counted grows with the harmonic series (about CapEx × ln m)
    /// instead of being paid once. Decision: it always carries the published depreciation,
    /// whatever the model chosen, because it is the paper's equation; beside the paper model's
    /// total it differs only in how CapEx is counted.
    pub fn published_cumulative_usd(&self, m: u32) -> f64 {
        let monthly = self.opex_monthly_usd() + self.paper_depreciation_monthly_usd();
        (1..=m).map(|k| self.capex_usd() / f64::from(k) + monthly).sum()
    }

    /// Cost of running the deployment for one month over `horizon_months`. Paper: the total
    /// at the horizon spread evenly over it (CapEx / horizon + OpEx + depreciation). Refined:
    /// the hardware spread over its lifetime (or the horizon when it is never replaced), the
    /// facilities over the horizon, plus OpEx.
    pub fn amortised_monthly_usd(&self, horizon_months: u32, model: CostModel) -> f64 {
        let horizon = horizon_months.max(1);
        match model {
            CostModel::Paper => self.cumulative_usd(horizon, model) / f64::from(horizon),
            CostModel::Refined => {
                let spread = self.lifetime_months().unwrap_or(horizon).max(1);
                self.hardware_usd() / f64::from(spread)
                    + self.facilities_cost_usd / f64::from(horizon)
                    + self.opex_monthly_usd()
            }
        }
    }
}

/// A whole scenario: data volume, the cloud bill and the on-premises deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Data stored, in TB (for cost per TB-month and data-volume sensitivity).
    pub data_tb: f64,
    #[serde(default)]
    pub cloud: Cloud,
    pub onprem: OnPrem,
}

/// Month-by-month comparison under one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub model: CostModel,
    pub months: Vec<MonthRow>,
    /// First month at whose end the on-premises total is not above the cloud total.
    pub break_even_month: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonthRow {
    pub month: u32,
    pub cloud_cumulative_usd: f64,
    pub onprem_cumulative_usd: f64,
    pub onprem_published_formula_usd: f64,
}

impl Scenario {
    pub fn compare(&self, months: u32, model: CostModel) -> Comparison {
        let cloud_monthly = self.cloud.monthly(model);
        let rows: Vec<MonthRow> = (1..=months)
            .map(|m| MonthRow {
                month: m,
                cloud_cumulative_usd: cloud_monthly * f64::from(m),
                onprem_cumulative_usd: self.onprem.cumulative_usd(m, model),
                onprem_published_formula_usd: self.onprem.published_cumulative_usd(m),
            })
            .collect();
        let break_even_month = rows.iter().find(|r| r.onprem_cumulative_usd <= r.cloud_cumulative_usd).map(|r| r.month);
        Comparison { model, months: rows, break_even_month }
    }

    /// Break-even month under `model` when one input is multiplied by each factor.
    pub fn sensitivity(&self, months: u32, factors: &[f64], model: CostModel) -> Vec<Sensitivity> {
        let mut out = Vec::new();
        for &factor in factors {
            let mut electricity = self.clone();
            electricity.onprem.electricity_usd_per_kwh *= factor;
            let mut staff = self.clone();
            staff.onprem.staff_monthly_usd *= factor;
            let mut volume = self.clone();
            volume.data_tb *= factor;
            volume.cloud = self.cloud.scaled(factor);
            volume.onprem.storage_cost_usd *= factor;
            for (input, scenario) in
                [("electricity price", electricity), ("staff cost", staff), ("data volume", volume)]
            {
                out.push(Sensitivity {
                    input,
                    factor,
                    break_even_month: scenario.compare(months, model).break_even_month,
                });
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    pub input: &'static str,
    pub factor: f64,
    pub break_even_month: Option<u32>,
}
