"""The adversarial suite (issue 28): each test plays a hostile user against a real gateway, with
real Unix users where identities matter, and names the finding it guards. Findings about array
files and third-party copy have files of their own (test_security_arrays.py,
test_security_tpc.py); token scopes and audiences are in test_tokens.py, disabled users on the
local socket in test_admin.py."""

import base64
import concurrent.futures
import email.utils
import hashlib
import hmac
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from conftest import ACCESS_KEY, SECRET_KEY, code_of, make_client, Server, use_erasure_default_pool, wait_until

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")

PREFIX = "isec"
USERS = {"alice": f"{PREFIX}-alice", "bob": f"{PREFIX}-bob", "admin": f"{PREFIX}-admin"}
SECRET = "secret-key-0123456789"



@pytest.fixture(scope="module")
def unix():
    """Unix users alice, bob and admin, removed afterwards."""
    for name in USERS.values():
        subprocess.run(["userdel", name], capture_output=True)
    for name in USERS.values():
        subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name], check=True, capture_output=True)
    yield {short: pwd.getpwnam(name) for short, name in USERS.items()}
    for name in USERS.values():
        subprocess.run(["userdel", name], capture_output=True)


def posix_gateway(extra_config="", extra_args=(), erasure=False, base=None, identity="posix"):
    """A gateway with `identity = "posix"` (or `identity`) on a data root every user may
    traverse (in `base`, made if not given); alice and bob are S3 users mapped to their Unix
    users. Returns (server, base directory)."""
    if base is None:
        base = Path(tempfile.mkdtemp(prefix="isthmus-security-"))
        base.chmod(0o755)
        (base / "data").mkdir()
        (base / "data").chmod(0o755)
    root = base / "data"
    if erasure:
        use_erasure_default_pool(root, base / "drives")
    users = "".join(
        f'[[users]]\naccess_key = "{short}"\nsecret_key = "{SECRET}"\nunix_user = "{name}"\n'
        for short, name in USERS.items()
        if short != "admin"
    )
    config = base / "isthmus.toml"
    config.write_text(f'identity = "{identity}"\nroot_identity = {{ unix_user = "{USERS["admin"]}" }}\n{users}{extra_config}')
    return Server(root, extra_args=["--config", str(config), *extra_args]), base


@needs_root
def test_posix_identity_on_an_erasure_pool_keeps_private_objects_private(unix):
    """Finding 3: with Unix identities, the authorization layer left object access to the
    kernel, which never refuses anything in an erasure-coded pool (the shards are the
    gateway's). The gateway judges those buckets by the S3 rules now."""
    # Alice's bucket and object were made before the site turned Unix identities on (as after
    # an `isthmus pool migrate` to the erasure-coded pool): the shards are the gateway's files.
    srv, base = posix_gateway(erasure=True, identity="gateway")
    try:
        alice = make_client(srv.endpoint, "alice", SECRET)
        alice.create_bucket(Bucket="alice-private")
        alice.put_object(Bucket="alice-private", Key="diary.txt", Body=b"dear diary")
    finally:
        srv.stop()
    srv, base = posix_gateway(erasure=True, base=base)
    try:
        alice = make_client(srv.endpoint, "alice", SECRET)
        bob = make_client(srv.endpoint, "bob", SECRET)
        assert alice.get_object(Bucket="alice-private", Key="diary.txt")["Body"].read() == b"dear diary"
        assert [o["Key"] for o in alice.list_objects_v2(Bucket="alice-private")["Contents"]] == ["diary.txt"]
        assert code_of(bob.get_object, Bucket="alice-private", Key="diary.txt") == "AccessDenied"
        assert code_of(bob.list_objects_v2, Bucket="alice-private") == "AccessDenied"
        assert code_of(bob.head_object, Bucket="alice-private", Key="diary.txt") in ("403", "AccessDenied")
        assert code_of(bob.put_object, Bucket="alice-private", Key="diary.txt", Body=b"overwritten") == "AccessDenied"
        assert code_of(bob.delete_object, Bucket="alice-private", Key="diary.txt") == "AccessDenied"
        assert code_of(bob.copy_object, Bucket="alice-private", Key="copy", CopySource="alice-private/diary.txt") == "AccessDenied"
        bob.create_bucket(Bucket="bob-bucket")
        copy = code_of(bob.copy_object, Bucket="bob-bucket", Key="stolen", CopySource="alice-private/diary.txt")
        assert copy == "AccessDenied"
        assert "alice-private" not in [b["Name"] for b in bob.list_buckets()["Buckets"]]
        assert alice.get_object(Bucket="alice-private", Key="diary.txt")["Body"].read() == b"dear diary"
        # Users can also make buckets there now (they could not: the drives are the gateway's).
        alice.create_bucket(Bucket="alice-new")
        alice.put_object(Bucket="alice-new", Key="k", Body=b"new")
        assert code_of(bob.get_object, Bucket="alice-new", Key="k") == "AccessDenied"
        # Sharing works as S3 says: a public-read bucket ACL lets bob list, not read or write;
        # the object's own public-read ACL lets him read it.
        alice.put_bucket_acl(Bucket="alice-private", ACL="public-read")
        assert [o["Key"] for o in bob.list_objects_v2(Bucket="alice-private")["Contents"]] == ["diary.txt"]
        assert code_of(bob.get_object, Bucket="alice-private", Key="diary.txt") == "AccessDenied"
        alice.put_object_acl(Bucket="alice-private", Key="diary.txt", ACL="public-read")
        assert bob.get_object(Bucket="alice-private", Key="diary.txt")["Body"].read() == b"dear diary"
        assert code_of(bob.put_object, Bucket="alice-private", Key="x", Body=b"x") == "AccessDenied"
        # The gateway's refusals are logged once each, naming who and the rule.
        refused = [line for line in srv.output().splitlines() if " refused " in line and 'who="bob"' in line]
        assert any("ACL does not grant Write" in line and "alice-private" in line for line in refused), refused
    finally:
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)


