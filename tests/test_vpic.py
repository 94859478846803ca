"""`isthmus bench vpic-io` as PDC-XF measured it: strong writes each region alone and waits,
session starts every step and has one consistency point at close; the JSON holds each rank's
client time breakdown, the close overhead, the transfer buffer in use over time against its
bound, and the session/strong gains; --svg draws the buffer in use."""

import json
import os
import subprocess

from conftest import binary


def run_vpic(tmp_path, *extra, env=None):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    out, svg = tmp_path / "vpic.json", tmp_path / "cache.svg"
    r = subprocess.run(
        [str(binary()), "bench", "vpic-io", "--workers", "2", "--particles", "4096", "--steps", "4", "--compute", "5ms",
         "--target", f"embedded://{root}", "--baseline", str(tmp_path / "posix"), "--durability", "relaxed",
         "--json", str(out), "--svg", str(svg), *extra],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, **(env or {})),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, json.loads(out.read_text()), svg


def test_vpic_reports_the_breakdown_cache_usage_and_gains(tmp_path):
    stdout, report, svg = run_vpic(tmp_path)
    results = {r["mode"]: r for r in report["results"]}
    assert set(results) == {"posix", "strong", "session"}, list(results)
    for mode, r in results.items():
        assert len(r["ranks"]) == 2, r
        for rank in r["ranks"]:
            parts = rank["transfer_s"] + rank["wait_s"] + rank["flush_s"] + rank["compute_s"] + rank["other_s"]
            assert abs(parts - rank["total_s"]) < 1e-6, rank
            assert rank["compute_s"] >= 4 * 0.005, rank
        assert 0 <= r["close_overhead"] <= 1
        assert r["close_overhead"] == r["flush_s"] / r["total_s"] or abs(r["close_overhead"] - r["flush_s"] / r["total_s"]) < 1e-9
    assert results["posix"]["cache"] is None
    strong, session = results["strong"]["cache"], results["session"]["cache"]
    for cache in (strong, session):
        assert cache["bound_bytes"] == 256 << 20 and cache["sessions"] == 2 and cache["interval_ms"] == 10
        assert cache["samples"] and all(s["max_session_bytes"] <= cache["bound_bytes"] for s in cache["samples"])
    # Strong copies nothing; session copies its steps into the buffer (a rank's step: 8 x 16 KiB).
    assert strong["peak_bytes"] == 0 and session["peak_bytes"] >= 8 * 4096 * 4
    # Session never waits during the run: its consistency point is the flush at close.
    assert results["session"]["wait_s"] == 0
    [gain] = report["consistency_gains"]
    assert gain["workload"] == "vpic-io" and gain["target"].startswith("arrays in-process")
    assert gain["transfer_speedup"] > 0 and gain["total_speedup"] > 0
    assert "session over strong" in stdout
    text = svg.read_text()
    assert text.startswith("<svg") and "bound (256 MiB)" in text and "(session)" in text


def test_vpic_modes_from_the_environment(tmp_path):
    _, report, _ = run_vpic(tmp_path, env={"ISTHMUS_VPIC_MODES": "session-per-step"})
    assert [r["mode"] for r in report["results"]] == ["posix", "session-per-step"]
    assert report["consistency_gains"] == []
    r = subprocess.run([str(binary()), "bench", "vpic-io", "--target", f"embedded://{tmp_path / 'x'}", "--steps", "1"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, ISTHMUS_VPIC_MODES="eventual"))
    assert r.returncode != 0 and "unknown vpic mode" in r.stderr
