"""Every read path asks the same question (issue 42, finding 4): a key the bucket policy
explicitly denies is refused to GET and HEAD, to a CopyObject or UploadPartCopy that takes it as
its source, and to a user the configuration grants the bucket (`buckets = [...]`), as in AWS,
where an explicit Deny wins over every Allow. Each test plays the attacker against a real
gateway; the other doors (local socket, arrays, HDF5, selections, third-party copy) call the same
check, which crates/access/tests/authz.rs plays through every engine call that reads."""

import json

import pytest

from conftest import code_of, make_client, Server

SECRET = "secret-key-0123456789"
# alice owns the shared bucket; bob is granted it by the configuration; carol reads it through
# its authenticated-read ACL.
CONFIG = "".join(
    f'[[users]]\naccess_key = "{name}"\nsecret_key = "{SECRET}"\n{extra}\n'
    for name, extra in (("alice", ""), ("bob", 'buckets = ["shared"]'), ("carol", ""))
)
DENIED = "secret/plan.txt"
POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::shared/secret/*"},
    ],
}



@pytest.fixture
def shared(tmp_path):
    """A gateway whose bucket `shared` (alice's, authenticated-read, and so are its objects) denies `secret/*` to everyone
    by policy; bob and carol each own a bucket to copy into. Yields (server, clients by name)."""
    config = tmp_path / "isthmus.toml"
    config.write_text(CONFIG)
    srv = Server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        clients = {name: make_client(srv.endpoint, name, SECRET) for name in ("alice", "bob", "carol")}
        clients["root"] = make_client(srv.endpoint)
        alice = clients["alice"]
        alice.create_bucket(Bucket="shared")
        for key in ("open.txt", DENIED):
            alice.put_object(Bucket="shared", Key=key, Body=f"bytes of {key}".encode(), ACL="authenticated-read")
        alice.put_bucket_acl(Bucket="shared", ACL="authenticated-read")
        alice.put_bucket_policy(Bucket="shared", Policy=json.dumps(POLICY))
        for name in ("bob", "carol"):
            clients[name].create_bucket(Bucket=f"{name}-own")
        yield srv, clients
    finally:
        srv.stop()


@pytest.mark.parametrize("reader", ["carol", "bob"])
def test_a_copy_reads_nothing_a_get_of_its_source_may_not(shared, reader):
    """CopyObject and UploadPartCopy checked only that the source bucket was readable, so a key
    whose GET and HEAD the policy refused was copied into the reader's own bucket and read
    there. Carol reads the objects through their ACLs, bob through his grant."""
    srv, clients = shared
    s3, own = clients[reader], f"{reader}-own"
    assert code_of(s3.get_object, Bucket="shared", Key=DENIED) == "AccessDenied"
    assert code_of(s3.head_object, Bucket="shared", Key=DENIED) in ("403", "AccessDenied")
    source = {"Bucket": "shared", "Key": DENIED}
    assert code_of(s3.copy_object, Bucket=own, Key="stolen", CopySource=source) == "AccessDenied"
    assert code_of(s3.head_object, Bucket=own, Key="stolen") == "404", "the copy happened"
    upload = s3.create_multipart_upload(Bucket=own, Key="assembled")["UploadId"]
    part = code_of(s3.upload_part_copy, Bucket=own, Key="assembled", UploadId=upload, PartNumber=1, CopySource=source)
    assert part == "AccessDenied"
    assert "Parts" not in s3.list_parts(Bucket=own, Key="assembled", UploadId=upload), "the part was copied"
    # A source version named explicitly is judged the same way.
    versioned = dict(source, VersionId="null")
    assert code_of(s3.copy_object, Bucket=own, Key="stolen", CopySource=versioned) == "AccessDenied"
    # Keys the policy does not deny copy as before.
    s3.copy_object(Bucket=own, Key="copied", CopySource={"Bucket": "shared", "Key": "open.txt"})
    s3.upload_part_copy(
        Bucket=own, Key="assembled", UploadId=upload, PartNumber=1, CopySource={"Bucket": "shared", "Key": "open.txt"}
    )
    assert s3.get_object(Bucket=own, Key="copied")["Body"].read() == b"bytes of open.txt"
    refused = [line for line in srv.output().splitlines() if " refused " in line and f'who="{reader}"' in line]
    assert any("policy denies" in line for line in refused), refused


def test_a_bucket_granted_by_the_configuration_still_obeys_an_explicit_deny(shared):
    """A user given the bucket by `buckets = [...]` read keys its policy denied him: grants
    skipped the policy. The explicit Deny wins for him, and for the bucket's owner; root, who
    may change the policy, still reads. Allowed keys and listings stay open."""
    _, clients = shared
    bob, alice, root = clients["bob"], clients["alice"], clients["root"]
    assert code_of(bob.get_object, Bucket="shared", Key=DENIED) == "AccessDenied"
    assert code_of(bob.head_object, Bucket="shared", Key=DENIED) in ("403", "AccessDenied")
    # A version named explicitly (the null version of an unversioned bucket) is the same key.
    assert code_of(bob.get_object, Bucket="shared", Key=DENIED, VersionId="null") == "AccessDenied"
    assert bob.get_object(Bucket="shared", Key="open.txt")["Body"].read() == b"bytes of open.txt"
    assert sorted(o["Key"] for o in bob.list_objects_v2(Bucket="shared")["Contents"]) == ["open.txt", DENIED]
    bob.put_object(Bucket="shared", Key="from-bob.txt", Body=b"bob writes")  # his grant still writes
    assert code_of(alice.get_object, Bucket="shared", Key=DENIED) == "AccessDenied"
    assert root.get_object(Bucket="shared", Key=DENIED)["Body"].read() == f"bytes of {DENIED}".encode()
    # Once the owner lifts the Deny, bob reads the key again.
    alice.delete_bucket_policy(Bucket="shared")
    assert bob.get_object(Bucket="shared", Key=DENIED)["Body"].read() == f"bytes of {DENIED}".encode()
