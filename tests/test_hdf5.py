"""HDF5 files served in place: a file a simulation wrote with h5py into a bucket's directory is
read by the gateway's array service without copying (selections and threshold queries equal
to h5py's reads, over random selections), datasets it cannot decode are listed with the
filter named, the index is kept in the bucket's hidden area and rebuilt when the file changes,
and `isthmus array import` converts a file to Zarr v3 that zarr-python reads."""

import json
import os
import random
import subprocess

import h5py
import hdf5plugin
import numpy as np
import pytest

import isthmus
from conftest import ACCESS_KEY, SECRET_KEY, binary
from test_array_service import random_selection

BUCKET = "sim"


def write_run(path):
    """An HDF5 file with the layouts and filters simulations use, and its arrays in memory."""
    rng = np.random.default_rng(7)
    values = {}
    with h5py.File(path, "w") as f:
        vel = (rng.standard_normal((200, 40, 30)) * 2).astype("f4")
        d = f.create_dataset("vel", shape=vel.shape, dtype="f4", chunks=(16, 8, 8), compression="gzip",
                             compression_opts=4, shuffle=True, fillvalue=-1.5)
        d[:120] = vel[:120]  # the chunks past row 127 are never written: they read as the fill value
        vel[128:] = -1.5
        vel[120:128] = 0.0
        d[120:128] = 0.0
        values["/vel"] = vel
        temp = (np.arange(50 * 60).reshape(50, 60) / 7.0).astype(">f8")
        f.create_group("grid").create_dataset("temp", data=temp, chunks=(10, 12), fletcher32=True)
        values["/grid/temp"] = temp
        flat = (np.arange(300 * 70) % 3000 - 1500).astype("i2").reshape(300, 70)
        f.create_dataset("flat", data=flat)  # contiguous
        values["/flat"] = flat
        z = rng.integers(0, 1000, size=(64, 64), dtype="u4")
        f.create_dataset("zstd", data=z, chunks=(16, 32), **hdf5plugin.Zstd(clevel=3))
        values["/zstd"] = z
        f.create_dataset("lzf", data=vel[:10], chunks=(5, 8, 8), compression="lzf")
        f.create_dataset("scaled", data=flat.astype("i4"), chunks=(50, 70), scaleoffset=0)
        f.create_dataset("names", data=np.array([b"a", b"bc"], dtype="S2"))
    return values


@pytest.fixture
def run(server, s3):
    s3.create_bucket(Bucket=BUCKET)
    path = server.root / BUCKET / "run1.h5"
    return path, write_run(path)


def gateway(server):
    return isthmus.Gateway(server.endpoint, ACCESS_KEY, SECRET_KEY)


def test_datasets_listed_with_what_stops_them(server, run):
    listing = gateway(server).info(BUCKET, "run1.h5")
    by_path = {d["path"]: d for d in listing["datasets"]}
    assert {p for p, d in by_path.items() if d["servable"]} == {"/vel", "/grid/temp", "/flat", "/zstd"}
    assert "lzf" in by_path["/lzf"]["reason"]
    assert "scaleoffset" in by_path["/scaled"]["reason"]
    assert "data type" in by_path["/names"]["reason"]
    assert by_path["/vel"]["filters"] == ["shuffle", "deflate"]
    assert by_path["/vel"]["chunks"] == [16, 8, 8]
    assert by_path["/grid/temp"]["byte_order"] == "big"
    with pytest.raises(isthmus.IsthmusError) as refused:
        gateway(server).select(BUCKET, "run1.h5", "[0:2]", dataset="/lzf")
    assert refused.value.args[0] == "NotImplemented" and "lzf" in str(refused.value)
    with pytest.raises(isthmus.IsthmusError) as missing:
        gateway(server).select(BUCKET, "run1.h5", "[0]", dataset="/nope")
    assert missing.value.args[0] == "NoSuchKey" and "/vel" in str(missing.value)


@pytest.mark.parametrize("dataset", ["/vel", "/grid/temp", "/flat", "/zstd"])
def test_selections_equal_h5py(server, run, dataset):
    path, values = run
    gw = gateway(server)
    rng = random.Random(dataset)
    with h5py.File(path, "r") as f:
        for _ in range(25):
            text, index = random_selection(rng, values[dataset].shape)
            got = gw.select(BUCKET, "run1.h5", text, dataset=dataset)
            want = np.asarray(values[dataset][index])
            assert got.dtype == want.dtype.newbyteorder("<") or got.dtype == want.dtype, (text, got.dtype)
            np.testing.assert_array_equal(got, want, err_msg=text)
            if all(isinstance(i, slice) and (i.step or 1) > 0 for i in index):
                np.testing.assert_array_equal(got, f[dataset][index], err_msg=text)


