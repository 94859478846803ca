"""`isthmus admin` against a running gateway, as its root user: users added, disabled, enabled,
rotated, mapped to Unix identities and removed while the gateway serves (boto3 sees each change
at once), kept in the data root across restarts and seen by a second gateway on the same root;
buckets listed with owner, pool and usage; the status page; refusals."""

import json
import os
import pwd
import shutil
import subprocess

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, Server, binary, make_client, wait_until


def admin(server, *args, keys=f"{ACCESS_KEY}:{SECRET_KEY}", check=True):
    """Runs `isthmus admin ... --json` against `server`; returns the parsed JSON lines."""
    cmd = [str(binary()), "admin", *args, "--endpoint", server.endpoint, "--json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
    if keys:
        env["ISTHMUS_ADMIN_KEYS"] = keys
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc


def error_code(call):
    with pytest.raises(ClientError) as err:
        call()
    return err.value.response["Error"]["Code"]


def test_a_user_added_works_at_once_and_disable_enable_rotate_remove_apply_live(server):
    [alice] = admin(server, "users", "add", "alice", "--bucket", "shared-*")
    assert len(alice["secret_key"]) == 40
    s3 = make_client(server.endpoint, alice["access_key"], alice["secret_key"])
    s3.create_bucket(Bucket="alices")
    s3.put_object(Bucket="alices", Key="a/b.txt", Body=b"x" * 1000)
    root = make_client(server.endpoint)
    root.create_bucket(Bucket="shared-data")
    s3.put_object(Bucket="shared-data", Key="k", Body=b"granted")  # the --bucket grant applies
    root.create_bucket(Bucket="private")
    assert error_code(lambda: s3.put_object(Bucket="private", Key="k", Body=b"")) == "AccessDenied"

    users = {u["display_name"]: u for u in admin(server, "users", "list")}
    assert users["alice"]["source"] == "managed" and users["alice"]["disabled"] is False
    assert users["alice"]["buckets"] == ["shared-*"]
    assert users["root"]["source"] == "root"
    assert all("secret_key" not in u for u in users.values())

    buckets = {b["name"]: b for b in admin(server, "buckets")}
    assert buckets["alices"]["owner"] == alice["access_key"]
    assert buckets["alices"]["pool"] == "default"
    assert (buckets["alices"]["objects"], buckets["alices"]["bytes"]) == (1, 1000)
    assert buckets["private"]["owner"] == ACCESS_KEY

    admin(server, "users", "disable", "alice")
    assert error_code(lambda: s3.list_objects_v2(Bucket="alices")) == "InvalidAccessKeyId"
    # A presigned URL of a disabled user stops working too.
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "alices", "Key": "a/b.txt"})
    assert requests.get(url, timeout=10).status_code == 403
    admin(server, "users", "enable", alice["access_key"])
    assert s3.get_object(Bucket="alices", Key="a/b.txt")["Body"].read() == b"x" * 1000

    [rotated] = admin(server, "users", "rotate", "alice")
    assert rotated["access_key"] == alice["access_key"] and rotated["secret_key"] != alice["secret_key"]
    assert error_code(lambda: s3.list_objects_v2(Bucket="alices")) == "SignatureDoesNotMatch"
    fresh = make_client(server.endpoint, alice["access_key"], rotated["secret_key"])
    assert fresh.list_objects_v2(Bucket="alices")["KeyCount"] == 1

    admin(server, "users", "remove", "alice")
    assert error_code(lambda: fresh.list_objects_v2(Bucket="alices")) == "InvalidAccessKeyId"
    # Her bucket stays, the root user still reaches it.
    assert root.get_object(Bucket="alices", Key="a/b.txt")["Body"].read() == b"x" * 1000


