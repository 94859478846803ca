"""Integrity: Content-MD5 and x-amz-checksum-* (headers and aws-chunked trailers) are verified
before an object becomes visible, stored, and returned with checksum mode."""

import base64
import hashlib
import os
import zlib

import pytest
import requests
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY
from sigv4 import signed_put, unsigned_trailer_put


def b64(raw):
    return base64.b64encode(raw).decode()


def crc32_b64(data):
    return b64(zlib.crc32(data).to_bytes(4, "big"))


def nothing_visible(server, bucket, key):
    tmp = server.root / bucket / ".isthmus" / "tmp"
    return not (server.root / bucket / key).exists() and (not tmp.exists() or list(tmp.iterdir()) == [])


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_checksums_are_stored_and_returned(s3, bucket, algorithm):
    data = os.urandom(100_000)
    put = s3.put_object(Bucket=bucket, Key=f"c-{algorithm}", Body=data, ChecksumAlgorithm=algorithm)
    field = f"Checksum{algorithm}"
    assert put[field]
    head = s3.head_object(Bucket=bucket, Key=f"c-{algorithm}", ChecksumMode="ENABLED")
    assert head[field] == put[field]
    got = s3.get_object(Bucket=bucket, Key=f"c-{algorithm}", ChecksumMode="ENABLED")
    assert got["Body"].read() == data  # botocore validates the returned checksum while reading
    assert got[field] == put[field]
    if algorithm == "SHA256":
        assert put[field] == b64(hashlib.sha256(data).digest())
    if algorithm == "CRC32":
        assert put[field] == crc32_b64(data)
    # Ranged reads carry no whole-object checksum.
    ranged = s3.get_object(Bucket=bucket, Key=f"c-{algorithm}", Range="bytes=0-9", ChecksumMode="ENABLED")
    assert field not in ranged


def test_content_md5_mismatch_is_refused(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="md5", Body=b"good", ContentMD5=b64(hashlib.md5(b"good").digest()))
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="md5-bad", Body=b"payload", ContentMD5=b64(hashlib.md5(b"other").digest()))
    assert e.value.response["Error"]["Code"] == "BadDigest"
    assert nothing_visible(server, bucket, "md5-bad")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="md5-bad", Body=b"payload", ContentMD5="not-base64")
    assert e.value.response["Error"]["Code"] == "InvalidDigest"
    # An empty Content-MD5 is no digest either (the protocol layer would drop it unseen).
    url, headers = signed_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, "md5-empty", b"payload",
                              hashlib.sha256(b"payload").hexdigest(), {"content-md5": ""})
    r = requests.put(url, headers=headers, data=b"payload", timeout=30)
    assert r.status_code == 400 and "<Code>InvalidDigest</Code>" in r.text, r.text
    assert nothing_visible(server, bucket, "md5-empty")


def test_checksum_header_mismatch_is_refused_and_keeps_the_old_object(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="keep", Body=b"old version")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="keep", Body=b"new version", ChecksumCRC32=crc32_b64(b"something else"))
    assert e.value.response["Error"]["Code"] == "BadDigest"
    assert s3.get_object(Bucket=bucket, Key="keep")["Body"].read() == b"old version"
    s3.put_object(Bucket=bucket, Key="keep", Body=b"new version", ChecksumCRC32=crc32_b64(b"new version"))
    assert s3.get_object(Bucket=bucket, Key="keep")["Body"].read() == b"new version"


def test_checksum_trailers(server, s3, bucket):
    data = os.urandom(50_000)
    url, headers, body = unsigned_trailer_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, "trailed", data, "x-amz-checksum-crc32", crc32_b64(data))
    r = requests.put(url, headers=headers, data=body, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["x-amz-checksum-crc32"] == crc32_b64(data)
    assert s3.get_object(Bucket=bucket, Key="trailed")["Body"].read() == data
    url, headers, body = unsigned_trailer_put(server.endpoint, ACCESS_KEY, SECRET_KEY, bucket, "trailed-bad", data, "x-amz-checksum-crc32", crc32_b64(b"x"))
    r = requests.put(url, headers=headers, data=body, timeout=30)
    assert r.status_code == 400 and "BadDigest" in r.text, r.text
    assert nothing_visible(server, bucket, "trailed-bad")


def test_multipart_checksums(s3, bucket, tmp_path):
    parts = [os.urandom(5 * 1024 * 1024), os.urandom(1000)]
    for algorithm, kind in [("CRC32", "FULL_OBJECT"), ("SHA256", "COMPOSITE"), ("CRC64NVME", "FULL_OBJECT")]:
        key = f"mp-{algorithm}"
        uid = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm, ChecksumType=kind)["UploadId"]
        done = []
        for n, data in enumerate(parts, 1):
            r = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n, Body=data, ChecksumAlgorithm=algorithm)
            done.append({"PartNumber": n, "ETag": r["ETag"], f"Checksum{algorithm}": r[f"Checksum{algorithm}"]})
        listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=uid)["Parts"]
        assert [p[f"Checksum{algorithm}"] for p in listed] == [d[f"Checksum{algorithm}"] for d in done]
        out = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid, MultipartUpload={"Parts": done})
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert head[f"Checksum{algorithm}"] == out[f"Checksum{algorithm}"]
        assert head["ChecksumType"] == kind
        if algorithm == "CRC32":
            assert out["ChecksumCRC32"] == crc32_b64(b"".join(parts))
        if kind == "COMPOSITE":
            assert out[f"Checksum{algorithm}"].endswith("-2")


def test_high_level_transfers_with_default_checksums(s3, bucket, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(12 * 1024 * 1024 + 5))
    config = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    s3.upload_file(str(src), bucket, "hl", Config=config)
    dst = tmp_path / "dst"
    s3.download_file(bucket, "hl", str(dst), Config=config)
    assert dst.read_bytes() == src.read_bytes()
