"""Bearer tokens (JWT, RS256 and ES256) from a local issuer minted here: the gateway checks
signature, issuer, audience, expiry and not-before (60 s skew), limits each request to the
token's WLCG / SciTokens scopes, and maps its subject or groups to a configured user; STS
AssumeRoleWithWebIdentity turns a token into temporary S3 credentials for SDKs (boto3)."""

import http.client
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import boto3
import jwt
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from conftest import Server, binary, make_client

ISSUER = "https://issuer.test"
ROLE = "arn:aws:iam::000000000000:role/grid"
AUDIENCE = "https://gateway.test"
SECRET = "secret-key-0123456789"


class Issuer:
    """A token issuer: RSA and EC keys; its JWKS holds the public halves."""

    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())

    def jwks(self):
        rsa_jwk = json.loads(RSAAlgorithm.to_jwk(self.rsa.public_key()))
        ec_jwk = json.loads(ECAlgorithm.to_jwk(self.ec.public_key()))
        rsa_jwk.update(kid="rsa1", use="sig", alg="RS256")
        ec_jwk.update(kid="ec1", use="sig", alg="ES256")
        return {"keys": [rsa_jwk, ec_jwk]}

    def token(self, scope, sub="alice-sub", aud=AUDIENCE, iss=ISSUER, lifetime=600, nbf=None, alg="RS256", key=None, **claims):
        now = int(time.time())
        payload = {"iss": iss, "sub": sub, "aud": aud, "exp": now + lifetime, "iat": now, "scope": scope, "wlcg.ver": "1.0", **claims}
        if nbf is not None:
            payload["nbf"] = now + nbf
        if key is None:
            key = self.rsa if alg == "RS256" else self.ec
        kid = "rsa1" if alg == "RS256" else "ec1"
        return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid})


def config_text(jwks_path, extra=""):
    return f"""
[[users]]
access_key = "alice"
secret_key = "{SECRET}"
display_name = "Alice"
buckets = ["data"]
[[users]]
access_key = "cmsprod"
secret_key = "{SECRET}"
{extra}
[[token_issuers]]
issuer = "{ISSUER}"
jwks_file = "{jwks_path}"
audiences = ["{AUDIENCE}"]
clock_skew_seconds = 60
[token_issuers.subjects]
"alice-sub" = "Alice"
[token_issuers.groups]
"/cms/prod" = "cmsprod"
"""


@pytest.fixture(scope="module")
def issuer():
    return Issuer()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, issuer):
    base = tmp_path_factory.mktemp("tokens")
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    config = base / "isthmus.toml"
    config.write_text(config_text(jwks))
    srv = Server(base / "data", extra_args=["--config", str(config)])
    root = make_client(srv.endpoint)
    root.create_bucket(Bucket="data")
    for key in ["run1/a.txt", "run1/sub/b.txt", "run2/c.txt", "secret/d.txt"]:
        root.put_object(Bucket="data", Key=key, Body=f"body of {key}".encode())
    yield srv, root
    srv.stop()


def call(srv, method, path, token, body=None, headers=None):
    all_headers = {"Authorization": f"Bearer {token}", **(headers or {})}
    return requests.request(method, srv.endpoint + path, data=body, headers=all_headers, timeout=30)


def test_a_valid_token_reads_within_its_scope_rs256_and_es256(gateway, issuer):
    srv, _ = gateway
    for alg in ["RS256", "ES256"]:
        token = issuer.token("storage.read:/data/run1", alg=alg)
        r = call(srv, "GET", "/data/run1/a.txt", token)
        assert r.status_code == 200, r.text
        assert r.content == b"body of run1/a.txt"
        listing = call(srv, "GET", "/data?list-type=2&prefix=run1/", token)
        assert listing.status_code == 200
        assert "run1/sub/b.txt" in listing.text and "run2" not in listing.text


