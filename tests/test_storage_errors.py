"""The file system says no: a full file system (a small tmpfs mounted for the test) and a
directory the gateway may not write (an immutable bucket directory). Clear S3 errors, nothing
left behind, reads keep working."""

import os
import shutil
import subprocess

import pytest
from botocore.exceptions import ClientError

from conftest import Server, make_client, staged_files


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"mounting a tmpfs needs root: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.posix_only
def test_disk_full_is_insufficient_storage_and_leaves_nothing(small_fs):
    srv = Server(small_fs / "data")
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="full")
        s3.put_object(Bucket="full", Key="first", Body=b"kept")
        stored, code = 0, None
        for i in range(20):
            try:
                s3.put_object(Bucket="full", Key=f"blob{i}", Body=os.urandom(900 * 1024))
                stored += 1
            except ClientError as exc:
                code = exc.response["Error"]["Code"], exc.response["ResponseMetadata"]["HTTPStatusCode"]
                break
        assert code == ("InsufficientStorage", 507), code
        assert 0 < stored < 20
        assert staged_files(srv.root / "full", srv.proc.pid) == []
        assert not (srv.root / f"full/blob{stored}").exists()
        # Reads keep working, and freeing space lets writes through again.
        assert s3.get_object(Bucket="full", Key="first")["Body"].read() == b"kept"
        s3.delete_object(Bucket="full", Key="blob0")
        s3.put_object(Bucket="full", Key="after", Body=os.urandom(500 * 1024))
    finally:
        srv.stop()


@pytest.mark.posix_only
def test_unwritable_directory_is_access_denied(server, s3, bucket):
    if shutil.which("chattr") is None:
        pytest.fail("chattr (e2fsprogs) is needed to make a directory immutable")
    s3.put_object(Bucket=bucket, Key="existing", Body=b"readable")
    target = server.root / bucket
    r = subprocess.run(["chattr", "+i", str(target)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"chattr +i failed: {r.stderr.strip()}")
    try:
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key="new", Body=b"refused")
        assert e.value.response["Error"]["Code"] == "AccessDenied"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert s3.get_object(Bucket=bucket, Key="existing")["Body"].read() == b"readable"
        assert staged_files(target, server.proc.pid) == []
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=True)
