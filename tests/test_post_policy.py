"""Browser uploads (POST object, an HTML form in multipart/form-data with a signed policy) as
the S3 API reference specifies them, sent as raw forms: a policy needs a signature and an
ISO 8601 expiration, its conditions bind the bucket, `success_action_redirect` and
`success_action_status` shape the answer, a `tagging` field tags the object and a checksum
field is checked and stored. Every refusal stores nothing."""

import base64
import datetime
import hashlib
import hmac
import json
import xml.etree.ElementTree as ET

import pytest
import requests

from conftest import ACCESS_KEY, SECRET_KEY, code_of
from sigv4 import signing_key

DATA = b"browser upload body\n"


def expiration(seconds=3600):
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def encoded(policy):
    return base64.b64encode(json.dumps(policy).encode()).decode()


def v2_fields(policy):
    """AWSAccessKeyId, policy and its HMAC-SHA1 signature (Signature Version 2)."""
    policy_b64 = encoded(policy)
    signature = base64.b64encode(hmac.new(SECRET_KEY.encode(), policy_b64.encode(), hashlib.sha1).digest()).decode()
    return {"AWSAccessKeyId": ACCESS_KEY, "policy": policy_b64, "signature": signature}


def v4_fields(conditions, amz_date=None, expires=None):
    """The policy (with the x-amz-* conditions Signature Version 4 requires) and its fields."""
    now = datetime.datetime.now(datetime.timezone.utc)
    date = now.strftime("%Y%m%d")
    amz_date = amz_date or now.strftime("%Y%m%dT%H%M%SZ")
    credential = f"{ACCESS_KEY}/{date}/us-east-1/s3/aws4_request"
    fields = {"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": credential, "x-amz-date": amz_date}
    policy = {"expiration": expires or expiration(), "conditions": [*conditions, *({k: v} for k, v in fields.items())]}
    policy_b64 = encoded(policy)
    signature = hmac.new(signing_key(SECRET_KEY, date), policy_b64.encode(), hashlib.sha256).hexdigest()
    return {**fields, "policy": policy_b64, "x-amz-signature": signature}


def post(server, bucket, fields, data=DATA, filename="f.txt", **kw):
    """Posts the form: `fields` in order, then the file (S3 requires it last)."""
    files = [(name, (None, value)) for name, value in fields.items()] + [("file", (filename, data))]
    return requests.post(f"{server.endpoint}/{bucket}", files=files, timeout=30, **kw)


def code(resp):
    return ET.fromstring(resp.content).findtext("Code")


