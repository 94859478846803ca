//! The model's arithmetic against hand-computed figures, including the three presets, under the
//! published equations (`paper`) and the refinement (`refined`).

use isthmus_cost::model::{Cloud, CloudUsage, CostModel, LoadBalancer, OnPrem};
use isthmus_cost::report::{CostReport, KEY_FIGURE_YEARS};
use isthmus_cost::{Scenario, key_figures, parse, preset, preset_key_figures};

use CostModel::{Paper, Refined};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[test]
fn budget_preset_by_hand() {
    let s = preset("budget").unwrap();
    // 10 x 800 USD of nodes, nothing else.
    assert!(close(s.onprem.capex_usd(), 8000.0));
    // (10 x 200 W + 2,400 W) x 730 h x 0.15 USD/kWh
    assert!(close(s.onprem.electricity_monthly_usd(), 4.4 * 730.0 * 0.15));
    assert!(close(s.onprem.opex_monthly_usd(), 481.8));
    // FSx HDD 20,000 GB x 0.088 + backup 20,000 x 0.054 + 1,000 GB out x 0.09
    // + 2,000 GB processed by the load balancer x 0.008 (eq. 5) ...
    assert!(close(s.cloud.monthly(Paper), 1760.0 + 1080.0 + 90.0 + 16.0));
    // ... and, refined, the NLB's 730 h x 0.006 as well.
    assert!(close(s.cloud.monthly(Refined), 1760.0 + 1080.0 + 90.0 + 4.38 + 16.0));
    // 8000 + 481.8 m <= 2946 m  <=>  m >= 3.25 (refined: 2950.38 m, m >= 3.24)
    let c = s.compare(24, Paper);
    assert_eq!(c.break_even_month, Some(4));
    assert_eq!(s.compare(24, Refined).break_even_month, Some(4));
    assert!(close(c.months[0].onprem_cumulative_usd, 8481.8));
    assert!(close(c.months[1].cloud_cumulative_usd, 2.0 * 2946.0));
    // The published formula: month 2 = (8000/1 + 481.8) + (8000/2 + 481.8).
    assert!(close(c.months[1].onprem_published_formula_usd, 12963.6));
}

#[test]
fn standard_preset_by_hand() {
    let s = preset("standard").unwrap();
    assert!(close(s.onprem.capex_usd(), 50.0 * 1500.0 + 4500.0));
    // (50 x 320 + 26,250) W = 42.25 kW
    assert!(close(s.onprem.electricity_monthly_usd(), 42.25 * 730.0 * 0.15));
    assert!(close(s.onprem.opex_monthly_usd(), 4626.375 + 800.0));
    assert!(close(s.cloud.monthly(Paper), 13200.0 + 8100.0 + 675.0 + 120.0));
    assert!(close(s.cloud.monthly(Refined), 13200.0 + 8100.0 + 675.0 + 4.38 + 120.0));
    // 79,500 / (22,095 - 5,426.375) = 4.77; refined 79,500 / (22,099.38 - 5,426.375) = 4.77
    assert_eq!(s.compare(60, Paper).break_even_month, Some(5));
    assert_eq!(s.compare(60, Refined).break_even_month, Some(5));
}

