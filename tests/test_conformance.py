"""S3 behaviours real clients trip on (issue 12), each against the real server with boto3, the
aws CLI or plain HTTP."""

import json
import socket

import pytest
import requests


def test_a_folder_object_is_listed_under_its_own_prefix(s3, aws):
    s3.create_bucket(Bucket="folders")
    for key in ("empty/dir/", "full/", "full/child.txt"):
        s3.put_object(Bucket="folders", Key=key, Body=b"")
    v2 = s3.list_objects_v2(Bucket="folders", Prefix="empty/dir/", Delimiter="/")
    assert [o["Key"] for o in v2["Contents"]] == ["empty/dir/"]
    v1 = s3.list_objects(Bucket="folders", Prefix="full/", Delimiter="/")
    assert [o["Key"] for o in v1["Contents"]] == ["full/", "full/child.txt"]
    versions = s3.list_object_versions(Bucket="folders", Prefix="full/", Delimiter="/")
    assert [v["Key"] for v in versions["Versions"]] == ["full/", "full/child.txt"]
    # The aws CLI removes a folder with what it lists under it; the bucket is then empty.
    aws("s3", "rm", "--recursive", "s3://folders/full/")
    aws("s3", "rm", "--recursive", "s3://folders/empty/")
    assert s3.list_objects_v2(Bucket="folders").get("KeyCount") == 0
    aws("s3", "rb", "s3://folders")


@pytest.mark.posix_only
def test_sync_of_a_tree_with_empty_files_does_not_stall(aws, server, tmp_path):
    """botocore before 1.43.77 sends `Expect: 100-continue` on empty PUTs and, answered at once
    without an interim 100, used to wait for the server's header timeout (30 s) per file."""
    tree = tmp_path / "tree-with-empties"
    tree.mkdir()
    for i in range(4):
        (tree / f"empty-{i}").write_bytes(b"")
        (tree / f"full-{i}").write_bytes(b"data %d" % i)
    aws("s3", "mb", "s3://empties")
    # Uploads that take a second or two; a stall per empty file takes minutes.
    result = aws("s3", "sync", str(tree), "s3://empties/t", "--cli-read-timeout", "60", timeout=25)
    assert result.returncode == 0
    assert sorted(p.name for p in (server.root / "empties" / "t").iterdir()) == sorted(p.name for p in tree.iterdir())
    assert (server.root / "empties" / "t" / "empty-0").stat().st_size == 0


def test_only_expect_requests_answered_without_100_close_their_connection(s3):
    s3.create_bucket(Bucket="expect")
    # boto3 sends Expect: 100-continue on every PutObject.
    empty = s3.put_object(Bucket="expect", Key="empty", Body=b"")
    assert empty["ResponseMetadata"]["HTTPHeaders"].get("connection") == "close"
    full = s3.put_object(Bucket="expect", Key="full", Body=b"x" * 100_000)
    assert "connection" not in full["ResponseMetadata"]["HTTPHeaders"]
    assert s3.get_object(Bucket="expect", Key="full")["Body"].read() == b"x" * 100_000
    assert "connection" not in s3.head_object(Bucket="expect", Key="empty")["ResponseMetadata"]["HTTPHeaders"]


def test_a_refused_write_answers_before_the_client_sends_its_body(s3, server):
    """Expect: 100-continue to a bucket the requester may not write: the 403 comes instead of
    the interim 100, so the client never sends the body (anonymous PUT and UploadPart alike);
    an allowed write gets its 100 and completes."""
    from conftest import ACCESS_KEY, SECRET_KEY
    from sigv4 import signed_put

    s3.create_bucket(Bucket="private-writes")
    upload = s3.create_multipart_upload(Bucket="private-writes", Key="mp")["UploadId"]
    host, port = server.endpoint.split("//", 1)[1].split(":")

    def first_answer(path, headers):
        head = f"PUT {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(head.encode())
            return sock.recv(4096).decode()

    for path in ("/private-writes/k", f"/private-writes/mp?partNumber=1&uploadId={upload}"):
        reply = first_answer(path, {})
        assert reply.startswith("HTTP/1.1 403"), reply
        assert "<Code>AccessDenied</Code>" in reply
    body = b"x" * 100_000
    url, headers = signed_put(server.endpoint, ACCESS_KEY, SECRET_KEY, "private-writes", "k", body, "UNSIGNED-PAYLOAD", {})
    headers.pop("content-length")
    assert first_answer(url.split(server.endpoint, 1)[1], headers).startswith("HTTP/1.1 100")
    assert "Contents" not in s3.list_objects_v2(Bucket="private-writes")


def test_every_error_carries_a_message_and_the_request_id(s3, server):
    from botocore.exceptions import ClientError

    for call in (
        lambda: s3.create_bucket(Bucket="ab"),
        lambda: s3.get_object(Bucket="no-such-bucket", Key="k"),
        lambda: s3.list_objects_v2(Bucket="Invalid_Name"),
    ):
        with pytest.raises(ClientError) as raised:
            call()
        error = raised.value.response["Error"]
        assert error["Code"] and error.get("Message") and error["Message"] != "Unknown", error
        header_id = raised.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        assert raised.value.response["ResponseMetadata"]["RequestId"] == header_id
    # Anonymous requests too, with plain HTTP.
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{server.endpoint}/some-bucket")
    body = raised.value.read().decode()
    assert "<Message>" in body and f"<RequestId>{raised.value.headers['x-amz-request-id']}</RequestId>" in body


