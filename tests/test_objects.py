"""Object operations: put/get/head/delete/copy, metadata, ranges, conditions, streaming."""

import datetime
import hashlib
import os
import threading

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import staged_files


def code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def status(excinfo):
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.mark.posix_only
def test_put_get_round_trip_with_headers_and_metadata(s3, bucket, server):
    body = b"temperature,pressure\n1.0,2.0\n"
    expires = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    put = s3.put_object(
        Bucket=bucket,
        Key="runs/42/table.csv",
        Body=body,
        ContentType="text/csv",
        ContentEncoding="identity",
        ContentDisposition='attachment; filename="table.csv"',
        ContentLanguage="en",
        CacheControl="max-age=60",
        Expires=expires,
        Metadata={"experiment": "run-42", "Operator": "ada"},
    )
    assert put["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    # The object is a plain file with exactly those bytes.
    assert (server.root / bucket / "runs/42/table.csv").read_bytes() == body
    got = s3.get_object(Bucket=bucket, Key="runs/42/table.csv")
    assert got["Body"].read() == body
    assert got["ETag"] == put["ETag"]
    assert got["ContentType"] == "text/csv"
    assert got["ContentEncoding"] == "identity"
    assert got["ContentDisposition"] == 'attachment; filename="table.csv"'
    assert got["ContentLanguage"] == "en"
    assert got["CacheControl"] == "max-age=60"
    assert got["Expires"] == expires
    assert got["Metadata"] == {"experiment": "run-42", "operator": "ada"}
    head = s3.head_object(Bucket=bucket, Key="runs/42/table.csv")
    assert head["ContentLength"] == len(body)
    assert head["Metadata"] == got["Metadata"]
    assert head["ETag"] == put["ETag"]


def test_empty_object_and_missing_key(s3, bucket):
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    got = s3.get_object(Bucket=bucket, Key="empty")
    assert got["Body"].read() == b""
    assert got["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert code(e) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="missing")
    assert status(e) == 404


def test_ranges(s3, bucket):
    s3.put_object(Bucket=bucket, Key="r", Body=b"0123456789")
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=2-4")["Body"].read() == b"234"
    got = s3.get_object(Bucket=bucket, Key="r", Range="bytes=-3")
    assert got["Body"].read() == b"789"
    assert got["ContentRange"] == "bytes 7-9/10"
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=8-")["Body"].read() == b"89"
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=5-100")["Body"].read() == b"56789"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=10-")
    assert code(e) == "InvalidRange"
    assert status(e) == 416


def test_conditional_reads(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="c", Body=b"payload")["ETag"]
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"payload"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert status(e) == 412
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert status(e) == 304
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=future)
    assert status(e) == 304
    assert s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)["Body"].read() == b"payload"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert status(e) == 412
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert status(e) == 412
    # AWS's order when both of a pair are given: If-Match over If-Unmodified-Since (200),
    # If-None-Match over If-Modified-Since (304 when it matches, 200 when it does not).
    for call in (s3.get_object, s3.head_object):
        assert call(Bucket=bucket, Key="c", IfMatch=etag, IfUnmodifiedSince=past)["ResponseMetadata"]["HTTPStatusCode"] == 200
        with pytest.raises(ClientError) as e:
            call(Bucket=bucket, Key="c", IfNoneMatch=etag, IfModifiedSince=past)
        assert status(e) == 304
        assert call(Bucket=bucket, Key="c", IfNoneMatch='"other"', IfModifiedSince=future)["ResponseMetadata"]["HTTPStatusCode"] == 200
        with pytest.raises(ClientError) as e:
            call(Bucket=bucket, Key="c", IfMatch='"other"', IfUnmodifiedSince=future)
        assert status(e) == 412
    # A 304 carries the validators a cache revalidates with, and no body.
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "c"})
    answer = requests.get(url, headers={"If-None-Match": etag}, timeout=10)
    assert answer.status_code == 304 and answer.headers["ETag"] == etag and answer.headers["Last-Modified"]
    assert answer.content == b"" and answer.headers.get("Content-Length", "0") == "0"
    answer = requests.get(url, headers={"If-Modified-Since": answer.headers["Last-Modified"]}, timeout=10)
    assert answer.status_code == 304 and answer.headers["ETag"] == etag


