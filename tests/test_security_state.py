"""Issue 42: the gateway's own state beyond every user's reach. Each test plays a user who can
write in the data root of a shared file system (a member of the root's or a bucket's group, or
the owner of an object's file) against a real gateway with `identity = "posix"` and real Unix
users, and names the finding it guards: 1 (users file swapped with the root's `.isthmus`),
2 (bucket settings swapped in a group-writable bucket), 5 (an object's metadata attribute
forged to publish it or to break GET/HEAD)."""

import json
import os
import pwd
import grp
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from conftest import binary, code_of, make_client, Server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")

PREFIX = "isst"
USERS = {"alice": f"{PREFIX}-alice", "bob": f"{PREFIX}-bob", "admin": f"{PREFIX}-admin"}
GROUP = f"{PREFIX}-proj"
SECRET = "secret-key-0123456789"



@pytest.fixture(scope="module")
def unix():
    """Unix users alice, bob and admin, and a project group alice and bob are in."""
    for name in USERS.values():
        subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)
    subprocess.run(["groupadd", GROUP], check=True, capture_output=True)
    for name in USERS.values():
        subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name], check=True, capture_output=True)
    for short in ("alice", "bob"):
        subprocess.run(["usermod", "-aG", GROUP, USERS[short]], check=True, capture_output=True)
    yield {short: pwd.getpwnam(name) for short, name in USERS.items()}
    for name in USERS.values():
        subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)


def as_user(user, script):
    """Runs a shell script as the Unix user `user` (with their groups), as they would in their
    own shell on the shared file system."""
    return subprocess.run(
        ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "sh", "-c", script],
        capture_output=True, text=True, timeout=30,
    )


def shared_root(root_mode):
    """A base every user may traverse, and a data root owned by root and the project group with
    `root_mode` (0o775: group-writable without the sticky bit, as the operator guide once
    suggested)."""
    base = Path(tempfile.mkdtemp(prefix="isthmus-state-"))
    base.chmod(0o755)
    root = base / "data"
    root.mkdir()
    os.chown(root, 0, grp.getgrnam(GROUP).gr_gid)
    root.chmod(root_mode)
    return base, root


def config_file(base, extra=""):
    users = "".join(
        f'[[users]]\naccess_key = "{short}"\nsecret_key = "{SECRET}"\nunix_user = "{name}"\n'
        for short, name in USERS.items()
        if short != "admin"
    )
    path = base / "isthmus.toml"
    path.write_text(f'identity = "posix"\nroot_identity = {{ unix_user = "{USERS["admin"]}" }}\n{extra}{users}')
    return path


def start_error(root, config):
    env = dict(os.environ, ISTHMUS_ROOT_ACCESS_KEY="rootkey", ISTHMUS_ROOT_SECRET_KEY="root-secret-123")
    cmd = [str(binary()), "serve", "--root", str(root), "--address", "127.0.0.1:0", "--config", str(config)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=env)
    assert result.returncode != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def sticky_gateway(unix):
    """A gateway with Unix identities on a shared root with the sticky bit: (server, root)."""
    base, root = shared_root(0o1775)
    srv = Server(root, extra_args=["--config", str(config_file(base))])
    yield srv, root
    srv.stop()
    shutil.rmtree(base, ignore_errors=True)