def test_a_retried_complete_gets_the_completed_object(s3):
    from botocore.exceptions import ClientError

    s3.create_bucket(Bucket="retries")
    upload = s3.create_multipart_upload(Bucket="retries", Key="out.bin")["UploadId"]
    part = s3.upload_part(Bucket="retries", Key="out.bin", UploadId=upload, PartNumber=1, Body=b"only part")
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    first = s3.complete_multipart_upload(Bucket="retries", Key="out.bin", UploadId=upload, MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket="retries", Key="out.bin", UploadId=upload, MultipartUpload=parts)
    assert again["ETag"] == first["ETag"] and again["Key"] == "out.bin"
    # Once the key holds another object, the old upload id is gone for good.
    s3.put_object(Bucket="retries", Key="out.bin", Body=b"replaced")
    with pytest.raises(ClientError) as raised:
        s3.complete_multipart_upload(Bucket="retries", Key="out.bin", UploadId=upload, MultipartUpload=parts)
    assert raised.value.response["Error"]["Code"] == "NoSuchUpload"
    assert s3.list_multipart_uploads(Bucket="retries").get("Uploads", []) == []


def test_list_buckets_pages_and_filters(s3):
    for name in ("page-a", "page-b", "page-c", "other-bucket"):
        s3.create_bucket(Bucket=name)
    names, token = [], None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        page = s3.list_buckets(MaxBuckets=1, Prefix="page-", **kw)
        assert len(page["Buckets"]) <= 1 and page["Prefix"] == "page-"
        names += [b["Name"] for b in page["Buckets"]]
        token = page.get("ContinuationToken")
        if not token:
            break
    assert names == ["page-a", "page-b", "page-c"]
    everything = s3.list_buckets()
    assert "ContinuationToken" not in everything and len(everything["Buckets"]) == 4
    assert {b["BucketRegion"] for b in everything["Buckets"]} == {"us-east-1"}
    assert s3.list_buckets(BucketRegion="eu-west-1")["Buckets"] == []
    assert len(s3.list_buckets(BucketRegion="us-east-1")["Buckets"]) == 4


def raw_get(server, path, query):
    import http.client

    from conftest import ACCESS_KEY, SECRET_KEY
    from sigv4 import signed_get

    url, headers = signed_get(server.endpoint, ACCESS_KEY, SECRET_KEY, path, query)
    conn = http.client.HTTPConnection(server.endpoint.split("//", 1)[1])
    conn.request("GET", url.split(server.endpoint, 1)[1], headers=headers)
    response = conn.getresponse()
    return response.status, response.read().decode()


def test_listing_delimiters_and_url_encoding(s3, server):
    s3.create_bucket(Bucket="delims")
    for key in ("a b/c", "a b/d+e", "x::y::z", "x::w", "plain"):
        s3.put_object(Bucket="delims", Key=key, Body=b"")
    # An empty delimiter is no delimiter: no Delimiter element, every key listed.
    status, body = raw_get(server, "/delims", {"list-type": "2", "delimiter": ""})
    assert status == 200 and "<Delimiter>" not in body and body.count("<Key>") == 5
    # Multi-character delimiters roll up on the whole key.
    page = s3.list_objects_v2(Bucket="delims", Delimiter="::")
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["x::"]
    assert [o["Key"] for o in page["Contents"]] == ["a b/c", "a b/d+e", "plain"]
    # encoding-type=url encodes every field S3 encodes.
    status, body = raw_get(
        server, "/delims", {"list-type": "2", "prefix": "a b/", "start-after": "a b/c", "encoding-type": "url"}
    )
    assert "<Prefix>a%20b/</Prefix>" in body and "<StartAfter>a%20b/c</StartAfter>" in body
    assert "<Key>a%20b/d%2Be</Key>" in body and "<EncodingType>url</EncodingType>" in body
    status, body = raw_get(server, "/delims", {"list-type": "2", "delimiter": "/", "encoding-type": "url"})
    assert "<CommonPrefixes><Prefix>a%20b/</Prefix></CommonPrefixes>" in body
    # botocore leaves keys encoded when the caller asked for the encoding itself.
    listed = s3.list_objects_v2(Bucket="delims", Prefix="a b/", EncodingType="url")
    assert [o["Key"] for o in listed["Contents"]] == ["a%20b/c", "a%20b/d%2Be"]


def test_presigned_urls_live_one_second_to_seven_days(server):
    """SigV4 presigned URLs (SigV2 ones, which carry an absolute expiry time, are bounded to a
    week too: test_security_limits.py)."""
    import urllib.error
    import urllib.request

    from conftest import make_client

    s3 = make_client(server.endpoint, signature_version="s3v4")
    s3.create_bucket(Bucket="presign")
    s3.put_object(Bucket="presign", Key="k", Body=b"shared")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "presign", "Key": "k"}, ExpiresIn=7 * 86400)
    assert urllib.request.urlopen(url).read() == b"shared"
    too_long = s3.generate_presigned_url("get_object", Params={"Bucket": "presign", "Key": "k"}, ExpiresIn=7 * 86400 + 1)
    # botocore will not sign 0 s; the bound is checked before the signature.
    zero = s3.generate_presigned_url("get_object", Params={"Bucket": "presign", "Key": "k"}, ExpiresIn=60)
    zero = zero.replace("X-Amz-Expires=60", "X-Amz-Expires=0")
    for url in (too_long, zero):
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(url)
        assert raised.value.code == 403
        body = raised.value.read().decode()
        assert "<Code>AuthorizationQueryParametersError</Code>" in body and "X-Amz-Expires" in body