def test_refused_tokens_say_why(gateway, issuer):
    srv, _ = gateway
    other = Issuer()
    cases = {
        "expired": (issuer.token("storage.read:/", lifetime=-120), "ExpiredToken"),
        "wrong audience": (issuer.token("storage.read:/", aud="https://elsewhere.test"), "InvalidToken"),
        "wrong issuer": (issuer.token("storage.read:/", iss="https://rogue.test"), "InvalidToken"),
        "wrong signature": (issuer.token("storage.read:/", key=other.rsa), "InvalidToken"),
        "not yet valid": (issuer.token("storage.read:/", nbf=300), "InvalidToken"),
        "traversal in scope": (issuer.token("storage.read:/data/run1/../secret"), "InvalidToken"),
        "stage only": (issuer.token("storage.stage:/data"), "InvalidToken"),
        # Issue 28, finding 9: a scope without a path used to grant the whole namespace.
        "scope without a path": (issuer.token("storage.read"), "InvalidToken"),
        "unmapped subject": (issuer.token("storage.read:/", sub="stranger"), "InvalidToken"),
        "hs256": (jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "scope": "storage.read:/"}, "k" * 32, algorithm="HS256"), "InvalidToken"),
        "garbage": ("not.a.jwt", "InvalidToken"),
    }
    for name, (token, code) in cases.items():
        r = call(srv, "GET", "/data/secret/d.txt", token)
        assert r.status_code == 401, (name, r.status_code, r.text)
        assert f"<Code>{code}</Code>" in r.text, (name, r.text)
        assert r.headers["WWW-Authenticate"].startswith("Bearer"), name
        assert "body of" not in r.text


def test_clock_skew_is_tolerated_within_sixty_seconds(gateway, issuer):
    srv, _ = gateway
    assert call(srv, "GET", "/data/run1/a.txt", issuer.token("storage.read:/data", lifetime=-30)).status_code == 200
    assert call(srv, "GET", "/data/run1/a.txt", issuer.token("storage.read:/data", nbf=30)).status_code == 200
    assert call(srv, "GET", "/data/run1/a.txt", issuer.token("storage.read:/data", lifetime=-90)).status_code == 401


def test_requests_outside_the_scopes_are_access_denied(gateway, issuer):
    srv, root = gateway
    token = issuer.token("storage.read:/data/run1")
    for method, path in [("GET", "/data/run2/c.txt"), ("GET", "/data/run10"), ("GET", "/data?list-type=2"),
                         ("GET", "/data?list-type=2&prefix=run"), ("PUT", "/data/run1/new.txt"),
                         ("DELETE", "/data/run1/a.txt"), ("PUT", "/newbucket"), ("GET", "/data/secret/d.txt")]:
        r = call(srv, method, path, token, body=b"x" if method == "PUT" and path.count("/") > 1 else None)
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert "<Code>AccessDenied</Code>" in r.text
    assert "storage.read:/data/run2/c.txt" in call(srv, "GET", "/data/run2/c.txt", token).text
    assert root.get_object(Bucket="data", Key="run1/a.txt")["Body"].read() == b"body of run1/a.txt", "nothing deleted"
    # A dot-dot in the request path does not climb out of the scope.
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("GET", "/data/run1/../secret/d.txt", headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 403 and b"body of secret" not in body


def test_create_adds_new_objects_but_never_replaces_or_deletes(gateway, issuer):
    srv, root = gateway
    token = issuer.token("storage.read:/data/in storage.create:/data/in")
    assert call(srv, "PUT", "/data/in/new.txt", token, body=b"first").status_code == 200
    replace = call(srv, "PUT", "/data/in/new.txt", token, body=b"second")
    assert replace.status_code == 403 and "storage.create only adds new objects" in replace.text
    assert call(srv, "DELETE", "/data/in/new.txt", token).status_code == 403
    assert root.get_object(Bucket="data", Key="in/new.txt")["Body"].read() == b"first"
    modify = issuer.token("storage.modify:/data/in")
    assert call(srv, "PUT", "/data/in/new.txt", modify, body=b"second").status_code == 200
    assert call(srv, "DELETE", "/data/in/new.txt", modify).status_code == 204
    # SciTokens' write scope is create and modify.
    assert call(srv, "PUT", "/data/in/sci.txt", issuer.token("write:/data/in"), body=b"s").status_code == 200


def test_subject_and_groups_map_to_users(gateway, issuer):
    srv, root = gateway
    by_group = issuer.token("storage.create:/cmsbucket storage.read:/cmsbucket", sub="someone", **{"wlcg.groups": ["/other", "/cms/prod"]})
    assert call(srv, "PUT", "/cmsbucket", by_group).status_code == 200
    acl = root.get_bucket_acl(Bucket="cmsbucket")
    assert acl["Owner"]["ID"] == "cmsprod"
    by_subject = issuer.token("storage.create:/alicebucket")
    assert call(srv, "PUT", "/alicebucket", by_subject).status_code == 200
    assert root.get_bucket_acl(Bucket="alicebucket")["Owner"]["ID"] == "alice"
    # The token acts as its user: Alice's own rules still apply (she may not use cmsbucket).
    alice_wide = issuer.token("storage.read:/")
    assert call(srv, "GET", "/cmsbucket?list-type=2", alice_wide).status_code == 403


def sts_client(endpoint):
    return boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="unused", aws_secret_access_key="unused",
                        config=Config(retries={"max_attempts": 1}))