def test_a_root_others_may_rename_in_is_refused_with_the_fix(unix):
    """Finding 1, first line of defence: a data root writable by its group without the sticky
    bit lets any member rename `.isthmus` (or another user's bucket) away; the gateway refuses
    to serve Unix identities from it, naming the one command that fixes it."""
    base, root = shared_root(0o775)
    try:
        err = start_error(root, config_file(base))
        assert f"chmod +t {root}" in err and "allow_root_without_sticky_bit" in err, err
        root.chmod(0o1775)
        srv = Server(root, extra_args=["--config", str(config_file(base))])
        srv.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_group_member_who_replaces_the_state_directory_becomes_nobody(unix):
    """Finding 1: with the root group-writable (the operator even said so explicitly), alice
    renames `ROOT/.isthmus` away and makes her own with a users file that maps a fresh key to
    bob's Unix user. The running gateway still reads the directory it opened and checked, so
    the key is unknown and bob's private file stays his; a gateway started on the planted
    directory refuses it instead of believing it."""
    base, root = shared_root(0o775)
    config = config_file(base, "allow_root_without_sticky_bit = true\n")
    srv = Server(root, extra_args=["--config", str(config)])
    try:
        bob = make_client(srv.endpoint, "bob", SECRET)
        bob.create_bucket(Bucket="bob-private")
        bob.put_object(Bucket="bob-private", Key="diary", Body=b"bob's secret")
        (root / "bob-private" / "diary").chmod(0o600)
        planted = (
            '[[users]]\naccess_key = "MALLORYKEY0123456789"\nsecret_key = "mallory-secret-0123456789"\n'
            f'display_name = "mallory"\nunix_user = "{USERS["bob"]}"\n'
        )
        attack = as_user(
            USERS["alice"],
            f"cd {root} && mv .isthmus .stolen && mkdir .isthmus && cat > .isthmus/users.toml <<'EOF'\n{planted}EOF\n"
            "chmod 600 .isthmus/users.toml",
        )
        assert attack.returncode == 0, attack.stderr
        assert (root / ".isthmus" / "users.toml").stat().st_uid == unix["alice"].pw_uid
        mallory = make_client(srv.endpoint, "MALLORYKEY0123456789", "mallory-secret-0123456789")
        time.sleep(3)  # longer than the users file's reload period (2 s)
        assert code_of(mallory.get_object, Bucket="bob-private", Key="diary") == "InvalidAccessKeyId"
        # The gateway works on, with the state it opened.
        assert bob.get_object(Bucket="bob-private", Key="diary")["Body"].read() == b"bob's secret"
        srv.stop()
        err = start_error(root, config)
        assert ".isthmus" in err and "owned by uid" in err and "chown" in err, err
    finally:
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_a_group_member_cannot_take_over_a_shared_buckets_settings(unix, sticky_gateway):
    """Finding 2: bob's bucket is a project directory his group may write. Alice renames its
    `.isthmus` away and puts in her own settings as the former layout kept them (owner alice,
    public-read, a policy denying bob). None of it counts: the settings are the gateway's, in
    its state directory, bound to the bucket directory."""
    srv, root = sticky_gateway
    bob = make_client(srv.endpoint, "bob", SECRET)
    alice = make_client(srv.endpoint, "alice", SECRET)
    bob.create_bucket(Bucket="project")
    bob.put_object(Bucket="project", Key="results.dat", Body=b"bob's results")
    bucket = root / "project"
    os.chown(bucket, unix["bob"].pw_uid, grp.getgrnam(GROUP).gr_gid)
    bucket.chmod(0o2775)
    deny_bob = json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": {"AWS": ["bob"]}, "Action": "s3:*",
                       "Resource": ["arn:aws:s3:::project", "arn:aws:s3:::project/*"]}],
    })
    attack = as_user(
        USERS["alice"],
        f"cd {bucket} && (mv .isthmus .old-settings 2>/dev/null; true) && mkdir .isthmus && cd .isthmus && "
        f"printf alice > owner && printf public-read > acl && cat > policy.json <<'EOF'\n{deny_bob}\nEOF\n",
    )
    assert attack.returncode == 0, attack.stderr
    time.sleep(1.2)  # past the gateway's one-second cache of open buckets
    # Not public, alice is not the owner, and bob is not locked out of his own bucket.
    assert requests.get(f"{srv.endpoint}/project/results.dat", timeout=10).status_code == 403
    assert code_of(alice.put_bucket_acl, Bucket="project", ACL="public-read-write") == "AccessDenied"
    assert code_of(alice.get_bucket_policy, Bucket="project") == "AccessDenied"
    assert bob.get_object(Bucket="project", Key="results.dat")["Body"].read() == b"bob's results"
    assert code_of(bob.get_bucket_policy, Bucket="project") == "NoSuchBucketPolicy"
    bob.put_bucket_acl(Bucket="project", ACL="private")
    # The real settings live where only the gateway writes.
    record = root / ".isthmus" / "buckets" / "project.json"
    assert record.stat().st_uid == os.geteuid() and record.stat().st_mode & 0o022 == 0
    assert json.loads(record.read_text())["config"]["owner"] == "bob"


def forge_record(path, meta=None, **fields):
    """A metadata record the owner of `path` writes into its `user.isthmus` attribute, with the
    file identity the gateway checks (so the record is taken as current)."""
    st = os.stat(path)
    record = {
        "etag": "0123456789abcdef0123456789abcdef",
        "identity": {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns},
        "meta": meta or {},
        **fields,
    }
    return json.dumps(record)