def test_tagging_count_on_get_and_head(s3):
    s3.create_bucket(Bucket="tagcount")
    s3.put_object(Bucket="tagcount", Key="tagged", Body=b"x", Tagging="project=climate&run=7")
    s3.put_object(Bucket="tagcount", Key="plain", Body=b"x")
    assert s3.get_object(Bucket="tagcount", Key="tagged")["TagCount"] == 2
    head = s3.head_object(Bucket="tagcount", Key="tagged")["ResponseMetadata"]["HTTPHeaders"]
    assert head["x-amz-tagging-count"] == "2"
    assert "TagCount" not in s3.get_object(Bucket="tagcount", Key="plain")
    assert "x-amz-tagging-count" not in s3.head_object(Bucket="tagcount", Key="plain")["ResponseMetadata"]["HTTPHeaders"]


def test_get_object_attributes(s3):
    s3.create_bucket(Bucket="attrs")
    put = s3.put_object(Bucket="attrs", Key="small", Body=b"hello", ChecksumAlgorithm="SHA256")
    attrs = s3.get_object_attributes(
        Bucket="attrs", Key="small", ObjectAttributes=["ETag", "Checksum", "ObjectSize", "StorageClass", "ObjectParts"]
    )
    # Unquoted, as S3 writes it in this response only.
    assert attrs["ETag"] == put["ETag"].strip('"') and attrs["ObjectSize"] == 5 and attrs["StorageClass"] == "STANDARD"
    assert attrs["Checksum"]["ChecksumSHA256"] == put["ChecksumSHA256"]
    assert "ObjectParts" not in attrs  # one-piece objects have no parts, as in S3
    only_size = s3.get_object_attributes(Bucket="attrs", Key="small", ObjectAttributes=["ObjectSize"])
    assert "ETag" not in only_size and only_size["ObjectSize"] == 5
    # A multipart object: parts paged by MaxParts and PartNumberMarker.
    upload = s3.create_multipart_upload(Bucket="attrs", Key="big")["UploadId"]
    sizes = [5 << 20, 5 << 20, 7]
    parts = []
    for n, size in enumerate(sizes, start=1):
        etag = s3.upload_part(Bucket="attrs", Key="big", UploadId=upload, PartNumber=n, Body=b"p" * size)["ETag"]
        parts.append({"PartNumber": n, "ETag": etag})
    s3.complete_multipart_upload(Bucket="attrs", Key="big", UploadId=upload, MultipartUpload={"Parts": parts})
    first = s3.get_object_attributes(Bucket="attrs", Key="big", ObjectAttributes=["ObjectParts"], MaxParts=2)
    op = first["ObjectParts"]
    assert op["TotalPartsCount"] == 3 and op["IsTruncated"] and op["NextPartNumberMarker"] == 2
    assert [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == [(1, 5 << 20), (2, 5 << 20)]
    rest = s3.get_object_attributes(Bucket="attrs", Key="big", ObjectAttributes=["ObjectParts"], PartNumberMarker=2)
    assert [(p["PartNumber"], p["Size"]) for p in rest["ObjectParts"]["Parts"]] == [(3, 7)]
    assert not rest["ObjectParts"]["IsTruncated"]


@pytest.mark.posix_only
def test_aws_chunked_is_not_stored_as_content_encoding_and_rfc2047_metadata_round_trips(s3, server):
    import base64
    import struct
    import zlib

    import requests

    from conftest import ACCESS_KEY, SECRET_KEY
    from sigv4 import signed_put

    s3.create_bucket(Bucket="encodings")
    data = b"compressed bytes"
    crc = base64.b64encode(struct.pack(">I", zlib.crc32(data))).decode()
    body = f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n" + f"x-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    for key, encoding, stored in (("gz", "aws-chunked,gzip", "gzip"), ("plain", "aws-chunked", None)):
        extra = {
            "content-encoding": encoding,
            "x-amz-decoded-content-length": str(len(data)),
            "x-amz-trailer": "x-amz-checksum-crc32",
        }
        url, headers = signed_put(
            server.endpoint, ACCESS_KEY, SECRET_KEY, "encodings", key, body, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", extra
        )
        assert requests.put(url, headers=headers, data=body).status_code == 200
        head = s3.head_object(Bucket="encodings", Key=key)
        assert head.get("ContentEncoding") == stored and head["ContentLength"] == len(data)
    # Non-ASCII metadata travels as RFC 2047 encoded words; stored as UTF-8, sent back encoded.
    url, headers = signed_put(
        server.endpoint, ACCESS_KEY, SECRET_KEY, "encodings", "meta", b"x", "UNSIGNED-PAYLOAD",
        {"x-amz-meta-city": "=?UTF-8?B?WsO8cmljaA==?="},
    )
    assert requests.put(url, headers=headers, data=b"x").status_code == 200
    assert s3.head_object(Bucket="encodings", Key="meta")["ResponseMetadata"]["HTTPHeaders"]["x-amz-meta-city"] == (
        "=?UTF-8?B?WsO8cmljaA==?="
    )
    import json
    import os

    record = json.loads(os.getxattr(server.root / "encodings" / "meta", "user.isthmus"))
    assert record["meta"]["user"]["city"] == "Zürich"


def test_multipart_responses_name_the_checksum_algorithm_and_type(s3):
    s3.create_bucket(Bucket="mpu-checksums")
    created = s3.create_multipart_upload(Bucket="mpu-checksums", Key="k", ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT")
    assert (created["ChecksumAlgorithm"], created["ChecksumType"]) == ("CRC32", "FULL_OBJECT")
    upload = created["UploadId"]
    part = s3.upload_part(Bucket="mpu-checksums", Key="k", UploadId=upload, PartNumber=1, Body=b"abc", ChecksumAlgorithm="CRC32")
    assert part["ChecksumCRC32"]
    listed = s3.list_parts(Bucket="mpu-checksums", Key="k", UploadId=upload)
    assert (listed["ChecksumAlgorithm"], listed["ChecksumType"]) == ("CRC32", "FULL_OBJECT")
    assert listed["Parts"][0]["ChecksumCRC32"] == part["ChecksumCRC32"]
    uploads = s3.list_multipart_uploads(Bucket="mpu-checksums")["Uploads"]
    assert (uploads[0]["ChecksumAlgorithm"], uploads[0]["ChecksumType"]) == ("CRC32", "FULL_OBJECT")
    done = s3.complete_multipart_upload(
        Bucket="mpu-checksums", Key="k", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]}]},
    )
    assert done["ChecksumType"] == "FULL_OBJECT" and done["ChecksumCRC32"] == part["ChecksumCRC32"]
    # Without an algorithm none is named.
    plain = s3.create_multipart_upload(Bucket="mpu-checksums", Key="plain")
    assert "ChecksumAlgorithm" not in plain


