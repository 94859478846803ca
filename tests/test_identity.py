"""identity = "posix": each S3 user is a real Unix user (made here with useradd/groupadd), every
file-system call of a request runs with that user's uid, groups and umask, and the kernel's
permission checks (modes, groups, POSIX ACLs) decide, as they would for the user's own shell."""

import grp
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import binary, code_of, make_client, Server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")

PREFIX = "isth"
USERS = {"alice": f"{PREFIX}-alice", "bob": f"{PREFIX}-bob", "carol": f"{PREFIX}-carol", "admin": f"{PREFIX}-admin"}
PROJECT = f"{PREFIX}-proj"
SECRET = "secret-key-0123456789"


def run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def remove_unix_user(name):
    subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture(scope="module")
def unix():
    """Users alice, bob, carol, admin and the project group (alice in it), removed afterwards."""
    for name in USERS.values():
        remove_unix_user(name)
    subprocess.run(["groupdel", PROJECT], capture_output=True)
    run("groupadd", PROJECT)
    for name in USERS.values():
        run("useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name)
    run("usermod", "-aG", PROJECT, USERS["alice"])
    yield {short: pwd.getpwnam(name) for short, name in USERS.items()}
    for name in USERS.values():
        remove_unix_user(name)
    subprocess.run(["groupdel", PROJECT], capture_output=True)


def config_text(extra_users=""):
    users = "".join(
        f'[[users]]\naccess_key = "{short}"\nsecret_key = "{SECRET}"\nunix_user = "{name}"\n'
        + ('umask = 0o027\n' if short == "alice" else "")
        for short, name in USERS.items()
        if short != "admin"
    )
    return f'identity = "posix"\nroot_identity = {{ unix_user = "{USERS["admin"]}" }}\n{users}{extra_users}'


@pytest.fixture
def world(unix):
    """A data root every user may traverse (not pytest's private tmp), a posix-mode gateway on
    it, and a client per user."""
    base, root = traversable_root()
    config = base / "isthmus.toml"
    config.write_text(config_text())
    srv = Server(root, extra_args=["--config", str(config)])
    clients = {short: make_client(srv.endpoint, short, SECRET) for short in USERS if short != "admin"}
    yield srv, root, unix, clients
    srv.stop()
    shutil.rmtree(base, ignore_errors=True)


def traversable_root(prefix="isthmus-identity-"):
    """A fresh base directory and data root in it that every user may traverse (pytest's own
    temporary directories are private to root)."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    root = base / "data"
    root.mkdir()
    root.chmod(0o755)
    return base, root


def make_dir(path: Path, owner, group=None, mode=0o755):
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, owner.pw_uid, group if group is not None else owner.pw_gid)
    path.chmod(mode)
    return path


def make_file(path: Path, owner, mode, data=b"data", group=None):
    path.write_bytes(data)
    os.chown(path, owner.pw_uid, group if group is not None else owner.pw_gid)
    path.chmod(mode)



def keys(client, bucket, **kwargs):
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kwargs)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def project_bucket(root, unix, name="proj"):
    """A project directory: root-owned, group project, setgid, group-writable."""
    return make_dir(root / name, unix["admin"], grp.getgrnam(PROJECT).gr_gid, 0o2775)


def test_objects_are_created_as_the_user_with_her_umask_and_the_directorys_group(world):
    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    c["alice"].put_object(Bucket="proj", Key="runs/1/out.dat", Body=b"x" * 100)
    c["alice"].put_object(Bucket="proj", Key="top.txt", Body=b"t")
    for rel in ["runs", "runs/1", "runs/1/out.dat", "top.txt"]:
        st = (bucket / rel).stat()
        assert st.st_uid == unix["alice"].pw_uid, rel
        # The set-gid directory's group is inherited, as for any file alice makes there.
        assert st.st_gid == grp.getgrnam(PROJECT).gr_gid, rel
    assert (bucket / "runs/1/out.dat").stat().st_mode & 0o777 == 0o640  # umask 027
    assert (bucket / "runs").stat().st_mode & 0o777 == 0o750
    assert c["alice"].get_object(Bucket="proj", Key="runs/1/out.dat")["Body"].read() == b"x" * 100
    # No temporary name was left anywhere.
    assert sorted(p.name for p in (bucket / "runs/1").iterdir()) == ["out.dat"]


def test_the_kernel_decides_who_reads_what(world):
    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    project_gid = grp.getgrnam(PROJECT).gr_gid
    make_file(bucket / "bob-private", unix["bob"], 0o600)
    make_file(bucket / "group-readable", unix["bob"], 0o640, group=project_gid)
    make_file(bucket / "world-readable", unix["bob"], 0o644)
    expected = {
        ("alice", "bob-private"): "AccessDenied",
        ("alice", "group-readable"): "OK",
        ("alice", "world-readable"): "OK",
        ("bob", "bob-private"): "OK",
        ("carol", "group-readable"): "AccessDenied",
        ("carol", "world-readable"): "OK",
    }
    for (user, key), want in expected.items():
        assert code_of(c[user].get_object, Bucket="proj", Key=key) == want, (user, key)
        head = code_of(c[user].head_object, Bucket="proj", Key=key)
        assert head == ("OK" if want == "OK" else "403"), (user, key, head)


def test_writes_and_deletes_need_the_directorys_permission_and_leave_nothing(world):
    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    readonly = make_dir(bucket / "bobs", unix["bob"], mode=0o755)
    make_file(readonly / "keep", unix["bob"], 0o644)
    assert code_of(c["alice"].put_object, Bucket="proj", Key="bobs/new", Body=b"x") == "AccessDenied"
    assert code_of(c["alice"].put_object, Bucket="proj", Key="bobs/sub/new", Body=b"x") == "AccessDenied"
    assert code_of(c["alice"].delete_object, Bucket="proj", Key="bobs/keep") == "AccessDenied"
    assert code_of(c["alice"].copy_object, Bucket="proj", Key="bobs/copy", CopySource="proj/bobs/keep") == "AccessDenied"
    assert code_of(c["alice"].create_multipart_upload, Bucket="proj", Key="bobs/mp") == "AccessDenied"
    assert sorted(p.name for p in readonly.iterdir()) == ["keep"]
    # Bob may.
    c["bob"].put_object(Bucket="proj", Key="bobs/new", Body=b"x")
    c["bob"].delete_object(Bucket="proj", Key="bobs/keep")
    assert sorted(p.name for p in readonly.iterdir()) == ["new"]


def test_listings_leave_out_what_the_user_cannot_read(world):
    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    secret = make_dir(bucket / "secret", unix["bob"], mode=0o700)
    make_file(secret / "a", unix["bob"], 0o644)
    enter_only = make_dir(bucket / "enter-only", unix["bob"], mode=0o711)
    make_file(enter_only / "b", unix["bob"], 0o644)
    make_file(bucket / "bob-private", unix["bob"], 0o600)
    make_file(bucket / "open", unix["bob"], 0o644)
    assert keys(c["alice"], "proj") == ["open"]
    assert keys(c["bob"], "proj") == ["bob-private", "enter-only/b", "open", "secret/a"]
    # A prefix she cannot read is an empty listing, not an error; the object itself can be
    # read where she may enter the directory (as `cat enter-only/b` works).
    assert keys(c["alice"], "proj", Prefix="secret/") == []
    assert c["alice"].get_object(Bucket="proj", Key="enter-only/b")["Body"].read() == b"data"


def test_buckets_are_visible_to_who_may_enter_them(world):
    srv, root, unix, c = world
    make_dir(root / "bob-only", unix["bob"], mode=0o700)
    make_dir(root / "everyone", unix["bob"], mode=0o755)
    names = lambda client: [b["Name"] for b in client.list_buckets()["Buckets"]]
    assert names(c["alice"]) == ["everyone"]
    assert names(c["bob"]) == ["bob-only", "everyone"]
    assert code_of(c["alice"].head_bucket, Bucket="bob-only") == "403"
    assert code_of(c["alice"].list_objects_v2, Bucket="bob-only") == "AccessDenied"


def test_create_bucket_makes_a_directory_of_hers_where_the_root_allows(world):
    srv, root, unix, c = world
    assert code_of(c["alice"].create_bucket, Bucket="alice-new") == "AccessDenied"
    assert not (root / "alice-new").exists()
    root.chmod(0o1777)  # like /tmp: anyone may create, only the owner removes
    c["alice"].create_bucket(Bucket="alice-new")
    st = (root / "alice-new").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (unix["alice"].pw_uid, 0o750)
    c["alice"].put_object(Bucket="alice-new", Key="k", Body=b"v")
    assert code_of(c["bob"].get_object, Bucket="alice-new", Key="k") == "AccessDenied"
    assert code_of(c["bob"].delete_bucket, Bucket="alice-new") == "AccessDenied"
    c["alice"].delete_object(Bucket="alice-new", Key="k")
    c["alice"].delete_bucket(Bucket="alice-new")
    assert not (root / "alice-new").exists()


def test_posix_acls_grant_access(world):
    if shutil.which("setfacl") is None:
        pytest.fail("setfacl is missing: the README's test command installs the acl package")
    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    make_file(bucket / "shared-with-carol", unix["bob"], 0o600)
    assert code_of(c["carol"].get_object, Bucket="proj", Key="shared-with-carol") == "AccessDenied"
    run("setfacl", "-m", f"u:{USERS['carol']}:r", str(bucket / "shared-with-carol"))
    assert c["carol"].get_object(Bucket="proj", Key="shared-with-carol")["Body"].read() == b"data"
    assert code_of(c["alice"].get_object, Bucket="proj", Key="shared-with-carol") == "AccessDenied"
    # A default ACL on a directory: what carol uploads there is readable by bob.
    drop = make_dir(bucket / "drop", unix["carol"], mode=0o700)
    run("setfacl", "-m", f"u:{USERS['bob']}:rx", "-d", "-m", f"u:{USERS['bob']}:r", str(drop))
    c["carol"].put_object(Bucket="proj", Key="drop/report", Body=b"r")
    assert c["bob"].get_object(Bucket="proj", Key="drop/report")["Body"].read() == b"r"


def test_multipart_uploads_belong_to_their_initiator(world):
    srv, root, unix, c = world
    # World-writable without the sticky bit: either user may replace the other's file.
    bucket = make_dir(root / "scratch", unix["admin"], mode=0o777)
    part = b"p" * (5 << 20)
    uploads = {}
    for user in ["alice", "bob"]:
        uploads[user] = c[user].create_multipart_upload(Bucket="scratch", Key="same-key")["UploadId"]
    staged = bucket / ".isthmus" / "uploads" / uploads["alice"]
    assert (staged.stat().st_uid, staged.stat().st_mode & 0o777) == (unix["alice"].pw_uid, 0o700)
    # Bob cannot add to, list or abort alice's upload.
    assert code_of(c["bob"].upload_part, Bucket="scratch", Key="same-key", UploadId=uploads["alice"], PartNumber=1, Body=b"x") == "AccessDenied"
    assert code_of(c["bob"].list_parts, Bucket="scratch", Key="same-key", UploadId=uploads["alice"]) == "AccessDenied"
    assert code_of(c["bob"].abort_multipart_upload, Bucket="scratch", Key="same-key", UploadId=uploads["alice"]) == "AccessDenied"
    for user in ["alice", "bob"]:
        etag = c[user].upload_part(Bucket="scratch", Key="same-key", UploadId=uploads[user], PartNumber=1, Body=part + user.encode())["ETag"]
        c[user].complete_multipart_upload(
            Bucket="scratch", Key="same-key", UploadId=uploads[user], MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
        )
        st = (bucket / "same-key").stat()
        assert st.st_uid == unix[user].pw_uid
        assert (bucket / "same-key").read_bytes().endswith(user.encode())


def test_group_changes_apply_on_sighup(world):
    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    make_file(bucket / "group-file", unix["bob"], 0o640, group=grp.getgrnam(PROJECT).gr_gid)
    assert code_of(c["carol"].get_object, Bucket="proj", Key="group-file") == "AccessDenied"
    run("usermod", "-aG", PROJECT, USERS["carol"])
    try:
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while code_of(c["carol"].get_object, Bucket="proj", Key="group-file") != "OK":
            assert time.time() < deadline, "carol's new group did not apply after SIGHUP"
            time.sleep(0.1)
    finally:
        run("gpasswd", "-d", USERS["carol"], PROJECT)


def test_a_user_gone_from_nss_is_refused_and_creates_nothing(unix, tmp_path):
    gone = f"{PREFIX}-gone"
    remove_unix_user(gone)
    run("useradd", "--no-create-home", "--user-group", gone)
    base, root = traversable_root()
    scratch = make_dir(root / "scratch", unix["admin"], mode=0o1777)
    config = base / "isthmus.toml"
    config.write_text(config_text(f'[[users]]\naccess_key = "gone"\nsecret_key = "{SECRET}"\nunix_user = "{gone}"\n'))
    srv = Server(root, extra_args=["--config", str(config)])
    try:
        client = make_client(srv.endpoint, "gone", SECRET)
        client.put_object(Bucket="scratch", Key="before", Body=b"x")
        remove_unix_user(gone)
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while code_of(client.head_bucket, Bucket="scratch") != "403":
            assert time.time() < deadline, "the removed user was still served"
            time.sleep(0.1)
        assert code_of(client.put_object, Bucket="scratch", Key="after", Body=b"x") == "AccessDenied"
        assert not (scratch / "after").exists()
        assert "no longer resolves" in srv.output()
    finally:
        srv.stop()
        remove_unix_user(gone)
        shutil.rmtree(base, ignore_errors=True)


def start_error(config, user=None):
    """Starts `serve` and returns its one-line error (it must exit non-zero at once)."""
    base = Path(tempfile.mkdtemp(prefix="isthmus-identity-"))
    base.chmod(0o755)
    path = base / "bad.toml"
    path.write_text(config)
    path.chmod(0o644)
    root = base / "root"
    root.mkdir()
    root.chmod(0o1777)
    cmd = [str(binary()), "serve", "--root", str(root), "--address", "127.0.0.1:0", "--config", str(path)]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    env = dict(os.environ, ISTHMUS_ROOT_ACCESS_KEY="rootkey", ISTHMUS_ROOT_SECRET_KEY="root-secret-123")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=env)
    shutil.rmtree(base, ignore_errors=True)
    assert result.returncode != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_bad_identity_configurations_refuse_to_start(unix):
    admin = f'identity = "posix"\nroot_identity = {{ unix_user = "{USERS["admin"]}" }}\n'
    err = start_error(admin + '[[users]]\naccess_key = "ann"\nsecret_key = "ann-secret-1"\nunix_user = "no-such-user-isthmus"\n')
    assert "no-such-user-isthmus" in err and "ann" in err
    err = start_error(admin + '[[users]]\naccess_key = "ann"\nsecret_key = "ann-secret-1"\nuid = 0\ngid = 0\n')
    assert "allow_root" in err
    err = start_error('identity = "posix"\n')
    assert "root_identity" in err
    err = start_error(admin + '[[users]]\naccess_key = "ann"\nsecret_key = "ann-secret-1"\n')
    assert "ann" in err and "unix_user" in err
    # Without the privilege to switch, posix mode is refused, never served as the process.
    nobody = pwd.getpwnam("nobody").pw_uid
    err = start_error(admin, user=nobody)
    assert "CAP_SETUID" in err and "gateway" in err


def test_the_array_service_reads_chunks_as_the_requesting_user(world):
    """A selection's chunks are read on pool threads, each as the request's Unix user: a user
    the kernel refuses a chunk file gets AccessDenied, never the data."""
    import numpy as np

    import isthmus

    srv, root, unix, c = world
    bucket = project_bucket(root, unix)
    where = isthmus.Location.engine(isthmus.Store(str(root)), "proj")
    a = isthmus.Array.create(where, "quake.zarr", shape=(8, 8), dtype="int32", chunks=(4, 8))
    a[...] = np.arange(64, dtype=np.int32).reshape(8, 8)
    for path in (bucket / "quake.zarr").rglob("*"):
        os.chown(path, unix["alice"].pw_uid, unix["alice"].pw_gid)
        path.chmod(0o755 if path.is_dir() else 0o644)
    for chunk in (bucket / "quake.zarr" / "c").rglob("*"):
        if chunk.is_file():
            chunk.chmod(0o600)  # alice's alone; zarr.json stays readable by everyone
    alice = isthmus.Gateway(srv.endpoint, "alice", SECRET)
    np.testing.assert_array_equal(alice.select("proj", "quake.zarr", "[2:6, ::2]"), a[2:6, ::2])
    bob = isthmus.Gateway(srv.endpoint, "bob", SECRET)
    assert bob.info("proj", "quake.zarr")["shape"] == [8, 8]
    with pytest.raises(isthmus.IsthmusError) as err:
        bob.select("proj", "quake.zarr", "[2:6, ::2]")
    assert err.value.args[0] == "AccessDenied", err.value.args
    with pytest.raises(isthmus.IsthmusError) as err:
        bob.where("proj", "quake.zarr", "value > 3")
    assert err.value.args[0] == "AccessDenied", err.value.args
