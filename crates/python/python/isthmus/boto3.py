"""A boto3 S3 client whose calls are served in-process by the engine instead of over HTTP.

    import isthmus.boto3
    s3 = isthmus.boto3.client("/lustre/project/data")     # instead of boto3.client("s3", ...)
    s3.put_object(Bucket="runs", Key="a.csv", Body=b"...")
    s3.upload_file("big.h5", "runs", "big.h5")           # multipart, as boto3 does it

botocore builds, serialises and parses every call as usual; a `before-send` hook answers the
request from the engine, so existing code (put/get/head/delete(s)/copy/list/multipart,
upload_file/download_file) runs unchanged. The client does not sign requests, does not
compute request checksums and skips botocore's parameter validation: nothing travels over a
network. A file given as Body and the Body of a GET stream through the engine in 1 MiB pieces,
so memory stays bounded whatever the object's size. Timestamps (LastModified) reach botocore as epoch seconds, which it turns into the
same datetime objects as S3's date strings.
"""

import base64
import hashlib
import io
import xml.etree.ElementTree as ET
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

import boto3
import botocore
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from ._native import IsthmusError, Store

ENDPOINT = "http://isthmus.embedded"
_STATUS = {
    "NoSuchBucket": 404, "NoSuchKey": 404, "NoSuchUpload": 404, "NotModified": 304, "PreconditionFailed": 412,
    "InvalidRange": 416, "BucketAlreadyOwnedByYou": 409, "BucketAlreadyExists": 409, "BucketNotEmpty": 409, "ObjectIsDirectory": 409,
    "InsufficientStorage": 507, "AccessDenied": 403, "InternalError": 500,
}


class _Raw:
    """What botocore reads a response body from: bytes, or an engine `ObjectReader` that an
    object of any size streams from in pieces."""

    def __init__(self, data):
        self._io = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data

    def read(self, amt=None, **_):
        return self._io.read(amt) if amt is not None else self._io.read()

    def stream(self, amt=1 << 20, **_):
        while chunk := self._io.read(amt):
            yield chunk

    def close(self):
        self._io.close()


def _response(url, status=200, headers=None, body=b""):
    headers = dict(headers or {})
    if "content-length" not in headers:
        headers["content-length"] = str(len(body))
    return AWSResponse(url, status, headers, _Raw(body))


def _xml(url, root_tag, inner, status=200):
    body = f'<?xml version="1.0" encoding="UTF-8"?><{root_tag} xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{inner}</{root_tag}>'
    return _response(url, status, {"content-type": "application/xml"}, body.encode())


def _error(url, code, message, method):
    status = _STATUS.get(code, 400)
    if method == "HEAD":
        return _response(url, status)
    body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error>'
    return _response(url, status, {"content-type": "application/xml"}, body.encode())


def _http_date(ts):
    # Epoch seconds: botocore turns them into the same datetime as an RFC 822 date, without
    # running dateutil's general parser on every response.
    return str(int(ts))


def _iso(ts):
    return str(int(ts))


def _object_headers(info):
    headers = {"etag": f'"{info["etag"]}"', "last-modified": _http_date(info["last_modified"]), "accept-ranges": "bytes"}
    if info.get("content_type"):
        headers["content-type"] = info["content_type"]
    for k, v in (info.get("metadata") or {}).items():
        headers[f"x-amz-meta-{k}"] = v
    return headers


def _body_bytes(body):
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return body
    if isinstance(body, str):
        return body.encode()
    data = body.read()
    return data if isinstance(data, (bytes, bytearray)) else data.encode()