def test_sts_turns_a_token_into_scoped_temporary_credentials(gateway, issuer):
    srv, _ = gateway
    sts = sts_client(srv.endpoint)
    token = issuer.token("storage.read:/data/run1 storage.create:/data/upload")
    answer = sts.assume_role_with_web_identity(RoleArn="arn:aws:iam::isthmus:role/grid", RoleSessionName="job42",
                                               WebIdentityToken=token, DurationSeconds=900)
    creds = answer["Credentials"]
    assert answer["SubjectFromWebIdentityToken"] == "alice-sub"
    assert creds["AccessKeyId"].startswith("ISTS")
    s3 = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                      aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                      aws_session_token=creds["SessionToken"], config=Config(retries={"max_attempts": 1}))
    assert s3.get_object(Bucket="data", Key="run1/a.txt")["Body"].read() == b"body of run1/a.txt"
    s3.put_object(Bucket="data", Key="upload/result.bin", Body=b"result")
    for fn in [lambda: s3.get_object(Bucket="data", Key="run2/c.txt"),
               lambda: s3.put_object(Bucket="data", Key="run1/x", Body=b"x"),
               lambda: s3.delete_object(Bucket="data", Key="upload/result.bin")]:
        with pytest.raises(ClientError) as err:
            fn()
        assert err.value.response["Error"]["Code"] == "AccessDenied"
    # Without the session token, or with another one, the keys are refused.
    bare = make_client(srv.endpoint, creds["AccessKeyId"], creds["SecretAccessKey"])
    with pytest.raises(ClientError) as err:
        bare.get_object(Bucket="data", Key="run1/a.txt")
    assert err.value.response["Error"]["Code"] == "InvalidToken"
    other = sts.assume_role_with_web_identity(RoleArn=ROLE, RoleSessionName="job", WebIdentityToken=token)["Credentials"]
    mixed = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                         aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                         aws_session_token=other["SessionToken"], config=Config(retries={"max_attempts": 1}))
    with pytest.raises(ClientError) as err:
        mixed.get_object(Bucket="data", Key="run1/a.txt")
    assert err.value.response["Error"]["Code"] == "InvalidToken"


