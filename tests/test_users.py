"""Several users: each sees and uses only its own buckets unless the configuration grants more;
the root user sees everything."""

import json
import pytest
from botocore.exceptions import ClientError

from conftest import Server, make_client

CONFIG = """
[[users]]
access_key = "alice"
secret_key = "alice-secret-0123"
display_name = "Alice"
buckets = ["shared-*"]

[[users]]
access_key = "bob"
secret_key = "bob-secret-456789"
"""


@pytest.fixture
def multi(tmp_path):
    config = tmp_path / "isthmus.toml"
    config.write_text(CONFIG)
    srv = Server(tmp_path / "data", extra_args=["--config", str(config)])
    yield srv, make_client(srv.endpoint), make_client(srv.endpoint, "alice", "alice-secret-0123"), make_client(srv.endpoint, "bob", "bob-secret-456789")
    srv.stop()


def denied(fn, **kwargs):
    with pytest.raises(ClientError) as e:
        fn(**kwargs)
    return e.value.response["Error"]["Code"] == "AccessDenied"


def names(client):
    return [b["Name"] for b in client.list_buckets()["Buckets"]]


@pytest.mark.posix_only
def test_buckets_are_private_unless_granted(multi):
    srv, root, alice, bob = multi
    root.create_bucket(Bucket="shared-data")
    root.create_bucket(Bucket="root-only")
    alice.create_bucket(Bucket="alice-bucket")
    bob.create_bucket(Bucket="bob-bucket")
    (srv.root / "made-by-posix").mkdir()
    assert names(root) == ["alice-bucket", "bob-bucket", "made-by-posix", "root-only", "shared-data"]
    assert names(alice) == ["alice-bucket", "shared-data"]
    assert names(bob) == ["bob-bucket"]

    alice.put_object(Bucket="alice-bucket", Key="a", Body=b"alice's")
    alice.put_object(Bucket="shared-data", Key="from-alice", Body=b"shared")
    assert denied(bob.get_object, Bucket="alice-bucket", Key="a")
    assert denied(bob.put_object, Bucket="shared-data", Key="x", Body=b"x")
    assert denied(bob.list_objects_v2, Bucket="alice-bucket")
    assert denied(alice.put_object, Bucket="root-only", Key="x", Body=b"x")
    assert denied(alice.list_objects_v2, Bucket="made-by-posix")
    assert denied(bob.delete_bucket, Bucket="alice-bucket")
    # Copies need access to the source too.
    assert denied(bob.copy_object, Bucket="bob-bucket", Key="stolen", CopySource={"Bucket": "alice-bucket", "Key": "a"})
    alice.copy_object(Bucket="alice-bucket", Key="copy", CopySource={"Bucket": "shared-data", "Key": "from-alice"})
    # The root user reaches everything.
    assert root.get_object(Bucket="alice-bucket", Key="a")["Body"].read() == b"alice's"
    # A bucket that does not exist is reported as such, not as denied.
    with pytest.raises(ClientError) as e:
        alice.get_object(Bucket="no-such-bucket", Key="k")
    assert e.value.response["Error"]["Code"] == "NoSuchBucket"
    # Ownership is kept in the gateway's state directory, out of users' reach, never listed.
    record = json.loads((srv.root / ".isthmus" / "buckets" / "alice-bucket.json").read_text())
    assert record["config"]["owner"] == "alice"
    assert [o["Key"] for o in alice.list_objects_v2(Bucket="alice-bucket")["Contents"]] == ["a", "copy"]


