"""Bucket operations through boto3 against the real server."""

import pytest
from botocore.exceptions import ClientError


def error_code(excinfo):
    return excinfo.value.response["Error"]["Code"]


@pytest.mark.posix_only
def test_bucket_lifecycle(s3, server):
    s3.create_bucket(Bucket="alpha")
    s3.create_bucket(Bucket="beta.2")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert names == ["alpha", "beta.2"]
    assert (server.root / "alpha").is_dir()
    s3.head_bucket(Bucket="alpha")
    assert s3.get_bucket_location(Bucket="alpha").get("LocationConstraint") in (None, "")
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="alpha")
    assert error_code(e) == "BucketAlreadyOwnedByYou"
    s3.put_object(Bucket="alpha", Key="k", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="alpha")
    assert error_code(e) == "BucketNotEmpty"
    s3.delete_object(Bucket="alpha", Key="k")
    s3.delete_bucket(Bucket="alpha")
    assert not (server.root / "alpha").exists()
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="alpha")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


@pytest.mark.parametrize("name", ["ab", "UPPER", "under_score", "-dash", "a..b", "192.168.0.1"])
def test_invalid_bucket_names_are_refused(s3, server, name):
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=name)
    assert error_code(e) == "InvalidBucketName"
    assert not (server.root / name).exists()


def test_posix_directories_are_buckets(s3, server):
    (server.root / "from-posix").mkdir()
    (server.root / "from-posix" / "file.dat").write_bytes(b"abc")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "from-posix" in names
    assert s3.get_object(Bucket="from-posix", Key="file.dat")["Body"].read() == b"abc"


def test_missing_bucket_errors(s3):
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="nope-nope", Key="x")
    assert error_code(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="nope-nope")
    assert error_code(e) == "NoSuchBucket"
