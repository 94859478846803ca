"""Zarr v3 arrays through Isthmus, end to end: the numpy API (regions, strides, attributes,
transfers), interoperability with zarr-python 3 (from the file path and over S3 through the
gateway with s3fs) and xarray, the remote S3 location, concurrent writers from several
processes, and a writer killed with SIGKILL in the middle of a session of writes."""

import json
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest
import s3fs
import xarray as xr
import zarr
from zarr.storage import FsspecStore

import isthmus
from conftest import ACCESS_KEY, SECRET_KEY

BUCKET = "arrays"


@pytest.fixture
def gateway(server, s3):
    s3.create_bucket(Bucket=BUCKET)
    return server


def engine(server, prefix=""):
    """The gateway's data root opened in-process: the same files the gateway serves."""
    return isthmus.Location.engine(isthmus.Store(str(server.root)), BUCKET, prefix)


def remote(server, prefix=""):
    return isthmus.Location.remote(server.endpoint, BUCKET, ACCESS_KEY, SECRET_KEY, prefix=prefix)


def fsspec_store(server, path, read_only=True):
    options = {"key": ACCESS_KEY, "secret": SECRET_KEY, "client_kwargs": {"endpoint_url": server.endpoint, "region_name": "us-east-1"}}
    return FsspecStore.from_url(f"s3://{BUCKET}/{path}", storage_options=options, read_only=read_only)


def test_numpy_regions_strides_and_attributes(gateway):
    a = isthmus.Array.create(engine(gateway), "run1/t.zarr", shape=(20, 30), dtype="float64", chunks=(7, 8),
                             codecs="zstd:3,crc32c", attributes={"units": "m/s"}, dimension_names=("t", "x"))
    reference = np.arange(600, dtype=np.float64).reshape(20, 30) / 7
    a[:, :] = reference
    np.testing.assert_array_equal(a[:, :], reference)
    np.testing.assert_array_equal(a[3:17:4, 1::5], reference[3:17:4, 1::5])
    np.testing.assert_array_equal(a[5], reference[5])
    a[2:9:3, 4:6] = -1.0
    reference[2:9:3, 4:6] = -1.0
    again = isthmus.Array.open(engine(gateway), "run1/t.zarr")
    np.testing.assert_array_equal(again[...], reference)
    assert again.attrs == {"units": "m/s"}
    assert again.dtype == np.float64 and again.shape == (20, 30) and again.chunks == (7, 8)
    assert again.metadata["dimension_names"] == ["t", "x"]
    with pytest.raises(IndexError):
        a[0:5:-1]
    with pytest.raises(isthmus.IsthmusError) as err:
        a.read(offset=(15, 0), count=(10, 1))
    assert err.value.args[0] == "InvalidArgument" and "passes the array's extent 20" in err.value.args[1]
    with pytest.raises(isthmus.IsthmusError) as err:
        isthmus.Array.create(engine(gateway), "run1/t.zarr", shape=(1,), dtype="u1", chunks=(1,))
    assert err.value.args[0] == "AlreadyExists"
    with pytest.raises(isthmus.IsthmusError) as err:
        isthmus.Array.create(engine(gateway), "bad", shape=(4,), dtype="u1", chunks=(2,), codecs="lzma")
    assert "unknown codec" in err.value.args[1]


@pytest.mark.parametrize(
    "codecs,inner",
    [("", None), ("zstd:3", None), ("gzip:5", None), ("blosc:lz4:5:shuffle", None), ("crc32c", None), ("zstd:1", (4, 5)),
     ("", (4, 5))],
)
@pytest.mark.posix_only
def test_isthmus_arrays_are_read_by_zarr_python_from_the_path_and_over_s3(gateway, codecs, inner):
    chunks = (8, 10) if inner else (6, 7)
    a = isthmus.Array.create(engine(gateway), "shared/a.zarr", shape=(17, 23), dtype="int32", chunks=chunks,
                             codecs=codecs, inner_chunks=inner, fill_value=-5, attributes={"k": [1, 2]})
    reference = np.full((17, 23), -5, np.int32)
    reference[2:15, 3:20] = np.arange(13 * 17, dtype=np.int32).reshape(13, 17)
    a[2:15, 3:20] = reference[2:15, 3:20]

    from_path = zarr.open_array(str(gateway.root / BUCKET / "shared/a.zarr"), mode="r")
    np.testing.assert_array_equal(from_path[:], reference)
    assert dict(from_path.attrs) == {"k": [1, 2]}
    over_s3 = zarr.open_array(fsspec_store(gateway, "shared/a.zarr"), mode="r")
    np.testing.assert_array_equal(over_s3[:], reference)
    np.testing.assert_array_equal(over_s3[1:9, 2:22:3], reference[1:9, 2:22:3])


