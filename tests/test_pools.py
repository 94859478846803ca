"""Pools: several directories (file systems) behind one namespace, declared in the data root's
`.isthmus/pools.toml`. CreateBucket places a bucket by LocationConstraint, GetBucketLocation
answers it, ListBuckets spans every pool, a bucket name is unique across pools, objects in a
posix pool are plain files in that pool's directory, copies between pools work, and the
in-process doors (Python) see the same namespace."""

import botocore.exceptions
import pytest

import isthmus
from conftest import Server, make_client


@pytest.fixture
def pooled(tmp_path):
    root, archive = tmp_path / "data", tmp_path / "archive-fs"
    (root / ".isthmus").mkdir(parents=True)
    (root / ".isthmus" / "pools.toml").write_text(f'[[pool]]\nname = "archive"\nkind = "posix"\npath = "{archive}"\n')
    srv = Server(root)
    yield srv, root, archive
    srv.stop()


def test_buckets_are_placed_by_location_constraint(pooled):
    srv, root, archive = pooled
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket="hot")
    s3.create_bucket(Bucket="cold", CreateBucketConfiguration={"LocationConstraint": "archive"})
    s3.put_object(Bucket="cold", Key="run/1.dat", Body=b"archived bytes")
    s3.put_object(Bucket="hot", Key="a", Body=b"hot bytes")
    # The objects are plain files in their pool's directory.
    assert (archive / "cold" / "run" / "1.dat").read_bytes() == b"archived bytes"
    assert not (root / "cold").exists()
    assert (root / "hot" / "a").read_bytes() == b"hot bytes"
    assert s3.get_bucket_location(Bucket="cold")["LocationConstraint"] == "archive"
    assert s3.get_bucket_location(Bucket="hot")["LocationConstraint"] == "default"
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["cold", "hot"]
    # A bucket name is unique across pools.
    with pytest.raises(botocore.exceptions.ClientError) as taken:
        s3.create_bucket(Bucket="cold")
    assert taken.value.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"
    with pytest.raises(botocore.exceptions.ClientError) as unknown:
        s3.create_bucket(Bucket="tape-bucket", CreateBucketConfiguration={"LocationConstraint": "tape"})
    assert unknown.value.response["Error"]["Code"] == "InvalidLocationConstraint"
    assert "archive" in unknown.value.response["Error"]["Message"]
    # An SDK's region as LocationConstraint is the default pool.
    s3.create_bucket(Bucket="regional", CreateBucketConfiguration={"LocationConstraint": "eu-west-3"})
    assert (root / "regional").is_dir()


def test_copies_between_pools_and_multipart_in_a_pool(pooled):
    srv, root, archive = pooled
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket="hot")
    s3.create_bucket(Bucket="cold", CreateBucketConfiguration={"LocationConstraint": "archive"})
    s3.put_object(Bucket="hot", Key="src", Body=b"x" * 100_000, Metadata={"run": "7"}, ContentType="text/plain")
    s3.copy_object(Bucket="cold", Key="dst", CopySource={"Bucket": "hot", "Key": "src"})
    head = s3.head_object(Bucket="cold", Key="dst")
    assert head["Metadata"] == {"run": "7"} and head["ContentType"] == "text/plain"
    assert (archive / "cold" / "dst").read_bytes() == b"x" * 100_000
    with pytest.raises(botocore.exceptions.ClientError) as failed:
        s3.copy_object(Bucket="cold", Key="dst2", CopySource={"Bucket": "hot", "Key": "src"}, CopySourceIfMatch='"nope"')
    assert failed.value.response["Error"]["Code"] == "PreconditionFailed"
    upload = s3.create_multipart_upload(Bucket="cold", Key="big")["UploadId"]
    part = s3.upload_part(Bucket="cold", Key="big", UploadId=upload, PartNumber=1, Body=b"p" * (5 << 20))
    s3.complete_multipart_upload(Bucket="cold", Key="big", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert (archive / "cold" / "big").stat().st_size == 5 << 20
    s3.delete_object(Bucket="cold", Key="big")
    s3.delete_object(Bucket="cold", Key="dst")
    s3.delete_bucket(Bucket="cold")
    assert not (archive / "cold").exists()


def test_the_python_door_sees_the_same_namespace(pooled):
    srv, root, archive = pooled
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket="cold", CreateBucketConfiguration={"LocationConstraint": "archive"})
    s3.put_object(Bucket="cold", Key="k", Body=b"seen in-process")
    store = isthmus.Store(str(root))
    assert store.get_object("cold", "k") == b"seen in-process"
    assert "cold" in store.list_buckets()


def test_a_bad_pool_table_stops_the_server_with_the_reason(tmp_path):
    root = tmp_path / "data"
    (root / ".isthmus").mkdir(parents=True)
    (root / ".isthmus" / "pools.toml").write_text('[[pool]]\nname = "x"\nkind = "tape"\npath = "/tmp/x"\n')
    with pytest.raises(RuntimeError) as exited:
        Server(root)
    assert "pools.toml" in str(exited.value) and "tape" in str(exited.value)