def test_sts_refuses_bad_tokens_and_durations(gateway, issuer):
    srv, _ = gateway
    sts = sts_client(srv.endpoint)
    cases = [
        (issuer.token("storage.read:/", lifetime=-300), 3600, "ExpiredTokenException"),
        (issuer.token("storage.read:/", aud="https://elsewhere.test"), 3600, "InvalidIdentityToken"),
    ]
    for token, seconds, code in cases:
        with pytest.raises(ClientError) as err:
            sts.assume_role_with_web_identity(RoleArn=ROLE, RoleSessionName="job", WebIdentityToken=token, DurationSeconds=seconds)
        assert err.value.response["Error"]["Code"] == code
    # Below botocore's own limits: sent as a plain form.
    form = {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": ROLE, "RoleSessionName": "y",
            "WebIdentityToken": issuer.token("storage.read:/"), "DurationSeconds": "60"}
    r = requests.post(srv.endpoint + "/", data=form, timeout=10)
    assert r.status_code == 400 and "<Code>ValidationError</Code>" in r.text
    form.update(Action="AssumeRole", DurationSeconds="900")
    assert "<Code>InvalidAction</Code>" in requests.post(srv.endpoint + "/", data=form, timeout=10).text
    # A session never outlives its token.
    short = issuer.token("storage.read:/", lifetime=1000)
    creds = sts.assume_role_with_web_identity(RoleArn=ROLE, RoleSessionName="job", WebIdentityToken=short, DurationSeconds=3600)["Credentials"]
    assert creds["Expiration"].timestamp() <= time.time() + 1001


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates a Unix user")
def test_a_token_acts_as_its_users_unix_identity(tmp_path, issuer):
    """With identity = "posix", the user a token maps to is a Unix user: files its requests
    create belong to that uid."""
    name = "isth-tok"
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name], check=True, capture_output=True)
    base = Path(tempfile.mkdtemp(prefix="isthmus-token-"))
    try:
        base.chmod(0o755)
        root_dir = base / "data"
        root_dir.mkdir()
        root_dir.chmod(0o1777)  # anyone may create buckets; only their owner removes them
        jwks = base / "jwks.json"
        jwks.write_text(json.dumps(issuer.jwks()))
        config = base / "isthmus.toml"
        config.write_text('identity = "posix"\nroot_identity = { uid = 0, gid = 0 }\nallow_root = true\n'
                          + config_text(jwks).replace('display_name = "Alice"', f'display_name = "Alice"\nunix_user = "{name}"')
                          .replace('access_key = "cmsprod"', f'access_key = "cmsprod"\nunix_user = "{name}"'))
        srv = Server(root_dir, extra_args=["--config", str(config)])
        try:
            token = issuer.token("storage.create:/")
            assert call(srv, "PUT", "/tokbucket", token).status_code == 200
            assert call(srv, "PUT", "/tokbucket/f.txt", token, body=b"mine").status_code == 200
            uid = pwd.getpwnam(name).pw_uid
            assert (root_dir / "tokbucket" / "f.txt").stat().st_uid == uid
        finally:
            srv.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(["userdel", name], capture_output=True)


def test_keys_from_a_jwks_url_are_fetched_and_a_rotated_key_is_picked_up(tmp_path, issuer):
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    web = tmp_path / "web"
    web.mkdir()
    (web / "jwks.json").write_text(json.dumps(issuer.jwks()))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(web))
    handler.log_message = lambda *a: None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/jwks.json"
    config = tmp_path / "isthmus.toml"
    config.write_text(config_text("unused").replace('jwks_file = "unused"', f'jwks_url = "{url}"\njwks_refresh_seconds = 1'))
    srv = Server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        make_client(srv.endpoint).create_bucket(Bucket="data")
        assert call(srv, "GET", "/data?list-type=2", issuer.token("storage.read:/data")).status_code == 200
        rotated = Issuer()
        (web / "jwks.json").write_text(json.dumps(rotated.jwks()))
        deadline = time.time() + 15
        while call(srv, "GET", "/data?list-type=2", rotated.token("storage.read:/data")).status_code != 200:
            assert time.time() < deadline, "the rotated key was never fetched"
            time.sleep(0.5)
        assert call(srv, "GET", "/data?list-type=2", issuer.token("storage.read:/data")).status_code == 401
    finally:
        srv.stop()
        httpd.shutdown()


def test_an_issuer_without_audiences_is_refused_at_start_and_by_config_check(tmp_path, issuer):
    """Issue 28, finding 9: an issuer without `audiences` accepted a token meant for any
    service. It is a configuration error now; `audiences = ["any"]` says so explicitly."""
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    config = tmp_path / "isthmus.toml"
    config.write_text(config_text(jwks).replace(f'audiences = ["{AUDIENCE}"]\n', ""))
    check = subprocess.run([str(binary()), "config", "check", str(config)],
                           capture_output=True, text=True)
    assert check.returncode != 0 and "audiences" in check.stderr, check.stderr
    with pytest.raises(RuntimeError) as refused:
        Server(tmp_path / "data", extra_args=["--config", str(config)])
    assert 'audiences = ["any"]' in str(refused.value)
    config.write_text(config_text(jwks).replace(f'audiences = ["{AUDIENCE}"]', 'audiences = ["any"]'))
    srv = Server(tmp_path / "data2", extra_args=["--config", str(config)])
    try:
        make_client(srv.endpoint).create_bucket(Bucket="data")
        token = issuer.token("storage.read:/data", aud="https://elsewhere.test")
        assert call(srv, "GET", "/data?list-type=2", token).status_code == 200
    finally:
        srv.stop()