def test_changes_persist_in_the_data_root_and_reach_a_second_gateway(tmp_path):
    root = tmp_path / "data"
    first = Server(root)
    second = Server(root)
    try:
        [bob] = admin(first, "users", "add", "bob", "--access-key", "BOBKEY")
        assert bob["access_key"] == "BOBKEY"
        users_file = root / ".isthmus" / "users.toml"
        assert users_file.stat().st_mode & 0o777 == 0o600
        on_second = make_client(second.endpoint, "BOBKEY", bob["secret_key"])

        def second_accepts():
            try:
                on_second.list_buckets()
                return True
            except ClientError:
                return False

        assert wait_until(second_accepts, timeout=15), "the second gateway never picked up the new user"
        admin(second, "users", "disable", "bob")
        on_first = make_client(first.endpoint, "BOBKEY", bob["secret_key"])
        assert not second_accepts()

        def first_refuses():
            try:
                on_first.list_buckets()
                return False
            except ClientError as err:
                return err.response["Error"]["Code"] == "InvalidAccessKeyId"

        assert wait_until(first_refuses, timeout=15), "the first gateway never picked up the disabling"
        # Both gateways changed the file; neither lost the other's change.
        admin(first, "users", "add", "carol")
        names = {u["display_name"]: u for u in admin(second, "users", "list")}
        assert names["bob"]["disabled"] is True and "carol" in names
    finally:
        first.stop()
        second.stop()
    again = Server(root)
    try:
        names = {u["display_name"]: u for u in admin(again, "users", "list")}
        assert names["bob"]["disabled"] is True and names["carol"]["source"] == "managed"
        assert error_code(make_client(again.endpoint, "BOBKEY", bob["secret_key"]).list_buckets) == "InvalidAccessKeyId"
    finally:
        again.stop()


def test_refusals_are_clear(server, tmp_path):
    [dave] = admin(server, "users", "add", "dave")
    # Only the root user administers: another user's keys, a wrong secret, no keys at all.
    proc = admin(server, "users", "list", keys=f"{dave['access_key']}:{dave['secret_key']}", check=False)
    assert proc.returncode != 0 and "AccessDenied" in proc.stderr and "root" in proc.stderr
    proc = admin(server, "status", keys=f"{ACCESS_KEY}:wrong", check=False)
    assert proc.returncode != 0 and "SignatureDoesNotMatch" in proc.stderr
    unsigned = requests.get(f"{server.endpoint}/?isthmus-admin=users", timeout=10)
    assert unsigned.status_code == 403 and b"AccessDenied" in unsigned.content
    # Names and keys are unique; unknown users are named; root cannot be disabled or rotated.
    proc = admin(server, "users", "add", "dave", check=False)
    assert proc.returncode != 0 and "EntityAlreadyExists" in proc.stderr
    proc = admin(server, "users", "add", "eve", "--access-key", dave["access_key"], check=False)
    assert "is taken" in proc.stderr
    proc = admin(server, "users", "add", "eve", "--access-key", "bad key/", check=False)
    assert "InvalidArgument" in proc.stderr
    proc = admin(server, "users", "disable", "nobody-here", check=False)
    assert "NoSuchEntity" in proc.stderr and "nobody-here" in proc.stderr
    proc = admin(server, "users", "disable", "root", check=False)
    assert "cannot be disabled" in proc.stderr
    proc = admin(server, "users", "rotate", "root", check=False)
    assert "credentials.toml" in proc.stderr
    proc = admin(server, "users", "map", "dave", "--unix-user", "no-such-unix-user-isthmus", check=False)
    assert proc.returncode != 0 and "no-such-unix-user-isthmus" in proc.stderr
    # Nothing of the refused calls reached the file.
    users = admin(server, "users", "list")
    assert sorted(u["display_name"] for u in users) == ["dave", "root"]
    # A client with no way to find root keys says how to give them.
    proc = subprocess.run(
        [str(binary()), "admin", "status", "--endpoint", server.endpoint, "--root", str(tmp_path / "none")],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"]}, timeout=30,
    )
    assert proc.returncode != 0 and "--keys" in proc.stderr and proc.stderr.count("\n") == 1


