"""The Python package: the native in-process API and the boto3 drop-in, sharing a data root
with a running gateway."""

import hashlib
import os
import subprocess
import sys
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


def test_native_streaming_in_pieces(store, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 512 * 1024 + 11)  # more than three 1 MiB pieces
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    with open(src, "rb") as f:
        info = store.put_stream("pyb", "streamed", f, metadata={"m": "1"})
    assert info["etag"] == hashlib.md5(data).hexdigest() and info["size"] == len(data)
    # A wrong Content-MD5 refuses the object whole and leaves nothing behind.
    with open(src, "rb") as f, pytest.raises(isthmus.IsthmusError) as e:
        store.put_stream("pyb", "refused", f, content_md5=hashlib.md5(b"other").digest())
    assert e.value.args[0] == "BadDigest"
    bucket_dir = tmp_path / "root" / "pyb"
    assert sorted(p.name for p in bucket_dir.iterdir() if p.name != ".isthmus") == ["streamed"]
    internal = bucket_dir / ".isthmus"
    assert not [p for p in internal.rglob("*") if p.is_file() and "tmp" in p.relative_to(internal).parts]

    with store.open_object("pyb", "streamed") as reader:
        assert reader.info["etag"] == info["etag"] and reader.range is None
        pieces = []
        while chunk := reader.read(1 << 20):
            assert len(chunk) <= 1 << 20
            pieces.append(chunk)
        assert b"".join(pieces) == data and reader.remaining == 0
    reader = store.open_object("pyb", "streamed")
    buf = bytearray(100_000)
    assert reader.readinto(buf) == 100_000 and bytes(buf) == data[:100_000]
    reader.close()
    with pytest.raises(ValueError):
        reader.read(1)
    for header, expected, span in [("bytes=-10", data[-10:], (len(data) - 10, len(data) - 1)), ("bytes=5-9", data[5:10], (5, 9)), ("bytes=100-", data[100:], (100, len(data) - 1))]:
        reader = store.open_object("pyb", "streamed", range=header)
        assert reader.range == span and reader.read() == expected, header
    for bad, code in [("bytes=abc", "InvalidArgument"), (f"bytes={len(data)}-", "InvalidRange")]:
        with pytest.raises(isthmus.IsthmusError) as e:
            store.open_object("pyb", "streamed", range=bad)
        assert e.value.args[0] == code, bad


def test_boto3_drop_in_streams_large_objects_in_bounded_memory(tmp_path):
    """put_object with a file and get_object's Body go through the engine in pieces: a 256 MiB
    object read 1 MiB at a time keeps the process far below the object's size."""
    root = tmp_path / "root"
    script = f"""
import hashlib, os, sys
import isthmus.boto3
def peak_mib():  # VmHWM belongs to this program; ru_maxrss would include the forking pytest's
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) // 1024
s3 = isthmus.boto3.client({str(root)!r})
s3.create_bucket(Bucket="big")
class Zeros:  # a 256 MiB file-like source that never exists in memory
    def __init__(self): self.left = 256 << 20
    def read(self, n=-1):
        n = self.left if n is None or n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)
put = s3.put_object(Bucket="big", Key="zeros", Body=Zeros())
after_put = peak_mib()
body = s3.get_object(Bucket="big", Key="zeros")["Body"]
total = 0
while chunk := body.read(1 << 20):
    total += len(chunk)
ranged = s3.get_object(Bucket="big", Key="zeros", Range="bytes=-5")
print(put["ETag"], total, ranged["ContentRange"], after_put, peak_mib(), sep="|")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    etag, total, content_range, peak_after_put, peak_mib = r.stdout.strip().split("|")
    zeros_md5 = hashlib.md5()
    for _ in range(256):
        zeros_md5.update(bytes(1 << 20))
    assert etag == '"%s"' % zeros_md5.hexdigest()
    assert int(total) == 256 << 20 and content_range == "bytes %d-%d/%d" % ((256 << 20) - 5, (256 << 20) - 1, 256 << 20)
    assert int(peak_mib) < 160, f"peak RSS {peak_mib} MiB ({peak_after_put} after the PUT) for a 256 MiB object"


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


def test_the_native_api_runs_with_the_callers_permissions():
    """The embedded engine does its file-system calls as the calling process: a process of an
    unprivileged user gets AccessDenied where its shell would, and nothing is created."""
    import json
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("needs root to become another user for the test (CI runs as root)")
    base = tempfile.mkdtemp(prefix="isthmus-perm-")
    try:
        os.chmod(base, 0o755)
        root = os.path.join(base, "root")
        s = isthmus.Store(root, durability="relaxed")
        s.create_bucket("perm")
        s.put_object("perm", "secret", b"root only")
        s.put_object("perm", "open", b"for everyone")
        os.chmod(os.path.join(root, "perm", "secret"), 0o600)
        os.chmod(os.path.join(root, "perm", "open"), 0o644)
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child becomes nobody and reports what it could do
            results = {}
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)

                def attempt(name, call):
                    try:
                        results[name] = ["ok", call()]
                    except isthmus.IsthmusError as e:
                        results[name] = ["error", e.args[0]]

                store = isthmus.Store(root, durability="relaxed")
                attempt("get open", lambda: store.get_object("perm", "open").decode())
                attempt("get secret", lambda: store.get_object("perm", "secret").decode())
                attempt("put", lambda: store.put_object("perm", "by-nobody", b"x")["size"])
                attempt("delete secret", lambda: store.delete_object("perm", "secret"))
            finally:
                os.write(writer, json.dumps(results).encode())
                os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as pipe:
            results = json.loads(pipe.read())
        os.waitpid(pid, 0)
        assert results["get open"] == ["ok", "for everyone"]
        assert results["get secret"] == ["error", "AccessDenied"]
        assert results["put"] == ["error", "AccessDenied"]
        assert results["delete secret"] == ["error", "AccessDenied"]
        assert sorted(os.listdir(os.path.join(root, "perm"))) == [".isthmus", "open", "secret"]
        assert s.get_object("perm", "secret") == b"root only"
    finally:
        shutil.rmtree(base)
