"""Hostile array files against a real gateway (issue 28, findings 1 and 8): a zarr.json whose
sizes overflow or are huge, selections and threshold queries on it, HDF5 files whose links
leave the bucket. Each answer is a 400 naming the problem, and the gateway keeps serving."""

import json
import os

import pytest
import requests

import isthmus
from conftest import ACCESS_KEY, SECRET_KEY, make_client

BUCKET = "hostile"


def zarr_json(shape, chunks, dtype="float64"):
    return json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    })


@pytest.fixture
def gateway(server):
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket=BUCKET)
    return server, s3, isthmus.Gateway(server.endpoint, ACCESS_KEY, SECRET_KEY)


def refused(call):
    with pytest.raises(isthmus.IsthmusError) as err:
        call()
    return err.value.args


def still_serving(server, s3):
    assert server.proc.poll() is None, "the gateway died"
    assert s3.list_buckets()["Buckets"]


HUGE = 2 ** 40


@pytest.mark.parametrize("shape,selection", [
    ([HUGE, HUGE, HUGE], "[:, :, :]"),
    ([HUGE, HUGE, HUGE], "[0:4, :, :]"),
    ([HUGE, HUGE, HUGE], "[::1099511627775, ::1099511627775, :]"),
    ([2 ** 61 + 1, 8], "[:, :]"),  # 2^64 + 8 elements: wrapped to 8
    ([2 ** 62, 2 ** 62], "[:, :]"),
])
def test_a_selection_whose_size_overflows_is_refused_not_a_crash(gateway, shape, selection):
    """Finding 1: shape [2^40]*3 made the element count wrap past select_max_bytes; the
    selection then allocated ~2^61 bytes and the process aborted."""
    server, s3, gw = gateway
    s3.put_object(Bucket=BUCKET, Key="wrap.zarr/zarr.json", Body=zarr_json(shape, [1] * len(shape)))
    code, message = refused(lambda: gw.select(BUCKET, "wrap.zarr", selection))[:2]
    assert code == "InvalidArgument", message
    still_serving(server, s3)


def test_a_threshold_query_over_an_overflowing_array_is_refused(gateway):
    server, s3, gw = gateway
    s3.put_object(Bucket=BUCKET, Key="wrap.zarr/zarr.json", Body=zarr_json([HUGE, HUGE, HUGE], [1, 1, 1]))
    code, _ = refused(lambda: gw.where(BUCKET, "wrap.zarr", "value > 0"))[:2]
    assert code == "InvalidArgument"
    code, _ = refused(lambda: gw.where(BUCKET, "wrap.zarr", "value > 0", selection="[0:2, 0:2, :]"))[:2]
    assert code == "InvalidArgument"
    still_serving(server, s3)


def test_a_chunk_larger_than_the_gateway_reads_is_refused(gateway):
    """One chunk of 2^60 elements: reading any element would decode the whole chunk."""
    server, s3, gw = gateway
    s3.put_object(Bucket=BUCKET, Key="bigchunk.zarr/zarr.json", Body=zarr_json([2 ** 30, 2 ** 30], [2 ** 30, 2 ** 30]))
    code, message = refused(lambda: gw.select(BUCKET, "bigchunk.zarr", "[0, 0]"))[:2]
    assert code == "InvalidArgument" and "chunk" in message
    still_serving(server, s3)


def test_a_strided_selection_spanning_countless_chunks_is_refused_quickly(gateway):
    """Two elements 2^39 apart in an array of one-element chunks: walking every chunk of the
    bounding box would take hours."""
    server, s3, gw = gateway
    s3.put_object(Bucket=BUCKET, Key="sparse.zarr/zarr.json", Body=zarr_json([HUGE], [1]))
    answer = requests.get(f"{server.endpoint}/{BUCKET}/sparse.zarr?select=[::549755813888]", timeout=30)
    # Unsigned: refused before anything. Signed, the selection is 2 elements; it must answer.
    assert answer.status_code == 403
    got = gw.select(BUCKET, "sparse.zarr", "[::549755813888]")
    assert list(got) == [0.0, 0.0]
    still_serving(server, s3)