def test_response_header_overrides(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", ContentType="text/plain")
    got = s3.get_object(
        Bucket=bucket,
        Key="o",
        ResponseContentType="application/json",
        ResponseContentDisposition="inline",
        ResponseCacheControl="no-cache",
        ResponseContentEncoding="gzip",
        ResponseContentLanguage="fr",
    )
    assert got["ContentType"] == "application/json"
    assert got["ContentDisposition"] == "inline"
    assert got["CacheControl"] == "no-cache"
    assert got["ContentEncoding"] == "gzip"
    assert got["ContentLanguage"] == "fr"


def test_delete_and_prefix_cleanup(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="a/b/c", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="a/b/c")
    assert not (server.root / bucket / "a").exists()
    # Deleting a missing key succeeds, as in S3.
    s3.delete_object(Bucket=bucket, Key="never")


def test_copy_object(s3, bucket):
    s3.create_bucket(Bucket="other")
    etag = s3.put_object(Bucket=bucket, Key="src", Body=b"content", ContentType="a/b", Metadata={"k": "v"})["ETag"]
    result = s3.copy_object(Bucket="other", Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert result["CopyObjectResult"]["ETag"] == etag
    got = s3.get_object(Bucket="other", Key="dst")
    assert got["Body"].read() == b"content"
    assert got["ContentType"] == "a/b"
    assert got["Metadata"] == {"k": "v"}
    s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"}, MetadataDirective="REPLACE", ContentType="c/d")
    assert s3.head_object(Bucket=bucket, Key="src")["ContentType"] == "c/d"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "src"}, CopySourceIfMatch='"nope"')
    assert status(e) == 412
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "missing"})
    assert code(e) == "NoSuchKey"


def test_large_object_streams_with_bounded_memory(s3, bucket, server, tmp_path):
    size = 200 * 1024 * 1024
    path = tmp_path / "big.bin"
    digest = hashlib.md5()
    with open(path, "wb") as f:
        chunk = os.urandom(1024 * 1024)
        for _ in range(size // len(chunk)):
            f.write(chunk)
            digest.update(chunk)
    with open(path, "rb") as f:
        put = s3.put_object(Bucket=bucket, Key="big.bin", Body=f)
    assert put["ETag"] == '"%s"' % digest.hexdigest()
    got = s3.get_object(Bucket=bucket, Key="big.bin")
    read_digest = hashlib.md5()
    for part in got["Body"].iter_chunks(1024 * 1024):
        read_digest.update(part)
    assert read_digest.hexdigest() == digest.hexdigest()
    # 200 MiB passed through both ways; the server never held the object in memory.
    assert server.rss_peak_kib() < 120 * 1024, f"peak RSS {server.rss_peak_kib()} KiB"


@pytest.mark.posix_only
def test_concurrent_writers_leave_one_whole_version(s3, bucket, server):
    payloads = [bytes([65 + i]) * (3 * 1024 * 1024 + i) for i in range(4)]
    errors = []

    def writer(p):
        try:
            for _ in range(3):
                s3.put_object(Bucket=bucket, Key="contended", Body=p)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = s3.get_object(Bucket=bucket, Key="contended")
    body = got["Body"].read()
    assert body in payloads
    assert got["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    assert staged_files(server.root / bucket, server.proc.pid) == []


def test_presigned_urls(s3, bucket):
    s3.put_object(Bucket=bucket, Key="shared.txt", Body=b"shared data")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "shared.txt"}, ExpiresIn=300)
    r = requests.get(url, timeout=10)
    assert r.status_code == 200 and r.content == b"shared data"
    tampered = url.replace("shared.txt", "shared.txT")
    assert requests.get(tampered, timeout=10).status_code == 403
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "up.txt"}, ExpiresIn=300)
    assert requests.put(put_url, data=b"uploaded", timeout=10).status_code == 200
    assert s3.get_object(Bucket=bucket, Key="up.txt")["Body"].read() == b"uploaded"


def test_requests_carry_a_request_id(s3, bucket):
    resp = s3.put_object(Bucket=bucket, Key="id", Body=b"x")
    assert len(resp["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]) == 16


def test_json_logs_carry_request_ids_and_no_secrets(tmp_path):
    import json

    from conftest import SECRET_KEY, Server, make_client

    srv = Server(tmp_path / "data", extra_args=["--log-format", "json", "--log-level", "debug"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="logged")
        rid = s3.put_object(Bucket="logged", Key="k", Body=b"x")["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        lines = [json.loads(l) for l in srv.output().splitlines() if l.startswith("{")]
        done = [l for l in lines if l.get("fields", {}).get("message") == "done" and l.get("span", {}).get("id") == rid]
        assert done and done[0]["fields"]["status"] == 200 and done[0]["span"]["method"] == "PUT"
        assert SECRET_KEY not in srv.output()
    finally:
        srv.stop()


def test_conditional_puts_and_racing_writers(s3, bucket):
    s3.put_object(Bucket=bucket, Key="once", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="once", Body=b"second", IfNoneMatch="*")
    assert status(e) == 412
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="never-existed", Body=b"x", IfMatch='"abc"')
    # S3 documents 404 NoSuchKey for If-Match on a missing object, 412 for a mismatch.
    assert status(e) == 404 and e.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="once", Body=b"x", IfMatch='"abc"')
    assert status(e) == 412
    # Read-modify-write with If-Match from racing threads: no update is lost.
    s3.put_object(Bucket=bucket, Key="counter", Body=b"0")
    successes = []

    def worker():
        for _ in range(15):
            got = s3.get_object(Bucket=bucket, Key="counter")
            value = int(got["Body"].read())
            try:
                s3.put_object(Bucket=bucket, Key="counter", Body=str(value + 1).encode(), IfMatch=got["ETag"])
                successes.append(1)
            except ClientError as exc:
                assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 412

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(s3.get_object(Bucket=bucket, Key="counter")["Body"].read()) == len(successes) > 0
