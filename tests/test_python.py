"""The Python package: the native in-process API and the boto3 drop-in, sharing a data root
with a running gateway."""

import hashlib
import os
import threading

import numpy as np
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

import isthmus
import isthmus.boto3
from conftest import Server, make_client


@pytest.fixture
def store(tmp_path):
    s = isthmus.Store(str(tmp_path / "root"), durability="relaxed")
    s.create_bucket("pyb")
    return s


def test_native_objects_with_any_buffer(store):
    for i, data in enumerate([b"bytes", bytearray(b"bytearray"), memoryview(b"memoryview"), np.arange(100, dtype=np.float32)]):
        info = store.put_object("pyb", f"obj{i}", data, content_type="application/octet-stream", metadata={"i": str(i)})
        raw = bytes(memoryview(data).cast("B"))
        assert info["etag"] == hashlib.md5(raw).hexdigest() and info["size"] == len(raw)
        assert store.get_object("pyb", f"obj{i}") == raw
    out = np.empty(100, dtype=np.float32)
    assert store.get_object_into("pyb", "obj3", out) == 400
    assert (out == np.arange(100, dtype=np.float32)).all()
    assert store.get_object("pyb", "obj0", offset=1, length=3) == b"yte"
    head = store.head_object("pyb", "obj1")
    assert head["metadata"] == {"i": "1"} and head["size"] == 9
    with pytest.raises(isthmus.IsthmusError) as e:
        store.get_object_into("pyb", "obj1", bytearray(2))  # too small: refused, nothing written
    assert e.value.args[0] == "InvalidArgument"
    with pytest.raises(isthmus.IsthmusError) as e:
        store.get_object("pyb", "missing")
    assert e.value.args[0] == "NoSuchKey"


def test_native_listing_copy_multipart(store):
    for k in ["a/1", "a/2", "b", "a-c"]:
        store.put_object("pyb", k, k.encode())
    assert [x if isinstance(x, str) else x["key"] for x in isthmus.iter_objects(store, "pyb", delimiter="/")] == ["a-c", "a/", "b"]
    page = store.list_objects("pyb", prefix="a/", max_keys=1)
    assert page["is_truncated"] and [o["key"] for o in page["objects"]] == ["a/1"]
    store.copy_object("pyb", "b", "pyb", "b-copy")
    assert store.get_object("pyb", "b-copy") == b"b"
    upload = store.create_multipart_upload("pyb", "mp")
    e1 = store.upload_part("pyb", "mp", upload, 1, np.zeros(5 << 20, dtype=np.uint8))
    e2 = store.upload_part("pyb", "mp", upload, 2, b"end")
    assert [p[0] for p in store.list_parts("pyb", "mp", upload)] == [1, 2]
    info = store.complete_multipart_upload("pyb", "mp", upload, [(1, e1), (2, e2)])
    assert info["etag"].endswith("-2") and info["size"] == (5 << 20) + 3
    store.delete_object("pyb", "mp")
    assert "mp" not in [o["key"] for o in store.list_objects("pyb")["objects"]]


def test_native_calls_run_in_parallel_threads(store):
    errors = []

    def work(t):
        try:
            for i in range(200):
                store.put_object("pyb", f"t{t}/{i % 5}", b"x" * 4096)
                assert len(store.get_object("pyb", f"t{t}/{i % 5}")) == 4096
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_boto3_drop_in(tmp_path):
    s3 = isthmus.boto3.client(str(tmp_path / "root"))
    s3.create_bucket(Bucket="drop-in")
    put = s3.put_object(Bucket="drop-in", Key="k/v.txt", Body=b"value", ContentType="text/plain", Metadata={"m": "1"})
    assert put["ETag"] == '"%s"' % hashlib.md5(b"value").hexdigest()
    got = s3.get_object(Bucket="drop-in", Key="k/v.txt")
    assert got["Body"].read() == b"value" and got["ContentType"] == "text/plain" and got["Metadata"] == {"m": "1"}
    assert s3.get_object(Bucket="drop-in", Key="k/v.txt", Range="bytes=-3")["Body"].read() == b"lue"
    assert s3.head_object(Bucket="drop-in", Key="k/v.txt")["ContentLength"] == 5
    s3.copy_object(Bucket="drop-in", Key="copy.txt", CopySource={"Bucket": "drop-in", "Key": "k/v.txt"})
    keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket="drop-in", PaginationConfig={"PageSize": 1}) for o in p.get("Contents", [])]
    assert keys == ["copy.txt", "k/v.txt"]
    assert s3.delete_objects(Bucket="drop-in", Delete={"Objects": [{"Key": "copy.txt"}]})["Deleted"] == [{"Key": "copy.txt"}]
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="drop-in", Key="copy.txt")
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="drop-in", Key="copy.txt")
    assert e.value.response["Error"]["Code"] == "404"
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(12 * 1024 * 1024 + 7))
    config = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    s3.upload_file(str(src), "drop-in", "big.bin", Config=config)
    assert s3.head_object(Bucket="drop-in", Key="big.bin")["ETag"].endswith('-3"')
    s3.download_file("drop-in", "big.bin", str(tmp_path / "back.bin"), Config=config)
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    s3.delete_object(Bucket="drop-in", Key="big.bin")


def test_shared_root_with_a_running_gateway(tmp_path):
    root = tmp_path / "data"
    srv = Server(root)
    try:
        http = make_client(srv.endpoint)
        http.create_bucket(Bucket="shared")
        local = isthmus.Store(str(root))
        drop_in = isthmus.boto3.client(str(root), store=local)
        local.put_object("shared", "from-python", b"in-process write")
        assert http.get_object(Bucket="shared", Key="from-python")["Body"].read() == b"in-process write"
        http.put_object(Bucket="shared", Key="from-http", Body=b"gateway write")
        assert local.get_object("shared", "from-http") == b"gateway write"
        assert drop_in.get_object(Bucket="shared", Key="from-http")["ETag"] == http.head_object(Bucket="shared", Key="from-http")["ETag"]
    finally:
        srv.stop()