def test_zarr_python_arrays_written_over_s3_are_read_by_isthmus_and_xarray(gateway):
    group = zarr.open_group(fsspec_store(gateway, "fromzarr/ds.zarr", read_only=False), mode="w", zarr_format=3)
    temp = group.create_array("temp", shape=(12, 9, 5), chunks=(5, 4, 5), dtype="float32",
                              compressors=zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"),
                              dimension_names=("time", "y", "x"), fill_value=0)
    values = np.random.default_rng(7).normal(size=(12, 9, 5)).astype(np.float32)
    temp[:] = values
    time_axis = group.create_array("time", shape=(12,), chunks=(12,), dtype="int64", dimension_names=("time",))
    time_axis[:] = np.arange(12) * 3600
    sharded = group.create_array("sharded", shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="uint16",
                                 dimension_names=("a", "b"))
    sharded[:] = np.arange(256, dtype=np.uint16).reshape(16, 16)

    for where in (engine(gateway, "fromzarr/ds.zarr"), remote(gateway, "fromzarr/ds.zarr")):
        got = isthmus.Array.open(where, "temp")
        np.testing.assert_array_equal(got[...], values)
        np.testing.assert_array_equal(got[2:11:3, 1:8, 4], values[2:11:3, 1:8, 4])
        np.testing.assert_array_equal(isthmus.Array.open(where, "sharded")[3:13, 5:7],
                                      np.arange(256, dtype=np.uint16).reshape(16, 16)[3:13, 5:7])

    opts = {"key": ACCESS_KEY, "secret": SECRET_KEY, "client_kwargs": {"endpoint_url": gateway.endpoint, "region_name": "us-east-1"}}
    ds = xr.open_zarr(f"s3://{BUCKET}/fromzarr/ds.zarr", storage_options=opts, consolidated=False, zarr_format=3)
    np.testing.assert_array_equal(ds["temp"].values, values)
    assert list(ds["temp"].dims) == ["time", "y", "x"]
    assert int(ds["time"][-1]) == 11 * 3600


@pytest.mark.posix_only
def test_xarray_opens_a_group_isthmus_wrote(gateway):
    where = engine(gateway)
    where.create_group("grid.zarr", json.dumps({"title": "isthmus"}))
    inside = engine(gateway, "grid.zarr")
    v = isthmus.Array.create(inside, "v", shape=(6, 4), dtype="float32", chunks=(3, 4), codecs="zstd:1",
                             dimension_names=("t", "x"), attributes={"units": "K"})
    v[...] = np.arange(24, dtype=np.float32).reshape(6, 4)
    t = isthmus.Array.create(inside, "t", shape=(6,), dtype="int32", chunks=(6,), dimension_names=("t",))
    t[...] = np.arange(6, dtype=np.int32) * 10
    ds = xr.open_zarr(str(gateway.root / BUCKET / "grid.zarr"), consolidated=False, zarr_format=3)
    assert ds.attrs["title"] == "isthmus"
    assert ds["v"].attrs["units"] == "K"
    np.testing.assert_array_equal(ds["v"].sel(t=20).values, np.arange(8, 12, dtype=np.float32))


@pytest.mark.posix_only
def test_the_remote_location_writes_plain_files_through_the_gateway(gateway, s3):
    far = remote(gateway, "site-b")
    a = isthmus.Array.create(far, "r.zarr", shape=(10, 10), dtype="uint8", chunks=(4, 4), codecs="gzip:1")
    a[1:9, 2:7] = np.full((8, 5), 9, np.uint8)
    a[0, :] = 1
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="site-b/")["Contents"])
    assert "site-b/r.zarr/zarr.json" in keys and "site-b/r.zarr/c/0/0" in keys
    on_disk = zarr.open_array(str(gateway.root / BUCKET / "site-b/r.zarr"), mode="r")[:]
    expected = np.zeros((10, 10), np.uint8)
    expected[1:9, 2:7] = 9
    expected[0, :] = 1
    np.testing.assert_array_equal(on_disk, expected)


