"""The gateway's array service: `?select=` answers numpy's basic slicing of the array (raw
bytes with shape and dtype headers, or .npy), `?where=` the matching coordinates and values
with a limit and continuation, `?array` the metadata with coordinate variables; the same
authentication and permissions as any GET; a selection over the limit is refused whole."""

import random

import numpy as np
import pytest
import requests

import isthmus
from conftest import ACCESS_KEY, SECRET_KEY, Server

BUCKET = "arrays"


@pytest.fixture
def gateway(server, s3):
    s3.create_bucket(Bucket=BUCKET)
    return server


def engine(server, prefix=""):
    return isthmus.Location.engine(isthmus.Store(str(server.root)), BUCKET, prefix)


def client(server):
    return isthmus.Gateway(server.endpoint, ACCESS_KEY, SECRET_KEY)


def random_selection(rng, shape):
    """A random numpy basic index and its text form."""
    parts, index = [], []
    for extent in shape:
        kind = rng.random()
        if kind < 0.2:
            i = rng.randrange(-extent, extent)
            parts.append(str(i))
            index.append(i)
        else:
            start = rng.choice([None, rng.randrange(-extent, extent)])
            stop = rng.choice([None, rng.randrange(-extent, extent + 3)])
            step = rng.choice([None, 1, 2, 3, 7])
            text = f"{'' if start is None else start}:{'' if stop is None else stop}"
            if step is not None:
                text += f":{step}"
            parts.append(text)
            index.append(slice(start, stop, step))
    return "[" + ",".join(parts) + "]", tuple(index)


@pytest.mark.parametrize("dtype,codecs,inner", [("float32", "zstd:1", None), ("int16", "", None), ("uint8", "blosc", (2, 4, 2)), ("float64", "gzip:1,crc32c", None)])
def test_selections_equal_numpy_slicing(gateway, dtype, codecs, inner):
    rng = random.Random(hash((dtype, codecs)) & 0xFFFF)
    shape, chunks = (9, 16, 6), (4, 8, 4) if inner else (4, 5, 4)
    a = isthmus.Array.create(engine(gateway), "sel.zarr", shape=shape, dtype=dtype, chunks=chunks, codecs=codecs,
                             inner_chunks=inner)
    values = (np.arange(np.prod(shape)).reshape(shape) * 1.5 - 100).astype(dtype)
    a[...] = values
    gw = client(gateway)
    for _ in range(25):
        text, index = random_selection(rng, shape)
        got = gw.select(BUCKET, "sel.zarr", text)
        np.testing.assert_array_equal(got, values[index], err_msg=text)
        assert got.dtype == values.dtype
    # Raw bytes with the shape and dtype in headers.
    url = gw.presign(BUCKET, "sel.zarr", {"select": "[1:8:3, ::5, 2]"})
    r = requests.get(url)
    assert r.status_code == 200, r.text
    assert r.headers["x-amz-meta-shape"] == "3,4" and r.headers["x-amz-meta-dtype"] == np.dtype(dtype).str.replace("|", "|")
    np.testing.assert_array_equal(np.frombuffer(r.content, dtype=dtype).reshape(3, 4), values[1:8:3, ::5, 2])
    # .npy by the Accept header too.
    r = requests.get(gw.presign(BUCKET, "sel.zarr", {"select": "[0]"}), headers={"Accept": "application/x-npy"})
    assert r.headers["content-type"] == "application/x-npy" and r.content.startswith(b"\x93NUMPY")


def test_threshold_queries_equal_numpy_with_limit_and_continuation(gateway):
    shape = (7, 11, 5)
    a = isthmus.Array.create(engine(gateway), "t.zarr", shape=shape, dtype="float32", chunks=(3, 4, 5), codecs="zstd:1")
    values = np.random.default_rng(3).normal(size=shape).astype(np.float32)
    a[...] = values
    gw = client(gateway)
    for expr, mask in [("abs(value) > 1.5", np.abs(values) > 1.5),
                       ("value > 0.5 and value < 1 or value <= -2", ((values > 0.5) & (values < 1)) | (values <= -2)),
                       ("not value >= -3", ~(values >= -3))]:
        coords, got = gw.where_all(BUCKET, "t.zarr", expr, limit=7)
        expected = np.argwhere(mask)
        np.testing.assert_array_equal(coords.reshape(-1, 3), expected.reshape(-1, 3))
        np.testing.assert_allclose(got, values[mask])
    # Within a selection, coordinates stay the array's.
    coords, got = gw.where_all(BUCKET, "t.zarr", "value > 0", selection="[2:6:2, 3, :]")
    sub = values[2:6:2, 3, :]
    expected = [(2 + 2 * i, 3, k) for i, k in np.argwhere(sub > 0)]
    assert [tuple(c) for c in coords] == expected
    page = gw.where(BUCKET, "t.zarr", "abs(value) > 0", limit=10)
    assert page["count"] == 10 and page["next"] == 10
    with pytest.raises(isthmus.IsthmusError) as err:
        gw.where(BUCKET, "t.zarr", "value >")
    assert err.value.args[0] == "InvalidArgument" and "the language" in err.value.args[1]


