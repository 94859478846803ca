"""Limits with clear errors (header size, XML body size, metadata size), and traversal in the
forms a crafted request can take: percent-encoded dots and slashes, NUL, planted hard links."""

import os
import socket

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY


def test_oversized_headers_get_431(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n")
    s.settimeout(5)
    assert s.recv(100).startswith(b"HTTP/1.1 431")
    s.close()


def test_metadata_over_2_kib_is_refused(s3, bucket, server):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="meta", Body=b"x", Metadata={"big": "v" * 2100})
    assert e.value.response["Error"]["Code"] == "MetadataTooLarge"
    assert not (server.root / bucket / "meta").exists()
    s3.put_object(Bucket=bucket, Key="meta", Body=b"x", Metadata={"fits": "v" * 1900})


def test_oversized_xml_body_is_refused(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="survivor", Body=b"x")
    body = b"<Delete>" + b"<Object><Key>survivor</Key></Object>" * 700_000 + b"</Delete>"  # ~25 MB
    url = f"{server.endpoint}/{bucket}?delete"
    import hashlib

    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials

    request = botocore.awsrequest.AWSRequest(method="POST", url=url, data=body, headers={"Content-MD5": __import__("base64").b64encode(hashlib.md5(body).digest()).decode()})
    botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    r = requests.post(url, data=body, headers=dict(request.headers), timeout=60)
    assert r.status_code == 400 and "MaxMessageLengthExceeded" in r.text, r.status_code
    assert s3.head_object(Bucket=bucket, Key="survivor")["ContentLength"] == 1


@pytest.mark.parametrize("raw_key", ["%2E%2E/escape", "..%2Fescape", "%2E%2E%2F%2E%2E%2Fescape", "a%00b", "%2Fabs"])
def test_encoded_traversal_is_refused(server, bucket, raw_key):
    # The key goes on the wire exactly as given (percent-encoded), signed as such.
    import datetime
    import hashlib
    import hmac

    from sigv4 import signing_key

    body = b"x"
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = server.endpoint.split("://", 1)[1]
    path = f"/{bucket}/{raw_key}"
    payload_hash = hashlib.sha256(body).hexdigest()
    hdrs = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash}
    signed = sorted(hdrs)
    canonical = "\n".join(["PUT", path, "", *[f"{h}:{hdrs[h]}" for h in signed], "", ";".join(signed), payload_hash])
    scope = f"{date}/us-east-1/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    sig = hmac.new(signing_key(SECRET_KEY, date), to_sign.encode(), hashlib.sha256).hexdigest()
    hdrs["authorization"] = f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"
    del hdrs["host"]
    s = requests.Session()
    prepared = requests.Request("PUT", server.endpoint + "/placeholder", headers=hdrs, data=body).prepare()
    prepared.url = server.endpoint + path  # keep the encoding as is
    r = s.send(prepared, timeout=10)
    assert r.status_code in (400, 403), (r.status_code, r.text)
    assert not (server.root / "escape").exists() and not (server.root.parent / "escape").exists()
    assert not (server.root / bucket / "escape").exists()


@pytest.mark.posix_only
def test_planted_hard_links_are_replaced_not_written_through(s3, bucket, server, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside the bucket")
    os.link(outside, server.root / bucket / "hardlink")
    # A hard link is the same file under a name inside the bucket: it reads as that file...
    assert s3.get_object(Bucket=bucket, Key="hardlink")["Body"].read() == b"outside the bucket"
    # ...but writes replace the name, never the shared inode, and deletes remove only the name.
    s3.put_object(Bucket=bucket, Key="hardlink", Body=b"new content")
    assert outside.read_bytes() == b"outside the bucket"
    s3.delete_object(Bucket=bucket, Key="hardlink")
    assert outside.read_bytes() == b"outside the bucket"
