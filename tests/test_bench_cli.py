"""`isthmus bench` end to end, briefly: the IO500-style run and streams over raw POSIX, a
gateway it starts, and the engine in-process, with JSON results."""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import bench_binary, binary


def bench(tmp_path, *args):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    out = tmp_path / "results.json"
    r = subprocess.run(
        [str(binary()), "bench", *args, "--serve", str(root), "--target", f"embedded://{root}", "--json", str(out), "--durability", "relaxed"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # Every run says what it will do before it does it.
    assert r.stderr.startswith(f"isthmus bench {args[0]}"), r.stderr[:1000]
    return r.stdout, json.loads(out.read_text())


def test_io500_style_run(tmp_path):
    svg = tmp_path / "radar.svg"
    stdout, report = bench(tmp_path, "io500", "--workers", "2", "--files", "110", "--transfers", "3", "--svg", str(svg))
    phases = {(r["kind"], r["workload"], r["op"]): r for r in report["results"]}
    ior = [("ior-easy", ["put", "get"]), ("ior-hard", ["put", "get"]), ("ior-rnd4K", ["put", "get"])]
    mdtest = [("mdtest-easy", ["put", "head", "get", "delete"]), ("mdtest-hard", ["put", "head", "get", "delete"])]
    for kind in ("posix", "s3", "embedded"):
        for workload, ops in ior + mdtest:
            for op in ops:
                r = phases[(kind, workload, op)]
                assert r["errors"] == 0, r
                assert r["ops"] == (6 if workload.startswith("ior") else 220), r
        # find looked at every mdtest file (created before it, removed after it) and matched
        # the 3901-byte ones named *01*: file.0.101 and file.1.101.
        find = phases[(kind, "find", "find")]
        assert (find["ops"], find["keys"], find["errors"]) == (440, 2, 0), find
    assert phases[("s3", "ior-easy", "put")]["bytes"] == 6 * 2 * 1024 * 1024
    assert phases[("embedded", "ior-rnd4K", "get")]["bytes"] == 6 * 4096
    # The IO500 runs mdtest on files only (-F): no directory phase enters the score.
    assert not [r for r in report["results"] if r["op"] in ("mkdir", "statdir", "rename", "rmdir")]
    assert "NOT an official IO500 result" in stdout
    assert "IO500 phases: POSIX / HTTP gateway / in-process / local socket, % of POSIX" in stdout
    assert sum(1 for line in stdout.splitlines() if "kIOPS, score" in line) == 3
    scores = {s["kind"]: s for s in report["io500"]}
    assert set(scores) == {"posix", "s3", "embedded"}
    for s in scores.values():
        assert s["missing"] == [] and s["score"] > 0
        assert s["score"] == pytest.approx((s["bandwidth_gib_s"] * s["metadata_kiops"]) ** 0.5)
    radar = svg.read_text()
    assert radar.startswith("<svg") and radar.count("<polygon") == 2 and "ior-rnd4K-read" in radar and "find" in radar


def test_streams(tmp_path):
    csv = tmp_path / "streams.csv"
    _, report = bench(tmp_path, "streams", "--workers", "3", "--size", "1MiB", "--csv", str(csv))
    lines = csv.read_text().splitlines()
    assert lines[0] == "file,phase,size,workers,target,figure,unit,percent_of_posix"
    # Every phase on every target, POSIX included (at 100 %), as aggregate MiB/s.
    assert sorted(tuple(line.split(",")[1:5:3]) for line in lines[1:]) == sorted((f"streams {p}", k) for k in ("posix", "s3", "embedded") for p in ("write", "read"))
    assert all(line.split(",")[6] == "MiB/s" for line in lines[1:])
    assert all(line.endswith(",100.00") for line in lines[1:] if ",posix," in line)
    assert {(s["kind"], s["op"]) for s in report["streams"]} == {(k, op) for k in ("posix", "s3", "embedded") for op in ("put", "get")}
    assert all(s["errors"] == 0 and s["streams"] == 3 and s["mean_mib_s"] > 0 for s in report["streams"])


def test_streams_from_several_ranks_merge_into_one_row_per_phase(tmp_path):
    stdout, report = bench(tmp_path, "streams", "--ranks", "2", "--workers", "2", "--size", "256KiB")
    assert "2 ranks, results merged" in stdout
    assert sorted((s["kind"], s["op"]) for s in report["streams"]) == sorted((k, op) for k in ("posix", "s3", "embedded") for op in ("put", "get"))
    assert all(s["streams"] == 4 and s["errors"] == 0 for s in report["streams"])


def test_md_workbench(tmp_path):
    svg = tmp_path / "density.svg"
    _, report = bench(tmp_path, "md-workbench", "--workers", "2", "--datasets", "3", "--files", "10", "--iterations", "5",
                      "--svg", str(svg))
    rows = [r for r in report["results"] if r["workload"] == "md-workbench"]
    assert len(rows) == 3 * 4  # stat, read, delete, create on three targets
    assert all(r["errors"] == 0 and r["ops"] == 2 * 3 * 5 for r in rows)
    # The latency density: one smoothed curve (300 points) per target, named in the legend.
    drawing = svg.read_text()
    curves = [p for p in drawing.split("<polyline")[1:] if len(p.split('points="')[1].split('"')[0].split()) >= 300]
    assert len(curves) == 3 and all(name in drawing for name in ("POSIX", "HTTP gateway", "in-process"))


def test_compare_result_files(tmp_path):
    bench(tmp_path, "mdtest-easy", "--workers", "1", "--files", "20", "--files-only")
    first = tmp_path / "first.json"
    (tmp_path / "results.json").rename(first)
    csv, svg = tmp_path / "cmp.csv", tmp_path / "cmp.svg"
    r = subprocess.run([str(binary()), "bench", "compare", str(first), "--csv", str(csv), "--svg", str(svg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "% of POSIX" in r.stdout and "mdtest-easy create" in r.stdout
    lines = csv.read_text().splitlines()
    assert lines[0] == "file,phase,size,workers,target,figure,unit,percent_of_posix"
    assert len(lines) == 1 + 2 * 4  # s3 and embedded, four phases each
    assert all(line.split(",")[-1] for line in lines[1:])
    assert svg.read_text().startswith("<svg")
    bad = subprocess.run([str(binary()), "bench", "compare"], capture_output=True, text=True)
    assert bad.returncode == 1 and "needs result files" in bad.stderr


def test_ranks_run_as_processes_and_merge(tmp_path):
    stdout, report = bench(tmp_path, "mdtest-easy", "--ranks", "2", "--workers", "2", "--files", "25",
                           "--mdtest-iterations", "2", "--mdtest-bytes", "3901")
    assert "2 ranks, results merged" in stdout
    rows = {(r["kind"], r["op"]): r for r in report["results"]}
    # Directory phases first (on S3 the rename is a copy then a delete), then the file phases.
    phases = ("mkdir", "statdir", "rename", "rmdir", "put", "head", "get", "delete")
    assert set(rows) == {(k, op) for k in ("posix", "s3", "embedded") for op in phases}
    for r in rows.values():
        # Two iterations of 2 processes x 2 workers x 25 items.
        assert r["errors"] == 0 and r["workers"] == 4 and r["ops"] == 2 * 2 * 2 * 25, r
        stats = r["iterations"]
        assert len(stats["rates"]) == 2 and stats["nodes"] == 1 and stats["mean_ms"] > 0, stats
        assert stats["min_ops_per_s"] <= stats["mean_ops_per_s"] <= stats["max_ops_per_s"]
        assert stats["mean_ops_per_s_per_node"] == pytest.approx(stats["mean_ops_per_s"])
    # mdtest -w 3901 -e 3901: every file written with 3901 bytes and read back whole.
    assert rows[("s3", "get")]["bytes"] == 2 * 2 * 2 * 25 * 3901
    assert "mdtest-easy dir rename (copy+delete)" in stdout and "mdtest-easy dir create" in stdout
    assert "Table 5" in stdout
    # The sync directory with barriers and per-rank reports is gone afterwards.
    assert not [p for p in (tmp_path / "root" / ".isthmus").iterdir() if p.name.startswith("bench-sync")]


@pytest.mark.parametrize("mapping", ["bucket-per-dataset", "bucket-per-file"])
def test_s3_mappings_run_every_phase_and_remove_their_buckets(tmp_path, mapping):
    stdout, report = bench(tmp_path, "mdtest-easy", "--ranks", "2", "--workers", "1", "--files", "8", "--s3-mapping", mapping)
    rows = [r for r in report["results"] if r["kind"] != "posix"]
    assert len(rows) == 2 * 8 and all(r["errors"] == 0 and r["ops"] == 2 * 8 for r in rows), rows
    assert all(f"({mapping})" in r["target"] for r in rows)
    _, report = bench(tmp_path, "ior-easy", "--workers", "2", "--transfers", "3", "--s3-mapping", mapping)
    assert all(r["errors"] == 0 and r["ops"] == 6 for r in report["results"])
    # Every bucket the mapping made is gone: only the gateway's own state is left in the root.
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == [".isthmus"]
    bad = subprocess.run([str(binary()), "bench", "streams", "--s3-mapping", mapping], capture_output=True, text=True)
    assert bad.returncode != 0 and "--s3-mapping applies to" in bad.stderr


def test_launcher_ranks_meet_at_barriers(tmp_path):
    """Two processes given rank and size as srun gives them, synchronised through --sync-dir."""
    sync, out = tmp_path / "sync", tmp_path / "merged.json"
    procs = []
    for rank in range(2):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2"}
        procs.append(subprocess.Popen(
            [str(binary()), "bench", "mdtest-hard", "--files-only", "--workers", "1", "--files", "10", "--durability", "relaxed",
             "--baseline", str(tmp_path / "posix"), "--sync-dir", str(sync), "--json", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "2 ranks, results merged" in outputs[0][0] and "merged" not in outputs[1][0]
    rows = json.loads(out.read_text())["results"]
    assert len(rows) == 4 and all(r["ops"] == 20 and r["workers"] == 2 and r["errors"] == 0 for r in rows)
    # The reports stay in the sync directory; reusing it would break the barrier count, so it is refused.
    r = subprocess.run([str(binary()), "bench", "mdtest-hard", "--sync-dir", str(sync), "--baseline", str(tmp_path / "posix")],
                       env={**os.environ, "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "earlier run" in r.stderr, r.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (Debian's openmpi-bin) is not installed")
def test_mpirun_ranks_are_processes_reduced_on_rank_0(tmp_path):
    """Under mpirun each rank is one process with its own client; rank 0 prints and writes the
    merged report, the same as --ranks on one host."""
    root, sync, out = tmp_path / "root", tmp_path / "sync", tmp_path / "merged.json"
    root.mkdir()
    r = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", str(binary()), "bench", "io500",
         "--workers", "1", "--files", "110", "--transfers", "2", "--durability", "relaxed",
         "--baseline", str(tmp_path / "posix"), "--target", f"embedded://{root}", "--sync-dir", str(sync),
         "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("2 ranks, results merged") == 1
    report = json.loads(out.read_text())
    phases = {(x["kind"], x["workload"], x["op"]): x for x in report["results"]}
    for kind in ("posix", "embedded"):
        assert phases[(kind, "mdtest-hard", "put")]["ops"] == 220 and phases[(kind, "mdtest-hard", "put")]["workers"] == 2
        assert phases[(kind, "ior-hard", "get")]["ops"] == 4
        # Each rank found its share: together every file of both ranks, and both *01* matches.
        assert (phases[(kind, "find", "find")]["ops"], phases[(kind, "find", "find")]["keys"]) == (440, 2)
    assert {s["kind"] for s in report["io500"]} == {"posix", "embedded"}


def test_vpic_and_bdcats_on_files_and_arrays_with_two_processes(tmp_path):
    """The particle workloads: raw files and arrays (in-process, through the gateway), strong
    and session, two processes of two ranks each; the written arrays hold what the ranks wrote."""
    import numpy as np
    import zarr

    for workload in ("vpic-io", "bdcats-io"):
        stdout, report = bench(tmp_path, workload, "--ranks", "2", "--workers", "2", "--particles", "1000",
                               "--steps", "3", "--compute", "10ms", "--bucket", "particles")
        targets = [r["target"] for r in report["results"]]
        assert len(targets) == 5 and targets[0].startswith("posix"), targets
        assert sum(t.endswith("(session)") for t in targets) == 2 and sum(t.endswith("(strong)") for t in targets) == 2
        for r in report["results"]:
            assert r["workload"] == workload and r["bytes"] == 4 * 3 * 1000 * 4 * 8, r
            assert r["total_s"] >= r["compute_s"] > 0, r
        assert report["ranks"] == 4
        assert "% of POSIX" in stdout and "hidden s" in stdout
    # The last run's array of property x: 3 steps x 4 ranks x 1000 particles, rank r's step t
    # starting at t * 1000 + r * 10 + 0.
    x = zarr.open_array(str(tmp_path / "root" / "particles" / "vpic" / "x"), mode="r")[:]
    assert x.shape == (3, 4000)
    np.testing.assert_allclose(x[2, 3000:3004], 2000 + 30 + np.arange(4) * 1e-3, rtol=1e-6)


def test_eqsim_patterns_on_every_target_agree_with_h5py(tmp_path):
    """A small EQSIM run: h5py writes the file, every target answers each pattern as h5py does
    (the command fails otherwise), and the JSON holds a time per target and pattern, and a row
    per target saying its layout group, chunks and codec with its median speedups."""
    out = tmp_path / "eqsim.json"
    run = subprocess.run([str(binary()), "bench", "eqsim", "--serve", str(tmp_path / "data"), "--eqsim-shape", "40,64,48",
                          "--repeat", "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    targets = result["targets"]
    expected = {"h5py", "h5py, 1 GiB chunk cache", "Isthmus in-process, HDF5 in place",
                "Isthmus in-process, Zarr same chunks, gzip+shuffle",
                "Isthmus in-process, Zarr same chunks", "Isthmus in-process, Zarr recommended",
                "gateway selection, HDF5 in place", "gateway selection, Zarr recommended",
                "zarr-python over S3 (gateway)"}
    assert set(targets) == expected
    for name, target in targets.items():
        assert len(target) == 6 and all(r["seconds"] > 0 for r in target.values()), name
    # One row per target: the two effects apart (same chunks as the HDF5 file, or re-chunked).
    rows = {r["target"]: r for r in result["rows"]}
    assert set(rows) == expected
    groups = {name: r["group"] for name, r in rows.items()}
    assert {n for n, g in groups.items() if g == "re-chunked"} == {
        "Isthmus in-process, Zarr recommended", "gateway selection, Zarr recommended"}
    assert {n for n, g in groups.items() if g == "baseline"} == {"h5py", "h5py, 1 GiB chunk cache"}
    same = rows["Isthmus in-process, Zarr same chunks, gzip+shuffle"]
    assert same["group"] == "same layout" and same["layout"] == "same chunks as the HDF5 file"
    assert same["chunks"] == [40, 32, 32, 1] and same["inner_chunks"] is None and "gzip" in same["codec"]
    rec = rows["Isthmus in-process, Zarr recommended"]
    assert rec["layout"] == "re-chunked/sharded" and rec["inner_chunks"] == [40, 8, 8, 1] and "zstd" in rec["codec"]
    # The medians are over the six patterns' speedups, which are h5py's time over the target's.
    for r in rows.values():
        speedups = sorted(r["speedup_over_h5py"].values())
        assert len(speedups) == 6
        assert r["median_speedup_over_h5py"] == pytest.approx((speedups[2] + speedups[3]) / 2)
        for pattern, seconds in r["seconds"].items():
            assert r["speedup_over_h5py"][pattern] == pytest.approx(targets["h5py"][pattern]["seconds"] / seconds)
            assert r["speedup_over_h5py_cached"][pattern] == pytest.approx(
                targets["h5py, 1 GiB chunk cache"][pattern]["seconds"] / seconds)
    assert rows["h5py"]["median_speedup_over_h5py"] == pytest.approx(1.0)
    # The same-codec copy is stored as the HDF5 file is compressed: shuffle, then gzip level 1.
    gz = json.loads((tmp_path / "data" / "isthmus-bench" / "ground-gzip.zarr" / "vel" / "zarr.json").read_text())
    assert [c["name"] for c in gz["codecs"]] == ["bytes", "numcodecs.shuffle", "gzip"]
    assert gz["codecs"][2]["configuration"]["level"] == 1
    # The recommended layout is sharded: a few shard objects, not one file per inner chunk.
    rec = tmp_path / "data" / "isthmus-bench" / "ground-rec.zarr" / "vel"
    assert json.loads((rec / "zarr.json").read_text())["codecs"][0]["name"] == "sharding_indexed"
    assert "same layout" in run.stdout and "re-chunked" in run.stdout
    bad = subprocess.run([str(binary()), "bench", "eqsim", "--serve", str(tmp_path / "data"), "--eqsim-shape", "40,64"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "three numbers" in bad.stderr


def test_pools_table_on_erasure_layouts_beside_raw_files(tmp_path):
    out = tmp_path / "pools.json"
    r = subprocess.run(
        [str(binary()), "bench", "pools", "--pool-dir", str(tmp_path / "a"), "--pool-dir", str(tmp_path / "a"),
         "--layouts", "4+2,2+1", "--block-sizes", "64KiB,1MiB", "--read-sizes", "100KiB,1MiB", "--size", "3MiB",
         "--workers", "3", "--slow-drive-ms", "1", "--durability", "relaxed", "--json", str(out),
         "--svg", str(tmp_path / "pools.svg")],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())
    pools = ["raw", "plain", "ec4p2-64k", "ec4p2-1024k", "ec2p1-64k", "ec2p1-1024k", "ec4p2-64k-slow-hedged", "ec4p2-64k-slow-unhedged"]
    # Per pool: a write, then a read per read size; 3 streams through 2 engines, none failed.
    assert [(row["pool"], row["op"], row["read_size"]) for row in rows] == [
        (pool, op, size) for pool in pools for op, size in [("write", None), ("read", 100 << 10), ("read", 1 << 20)]
    ]
    assert all(row["streams"] == 3 and row["errors"] == 0 and row["engines"] == 2 for row in rows)
    assert all(row["p99_seconds"] <= row["max_seconds"] and row["aggregate_mib_s"] > 0 for row in rows)
    writes = [row for row in rows if row["op"] == "write" and row["pool"] != "raw"]
    assert all(row["ratio_of_ideal"] > 0 for row in writes)
    assert all(row["fill_percent"] is None for row in rows)
    assert "MiB/s per stream" in r.stdout and "of ideal" in r.stdout
    # Every stream's time is kept; the box plots name every row.
    assert all(len(row["stream_seconds"]) == 3 and max(row["stream_seconds"]) == row["max_seconds"] for row in rows)
    svg = (tmp_path / "pools.svg").read_text()
    assert "ec4p2-64k-slow-hedged write" in svg and "raw read" in svg


def test_pools_fill_levels_on_a_file_system_of_their_own(tmp_path):
    """CERN's Figure 6: writes timed again with the pool's file system filled to each level
    (a tmpfs of 256 MiB here); the filler is removed; a directory that is not a mount point
    is refused before anything is written."""
    refused = subprocess.run(
        [str(binary()), "bench", "pools", "--pool-dir", str(tmp_path / "a"), "--layouts", "2+1", "--fill-levels", "50"],
        capture_output=True, text=True, timeout=60,
    )
    assert refused.returncode == 1 and "not a mount point" in refused.stderr, refused.stderr
    assert not (tmp_path / "a" / "raw").exists()
    fs = tmp_path / "fs"
    fs.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(fs)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        out = tmp_path / "fill.json"
        r = subprocess.run(
            [str(binary()), "bench", "pools", "--pool-dir", str(fs), "--layouts", "2+1", "--block-sizes", "1MiB",
             "--read-sizes", "1MiB", "--size", "2MiB", "--workers", "2", "--fill-levels", "30,60",
             "--durability", "relaxed", "--json", str(out)],
            capture_output=True, text=True, timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        rows = json.loads(out.read_text())
        filled = [row for row in rows if row["fill_percent"] is not None]
        assert [(row["pool"], row["op"]) for row in filled] == [
            (pool, "write") for _ in range(2) for pool in ["raw", "plain", "ec2p1-1024k"]
        ]
        levels = [row["fill_percent"] for row in filled[::3]]
        assert 30 <= levels[0] < 36 and 60 <= levels[1] < 66, levels
        for level in range(2):
            raw, plain, ec = filled[3 * level: 3 * level + 3]
            assert all(row["errors"] == 0 and row["streams"] == 2 for row in (raw, plain, ec))
            # The ideal of a 2+1 pool is 2/3 of the raw bandwidth at the same level.
            assert ec["ratio_of_ideal"] == pytest.approx(ec["aggregate_mib_s"] / (raw["aggregate_mib_s"] * 2 / 3))
            assert plain["ratio_of_ideal"] == pytest.approx(plain["aggregate_mib_s"] / raw["aggregate_mib_s"])
        assert f"write at {levels[1]:.0f} % full" in r.stdout
        # The fill's one-line summary (its bar is drawn only on a terminal).
        summaries = re.findall(r"filled \S+ to ([\d.]+) %: .* in \d+ files, [\d.]+ s", r.stderr)
        assert [float(level) for level in summaries] == pytest.approx(levels, abs=0.1), r.stderr[-2000:]
        assert not (fs / "fill").exists(), "the filler is removed"
    finally:
        subprocess.run(["umount", str(fs)], capture_output=True)


def test_single_operations_say_what_they_will_do_first_and_keep_to_the_duration(tmp_path):
    """`isthmus bench` (single operations) states its plan before running: the timed phases
    of --duration and the fills before them, each fill stopped after --duration too: a million
    objects to list are not filled in 200 ms, the listing lists what was filled."""
    root = tmp_path / "root"
    root.mkdir()
    result = tmp_path / "r.json"
    r = subprocess.run(
        [str(binary()), "bench", "--ops", "get,list", "--duration", "200ms", "--objects", "20",
         "--list-objects", "1000000", "--target", f"embedded://{root}", "--baseline", str(tmp_path / "b"),
         "--durability", "relaxed", "--json", str(result)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    plan = next(line for line in r.stderr.splitlines() if line.startswith("isthmus bench:"))
    # get and list on two targets (the POSIX baseline and in-process): four timed phases, four fills.
    assert "4 timed phase(s) of 0.2 s" in plan and "about 1 s" in plan, plan
    assert "4 fill(s)" in plan and "20 x 4KiB" in plan and "1000000 empty objects to list" in plan, plan
    assert "at most 2 s in all" in plan, plan
    assert r.stderr.index(plan) < r.stderr.index("running"), "the plan comes before the first phase"
    lists = [x for x in json.loads(result.read_text())["results"] if x["op"] == "list"]
    assert len(lists) == 2 and all(0 < x["keys"] for x in lists), lists
    fills = re.findall(r"list on .*: the fill made (\d+) of 1000000 objects within --duration", r.stderr)
    assert len(fills) == 2 and all(0 < int(n) < 1000000 for n in fills), r.stderr[-2000:]


def test_interleaved_puts_alternate_two_buckets_slice_by_slice(tmp_path):
    """`--interleave-bucket` PUTs to --bucket and to the other bucket in turn, in slices (A B B
    A), and reports each bucket's row with its rate in each of its slices and the median of the
    paired slices' ratios: how the cost of a notification rule is measured on a noisy machine.
    It is refused for anything but PUTs."""
    root = tmp_path / "root"
    root.mkdir()
    result = tmp_path / "r.json"
    base = [str(binary()), "bench", "--duration", "800ms", "--workers", "1", "--target", f"embedded://{root}",
            "--baseline", str(tmp_path / "b"), "--durability", "relaxed", "--bucket", "ruled",
            "--interleave-bucket", "plain", "--slice", "100ms"]
    r = subprocess.run([*base, "--ops", "put", "--json", str(result)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {x["target"].rsplit(" ", 1)[-1]: x for x in json.loads(result.read_text())["results"] if x["kind"] == "embedded"}
    assert set(rows) == {"ruled", "plain"}, rows
    for row in rows.values():
        # 800 ms of 100 ms slices: two A B B A groups, four slices each.
        assert len(row["slice_ops_per_s"]) == 4 and all(rate > 0 for rate in row["slice_ops_per_s"]), row
        assert row["ops"] > 0 and row["errors"] == 0 and abs(row["seconds"] - 0.4) < 1e-9, row
        assert abs(sum(row["slice_ops_per_s"]) * 0.1 - row["ops"]) < 1e-6, row
    assert re.search(r"interleaved put: embedded://\S+ bucket ruled ÷ embedded://\S+ bucket plain, median of the "
                     r"paired slices: \d+\.\d{3}", r.stderr), r.stderr[-2000:]
    # The buckets are removed afterwards, like any run's.
    assert not (root / "ruled").exists() and not (root / "plain").exists()
    refused = subprocess.run([*base, "--ops", "get"], capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert "--interleave-bucket takes the ops workload with --ops put" in refused.stderr, refused.stderr[-1000:]


@pytest.mark.parametrize("command", [["reproduce"], ["pools"], ["compare"]])
def test_bench_help_is_the_bench_binarys(command, tmp_path):
    """`isthmus bench ...` runs the isthmus-bench binary with the same arguments: its --help is
    the benchmark's own (every workload option), under the name the user typed."""
    forwarded = subprocess.run([str(binary()), "bench", *command, "--help"], capture_output=True, text=True, timeout=60)
    direct = subprocess.run([str(bench_binary()), *command, "--help"], capture_output=True, text=True, timeout=60)
    assert forwarded.returncode == direct.returncode == 0, forwarded.stderr
    assert forwarded.stdout == re.sub(r"^(Usage: | {7})isthmus-bench ", r"\1isthmus bench ", direct.stdout, flags=re.M)
    assert "Usage: isthmus bench " in forwarded.stdout
    flags = ["--quick", "--out"] if command == ["reproduce"] else ["--pool-dir", "--eqsim-shape", "--s3-mapping"]
    assert all(flag in forwarded.stdout for flag in flags), forwarded.stdout
    # Found on the PATH too, with no variable naming it.
    (tmp_path / "isthmus-bench").symlink_to(bench_binary())
    env = {k: v for k, v in os.environ.items() if k != "ISTHMUS_BENCH_BIN"}
    env["PATH"] = f"{tmp_path}:{env.get('PATH', '')}"
    found = subprocess.run([str(binary()), "bench", *command, "--help"], capture_output=True, text=True, timeout=60,
                           env=env)
    assert found.returncode == 0 and found.stdout == forwarded.stdout, found.stderr


def test_bench_without_the_bench_binary_says_how_to_get_it(tmp_path):
    """No isthmus-bench where ISTHMUS_BENCH_BIN points: one line naming the fix, a failure status."""
    missing = tmp_path / "no-such-isthmus-bench"
    r = subprocess.run([str(binary()), "bench", "ops", "--duration", "1s"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "ISTHMUS_BENCH_BIN": str(missing)})
    assert r.returncode != 0 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(missing) in lines[0] and "isthmus bench needs the isthmus-bench binary" in lines[0], lines[0]
    assert "cargo build --release -p isthmus-bench" in lines[0] and "ISTHMUS_BENCH_BIN" in lines[0], lines[0]


def test_reproduce_tools_refuses_a_missing_or_unusable_tool_before_running_anything(tmp_path):
    """`reproduce s3-hpc --tools DIR`: a tool missing, or built without S3-libs3, is one line
    naming it and hpc/ior's configure line, and no experiment runs (no report directory)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    out = tmp_path / "out"

    def reproduce():
        return subprocess.run(
            [str(binary()), "bench", "reproduce", "s3-hpc", "--quick", "--tools", str(tools), "--out", str(out)],
            capture_output=True, text=True, timeout=60,
        )

    r = reproduce()
    assert r.returncode != 0
    assert f"--tools: no `ior` in {tools}" in r.stderr, r.stderr
    assert "./configure --with-S3-libs3 CPPFLAGS=-I<libs3>/include LDFLAGS=-L<libs3>/lib" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    # IOR built without --with-S3-libs3: its API list has no S3-libs3.
    for tool in ("ior", "mdtest", "md-workbench"):
        (tools / tool).write_text("#!/bin/sh\necho 'API for I/O [POSIX|DUMMY|MMAP]'\nexit 1\n")
        (tools / tool).chmod(0o755)
    r = reproduce()
    assert r.returncode != 0
    assert f"--tools: {tools / 'ior'} is not usable (it lists no S3-libs3 API)" in r.stderr, r.stderr
    assert not out.exists(), "nothing ran"
    r = subprocess.run(
        [str(binary()), "bench", "reproduce", "pdc-xf", "--quick", "--tools", str(tools)],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode != 0 and "--tools is for the s3-hpc study" in r.stderr, r.stderr


def test_a_study_missing_its_python_modules_is_refused_before_it_starts(tmp_path):
    """pdc-xf's EQSIM needs python3 with numpy and h5py (and zarr, s3fs): without them on PATH the
    study stopped at its end, after the VPIC-IO runs. It is refused at once, naming the one
    command that installs them, and nothing is written."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    out = tmp_path / "report"
    run = subprocess.run(
        [str(binary()), "bench", "reproduce", "pdc-xf", "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, PATH=str(empty)),
    )
    assert run.returncode != 0
    assert "pip install numpy h5py zarr s3fs" in run.stderr, run.stderr
    assert not out.exists(), "nothing is created before the study's prerequisites are checked"
    # A python3 lacking a module: the missing ones are named, and only they are installed.
    fake = tmp_path / "fake-python"
    fake.mkdir()
    (fake / "python3").write_text(f"#!/bin/sh\nexec {shutil.which('python3')} -c 'print(\"zarr s3fs\")'\n")
    (fake / "python3").chmod(0o755)
    run = subprocess.run(
        [str(binary()), "bench", "reproduce", "pdc-xf", "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, PATH=f"{fake}:/usr/bin:/bin"),
    )
    assert run.returncode != 0 and "(missing: zarr, s3fs): python3 -m pip install zarr s3fs" in run.stderr, run.stderr
    assert not out.exists()


def test_reproduce_help_lists_what_each_study_needs():
    helped = subprocess.run([str(binary()), "bench", "reproduce", "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0
    text = " ".join(helped.stdout.split())
    assert "needs 24.0 GiB free (3.0 GiB with --quick), python3 with numpy, h5py, zarr, s3fs" in text, text
    assert text.count("GiB free") == 4, text