@needs_root
def test_quota_usage_is_counted_with_the_gateways_identity(unix):
    """Finding 4: the first usage count ran as the requesting user and skipped what she could
    not read, so she could write past the quota by its size."""
    srv, base = posix_gateway(extra_config='[[quotas]]\nbucket = "proj"\nmax_bytes = 1000\n')
    try:
        bucket = srv.root / "proj"
        bucket.mkdir()
        bucket.chmod(0o777)
        hidden = bucket / "private"
        hidden.mkdir(mode=0o700)  # root's, unreadable by alice
        (hidden / "big.bin").write_bytes(b"r" * 800)
        alice = make_client(srv.endpoint, "alice", SECRET)
        # 800 bytes are used: 600 more would make 1400 of 1000.
        assert code_of(alice.put_object, Bucket="proj", Key="mine.bin", Body=b"a" * 600) == "QuotaExceeded"
        assert not (bucket / "mine.bin").exists()
        alice.put_object(Bucket="proj", Key="small.bin", Body=b"a" * 150)
        assert code_of(alice.put_object, Bucket="proj", Key="more.bin", Body=b"a" * 100) == "QuotaExceeded"
    finally:
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)


@needs_root
def test_a_reopened_access_log_belongs_to_the_gateway_not_the_last_user(unix):
    """Finding 5: SIGHUP reopened the access log on an async worker that still rested in the
    last request's Unix identity, so the new file could belong to that user."""
    logs = Path(tempfile.mkdtemp(prefix="isthmus-logs-"))
    logs.chmod(0o777)  # the user could create the file, were the reopen done as her
    log = logs / "access.log"
    srv, base = posix_gateway(extra_args=["--access-log", str(log)])
    try:
        bucket = srv.root / "pub"
        bucket.mkdir()
        bucket.chmod(0o777)
        alice = make_client(srv.endpoint, "alice", SECRET)
        alice.put_object(Bucket="pub", Key="small", Body=b"tiny")

        def read_many(_):
            for _ in range(20):
                alice.get_object(Bucket="pub", Key="small")["Body"].read()

        # Short reads on a local file system run inline: every async worker rests as alice.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(read_many, range(8)))
        log.rename(logs / "access.log.1")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(log.exists, timeout=10), "the access log was not reopened"
        alice.get_object(Bucket="pub", Key="small")["Body"].read()
        assert log.stat().st_uid == os.geteuid(), "the new access log belongs to a user"
        assert wait_until(lambda: "GetObject" in log.read_text(), timeout=10)
    finally:
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


def sigv2_get(endpoint, path, date, access_key=ACCESS_KEY, secret_key=SECRET_KEY):
    """A GET signed with AWS Signature Version 2 in the header, dated `date`."""
    string_to_sign = f"GET\n\n\n{date}\n{path}"
    signature = base64.b64encode(hmac.new(secret_key.encode(), string_to_sign.encode(), hashlib.sha1).digest()).decode()
    return requests.get(endpoint + path, headers={"Date": date, "Authorization": f"AWS {access_key}:{signature}"}, timeout=30)


def test_a_captured_sigv2_request_cannot_be_replayed_later(server, s3):
    """Finding 7: SigV2 header signatures had no time window (s3s does not check it), so a
    captured request worked forever. As in AWS, its date must be within 15 minutes."""
    s3.create_bucket(Bucket="replay")
    s3.put_object(Bucket="replay", Key="k", Body=b"secret")
    now = time.time()
    fresh = sigv2_get(server.endpoint, "/replay/k", email.utils.formatdate(now, usegmt=True))
    assert fresh.status_code == 200 and fresh.content == b"secret"
    slightly_off = sigv2_get(server.endpoint, "/replay/k", email.utils.formatdate(now - 10 * 60, usegmt=True))
    assert slightly_off.status_code == 200
    for offset in (-20 * 60, -24 * 3600, 20 * 60):
        old = sigv2_get(server.endpoint, "/replay/k", email.utils.formatdate(now + offset, usegmt=True))
        assert old.status_code == 403, (offset, old.text)
        assert "<Code>RequestTimeTooSkewed</Code>" in old.text and b"secret" not in old.content
    undated = requests.get(server.endpoint + "/replay/k", headers={"Authorization": f"AWS {ACCESS_KEY}:AAAA"}, timeout=30)
    assert undated.status_code == 403 and "<Code>AccessDenied</Code>" in undated.text
