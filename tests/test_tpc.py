"""HTTP third-party copy (WebDAV COPY as WLCG uses it) between two gateways on this machine,
authorised by bearer tokens on both sides: pull (Source:) and push (Destination:), with
performance markers streamed while the copy runs; a chunk whose connection drops is fetched
again within the copy; a source whose bytes do not match its announced digest is refused and
nothing is stored."""

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import Server, make_client
from test_tokens import AUDIENCE, Issuer, config_text

MIB = 1 << 20


@pytest.fixture(scope="module")
def issuer():
    return Issuer()


@pytest.fixture(scope="module")
def sites(tmp_path_factory, issuer):
    """Two gateways trusting the same issuer; Alice may use bucket `data` on both."""
    servers = []
    for name in ("a", "b"):
        base = tmp_path_factory.mktemp(f"site-{name}")
        jwks = base / "jwks.json"
        jwks.write_text(json.dumps(issuer.jwks()))
        config = base / "isthmus.toml"
        # Both sites are on this host: the operator opens loopback to third-party copy.
        config.write_text('outbound_allow = ["127.0.0.0/8"]\n' + config_text(jwks))
        srv = Server(base / "data", extra_args=["--config", str(config)])
        make_client(srv.endpoint).create_bucket(Bucket="data")
        servers.append(srv)
    yield servers
    for srv in servers:
        srv.stop()


def copy(gateway, path, token, **headers):
    """Sends COPY and reads the streamed answer to its end."""
    all_headers = {"Authorization": f"Bearer {token}", **headers}
    with requests.request("COPY", gateway.endpoint + path, headers=all_headers, stream=True, timeout=120) as r:
        return r.status_code, r.text


def test_pull_between_gateways_with_a_token_for_each_side(sites, issuer):
    a, b = sites
    body = os.urandom(3 * MIB + 123)
    make_client(a.endpoint).put_object(Bucket="data", Key="run1/source.bin", Body=body)
    read_at_a = issuer.token("storage.read:/data/run1")
    write_at_b = issuer.token("storage.create:/data/incoming")
    status, text = copy(b, "/data/incoming/pulled.bin", write_at_b,
                        Source=f"{a.endpoint}/data/run1/source.bin",
                        TransferHeaderAuthorization=f"Bearer {read_at_a}",
                        RequireChecksumVerification="true")
    assert status == 202
    assert "Perf Marker" in text and "Stripe Bytes Transferred:" in text
    assert text.strip().endswith("success: Created"), text
    got = make_client(b.endpoint).get_object(Bucket="data", Key="incoming/pulled.bin")["Body"].read()
    assert got == body
    # Without a token the source refuses, and the failure is reported in the stream.
    status, text = copy(b, "/data/incoming/denied.bin", write_at_b, Source=f"{a.endpoint}/data/run1/source.bin")
    assert status == 202 and "failure:" in text and "403" in text
    # The destination's own scopes apply before anything moves.
    status, _ = copy(b, "/data/elsewhere/x.bin", write_at_b, Source=f"{a.endpoint}/data/run1/source.bin")
    assert status == 403


def test_push_between_gateways(sites, issuer):
    a, b = sites
    body = os.urandom(2 * MIB + 7)
    make_client(a.endpoint).put_object(Bucket="data", Key="run1/push.bin", Body=body)
    status, text = copy(a, "/data/run1/push.bin", issuer.token("storage.read:/data/run1"),
                        Destination=f"{b.endpoint}/data/incoming/pushed.bin",
                        TransferHeaderAuthorization=f"Bearer {issuer.token('storage.create:/data/incoming')}")
    assert status == 202 and text.strip().endswith("success: Created"), text
    assert make_client(b.endpoint).get_object(Bucket="data", Key="incoming/pushed.bin")["Body"].read() == body
    # Pushing needs read access here.
    status, _ = copy(a, "/data/run1/push.bin", issuer.token("storage.read:/data/other"),
                     Destination=f"{b.endpoint}/data/incoming/pushed2.bin")
    assert status == 403


def test_copy_requests_are_checked(sites, issuer):
    a, _ = sites
    r = requests.request("COPY", a.endpoint + "/data/x", headers={"Source": "http://127.0.0.1:1/x"}, timeout=10)
    assert r.status_code == 403
    status, text = copy(a, "/data/x", issuer.token("storage.modify:/data"))
    assert status == 400 and "Source" in text
    status, _ = copy(a, "/data/x", issuer.token("storage.modify:/data"), Source="file:///etc/passwd")
    assert status == 400


