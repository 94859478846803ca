"""Versioning end to end (issue 12): boto3 and the aws CLI against the real server, with the
current version as the plain file at the key's path and kept versions in the hidden area."""

import json
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import Server, make_client


def error_of(call):
    with pytest.raises(ClientError) as e:
        call()
    return e.value.response


def test_versions_and_delete_markers_with_boto3(s3, server):
    s3.create_bucket(Bucket="vers")
    s3.put_bucket_versioning(Bucket="vers", VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket="vers")["Status"] == "Enabled"
    v1 = s3.put_object(Bucket="vers", Key="run/out.csv", Body=b"first")["VersionId"]
    v2 = s3.put_object(Bucket="vers", Key="run/out.csv", Body=b"second")["VersionId"]
    assert v1 != v2 and "null" not in (v1, v2)
    # The current version is the plain file; kept versions are never files of the tree.
    assert (server.root / "vers" / "run" / "out.csv").read_bytes() == b"second"
    assert sorted(p.name for p in (server.root / "vers" / "run").iterdir()) == ["out.csv"]

    got = s3.get_object(Bucket="vers", Key="run/out.csv")
    assert (got["Body"].read(), got["VersionId"]) == (b"second", v2)
    assert s3.get_object(Bucket="vers", Key="run/out.csv", VersionId=v1)["Body"].read() == b"first"
    assert s3.head_object(Bucket="vers", Key="run/out.csv", VersionId=v1)["ContentLength"] == 5

    deleted = s3.delete_object(Bucket="vers", Key="run/out.csv")
    assert deleted["DeleteMarker"] is True
    marker = deleted["VersionId"]
    assert not (server.root / "vers" / "run").exists()
    missing = error_of(lambda: s3.get_object(Bucket="vers", Key="run/out.csv"))
    assert missing["Error"]["Code"] == "NoSuchKey"
    assert missing["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    assert missing["ResponseMetadata"]["HTTPHeaders"]["x-amz-version-id"] == marker
    on_marker = error_of(lambda: s3.get_object(Bucket="vers", Key="run/out.csv", VersionId=marker))
    assert (on_marker["Error"]["Code"], on_marker["ResponseMetadata"]["HTTPStatusCode"]) == ("MethodNotAllowed", 405)

    listed = s3.list_object_versions(Bucket="vers")
    assert [(v["VersionId"], v["IsLatest"]) for v in listed["Versions"]] == [(v2, False), (v1, False)]
    assert [(m["Key"], m["VersionId"], m["IsLatest"]) for m in listed["DeleteMarkers"]] == [("run/out.csv", marker, True)]
    assert s3.list_objects_v2(Bucket="vers")["KeyCount"] == 0

    # A copy from an old version; then the marker goes and the newest version is back as a file.
    copied = s3.copy_object(Bucket="vers", Key="restored.csv", CopySource={"Bucket": "vers", "Key": "run/out.csv", "VersionId": v1})
    assert copied["CopySourceVersionId"] == v1 and copied["VersionId"] not in (v1, v2)
    assert s3.get_object(Bucket="vers", Key="restored.csv")["Body"].read() == b"first"
    s3.delete_object(Bucket="vers", Key="run/out.csv", VersionId=marker)
    assert (server.root / "vers" / "run" / "out.csv").read_bytes() == b"second"

    # DeleteObjects removes named versions for good.
    result = s3.delete_objects(
        Bucket="vers", Delete={"Objects": [{"Key": "run/out.csv", "VersionId": v2}, {"Key": "run/out.csv", "VersionId": v1}]}
    )
    assert sorted(d["VersionId"] for d in result["Deleted"]) == sorted([v1, v2])
    assert "Errors" not in result or result["Errors"] == []
    assert error_of(lambda: s3.head_object(Bucket="vers", Key="run/out.csv"))["Error"]["Code"] == "404"


def test_version_ids_are_checked(s3):
    s3.create_bucket(Bucket="vers-ids")
    s3.put_bucket_versioning(Bucket="vers-ids", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="vers-ids", Key="k", Body=b"x")
    bad = error_of(lambda: s3.get_object(Bucket="vers-ids", Key="k", VersionId="3HL4kqtJlcpXroDTDmJ+"))
    assert (bad["Error"]["Code"], bad["ResponseMetadata"]["HTTPStatusCode"]) == ("InvalidArgument", 400)
    absent = error_of(lambda: s3.get_object(Bucket="vers-ids", Key="k", VersionId="0000000000000000deadbeef"))
    assert (absent["Error"]["Code"], absent["ResponseMetadata"]["HTTPStatusCode"]) == ("NoSuchVersion", 404)
    mfa = error_of(
        lambda: s3.put_bucket_versioning(Bucket="vers-ids", VersioningConfiguration={"Status": "Enabled", "MFADelete": "Enabled"})
    )
    assert mfa["Error"]["Code"] == "NotImplemented"


def test_suspended_versioning_and_the_aws_cli(aws, server):
    aws("s3", "mb", "s3://vers-cli")
    aws("s3api", "put-object", "--bucket", "vers-cli", "--key", "k", "--body", "/etc/hostname")
    aws("s3api", "put-bucket-versioning", "--bucket", "vers-cli", "--versioning-configuration", "Status=Enabled")
    kept = json.loads(aws("s3api", "put-object", "--bucket", "vers-cli", "--key", "k", "--body", "/etc/os-release").stdout)["VersionId"]
    aws("s3api", "put-bucket-versioning", "--bucket", "vers-cli", "--versioning-configuration", "Status=Suspended")
    status = json.loads(aws("s3api", "get-bucket-versioning", "--bucket", "vers-cli").stdout)
    assert status["Status"] == "Suspended"
    # In a suspended bucket a write replaces the null version (the pre-versioning object).
    aws("s3", "cp", "/etc/hostname", "s3://vers-cli/k")
    listed = json.loads(aws("s3api", "list-object-versions", "--bucket", "vers-cli").stdout)
    assert [(v["VersionId"], v["IsLatest"]) for v in listed["Versions"]] == [("null", True), (kept, False)]
    assert (server.root / "vers-cli" / "k").read_bytes() == open("/etc/hostname", "rb").read()
    # A bucket that keeps versions is not empty.
    aws("s3", "rm", "s3://vers-cli/k")
    refused = aws("s3api", "delete-bucket", "--bucket", "vers-cli", check=False)
    assert refused.returncode != 0 and "BucketNotEmpty" in refused.stderr


def test_versions_survive_a_restart_and_are_shared_by_gateways(s3, server, tmp_path):
    s3.create_bucket(Bucket="vers-shared")
    s3.put_bucket_versioning(Bucket="vers-shared", VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket="vers-shared", Key="k", Body=b"old")["VersionId"]
    s3.put_object(Bucket="vers-shared", Key="k", Body=b"new")
    other = Server(server.root)
    try:
        s3b = make_client(other.endpoint)
        assert s3b.get_bucket_versioning(Bucket="vers-shared")["Status"] == "Enabled"
        assert s3b.get_object(Bucket="vers-shared", Key="k", VersionId=old)["Body"].read() == b"old"
        assert len(s3b.list_object_versions(Bucket="vers-shared")["Versions"]) == 2
    finally:
        other.stop()


def test_anonymous_version_reads_follow_the_versions_acl_not_the_policy(s3, server):
    s3.create_bucket(Bucket="vers-public")
    s3.put_bucket_versioning(Bucket="vers-public", VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket="vers-public", Key="k", Body=b"old")["VersionId"]
    shared = s3.put_object(Bucket="vers-public", Key="k", Body=b"shared", ACL="public-read")["VersionId"]
    s3.put_object(Bucket="vers-public", Key="k", Body=b"new")
    policy = {
        "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::vers-public/*"}]
    }
    s3.put_bucket_policy(Bucket="vers-public", Policy=json.dumps(policy))

    def anonymous(query=""):
        try:
            with urllib.request.urlopen(f"{server.endpoint}/vers-public/k{query}") as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, b""

    assert anonymous() == (200, b"new")
    # The policy grants s3:GetObject, not s3:GetObjectVersion.
    assert anonymous(f"?versionId={old}")[0] == 403
    # A version's own ACL opens it; a bucket's public-read ACL shares the listing only (S3).
    assert anonymous(f"?versionId={shared}") == (200, b"shared")
    s3.delete_bucket_policy(Bucket="vers-public")
    s3.put_bucket_acl(Bucket="vers-public", ACL="public-read")
    assert anonymous(f"?versionId={old}")[0] == 403
    assert anonymous(f"?versionId={shared}") == (200, b"shared")
    assert anonymous()[0] == 403


