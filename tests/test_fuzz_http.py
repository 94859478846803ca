"""Fuzz targets for what any HTTP client sends (issue 28): SigV2 and SigV4 Authorization
headers, presigned-URL query parameters (both versions), and XML request bodies that reach
the parsers past a valid signature, against one real gateway. Property-based (Hypothesis)
rather than coverage-guided: the parsers run inside the real server process, which only a
network client reaches. Each request must get an answer that is not a server error (5xx other
than 501 NotImplemented), and the gateway must keep serving. CI runs ISTHMUS_FUZZ_CASES cases
per target (default 150); `scripts/fuzz` runs more."""

import os
import socket
from urllib.parse import quote

import pytest
import requests
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ACCESS_KEY, SECRET_KEY, Server, make_client

CASES = int(os.environ.get("ISTHMUS_FUZZ_CASES", "150"))
FUZZ = settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
BUCKET = "fuzz"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("fuzz-http") / "data")
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="k", Body=b"fuzz")
    yield srv
    srv.stop()


def answered_sanely(srv, response):
    assert srv.proc.poll() is None, "the gateway died"
    assert response.status_code < 500 or response.status_code == 501, (response.status_code, response.text[:300])


def still_serving(srv):
    assert srv.proc.poll() is None, "the gateway died"
    assert make_client(srv.endpoint).get_object(Bucket=BUCKET, Key="k")["Body"].read() == b"fuzz"


printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=120)
header_safe = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=60)
amz_date = st.one_of(st.just("20261125T000000Z"), header_safe, st.from_regex(r"\A[0-9]{8}T[0-9]{6}Z\Z"))


@st.composite
def sigv4_header(draw):
    """An AWS4-HMAC-SHA256 Authorization header with each field well-formed, missing or hostile."""
    credential = draw(st.one_of(
        st.just(f"{ACCESS_KEY}/20261125/us-east-1/s3/aws4_request"),
        st.builds(lambda *p: "/".join(p), header_safe, header_safe, header_safe, header_safe, header_safe),
        header_safe))
    signed = draw(st.one_of(st.just("host;x-amz-content-sha256;x-amz-date"), header_safe, st.just(";" * 50)))
    signature = draw(st.one_of(st.from_regex(r"\A[0-9a-f]{64}\Z"), header_safe))
    parts = [f"Credential={credential}", f"SignedHeaders={signed}", f"Signature={signature}"]
    order = draw(st.permutations(parts))
    separator = draw(st.sampled_from([", ", ",", " ", ",,"]))
    algorithm = draw(st.sampled_from(["AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1", "AWS4-ECDSA-P256-SHA256", ""]))
    return f"{algorithm} {separator.join(order[:draw(st.integers(0, 3))])}"


@given(authorization=st.one_of(sigv4_header(), printable.map(lambda s: "AWS " + s),
                               st.builds(lambda k, s: f"AWS {k}:{s}", header_safe, header_safe), printable),
       date=amz_date, content_sha=st.one_of(st.just("UNSIGNED-PAYLOAD"), header_safe),
       method=st.sampled_from(["GET", "PUT", "HEAD", "DELETE", "POST"]),
       path=st.sampled_from(["/", f"/{BUCKET}", f"/{BUCKET}/k", f"/{BUCKET}/new?uploads", f"/{BUCKET}?delete"]))
@FUZZ
def test_fuzz_authorization_headers(gateway, authorization, date, content_sha, method, path):
    # Values as a client library lets them through (no leading or trailing blanks).
    headers = {"Authorization": authorization.strip() or "AWS", "x-amz-date": date, "x-amz-content-sha256": content_sha}
    response = requests.request(method, gateway.endpoint + path, headers=headers, data=b"x" if method in ("PUT", "POST") else None, timeout=30)
    answered_sanely(gateway, response)
    assert response.status_code in (400, 403, 405, 411, 501), (response.status_code, authorization, response.text[:200])