def test_metadata_with_coordinate_variables(gateway):
    where = engine(gateway)
    where.create_group("ds.zarr", '{"title": "quake"}')
    inside = engine(gateway, "ds.zarr")
    isthmus.Array.create(inside, "vel", shape=(4, 3), dtype="float32", chunks=(2, 3), dimension_names=("time", "x"),
                         attributes={"units": "m/s"})
    t = isthmus.Array.create(inside, "time", shape=(4,), dtype="float64", chunks=(4,), dimension_names=("time",))
    t[...] = np.array([0.0, 0.5, 1.0, 1.5])
    info = client(gateway).info(BUCKET, "ds.zarr/vel")
    assert info["shape"] == [4, 3] and info["dtype"] == "float32" and info["chunks"] == [2, 3]
    assert info["attributes"] == {"units": "m/s"} and info["dimension_names"] == ["time", "x"]
    assert info["coordinates"]["time"]["values"] == [0.0, 0.5, 1.0, 1.5]
    assert "x" not in info["coordinates"]


def test_same_authentication_and_refusals(gateway, tmp_path):
    a = isthmus.Array.create(engine(gateway), "big.zarr", shape=(1000, 1000), dtype="float64", chunks=(100, 1000))
    a[0:2, :] = np.ones((2, 1000))
    gw = client(gateway)
    # Unsigned, and signed with a wrong secret: refused like any GET.
    assert requests.get(f"{gateway.endpoint}/{BUCKET}/big.zarr?select=[0:2]").status_code == 403
    wrong = isthmus.Gateway(gateway.endpoint, ACCESS_KEY, "not-the-secret")
    with pytest.raises(isthmus.IsthmusError) as err:
        wrong.select(BUCKET, "big.zarr", "[0:2]")
    assert err.value.args[0] == "SignatureDoesNotMatch"
    with pytest.raises(isthmus.IsthmusError) as err:
        gw.select(BUCKET, "nothing.zarr", "[0]")
    assert err.value.args[0] == "NoSuchKey"
    with pytest.raises(isthmus.IsthmusError) as err:
        gw.select(BUCKET, "big.zarr", "[0:2:0]")
    assert err.value.args[0] == "InvalidArgument" and "steps must be at least 1" in err.value.args[1]
    # A gateway with a small limit refuses a large selection whole, and answers a downsampled one.
    small = Server(tmp_path / "small-root", extra_args=["--select-max-bytes", "1MiB"])
    try:
        import boto3  # noqa: F401
        from conftest import make_client
        make_client(small.endpoint).create_bucket(Bucket=BUCKET)
        b = isthmus.Array.create(engine(small), "big.zarr", shape=(1000, 1000), dtype="float64", chunks=(100, 1000))
        b[0:2, :] = np.ones((2, 1000))
        sgw = client(small)
        with pytest.raises(isthmus.IsthmusError) as err:
            sgw.select(BUCKET, "big.zarr", "[:, :]")
        assert err.value.args[0] == "InvalidArgument" and "select_max_bytes" in err.value.args[1]
        down = sgw.select(BUCKET, "big.zarr", "[::10, ::10]")
        assert down.shape == (100, 100) and down[0, 0] == 1 and down[1, 0] == 0
    finally:
        small.stop()
    # Normal S3 reads of the array's objects are unchanged.
    s3 = __import__("conftest").make_client(gateway.endpoint)
    assert b"zarr_format" in s3.get_object(Bucket=BUCKET, Key="big.zarr/zarr.json")["Body"].read()


def test_a_large_selection_streams_with_bounded_gateway_memory(gateway):
    a = isthmus.Array.create(engine(gateway), "stream.zarr", shape=(4096, 8192), dtype="float32", chunks=(256, 8192))
    block = np.arange(256 * 8192, dtype=np.float32).reshape(256, 8192)
    for i in range(16):
        a[i * 256:(i + 1) * 256] = block + i
    before = gateway.rss_peak_kib()
    r = requests.get(client(gateway).presign(BUCKET, "stream.zarr", {"select": "[:, :]"}), stream=True)
    total = 0
    for piece in r.iter_content(1 << 20):
        total += len(piece)
    assert total == 4096 * 8192 * 4
    grown = gateway.rss_peak_kib() - before
    # Slabs of 8 MiB, chunks decoded on a few pool threads (each with its malloc arena).
    assert grown < 96 * 1024, f"the gateway grew by {grown} KiB for a 128 MiB selection"