@pytest.mark.posix_only
def test_acl_grants_to_users_by_canonical_id(multi, tmp_path):
    """Grants name users of the configuration by canonical id (their access key), in grant
    headers or an AccessControlPolicy body; what cannot be enforced is refused whole."""
    srv, root, alice, bob = multi
    alice.create_bucket(Bucket="alice-lab")
    alice.put_object(Bucket="alice-lab", Key="results.csv", Body=b"t,v\n")
    alice.put_object(Bucket="alice-lab", Key="draft.txt", Body=b"draft")
    assert denied(bob.get_object, Bucket="alice-lab", Key="results.csv")

    # An object grant: bob reads that object, nothing else.
    alice.put_object_acl(Bucket="alice-lab", Key="results.csv", GrantRead='id="bob"')
    assert bob.get_object(Bucket="alice-lab", Key="results.csv")["Body"].read() == b"t,v\n"
    assert denied(bob.get_object, Bucket="alice-lab", Key="draft.txt")
    grants = alice.get_object_acl(Bucket="alice-lab", Key="results.csv")["Grants"]
    assert [(g["Grantee"].get("ID"), g["Permission"]) for g in grants] == [("alice", "FULL_CONTROL"), ("bob", "READ")]

    # A bucket grant in a body (READ: list, WRITE: write objects), as `aws s3api put-bucket-acl --access-control-policy` sends it.
    policy = {
        "Owner": {"ID": "alice"},
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": "alice"}, "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "CanonicalUser", "ID": "bob"}, "Permission": "READ"},
            {"Grantee": {"Type": "CanonicalUser", "ID": "bob"}, "Permission": "WRITE"},
        ],
    }
    alice.put_bucket_acl(Bucket="alice-lab", AccessControlPolicy=policy)
    assert [o["Key"] for o in bob.list_objects_v2(Bucket="alice-lab")["Contents"]] == ["draft.txt", "results.csv"]
    bob.put_object(Bucket="alice-lab", Key="from-bob.txt", Body=b"bob")
    assert (srv.root / "alice-lab" / "from-bob.txt").read_bytes() == b"bob"
    # The bucket itself stays its owner's.
    assert denied(bob.put_bucket_acl, Bucket="alice-lab", ACL="public-read")
    assert denied(bob.delete_bucket, Bucket="alice-lab")
    # Kept beside the data: another gateway on the same root agrees.
    other = Server(srv.root, extra_args=["--config", str(tmp_path / "isthmus.toml")])
    try:
        bob2 = make_client(other.endpoint, "bob", "bob-secret-456789")
        assert "draft.txt" in [o["Key"] for o in bob2.list_objects_v2(Bucket="alice-lab")["Contents"]]
        # As in S3, a bucket's READ is listing it: its objects take their own grants.
        assert denied(bob2.get_object, Bucket="alice-lab", Key="draft.txt")
        assert bob2.get_object(Bucket="alice-lab", Key="results.csv")["Body"].read() == b"t,v\n"
    finally:
        other.stop()

    # Revoking: a canned ACL replaces the grants.
    alice.put_bucket_acl(Bucket="alice-lab", ACL="private")
    assert denied(bob.list_objects_v2, Bucket="alice-lab")

    def refused(code, **kwargs):
        with pytest.raises(ClientError) as e:
            alice.put_bucket_acl(Bucket="alice-lab", **kwargs)
        assert e.value.response["Error"]["Code"] == code, e.value.response

    refused("InvalidArgument", GrantRead='id="nobody-here"')
    refused("NotImplemented", GrantFullControl='id="bob"')
    refused("NotImplemented", GrantRead='emailAddress="bob@example.org"')
    refused("InvalidRequest", ACL="public-read", GrantRead='id="bob"')
    with pytest.raises(ClientError) as e:
        alice.put_object(Bucket="alice-lab", Key="x", Body=b"x", GrantRead='id="bob"')
    assert e.value.response["Error"]["Code"] == "NotImplemented"



def test_copying_an_object_someone_else_owns(multi):
    """A copy reads its source as the requester: an object shared with everyone can be copied
    into the requester's own bucket, a private one cannot, and the copy is the requester's."""
    _, root, _, bob = multi
    root.create_bucket(Bucket="owner-src")
    root.put_object(Bucket="owner-src", Key="shared", Body=b"shared bytes", ACL="public-read")
    root.put_object(Bucket="owner-src", Key="secret", Body=b"secret bytes")
    bob.create_bucket(Bucket="bobs")
    bob.copy_object(Bucket="bobs", Key="copy", CopySource={"Bucket": "owner-src", "Key": "shared"})
    assert bob.get_object(Bucket="bobs", Key="copy")["Body"].read() == b"shared bytes"
    assert denied(bob.copy_object, Bucket="bobs", Key="stolen", CopySource={"Bucket": "owner-src", "Key": "secret"})
    assert "stolen" not in [o["Key"] for o in bob.list_objects_v2(Bucket="bobs")["Contents"]]
    # Nor into someone else's bucket.
    assert denied(bob.copy_object, Bucket="owner-src", Key="copy", CopySource={"Bucket": "owner-src", "Key": "shared"})
    owner = bob.get_object_acl(Bucket="bobs", Key="copy")["Owner"]
    assert owner["ID"] == "bob"