def keys(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


@pytest.fixture
def open_bucket(s3):
    """A bucket anyone may write: a refusal there is the form's, not the requester's."""
    s3.create_bucket(Bucket="dropbox", ACL="public-read-write")
    return "dropbox"


def test_signed_forms_of_both_versions_store_the_file(server, s3, bucket):
    conditions = [{"bucket": bucket}, ["starts-with", "$key", "in/"], ["content-length-range", 1, 1000]]
    v2 = v2_fields({"expiration": expiration(), "conditions": conditions})
    assert post(server, bucket, {"key": "in/v2.txt", **v2}).status_code == 204
    assert post(server, bucket, {"key": "in/v4.txt", **v4_fields(conditions)}).status_code == 204
    for key in ("in/v2.txt", "in/v4.txt"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == DATA


def test_a_policy_without_its_signature_is_refused(server, s3, open_bucket):
    policy = {"expiration": expiration(), "conditions": [{"bucket": open_bucket}, ["starts-with", "$key", ""]]}
    v2 = v2_fields(policy)
    del v2["signature"]
    r = post(server, open_bucket, {"key": "unsigned-v2", **v2})
    assert (r.status_code, code(r)) == (400, "InvalidArgument") and "Signature" in r.text
    v4 = v4_fields([{"bucket": open_bucket}, ["starts-with", "$key", ""]])
    del v4["x-amz-signature"]
    r = post(server, open_bucket, {"key": "unsigned-v4", **v4})
    assert (r.status_code, code(r)) == (400, "InvalidArgument") and "X-Amz-Signature" in r.text
    assert keys(s3, open_bucket) == []


def test_a_policy_for_another_bucket_is_refused(server, s3, bucket):
    s3.create_bucket(Bucket="other")
    policy = {"expiration": expiration(), "conditions": [{"bucket": bucket}, ["starts-with", "$key", ""]]}
    # With a bucket field naming the policy's bucket, and without one: the URL's bucket counts.
    for extra in ({"bucket": bucket}, {}):
        r = post(server, "other", {"key": "k", **extra, **v2_fields(policy)})
        assert (r.status_code, code(r)) == (403, "AccessDenied"), r.text
        assert "Invalid according to Policy" in r.text
    r = post(server, "other", {"key": "k", **v4_fields([{"bucket": bucket}, ["starts-with", "$key", ""]])})
    assert (r.status_code, code(r)) == (403, "AccessDenied")
    assert keys(s3, "other") == [] and keys(s3, bucket) == []


def test_an_expiration_that_is_not_iso_8601_is_refused(server, s3, bucket):
    in_an_hour = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    for when in (str(in_an_hour), in_an_hour.strftime("%d/%m/%Y %H:%M"), "tomorrow"):
        policy = {"expiration": when, "conditions": [{"bucket": bucket}, ["starts-with", "$key", ""]]}
        r = post(server, bucket, {"key": "k", **v2_fields(policy)})
        assert (r.status_code, code(r)) == (400, "InvalidPolicyDocument"), when
    assert keys(s3, bucket) == []


def test_a_malformed_x_amz_date_is_refused(server, s3, bucket):
    fields = v4_fields([{"bucket": bucket}, ["starts-with", "$key", ""]], amz_date="2026-11-27 12:00:00")
    r = post(server, bucket, {"key": "k", **fields})
    assert (r.status_code, code(r)) == (400, "InvalidRequest")
    assert keys(s3, bucket) == []


def test_an_expired_policy_is_refused(server, s3, bucket):
    policy = {"expiration": expiration(-60), "conditions": [{"bucket": bucket}, ["starts-with", "$key", ""]]}
    r = post(server, bucket, {"key": "k", **v2_fields(policy)})
    assert (r.status_code, code(r)) == (403, "AccessDenied")
    assert keys(s3, bucket) == []


def test_a_field_no_condition_names_is_refused(server, s3, bucket):
    policy = {"expiration": expiration(), "conditions": [{"bucket": bucket}, ["starts-with", "$key", ""]]}
    r = post(server, bucket, {"key": "k", "x-amz-meta-color": "red", **v2_fields(policy)})
    assert (r.status_code, code(r)) == (403, "AccessDenied")
    policy["conditions"].append(["starts-with", "$x-amz-meta-color", "bl"])
    r = post(server, bucket, {"key": "k", "x-amz-meta-color": "red", **v2_fields(policy)})
    assert (r.status_code, code(r)) == (403, "AccessDenied") and "Invalid according to Policy" in r.text
    assert keys(s3, bucket) == []
    r = post(server, bucket, {"key": "k", "x-amz-meta-color": "blue", **v2_fields(policy)})
    assert r.status_code == 204
    assert s3.head_object(Bucket=bucket, Key="k")["Metadata"] == {"color": "blue"}


def test_a_file_outside_the_length_range_is_refused(server, s3, bucket):
    policy = {"expiration": expiration(), "conditions": [["starts-with", "$key", ""], ["content-length-range", 100, 200]]}
    for data, error in ((b"small", "EntityTooSmall"), (b"x" * 201, "EntityTooLarge")):
        r = post(server, bucket, {"key": "k", **v2_fields(policy)}, data=data)
        assert (r.status_code, code(r)) == (400, error)
    assert keys(s3, bucket) == []


def test_success_action_redirect_answers_303_with_bucket_key_and_etag(server, s3, bucket):
    for redirect in ("http://example.org/done", "http://example.org/done?from=form"):
        policy = {"expiration": expiration(), "conditions": [["starts-with", "$key", ""], {"success_action_redirect": redirect}]}
        fields = {"key": "to see.txt", "success_action_redirect": redirect, **v2_fields(policy)}
        r = post(server, bucket, fields, allow_redirects=False)
        assert r.status_code == 303, r.text
        etag = s3.head_object(Bucket=bucket, Key="to see.txt")["ETag"]
        assert etag.startswith('"')
        separator = "&" if "?" in redirect else "?"
        expected = f"{redirect}{separator}bucket={bucket}&key=to+see.txt&etag={etag.replace(chr(34), '%22')}"
        assert r.headers["Location"] == expected


def test_success_action_status_chooses_the_answer(server, s3, open_bucket):
    r = post(server, open_bucket, {"key": "s201", "success_action_status": "201"})
    assert r.status_code == 201
    document = ET.fromstring(r.content)
    etag = s3.head_object(Bucket=open_bucket, Key="s201")["ETag"]
    assert (document.findtext("Bucket"), document.findtext("Key"), document.findtext("ETag")) == (open_bucket, "s201", etag)
    r = post(server, open_bucket, {"key": "s200", "success_action_status": "200"})
    assert (r.status_code, r.content) == (200, b"")
    # The default, and any other value: 204.
    for key, status in (("s204", "204"), ("s404", "404"), ("none", None)):
        fields = {"key": key, **({"success_action_status": status} if status else {})}
        r = post(server, open_bucket, fields)
        assert (r.status_code, r.content) == (204, b"")
    assert sorted(keys(s3, open_bucket)) == ["none", "s200", "s201", "s204", "s404"]


TAGGING = "<Tagging><TagSet><Tag><Key>0</Key><Value>0</Value></Tag><Tag><Key>a b</Key><Value>1&amp;2</Value></Tag></TagSet></Tagging>"
TAGS = [{"Key": "0", "Value": "0"}, {"Key": "a b", "Value": "1&2"}]


def test_tags_in_an_anonymous_post_are_stored(server, s3, open_bucket):
    r = post(server, open_bucket, {"key": "tagged", "tagging": TAGGING})
    assert r.status_code == 204, r.text
    assert s3.get_object_tagging(Bucket=open_bucket, Key="tagged")["TagSet"] == TAGS
    r = post(server, open_bucket, {"key": "bad-tags", "tagging": "<Tagging><TagSet><Tag>"})
    assert (r.status_code, code(r)) == (400, "MalformedXML")
    assert keys(s3, open_bucket) == ["tagged"]


def test_tags_in_a_signed_post_are_stored(server, s3, bucket):
    conditions = [["starts-with", "$key", ""], ["starts-with", "$tagging", ""]]
    r = post(server, bucket, {"key": "tagged", "tagging": TAGGING, **v4_fields(conditions)})
    assert r.status_code == 204, r.text
    assert s3.get_object_tagging(Bucket=bucket, Key="tagged")["TagSet"] == TAGS


def test_a_checksum_field_is_checked_and_stored(server, s3, bucket):
    sha256 = base64.b64encode(hashlib.sha256(DATA).digest()).decode()
    # No policy condition needs to name the checksum field.
    policy = {"expiration": expiration(), "conditions": [["starts-with", "$key", ""]]}
    r = post(server, bucket, {"key": "summed", "x-amz-checksum-sha256": sha256, **v2_fields(policy)})
    assert r.status_code == 204, r.text
    assert s3.head_object(Bucket=bucket, Key="summed", ChecksumMode="ENABLED")["ChecksumSHA256"] == sha256
    other = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    r = post(server, bucket, {"key": "wrong", "x-amz-checksum-sha256": other, **v2_fields(policy)})
    assert (r.status_code, code(r)) == (400, "BadDigest")
    r = post(server, bucket, {"key": "garbled", "x-amz-checksum-sha256": "sailorjerry", **v2_fields(policy)})
    # A value that is no digest at all is refused as a PUT with that header is.
    put_code = code_of(s3.put_object, Bucket=bucket, Key="garbled", Body=DATA, ChecksumSHA256="sailorjerry")
    assert (r.status_code, code(r)) == (400, put_code)
    # A condition on the field holds it like any other.
    policy["conditions"].append(["eq", "$x-amz-checksum-sha256", other])
    r = post(server, bucket, {"key": "bound", "x-amz-checksum-sha256": sha256, **v2_fields(policy)})
    assert (r.status_code, code(r)) == (403, "AccessDenied")
    assert keys(s3, bucket) == ["summed"]


def test_a_checksum_field_in_an_anonymous_post(server, s3, open_bucket):
    import zlib

    crc32 = base64.b64encode(zlib.crc32(DATA).to_bytes(4, "big")).decode()
    r = post(server, open_bucket, {"key": "crc", "x-amz-checksum-crc32": crc32})
    assert r.status_code == 204, r.text
    assert s3.head_object(Bucket=open_bucket, Key="crc", ChecksumMode="ENABLED")["ChecksumCRC32"] == crc32
    r = post(server, open_bucket, {"key": "crc-wrong", "x-amz-checksum-crc32": "AAAAAA=="})
    assert (r.status_code, code(r)) == (400, "BadDigest")
    assert keys(s3, open_bucket) == ["crc"]
