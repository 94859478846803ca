"""Erasure-coded pools through the real gateway: a bucket placed in a 4+2 pool over six drive
directories by LocationConstraint, objects of every shape read byte-exact (also with two drives
gone), m + 1 drives lost is a clear 503, `isthmus heal` rebuilds replaced drives, kill -9 during
writes leaves only whole objects, and a slow drive is reported and read around."""

import base64
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import boto3.s3.transfer
import botocore.exceptions
import pytest

from conftest import ACCESS_KEY, SECRET_KEY, Server, binary, make_client

BUCKET = "ec-bucket"


def body(key: str, version: int, size: int) -> bytes:
    """Bytes that say which write made them: a header, then bytes derived from it."""
    header = f"{key}:{version}:{size}:".encode()
    seed = hashlib.sha256(header).digest()
    return (header + seed * (size // 32 + 1))[:size]


def check_body(key: str, data: bytes):
    header = data.split(b":", 3)
    assert len(header) == 4, f"{key}: not written by this test"
    name, version, size = header[0].decode(), int(header[1]), int(header[2])
    assert name == key and data == body(key, version, size), f"{key}: torn or wrong bytes"


def write_pools(root, drives_dir):
    (root / ".isthmus").mkdir(parents=True, exist_ok=True)
    drives = ", ".join(f'"{drives_dir / f"d{i}"}"' for i in range(6))
    (root / ".isthmus" / "pools.toml").write_text(
        f'[[pool]]\nname = "ec"\nkind = "erasure"\ndrives = [{drives}]\ndata = 4\nparity = 2\nblock_size = "64KiB"\n'
    )
    return [drives_dir / f"d{i}" for i in range(6)]


@pytest.fixture
def pool(tmp_path):
    root = tmp_path / "data"
    drives = write_pools(root, tmp_path / "drives")
    servers = []

    def start(**env):
        srv = Server(root, env=env)
        servers.append(srv)
        return srv

    yield root, drives, start
    for srv in servers:
        srv.stop()


def cli(*args, check=True):
    result = subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_an_erasure_bucket_serves_every_object_shape(pool):
    root, drives, start = pool
    s3 = make_client(start().endpoint)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
    s3.create_bucket(Bucket="plain")
    assert s3.get_bucket_location(Bucket=BUCKET)["LocationConstraint"] == "ec"
    objects = {f"k/{size}": body(f"k/{size}", 1, size) for size in [0, 1, 4096, 16384, 16385, 65536, 300_001]}
    for key, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=data, Metadata={"size": str(len(data))})
    # A multipart upload through boto3's transfer manager (5 MiB parts).
    big = body("big", 1, 12 * 1024 * 1024 + 5)
    config = boto3.s3.transfer.TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    s3.upload_fileobj(__import__("io").BytesIO(big), BUCKET, "big", Config=config)
    objects["big"] = big
    for key, data in objects.items():
        got = s3.get_object(Bucket=BUCKET, Key=key)
        assert got["Body"].read() == data, key
        assert got["Metadata"].get("size", str(len(data))) == str(len(data))
    assert s3.get_object(Bucket=BUCKET, Key="big", Range="bytes=5242000-5243000")["Body"].read() == big[5242000:5243001]
    assert s3.get_object(Bucket=BUCKET, Key="big", PartNumber=2)["Body"].read() == big[5 << 20 : 10 << 20]
    listed = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert {o["Key"]: o["Size"] for o in listed} == {k: len(v) for k, v in objects.items()}
    # Not plain files: no drive holds an object's bytes under its key.
    for drive in drives:
        held = drive / BUCKET / "k" / "300001"
        assert held.exists() and held.read_bytes() != objects["k/300001"]
    assert not (root / BUCKET).exists()
    # Copies between an erasure pool and a posix pool.
    s3.copy_object(Bucket="plain", Key="copy", CopySource={"Bucket": BUCKET, "Key": "k/300001"})
    assert (root / "plain" / "copy").read_bytes() == objects["k/300001"]
    s3.copy_object(Bucket=BUCKET, Key="back", CopySource={"Bucket": "plain", "Key": "copy"})
    assert s3.get_object(Bucket=BUCKET, Key="back")["Body"].read() == objects["k/300001"]
    # Versioning is refused here, with the reason.
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    assert refused.value.response["Error"]["Code"] == "NotImplemented"
    assert "posix pool" in refused.value.response["Error"]["Message"]


def test_lost_drives_heal_and_m_plus_one(pool):
    root, drives, start = pool
    srv = start()
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
    objects = {f"o{i}": body(f"o{i}", 1, 50_000 + i * 70_001) for i in range(8)}
    for key, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    # Two drives gone while the gateway runs: every object still reads byte-exact.
    shutil.rmtree(drives[0])
    shutil.rmtree(drives[3])
    time.sleep(1.2)
    for key, data in objects.items():
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    # Replaced with empty drives: heal rebuilds them (the gateway keeps running).
    drives[0].mkdir()
    drives[3].mkdir()
    healed = cli("heal", "ec", "--root", str(root))
    assert "shards rebuilt" in healed.stdout and "rebuilding" not in healed.stdout, healed.stdout
    status = cli("pool", "status", "ec", "--root", str(root)).stdout
    assert status.count("online") == 6, status
    # Now two other drives may go; then a third is one too many: 503, never wrong bytes.
    shutil.rmtree(drives[1])
    shutil.rmtree(drives[5])
    time.sleep(1.2)
    for key, data in objects.items():
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    shutil.rmtree(drives[2])
    time.sleep(1.2)
    with pytest.raises(botocore.exceptions.ClientError) as lost:
        s3.get_object(Bucket=BUCKET, Key="o3")
    assert lost.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert lost.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503


def test_kill_during_erasure_writes_leaves_whole_objects(pool):
    root, drives, start = pool
    srv = start()
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
    stop = threading.Event()

    def writer(n):
        rng = random.Random(n)
        version = 0
        while not stop.is_set():
            version += 1
            key = f"w{n}/{rng.randrange(4)}"
            try:
                s3.put_object(Bucket=BUCKET, Key=key, Body=body(key, version, rng.choice([3000, 200_000, 1_500_000])))
            except Exception:
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    time.sleep(2.5)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    stop.set()
    for t in threads:
        t.join()
    s3 = make_client(start().endpoint)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert keys, "some writes completed before the kill"
    for key in keys:
        check_body(key, s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    report = cli("heal", "ec", "--root", str(root))
    assert "unreadable" not in report.stderr


def test_a_slow_drive_is_reported_and_read_around(pool):
    root, drives, start = pool
    srv = start(ISTHMUS_EC_SLOW_DRIVES=f"{drives[2]}=150")
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
    objects = {f"s{i}": body(f"s{i}", 1, 200_000) for i in range(12)}
    for key, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    # Reads go around the drive at once; the log names it once it stayed slow for 2 s.
    deadline = time.monotonic() + 30
    while "much slower than its peers" not in srv.output() and time.monotonic() < deadline:
        for key, data in objects.items():
            assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    log = srv.output()
    assert "much slower than its peers" in log and str(drives[2]) in log, log[-2000:]
    reported = [line for line in log.splitlines() if "much slower than its peers" in line]
    assert len(reported) == 1 and str(drives[2]) in reported[0], reported
    assert os.environ.get("ISTHMUS_EC_SLOW_DRIVES") is None


def test_writes_acknowledged_around_a_stalled_drive_survive_a_kill(pool):
    """A drive stalls (every I/O on it waits a minute): PUTs are acknowledged by the write
    quorum without it, the server is killed with SIGKILL right after, and every acknowledged
    object reads back byte-exact after a restart; `isthmus heal` rebuilds what the stalled drive
    never got, after which the two other drives may be lost."""
    root, drives, start = pool
    srv = start(ISTHMUS_EC_SLOW_DRIVES=f"{drives[4]}=60000")
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
    objects = {f"a{i}": body(f"a{i}", 1, 70_000 + i * 250_001) for i in range(6)}
    acknowledged = []
    started = time.monotonic()
    for key, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        acknowledged.append(key)
    # Not a timing assertion on speed: waiting for the stalled drive would take minutes.
    assert time.monotonic() - started < 45, "the writes waited for the stalled drive"
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    s3 = make_client(start().endpoint)
    for key in acknowledged:
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == objects[key], key
    healed = cli("heal", "ec", "--root", str(root))
    rebuilt = re.search(r"(\d+) shards rebuilt", healed.stdout)
    assert rebuilt and int(rebuilt.group(1)) > 0, healed.stdout
    shutil.rmtree(drives[0])
    shutil.rmtree(drives[1])
    time.sleep(1.2)
    for key in acknowledged:
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == objects[key], key


def test_an_etag_unique_pool_still_verifies_content_md5(tmp_path):
    """`etag = "unique"` skips the MD5 of each write, but never a digest the client declared:
    a wrong Content-MD5 is refused (nothing stored), a right one is verified and becomes the
    ETag; other ETags are marked as no MD5; the aws CLI's multipart upload completes."""
    root = tmp_path / "data"
    write_pools(root, tmp_path / "drives")
    table = root / ".isthmus" / "pools.toml"
    table.write_text(table.read_text() + 'etag = "unique"\n')
    srv = Server(root)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
        data = body("u", 1, 700_000)
        digest = hashlib.md5(data).digest()
        wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            s3.put_object(Bucket=BUCKET, Key="u", Body=data, ContentMD5=wrong)
        assert refused.value.response["Error"]["Code"] == "BadDigest"
        with pytest.raises(botocore.exceptions.ClientError):
            s3.head_object(Bucket=BUCKET, Key="u")
        etag = s3.put_object(Bucket=BUCKET, Key="u", Body=data, ContentMD5=base64.b64encode(digest).decode())["ETag"]
        assert etag.strip('"') == digest.hex()
        plain = s3.put_object(Bucket=BUCKET, Key="p", Body=data)["ETag"].strip('"')
        assert plain.endswith("-1") and plain != digest.hex()
        assert s3.get_object(Bucket=BUCKET, Key="p")["Body"].read() == data
        big = tmp_path / "big"
        big.write_bytes(body("big", 1, 12 << 20))
        aws = shutil.which("aws")
        assert aws, "the aws CLI is not installed: run the README's test command, which installs it"
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "aws-config")}
        done = subprocess.run([aws, "--endpoint-url", srv.endpoint, "s3", "cp", str(big), f"s3://{BUCKET}/big"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        head = s3.head_object(Bucket=BUCKET, Key="big")
        assert head["ETag"].strip('"').endswith("-2") and head["ContentLength"] == 12 << 20
        assert s3.get_object(Bucket=BUCKET, Key="big")["Body"].read() == big.read_bytes()
    finally:
        srv.stop()