#[test]
fn high_preset_by_hand() {
    let s = preset("high").unwrap();
    let hardware = 150.0 * 2100.0 + 18000.0 + 31500.0;
    let capex = hardware + 140000.0;
    assert!(close(s.onprem.hardware_usd(), hardware));
    assert!(close(s.onprem.capex_usd(), capex));
    // (150 x 495 + 2,250 + 110,000) W = 186.5 kW
    assert!(close(s.onprem.electricity_monthly_usd(), 186.5 * 730.0 * 0.15));
    assert!(close(s.onprem.maintenance_monthly_usd(), 0.05 * hardware / 12.0));
    let opex = 20421.75 + 2400.0 + 1518.75;
    assert!(close(s.onprem.opex_monthly_usd(), opex));
    assert!(close(s.cloud.monthly(Paper), 52800.0 + 32400.0 + 2700.0 + 480.0));
    assert!(close(s.cloud.monthly(Refined), 52800.0 + 32400.0 + 2700.0 + 5.84 + 480.0));
    // Paper: 10 % of 504,500 a year = 4,204.17 a month more:
    // 504,500 / (88,380 - 24,340.5 - 4,204.17) = 8.43.
    assert!(close(s.onprem.paper_depreciation_monthly_usd(), 0.1 * capex / 12.0));
    assert_eq!(s.compare(60, Paper).break_even_month, Some(9));
    assert!(close(s.onprem.cumulative_usd(60, Paper), capex + 60.0 * opex + 0.1 * capex * 5.0));
    // Refined: 504,500 / (88,385.84 - 24,340.5) = 7.88, and the hardware bought again after
    // 120 months.
    assert_eq!(s.compare(60, Refined).break_even_month, Some(8));
    assert_eq!(s.onprem.lifetime_months(), Some(120));
    assert!(close(s.onprem.cumulative_usd(120, Refined), capex + 120.0 * opex));
    assert!(close(s.onprem.cumulative_usd(121, Refined), capex + 121.0 * opex + hardware));
}

/// A small scenario whose every term is easy by hand: 1,000 GB through an ALB each month,
/// 2,500 USD of CapEx (2 nodes at 1,000, facilities 500) depreciated at 20 % a year, no OpEx.
fn small() -> Scenario {
    parse(
        "small",
        "name = \"small\"\ndata_tb = 1\n\
         [onprem]\nnodes = 2\nnode_cost_usd = 1000\nfacilities_cost_usd = 500\ndepreciation_rate = 0.2\n\
         [cloud.usage]\nload_balancer = \"alb\"\nlb_processed_gb = 1000\n",
    )
    .unwrap()
}

#[test]
fn paper_elb_is_price_per_gb_processed_times_volume_times_months() {
    let s = small();
    let (price, gb) = (s.cloud.prices.lb_data_processing_gb, s.cloud.usage.lb_processed_gb);
    assert_eq!(price, 0.008);
    let paper = s.compare(60, Paper);
    let refined = s.compare(60, Refined);
    for months in [1u32, 7, 12, 36, 60] {
        let row = &paper.months[months as usize - 1];
        // eq. 5: nothing but price x GB processed per month x months.
        assert!(close(row.cloud_cumulative_usd, price * gb * f64::from(months)));
        // The refinement adds the ALB's hours, 730 a month at 0.008 USD.
        let hourly = s.cloud.prices.alb_hour * 730.0 * f64::from(months);
        assert!(close(refined.months[months as usize - 1].cloud_cumulative_usd, row.cloud_cumulative_usd + hourly));
    }
    let lines = |m| s.cloud.bill(m).into_iter().map(|l| l.service).collect::<Vec<_>>();
    assert_eq!(lines(Paper), ["Load balancer data processing (GB)"]);
    assert_eq!(lines(Refined), ["Load balancer (hours)", "Load balancer data processing (GB)"]);
}

#[test]
fn paper_depreciation_is_rate_times_capex_per_year() {
    let s = small();
    let (rate, capex) = (0.2, 2500.0);
    assert!(close(s.onprem.capex_usd(), capex));
    assert_eq!(s.onprem.opex_monthly_usd(), 0.0);
    for years in [1u32, 3, 5, 7] {
        let m = years * 12;
        // eq. 9: CapEx once, and rate x CapEx for every year.
        assert!(close(s.onprem.cumulative_usd(m, Paper), capex + rate * capex * f64::from(years)));
    }
    // Counted monthly: a month is a twelfth of the year's depreciation.
    assert!(close(s.onprem.cumulative_usd(1, Paper), capex + rate * capex / 12.0));
    // Refined: no running charge; the hardware (not the facilities) is bought again after
    // 1/0.2 = 5 years.
    assert!(close(s.onprem.cumulative_usd(60, Refined), capex));
    assert!(close(s.onprem.cumulative_usd(61, Refined), capex + 2000.0));
    // The published total divides CapEx by the month index and carries the same depreciation.
    let published: f64 = (1..=3).map(|k| capex / f64::from(k) + rate * capex / 12.0).sum();
    assert!(close(s.onprem.published_cumulative_usd(3), published));
    // Spread over 60 months: the paper's 5-year total / 60; refined: hardware over its 60-month
    // lifetime, facilities over the horizon.
    assert!(close(s.onprem.amortised_monthly_usd(60, Paper), (capex + rate * capex * 5.0) / 60.0));
    assert!(close(s.onprem.amortised_monthly_usd(60, Refined), 2000.0 / 60.0 + 500.0 / 60.0));
}

