"""Multipart uploads through boto3 and the aws CLI's high-level transfers."""

import hashlib
import os
import threading

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

MiB = 1024 * 1024


def code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def multipart_etag(parts):
    return '"%s-%d"' % (hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest(), len(parts))


@pytest.mark.posix_only
def test_low_level_multipart(s3, bucket, server):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp/obj.bin", ContentType="application/x-test", Metadata={"run": "7"})
    uid = up["UploadId"]
    p1, p2 = os.urandom(5 * MiB), os.urandom(1234)
    e1 = s3.upload_part(Bucket=bucket, Key="mp/obj.bin", UploadId=uid, PartNumber=1, Body=p1)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp/obj.bin", UploadId=uid, PartNumber=2, Body=p2)["ETag"]
    parts = s3.list_parts(Bucket=bucket, Key="mp/obj.bin", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in parts] == [(1, 5 * MiB, e1), (2, 1234, e2)]
    uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [("mp/obj.bin", uid)]
    # Not an object until completed.
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="mp/obj.bin")
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp/obj.bin", UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    assert done["ETag"] == multipart_etag([p1, p2])
    got = s3.get_object(Bucket=bucket, Key="mp/obj.bin")
    assert got["Body"].read() == p1 + p2
    assert got["ETag"] == done["ETag"]
    assert got["ContentType"] == "application/x-test" and got["Metadata"] == {"run": "7"}
    assert (server.root / bucket / "mp/obj.bin").read_bytes() == p1 + p2
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_multipart_rules(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="rules")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="rules", UploadId=uid, PartNumber=1, Body=b"small")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="rules", UploadId=uid, PartNumber=2, Body=b"small too")["ETag"]

    def complete(parts):
        return s3.complete_multipart_upload(Bucket=bucket, Key="rules", UploadId=uid, MultipartUpload={"Parts": parts})

    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}])
    assert code(e) == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}])
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}])
    assert code(e) == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="rules", UploadId=uid, PartNumber=10001, Body=b"x")
    assert code(e) == "InvalidArgument"
    s3.abort_multipart_upload(Bucket=bucket, Key="rules", UploadId=uid)
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="rules", UploadId=uid, PartNumber=1, Body=b"x")
    assert code(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.abort_multipart_upload(Bucket=bucket, Key="rules", UploadId="0" * 32)
    assert code(e) == "NoSuchUpload"


def test_complete_and_abort_race(s3, bucket):
    for i in range(5):
        uid = s3.create_multipart_upload(Bucket=bucket, Key="race")["UploadId"]
        e1 = s3.upload_part(Bucket=bucket, Key="race", UploadId=uid, PartNumber=1, Body=b"payload")["ETag"]
        outcomes = {}

        def do(name, fn):
            try:
                fn()
                outcomes[name] = "ok"
            except ClientError as exc:
                outcomes[name] = exc.response["Error"]["Code"]

        t1 = threading.Thread(target=do, args=("complete", lambda: s3.complete_multipart_upload(Bucket=bucket, Key="race", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]})))
        t2 = threading.Thread(target=do, args=("abort", lambda: s3.abort_multipart_upload(Bucket=bucket, Key="race", UploadId=uid)))
        t1.start(), t2.start(), t1.join(), t2.join()
        assert sorted(outcomes.values()) == ["NoSuchUpload", "ok"], outcomes


def test_boto3_upload_and_download_file(s3, bucket, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(17 * MiB + 3))
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4)
    s3.upload_file(str(src), bucket, "transfer/src.bin", Config=config)
    head = s3.head_object(Bucket=bucket, Key="transfer/src.bin")
    assert head["ContentLength"] == src.stat().st_size
    assert head["ETag"].endswith('-4"')
    dst = tmp_path / "dst.bin"
    s3.download_file(bucket, "transfer/src.bin", str(dst), Config=config)
    assert dst.read_bytes() == src.read_bytes()