def set_record_as(user, path, record):
    script = f"python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.isthmus\", sys.argv[2].encode())' {path} '{record}'"
    result = as_user(user, script)
    assert result.returncode == 0, result.stderr


def test_an_objects_owner_cannot_publish_it_by_writing_its_metadata_attribute(unix, sticky_gateway):
    """Finding 5: alice may write objects in bob's project bucket, whose owner blocks public
    ACLs. She writes `{"meta":{"acl":"public-read"}}` into her object's `user.isthmus`
    attribute (she owns the file); anonymous readers must still be refused. An ACL the gateway
    recorded itself keeps working, and stops at the file it was recorded for."""
    srv, root = sticky_gateway
    bob = make_client(srv.endpoint, "bob", SECRET)
    alice = make_client(srv.endpoint, "alice", SECRET)
    bob.create_bucket(Bucket="shared")
    # The kernel decides who writes in a posix pool: the project group may.
    bucket = root / "shared"
    os.chown(bucket, unix["bob"].pw_uid, grp.getgrnam(GROUP).gr_gid)
    bucket.chmod(0o2775)
    bob.put_public_access_block(Bucket="shared", PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": False, "BlockPublicPolicy": True, "RestrictPublicBuckets": False,
    })
    alice.put_object(Bucket="shared", Key="leak.txt", Body=b"project data")
    path = bucket / "leak.txt"
    assert path.stat().st_uid == unix["alice"].pw_uid
    assert code_of(alice.put_object_acl, Bucket="shared", Key="leak.txt", ACL="public-read") in ("AccessDenied", "InvalidRequest")
    set_record_as(USERS["alice"], path, forge_record(path, {"acl": "public-read"}))
    time.sleep(1.2)
    assert requests.get(f"{srv.endpoint}/shared/leak.txt", timeout=10).status_code == 403

    # A sealed ACL copied onto another file does not travel with it.
    bob.create_bucket(Bucket="public")
    bob.put_object(Bucket="public", Key="open.txt", Body=b"for everyone", ACL="public-read")
    assert requests.get(f"{srv.endpoint}/public/open.txt", timeout=10).content == b"for everyone"
    sealed = os.getxattr(root / "public" / "open.txt", "user.isthmus")
    bob.put_object(Bucket="public", Key="private.txt", Body=b"bob only")
    os.setxattr(root / "public" / "private.txt", "user.isthmus", sealed)
    os.utime(root / "public" / "private.txt", ns=(0, os.stat(root / "public" / "open.txt").st_mtime_ns))
    time.sleep(1.2)
    assert requests.get(f"{srv.endpoint}/public/private.txt", timeout=10).status_code == 403
    assert requests.get(f"{srv.endpoint}/public/open.txt", timeout=10).content == b"for everyone"


def test_a_forged_record_never_makes_get_or_head_fail(unix, sticky_gateway):
    """Finding 5, second half: a record with part sizes that overflow, an ETag that is no ETag
    and headers no response may carry made GET/HEAD answer 500 or drop the connection. The
    record is the writer's to forge; the answers stay well-formed."""
    srv, root = sticky_gateway
    alice = make_client(srv.endpoint, "alice", SECRET)
    alice.create_bucket(Bucket="mine")
    alice.put_object(Bucket="mine", Key="data", Body=b"0123456789")
    path = root / "mine" / "data"
    forged = {
        "parts": [[18446744073709551615, 4294967295], [7, 3]],
        "meta": {"content_type": "text/plain\r\nX-Injected: yes", "user": {"a\nb": "c", "ok": "line\nbreak"}},
    }
    set_record_as(USERS["alice"], path, forge_record(path, forged["meta"], parts=forged["parts"]))
    time.sleep(1.2)
    head = alice.head_object(Bucket="mine", Key="data")
    assert head["ContentLength"] == 10 and "X-Injected" not in head["ResponseMetadata"]["HTTPHeaders"]
    assert alice.get_object(Bucket="mine", Key="data")["Body"].read() == b"0123456789"
    assert code_of(alice.get_object, Bucket="mine", Key="data", PartNumber=2) == "InvalidPart"
    # An ETag that is no ETag: the record is dropped and the ETag recomputed.
    set_record_as(USERS["alice"], path, forge_record(path, etag='bad"etag\r\nX: y'))
    time.sleep(1.2)
    head = alice.head_object(Bucket="mine", Key="data")
    assert head["ETag"].strip('"') == "781e5e245d69b566979b86e28d23f2c7"  # MD5 of 0123456789