#[test]
fn models_agree_where_neither_term_applies() {
    // No load balancer and no depreciation: every figure is the same in both models.
    let s = parse(
        "plain",
        "name = \"plain\"\ndata_tb = 10\n[onprem]\nnodes = 2\nnode_cost_usd = 5000\nstaff_count = 1\n\
         staff_monthly_usd = 100\nmaintenance_rate = 0.1\n[cloud.usage]\ns3_standard_gb = 10000\n\
         transfer_out_gb = 500\n",
    )
    .unwrap();
    assert_eq!(s.cloud.bill(Paper), s.cloud.bill(Refined));
    let (paper, refined) = (s.compare(120, Paper), s.compare(120, Refined));
    assert_eq!(paper.months, refined.months);
    assert_eq!(paper.break_even_month, refined.break_even_month);
    assert!(paper.break_even_month.is_some());
    // A load balancer that processes nothing costs nothing under the paper; it runs by the
    // hour under the refinement.
    let mut with_lb = s.clone();
    with_lb.cloud.usage.load_balancer = LoadBalancer::Nlb;
    assert!(close(with_lb.cloud.monthly(Paper), s.cloud.monthly(Paper)));
    assert!(close(with_lb.cloud.monthly(Refined), s.cloud.monthly(Refined) + 4.38));
    // On the presets without depreciation the on-premises totals agree month by month.
    for name in ["budget", "standard"] {
        let p = preset(name).unwrap();
        let (a, b) = (p.compare(60, Paper), p.compare(60, Refined));
        for (x, y) in a.months.iter().zip(&b.months) {
            assert_eq!(x.onprem_cumulative_usd, y.onprem_cumulative_usd);
            assert_eq!(x.onprem_published_formula_usd, y.onprem_published_formula_usd);
            assert!(y.cloud_cumulative_usd > x.cloud_cumulative_usd);
        }
    }
}

#[test]
fn key_figures_of_the_presets_in_both_models() {
    let all = preset_key_figures().unwrap();
    let names: Vec<(&str, CostModel)> = all.iter().map(|k| (k.scenario.as_str(), k.model)).collect();
    assert_eq!(
        names,
        [
            ("budget", Paper),
            ("budget", Refined),
            ("standard", Paper),
            ("standard", Refined),
            ("high", Paper),
            ("high", Refined)
        ]
    );
    let high = |m| all.iter().find(|k| k.scenario == "high" && k.model == m).unwrap();
    assert_eq!(high(Paper).break_even_month, Some(9));
    assert_eq!(high(Refined).break_even_month, Some(8));
    for k in &all {
        let s = preset(&k.scenario).unwrap();
        assert_eq!(k, &key_figures(&s, k.model));
        assert_eq!(k.totals.iter().map(|t| t.years).collect::<Vec<_>>(), KEY_FIGURE_YEARS);
        for t in &k.totals {
            let m = t.years * 12;
            assert!(close(t.cloud_usd, s.cloud.monthly(k.model) * f64::from(m)));
            assert!(close(t.onprem_usd, s.onprem.cumulative_usd(m, k.model)));
        }
    }
    // Budget over 5 years under the paper: 8,000 + 60 x 481.8 on premises, 60 x 2,946 in the
    // cloud.
    let budget = &all[0];
    assert!(close(budget.totals[2].onprem_usd, 8000.0 + 60.0 * 481.8));
    assert!(close(budget.totals[2].cloud_usd, 60.0 * 2946.0));
    let json = serde_json::to_value(budget).unwrap();
    assert_eq!(json["model"], "paper");
    assert_eq!(json["totals"][0]["years"], 1);
}