presign_v4 = st.fixed_dictionaries({}, optional={
    "X-Amz-Algorithm": st.one_of(st.just("AWS4-HMAC-SHA256"), printable),
    "X-Amz-Credential": st.one_of(st.just(f"{ACCESS_KEY}/20261125/us-east-1/s3/aws4_request"), printable),
    "X-Amz-Date": amz_date,
    "X-Amz-Expires": st.one_of(st.integers(-2**70, 2**70).map(str), printable),
    "X-Amz-SignedHeaders": st.one_of(st.just("host"), printable),
    "X-Amz-Signature": st.one_of(st.from_regex(r"\A[0-9a-f]{64}\Z"), printable),
    "X-Amz-Security-Token": printable,
})
presign_v2 = st.fixed_dictionaries({}, optional={
    "AWSAccessKeyId": st.one_of(st.just(ACCESS_KEY), printable),
    "Expires": st.one_of(st.integers(-2**70, 2**70).map(str), printable),
    "Signature": printable,
})


@given(query=st.one_of(presign_v4, presign_v2, st.dictionaries(printable, printable, max_size=5)),
       method=st.sampled_from(["GET", "PUT", "HEAD"]))
@FUZZ
def test_fuzz_presigned_query_parameters(gateway, query, method):
    text = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in query.items())
    response = requests.request(method, f"{gateway.endpoint}/{BUCKET}/k?{text}", data=b"x" if method == "PUT" else None, timeout=30)
    answered_sanely(gateway, response)
    # Without a valid signature nothing is served or changed: the bucket is private.
    assert response.status_code != 200 or method != "PUT", query


def signed(gateway, method, path, body, headers=None):
    """Sends `body` to `path` signed with SigV4 by the root user (the parsers run only past a
    valid signature)."""
    url = gateway.endpoint + path
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return requests.request(method, prepared.url, headers=dict(prepared.headers), data=body, timeout=30)


@st.composite
def xml_document(draw):
    """XML of the shapes S3 bodies have, with hostile names, nesting, entities and sizes."""
    names = st.sampled_from(["Delete", "Object", "Key", "VersionId", "Quiet", "Tagging", "TagSet", "Tag", "Value",
                             "CompleteMultipartUpload", "Part", "PartNumber", "ETag", "VersioningConfiguration",
                             "Status", "AccessControlPolicy", "Owner", "ID", "AccessControlList", "Grant",
                             "Grantee", "Permission", "CORSConfiguration", "CORSRule", "AllowedOrigin", "x"])
    leaf = st.one_of(printable, st.integers(-2**70, 2**70).map(str), st.just("&amp;&lt;&#0;&#xFFFFFFFF;"),
                     st.just("]]>"), st.just("x" * 5000))
    tree = st.recursive(
        st.builds(lambda n, v: f"<{n}>{v.replace('<', '&lt;')}</{n}>", names, leaf),
        lambda children: st.builds(lambda n, c: f"<{n}>{''.join(c)}</{n}>", names, st.lists(children, max_size=4)),
        max_leaves=20,
    )
    prolog = draw(st.sampled_from(["", '<?xml version="1.0" encoding="UTF-8"?>',
                                   '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>',
                                   '<!DOCTYPE x SYSTEM "file:///etc/passwd">']))
    body = draw(st.one_of(tree, printable, st.just("<" * 3000), st.just("<a>" * 2000)))
    return (prolog + body).encode()


@given(body=xml_document(), target=st.sampled_from([
    ("POST", f"/{BUCKET}?delete"), ("PUT", f"/{BUCKET}/k?tagging"), ("PUT", f"/{BUCKET}?tagging"),
    ("PUT", f"/{BUCKET}?versioning"), ("PUT", f"/{BUCKET}?acl"), ("PUT", f"/{BUCKET}/k?acl"),
    ("PUT", f"/{BUCKET}?cors"), ("POST", f"/{BUCKET}/mp?uploadId=nosuch"), ("PUT", "/fuzz-new-bucket")]))
@FUZZ
def test_fuzz_xml_bodies(gateway, body, target):
    method, path = target
    response = signed(gateway, method, path, body)
    answered_sanely(gateway, response)
    assert b"root:" not in response.content, "an external entity was resolved"


def test_the_gateway_survived_the_fuzzing(gateway):
    still_serving(gateway)
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as raw:
        raw.sendall(b"GET /" + b"%" * 2000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert raw.recv(64).startswith(b"HTTP/1.1 4")
    still_serving(gateway)
