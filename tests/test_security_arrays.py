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