@pytest.mark.posix_only
def test_bucket_tagging_is_kept_beside_the_data(s3, server, tmp_path):
    from botocore.exceptions import ClientError

    from conftest import Server, make_client

    s3.create_bucket(Bucket="tagged-bucket")
    with pytest.raises(ClientError) as raised:
        s3.get_bucket_tagging(Bucket="tagged-bucket")
    assert raised.value.response["Error"]["Code"] == "NoSuchTagSet"
    tags = [{"Key": "project", "Value": "climate"}, {"Key": "owner", "Value": "group 7"}]
    s3.put_bucket_tagging(Bucket="tagged-bucket", Tagging={"TagSet": tags})
    # Another gateway on the same directory sees the same tags (kept in the state directory).
    other = Server(server.root)
    try:
        got = make_client(other.endpoint).get_bucket_tagging(Bucket="tagged-bucket")["TagSet"]
        assert sorted((t["Key"], t["Value"]) for t in got) == [("owner", "group 7"), ("project", "climate")]
    finally:
        other.stop()
    record = json.loads((server.root / ".isthmus" / "buckets" / "tagged-bucket.json").read_text())
    assert record["config"]["tags"] == {"owner": "group 7", "project": "climate"}
    too_many = [{"Key": f"k{i}", "Value": "v"} for i in range(51)]
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_tagging(Bucket="tagged-bucket", Tagging={"TagSet": too_many})
    assert raised.value.response["Error"]["Code"] == "InvalidTag"
    s3.delete_bucket_tagging(Bucket="tagged-bucket")
    with pytest.raises(ClientError):
        s3.get_bucket_tagging(Bucket="tagged-bucket")
    assert s3.list_objects_v2(Bucket="tagged-bucket")["KeyCount"] == 0


def test_chunked_transfer_encoding_without_content_length(s3, server):
    """What SDKs streaming from a pipe send: HTTP chunked framing around an aws-chunked body,
    its length only in x-amz-decoded-content-length."""
    import base64
    import struct
    import zlib

    from conftest import ACCESS_KEY, SECRET_KEY
    from sigv4 import signed_put

    s3.create_bucket(Bucket="chunked")
    data = b"streamed from a pipe " * 100
    crc = base64.b64encode(struct.pack(">I", zlib.crc32(data))).decode()
    body = f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n" + f"x-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    extra = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)), "x-amz-trailer": "x-amz-checksum-crc32"}
    url, headers = signed_put(
        server.endpoint, ACCESS_KEY, SECRET_KEY, "chunked", "k", body, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", extra,
        content_length=False,
    )
    host, port = server.endpoint.split("//", 1)[1].split(":")
    head = f"PUT {url.split(server.endpoint, 1)[1]} HTTP/1.1\r\nHost: {host}:{port}\r\nTransfer-Encoding: chunked\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    pieces = (body[:700], body[700:])
    framed = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head.encode() + framed)
        reply = sock.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 200"), reply
    assert s3.get_object(Bucket="chunked", Key="k")["Body"].read() == data


def test_a_put_without_a_length_is_refused(s3, server):
    """A PUT with neither Content-Length nor chunked framing: 411 MissingContentLength, as S3,
    and no empty object."""
    from conftest import ACCESS_KEY, SECRET_KEY
    from sigv4 import EMPTY_SHA256, signed_put

    s3.create_bucket(Bucket="lengths")
    url, headers = signed_put(server.endpoint, ACCESS_KEY, SECRET_KEY, "lengths", "k", b"", EMPTY_SHA256, {},
                              content_length=False)
    host, port = server.endpoint.split("//", 1)[1].split(":")
    head = f"PUT {url.split(server.endpoint, 1)[1]} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head.encode())
        reply = sock.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 411"), reply
    assert "<Code>MissingContentLength</Code>" in reply
    assert "Contents" not in s3.list_objects_v2(Bucket="lengths")


def test_expected_bucket_owner(s3):
    from botocore.exceptions import ClientError

    from conftest import ACCESS_KEY

    s3.create_bucket(Bucket="owned")
    s3.put_object(Bucket="owned", Key="k", Body=b"x", ExpectedBucketOwner=ACCESS_KEY)
    assert s3.head_bucket(Bucket="owned", ExpectedBucketOwner=ACCESS_KEY)["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(ClientError) as raised:
        s3.get_object(Bucket="owned", Key="k", ExpectedBucketOwner="111122223333")
    assert raised.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as raised:
        s3.put_object(Bucket="owned", Key="k2", Body=b"x", ExpectedBucketOwner="111122223333")
    assert raised.value.response["Error"]["Code"] == "AccessDenied"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="owned")["Contents"]] == ["k"]


