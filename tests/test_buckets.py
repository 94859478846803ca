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
    s3.put_object(Bucket="alpha", Key="k", Body=b"x")
    # Re-created by its owner: S3's us-east-1 answers 200 and changes nothing.
    s3.create_bucket(Bucket="alpha")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="alpha")["Contents"]] == ["k"]
    # Asked for another region: 409 BucketAlreadyOwnedByYou.
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="alpha", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    assert error_code(e) in ("BucketAlreadyOwnedByYou", "InvalidLocationConstraint")
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


@pytest.mark.posix_only
def test_recreating_an_own_bucket_never_resets_its_acl_or_contents(s3, server):
    """S3's us-east-1 (the location of a gateway without pools): the owner's CreateBucket of an
    existing bucket answers 200 when it asks for the bucket's own ACL, 409 BucketAlreadyExists
    when it asks for another, and never changes the ACL or the objects (the S3 conformance
    suite's recreate tests)."""
    s3.create_bucket(Bucket="shared", ACL="public-read")
    s3.put_object(Bucket="shared", Key="k", Body=b"x")
    s3.create_bucket(Bucket="shared", ACL="public-read")
    for asked in ({}, {"ACL": "private"}, {"ACL": "public-read-write"}):
        with pytest.raises(ClientError) as e:
            s3.create_bucket(Bucket="shared", **asked)
        assert error_code(e) == "BucketAlreadyExists"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    grants = s3.get_bucket_acl(Bucket="shared")["Grants"]
    assert any(g["Grantee"].get("URI", "").endswith("AllUsers") and g["Permission"] == "READ" for g in grants)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="shared")["Contents"]] == ["k"]
    s3.create_bucket(Bucket="private-one")
    s3.create_bucket(Bucket="private-one")
    s3.create_bucket(Bucket="private-one", ACL="private")
