//! The model's arithmetic against hand-computed figures, including the three presets.

use isthmus_cost::model::{Cloud, CloudUsage, LoadBalancer, OnPrem};
use isthmus_cost::{parse, preset};

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
    // FSx HDD 20,000 GB x 0.088 + backup 20,000 x 0.054 + 1,000 GB out x 0.09 + NLB 730 h x 0.006
    // + 2,000 GB processed x 0.008
    assert!(close(s.cloud.monthly(), 1760.0 + 1080.0 + 90.0 + 4.38 + 16.0));
    // 8000 + 481.8 m <= 2950.38 m  <=>  m >= 3.24
    let c = s.compare(24);
    assert_eq!(c.break_even_month, Some(4));
    assert!(close(c.months[0].onprem_cumulative_usd, 8481.8));
    assert!(close(c.months[1].cloud_cumulative_usd, 2.0 * 2950.38));
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
    assert!(close(s.cloud.monthly(), 13200.0 + 8100.0 + 675.0 + 4.38 + 120.0));
    // 79,500 / (22,099.38 - 5,426.375) = 4.77
    assert_eq!(s.compare(60).break_even_month, Some(5));
}

#[test]
fn high_preset_by_hand() {
    let s = preset("high").unwrap();
    let hardware = 150.0 * 2100.0 + 18000.0 + 31500.0;
    assert!(close(s.onprem.hardware_usd(), hardware));
    assert!(close(s.onprem.capex_usd(), hardware + 140000.0));
    // (150 x 495 + 2,250 + 110,000) W = 186.5 kW
    assert!(close(s.onprem.electricity_monthly_usd(), 186.5 * 730.0 * 0.15));
    assert!(close(s.onprem.maintenance_monthly_usd(), 0.05 * hardware / 12.0));
    assert!(close(s.onprem.opex_monthly_usd(), 20421.75 + 2400.0 + 1518.75));
    assert!(close(s.cloud.monthly(), 52800.0 + 32400.0 + 2700.0 + 5.84 + 480.0));
    // 504,500 / (88,385.84 - 24,340.5) = 7.88
    assert_eq!(s.compare(60).break_even_month, Some(8));
    // 10 % depreciation: bought again after 120 months.
    assert_eq!(s.onprem.lifetime_months(), Some(120));
    assert!(close(s.onprem.cumulative_usd(120), 504500.0 + 120.0 * 24340.5));
    assert!(close(s.onprem.cumulative_usd(121), 504500.0 + 121.0 * 24340.5 + hardware));
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
    assert!(close(cloud.monthly(), 1225.0 + 235.0 + 5.84 + 10.0));
    assert!(close(cloud.scaled(0.5).monthly(), 30_000.0 * 0.0245 + 5.84 + 5.0));
}

#[test]
fn sensitivity_moves_break_even_the_right_way() {
    let s = preset("standard").unwrap();
    let sens = s.sensitivity(120, &[0.5, 1.0, 2.0]);
    let month = |input: &str, f: f64| {
        sens.iter().find(|x| x.input == input && x.factor == f).unwrap().break_even_month.unwrap()
    };
    assert!(month("electricity price", 2.0) >= month("electricity price", 0.5));
    assert!(month("staff cost", 2.0) >= month("staff cost", 0.5));
    // More data makes the cloud dearer: break-even comes sooner.
    assert!(month("data volume", 2.0) <= month("data volume", 0.5));
    assert_eq!(month("electricity price", 1.0), 5);
}

#[test]
fn user_scenarios_and_errors() {
    let s = parse("inline", "name = \"tiny\"\ndata_tb = 1\n[onprem]\nnodes = 1\nnode_cost_usd = 1000\n[cloud.usage]\ns3_standard_gb = 1000\n").unwrap();
    assert!(close(s.cloud.monthly(), 24.5));
    // Never breaks even within a year: 1000 > 12 x 24.5.
    assert_eq!(s.compare(12).break_even_month, None);
    assert_eq!(s.compare(48).break_even_month, Some(41));
    assert!(
        parse("bad", "name = \"x\"\ndata_tb = 1\n[onprem]\nnodez = 1\n").unwrap_err().to_string().contains("nodez")
    );
    assert!(preset("huge").is_err());
    let op = OnPrem { nodes: 2, node_cost_usd: 100.0, depreciation_rate: 0.5, ..Default::default() };
    assert_eq!(op.lifetime_months(), Some(24));
    assert!(close(op.amortised_monthly_usd(60), 200.0 / 24.0 + op.opex_monthly_usd()));
}
