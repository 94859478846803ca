"""A small SigV4 signer for requests boto3 does not send: streaming signed payloads
(STREAMING-AWS4-HMAC-SHA256-PAYLOAD, aws-chunked with a signature per chunk, and its -TRAILER
form with a signed checksum after the last chunk)."""

import datetime
import hashlib
import hmac
from urllib.parse import quote

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret, date, region="us-east-1"):
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, "s3")
    return _hmac(k, "aws4_request")


def _now():
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")


def _authorize(headers, method, path, query, payload_hash, access_key, secret, amz_date, date):
    """Adds the SigV4 Authorization header, signing every header in `headers`."""
    signed = sorted(headers)
    canonical = "\n".join([method, path, query, *[f"{h}:{headers[h]}" for h in signed], "", ";".join(signed), payload_hash])
    scope = f"{date}/us-east-1/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    sig = hmac.new(signing_key(secret, date), to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"


def streaming_put(endpoint, access_key, secret, bucket, key, data, chunk_size=64 * 1024, tamper_chunk=None, trailer=None,
                  tamper_trailer=False):
    """Builds (url, headers, body) for a PUT with a signed aws-chunked body. With `trailer`
    (name, value), a checksum goes after the last chunk, signed as the SDKs send it
    (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER; `tamper_trailer` changes the value after
    signing)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = endpoint.split("://", 1)[1]
    path = "/" + quote(bucket) + "/" + quote(key, safe="/~")
    chunks = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]

    content_sha256 = STREAMING + ("-TRAILER" if trailer else "")
    headers = {
        "host": host,
        "x-amz-date": amz_date,
        "x-amz-content-sha256": content_sha256,
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
    }
    if trailer:
        headers["x-amz-trailer"] = trailer[0]
    signed = sorted(headers)
    canonical = "\n".join(["PUT", path, "", *[f"{h}:{headers[h]}" for h in signed], "", ";".join(signed), content_sha256])
    scope = f"{date}/us-east-1/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key_bytes = signing_key(secret, date)
    seed = hmac.new(key_bytes, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={seed}"
    body = bytearray()
    prev = seed
    for i, c in enumerate(chunks):
        chunk_to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY_SHA256, hashlib.sha256(c).hexdigest()])
        sig = hmac.new(key_bytes, chunk_to_sign.encode(), hashlib.sha256).hexdigest()
        prev = sig
        payload = c if i != tamper_chunk else bytes([c[0] ^ 1]) + c[1:]
        body += f"{len(c):x};chunk-signature={sig}\r\n".encode() + payload + (b"\r\n" if c or not trailer else b"")
    if trailer:
        name, value = trailer
        trailer_to_sign = "\n".join(
            ["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev, hashlib.sha256(f"{name}:{value}\n".encode()).hexdigest()]
        )
        trailer_sig = hmac.new(key_bytes, trailer_to_sign.encode(), hashlib.sha256).hexdigest()
        sent = value if not tamper_trailer else value[::-1]
        body += f"{name}:{sent}\r\nx-amz-trailer-signature:{trailer_sig}\r\n\r\n".encode()
    headers["content-length"] = str(len(body))
    del headers["host"]
    return endpoint + path, headers, bytes(body)


def signed_put(endpoint, access_key, secret, bucket, key, body, payload_hash, extra_headers, virtual_host=None, content_length=True):
    """Builds (url, headers) for a PUT signed in the header with the given payload hash. With
    `virtual_host` (a domain), the bucket goes into the Host header instead of the path; without
    `content_length`, no Content-Length is sent (for chunked transfer encoding)."""
    amz_date, date = _now()
    host = endpoint.split("://", 1)[1]
    path = "/" + quote(bucket) + "/" + quote(key, safe="/~")
    if virtual_host:
        host = f"{bucket}.{virtual_host}:{host.rsplit(':', 1)[1]}"
        path = "/" + quote(key, safe="/~")
    headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash}
    if content_length:
        headers["content-length"] = str(len(body))
    headers.update({k.lower(): v for k, v in extra_headers.items()})
    _authorize(headers, "PUT", path, "", payload_hash, access_key, secret, amz_date, date)
    if not virtual_host:
        del headers["host"]
    return endpoint + path, headers


def unsigned_trailer_put(endpoint, access_key, secret, bucket, key, data, trailer_name, trailer_value):
    """A PUT the way current SDKs send it: aws-chunked, unsigned payload, checksum trailer."""
    body = f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n" + f"{trailer_name}:{trailer_value}\r\n\r\n".encode()
    extra = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)), "x-amz-trailer": trailer_name}
    url, headers = signed_put(endpoint, access_key, secret, bucket, key, body, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", extra)
    return url, headers, body


def signed_get(endpoint, access_key, secret, path, query, method="GET"):
    """Builds (url, headers) for a GET (or HEAD) of `path` (already URI-encoded) with `query` (a
    dict), signed in the header with an empty payload: for clients that skip an SDK's parsing."""
    amz_date, date = _now()
    host = endpoint.split("://", 1)[1]
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(str(v), safe='-_.~')}" for k, v in sorted(query.items()))
    headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": EMPTY_SHA256}
    _authorize(headers, method, path, canonical_query, EMPTY_SHA256, access_key, secret, amz_date, date)
    del headers["host"]
    return f"{endpoint}{path}" + (f"?{canonical_query}" if canonical_query else ""), headers
