"""`isthmus bench reproduce <study> --quick`: each study writes its report, and the report's
figures are the ones its JSON results give (recomputed here), not typed-in numbers. Minutes of
benchmarks each: run by `scripts/test --full` (marked heavy)."""

import json
import os
import re
import subprocess

import pytest

from conftest import binary

pytestmark = [pytest.mark.heavy, pytest.mark.posix_only]


def reproduce(study, out):
    run = subprocess.run(
        [str(binary()), "bench", "reproduce", study, "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert f"report written to {out / 'report.md'}" in run.stdout
    report = (out / "report.md").read_text()
    assert not (out / "data").exists(), "the default data directory is removed after the run"
    return report


def tables(report):
    """Every Markdown table of the report under its section heading: {heading: [[{column: cell}]]}."""
    found, heading, rows, header = {}, None, None, None
    for line in report.splitlines() + [""]:
        if line.startswith("## "):
            heading = line[3:]
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if header is None:
                header, rows = cells, []
            else:
                rows.append(dict(zip(header, cells)))
        elif not line.startswith("|---") and header is not None:
            found.setdefault(heading, []).append(rows)
            header = None
    return found


def value(cell):
    """The leading number of a cell ("1,234 op/s", "12.5 %", "0.0123")."""
    return float(re.match(r"-?[\d,]*\.?\d+", cell).group(0).replace(",", ""))


def close(shown, exact, digits=3):
    """`shown` is `exact` as the report rounds it (three significant digits, 0.1 % for shares)."""
    return abs(shown - exact) <= max(abs(exact) * 10 ** (1 - digits), 0.051)


def test_cephfs_ec_report_folds_in_the_pools_rows(tmp_path):
    report = reproduce("cephfs-ec", tmp_path / "r")
    rows = json.loads((tmp_path / "r" / "pools.json").read_text())
    assert (tmp_path / "r" / "pools.svg").read_text().startswith("<svg")
    layouts = tables(report)["Layouts and block sizes: write throughput and tails"][0]
    writes = [r for r in rows if r["op"] == "write" and "+" in r["layout"] and "-slow-" not in r["pool"]]
    assert len(layouts) == len(writes) == 6
    for shown, row in zip(layouts, writes):
        assert shown["layout"] == row["layout"]
        assert close(value(shown["write MiB/s"]), row["aggregate_mib_s"])
        assert close(value(shown["of ideal"]), row["ratio_of_ideal"] * 100)
    best = max(writes, key=lambda r: r["aggregate_mib_s"])
    assert f"the best write throughput is EC {best['layout']} with" in report
    slow = tables(report)["One slow drive"][0]
    assert {r["pool"] for r in slow} == {r["pool"] for r in rows if "-slow-" in r["pool"]}


def test_lustre_minio_report_has_every_cosbench_stage_table5_and_both_cost_models(tmp_path):
    report = reproduce("lustre-minio", tmp_path / "r")
    sections = tables(report)
    stages = json.loads((tmp_path / "r" / "cosbench.json").read_text())["cosbench"]
    cos = sections["COSBench: every stage on every system"][0]
    assert len(cos) == len(stages)
    kinds = {r["stage"].split("-")[0] for r in cos}
    assert kinds == {"init", "prepare", "main", "cleanup", "dispose"}
    assert all(r["success"] == "100.0 %" for r in cos), "cleanup of keys already gone counts as success"
    for shown, stage in zip(cos, stages):
        posix = next(s for s in stages if s["kind"] == "posix" and (s["stage"], s["op"]) == (stage["stage"], stage["op"]))
        assert close(value(shown["of POSIX"]), stage["throughput_ops"] / posix["throughput_ops"] * 100)
    md = json.loads((tmp_path / "r" / "mdtest.json").read_text())["results"]
    table5 = sections["mdtest: Table 5 (directories and files, over iterations)"][0]
    assert len(table5) == len([r for r in md if r.get("iterations")])
    assert any("rename (copy+delete)" in r["phase"] for r in table5)
    for shown, result in zip(table5, [r for r in md if r.get("iterations")]):
        stats = result["iterations"]
        assert len(stats["rates"]) == 3
        assert close(value(shown["mean op/s"]), stats["mean_ops_per_s"])
        assert close(value(shown["std dev"]), stats["stddev_ops_per_s"])
    # The paper's charts: throughput and response time per system, mdtest operations per system;
    # one bar per main-stage operation and system, per mdtest phase and system.
    main = [s for s in stages if s["stage"].startswith("main")]
    for figure, bars in (("cosbench-throughput.svg", main), ("cosbench-response.svg", main),
                         ("mdtest.svg", [r for r in md if r.get("iterations")])):
        assert f"]({figure})" in report, figure
        svg = (tmp_path / "r" / figure).read_text()
        assert svg.startswith("<svg") and svg.count("<rect") >= len(bars), figure
    cost = sections["Cost: cloud against on premises (equations 5 and 9)"][0]
    for preset in ("budget", "standard", "high"):
        for model in ("paper", "refined"):
            alone = subprocess.run(
                [str(binary()), "cost", "--preset", preset, "--model", model, "--json"],
                capture_output=True, text=True, check=True,
            )
            months = json.loads(alone.stdout)["comparison"]["break_even_month"]
            shown = next(r for r in cost if (r["configuration"], r["model"]) == (preset, model))
            assert shown["break-even month"] == str(months)


def test_s3_hpc_report_gives_each_door_as_a_share_of_posix(tmp_path):
    report = reproduce("s3-hpc", tmp_path / "r")
    sections = tables(report)
    results = json.loads((tmp_path / "r" / "io500-prefix-per-rank.json").read_text())["results"]
    phases = sections["IO500 phases through every door (the paper's Table 3 and Figure 10)"][0]
    names = {"ior-easy-write": ("ior-easy", "put"), "mdtest-hard-stat": ("mdtest-hard", "head"), "find": ("find", "find")}
    for phase, (workload, op) in names.items():
        row = next(r for r in phases if r["phase"] == phase)
        figure = "mib_per_s" if workload.startswith("ior") else "ops_per_s"
        posix = next(r for r in results if r["kind"] == "posix" and (r["workload"], r["op"]) == (workload, op))
        for door, kind in (("HTTP gateway", "s3"), ("in-process", "embedded"), ("local socket", "local")):
            mine = next(r for r in results if r["kind"] == kind and (r["workload"], r["op"]) == (workload, op))
            assert close(value(row[f"{door}, % of POSIX"]), mine[figure] / posix[figure] * 100), (phase, door)
    for mapping in ("bucket per dataset", "bucket per file"):
        assert f"IO500 with one {mapping}" in sections
    for svg in ("io500-prefix-per-rank-radar.svg", "md-workbench-density.svg"):
        assert (tmp_path / "r" / svg).read_text().startswith("<svg")
    assert sections["MD-Workbench: time per operation (the paper's Figure 8)"][0]


def test_pdc_xf_report_measures_session_against_strong(tmp_path):
    report = reproduce("pdc-xf", tmp_path / "r")
    sections = tables(report)
    document = json.loads((tmp_path / "r" / "vpic-io.json").read_text())
    gains = sections["Strong against session consistency (Figures 3b, 7, 8 and 10)"][1]
    assert len(gains) == len(document["consistency_gains"]) == 2
    for shown, gain in zip(gains, document["consistency_gains"]):
        assert close(value(shown["strong / session: exposed I/O time"]), gain["exposed_speedup"], digits=2)
    assert (tmp_path / "r" / "vpic-io-buffer.svg").read_text().startswith("<svg")
    small = sections["Small regions against pwrite of the same bytes"][0]
    assert {r["durability"] for r in small} == {"strict", "relaxed"}
    assert {r["layout"] for r in small} == {"chunks", "shards"}
    for durability in ("strict", "relaxed"):
        results = json.loads((tmp_path / "r" / f"small-regions-{durability}.json").read_text())["results"]
        rate = {}
        for r in results:
            door = "arrays in-process" if r["target"].startswith("arrays in-process") else r["target"].split()[0]
            rate[(door, r["mode"], r["layout"])] = r["bytes"] / (r["transfer_s"] + r["wait_s"] + r["flush_s"])
        posix = rate[("posix", "posix", "file")]
        rows = [r for r in small if r["durability"] == durability]
        assert len(rows) == len(results) - 1
        for row in rows:
            door = "arrays in-process" if row["system"] == "arrays in-process" else "arrays"
            mine = rate[(door, row["mode"], row["layout"])]
            assert close(value(row["of pwrite"]), mine / posix * 100), (durability, row)
    eqsim = json.loads((tmp_path / "r" / "eqsim.json").read_text())
    shown = sections["EQSIM analysis patterns: the same layout and re-chunked (Figure 11)"][0]
    assert [r["target"] for r in shown] == [r["target"] for r in eqsim["rows"]]
    assert {r["group"] for r in shown} >= {"same layout", "re-chunked"}
    for row, computed in zip(shown, eqsim["rows"]):
        if computed["median_speedup_over_h5py"] is not None:
            assert close(value(row["median over h5py"]), computed["median_speedup_over_h5py"], digits=2)
    moved = sections["A region moved between two sites (Figure 9)"][0]
    for row, direction in zip(moved, ("push", "pull")):
        copied = json.loads((tmp_path / "r" / f"region-{direction}.json").read_text())
        assert row["copy"] == direction and int(row["sent"]) == copied["chunks"] > 0


@pytest.mark.skipif(
    not os.environ.get("ISTHMUS_HPC_TOOLS"),
    reason="needs IOR, mdtest and md-workbench built with S3-libs3 (scripts/build-hpc-tools PREFIX; "
    "ISTHMUS_HPC_TOOLS=PREFIX/bin) and the libs3.so.4 drop-in beside the isthmus binary",
)
def test_s3_hpc_with_the_community_tools_through_every_door(tmp_path):
    """The site's own tools, run unchanged through HTTP and on the drop-in, with clean checks."""
    out = tmp_path / "r"
    run = subprocess.run(
        [str(binary()), "bench", "reproduce", "s3-hpc", "--quick", "--tools", os.environ["ISTHMUS_HPC_TOOLS"], "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = (out / "report.md").read_text()
    heading = "The community's tools: IOR, mdtest and MD-Workbench with S3-libs3, through every door"
    rows = tables(report)[heading][0]
    sources = {r["source"] for r in rows}
    assert "isthmus bench" in sources
    assert any(s.startswith("IOR 4.") and s.endswith("(S3-libs3)") for s in sources), sources
    tool_rows = [r for r in rows if r["source"] != "isthmus bench"]
    phases = {r["phase"] for r in tool_rows}
    for phase in ("ior-easy-write", "ior-easy-read", "ior-hard-read", "mdtest-hard-stat", "mdtest-hard-read", "md-workbench benchmark"):
        assert phase in phases, phases
    for r in tool_rows:
        for door in ("POSIX", "HTTP gateway", "in-process", "local socket"):
            assert r[door] != "failed" and not r[door].endswith("*"), (r["phase"], door, r[door])
    assert "Checks: every run clean" in report
    for name in ("ior-easy-embedded.txt", "mdtest-hard-local.txt", "md-workbench-s3.txt"):
        assert (out / "tools" / name).exists()