#[test]
fn the_report_names_its_model() {
    let s = preset("high").unwrap();
    let paper = CostReport::new(&s, 60, Paper, Vec::new());
    let json = serde_json::to_value(&paper).unwrap();
    assert_eq!(json["model"], "paper");
    assert_eq!(json["comparison"]["model"], "paper");
    assert_eq!(json["onprem_lifetime_months"], serde_json::Value::Null);
    assert!(close(json["onprem_depreciation_monthly_usd"].as_f64().unwrap(), 0.1 * 504500.0 / 12.0));
    assert!(paper.table().contains("depreciation 4204 USD/month (10 % of CapEx a year)"));
    let refined = CostReport::new(&s, 60, Refined, Vec::new());
    let json = serde_json::to_value(&refined).unwrap();
    assert_eq!(json["model"], "refined");
    assert_eq!(json["onprem_lifetime_months"], 120);
    assert_eq!(json["onprem_depreciation_monthly_usd"], serde_json::Value::Null);
    assert!(refined.table().contains("hardware replaced every 120 months"));
}

#[test]
fn model_names_parse_and_others_are_refused() {
    for model in CostModel::ALL {
        assert_eq!(model.name().parse::<CostModel>().unwrap(), model);
        assert_eq!(serde_json::to_value(model).unwrap(), model.name());
    }
    assert_eq!(CostModel::NAMES, CostModel::ALL.map(CostModel::name));
    assert_eq!(CostModel::default(), Paper);
    assert!("isthmus".parse::<CostModel>().unwrap_err().to_string().contains("paper or refined"));
}

#[test]
fn s3_tiers_and_load_balancers() {
    let cloud = Cloud {
        usage: CloudUsage {
            s3_standard_gb: 60_000.0,
            load_balancer: LoadBalancer::Alb,
            s3_write_requests: 2_000_000.0,
            ..Default::default()
        },
        ..Default::default()
    };
    // 50,000 GB at 0.0245 + 10,000 GB at 0.0235 + ALB 730 h x 0.008 + 2,000 x 0.005
    assert!(close(cloud.monthly(Refined), 1225.0 + 235.0 + 5.84 + 10.0));
    assert!(close(cloud.scaled(0.5).monthly(Refined), 30_000.0 * 0.0245 + 5.84 + 5.0));
    assert!(close(cloud.monthly(Paper), 1225.0 + 235.0 + 10.0));
}

#[test]
fn sensitivity_moves_break_even_the_right_way() {
    let s = preset("standard").unwrap();
    for model in CostModel::ALL {
        let sens = s.sensitivity(120, &[0.5, 1.0, 2.0], model);
        let month = |input: &str, f: f64| {
            sens.iter().find(|x| x.input == input && x.factor == f).unwrap().break_even_month.unwrap()
        };
        assert!(month("electricity price", 2.0) >= month("electricity price", 0.5));
        assert!(month("staff cost", 2.0) >= month("staff cost", 0.5));
        // More data makes the cloud dearer: break-even comes sooner.
        assert!(month("data volume", 2.0) <= month("data volume", 0.5));
        assert_eq!(month("electricity price", 1.0), 5);
    }
}

#[test]
fn user_scenarios_and_errors() {
    let s = parse("inline", "name = \"tiny\"\ndata_tb = 1\n[onprem]\nnodes = 1\nnode_cost_usd = 1000\n[cloud.usage]\ns3_standard_gb = 1000\n").unwrap();
    assert!(close(s.cloud.monthly(Paper), 24.5));
    // Never breaks even within a year: 1000 > 12 x 24.5.
    assert_eq!(s.compare(12, Paper).break_even_month, None);
    assert_eq!(s.compare(48, Paper).break_even_month, Some(41));
    assert!(
        parse("bad", "name = \"x\"\ndata_tb = 1\n[onprem]\nnodez = 1\n").unwrap_err().to_string().contains("nodez")
    );
    assert!(preset("huge").is_err());
    let op = OnPrem { nodes: 2, node_cost_usd: 100.0, depreciation_rate: 0.5, ..Default::default() };
    assert_eq!(op.lifetime_months(), Some(24));
    assert!(close(op.amortised_monthly_usd(60, Refined), 200.0 / 24.0 + op.opex_monthly_usd()));
}
