"""`isthmus region push` and `pull` between two gateways on two data roots (two facilities):
only the chunks a region intersects move, byte-exact and verified; a push run again (after an
interruption or for a larger region) skips the chunks already there; a region can also land as
a new array of its own shape."""

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import zarr

import isthmus
from conftest import ACCESS_KEY, SECRET_KEY, Server, binary, make_client

BUCKET = "arrays"


@pytest.fixture
def sites(tmp_path):
    """Facility A (a data root used in-process) and facility B (a gateway on another root)."""
    a_root = tmp_path / "site-a"
    b = Server(tmp_path / "site-b")
    make_client(b.endpoint).create_bucket(Bucket=BUCKET)
    store = isthmus.Store(str(a_root))
    store.create_bucket(BUCKET)
    yield a_root, b
    b.stop()


def region(*args, root):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    r = subprocess.run([str(binary()), "region", *args, "--root", str(root)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def counts(stdout):
    """(sent, total, skipped) from the summary line."""
    words = stdout.split()
    return int(words[1]), int(words[3]), int(words[5].lstrip("("))


def chunk_keys(server, prefix):
    s3 = make_client(server.endpoint)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    return sorted(k for k in keys if "/c/" in k)


@pytest.mark.posix_only
def test_push_moves_only_intersecting_chunks_and_resumes(sites):
    a_root, b = sites
    where = isthmus.Location.engine(isthmus.Store(str(a_root)), BUCKET)
    a = isthmus.Array.create(where, "run1/vel.zarr", shape=(40, 30), dtype="float32", chunks=(10, 10), codecs="zstd:1",
                             attributes={"site": "a"}, dimension_names=("t", "x"))
    values = np.arange(1200, dtype=np.float32).reshape(40, 30)
    a[...] = values
    to = f"{b.endpoint}/{BUCKET}/copy/vel.zarr"
    out = region("push", f"{BUCKET}/run1/vel.zarr", "--select", "[5:25, 0:15]", "--to", to, root=a_root)
    assert counts(out) == (6, 6, 0), out
    assert len(chunk_keys(b, "copy/vel.zarr/")) == 6
    on_b = zarr.open_array(str(b.root / BUCKET / "copy/vel.zarr"), mode="r")
    np.testing.assert_array_equal(on_b[5:25, 0:15], values[5:25, 0:15])
    assert on_b[35, 25] == 0 and dict(on_b.attrs) == {"site": "a"}
    # The whole array now: the six chunks already there are not sent again.
    out = region("push", f"{BUCKET}/run1/vel.zarr", "--to", to, root=a_root)
    assert counts(out) == (6, 12, 6), out
    np.testing.assert_array_equal(zarr.open_array(str(b.root / BUCKET / "copy/vel.zarr"), mode="r")[:], values)
    # A chunk changed at the source is sent again; the others are skipped.
    a[0, 0] = -1
    out = region("push", f"{BUCKET}/run1/vel.zarr", "--to", to, root=a_root)
    assert counts(out) == (1, 12, 11), out
    # Pulled back into site A under another name: byte-exact, only what the region needs; the
    # time breakdown is printed and written as JSON.
    breakdown = a_root.parent / "pull.json"
    out = region("pull", to, "--select", "[0:10, 0:10]", "--to", f"{BUCKET}/back/vel.zarr", "--json", str(breakdown),
                 root=a_root)
    assert counts(out) == (1, 1, 0), out
    assert "pull:" in out and "write destination" in out, out
    pulled = json.loads(breakdown.read_text())
    assert (pulled["direction"], pulled["chunks"], pulled["sent"], pulled["skipped"]) == ("pull", 1, 1, 0), pulled
    assert pulled["wall_s"] > 0 and pulled["read_s"] > 0 and pulled["write_s"] > 0, pulled
    assert pulled["plan_s"] + pulled["metadata_s"] <= pulled["wall_s"], pulled
    back = isthmus.Array.open(where, "back/vel.zarr")
    expected = values[0:10, 0:10].copy()
    expected[0, 0] = -1
    np.testing.assert_array_equal(back[0:10, 0:10], expected)


@pytest.mark.posix_only
def test_an_interrupted_push_resumes_without_resending(sites):
    a_root, b = sites
    where = isthmus.Location.engine(isthmus.Store(str(a_root)), BUCKET)
    a = isthmus.Array.create(where, "big.zarr", shape=(1000, 4096), dtype="float64", chunks=(10, 4096))
    a[...] = np.random.default_rng(1).normal(size=(1000, 4096))
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    to = f"{b.endpoint}/{BUCKET}/big.zarr"
    proc = subprocess.Popen([str(binary()), "region", "push", f"{BUCKET}/big.zarr", "--to", to, "--root", str(a_root),
                             "--parallel", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline and len(chunk_keys(b, "big.zarr/")) < 10:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    there = len(chunk_keys(b, "big.zarr/"))
    assert 10 <= there < 100, f"{there} chunks before the interruption"
    sent, total, skipped = counts(region("push", f"{BUCKET}/big.zarr", "--to", to, root=a_root))
    assert total == 100 and skipped >= there - 1 and sent + skipped == 100, (sent, skipped, there)
    np.testing.assert_array_equal(zarr.open_array(str(b.root / BUCKET / "big.zarr"), mode="r")[:], a[...])


@pytest.mark.posix_only
def test_a_region_lands_as_a_new_array(sites):
    a_root, b = sites
    where = isthmus.Location.engine(isthmus.Store(str(a_root)), BUCKET)
    a = isthmus.Array.create(where, "g.zarr", shape=(50, 20, 3), dtype="int32", chunks=(8, 8, 3))
    values = np.arange(3000, dtype=np.int32).reshape(50, 20, 3)
    a[...] = values
    out = region("push", f"{BUCKET}/g.zarr", "--select", "[3:40:3, 5:9, 1]", "--to", f"{b.endpoint}/{BUCKET}/small.zarr",
                 "--as-new-array", "--chunks", "4,4,1", root=a_root)
    assert out.startswith("pushed"), out
    small = zarr.open_array(str(b.root / BUCKET / "small.zarr"), mode="r")
    assert small.shape == (13, 4, 1) and small.chunks == (4, 4, 1)
    np.testing.assert_array_equal(small[:, :, 0], values[3:40:3, 5:9, 1])


def test_bad_arguments_are_one_line_errors(sites):
    a_root, _ = sites
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    for args, message in [(["push", "nobucketpath", "--to", "http://127.0.0.1:1/b/p"], "expected BUCKET/PATH"),
                          (["push", f"{BUCKET}/missing.zarr", "--to", "http://127.0.0.1:1/b/p"], "no array or group"),
                          (["push", f"{BUCKET}/x", "--to", "ftp://host/b/p"], "expected http(s)://")]:
        r = subprocess.run([str(binary()), "region", *args, "--root", str(a_root)], capture_output=True, text=True, env=env)
        assert r.returncode == 1 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.posix_only
def test_a_chunk_larger_than_64_mib_goes_up_in_verified_parts(sites):
    a_root, b = sites
    where = isthmus.Location.engine(isthmus.Store(str(a_root)), BUCKET)
    # Two chunks of 10 x 1 Mi float64 = 80 MiB each (uncompressed): multipart uploads.
    a = isthmus.Array.create(where, "big.zarr", shape=(20, 1 << 20), dtype="float64", chunks=(10, 1 << 20))
    values = np.random.default_rng(3).standard_normal((20, 1 << 20))
    a[...] = values
    to = f"{b.endpoint}/{BUCKET}/big.zarr"
    out = region("push", f"{BUCKET}/big.zarr", "--select", "[12:14]", "--to", to, root=a_root)
    assert counts(out) == (1, 1, 0), out
    head = make_client(b.endpoint).head_object(Bucket=BUCKET, Key="big.zarr/c/1/0")
    assert head["ETag"].strip('"').endswith("-5"), head["ETag"]  # 5 parts of at most 16 MiB
    assert head["Metadata"]["isthmus-source-etag"]
    on_b = zarr.open_array(str(b.root / BUCKET / "big.zarr"), mode="r")
    np.testing.assert_array_equal(on_b[10:20], values[10:20])
    # Run again: the multipart chunk is recognised by its source tag and skipped.
    assert counts(region("push", f"{BUCKET}/big.zarr", "--select", "[12:14]", "--to", to, root=a_root)) == (0, 1, 1)
    assert make_client(b.endpoint).list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