def test_transfers_from_python(gateway):
    a = isthmus.Array.create(engine(gateway), "tr.zarr", shape=(64, 16), dtype="float32", chunks=(16, 16))
    with isthmus.Transfers(buffer_bytes=8192, threads=2) as session:
        block = np.ones((8, 16), np.float32)
        pending = []
        for step in range(8):
            block[:] = step
            pending.append(session.write(a, block, offset=(step * 8, 0)))  # copied: block is reused
        assert all(t.status() in ("pending", "done") for t in pending)
        session.wait_all(pending)
        assert session.buffer_peak <= 8192
        reads = [session.create(a, "read", offset=(i * 4, 0), count=(4, 16)) for i in range(16)]
        session.start_all(reads)
        session.wait_all(reads)
        got = np.concatenate([t.buffer for t in reads])
    np.testing.assert_array_equal(got, np.repeat(np.arange(8, dtype=np.float32), 8)[:, None] * np.ones(16))
    strong = isthmus.Transfers(consistency="strong")
    t = strong.write(a, np.full((2, 2), 7, np.float32), offset=(0, 0))
    assert t.status() == "done"
    assert a[0, 0] == 7
    t.wait()
    clash = session.write(a, np.zeros((4, 4), np.float32), offset=(10, 0), consistency="session")
    with pytest.raises(isthmus.IsthmusError) as err:
        session.read(a, offset=(12, 0), count=(1, 1))
    assert "overlaps a transfer in flight" in err.value.args[1]
    clash.wait()


def band_writer(root, writer, rounds):
    """Writes column band `writer` of the shared array `rounds` times (a child process)."""
    a = isthmus.Array.open(isthmus.Location.engine(isthmus.Store(root), BUCKET), "shared.zarr")
    for r in range(rounds):
        a[:, writer * 3:(writer + 1) * 3] = np.full((10, 3), r * 100 + writer, np.int32)


def run_band_writers(gateway):
    """Eight processes write their bands of shared.zarr 20 times; the array they must leave."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=band_writer, args=(str(gateway.root), w, 20)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return np.repeat(np.arange(8, dtype=np.int32) + 1900, 3)[None, :].repeat(10, axis=0)


def test_concurrent_writers_in_several_processes_produce_the_reference(gateway):
    a = isthmus.Array.create(engine(gateway), "shared.zarr", shape=(10, 24), dtype="int32", chunks=(10, 8), codecs="zstd:1")
    expected = run_band_writers(gateway)
    np.testing.assert_array_equal(a[...], expected)


@pytest.mark.posix_only
def test_writers_in_several_processes_share_uncompressed_shards_written_in_place(gateway):
    # One shard of inner chunks 5 x 8: the 3-column bands of eight processes share inner chunks,
    # so each write is a read-merge-write of part of an inner chunk in the shard's file.
    a = isthmus.Array.create(engine(gateway), "shared.zarr", shape=(10, 24), dtype="int32", chunks=(10, 24),
                             inner_chunks=(5, 8))
    assert a.allocate_shards() == 1
    shard = gateway.root / BUCKET / "shared.zarr/c/0/0"
    inode = shard.stat().st_ino
    expected = run_band_writers(gateway)
    np.testing.assert_array_equal(a[...], expected)
    assert shard.stat().st_ino == inode, "written in place, never replaced"
    np.testing.assert_array_equal(zarr.open_array(str(gateway.root / BUCKET / "shared.zarr"), mode="r")[:], expected)


def session_writer(root):
    """Rewrites every chunk of `k.zarr` with its round number, in session batches, forever."""
    a = isthmus.Array.open(isthmus.Location.engine(isthmus.Store(root), BUCKET), "k.zarr")
    session = isthmus.Transfers(threads=4)
    r = 1
    while True:
        batch = [session.create(a, "write", np.full((16, 64), r, np.int64), offset=(i * 16, 0)) for i in range(8)]
        # A partial-chunk write too: read, merge, write back.
        batch.append(session.create(a, "write", np.full((16, 8), r, np.int64), offset=(128, 0)))
        session.start_all(batch)
        session.wait_all(batch)
        r += 1


@pytest.mark.posix_only
def test_a_writer_killed_during_a_session_leaves_every_chunk_old_or_new(gateway, s3):
    isthmus.Array.create(engine(gateway), "k.zarr", shape=(144, 64), dtype="int64", chunks=(16, 64), codecs="zstd:1,crc32c")
    for delay in (0.3, 0.7, 1.1):
        proc = multiprocessing.get_context("fork").Process(target=session_writer, args=(str(gateway.root),))
        proc.start()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        a = isthmus.Array.open(engine(gateway), "k.zarr")  # every chunk decodes (crc32c checked)
        rounds = a[::16, 0]
        assert rounds.max() >= 1, "the writer was killed before it wrote anything"
        for i in range(9):
            chunk = a[i * 16:(i + 1) * 16, :]
            if i < 8:
                assert len(np.unique(chunk)) == 1, f"chunk {i} is torn: {np.unique(chunk)}"
            else:
                assert len(np.unique(chunk[:, :8])) == 1 and not chunk[:, 8:].any()
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="k.zarr/")["Contents"]]
        assert all(".isthmus" not in k for k in keys), keys
        leftovers = [n for n in os.listdir(gateway.root / BUCKET / "k.zarr" / "c") if n.startswith(".")]
        assert leftovers == [], leftovers
