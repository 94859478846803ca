"""Bucket CORS: the configuration API (Put/Get/DeleteBucketCors) and the browser's side of it:
preflights (OPTIONS) answered by the bucket's rules, Access-Control-* headers on actual
responses, and refusal where no rule allows. The real-browser test is in test_cors_browser.py."""

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from conftest import make_client
from test_users import CONFIG, multi  # noqa: F401 (the two-user server fixture)

RULES = {
    "CORSRules": [
        {"ID": "viewer", "AllowedOrigins": ["https://viewer.example.org"], "AllowedMethods": ["GET", "HEAD"],
         "AllowedHeaders": ["range", "x-amz-*"], "ExposeHeaders": ["ETag", "Content-Range"], "MaxAgeSeconds": 600},
        {"AllowedOrigins": ["http://*.lab.example"], "AllowedMethods": ["PUT", "POST", "DELETE"], "AllowedHeaders": ["*"]},
    ]
}


def code(call, **kwargs):
    with pytest.raises(ClientError) as e:
        call(**kwargs)
    return e.value.response["Error"]["Code"]


def test_cors_configuration_round_trip_and_checks(s3):
    s3.create_bucket(Bucket="cors")
    assert code(s3.get_bucket_cors, Bucket="cors") == "NoSuchCORSConfiguration"
    s3.put_bucket_cors(Bucket="cors", CORSConfiguration=RULES)
    assert s3.get_bucket_cors(Bucket="cors")["CORSRules"] == RULES["CORSRules"]
    # Rules as S3 checks them; a refused configuration leaves the one in place.
    for bad in (
        {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]},
        {"CORSRules": [{"AllowedOrigins": ["http://*.*.example"], "AllowedMethods": ["GET"]}]},
        {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["x-*-*"]}]},
        {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}] * 101},
    ):
        assert code(s3.put_bucket_cors, Bucket="cors", CORSConfiguration=bad) in ("InvalidRequest", "MalformedXML")
    assert s3.get_bucket_cors(Bucket="cors")["CORSRules"] == RULES["CORSRules"]
    s3.delete_bucket_cors(Bucket="cors")
    assert code(s3.get_bucket_cors, Bucket="cors") == "NoSuchCORSConfiguration"
    assert code(s3.get_bucket_cors, Bucket="missing-bucket") == "NoSuchBucket"


def test_only_the_owner_reads_and_changes_cors(multi):  # noqa: F811
    _, root, _, bob = multi
    root.create_bucket(Bucket="owned-cors", ACL="public-read-write")
    root.put_bucket_cors(Bucket="owned-cors", CORSConfiguration=RULES)
    anonymous = make_client(root.meta.endpoint_url, signature_version=UNSIGNED)
    for client in (bob, anonymous):
        assert code(client.get_bucket_cors, Bucket="owned-cors") == "AccessDenied"
        assert code(client.put_bucket_cors, Bucket="owned-cors",
                    CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET", "PUT"]}]}) == "AccessDenied"
        assert code(client.delete_bucket_cors, Bucket="owned-cors") == "AccessDenied"
    assert root.get_bucket_cors(Bucket="owned-cors")["CORSRules"] == RULES["CORSRules"]


def test_preflights_and_actual_requests_follow_the_rules(s3, server):
    import requests

    s3.create_bucket(Bucket="site")
    s3.put_object(Bucket="site", Key="chunk", Body=b"0123456789", ACL="public-read")
    s3.create_bucket(Bucket="bare")
    url = f"{server.endpoint}/site/chunk"

    def preflight(bucket_url, origin, method, headers=None):
        h = {"Origin": origin, "Access-Control-Request-Method": method}
        if headers:
            h["Access-Control-Request-Headers"] = headers
        return requests.options(bucket_url, headers=h, timeout=10)

    # No rules yet: refused, and so is a bucket without any.
    r = preflight(url, "https://viewer.example.org", "GET")
    assert r.status_code == 403 and "CORS is not enabled" in r.text
    s3.put_bucket_cors(Bucket="site", CORSConfiguration=RULES)
    r = preflight(url, "https://viewer.example.org", "GET", "Range, X-Amz-Date")
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == "https://viewer.example.org"
    assert r.headers["Access-Control-Allow-Methods"] == "GET, HEAD"
    assert r.headers["Access-Control-Allow-Headers"] == "range, x-amz-date"
    assert r.headers["Access-Control-Max-Age"] == "600"
    assert r.headers["Access-Control-Expose-Headers"] == "ETag, Content-Range"
    assert "Origin" in r.headers["Vary"]
    # A header, a method or an origin no rule names: 403, and no Allow header to act on.
    for origin, method, headers in (("https://viewer.example.org", "GET", "authorization"),
                                    ("https://viewer.example.org", "DELETE", None),
                                    ("https://evil.example", "GET", None),
                                    ("http://a.lab.example.evil.example", "PUT", None)):
        r = preflight(url, origin, method, headers)
        assert r.status_code == 403 and "<Code>AccessForbidden</Code>" in r.text, (origin, method, r.text)
        assert "Access-Control-Allow-Origin" not in r.headers
    assert preflight(url, "http://x.lab.example", "PUT").status_code == 200
    # Without an Origin: S3's 400. A bucket without rules, or none at all: 403.
    r = requests.options(url, timeout=10)
    assert r.status_code == 400 and "Origin request header needed" in r.text
    assert preflight(f"{server.endpoint}/bare/k", "https://viewer.example.org", "GET").status_code == 403
    assert preflight(f"{server.endpoint}/missing-bucket/k", "https://viewer.example.org", "GET").status_code == 403
    # A hostile preflight naming thousands of headers is refused, not matched one by one.
    r = preflight(url, "http://x.lab.example", "PUT", ", ".join(f"h{i}" for i in range(5000)))
    assert r.status_code == 403
    # Actual requests: the allowed origin gets the headers with the object; another gets none.
    got = requests.get(url, headers={"Origin": "https://viewer.example.org", "Range": "bytes=2-4"}, timeout=10)
    assert got.status_code == 206 and got.content == b"234"
    assert got.headers["Access-Control-Allow-Origin"] == "https://viewer.example.org"
    assert got.headers["Access-Control-Expose-Headers"] == "ETag, Content-Range"
    other = requests.get(url, headers={"Origin": "https://evil.example"}, timeout=10)
    assert other.status_code == 200 and "Access-Control-Allow-Origin" not in other.headers
    # A refused request (a private object) still carries the rule's headers, as S3's do, so a
    # page can read the error; the refusal itself stands.
    s3.put_object(Bucket="site", Key="private", Body=b"secret")
    denied = requests.get(f"{server.endpoint}/site/private", headers={"Origin": "https://viewer.example.org"}, timeout=10)
    assert denied.status_code == 403 and b"secret" not in denied.content
