"""COSBench workload files through `isthmus bench cosbench`: a small workload runs on the POSIX baseline, a gateway and the engine with COSBench's figures."""

import json
import subprocess

from conftest import binary

SMALL = """<?xml version="1.0" encoding="UTF-8" ?>
<workload name="small">
  <workflow>
    <workstage name="init"><work type="init" workers="1" config="cprefix=t-;containers=r(1,2)" /></workstage>
    <workstage name="prepare"><work type="prepare" workers="2" config="cprefix=t-;containers=r(1,2);objects=r(1,20);sizes=h(1|4|50,4|8|50)KB" /></workstage>
    <workstage name="main"><work name="main" workers="3" totalOps="90">
      <operation type="read" ratio="60" config="cprefix=t-;containers=u(1,2);objects=u(1,20)" />
      <operation type="write" ratio="30" config="cprefix=t-;containers=u(1,2);objects=s(21,30);sizes=c(2)KB" />
      <operation type="list" ratio="10" config="cprefix=t-;containers=u(1,2)" />
    </work></workstage>
    <workstage name="cleanup"><work type="cleanup" workers="1" config="cprefix=t-;containers=r(1,2);objects=r(1,30)" /></workstage>
    <workstage name="dispose"><work type="dispose" workers="1" config="cprefix=t-;containers=r(1,2)" /></workstage>
  </workflow>
</workload>
"""


def run(tmp_path, xml):
    root = tmp_path / "root"
    root.mkdir()
    out = tmp_path / "out.json"
    r = subprocess.run([str(binary()), "bench", "cosbench", str(xml), "--serve", str(root), "--target", f"embedded://{root}", "--json", str(out), "--durability", "relaxed"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, json.loads(out.read_text())["cosbench"]


def test_small_workload_on_three_targets(tmp_path):
    xml = tmp_path / "small.xml"
    xml.write_text(SMALL)
    stdout, rows = run(tmp_path, xml)
    assert "Avg-ResTime" in stdout and "Succ-Ratio" in stdout
    by = {(r["kind"], r["stage"], r["op"]): r for r in rows}
    for kind in ("posix", "s3", "embedded"):
        assert by[(kind, "prepare", "write")]["op_count"] == 40
        main = sum(by[(kind, "main", op)]["op_count"] for op in ("read", "write", "list") if (kind, "main", op) in by)
        assert 90 <= main <= 92, [r for r in rows if r["kind"] == kind and r["stage"] == "main"]
        assert by[(kind, "main", "read")]["succ_ratio"] == 1.0
        assert by[(kind, "main", "read")]["p99_ms"] >= by[(kind, "main", "read")]["p95_ms"] >= by[(kind, "main", "read")]["p50_ms"]
        # Every stage is reported, as COSBench does: init makes the two containers, cleanup
        # deletes keys 1..30 of both (some never written: deleted all the same, as S3 counts
        # it), dispose removes the containers.
        assert (by[(kind, "init", "init")]["op_count"], by[(kind, "init", "init")]["failed_count"]) == (2, 0)
        cleanup = by[(kind, "cleanup", "delete")]
        assert (cleanup["op_count"], cleanup["failed_count"], cleanup["succ_ratio"]) == (60, 0, 1.0), cleanup
        assert by[(kind, "dispose", "dispose")]["failed_count"] == 0
    assert "95%-ResTime" in stdout


def test_bad_workload_files_get_one_line_errors(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<workload><workflow><workstage><work name='m' runtime='1'><operation type='read' ratio='50'/></work></workstage></workflow></workload>")
    r = subprocess.run([str(binary()), "bench", "cosbench", "--cosbench", str(bad), "--baseline", str(tmp_path / "b")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "add up to 100" in r.stderr