@pytest.mark.posix_only
def test_canned_acls_and_anonymous_access(s3, server, aws):
    import urllib.error
    import urllib.request

    def anonymous(method, path, data=None):
        request = urllib.request.Request(f"{server.endpoint}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    s3.create_bucket(Bucket="portal", ACL="public-read")
    s3.put_object(Bucket="portal", Key="data/run1.nc", Body=b"open data", ACL="public-read")
    s3.put_object(Bucket="portal", Key="data/draft.nc", Body=b"not yet")
    s3.create_bucket(Bucket="closed")
    s3.put_object(Bucket="closed", Key="secret", Body=b"no")
    # Public-read: anyone lists with plain HTTP and reads the objects whose own ACL is public
    # (as in S3, a bucket's ACL shares its listing, not its objects); nobody writes without a
    # signature.
    assert anonymous("GET", "/portal/data/run1.nc") == (200, b"open data")
    assert anonymous("GET", "/portal/data/draft.nc")[0] == 403
    status, body = anonymous("GET", "/portal?list-type=2")
    assert status == 200 and b"<Key>data/run1.nc</Key>" in body
    assert anonymous("PUT", "/portal/intruder", b"x")[0] == 403
    assert anonymous("DELETE", "/portal/data/run1.nc")[0] == 403
    # Private (the default): refused, and so are operations no ACL can share.
    status, body = anonymous("GET", "/closed/secret")
    assert status == 403 and b"AccessDenied" in body
    assert anonymous("GET", "/")[0] == 403
    assert anonymous("DELETE", "/portal")[0] == 403
    # The aws CLI without signing, as a data portal user would.
    listed = aws("s3", "ls", "--no-sign-request", "s3://portal/data/").stdout
    assert "run1.nc" in listed
    # GetBucketAcl shows the owner's full control and the group grant.
    acl = s3.get_bucket_acl(Bucket="portal")
    uris = [(g["Grantee"].get("URI"), g["Permission"]) for g in acl["Grants"]]
    assert ("http://acs.amazonaws.com/groups/global/AllUsers", "READ") in uris
    assert acl["Owner"]["ID"]
    # Public-read-write lets anonymous clients write and delete objects; private closes it again.
    s3.put_bucket_acl(Bucket="closed", ACL="public-read-write")
    assert anonymous("PUT", "/closed/dropbox.txt", b"dropped")[0] == 200
    assert s3.get_object(Bucket="closed", Key="dropbox.txt")["Body"].read() == b"dropped"
    s3.put_bucket_acl(Bucket="closed", ACL="private")
    assert anonymous("GET", "/closed/dropbox.txt")[0] == 403
    assert [g["Permission"] for g in s3.get_bucket_acl(Bucket="closed")["Grants"]] == ["FULL_CONTROL"]
    # Kept in the gateway's state directory, beside the data: a restarted gateway keeps it.
    record = json.loads((server.root / ".isthmus" / "buckets" / "portal.json").read_text())
    assert record["config"]["acl"]["canned"] == "public-read"


def test_a_site_may_keep_bucket_acls_sharing_their_objects(tmp_path):
    """`bucket_acl_shares_objects = true` keeps the sharing of earlier releases (a bucket's
    public-read ACL opened its objects) for sites whose published buckets rely on it."""
    import urllib.request

    from conftest import Server, make_client

    config = tmp_path / "isthmus.toml"
    config.write_text("bucket_acl_shares_objects = true\n")
    srv = Server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        client = make_client(srv.endpoint)
        client.create_bucket(Bucket="legacy", ACL="public-read")
        client.put_object(Bucket="legacy", Key="run.nc", Body=b"published")
        with urllib.request.urlopen(f"{srv.endpoint}/legacy/run.nc") as response:
            assert response.read() == b"published"
    finally:
        srv.stop()


def test_object_acls(s3, server):
    import urllib.error
    import urllib.request

    def anonymous_get(key):
        try:
            with urllib.request.urlopen(f"{server.endpoint}/objacl/{key}") as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    s3.create_bucket(Bucket="objacl")
    s3.put_object(Bucket="objacl", Key="shared.txt", Body=b"for everyone", ACL="public-read")
    s3.put_object(Bucket="objacl", Key="private.txt", Body=b"mine")
    assert anonymous_get("shared.txt") == (200, b"for everyone")
    assert anonymous_get("private.txt")[0] == 403
    # A missing key is not told apart from a private one.
    assert anonymous_get("missing.txt")[0] == 403
    # The bucket stays private: no anonymous listing.
    try:
        urllib.request.urlopen(f"{server.endpoint}/objacl?list-type=2")
        raise AssertionError("listed")
    except urllib.error.HTTPError as err:
        assert err.code == 403
    grants = s3.get_object_acl(Bucket="objacl", Key="shared.txt")["Grants"]
    assert ("http://acs.amazonaws.com/groups/global/AllUsers", "READ") in [
        (g["Grantee"].get("URI"), g["Permission"]) for g in grants
    ]
    # Copies never inherit the source's ACL; they take the request's.
    s3.copy_object(Bucket="objacl", Key="copy-private.txt", CopySource={"Bucket": "objacl", "Key": "shared.txt"})
    assert anonymous_get("copy-private.txt")[0] == 403
    s3.copy_object(Bucket="objacl", Key="copy-public.txt", CopySource={"Bucket": "objacl", "Key": "private.txt"}, ACL="public-read")
    assert anonymous_get("copy-public.txt") == (200, b"mine")
    # PutObjectAcl changes it in place; the bytes and ETag stay.
    etag = s3.head_object(Bucket="objacl", Key="shared.txt")["ETag"]
    s3.put_object_acl(Bucket="objacl", Key="shared.txt", ACL="private")
    assert anonymous_get("shared.txt")[0] == 403
    assert s3.head_object(Bucket="objacl", Key="shared.txt")["ETag"] == etag
    assert [g["Permission"] for g in s3.get_object_acl(Bucket="objacl", Key="shared.txt")["Grants"]] == ["FULL_CONTROL"]
    # A multipart object gets the ACL its upload was created with.
    upload = s3.create_multipart_upload(Bucket="objacl", Key="mpu.bin", ACL="public-read")["UploadId"]
    part = s3.upload_part(Bucket="objacl", Key="mpu.bin", UploadId=upload, PartNumber=1, Body=b"parts")
    s3.complete_multipart_upload(
        Bucket="objacl", Key="mpu.bin", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    )
    assert anonymous_get("mpu.bin") == (200, b"parts")


def test_bucket_policy_for_a_data_portal(s3, server):
    import json
    import urllib.error
    import urllib.request

    from botocore.exceptions import ClientError

    from conftest import make_client

    def anonymous(path, endpoint=server.endpoint):
        try:
            with urllib.request.urlopen(f"{endpoint}{path}") as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    s3.create_bucket(Bucket="dataportal")
    for key in ("public/run1/a.nc", "public/embargo/b.nc", "private/c.nc"):
        s3.put_object(Bucket="dataportal", Key=key, Body=key.encode())
    with pytest.raises(ClientError) as raised:
        s3.get_bucket_policy(Bucket="dataportal")
    assert raised.value.response["Error"]["Code"] == "NoSuchBucketPolicy"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::dataportal/public/*"},
            {
                "Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::dataportal",
                "Condition": {"StringLike": {"s3:prefix": ["public/*"]}},
            },
            {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::dataportal/public/embargo/*"},
        ],
    }
    s3.put_bucket_policy(Bucket="dataportal", Policy=json.dumps(policy))
    assert json.loads(s3.get_bucket_policy(Bucket="dataportal")["Policy"]) == policy
    assert anonymous("/dataportal/public/run1/a.nc") == (200, b"public/run1/a.nc")
    assert anonymous("/dataportal/public/embargo/b.nc")[0] == 403
    assert anonymous("/dataportal/private/c.nc")[0] == 403
    status, body = anonymous("/dataportal?list-type=2&prefix=public/run1/")
    assert status == 200 and b"public/run1/a.nc" in body
    assert anonymous("/dataportal?list-type=2")[0] == 403
    # The owner is not bound by its own policy's grants; unsupported policies are refused whole.
    assert s3.get_object(Bucket="dataportal", Key="private/c.nc")["Body"].read() == b"private/c.nc"
    bad = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::dataportal/*"}]}
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_policy(Bucket="dataportal", Policy=json.dumps(bad))
    assert raised.value.response["Error"]["Code"] == "MalformedPolicy"
    assert json.loads(s3.get_bucket_policy(Bucket="dataportal")["Policy"]) == policy
    # Another gateway on the same directory applies the same policy (kept in the state directory).
    from conftest import Server

    other = Server(server.root)
    try:
        assert anonymous("/dataportal/public/run1/a.nc", other.endpoint)[0] == 200
        assert anonymous("/dataportal/private/c.nc", other.endpoint)[0] == 403
        assert make_client(other.endpoint).get_bucket_policy(Bucket="dataportal")["Policy"]
    finally:
        other.stop()
    s3.delete_bucket_policy(Bucket="dataportal")
    assert anonymous("/dataportal/public/run1/a.nc")[0] == 403


def test_public_access_block_overrides_acls_and_policies(s3, server):
    import json
    import urllib.error
    import urllib.request

    from botocore.exceptions import ClientError

    def anonymous_status(path):
        try:
            with urllib.request.urlopen(f"{server.endpoint}{path}") as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code

    def code(call):
        with pytest.raises(ClientError) as raised:
            call()
        return raised.value.response["Error"]["Code"]

    s3.create_bucket(Bucket="blocked", ACL="public-read")
    s3.put_object(Bucket="blocked", Key="k", Body=b"x", ACL="public-read")
    assert anonymous_status("/blocked/k") == 200
    assert anonymous_status("/blocked?list-type=2") == 200
    assert code(lambda: s3.get_public_access_block(Bucket="blocked")) == "NoSuchPublicAccessBlockConfiguration"
    config = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    s3.put_public_access_block(Bucket="blocked", PublicAccessBlockConfiguration=config)
    assert s3.get_public_access_block(Bucket="blocked")["PublicAccessBlockConfiguration"] == config
    # IgnorePublicAcls: the public-read ACLs (the bucket's, the object's) no longer open anything.
    assert anonymous_status("/blocked/k") == 403
    assert anonymous_status("/blocked?list-type=2") == 403
    # BlockPublicAcls: no public ACL can be put, on the bucket or any object.
    assert code(lambda: s3.put_bucket_acl(Bucket="blocked", ACL="public-read-write")) == "AccessDenied"
    assert code(lambda: s3.put_object(Bucket="blocked", Key="p", Body=b"x", ACL="public-read")) == "AccessDenied"
    assert code(lambda: s3.put_object_acl(Bucket="blocked", Key="k", ACL="public-read")) == "AccessDenied"
    s3.put_object(Bucket="blocked", Key="private-ok", Body=b"x", ACL="private")
    # BlockPublicPolicy: a policy that allows everyone is refused.
    public = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::blocked/*"}]}
    assert code(lambda: s3.put_bucket_policy(Bucket="blocked", Policy=json.dumps(public))) == "AccessDenied"
    # RestrictPublicBuckets: a public policy put before the block is ignored.
    s3.delete_public_access_block(Bucket="blocked")
    s3.put_bucket_policy(Bucket="blocked", Policy=json.dumps(public))
    s3.put_public_access_block(Bucket="blocked", PublicAccessBlockConfiguration={"RestrictPublicBuckets": True})
    assert anonymous_status("/blocked/k") == 200  # the object's public-read ACL still counts
    s3.put_object_acl(Bucket="blocked", Key="k", ACL="private")
    assert anonymous_status("/blocked/k") == 403  # and the public policy does not
    s3.delete_public_access_block(Bucket="blocked")
    assert anonymous_status("/blocked/k") == 200


def test_concurrent_changes_of_one_buckets_settings_all_land(server):
    """Four administrators change four settings of one bucket at once, ten times each: a
    bucket's settings are one value written whole, so each change reads them, changes one and
    writes them back naming the version it read (again when another change landed between):
    every setting ends as its own writer left it, and no client sees OperationAborted."""
    import json
    import threading

    from conftest import make_client

    make_client(server.endpoint).create_bucket(Bucket="settings-race")
    policy = lambda i: json.dumps({  # noqa: E731
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": [f"arn:aws:iam::000000000000:user/reader{i}"]},
                       "Action": "s3:GetObject", "Resource": "arn:aws:s3:::settings-race/*"}],
    })
    # Never BlockPublicAcls: that would refuse the ACL writer's authenticated-read, rightly.
    block = lambda i: {"BlockPublicAcls": False, "IgnorePublicAcls": i % 2 == 0,  # noqa: E731
                       "BlockPublicPolicy": False, "RestrictPublicBuckets": i % 2 == 1}
    writers = {
        "tags": lambda s3, i: s3.put_bucket_tagging(Bucket="settings-race", Tagging={"TagSet": [{"Key": "round", "Value": str(i)}]}),
        "acl": lambda s3, i: s3.put_bucket_acl(Bucket="settings-race", ACL="authenticated-read" if i % 2 else "private"),
        "block": lambda s3, i: s3.put_public_access_block(Bucket="settings-race", PublicAccessBlockConfiguration=block(i)),
        "policy": lambda s3, i: s3.put_bucket_policy(Bucket="settings-race", Policy=policy(i)),
    }
    failures = []

    def run(write):
        s3 = make_client(server.endpoint)
        for i in range(10):
            try:
                write(s3, i)
            except Exception as err:  # noqa: BLE001 - every failure is reported below
                failures.append(repr(err))

    threads = [threading.Thread(target=run, args=(w,)) for w in writers.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    s3 = make_client(server.endpoint)
    assert s3.get_bucket_tagging(Bucket="settings-race")["TagSet"] == [{"Key": "round", "Value": "9"}]
    grants = s3.get_bucket_acl(Bucket="settings-race")["Grants"]
    assert any(g["Grantee"].get("URI", "").endswith("AuthenticatedUsers") for g in grants)
    assert s3.get_public_access_block(Bucket="settings-race")["PublicAccessBlockConfiguration"] == block(9)
    assert json.loads(s3.get_bucket_policy(Bucket="settings-race")["Policy"]) == json.loads(policy(9))


@pytest.mark.posix_only
def test_browser_post_uploads(server):
    import requests

    from conftest import make_client

    s3 = make_client(server.endpoint, signature_version="s3v4")
    s3.create_bucket(Bucket="browser")
    conditions = [["starts-with", "$key", "user/"], ["content-length-range", 1, 1000], {"success_action_status": "201"}]
    post = s3.generate_presigned_post(
        "browser", "user/report.txt", Fields={"success_action_status": "201"}, Conditions=conditions, ExpiresIn=300
    )
    r = requests.post(post["url"], data=post["fields"], files={"file": ("report.txt", b"hello form")})
    assert r.status_code == 201 and "<Key>user/report.txt</Key>" in r.text
    assert s3.get_object(Bucket="browser", Key="user/report.txt")["Body"].read() == b"hello form"
    assert (server.root / "browser" / "user" / "report.txt").read_bytes() == b"hello form"
    # Outside the policy's conditions nothing is stored.
    r = requests.post(post["url"], data=post["fields"], files={"file": ("big.txt", b"x" * 2000)})
    assert r.status_code == 400 and "EntityTooLarge" in r.text
    other_key = dict(post["fields"], key="elsewhere/report.txt")
    r = requests.post(post["url"], data=other_key, files={"file": ("r.txt", b"x")})
    assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text and "Invalid according to Policy" in r.text
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="browser")["Contents"]] == ["user/report.txt"]
    # ${filename} in the key is the uploaded file's name (boto3 turns it into a starts-with).
    post = s3.generate_presigned_post("browser", "user/${filename}", ExpiresIn=300)
    r = requests.post(post["url"], data=post["fields"], files={"file": ("run 7.csv", b"a,b\n1,2\n")})
    assert r.status_code == 204, r.text
    assert (server.root / "browser" / "user" / "run 7.csv").read_bytes() == b"a,b\n1,2\n"
    # A Signature Version 2 form (AWSAccessKeyId, policy, HMAC-SHA1 signature of the policy).
    import base64
    import hashlib
    import hmac
    import json

    from conftest import ACCESS_KEY, SECRET_KEY

    policy_v2 = {"expiration": "2099-01-01T00:00:00Z", "conditions": [{"bucket": "browser"}, ["starts-with", "$key", "v2/"]]}
    policy_b64 = base64.b64encode(json.dumps(policy_v2).encode()).decode()
    signature = base64.b64encode(hmac.new(SECRET_KEY.encode(), policy_b64.encode(), hashlib.sha1).digest()).decode()
    form_v2 = {"key": "v2/old-form.txt", "AWSAccessKeyId": ACCESS_KEY, "policy": policy_b64, "signature": signature}
    r = requests.post(f"{server.endpoint}/browser", data=form_v2, files={"file": ("f.txt", b"v2 form")})
    assert r.status_code == 204, r.text
    assert (server.root / "browser" / "v2" / "old-form.txt").read_bytes() == b"v2 form"
    r = requests.post(f"{server.endpoint}/browser", data=dict(form_v2, signature="AAAA"), files={"file": ("f.txt", b"x")})
    assert r.status_code == 403 and "SignatureDoesNotMatch" in r.text
    # success_action_redirect answers 303 with the bucket, key and ETag.
    redirect = "http://example.org/done"
    post = s3.generate_presigned_post(
        "browser", "fixed.txt", Fields={"success_action_redirect": redirect}, Conditions=[{"success_action_redirect": redirect}]
    )
    r = requests.post(post["url"], data=post["fields"], files={"file": ("a.txt", b"abc")}, allow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(redirect + "?bucket=browser&key=fixed.txt")
    # Anonymous POST: only into a public-read-write bucket.
    s3.create_bucket(Bucket="dropbox", ACL="public-read-write")
    r = requests.post(f"{server.endpoint}/dropbox", data={"key": "anon.txt"}, files={"file": ("anon.txt", b"anonymous")})
    assert r.status_code in (200, 204), r.text
    assert s3.get_object(Bucket="dropbox", Key="anon.txt")["Body"].read() == b"anonymous"
    r = requests.post(f"{server.endpoint}/browser", data={"key": "anon.txt"}, files={"file": ("anon.txt", b"x")})
    assert r.status_code == 403


def test_source_expected_bucket_owner_on_copies(s3):
    from botocore.exceptions import ClientError

    from conftest import ACCESS_KEY

    s3.create_bucket(Bucket="copy-owner")
    s3.put_object(Bucket="copy-owner", Key="src", Body=b"x")
    source = {"Bucket": "copy-owner", "Key": "src"}
    s3.copy_object(Bucket="copy-owner", Key="ok", CopySource=source, ExpectedSourceBucketOwner=ACCESS_KEY)
    with pytest.raises(ClientError) as raised:
        s3.copy_object(Bucket="copy-owner", Key="no", CopySource=source, ExpectedSourceBucketOwner="111122223333")
    assert raised.value.response["Error"]["Code"] == "AccessDenied"
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="copy-owner")["Contents"]) == ["ok", "src"]


def test_part_number_errors_as_s3(s3):
    from botocore.exceptions import ClientError

    s3.create_bucket(Bucket="partnumbers")
    s3.put_object(Bucket="partnumbers", Key="k", Body=b"x")

    def error(**kw):
        with pytest.raises(ClientError) as raised:
            s3.get_object(Bucket="partnumbers", Key="k", **kw)
        return raised.value.response["Error"]["Code"], raised.value.response["ResponseMetadata"]["HTTPStatusCode"]

    # Past the object's parts: 400 InvalidPart (what AWS answers and the S3 conformance suite
    # checks); outside 1..10000: 400 InvalidArgument.
    assert error(PartNumber=2) == ("InvalidPart", 400)
    assert error(PartNumber=10001) == ("InvalidArgument", 400)
    assert s3.get_object(Bucket="partnumbers", Key="k", PartNumber=1)["Body"].read() == b"x"


def test_get_and_head_answer_with_the_response_headers_asked_for(s3, bucket, server):
    """`response-content-disposition=` and the other `response-*` parameters (what presigned
    download links use) override the stored headers on GET and HEAD; unsigned requests may not
    use them (InvalidRequest, as in S3)."""
    s3.put_object(Bucket=bucket, Key="r.bin", Body=b"data", ContentType="application/octet-stream")
    asked = dict(
        ResponseContentDisposition='attachment; filename="x.bin"', ResponseContentType="text/plain",
        ResponseCacheControl="no-cache", ResponseContentLanguage="fr", ResponseContentEncoding="identity",
    )
    got = s3.get_object(Bucket=bucket, Key="r.bin", **asked)
    assert got["ContentDisposition"] == 'attachment; filename="x.bin"'
    assert (got["ContentType"], got["CacheControl"], got["ContentLanguage"]) == ("text/plain", "no-cache", "fr")
    assert got["Body"].read() == b"data"
    head = s3.head_object(Bucket=bucket, Key="r.bin", ResponseContentType="text/csv")
    assert head["ContentType"] == "text/csv"
    assert s3.head_object(Bucket=bucket, Key="r.bin")["ContentType"] == "application/octet-stream"
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "r.bin", "ResponseContentDisposition": "attachment"})
    resp = requests.get(url, timeout=10)
    assert resp.status_code == 200 and resp.headers["Content-Disposition"] == "attachment"
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read")
    s3.put_object_acl(Bucket=bucket, Key="r.bin", ACL="public-read")
    plain = f"{server.endpoint}/{bucket}/r.bin"
    assert requests.get(plain, timeout=10).status_code == 200
    refused = requests.get(plain + "?response-content-type=text/html", timeout=10)
    assert refused.status_code == 400 and b"InvalidRequest" in refused.content
