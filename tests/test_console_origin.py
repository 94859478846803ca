"""Issue 42, finding 9, without a browser (tests/test_console.py plays the attack in Chromium):
objects a browser would run (HTML, SVG, XML, ...) are served sandboxed on the S3 address and
S3 clients get the same bytes as before; the console's own address serves no object, plain or
presigned, and answers only its page's signed calls; STS GetSessionToken turns a user's keys
into temporary credentials with that user's rights, ended by a removed user or a rotated
secret, which is what the console keeps instead of the secret."""

import json
import os
import subprocess
import time

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, binary, console_server, make_client

PAGE = b"<!doctype html><title>x</title><script>document.title = 'ran'</script>"
OBJECTS = {
    # key: (content type, sandboxed)
    "page.html": ("text/html", True),
    "page-upper.htm": ("TEXT/HTML; charset=utf-8", True),
    "image.svg": ("image/svg+xml", True),
    "data.xml": ("application/xml", True),
    "page.xhtml": ("application/xhtml+xml", True),
    "odd.bin": ("application/x-made-up", True),
    "note.txt": ("text/plain", False),
    "table.csv": ("text/csv", False),
    "picture.png": ("image/png", False),
    "movie.mp4": ("video/mp4", False),
    "blob": ("application/octet-stream", False),
}


@pytest.fixture
def gateway(tmp_path):
    server = console_server(tmp_path / "data")
    s3 = make_client(server.endpoint)
    yield server, s3
    server.stop()


def sts_client(endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY):
    return boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=access_key,
                        aws_secret_access_key=secret_key, config=Config(retries={"max_attempts": 1}))


def client_of(endpoint, creds, service="s3"):
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                        aws_session_token=creds["SessionToken"], config=Config(retries={"max_attempts": 1}))


def test_active_objects_are_sandboxed_on_the_s3_address_and_clients_get_the_same_bytes(server, s3):
    s3.create_bucket(Bucket="public", ACL="public-read")
    for key, (content_type, _) in OBJECTS.items():
        s3.put_object(Bucket="public", Key=key, Body=PAGE, ContentType=content_type, ACL="public-read")
    for key, (content_type, sandboxed) in OBJECTS.items():
        for answer in [requests.get(f"{server.endpoint}/public/{key}", timeout=10),
                       requests.head(f"{server.endpoint}/public/{key}", timeout=10)]:
            assert answer.status_code == 200 and answer.headers["X-Content-Type-Options"] == "nosniff", key
            assert (answer.headers.get("Content-Security-Policy") == "sandbox") == sandboxed, (key, answer.headers)
        # Signed clients: the same bytes and type, two headers more.
        got = s3.get_object(Bucket="public", Key=key)
        assert got["Body"].read() == PAGE and got["ContentType"] == content_type
    # A type asked for in a signed link is judged too.
    s3.put_object(Bucket="public", Key="plain.txt", Body=PAGE, ContentType="text/plain")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "public", "Key": "plain.txt",
                                                          "ResponseContentType": "text/html"})
    answer = requests.get(url, timeout=10)
    assert answer.headers["Content-Type"] == "text/html" and answer.headers["Content-Security-Policy"] == "sandbox"
    # Errors and listings (XML) too; ranged reads keep their bytes.
    listing = requests.get(f"{server.endpoint}/public?list-type=2", timeout=10)
    assert listing.status_code == 200 and listing.headers["Content-Security-Policy"] == "sandbox"
    ranged = s3.get_object(Bucket="public", Key="page.html", Range="bytes=0-14")
    assert ranged["Body"].read() == PAGE[:15]


def test_the_console_address_serves_no_object_and_only_its_pages_signed_calls(gateway):
    server, s3 = gateway
    s3.create_bucket(Bucket="public", ACL="public-read")
    s3.put_object(Bucket="public", Key="evil.html", Body=PAGE, ContentType="text/html", ACL="public-read")
    # Unsigned, presigned (either signature version), a browser's form upload: refused.
    refused = [
        requests.get(f"{server.console}/public/evil.html", timeout=10),
        requests.get(f"{server.console}/public?list-type=2", timeout=10),
        requests.post(f"{server.console}/public", files={"key": (None, "x.html"), "file": ("x.html", PAGE)},
                      timeout=10),
        requests.put(f"{server.console}/public/x.html", data=PAGE, timeout=10),
    ]
    for version in ["s3v4", "s3"]:
        signer = make_client(server.endpoint, signature_version=version)
        url = signer.generate_presigned_url("get_object", Params={"Bucket": "public", "Key": "evil.html"})
        assert requests.get(url, timeout=10).content == PAGE  # on the S3 address it works
        refused.append(requests.get(url.replace(server.endpoint, server.console), timeout=10))
    for answer in refused:
        assert answer.status_code == 403 and b"<script" not in answer.content, answer.request.url
        assert f"port {server.port}" in answer.text, answer.text
    assert "x.html" not in [o["Key"] for o in s3.list_objects_v2(Bucket="public").get("Contents", [])]
    # The page's own calls, signed in a header, work there, and every answer is sandboxed.
    on_console = make_client(server.console)
    got = on_console.get_object(Bucket="public", Key="evil.html")
    assert got["Body"].read() == PAGE
    assert got["ResponseMetadata"]["HTTPHeaders"]["content-security-policy"] == "sandbox"
    assert "public" in [b["Name"] for b in on_console.list_buckets()["Buckets"]]
    assert requests.get(f"{server.console}/config.json", timeout=10).json() == {
        "s3": {"scheme": "http", "port": server.port}}


def test_get_session_token_gives_a_users_own_rights_for_a_while(gateway):
    server, s3 = gateway
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
    env["ISTHMUS_ADMIN_KEYS"] = f"{ACCESS_KEY}:{SECRET_KEY}"

    def admin(*args):
        out = subprocess.run([str(binary()), "admin", "users", *args, "--endpoint", server.endpoint, "--json"],
                             capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout) if out.stdout.strip() else None

    s3.create_bucket(Bucket="roots")
    tina = admin("add", "tina")
    # On the console's address as on the S3 one.
    creds = sts_client(server.console, tina["access_key"], tina["secret_key"]).get_session_token(
        DurationSeconds=900)["Credentials"]
    assert creds["AccessKeyId"].startswith("ISTS") and creds["Expiration"].timestamp() <= time.time() + 901
    temporary = client_of(server.endpoint, creds)
    temporary.create_bucket(Bucket="tinas")  # tina's own rights: she may create buckets
    temporary.put_object(Bucket="tinas", Key="a.txt", Body=b"a")
    assert make_client(server.endpoint, tina["access_key"], tina["secret_key"]).get_object(
        Bucket="tinas", Key="a.txt")["Body"].read() == b"a"
    with pytest.raises(ClientError) as err:
        temporary.list_objects_v2(Bucket="roots")  # and no more than hers
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    # Temporary credentials cannot make more, nor can anyone unsigned.
    with pytest.raises(ClientError) as err:
        client_of(server.endpoint, creds, "sts").get_session_token()
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    unsigned = requests.post(f"{server.endpoint}/", data={"Action": "GetSessionToken", "Version": "2011-06-15"},
                             timeout=10)
    assert unsigned.status_code == 403 and "MissingAuthenticationToken" in unsigned.text
    # A rotated secret ends them (the keys they were made from are no longer hers).
    admin("rotate", tina["access_key"])
    with pytest.raises(ClientError) as err:
        temporary.list_objects_v2(Bucket="tinas")
    assert err.value.response["Error"]["Code"] == "InvalidAccessKeyId"