def test_listing_uploads_names_each_uploads_owner_and_initiator(multi):
    _, root, _, bob = multi
    root.create_bucket(Bucket="uploads-shared", ACL="public-read-write")
    mine = root.create_multipart_upload(Bucket="uploads-shared", Key="root-upload")["UploadId"]
    bobs = bob.create_multipart_upload(Bucket="uploads-shared", Key="bob-upload")["UploadId"]
    listed = {u["UploadId"]: u for u in root.list_multipart_uploads(Bucket="uploads-shared")["Uploads"]}
    assert listed[bobs]["Owner"]["ID"] == "bob" and listed[bobs]["Initiator"]["ID"] == "bob"
    assert listed[mine]["Owner"]["ID"] == listed[mine]["Initiator"]["ID"] != "bob"
    # The initiator is kept with the upload, where no user can rewrite it: after a restart too.
    parts = root.list_parts(Bucket="uploads-shared", Key="bob-upload", UploadId=bobs)
    assert parts["Initiator"]["ID"] == "bob" and parts["Owner"]["ID"] == "bob"


BUCKET_ACLS = ["private", "public-read", "public-read-write"]
OBJECT_ACLS = ["private", "public-read", "public-read-write"]


def test_canned_acl_matrix_gives_another_user_exactly_s3s_rights(multi):
    """Every combination of a bucket's and an object's canned ACL, as the S3 conformance suite
    runs them against AWS: another signed user reads an object only by its own ACL (the
    bucket's never shares objects), lists only a public-read(-write) bucket, writes (new keys
    and overwrites alike) only into a public-read-write bucket, and reads no ACL."""
    _, root, _, bob = multi
    for bucket_acl in BUCKET_ACLS:
        for object_acl in OBJECT_ACLS:
            bucket = f"m-{bucket_acl}-{object_acl}"
            root.create_bucket(Bucket=bucket)
            root.put_bucket_acl(Bucket=bucket, ACL=bucket_acl)
            root.put_object(Bucket=bucket, Key="foo", Body=b"foocontent")
            root.put_object_acl(Bucket=bucket, Key="foo", ACL=object_acl)
            root.put_object(Bucket=bucket, Key="bar", Body=b"barcontent")
            case = f"bucket {bucket_acl}, object {object_acl}"
            if object_acl == "private":
                assert denied(bob.get_object, Bucket=bucket, Key="foo"), case
            else:
                assert bob.get_object(Bucket=bucket, Key="foo")["Body"].read() == b"foocontent", case
            assert denied(bob.get_object, Bucket=bucket, Key="bar"), case
            if bucket_acl == "private":
                assert denied(bob.list_objects, Bucket=bucket), case
                assert denied(bob.list_objects_v2, Bucket=bucket), case
            else:
                assert [o["Key"] for o in bob.list_objects(Bucket=bucket)["Contents"]] == ["bar", "foo"], case
            assert denied(bob.get_bucket_acl, Bucket=bucket), case
            assert denied(bob.get_object_acl, Bucket=bucket, Key="foo"), case
            for key in ("foo", "bar", "new"):
                if bucket_acl == "public-read-write":
                    bob.put_object(Bucket=bucket, Key=key, Body=b"bob's")
                else:
                    assert denied(bob.put_object, Bucket=bucket, Key=key, Body=b"bob's"), (case, key)
            if bucket_acl != "public-read-write":
                assert root.get_object(Bucket=bucket, Key="foo")["Body"].read() == b"foocontent", case
                assert "new" not in [o["Key"] for o in root.list_objects_v2(Bucket=bucket)["Contents"]], case
