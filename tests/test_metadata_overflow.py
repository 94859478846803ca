"""Object metadata at S3's limits on file systems whose extended attributes hold less: ten tags
of the largest key and value, user metadata near 2 KB, both at once. Where the record does not
fit the file's xattr space (ext4: one block; XFS and tmpfs hold more), it goes to a
gateway-owned side record and the client notices nothing: every read, overwrite, delete and
version sees the right record, and a user who copies the attribute to a file of their own gains
nothing from it."""

import os
import shutil
import subprocess

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from conftest import TEST_POOL, Server, make_client

XATTR = "user.isthmus"
IMAGE_MIB = 64


def run(*args):
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


class Mounted:
    """A file system of `kind` mounted at `path` (a loop image for ext4 and XFS)."""

    def __init__(self, kind, tmp_path):
        self.path = tmp_path / f"mnt-{kind}"
        self.path.mkdir()
        self.device = None
        if kind == "tmpfs":
            run("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(self.path))
            return
        image = tmp_path / f"{kind}.img"
        with open(image, "wb") as f:
            f.truncate(IMAGE_MIB << 20 if kind == "ext4" else 320 << 20)
        if kind == "ext4":
            run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
        else:
            run("mkfs.xfs", "-q", "-f", str(image))
        self.device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True,
                                     text=True, timeout=60).stdout.strip()
        run("mount", self.device, str(self.path))

    def close(self):
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)


@pytest.fixture(params=["ext4", "xfs", "tmpfs"])
def fs_server(request, tmp_path):
    tools = {"ext4": ["mkfs.ext4", "losetup"], "xfs": ["mkfs.xfs", "losetup"], "tmpfs": []}[request.param]
    if os.geteuid() != 0 or not all(shutil.which(t) for t in tools + ["mount", "umount"]):
        pytest.skip("mounting a test file system needs root, mount and the mkfs tool")
    mounted = Mounted(request.param, tmp_path)
    server = None
    try:
        server = Server(mounted.path / "data")
        yield request.param, server
    finally:
        if server is not None:
            server.stop()
        mounted.close()


def max_tags(tag):
    """Ten tags of the largest key (128) and value (256) S3 allows, distinct by `tag`."""
    return [{"Key": f"{i}{tag}".ljust(128, "k"), "Value": f"{i}{tag}".ljust(256, "v")} for i in range(10)]


def tags_of(s3, bucket, key, **kwargs):
    return s3.get_object_tagging(Bucket=bucket, Key=key, **kwargs)["TagSet"]


def big_metadata(tag):
    """User metadata just under S3's 2 KB limit (names and values counted)."""
    return {f"m{i}-{tag}": "x" * 180 for i in range(10)}


def test_metadata_at_the_s3_limits_on_each_file_system(fs_server):
    kind, server = fs_server
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="lim")
    body = os.urandom(5000)

    # Ten maximal tags set after the object exists (the case that answered InsufficientStorage).
    s3.put_object(Bucket="lim", Key="a/tagged", Body=body)
    s3.put_object_tagging(Bucket="lim", Key="a/tagged", Tagging={"TagSet": max_tags("a")})
    assert tags_of(s3, "lim", "a/tagged") == max_tags("a")
    got = s3.get_object(Bucket="lim", Key="a/tagged")
    assert got["Body"].read() == body and got["TagCount"] == 10

    # Maximal tags and user metadata near 2 KB, in one PUT.
    meta = big_metadata("b")
    put = s3.put_object(Bucket="lim", Key="both", Body=body, Metadata=meta, ContentType="application/x-test",
                        Tagging="&".join(f"{t['Key']}={t['Value']}" for t in max_tags("b")))
    head = s3.head_object(Bucket="lim", Key="both")
    assert head["Metadata"] == meta and head["ContentType"] == "application/x-test"
    assert head["ETag"] == put["ETag"] and head["ContentLength"] == len(body)
    assert tags_of(s3, "lim", "both") == max_tags("b")
    listed = {o["Key"]: o for o in s3.list_objects_v2(Bucket="lim")["Contents"]}
    assert listed["both"]["ETag"] == put["ETag"] and listed["both"]["Size"] == len(body)

    # A multipart upload carries both from its start to the object.
    upload = s3.create_multipart_upload(Bucket="lim", Key="mp", Metadata=meta,
                                        Tagging="&".join(f"{t['Key']}={t['Value']}" for t in max_tags("mp")))
    part = s3.upload_part(Bucket="lim", Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=body)
    s3.complete_multipart_upload(Bucket="lim", Key="mp", UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.head_object(Bucket="lim", Key="mp")["Metadata"] == meta
    assert tags_of(s3, "lim", "mp") == max_tags("mp")
    s3.delete_object(Bucket="lim", Key="mp")

    # A copy carries all of it to another key.
    s3.copy_object(Bucket="lim", Key="copy", CopySource={"Bucket": "lim", "Key": "both"})
    assert s3.head_object(Bucket="lim", Key="copy")["Metadata"] == meta
    assert tags_of(s3, "lim", "copy") == max_tags("b")

    # Replaced by a small record: nothing of the large one is served again.
    s3.put_object(Bucket="lim", Key="both", Body=b"small", Metadata={"k": "v"})
    assert s3.head_object(Bucket="lim", Key="both")["Metadata"] == {"k": "v"}
    assert tags_of(s3, "lim", "both") == []
    # Deleted tags, then deleted objects, then the name written again: nothing comes back.
    s3.delete_object_tagging(Bucket="lim", Key="a/tagged")
    assert tags_of(s3, "lim", "a/tagged") == []
    s3.put_object_tagging(Bucket="lim", Key="a/tagged", Tagging={"TagSet": max_tags("c")})
    s3.delete_object(Bucket="lim", Key="a/tagged")
    s3.put_object(Bucket="lim", Key="a/tagged", Body=b"again")
    assert tags_of(s3, "lim", "a/tagged") == []
    assert s3.head_object(Bucket="lim", Key="a/tagged")["Metadata"] == {}

    # Past the limits the answer is S3's, not a storage error.
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket="lim", Key="over", Body=b"x", Metadata={"m": "x" * 2100})
    assert err.value.response["Error"]["Code"] == "MetadataTooLarge"
    assert "over" not in {o["Key"] for o in s3.list_objects_v2(Bucket="lim").get("Contents", [])}

    if TEST_POOL == "erasure":
        return  # objects are shards on the pool's drives: no files to look at
    # The bucket's directory holds the objects and nothing else a user would see.
    names = sorted(p.name for p in (server.root / "lim").iterdir() if not p.name.startswith(".isthmus"))
    assert names == ["a", "both", "copy"], kind
    if kind == "ext4":
        # Side records of replaced and deleted objects are gone: only the copy's is left.
        side = [p for p in (server.root / "lim" / ".isthmus" / "meta-overflow").glob("*/*")]
        assert len(side) == 1, side


