"""`isthmus cost` from the command line: presets, scenario files, JSON, SVG and bench figures."""

import json
import subprocess

from conftest import binary


def run(*args):
    return subprocess.run([str(binary()), "cost", *args], capture_output=True, text=True, timeout=60)


def test_preset_json_and_svg(tmp_path):
    svg = tmp_path / "chart.svg"
    r = run("--preset", "budget", "--months", "24", "--json", "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    # The published equations by default: the NLB is priced on the 2,000 GB it processes only.
    assert report["model"] == "paper"
    assert report["comparison"]["break_even_month"] == 4
    assert abs(report["cloud_monthly_usd"] - 2946.0) < 1e-6
    assert len(report["comparison"]["months"]) == 24
    text = svg.read_text()
    assert text.startswith("<svg") and "break-even: month 4" in text


def test_scenario_file_and_bench_figures(tmp_path):
    scenario = tmp_path / "mine.toml"
    scenario.write_text('name = "mine"\ndata_tb = 10\n[onprem]\nnodes = 2\nnode_cost_usd = 5000\ncapacity_tb = 10\n[cloud.usage]\ns3_standard_gb = 10000\n')
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"started_unix": 0, "host": "h", "durability": "strict", "results": [
        {"kind": "posix", "op": "get", "object_size": 67108864, "ops_per_s": 100.0, "mib_per_s": 2048.0},
        {"kind": "s3", "op": "head", "object_size": 4096, "ops_per_s": 30000.0, "mib_per_s": 0.0},
    ]}))
    r = run("--scenario", str(scenario), "--months", "120", "--bench", str(bench), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    perf = {p["target"]: p for p in report["performance"]}
    assert perf["posix"]["gib_per_s"] == 2.0
    assert perf["s3"]["kops_per_s"] == 30.0
    # 10,000 GB x 0.0245 = 245 USD/month against 10,000 USD once: month 41.
    assert report["comparison"]["break_even_month"] == 41
    table = run("--scenario", str(scenario), "--bench", str(bench))
    assert "Price and performance" in table.stdout


def test_bad_input_gets_a_one_line_error(tmp_path):
    r = run("--preset", "enormous")
    assert r.returncode == 1 and "budget, standard or high" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ndata_tb = 1\n[onprem]\ncpus = 3\n')
    r = run("--scenario", str(bad))
    assert r.returncode == 1 and "cpus" in r.stderr
    r = run()
    assert r.returncode == 1 and "--preset" in r.stderr


def test_model_flag_selects_the_equations(tmp_path):
    # High: an ALB and 10 % depreciation, so both terms of the two models differ.
    paper = json.loads(run("--preset", "high", "--model", "paper", "--json").stdout)
    default = json.loads(run("--preset", "high", "--json").stdout)
    assert paper == default and paper["model"] == "paper"
    r = run("--preset", "high", "--model", "refined", "--json")
    assert r.returncode == 0, r.stderr
    refined = json.loads(r.stdout)
    assert refined["model"] == "refined" and refined["comparison"]["model"] == "refined"
    # Refined adds the ALB's 730 h x 0.008 USD a month to the cloud ...
    assert abs(refined["cloud_monthly_usd"] - paper["cloud_monthly_usd"] - 5.84) < 1e-6
    # ... and replaces 10 % of CapEx a year (504,500 USD) by buying the hardware again after 120
    # months: within 60 months, 5 x 50,450 USD less on premises.
    capex = 504500.0
    assert abs(paper["onprem_depreciation_monthly_usd"] - 0.1 * capex / 12) < 1e-6
    assert refined["onprem_lifetime_months"] == 120
    month_60 = lambda report: report["comparison"]["months"][59]["onprem_cumulative_usd"]
    assert abs(month_60(paper) - month_60(refined) - 0.1 * capex * 5) < 1e-3
    assert paper["comparison"]["break_even_month"] == 9
    assert refined["comparison"]["break_even_month"] == 8
    table = run("--preset", "high", "--model", "refined").stdout
    assert "model refined" in table and "hardware replaced every 120 months" in table


def test_model_flag_lists_its_values_and_refuses_others():
    help_text = run("--help").stdout
    assert "--model" in help_text and "paper" in help_text and "refined" in help_text
    r = run("--preset", "budget", "--model", "isthmus")
    assert r.returncode != 0 and "paper" in r.stderr and "refined" in r.stderr