class _Handler:
    def __init__(self, store):
        self.store = store

    def __call__(self, request, **_):
        url = request.url
        parts = urlsplit(url)
        segments = parts.path.lstrip("/").split("/", 1)
        bucket = unquote(segments[0]) if segments[0] else None
        key = unquote(segments[1]) if len(segments) > 1 and segments[1] else None
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        try:
            return self.dispatch(url, request.method, bucket, key, query, headers, request.body)
        except IsthmusError as e:
            code, message = e.args
            return _error(url, code, message, request.method)

    def dispatch(self, url, method, bucket, key, q, h, body):
        s = self.store
        if bucket is None:
            names = "".join(f"<Bucket><Name>{escape(n)}</Name><CreationDate>{_iso(0)}</CreationDate></Bucket>" for n in s.list_buckets())
            return _xml(url, "ListAllMyBucketsResult", f"<Owner><ID>embedded</ID></Owner><Buckets>{names}</Buckets>")
        if key is None:
            return self.bucket_op(url, method, bucket, q, body)
        if method == "PUT" and "uploadId" in q:
            etag = s.upload_part(bucket, key, q["uploadId"], int(q["partNumber"]), _body_bytes(body))
            return _response(url, 200, {"etag": f'"{etag}"'})
        if method == "PUT" and "x-amz-copy-source" in h:
            src = unquote(h["x-amz-copy-source"]).lstrip("/").split("?")[0]
            src_bucket, src_key = src.split("/", 1)
            info = s.copy_object(src_bucket, src_key, bucket, key)
            inner = f'<ETag>"{info["etag"]}"</ETag><LastModified>{_iso(info["last_modified"])}</LastModified>'
            return _xml(url, "CopyObjectResult", inner)
        if method == "PUT":
            meta = {k[len("x-amz-meta-"):]: v for k, v in h.items() if k.startswith("x-amz-meta-")}
            md5 = base64.b64decode(h["content-md5"]) if "content-md5" in h else None
            if hasattr(body, "read"):
                # A file or stream: in pieces, so its size does not matter.
                info = s.put_stream(bucket, key, body, content_type=h.get("content-type"), metadata=meta or None, content_md5=md5)
            else:
                data = _body_bytes(body)
                if md5 is not None and md5 != hashlib.md5(data).digest():
                    raise IsthmusError("BadDigest", "The Content-MD5 you specified did not match what we received.")
                info = s.put_object(bucket, key, data, content_type=h.get("content-type"), metadata=meta or None)
            return _response(url, 200, {"etag": f'"{info["etag"]}"'})
        if method in ("GET", "HEAD") and "uploadId" in q:
            parts = "".join(f'<Part><PartNumber>{n}</PartNumber><ETag>"{e}"</ETag><Size>{size}</Size></Part>' for n, e, size in s.list_parts(bucket, key, q["uploadId"]))
            return _xml(url, "ListPartsResult", f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><UploadId>{q['uploadId']}</UploadId><IsTruncated>false</IsTruncated>{parts}")
        if method == "HEAD":
            info = s.head_object(bucket, key)
            return _response(url, 200, {**_object_headers(info), "content-length": str(info["size"])})
        if method == "GET":
            # The body streams from the open file its ETag was taken from, in pieces.
            rng = h.get("range")
            reader = s.open_object(bucket, key, range=rng)
            info = reader.info
            headers = {**_object_headers(info), "content-length": str(reader.remaining)}
            if reader.range is None:
                return _response(url, 200, headers, reader)
            first, last = reader.range
            return _response(url, 206, {**headers, "content-range": f"bytes {first}-{last}/{info['size']}"}, reader)
        if method == "DELETE" and "uploadId" in q:
            s.abort_multipart_upload(bucket, key, q["uploadId"])
            return _response(url, 204)
        if method == "DELETE":
            s.delete_object(bucket, key)
            return _response(url, 204)
        if method == "POST" and "uploads" in q:
            meta = {k[len("x-amz-meta-"):]: v for k, v in (h or {}).items() if k.startswith("x-amz-meta-")}
            upload_id = s.create_multipart_upload(bucket, key, content_type=h.get("content-type"), metadata=meta or None)
            return _xml(url, "InitiateMultipartUploadResult", f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><UploadId>{upload_id}</UploadId>")
        if method == "POST" and "uploadId" in q:
            root = ET.fromstring(_body_bytes(body))
            ns = {"s3": root.tag.split("}")[0].strip("{")} if root.tag.startswith("{") else {}
            find = (lambda e, t: e.find(f"s3:{t}", ns)) if ns else (lambda e, t: e.find(t))
            parts = [(int(find(p, "PartNumber").text), find(p, "ETag").text) for p in (root.findall("s3:Part", ns) if ns else root.findall("Part"))]
            info = s.complete_multipart_upload(bucket, key, q["uploadId"], parts)
            return _xml(url, "CompleteMultipartUploadResult", f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><ETag>\"{info['etag']}\"</ETag>")
        raise IsthmusError("NotImplemented", f"{method} on an object with {sorted(q)} is not served in-process")

    def bucket_op(self, url, method, bucket, q, body):
        s = self.store
        if method == "PUT":
            s.create_bucket(bucket)
            return _response(url, 200, {"location": f"/{bucket}"})
        if method == "HEAD":
            s.head_bucket(bucket)
            return _response(url, 200)
        if method == "DELETE":
            s.delete_bucket(bucket)
            return _response(url, 204)
        if method == "POST" and "delete" in q:
            root = ET.fromstring(_body_bytes(body))
            tag = (lambda t: f"{{{root.tag.split('}')[0].strip('{')}}}{t}") if root.tag.startswith("{") else (lambda t: t)
            quiet = (root.findtext(tag("Quiet")) or "false").lower() == "true"
            done, errors = [], []
            for obj in root.findall(tag("Object")):
                k = obj.findtext(tag("Key"))
                try:
                    s.delete_object(bucket, k)
                    if not quiet:
                        done.append(f"<Deleted><Key>{escape(k)}</Key></Deleted>")
                except IsthmusError as e:
                    errors.append(f"<Error><Key>{escape(k)}</Key><Code>{e.args[0]}</Code><Message>{escape(e.args[1])}</Message></Error>")
            return _xml(url, "DeleteResult", "".join(done + errors))
        if method == "GET" and "location" in q:
            s.head_bucket(bucket)
            return _xml(url, "LocationConstraint", "")
        if method == "GET":
            return self.list_op(url, bucket, q)
        raise IsthmusError("NotImplemented", f"{method} on a bucket with {sorted(q)} is not served in-process")

    def list_op(self, url, bucket, q):
        v2 = q.get("list-type") == "2"
        token = q.get("continuation-token")
        marker = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode() if token else (q.get("start-after") if v2 else q.get("marker"))
        page = self.store.list_objects(bucket, prefix=q.get("prefix", ""), delimiter=q.get("delimiter") or None,
                                       start_after=marker or None, max_keys=min(int(q.get("max-keys", 1000)), 1000))
        encode = (lambda k: k) if q.get("encoding-type") != "url" else (lambda k: __import__("urllib.parse").parse.quote(k, safe="/-_.~"))
        contents = "".join(
            f'<Contents><Key>{escape(encode(o["key"]))}</Key><LastModified>{_iso(o["last_modified"])}</LastModified>'
            f'<ETag>"{o["etag"]}"</ETag><Size>{o["size"]}</Size><StorageClass>STANDARD</StorageClass></Contents>'
            for o in page["objects"]
        )
        prefixes = "".join(f"<CommonPrefixes><Prefix>{escape(encode(p))}</Prefix></CommonPrefixes>" for p in page["common_prefixes"])
        inner = f"<Name>{escape(bucket)}</Name><Prefix>{escape(encode(q.get('prefix', '')))}</Prefix><IsTruncated>{str(page['is_truncated']).lower()}</IsTruncated>"
        if q.get("encoding-type"):
            inner += f"<EncodingType>{q['encoding-type']}</EncodingType>"
        if page["is_truncated"] and page["next_marker"]:
            nxt = base64.urlsafe_b64encode(page["next_marker"].encode()).decode().rstrip("=")
            inner += f"<NextContinuationToken>{nxt}</NextContinuationToken>" if v2 else f"<NextMarker>{escape(encode(page['next_marker']))}</NextMarker>"
        if v2:
            inner += f"<KeyCount>{len(page['objects']) + len(page['common_prefixes'])}</KeyCount>"
        return _xml(url, "ListBucketResult", inner + contents + prefixes)


def client(root, store=None, **kwargs):
    """A boto3 S3 client served in-process from the data root `root` (or an open `Store`)."""
    store = store or Store(root)
    config = Config(
        signature_version=botocore.UNSIGNED,
        s3={"addressing_style": "path"},
        request_checksum_calculation="when_required",
        parameter_validation=False,
        response_checksum_validation="when_required",
        retries={"max_attempts": 1},
    )
    s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1", config=config, **kwargs)
    s3.meta.events.register("before-send.s3", _Handler(store))
    # botocore formats the User-Agent header twice per request; nothing reads it in-process,
    # so it is formatted once.
    creator = getattr(s3, "_user_agent_creator", None)
    if creator is not None:
        s3.meta.events.unregister("request-created.s3", creator.rebuild_and_replace_user_agent_handler)
        user_agent = creator.to_string()
        creator.to_string = lambda: user_agent
    return s3
