"""The adversarial suite across doors (issue 28, "beyond the list"): an anonymous client on every
operation of a private bucket, expired and tampered presigned URLs, links that leave a bucket
tried through every door (HTTP, the in-process Python and C libraries, the local socket,
third-party copy), a flood of multipart uploads, and requests that ask the gateway for more
memory than a request may have. Each test plays the attacker against a real gateway; the
single-finding cases are in test_security.py, test_security_arrays.py and
test_security_tpc.py."""

import concurrent.futures
import datetime
import hashlib
import os
import time
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import isthmus
import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, Server, make_client
from test_embedded_c import READER, compile_c, prefix, run  # noqa: F401 (the fixture)

BUCKET = "private"
SECRET_TEXT = b"outside the data root"


@pytest.fixture
def private(server, s3):
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="doc.txt", Body=b"private bytes")
    return server, s3


def anonymous(method, url, **kwargs):
    return requests.request(method, url, timeout=30, **kwargs)


# Every family of operation, unsigned: (method, path and query, body).
OPERATIONS = [
    ("GET", "/", None),
    ("GET", f"/{BUCKET}", None),
    ("GET", f"/{BUCKET}?list-type=2", None),
    ("GET", f"/{BUCKET}?versions", None),
    ("GET", f"/{BUCKET}?uploads", None),
    ("GET", f"/{BUCKET}?acl", None),
    ("GET", f"/{BUCKET}?policy", None),
    ("GET", f"/{BUCKET}?tagging", None),
    ("GET", f"/{BUCKET}?versioning", None),
    ("GET", f"/{BUCKET}?location", None),
    ("HEAD", f"/{BUCKET}", None),
    ("GET", f"/{BUCKET}/doc.txt", None),
    ("HEAD", f"/{BUCKET}/doc.txt", None),
    ("GET", f"/{BUCKET}/doc.txt?acl", None),
    ("GET", f"/{BUCKET}/doc.txt?tagging", None),
    ("GET", f"/{BUCKET}/doc.txt?attributes", None),
    ("GET", f"/{BUCKET}/doc.txt?array", None),
    ("PUT", f"/{BUCKET}/new.txt", b"anonymous write"),
    ("PUT", f"/{BUCKET}/doc.txt", b"overwritten"),
    ("PUT", f"/{BUCKET}/doc.txt?tagging", b"<Tagging><TagSet/></Tagging>"),
    ("PUT", f"/{BUCKET}?acl", b""),
    ("PUT", f"/{BUCKET}?policy", b'{"Version":"2012-10-17","Statement":[]}'),
    ("PUT", f"/{BUCKET}?versioning", b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"),
    ("DELETE", f"/{BUCKET}/doc.txt", None),
    ("DELETE", f"/{BUCKET}?policy", None),
    ("DELETE", f"/{BUCKET}", None),
    ("POST", f"/{BUCKET}?delete", b"<Delete><Object><Key>doc.txt</Key></Object></Delete>"),
    ("POST", f"/{BUCKET}/up.bin?uploads", None),
    ("PUT", f"/{BUCKET}/copy.txt", None),  # with x-amz-copy-source below
    ("PUT", "/anonymous-bucket", None),
]


def test_an_anonymous_client_is_refused_on_every_operation_of_a_private_bucket(private):
    server, s3 = private
    for method, path, body in OPERATIONS:
        headers = {"x-amz-copy-source": f"/{BUCKET}/doc.txt"} if path.endswith("copy.txt") else {}
        if path.endswith("?delete"):
            headers["Content-MD5"] = __import__("base64").b64encode(hashlib.md5(body).digest()).decode()
        r = anonymous(method, server.endpoint + path, data=body, headers=headers)
        assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
        if method != "HEAD":
            assert b"AccessDenied" in r.content, (method, path, r.text[:200])
    # Nothing changed.
    assert s3.get_object(Bucket=BUCKET, Key="doc.txt")["Body"].read() == b"private bytes"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["doc.txt"]
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert s3.get_bucket_versioning(Bucket=BUCKET).get("Status") is None
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [BUCKET]


def with_query(url, **changes):
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    query.update(changes)
    return urlunsplit(parts._replace(query=urlencode(query)))


def flipped(signature):
    return ("0" if signature[0] != "0" else "1") + signature[1:]


def presign_tamperings(url, version):
    """The same presigned URL with one signed part changed each time."""
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    if version == "s3v4":
        return [
            with_query(url, **{"X-Amz-Expires": "604800"}),  # a longer life than was signed
            with_query(url, **{"X-Amz-Signature": flipped(query["X-Amz-Signature"])}),
            with_query(url, **{"X-Amz-Date": later.strftime("%Y%m%dT%H%M%SZ")}),
            with_query(url, **{"X-Amz-Credential": query["X-Amz-Credential"].replace(ACCESS_KEY, "someoneelse")}),
            with_query(url, **{"X-Amz-Expires": "999999999999999999999"}),
            url.replace("/doc.txt", "/doc.txt?acl&", 1),
        ]
    return [
        with_query(url, Expires=str(int(query["Expires"]) + 3600)),
        with_query(url, Signature=flipped(query["Signature"])),
        with_query(url, AWSAccessKeyId="someoneelse"),
        with_query(url, Expires="999999999999999999999"),
        url.replace("/doc.txt", "/doc.txt?acl&", 1),
    ]


@pytest.mark.parametrize("version", ["s3v4", "s3"])
def test_expired_and_tampered_presigned_urls_are_refused(private, version):
    server, s3 = private
    presigner = make_client(server.endpoint, signature_version=version)
    url = presigner.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "doc.txt"}, ExpiresIn=2)
    assert requests.get(url, timeout=10).status_code == 200
    for bad in presign_tamperings(url, version):
        r = requests.get(bad, timeout=10)
        assert r.status_code in (400, 403), (bad, r.status_code)
        assert b"private bytes" not in r.content
    # A presigned PUT used for another key writes nothing.
    put = presigner.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "upload.txt"}, ExpiresIn=2)
    assert requests.put(put.replace("upload.txt", "other.txt"), data=b"x", timeout=10).status_code == 403
    time.sleep(3.5)
    r = requests.get(url, timeout=10)
    assert r.status_code == 403 and b"AccessDenied" in r.content, r.text
    assert requests.put(put, data=b"x", timeout=10).status_code == 403
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == ["doc.txt"]


