"""The fast path of anonymous reads (issue 45): an unsigned GET or HEAD of an object with no
query and only plain headers is answered beside the protocol layer's dispatch, and must answer
byte for byte what the normal path answers (status, every header and its order, the body), go
through the same access decisions (ACLs, bucket policy, public access block), and be counted by
the metrics and the access log. Each request is sent twice: as is (the fast path) and with one
more header S3 ignores (`X-Isthmus-Test`), which sends it down the normal path."""

import http.client
import json
import time
from urllib.parse import quote

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import ACCESS_KEY, Server, free_port, make_client

NORMAL = {"X-Isthmus-Test": "normal path"}
BODY = bytes(range(256)) * 16  # 4 KiB


def send(server, method, path, headers=()):
    """(status, headers in order without date and request id, body with the request id
    replaced, request id) of one request sent exactly as given (http.client adds Host only)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in dict(headers).items():
            conn.putheader(name, value)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read()
        request_id = resp.getheader("x-amz-request-id")
        kept = [(k.lower(), v) for k, v in resp.getheaders() if k.lower() not in ("date", "x-amz-request-id")]
    finally:
        conn.close()
    assert request_id, "every answer carries its request id"
    # User metadata headers come in hash order on either path: compared as a set.
    meta = sorted(h for h in kept if h[0].startswith("x-amz-meta-"))
    ordered = [h for h in kept if not h[0].startswith("x-amz-meta-")]
    return resp.status, ordered, meta, body.replace(request_id.encode(), b"REQUEST-ID"), request_id


def both_paths(server, method, path, headers=None):
    """The answer of the fast path (if the request qualifies) and of the normal path, which
    must be the same; returns it."""
    headers = dict(headers or {})
    fast = send(server, method, path, headers)
    normal = send(server, method, path, {**headers, **NORMAL})
    assert fast[:4] == normal[:4], (method, path, headers)
    return fast


def start_public(root):
    """A gateway logging at debug level (the protocol layer's lines show which path answered)
    with a public-read bucket `pub` holding public objects with every description header and an
    object whose own ACL is private, a versioned public bucket `pubv`, and a private bucket
    `closed` with a public-read object and a private one. Returns (server, root's client)."""
    srv = Server(root, env={"ISTHMUS_LOG": "warn,isthmus_s3=debug,s3s::service=debug"})
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="pub", ACL="public-read")
        s3.put_object(Bucket="pub", Key="plain", Body=BODY, ACL="public-read")
        s3.put_object(
            Bucket="pub", Key="dir/described é.txt", Body=BODY, ACL="public-read", ContentType="text/plain",
            CacheControl="max-age=60", ContentDisposition='attachment; filename="x.txt"', ContentEncoding="identity",
            ContentLanguage="en", Expires="Wed, 21 Oct 2037 07:28:00 GMT", Metadata={"colour": "blue", "size": "4k"},
            Tagging="a=1&b=2",
        )
        s3.put_object(Bucket="pub", Key="page.html", Body=b"<script>x</script>", ACL="public-read", ContentType="text/html")
        # The bucket is public, this object's own ACL is not (the bucket's public-read still opens
        # reading it: docs/user/s3-compatibility.md, "sharing").
        s3.put_object(Bucket="pub", Key="private", Body=BODY, ACL="private")
        s3.create_bucket(Bucket="pubv", ACL="public-read")
        s3.put_bucket_versioning(Bucket="pubv", VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket="pubv", Key="v", Body=BODY, ACL="public-read")
        s3.put_object(Bucket="pubv", Key="gone", Body=BODY, ACL="public-read")
        s3.delete_object(Bucket="pubv", Key="gone")  # its latest version is a delete marker
        # Larger than one chunk: its body streams.
        s3.put_object(Bucket="pub", Key="big", Body=BODY * 600, ACL="public-read")
        s3.create_bucket(Bucket="closed")
        s3.put_object(Bucket="closed", Key="k", Body=BODY, ACL="public-read")
        s3.put_object(Bucket="closed", Key="private", Body=BODY)
    except Exception:
        srv.stop()
        raise
    return srv, s3


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """`start_public`'s gateway, shared by the tests that change nothing in it."""
    srv, s3 = start_public(tmp_path_factory.mktemp("fast-read") / "data")
    yield srv, s3
    srv.stop()


def answered_by_protocol_layer(server, request_id):
    """Whether the protocol layer (s3s) logged anything for the request (at debug level)."""
    deadline = time.time() + 2
    while True:
        lines = [line for line in server.output().splitlines() if request_id in line]
        if lines or time.time() > deadline:
            return any("s3s::" in line for line in lines)
        time.sleep(0.05)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("key", ["plain", "dir/described é.txt", "page.html", "v", "big"])
def test_fast_answers_are_the_normal_answers(public, method, key):
    srv, _ = public
    path = f"/{'pubv' if key == 'v' else 'pub'}/{quote(key)}"
    status, headers, meta, body, request_id = both_paths(srv, method, path)
    assert status == 200
    if method == "GET":
        assert dict(headers)["content-length"] == str(len(body))
    assert not answered_by_protocol_layer(srv, request_id), "the plain request took the fast path"
    normal_id = send(srv, method, path, NORMAL)[4]
    assert answered_by_protocol_layer(srv, normal_id), "the marked request took the normal path"
    names = [name for name, _ in headers]
    assert names[0] == "accept-ranges" and "etag" in names and "last-modified" in names
    assert "x-content-type-options" in names
    if key == "dir/described é.txt":
        assert ("x-amz-tagging-count", "2") in headers and meta == [("x-amz-meta-colour", "blue"), ("x-amz-meta-size", "4k")]
        assert dict(headers)["expires"] == "Wed, 21 Oct 2037 07:28:00 GMT"
    if key == "v":
        assert "x-amz-version-id" in names
    if key == "page.html":
        assert ("content-security-policy", "sandbox") in headers


CONDITIONAL = [
    {"Range": "bytes=10-99"},
    {"Range": "bytes=-5"},
    {"Range": "bytes=5000-6000"},
    {"If-None-Match": "*"},
    {"If-Match": '"nope"'},
    {"If-Modified-Since": "Wed, 21 Oct 2037 07:28:00 GMT"},
    {"If-Unmodified-Since": "Wed, 21 Oct 2015 07:28:00 GMT"},
    {"x-amz-server-side-encryption-customer-algorithm": "AES256"},
    {"Origin": "https://example.org"},
]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("headers", CONDITIONAL, ids=lambda h: next(iter(h)))
def test_ranges_and_conditions_answer_as_before(public, method, headers):
    srv, s3 = public
    etag = s3.head_object(Bucket="pub", Key="plain")["ETag"]
    both_paths(srv, method, "/pub/plain", headers)
    # The conditions with the object's own ETag and date, both ways.
    if "If-None-Match" in headers or "If-Match" in headers:
        status = both_paths(srv, method, "/pub/plain", {next(iter(headers)): etag})[0]
        assert status == (304 if "If-None-Match" in headers else 200)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(
    "path, status",
    [
        ("/closed/private", 403),  # a private object in a private bucket
        ("/closed/nothing", 403),  # nor may anyone learn what a private bucket holds
        ("/pub/private", 403),  # a public-read bucket shares its listing, not its objects (S3)
        ("/closed/k", 200),  # a public-read object in a private bucket: its ACL shares it
        ("/pub/missing", 404),  # who may list a bucket learns that a key is missing (S3)
        ("/pubv/gone", 404),  # a delete marker: its headers say so
        ("/nobucket/k", 404),
        ("/Bad_Bucket/k", 400),
        ("/pub/plain?versionId=null", 200),
        ("/pub/plain?partNumber=1", 200),  # a simple object is its only part
        ("/pub/plain?response-content-type=text/html", 400),  # overrides: signed requests only
    ],
)
def test_refusals_and_errors_answer_as_before(public, method, path, status):
    srv, _ = public
    answer = both_paths(srv, method, path)
    assert answer[0] == status, answer
    if method == "GET" and status == 403:
        assert b"<Code>AccessDenied</Code>" in answer[3]


def test_a_bucket_policy_deny_and_a_public_access_block_still_apply(tmp_path):
    srv, s3 = start_public(tmp_path / "data")
    try:
        policy_acl_and_block_checks(srv, s3)
    finally:
        srv.stop()


def policy_acl_and_block_checks(srv, s3):
    deny = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::pub/dir/*"}],
    }
    s3.put_bucket_policy(Bucket="pub", Policy=json.dumps(deny))
    for method in ("GET", "HEAD"):
        assert both_paths(srv, method, f"/pub/{quote('dir/described é.txt')}")[0] == 403
        assert both_paths(srv, method, "/pub/plain")[0] == 200
    s3.delete_bucket_policy(Bucket="pub")
    s3.put_public_access_block(Bucket="pub", PublicAccessBlockConfiguration={"IgnorePublicAcls": True})
    for method in ("GET", "HEAD"):
        assert both_paths(srv, method, "/pub/plain")[0] == 403
    s3.delete_public_access_block(Bucket="pub")
    assert both_paths(srv, "GET", "/pub/plain")[0] == 200
    # An object ACL taken back closes the object at once (the fast path caches no decision).
    assert both_paths(srv, "GET", "/closed/k")[0] == 200
    s3.put_object_acl(Bucket="closed", Key="k", ACL="private")
    assert both_paths(srv, "GET", "/closed/k")[0] == 403
    s3.put_bucket_acl(Bucket="pub", ACL="private")
    assert both_paths(srv, "HEAD", "/pub/private")[0] == 403
    assert both_paths(srv, "HEAD", "/pub/plain")[0] == 200  # its own ACL is public-read


def test_signed_reads_never_take_the_fast_path(public):
    srv, s3 = public
    # A presigned URL (a query) and a header-signed GET both answer as signed requests do.
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "pub", "Key": "private"}, ExpiresIn=60)
    assert requests.get(url, timeout=10).content == BODY
    assert s3.get_object(Bucket="pub", Key="private")["Body"].read() == BODY
    # A bad signature is refused, never served as if anonymous.
    bad = send(srv, "GET", "/pub/plain", {"Authorization": "AWS4-HMAC-SHA256 Credential=nobody/20250101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00"})
    assert bad[0] in (400, 403) and b"<Error>" in bad[3]


def test_metrics_and_access_log_count_fast_reads(tmp_path):
    log = tmp_path / "access.log"
    admin_port = free_port()
    srv = Server(tmp_path / "data", extra_args=[
        "--access-log", str(log), "--access-log-format", "json", "--admin-address", f"127.0.0.1:{admin_port}"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="pub", ACL="public-read")
        s3.put_object(Bucket="pub", Key="obj", Body=BODY, ACL="public-read")
        s3.create_bucket(Bucket="closed")
        s3.put_object(Bucket="closed", Key="private", Body=BODY)
        ids = [send(srv, "GET", "/pub/obj")[4] for _ in range(3)] + [send(srv, "HEAD", "/pub/obj")[4] for _ in range(2)]
        refused = send(srv, "GET", "/closed/private")[4]
        text = requests.get(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).text
    finally:
        srv.stop()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    counted = {(s.labels["operation"], s.labels["status"]): s.value for s in families["isthmus_http_requests"].samples}
    assert counted[("GetObject", "200")] == 3 and counted[("HeadObject", "200")] == 2
    assert counted[("GetObject", "403")] == 1
    assert families["isthmus_http_response_bytes"].samples[0].value >= 5 * len(BODY)
    lines = {line["request_id"]: line for line in map(json.loads, log.read_text().splitlines())}
    for request_id in ids:
        line = lines[request_id]
        assert line["user"] == "" and line["bucket"] == "pub" and line["key"] == "obj" and line["status"] == 200
        assert line["operation"] in ("GetObject", "HeadObject") and line["bytes_out"] == len(BODY)
    assert lines[refused]["status"] == 403 and lines[refused]["operation"] == "GetObject"
    assert any(l["user"] == ACCESS_KEY for l in lines.values())
