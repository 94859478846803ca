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
    assert report["comparison"]["break_even_month"] == 4
    assert abs(report["cloud_monthly_usd"] - 2950.38) < 1e-6
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