def test_configured_users_can_be_disabled_but_are_changed_in_their_file(tmp_path):
    config = tmp_path / "isthmus.toml"
    config.write_text('[[users]]\naccess_key = "CONFIGURED"\nsecret_key = "configured-secret-0123456789"\n'
                      'display_name = "frank"\n')
    server = Server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        frank = make_client(server.endpoint, "CONFIGURED", "configured-secret-0123456789")
        frank.list_buckets()
        proc = admin(server, "users", "rotate", "frank", check=False)
        assert proc.returncode != 0 and "configuration file" in proc.stderr
        admin(server, "users", "disable", "frank")
        assert error_code(frank.list_buckets) == "InvalidAccessKeyId"
        admin(server, "users", "enable", "frank")
        frank.list_buckets()
    finally:
        server.stop()


def test_status_page_and_human_output(server):
    make_client(server.endpoint).create_bucket(Bucket="one")
    [status] = admin(server, "status")
    assert status["buckets"] == 1 and status["users"]["total"] == 1
    assert status["listeners"]["s3"] == f"127.0.0.1:{server.port}"
    assert status["pools"][0]["name"] == "default" and status["pools"][0]["free_bytes"] > 0
    assert status["traffic"]["requests"] >= 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
    env["ISTHMUS_ADMIN_KEYS"] = f"{ACCESS_KEY}:{SECRET_KEY}"
    text = subprocess.run([str(binary()), "admin", "buckets", "--endpoint", server.endpoint],
                          capture_output=True, text=True, env=env, check=True).stdout
    assert "owner" in text and "one" in text and ACCESS_KEY in text


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates a Unix user and switches identities")
def test_users_added_on_a_posix_gateway_run_as_their_unix_identity(tmp_path):
    from test_identity import remove_unix_user, run, traversable_root

    name = "isth-adm-grace"
    remove_unix_user(name)
    run("useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name)
    base, root = traversable_root("isthmus-admin-")
    config = base / "isthmus.toml"
    config.write_text('identity = "posix"\nroot_identity = { unix_user = "nobody" }\n')
    server = Server(root, extra_args=["--config", str(config)])
    try:
        proc = admin(server, "users", "add", "grace", check=False)
        assert proc.returncode != 0 and "Unix identity" in proc.stderr
        [grace] = admin(server, "users", "add", "grace", "--unix-user", name, "--umask", "027")
        # The bucket directory is made by her; so is the object, with her umask.
        (root).chmod(0o1777)
        s3 = make_client(server.endpoint, grace["access_key"], grace["secret_key"])
        s3.create_bucket(Bucket="graces")
        s3.put_object(Bucket="graces", Key="f", Body=b"mine")
        info = os.stat(root / "graces" / "f")
        assert pwd.getpwuid(info.st_uid).pw_name == name
        assert info.st_mode & 0o777 == 0o640
        [listed] = [u for u in admin(server, "users", "list") if u["display_name"] == "grace"]
        assert listed["unix"]["unix_user"] == name and listed["unix_resolved"] is True
    finally:
        server.stop()
        remove_unix_user(name)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="maps a user to uid 0, the uid this test runs as")
def test_disabling_a_user_closes_its_open_local_socket_connection(tmp_path):
    import isthmus

    config = tmp_path / "isthmus.toml"
    # A user of the configuration file (no managed user: nothing else changes on disabling).
    config.write_text('allow_root = true\n[[users]]\naccess_key = "LOCAL"\nsecret_key = "local-secret-0123456789"\n'
                      'display_name = "local"\nuid = 0\ngid = 0\n')
    socket = tmp_path / "isthmus.sock"
    server = Server(tmp_path / "data", extra_args=["--config", str(config), "--local-socket", str(socket)])
    try:
        store = isthmus.connect(f"unix://{socket}")  # this process's uid is the user's
        store.create_bucket("locals")
        store.put_object("locals", "k", b"v")
        admin(server, "users", "disable", "local")
        with pytest.raises(isthmus.IsthmusError) as refused:
            store.get_object("locals", "k")  # the same connection, its next call
        assert refused.value.args[0] == "AccessDenied"
        admin(server, "users", "enable", "local")
        assert store.get_object("locals", "k") == b"v"
    finally:
        server.stop()
