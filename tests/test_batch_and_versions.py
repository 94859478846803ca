"""DeleteObjects, and GetBucketVersioning and ListObjectVersions of a bucket never versioned
(every object is its null version; versioned buckets: test_versioning.py)."""

import pytest
from botocore.exceptions import ClientError


def test_delete_objects_reports_per_key(s3, bucket, server):
    keys = [f"batch/k{i}" for i in range(25)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys] + [{"Key": "missing"}, {"Key": "../escape"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(keys + ["missing"])
    assert [(e["Key"], e["Code"]) for e in r["Errors"]] == [("../escape", "InvalidArgument")]
    assert not (server.root / bucket / "batch").exists()
    s3.put_object(Bucket=bucket, Key="q", Body=b"x")
    quiet = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "q"}], "Quiet": True})
    assert quiet.get("Deleted", []) == [] and quiet.get("Errors", []) == []
    with pytest.raises(ClientError):
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"k{i}"} for i in range(1001)]})


def test_aws_cli_recursive_rm(aws, server, tmp_path):
    aws("s3", "mb", "s3://rm-bucket")
    src = tmp_path / "tree"
    (src / "a" / "b").mkdir(parents=True)
    for i in range(30):
        (src / "a" / "b" / f"f{i}").write_bytes(b"%d" % i)
    aws("s3", "sync", str(src), "s3://rm-bucket/tree")
    aws("s3", "rm", "--recursive", "s3://rm-bucket/tree")
    assert aws("s3", "ls", "--recursive", "s3://rm-bucket").stdout.strip() == ""
    assert not (server.root / "rm-bucket" / "tree").exists()


def test_versioning_reports_unversioned_and_null_versions(s3, bucket):
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    for k in ["v/a", "v/b", "w"]:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = s3.list_object_versions(Bucket=bucket, Prefix="v/")
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r["Versions"]] == [("v/a", "null", True), ("v/b", "null", True)]
    paged = s3.list_object_versions(Bucket=bucket, MaxKeys=1)
    assert paged["IsTruncated"] and paged["NextKeyMarker"] == "v/a"
    rest = s3.list_object_versions(Bucket=bucket, KeyMarker="v/a")
    assert [v["Key"] for v in rest["Versions"]] == ["v/b", "w"]
    assert s3.get_object(Bucket=bucket, Key="w", VersionId="null")["Body"].read() == b"w"


def test_other_versions_do_not_exist(s3, bucket):
    s3.put_object(Bucket=bucket, Key="only", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="only", VersionId="0123456789abcdef01234567")
    assert e.value.response["Error"]["Code"] == "NoSuchVersion"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="only", VersionId="3HL4kqtJlcpXroDTDmJ")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"