def test_an_array_whose_size_overflows_is_refused_when_opened(gateway):
    server, s3, gw = gateway
    s3.put_object(Bucket=BUCKET, Key="wrap.zarr/zarr.json", Body=zarr_json([HUGE, HUGE, HUGE], [1, 1, 1]))
    code, message = refused(lambda: gw.info(BUCKET, "wrap.zarr"))[:2]
    assert code == "InvalidArgument" and "2^64" in message
    still_serving(server, s3)


def test_a_where_expression_nested_deep_enough_to_exhaust_a_stack_is_refused(gateway):
    """Parsing and evaluating recurse on the expression's depth: a deep one must be refused
    before it overflows a worker's stack."""
    server, s3, gw = gateway
    s3.put_object(Bucket=BUCKET, Key="small.zarr/zarr.json", Body=zarr_json([4], [4]))
    # As deep as a URL holds (hyper refuses longer ones with 414): enough to overflow the
    # 2 MiB stack of a blocking worker before the depth was bounded.
    for expr in ["(" * 8_000 + "value > 0" + ")" * 8_000, "!" * 15_000 + "value > 0"]:
        code, message = refused(lambda: gw.where(BUCKET, "small.zarr", expr))[:2]
        assert code == "InvalidArgument" and ("nests deeper" in message or "tokens" in message), message
    assert gw.where(BUCKET, "small.zarr", "(((value >= 0)))")["count"] == 4
    still_serving(server, s3)


def outside_file(directory, rows=1234):
    """An HDF5 file outside the data root, as another user's secret."""
    import h5py
    import numpy as np
    path = directory / "secret.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("secret", data=np.arange(rows * 3, dtype="f8").reshape(rows, 3), maxshape=(None, 3), chunks=(64, 3))
    return path


def test_hdf5_links_that_leave_the_file_are_not_followed(gateway, tmp_path):
    """Finding 8: libhdf5 followed external links (and opened a virtual dataset's source files
    to tell its extent) outside the data root, as the gateway: the listing showed another
    file's datasets and sizes. Only the file's own objects are indexed now."""
    import h5py
    import numpy as np
    server, s3, gw = gateway
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside_file(outside)
    path = server.root / BUCKET / "links.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("own", data=np.arange(10, dtype="f4"), chunks=(5,))
        f["ext"] = h5py.ExternalLink(str(secret), "/")
        f["ext_dataset"] = h5py.ExternalLink(str(secret), "/secret")
        f["soft"] = h5py.SoftLink("/ext/secret")
        # An unlimited mapping: its extent is the source's, which libhdf5 opens to tell it.
        layout = h5py.VirtualLayout(shape=(1, 3), maxshape=(None, 3), dtype="f8")
        source = h5py.VirtualSource(str(secret), "secret", shape=(1234, 3), maxshape=(None, 3))
        layout[:h5py.h5s.UNLIMITED, :] = source[:h5py.h5s.UNLIMITED, :]
        f.create_virtual_dataset("view", layout, fillvalue=0)
    listing = gw.info(BUCKET, "links.h5")
    by_path = {d["path"]: d for d in listing["datasets"]}
    assert set(by_path) == {"/own", "/view"}, by_path
    assert by_path["/own"]["servable"] and by_path["/own"]["shape"] == [10]
    # The virtual dataset is named, not measured: its extent lives in the other file.
    assert not by_path["/view"]["servable"] and 1234 not in by_path["/view"]["shape"]
    for dataset in ["/ext/secret", "/ext_dataset", "/soft"]:
        code = refused(lambda: gw.select(BUCKET, "links.h5", "[0:2]", dataset=dataset))[0]
        assert code == "NoSuchKey", dataset
    np.testing.assert_array_equal(gw.select(BUCKET, "links.h5", "[2:4]", dataset="/own"), [2, 3])
    still_serving(server, s3)


def test_hdf5_files_behind_a_link_that_leaves_the_bucket_are_not_opened(gateway, tmp_path):
    """An HDF5 file reached through a directory link that leaves the bucket is no object of it:
    the index is made from the file opened beneath the bucket, never from a name."""
    server, s3, gw = gateway
    outside = tmp_path / "outside"
    outside.mkdir()
    outside_file(outside)
    os.symlink(outside, server.root / BUCKET / "escape")
    code = refused(lambda: gw.info(BUCKET, "escape/secret.h5"))[0]
    assert code == "NoSuchKey"
    still_serving(server, s3)