@pytest.mark.posix_only
def test_aws_cli_cp_over_multipart_threshold(aws, server, tmp_path):
    aws("s3", "mb", "s3://cli-mp")
    src = tmp_path / "twenty.bin"
    src.write_bytes(os.urandom(20 * MiB))
    aws("s3", "cp", str(src), "s3://cli-mp/twenty.bin")
    assert (server.root / "cli-mp/twenty.bin").read_bytes() == src.read_bytes()
    back = tmp_path / "back.bin"
    aws("s3", "cp", "s3://cli-mp/twenty.bin", str(back))
    assert back.read_bytes() == src.read_bytes()
    # No parts are left; the completed upload is remembered (a small record) for retried Completes.
    left = [p.name for p in (server.root / "cli-mp/.isthmus/uploads").iterdir()]
    assert len(left) == 1 and left[0].startswith("done."), left


def test_upload_part_copy_and_part_numbers(s3, bucket):
    source = os.urandom(6 * MiB + 100)
    s3.put_object(Bucket=bucket, Key="src.bin", Body=source)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="assembled.bin")["UploadId"]
    r1 = s3.upload_part_copy(Bucket=bucket, Key="assembled.bin", UploadId=uid, PartNumber=1,
                             CopySource={"Bucket": bucket, "Key": "src.bin"}, CopySourceRange=f"bytes=0-{5 * MiB - 1}")
    r2 = s3.upload_part_copy(Bucket=bucket, Key="assembled.bin", UploadId=uid, PartNumber=2,
                             CopySource={"Bucket": bucket, "Key": "src.bin"}, CopySourceRange=f"bytes={5 * MiB}-{len(source) - 1}")
    assert r1["CopyPartResult"]["ETag"] == '"%s"' % hashlib.md5(source[: 5 * MiB]).hexdigest()
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="assembled.bin", UploadId=uid, PartNumber=3,
                            CopySource={"Bucket": bucket, "Key": "src.bin"}, CopySourceIfMatch='"nope"')
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    s3.complete_multipart_upload(Bucket=bucket, Key="assembled.bin", UploadId=uid, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="assembled.bin")["Body"].read() == source
    part2 = s3.get_object(Bucket=bucket, Key="assembled.bin", PartNumber=2)
    assert part2["Body"].read() == source[5 * MiB:]
    assert part2["PartsCount"] == 2
    assert part2["ContentRange"] == f"bytes {5 * MiB}-{len(source) - 1}/{len(source)}"
    head = s3.head_object(Bucket=bucket, Key="assembled.bin", PartNumber=1)
    assert head["ContentLength"] == 5 * MiB and head["PartsCount"] == 2
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="assembled.bin", PartNumber=3)
    assert e.value.response["Error"]["Code"] == "InvalidPart"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="assembled.bin", PartNumber=3)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # A single-piece object is its own part 1.
    assert s3.get_object(Bucket=bucket, Key="src.bin", PartNumber=1)["Body"].read() == source


def test_conditional_complete(s3, bucket):
    s3.put_object(Bucket=bucket, Key="exists", Body=b"already here")
    uid = s3.create_multipart_upload(Bucket=bucket, Key="exists")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="exists", UploadId=uid, PartNumber=1, Body=b"new")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": e1}]}
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="exists", UploadId=uid, MultipartUpload=parts, IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"already here"
    # The upload survives the failed condition; with the right If-Match it completes.
    etag = s3.head_object(Bucket=bucket, Key="exists")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="exists", UploadId=uid, MultipartUpload=parts, IfMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"new"
    # If-Match on a key without an object: 404 NoSuchKey, and the upload stays.
    uid = s3.create_multipart_upload(Bucket=bucket, Key="absent")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="absent", UploadId=uid, PartNumber=1, Body=b"new")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": e1}]}
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="absent", UploadId=uid, MultipartUpload=parts, IfMatch=etag)
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    assert s3.list_parts(Bucket=bucket, Key="absent", UploadId=uid)["Parts"][0]["ETag"] == e1
