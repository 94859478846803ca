"""Other clients: streaming signed payloads, s3cmd (default region "US") and rclone."""

import filecmp
import os
import shutil
import subprocess

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, make_client
from sigv4 import streaming_put


def test_streaming_signed_payload(server, s3, bucket):
    data = os.urandom(300 * 1024 + 17)
    url, headers, body = streaming_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, "streamed.bin", data)
    r = requests.put(url, headers=headers, data=body, timeout=30)
    assert r.status_code == 200, r.text
    assert s3.get_object(Bucket=bucket, Key="streamed.bin")["Body"].read() == data


def test_streaming_signed_payload_with_a_signed_checksum_trailer(server, s3, bucket):
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, as the Java and Go SDKs stream an upload over
    plain HTTP: signed chunks, then a CRC32 trailer with its own signature. The checksum is
    verified and kept; a wrong one, or a trailer changed after signing, stores nothing."""
    import base64
    import zlib

    data = os.urandom(200 * 1024 + 5)
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    url, headers, body = streaming_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, "trailed.bin", data,
                                       trailer=("x-amz-checksum-crc32", crc))
    r = requests.put(url, headers=headers, data=body, timeout=30)
    assert r.status_code == 200, r.text
    assert s3.get_object(Bucket=bucket, Key="trailed.bin")["Body"].read() == data
    assert s3.head_object(Bucket=bucket, Key="trailed.bin", ChecksumMode="ENABLED")["ChecksumCRC32"] == crc
    wrong = base64.b64encode(zlib.crc32(b"other").to_bytes(4, "big")).decode()
    for key, trailer, tamper, status, code in (
        ("wrong.bin", ("x-amz-checksum-crc32", wrong), False, 400, "BadDigest"),
        ("tampered.bin", ("x-amz-checksum-crc32", crc), True, 403, "SignatureDoesNotMatch"),
    ):
        url, headers, body = streaming_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, key, data, trailer=trailer,
                                           tamper_trailer=tamper)
        r = requests.put(url, headers=headers, data=body, timeout=30)
        assert (r.status_code, f"<Code>{code}</Code>" in r.text) == (status, True), (key, r.text)
        with pytest.raises(ClientError):
            s3.head_object(Bucket=bucket, Key=key)


def test_streaming_payload_with_a_bad_chunk_signature_stores_nothing(server, s3, bucket):
    data = os.urandom(200 * 1024)
    url, headers, body = streaming_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, "tampered.bin", data, tamper_chunk=2)
    r = requests.put(url, headers=headers, data=body, timeout=30)
    assert r.status_code == 403, r.text
    assert "SignatureDoesNotMatch" in r.text
    assert not (server.root / bucket / "tampered.bin").exists()
    tmp = server.root / bucket / ".isthmus" / "tmp"
    assert not tmp.exists() or list(tmp.iterdir()) == []


def make_tree(root):
    (root / "sub" / "deeper").mkdir(parents=True)
    for i, size in enumerate([0, 1, 4096, 100_000, 3 * 1024 * 1024]):
        (root / f"file{i}.bin").write_bytes(os.urandom(size))
    (root / "sub" / "notes.txt").write_text("notes\n")
    (root / "sub" / "deeper" / "big.dat").write_bytes(os.urandom(20 * 1024 * 1024))
    return root


def assert_same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    stack = [cmp]
    while stack:
        c = stack.pop()
        assert not c.left_only and not c.right_only and not c.diff_files, (c.left, c.left_only, c.right_only, c.diff_files)
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        assert not mismatch and not errors
        stack.extend(c.subdirs.values())


@pytest.mark.posix_only
def test_s3cmd_sync_round_trip_with_default_region(server, tmp_path):
    exe = shutil.which("s3cmd")
    if exe is None:
        pytest.fail("s3cmd is not installed: run the README's test command, which installs it")
    cfg = tmp_path / "s3cfg"
    host = server.endpoint.split("://")[1]
    # bucket_location is left at s3cmd's default ("US"): the gateway answers like AWS does for a
    # wrong region and s3cmd signs again for us-east-1.
    cfg.write_text(f"[default]\naccess_key = {ACCESS_KEY}\nsecret_key = {SECRET_KEY}\nhost_base = {host}\nhost_bucket = {host}\nuse_https = False\n")
    src = make_tree(tmp_path / "src")

    def run(*args):
        r = subprocess.run([exe, "-c", str(cfg), *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    run("mb", "s3://s3cmd-bucket")
    run("sync", str(src) + "/", "s3://s3cmd-bucket/tree/")
    assert_same_tree(src, server.root / "s3cmd-bucket" / "tree")
    run("sync", "s3://s3cmd-bucket/tree/", str(tmp_path / "back") + "/")
    assert_same_tree(src, tmp_path / "back")
    assert "tree/sub/notes.txt" in run("ls", "-r", "s3://s3cmd-bucket")


@pytest.mark.posix_only
def test_rclone_sync_round_trip(server, tmp_path):
    exe = shutil.which("rclone")
    if exe is None:
        pytest.fail("rclone is not installed: run the README's test command, which installs it")
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    env.update(
        {
            "RCLONE_CONFIG": str(tmp_path / "rclone.conf"),
            "RCLONE_CONFIG_ISTH_TYPE": "s3",
            "RCLONE_CONFIG_ISTH_PROVIDER": "Other",
            "RCLONE_CONFIG_ISTH_ACCESS_KEY_ID": ACCESS_KEY,
            "RCLONE_CONFIG_ISTH_SECRET_ACCESS_KEY": SECRET_KEY,
            "RCLONE_CONFIG_ISTH_ENDPOINT": server.endpoint,
        }
    )
    (tmp_path / "rclone.conf").write_text("")
    src = make_tree(tmp_path / "src")

    def run(*args):
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stderr

    run("mkdir", "isth:rclone-bucket")
    run("sync", str(src), "isth:rclone-bucket/tree")
    assert "0 differences found" in run("check", str(src), "isth:rclone-bucket/tree")
    assert_same_tree(src, server.root / "rclone-bucket" / "tree")
    run("sync", "isth:rclone-bucket/tree", str(tmp_path / "back"))
    assert_same_tree(src, tmp_path / "back")


@pytest.mark.posix_only
def test_virtual_hosted_style_with_a_domain(tmp_path):
    import hashlib

    from conftest import Server, make_client
    from sigv4 import signed_put

    srv = Server(tmp_path / "data", extra_args=["--domain", "s3.example.test"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="vhost")
        body = b"addressed by host name"
        url, headers = signed_put(srv.endpoint, ACCESS_KEY, SECRET_KEY, "vhost", "dir/obj", body, hashlib.sha256(body).hexdigest(), {}, virtual_host="s3.example.test")
        r = requests.put(url, headers=headers, data=body, timeout=10)
        assert r.status_code == 200, r.text
        assert (srv.root / "vhost" / "dir" / "obj").read_bytes() == body
        # Path style keeps working alongside.
        assert s3.get_object(Bucket="vhost", Key="dir/obj")["Body"].read() == body
    finally:
        srv.stop()


def test_boto3_with_signature_version_2_works_on_buckets_and_objects(server):
    """botocore's SigV2 (signature_version="s3") signs a path-style bucket request over
    `/bucket/` while it sends `/bucket`: bucket calls were refused with SignatureDoesNotMatch
    (object calls and presigned URLs worked). A wrong secret still fails either way."""
    v2 = make_client(server.endpoint, signature_version="s3")
    v2.create_bucket(Bucket="sigv2-bucket")
    v2.put_bucket_tagging(Bucket="sigv2-bucket", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert v2.get_bucket_tagging(Bucket="sigv2-bucket")["TagSet"] == [{"Key": "k", "Value": "v"}]
    v2.put_object(Bucket="sigv2-bucket", Key="a/b.txt", Body=b"signed with v2")
    assert [o["Key"] for o in v2.list_objects(Bucket="sigv2-bucket")["Contents"]] == ["a/b.txt"]
    assert v2.list_objects_v2(Bucket="sigv2-bucket", Prefix="a/")["KeyCount"] == 1
    v2.head_bucket(Bucket="sigv2-bucket")
    assert v2.get_object(Bucket="sigv2-bucket", Key="a/b.txt")["Body"].read() == b"signed with v2"
    wrong = make_client(server.endpoint, secret_key="not-the-secret-key", signature_version="s3")
    with pytest.raises(ClientError) as refused:
        wrong.list_objects(Bucket="sigv2-bucket")
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    v2.delete_object(Bucket="sigv2-bucket", Key="a/b.txt")
    v2.delete_bucket(Bucket="sigv2-bucket")
