"""Authentication: wrong or missing signatures, unknown keys and anonymous requests are refused;
root credentials are created once, private, on first start."""

import os
import stat
import subprocess

import pytest
import requests
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import Server, binary, free_port, make_client


def code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def test_wrong_secret_is_refused(server):
    s3 = make_client(server.endpoint, secret_key="not-the-right-secret-key")
    with pytest.raises(ClientError) as e:
        s3.list_buckets()
    assert code(e) == "SignatureDoesNotMatch"


def test_unknown_access_key_is_refused(server):
    s3 = make_client(server.endpoint, access_key="NOBODYHASTHISKEY0000")
    with pytest.raises(ClientError) as e:
        s3.list_buckets()
    assert code(e) == "InvalidAccessKeyId"


def test_anonymous_requests_are_refused(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    anon = make_client(server.endpoint, signature_version=UNSIGNED)
    with pytest.raises(ClientError) as e:
        anon.get_object(Bucket=bucket, Key="k")
    assert code(e) == "AccessDenied"
    assert requests.get(f"{server.endpoint}/{bucket}/k", timeout=10).status_code == 403
    assert requests.put(f"{server.endpoint}/{bucket}/k2", data=b"x", timeout=10).status_code == 403
    assert not (server.root / bucket / "k2").exists()
    # An empty Authorization header is no credential: anonymous, refused as such (403), not a
    # malformed request (400).
    r = requests.get(f"{server.endpoint}/{bucket}/k", headers={"Authorization": ""}, timeout=10)
    assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text, r.text


def test_x_amz_date_wins_over_date(server, s3, bucket):
    """A SigV4 request carrying both Date and x-amz-date (as some HTTP stacks add Date) is
    judged by x-amz-date, even when Date is signed and years off."""
    from conftest import ACCESS_KEY, SECRET_KEY
    from sigv4 import EMPTY_SHA256, _authorize, _now

    s3.put_object(Bucket=bucket, Key="dated", Body=b"v")
    amz_date, date = _now()
    host = server.endpoint.split("://", 1)[1]
    path = f"/{bucket}/dated"
    headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": EMPTY_SHA256,
               "date": "Mon, 01 Jan 2001 00:00:00 GMT"}
    _authorize(headers, "GET", path, "", EMPTY_SHA256, ACCESS_KEY, SECRET_KEY, amz_date, date)
    del headers["host"]
    r = requests.get(server.endpoint + path, headers=headers, timeout=10)
    assert r.status_code == 200 and r.content == b"v", r.text


def test_config_file_users(tmp_path):
    config = tmp_path / "isthmus.toml"
    config.write_text('[[users]]\naccess_key = "alice"\nsecret_key = "alice-secret-0123"\ndisplay_name = "Alice"\n')
    srv = Server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        alice = make_client(srv.endpoint, access_key="alice", secret_key="alice-secret-0123")
        alice.create_bucket(Bucket="alices")
        assert [b["Name"] for b in alice.list_buckets()["Buckets"]] == ["alices"]
        # The root user from the environment still works alongside.
        assert make_client(srv.endpoint).list_buckets()["Buckets"][0]["Name"] == "alices"
    finally:
        srv.stop()


def lines_until(proc, marker, limit=30):
    """The server's first output lines, up to the one containing `marker`."""
    lines = []
    while len(lines) < limit:
        lines.append(proc.stdout.readline())
        if marker in lines[-1]:
            return lines
    raise AssertionError(f"no {marker!r} in the first lines: {lines}")


def test_root_credentials_created_once_and_private(tmp_path):
    root = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_ROOT_")}
    port = free_port()
    proc = subprocess.Popen([str(binary()), "serve", "--root", str(root), "--address", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        lines = lines_until(proc, "AWS_SECRET_ACCESS_KEY=")
        key = next(l.split("=", 1)[1].strip() for l in lines if l.strip().startswith("AWS_ACCESS_KEY_ID="))
        secret = next(l.split("=", 1)[1].strip() for l in lines if l.strip().startswith("AWS_SECRET_ACCESS_KEY="))
        creds = root / ".isthmus" / "credentials.toml"
        assert stat.S_IMODE(creds.stat().st_mode) == 0o600
        assert secret in creds.read_text()
        s3 = make_client(f"http://127.0.0.1:{port}", access_key=key, secret_key=secret)
        assert s3.list_buckets()["Buckets"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # Second start: the secret is not printed again.
    proc = subprocess.Popen([str(binary()), "serve", "--root", str(root), "--address", f"127.0.0.1:{free_port()}"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        lines = lines_until(proc, "Root credentials")
        assert not any(secret in l for l in lines)
        assert any(key in l for l in lines)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_insecure_credentials_file_is_refused(tmp_path):
    root = tmp_path / "data"
    (root / ".isthmus").mkdir(parents=True)
    creds = root / ".isthmus" / "credentials.toml"
    creds.write_text('access_key = "AAAAAAAAAAAAAAAAAAAA"\nsecret_key = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"\n')
    creds.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_ROOT_")}
    result = subprocess.run([str(binary()), "serve", "--root", str(root), "--address", "127.0.0.1:0"], capture_output=True, text=True, env=env, timeout=20)
    assert result.returncode == 1
    assert "chmod 600" in result.stderr


def test_refusals_answer_access_denied_and_log_one_info_line_naming_the_rule(tmp_path):
    """A refused request gets S3's "Access Denied" (never words about the file system) and the
    log one INFO line with who was refused and which rule refused; client mistakes are never
    logged as ERROR."""
    config = tmp_path / "isthmus.toml"
    config.write_text('[[users]]\naccess_key = "bob"\nsecret_key = "bob-secret-0123456"\n')
    srv = Server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="private")
        s3.put_object(Bucket="private", Key="k", Body=b"v")
        anonymous = requests.get(f"{srv.endpoint}/private/k", timeout=10)
        assert anonymous.status_code == 403 and "<Message>Access Denied</Message>" in anonymous.text, anonymous.text
        assert requests.get(f"{srv.endpoint}/", timeout=10).status_code == 403
        bob = make_client(srv.endpoint, access_key="bob", secret_key="bob-secret-0123456")
        with pytest.raises(ClientError) as e:
            bob.get_object(Bucket="private", Key="k")
        assert code(e) == "AccessDenied" and e.value.response["Error"]["Message"] == "Access Denied"
        with pytest.raises(ClientError) as e:
            bob.put_bucket_acl(Bucket="private", ACL="public-read")
        assert code(e) == "AccessDenied"
        with pytest.raises(ClientError):
            make_client(srv.endpoint, secret_key="wrong-secret-key-000").list_buckets()
        assert requests.get(f"{srv.endpoint}/private/k", timeout=10).headers.get("x-isthmus-refused") is None
        log = srv.output()
        refused = [line for line in log.splitlines() if "refused" in line and " INFO " in line]
        assert any('who="anonymous"' in line and "/private/k" in line and "ACL grants read" in line for line in refused), log
        assert any('who="anonymous"' in line and "path=/ " in line for line in refused), log
        assert any('who="bob"' in line and "/private/k" in line and "ACL grants read" in line for line in refused), log
        assert any('who="bob"' in line and "only the bucket's owner" in line for line in refused), log
        assert any("SignatureDoesNotMatch" in line for line in refused), log
        assert " ERROR " not in log, log
    finally:
        srv.stop()
