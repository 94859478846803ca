"""Object tagging: the x-amz-tagging header, Put/Get/DeleteObjectTagging, and copies."""

import pytest
from botocore.exceptions import ClientError


def tags_of(s3, bucket, key):
    return {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}


def test_tagging_round_trip(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="project=climate%20model&stage=raw")
    assert tags_of(s3, bucket, "t") == {"project": "climate model", "stage": "raw"}
    assert s3.get_object(Bucket=bucket, Key="t")["TagCount"] == 2
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [{"Key": "stage", "Value": "processed"}]})
    assert tags_of(s3, bucket, "t") == {"stage": "processed"}
    # Tags live with the metadata: content and headers are untouched.
    assert s3.get_object(Bucket=bucket, Key="t")["Body"].read() == b"x"
    s3.delete_object_tagging(Bucket=bucket, Key="t")
    assert tags_of(s3, bucket, "t") == {}
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="missing")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"


def test_tag_limits(s3, bucket):
    s3.put_object(Bucket=bucket, Key="lim", Body=b"x")
    too_many = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]}
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=bucket, Key="lim", Tagging=too_many)
    assert e.value.response["Error"]["Code"] == "InvalidTag"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="lim2", Body=b"x", Tagging="k=" + "v" * 257)
    assert e.value.response["Error"]["Code"] == "InvalidTag"


def test_copy_keeps_or_replaces_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"x", Tagging="a=1")
    s3.copy_object(Bucket=bucket, Key="kept", CopySource={"Bucket": bucket, "Key": "src"})
    assert tags_of(s3, bucket, "kept") == {"a": "1"}
    s3.copy_object(Bucket=bucket, Key="replaced", CopySource={"Bucket": bucket, "Key": "src"}, TaggingDirective="REPLACE", Tagging="b=2")
    assert tags_of(s3, bucket, "replaced") == {"b": "2"}
    s3.copy_object(Bucket=bucket, Key="meta-replaced", CopySource={"Bucket": bucket, "Key": "src"}, MetadataDirective="REPLACE", ContentType="x/y")
    assert tags_of(s3, bucket, "meta-replaced") == {"a": "1"}


def test_multipart_upload_tags(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mpt", Tagging="kind=mp")["UploadId"]
    e = s3.upload_part(Bucket=bucket, Key="mpt", UploadId=uid, PartNumber=1, Body=b"data")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="mpt", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    assert tags_of(s3, bucket, "mpt") == {"kind": "mp"}