def test_multipart_uploads_make_versions_and_copy_from_old_ones(s3):
    s3.create_bucket(Bucket="vers-mpu")
    s3.put_bucket_versioning(Bucket="vers-mpu", VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket="vers-mpu", Key="big", Body=b"small first")["VersionId"]
    upload = s3.create_multipart_upload(Bucket="vers-mpu", Key="big")["UploadId"]
    part = s3.upload_part(Bucket="vers-mpu", Key="big", UploadId=upload, PartNumber=1, Body=b"x" * 100)
    done = s3.complete_multipart_upload(
        Bucket="vers-mpu", Key="big", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    )
    assert done["VersionId"] not in (None, first)
    listed = s3.list_object_versions(Bucket="vers-mpu")["Versions"]
    assert [(v["VersionId"], v["IsLatest"], v["Size"]) for v in listed] == [(done["VersionId"], True, 100), (first, False, 11)]
    upload = s3.create_multipart_upload(Bucket="vers-mpu", Key="copy")["UploadId"]
    copied = s3.upload_part_copy(
        Bucket="vers-mpu", Key="copy", UploadId=upload, PartNumber=1, CopySource={"Bucket": "vers-mpu", "Key": "big", "VersionId": first}
    )
    assert copied["CopySourceVersionId"] == first
    s3.complete_multipart_upload(
        Bucket="vers-mpu", Key="copy", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": copied["CopyPartResult"]["ETag"]}]}
    )
    assert s3.get_object(Bucket="vers-mpu", Key="copy")["Body"].read() == b"small first"