@pytest.mark.posix_only
def test_versions_keep_their_large_records(fs_server):
    """A superseded version keeps its large record (tags are kept for the current version
    only, a documented limitation of this gateway)."""
    _, server = fs_server
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket="ver", Key="k", Body=b"one", Metadata=big_metadata("v1"),
                       Tagging="&".join(f"{t['Key']}={t['Value']}" for t in max_tags("v1")))["VersionId"]
    assert tags_of(s3, "ver", "k") == max_tags("v1")
    v2 = s3.put_object(Bucket="ver", Key="k", Body=b"two", Metadata=big_metadata("v2"),
                       Tagging="&".join(f"{t['Key']}={t['Value']}" for t in max_tags("v2")))["VersionId"]
    assert s3.head_object(Bucket="ver", Key="k", VersionId=v1)["Metadata"] == big_metadata("v1")
    assert s3.head_object(Bucket="ver", Key="k")["Metadata"] == big_metadata("v2")
    assert s3.head_object(Bucket="ver", Key="k", VersionId=v2)["Metadata"] == big_metadata("v2")
    assert tags_of(s3, "ver", "k") == max_tags("v2")
    assert s3.get_object(Bucket="ver", Key="k", VersionId=v1)["Body"].read() == b"one"
    s3.delete_object(Bucket="ver", Key="k", VersionId=v2)
    assert s3.head_object(Bucket="ver", Key="k")["Metadata"] == big_metadata("v1")


@pytest.mark.posix_only
def test_a_copied_attribute_does_not_carry_a_large_record(fs_server):
    """The attacker: a user who can write files in the bucket copies a public object's
    attribute (on ext4 a pointer to the side record) onto a file of their own, forges pointers,
    and renames files around."""
    kind, server = fs_server
    s3 = make_client(server.endpoint)
    anonymous = make_client(server.endpoint, signature_version=UNSIGNED)
    s3.create_bucket(Bucket="att")
    s3.put_object(Bucket="att", Key="victim", Body=b"public", ACL="public-read", Metadata=big_metadata("victim"),
                  Tagging="&".join(f"{t['Key']}={t['Value']}" for t in max_tags("victim")))
    assert anonymous.get_object(Bucket="att", Key="victim")["Body"].read() == b"public"
    victim = server.root / "att" / "victim"
    attribute = os.getxattr(victim, XATTR)
    mine = server.root / "att" / "mine"
    mine.write_bytes(b"mine!!")
    os.setxattr(mine, XATTR, attribute)
    # The ACL is sealed to the victim's file: the copy makes nothing public, on any file system.
    with pytest.raises(ClientError) as err:
        anonymous.get_object(Bucket="att", Key="mine")
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    if kind == "ext4":
        assert len(attribute) < 1024, "the attribute holds a small pointer, not the record"
        # The pointer leads to the side record of its own file only: the copy finds none.
        head = s3.head_object(Bucket="att", Key="mine")
        assert head["Metadata"] == {} and head["ContentLength"] == 6
        assert tags_of(s3, "att", "mine") == []
        # Garbage and hostile pointers are no record either, and break nothing.
        for forged in [attribute[:-3], attribute + b"/../../x", b"\xff" * 40, attribute[:-1] + b"g",
                       attribute.replace(b"1", b"2").replace(b"a", b"b")]:
            os.setxattr(mine, XATTR, forged)
            assert s3.head_object(Bucket="att", Key="mine")["Metadata"] == {}
            assert s3.get_object(Bucket="att", Key="mine")["Body"].read() == b"mine!!"
    # The victim's own record is untouched, and a rename outside the gateway keeps it (the
    # same file), its ACL included.
    assert s3.head_object(Bucket="att", Key="victim")["Metadata"] == big_metadata("victim")
    os.rename(victim, server.root / "att" / "moved")
    assert s3.head_object(Bucket="att", Key="moved")["Metadata"] == big_metadata("victim")
    assert tags_of(s3, "att", "moved") == max_tags("victim")
    assert anonymous.get_object(Bucket="att", Key="moved")["Body"].read() == b"public"