class FlakySource(BaseHTTPRequestHandler):
    """A remote storage endpoint: serves `body` with ranges and an ETag; announces `digest`;
    the first GET of the range at `break_at` sends half of it and drops the connection."""

    body = b""
    digest = None
    break_at = None
    ranges = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        cls = type(self)
        size = len(cls.body)
        first, last = 0, size - 1
        header = self.headers.get("Range")
        if header:
            first, last = (int(x) for x in header.split("=")[1].split("-"))
        cls.ranges.append((first, last))
        chunk = cls.body[first:last + 1]
        self.send_response(206 if header else 200)
        self.send_header("Content-Length", str(len(chunk)))
        self.send_header("ETag", '"v1"')
        if header:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        if cls.digest:
            self.send_header("Digest", cls.digest)
        self.end_headers()
        if cls.break_at is not None and first == cls.break_at:
            cls.break_at = None
            self.wfile.write(chunk[: len(chunk) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self.wfile.write(chunk)


@pytest.fixture
def flaky():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakySource)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def adler32(data):
    import zlib
    return f"{zlib.adler32(data) & 0xffffffff:08x}"


def test_a_dropped_chunk_is_fetched_again_within_the_copy(sites, issuer, flaky):
    """The source drops the connection half-way through the second chunk: the pull fetches
    that chunk again, never the finished first one, and stores the whole object; its staging
    goes with it (a copy that fails leaves none to resume: test_security_tpc.py)."""
    _, b = sites
    body = os.urandom(20 * MIB)
    FlakySource.body, FlakySource.digest, FlakySource.break_at, FlakySource.ranges = body, f"adler32={adler32(body)}", 8 * MIB, []
    url = f"http://127.0.0.1:{flaky.server_address[1]}/remote/file.bin"
    token = issuer.token("storage.create:/data/incoming storage.read:/data/incoming")
    status, text = copy(b, "/data/incoming/resumed.bin", token, Source=url)
    assert status == 202 and text.strip().endswith("success: Created"), text
    assert make_client(b.endpoint).get_object(Bucket="data", Key="incoming/resumed.bin")["Body"].read() == body
    assert FlakySource.ranges.count((0, 8 * MIB - 1)) == 1, "the finished chunk was fetched again"
    assert FlakySource.ranges.count((8 * MIB, 16 * MIB - 1)) == 2, FlakySource.ranges
    staging = b.root / ".isthmus" / "tpc"
    assert not any(staging.iterdir()), "the staged data is removed once stored"


def test_a_checksum_mismatch_is_refused_and_nothing_is_stored(sites, issuer, flaky):
    _, b = sites
    body = os.urandom(MIB)
    FlakySource.body, FlakySource.break_at, FlakySource.ranges = body, None, []
    url = f"http://127.0.0.1:{flaky.server_address[1]}/remote/bad.bin"
    token = issuer.token("storage.create:/data/incoming")
    FlakySource.digest = "adler32=00000001"
    status, text = copy(b, "/data/incoming/bad.bin", token, Source=url)
    assert "failure: checksum mismatch" in text, text
    wrong_md5 = hashlib.md5(b"other").digest()
    import base64
    FlakySource.digest = f"md5={base64.b64encode(wrong_md5).decode()}"
    status, text = copy(b, "/data/incoming/bad.bin", token, Source=url)
    assert "failure: checksum mismatch" in text
    FlakySource.digest = None
    status, text = copy(b, "/data/incoming/bad.bin", token, Source=url, RequireChecksumVerification="true")
    assert "failure:" in text and "no checksum" in text
    root = make_client(b.endpoint)
    assert root.list_objects_v2(Bucket="data", Prefix="incoming/bad").get("KeyCount") == 0
    assert not any((b.root / ".isthmus" / "tpc").iterdir())


def run_copy(*args, env=None):
    import subprocess
    from conftest import ACCESS_KEY, SECRET_KEY, binary
    keys = f"{ACCESS_KEY}:{SECRET_KEY}"
    full_env = dict(os.environ, ISTHMUS_SOURCE_KEYS=keys, ISTHMUS_DEST_KEYS=keys)
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v}
    return subprocess.run([str(binary()), "copy", *args], capture_output=True, text=True, timeout=120, env=full_env)


def test_isthmus_copy_between_s3_endpoints_pull_push_and_presigned(sites):
    a, b = sites
    s3a, s3b = make_client(a.endpoint), make_client(b.endpoint)
    body = os.urandom(9 * MIB + 5)
    s3a.put_object(Bucket="data", Key="cli/src.bin", Body=body)
    out = run_copy(f"{a.endpoint}/data/cli/src.bin", f"{b.endpoint}/data/cli/pulled.bin", "--streams", "3", "--require-checksum")
    assert out.returncode == 0, out.stderr
    assert s3b.get_object(Bucket="data", Key="cli/pulled.bin")["Body"].read() == body
    out = run_copy(f"{a.endpoint}/data/cli/src.bin", f"{b.endpoint}/data/cli/pushed.bin", "--run-on", "source")
    assert out.returncode == 0, out.stderr
    assert s3b.get_object(Bucket="data", Key="cli/pushed.bin")["Body"].read() == body
    presigned = s3a.generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "cli/src.bin"}, ExpiresIn=600)
    out = run_copy(presigned, f"{b.endpoint}/data/cli/from-presigned.bin", env={"ISTHMUS_SOURCE_KEYS": ""})
    assert out.returncode == 0, out.stderr
    assert s3b.get_object(Bucket="data", Key="cli/from-presigned.bin")["Body"].read() == body
    # A multipart source has no MD5 to announce: with --require-checksum the copy is refused.
    upload = s3a.create_multipart_upload(Bucket="data", Key="cli/multi.bin")["UploadId"]
    etag = s3a.upload_part(Bucket="data", Key="cli/multi.bin", UploadId=upload, PartNumber=1, Body=body)["ETag"]
    s3a.complete_multipart_upload(Bucket="data", Key="cli/multi.bin", UploadId=upload,
                                  MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    out = run_copy(f"{a.endpoint}/data/cli/multi.bin", f"{b.endpoint}/data/cli/multi.bin", "--require-checksum")
    assert out.returncode != 0 and "no checksum" in out.stderr
    out = run_copy(f"{a.endpoint}/data/cli/src.bin", f"{b.endpoint}/nosuchbucket/x", env={})
    assert out.returncode != 0 and "NoSuchBucket" in out.stderr
