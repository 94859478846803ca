"""S3 behaviours real clients trip on (issue 12), each against the real server with boto3, the
aws CLI or plain HTTP."""

import socket

import pytest


def test_a_folder_object_is_listed_under_its_own_prefix(s3, aws):
    s3.create_bucket(Bucket="folders")
    for key in ("empty/dir/", "full/", "full/child.txt"):
        s3.put_object(Bucket="folders", Key=key, Body=b"")
    v2 = s3.list_objects_v2(Bucket="folders", Prefix="empty/dir/", Delimiter="/")
    assert [o["Key"] for o in v2["Contents"]] == ["empty/dir/"]
    v1 = s3.list_objects(Bucket="folders", Prefix="full/", Delimiter="/")
    assert [o["Key"] for o in v1["Contents"]] == ["full/", "full/child.txt"]
    versions = s3.list_object_versions(Bucket="folders", Prefix="full/", Delimiter="/")
    assert [v["Key"] for v in versions["Versions"]] == ["full/", "full/child.txt"]
    # The aws CLI removes a folder with what it lists under it; the bucket is then empty.
    aws("s3", "rm", "--recursive", "s3://folders/full/")
    aws("s3", "rm", "--recursive", "s3://folders/empty/")
    assert s3.list_objects_v2(Bucket="folders").get("KeyCount") == 0
    aws("s3", "rb", "s3://folders")