@pytest.fixture
def escape(server, s3, tmp_path):
    """A bucket holding a directory link and a file link that both lead out of the data root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET_TEXT)
    s3.create_bucket(Bucket="links")
    s3.put_object(Bucket="links", Key="inside.txt", Body=b"inside")
    os.symlink(outside, server.root / "links" / "dir")
    os.symlink(outside / "secret.txt", server.root / "links" / "file.txt")
    return server, s3, outside


def test_links_out_of_a_bucket_lead_nowhere_over_http(escape):
    server, s3, outside = escape

    def code(call, **kwargs):
        try:
            result = call(Bucket="links", **kwargs)
        except ClientError as err:
            return err.response["Error"]["Code"]
        body = result.get("Body")
        assert body is None or SECRET_TEXT not in body.read()
        return "OK"

    for key in ["dir/secret.txt", "file.txt"]:
        assert code(s3.get_object, Key=key) in ("NoSuchKey", "404")
        assert code(s3.head_object, Key=key) in ("NoSuchKey", "404")
        assert code(s3.copy_object, Key="copied.txt", CopySource={"Bucket": "links", "Key": key}) == "NoSuchKey"
        assert code(s3.get_object_tagging, Key=key) in ("NoSuchKey", "404")
    # A write through the directory link lands nowhere outside; neither does a delete.
    code(s3.put_object, Key="dir/planted.txt", Body=b"planted")
    code(s3.delete_object, Key="dir/secret.txt")
    code(s3.delete_objects, Delete={"Objects": [{"Key": "dir/secret.txt"}, {"Key": "file.txt"}]})
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_bytes() == SECRET_TEXT
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket="links").get("Contents", [])]
    assert "dir/secret.txt" not in listed


def test_links_out_of_a_bucket_lead_nowhere_in_process(escape):
    server, _, outside = escape
    store = isthmus.Store(str(server.root))
    for key in ["dir/secret.txt", "file.txt"]:
        with pytest.raises(isthmus.IsthmusError) as refused:
            store.get_object("links", key)
        assert refused.value.args[0] == "NoSuchKey"
    with pytest.raises(isthmus.IsthmusError):
        store.put_object("links", "dir/planted.txt", b"planted")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert store.get_object("links", "inside.txt") == b"inside"


def test_links_out_of_a_bucket_lead_nowhere_through_the_c_library(escape, prefix, tmp_path):  # noqa: F811
    server, _, _ = escape
    source = tmp_path / "reader.c"
    source.write_text(READER)
    reader = compile_c(prefix, source, tmp_path / "reader")
    for key in ["dir/secret.txt", "file.txt"]:
        r = run(prefix, reader, str(server.root), "links", key)
        assert r.returncode != 0 and "NoSuchKey" in r.stderr, r.stdout + r.stderr
        assert SECRET_TEXT.decode() not in r.stdout
    ok = run(prefix, reader, str(server.root), "links", "inside.txt")
    assert ok.returncode == 0 and ok.stdout.endswith("inside"), ok.stderr


def test_links_out_of_a_bucket_lead_nowhere_through_the_local_socket(tmp_path):
    root = tmp_path / "data"
    socket = tmp_path / "isthmus.sock"
    config = tmp_path / "isthmus.toml"
    # The socket's peer (this process, root) is the root user.
    config.write_text('allow_root = true\nroot_identity = { unix_user = "root" }\n')
    srv = Server(root, extra_args=["--config", str(config), "--local-socket", str(socket)])
    try:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(SECRET_TEXT)
        deadline = time.time() + 5
        while not socket.exists():
            assert time.time() < deadline, srv.output()
            time.sleep(0.05)
        store = isthmus.connect(f"unix://{socket}")
        store.create_bucket("links")
        os.symlink(outside, root / "links" / "dir")
        for key in ["dir/secret.txt", "dir/../../outside/secret.txt"]:
            with pytest.raises(isthmus.IsthmusError) as refused:
                store.get_object("links", key)
            assert refused.value.args[0] in ("NoSuchKey", "InvalidArgument", "KeyTooLongError"), refused.value.args
        with pytest.raises(isthmus.IsthmusError):
            store.put_object("links", "dir/planted.txt", b"planted")
        assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    finally:
        srv.stop()


def test_a_flood_of_multipart_uploads_leaves_the_gateway_serving(private):
    server, s3 = private
    before = server.rss_peak_kib()

    def start(i):
        return s3.create_multipart_upload(Bucket=BUCKET, Key=f"flood/{i}")["UploadId"]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(start, range(1500)))
    assert len(set(ids)) == 1500
    page = s3.list_multipart_uploads(Bucket=BUCKET)
    assert len(page["Uploads"]) == 1000 and page["IsTruncated"]
    assert s3.get_object(Bucket=BUCKET, Key="doc.txt")["Body"].read() == b"private bytes"
    assert server.rss_peak_kib() - before < 64 * 1024, "the uploads' state is on disk, not in memory"


def test_requests_asking_for_unbounded_memory_get_a_clear_error(private):
    """The memory a request can make the gateway hold has a ceiling: a part list past S3's
    10,000, a delete of more than 1,000 keys, an XML body of tens of MiB, an enormous
    max-keys, each refused (or capped) with the S3 error a client expects."""
    server, s3 = private
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="big")["UploadId"]
    parts = [{"PartNumber": n, "ETag": '"%s"' % ("0" * 32)} for n in range(1, 10_002)]
    with pytest.raises(ClientError) as too_many:
        s3.complete_multipart_upload(Bucket=BUCKET, Key="big", UploadId=upload, MultipartUpload={"Parts": parts})
    assert too_many.value.response["Error"]["Code"] in ("InvalidArgument", "InvalidPart", "MalformedXML", "EntityTooLarge")
    with pytest.raises(ClientError) as too_many_keys:
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": f"k{i}"} for i in range(1001)]})
    assert too_many_keys.value.response["Error"]["Code"] == "MalformedXML"
    # 40 MiB of tags, signed: refused without being held.
    before = server.rss_peak_kib()
    body = b"<Tagging><TagSet>" + b"<Tag><Key>k</Key><Value>v</Value></Tag>" * (1 << 20) + b"</TagSet></Tagging>"
    from test_fuzz_http import signed
    r = signed(server, "PUT", f"/{BUCKET}/doc.txt?tagging", body)
    assert r.status_code == 400, r.text[:300]
    assert server.rss_peak_kib() - before < 32 * 1024, "an oversized XML body is not held whole"
    listing = s3.list_objects_v2(Bucket=BUCKET, MaxKeys=2**31 - 1)
    assert listing["MaxKeys"] <= 1000
    assert s3.get_object(Bucket=BUCKET, Key="doc.txt")["Body"].read() == b"private bytes"
