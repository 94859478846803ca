"""One copy, two doors: files written by POSIX programs are objects, objects are files, and
nothing outside the bucket can be reached through keys or planted symlinks."""

import hashlib
import os
import time

import pytest
from botocore.exceptions import ClientError


def md5(b):
    return '"%s"' % hashlib.md5(b).hexdigest()


def test_posix_files_are_objects_with_correct_etags(s3, bucket, server):
    d = server.root / bucket / "sim" / "step1"
    d.mkdir(parents=True)
    (d / "field.dat").write_bytes(b"written by a simulation")
    head = s3.head_object(Bucket=bucket, Key="sim/step1/field.dat")
    assert head["ETag"] == md5(b"written by a simulation")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["sim/step1/field.dat"]


def test_changing_a_file_changes_its_etag(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="data.bin", Body=b"version-one")
    path = server.root / bucket / "data.bin"
    time.sleep(0.02)
    path.write_bytes(b"version-TWO")  # same size, new content
    got = s3.get_object(Bucket=bucket, Key="data.bin")
    assert got["Body"].read() == b"version-TWO"
    assert got["ETag"] == md5(b"version-TWO")
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"][0]
    assert listed["ETag"] == md5(b"version-TWO")
    with open(path, "ab") as f:
        f.write(b"+more")
    assert s3.head_object(Bucket=bucket, Key="data.bin")["ETag"] == md5(b"version-TWO+more")


def test_directory_objects(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="folder/", Body=b"")
    assert (server.root / bucket / "folder").is_dir()
    assert s3.head_object(Bucket=bucket, Key="folder/")["ContentLength"] == 0
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="folder2/", Body=b"data in a directory")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"


def test_file_directory_conflicts(s3, bucket):
    s3.put_object(Bucket=bucket, Key="x", Body=b"file")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="x/y", Body=b"child")
    assert e.value.response["Error"]["Code"] == "ParentIsObject"
    s3.put_object(Bucket=bucket, Key="d/child", Body=b"c")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="d", Body=b"file over a directory")
    assert e.value.response["Error"]["Code"] == "ObjectIsDirectory"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    # The limitation docs/user/s3-compatibility.md states: either refusal stores and changes nothing.
    assert s3.get_object(Bucket=bucket, Key="x")["Body"].read() == b"file"
    assert s3.get_object(Bucket=bucket, Key="d/child")["Body"].read() == b"c"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["d/child", "x"]


@pytest.mark.parametrize("key", ["../escape", "a/../../escape", "./x", "a//b", ".isthmus/tmp/x", "a/./b"])
def test_traversal_keys_are_refused(s3, bucket, server, key):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    assert e.value.response["Error"]["Code"] in ("InvalidArgument", "InvalidRequest", "InvalidURI")
    assert not (server.root / "escape").exists()
    assert not (server.root.parent / "escape").exists()


def test_over_long_names_are_refused(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="d/" + "n" * 256, Body=b"x")
    assert e.value.response["Error"]["Code"] == "KeyTooLongError"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"x")
    assert e.value.response["Error"]["Code"] in ("KeyTooLongError", "InvalidArgument")


def test_planted_symlinks_cannot_reach_outside(s3, bucket, server, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"top secret")
    b = server.root / bucket
    os.symlink(outside / "secret", b / "link-to-file")
    os.symlink(outside, b / "link-to-dir")
    os.symlink("../../outside/secret", b / "relative-link")
    for key in ["link-to-file", "link-to-dir/secret", "relative-link"]:
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key=key)
        assert e.value.response["Error"]["Code"] == "NoSuchKey", key
    with pytest.raises(ClientError):
        s3.put_object(Bucket=bucket, Key="link-to-dir/planted", Body=b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert listed == []
    # Overwriting the link replaces the link, never the file it points to.
    s3.put_object(Bucket=bucket, Key="link-to-file", Body=b"mine")
    assert (outside / "secret").read_bytes() == b"top secret"
    # A symlink that stays inside the bucket is followed.
    s3.put_object(Bucket=bucket, Key="real", Body=b"inside")
    os.symlink("real", b / "alias")
    assert s3.get_object(Bucket=bucket, Key="alias")["Body"].read() == b"inside"


def test_sidecar_metadata_mode(tmp_path):
    from conftest import Server, make_client

    srv = Server(tmp_path / "data", extra_args=["--metadata", "sidecar", "--durability", "relaxed"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="side")
        s3.put_object(Bucket="side", Key="k", Body=b"v", ContentType="x/y", Metadata={"a": "b"})
        head = s3.head_object(Bucket="side", Key="k")
        assert head["ContentType"] == "x/y" and head["Metadata"] == {"a": "b"}
        assert os.listxattr(srv.root / "side" / "k") == []
    finally:
        srv.stop()


def test_concurrent_posix_and_s3_writers_never_corrupt_metadata(s3, bucket, server):
    import threading

    path = server.root / bucket / "shared.dat"
    s3.put_object(Bucket=bucket, Key="shared.dat", Body=b"start")
    stop = time.time() + 3
    errors = []

    def posix_writer():
        i = 0
        while time.time() < stop:
            i += 1
            with open(path, "r+b" if path.exists() else "wb") as f:  # in place, as simulations do
                f.truncate(0)
                f.write(b"posix %d " % i * (i % 50 + 1))

    def s3_writer():
        i = 0
        while time.time() < stop:
            i += 1
            try:
                s3.put_object(Bucket=bucket, Key="shared.dat", Body=b"s3 %d " % i * (i % 70 + 1))
                got = s3.head_object(Bucket=bucket, Key="shared.dat")
                assert got["ETag"].startswith('"')
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=posix_writer), threading.Thread(target=s3_writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Whoever wrote last, the object is exactly the file and its ETag is the MD5 of its bytes.
    body = path.read_bytes()
    got = s3.get_object(Bucket=bucket, Key="shared.dat")
    assert got["Body"].read() == body
    assert got["ETag"] == md5(body)
    assert s3.list_objects_v2(Bucket=bucket)["Contents"][0]["ETag"] == md5(body)