def test_threshold_query_equals_numpy(server, run):
    _, values = run
    coords, found = gateway(server).where_all(BUCKET, "run1.h5", "abs(value)>4.5", limit=50, dataset="/vel")
    want = np.argwhere(np.abs(values["/vel"]) > 4.5)
    np.testing.assert_array_equal(coords, want)
    np.testing.assert_allclose(found, values["/vel"][tuple(want.T)])


def test_index_kept_in_the_hidden_area_and_rebuilt_when_the_file_changes(server, run):
    path, values = run
    gw = gateway(server)
    np.testing.assert_array_equal(gw.select(BUCKET, "run1.h5", "[5]", dataset="/flat"), values["/flat"][5])
    kept = list((server.root / BUCKET / ".isthmus" / "derived").iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("hdf5_index-")
    assert json.loads(kept[0].read_text())["datasets"]
    # The simulation rewrites the file: the next read sees the new data, not the old index's.
    with h5py.File(path, "w") as f:
        f.create_dataset("flat", data=np.full((10, 4), 9, dtype="i8"), chunks=(5, 2))
    np.testing.assert_array_equal(gw.select(BUCKET, "run1.h5", "[:,1]", dataset="/flat"), np.full(10, 9))
    assert [d["path"] for d in gw.info(BUCKET, "run1.h5")["datasets"]] == ["/flat"]


def test_a_damaged_chunk_is_an_error_not_wrong_data(server, run):
    path, _ = run
    gw = gateway(server)
    gw.select(BUCKET, "run1.h5", "[0]", dataset="/grid/temp")  # indexed
    with h5py.File(path, "r") as f:
        offset = f["grid/temp"].id.get_chunk_info(0).byte_offset
    # One byte of the first chunk flipped in place (bitrot, or a torn write by a POSIX tool).
    with open(path, "r+b") as raw:
        raw.seek(offset + 3)
        byte = raw.read(1)
        raw.seek(offset + 3)
        raw.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(isthmus.IsthmusError) as damaged:
        gw.select(BUCKET, "run1.h5", "[0:3]", dataset="/grid/temp")
    assert "Fletcher-32" in str(damaged.value)


def test_a_chunk_index_that_lies_about_a_chunks_size_is_refused_before_it_is_read(server, run):
    """The fuzzer's find, made by hand: anyone who may write the file writes its chunk index,
    and a chunk said to be stored in 4 GB (of a file of a few KB) once had the gateway allocate
    that much before reading. Now the size is bounded by what a chunk of its dataset can take."""
    path, values = run
    gw = gateway(server)
    with h5py.File(path, "r") as f:
        info = f["grid/temp"].id.get_chunk_info(0)
        rank = f["grid/temp"].ndim
    data = bytearray(path.read_bytes())
    # The v1 B-tree key before the chunk's address: its stored size (4 bytes), filter mask (4),
    # and rank + 1 offsets of 8 bytes.
    address = data.find(info.byte_offset.to_bytes(8, "little"))
    size_at = address - (8 + 8 * (rank + 1))
    assert address > 0 and int.from_bytes(data[size_at:size_at + 4], "little") == info.size
    data[size_at:size_at + 4] = (0xF000_0000).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(isthmus.IsthmusError) as refused:
        gw.select(BUCKET, "run1.h5", "[0:3]", dataset="/grid/temp")
    assert "stored in 4026531840 bytes, more than a chunk of 960 bytes takes" in str(refused.value)
    # The other datasets of the file still read.
    np.testing.assert_array_equal(gw.select(BUCKET, "run1.h5", "[5]", dataset="/flat"), values["/flat"][5])


def test_import_converts_to_zarr_that_zarr_python_reads(server, run, tmp_path):
    import zarr

    path, values = run
    root = tmp_path / "site"
    out = subprocess.run([str(binary()), "array", "import", str(path), "--to", "results/run1.zarr", "--root", str(root),
                          "--chunks", "50,20,15", "--codecs", "zstd:1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "skipped /lzf" in out.stderr and "lzf" in out.stderr
    group = zarr.open_group(str(root / "results" / "run1.zarr"), mode="r")
    np.testing.assert_array_equal(group["vel"][...], values["/vel"])
    assert group["vel"].chunks == (50, 20, 15)
    np.testing.assert_array_equal(group["grid/temp"][...], values["/grid/temp"])
    np.testing.assert_array_equal(group["flat"][...], values["/flat"])
    ls = subprocess.run([str(binary()), "array", "ls", str(path)], capture_output=True, text=True, timeout=60)
    assert ls.returncode == 0 and "no: the filter 32000 (lzf)" in ls.stdout, ls.stdout
    refused = subprocess.run([str(binary()), "array", "import", str(path), "--dataset", "/scaled", "--to", "results/x",
                              "--root", str(root)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "scaleoffset" in refused.stderr
    assert not (root / "results" / "x").exists()
    bad = subprocess.run([str(binary()), "array", "ls", str(tmp_path / "nothing.h5")], capture_output=True, text=True)
    assert bad.returncode == 1 and "nothing.h5" in bad.stderr
