"""Third-party copy as an attacker uses it. Issue 28, finding 2 (SSRF): a signed user asks the
gateway to fetch a URL into a bucket (pull) or send an object to one (push): by default the
gateway reaches no loopback, private or link-local host and never its own listeners; the
operator opens what is needed with `outbound_allow`; every redirect hop and every DNS answer
is checked again. Issue 42, findings 3 and 7 (unbounded outbound work): a source that accepts
and never answers, or trickles, is given up on (`RequestTimeout`) and copies are capped per
user and in all (`503 SlowDown`) while other users' requests go on; a source that lies about
its size is refused before anything is staged, by free space or the bucket's quota; staging
counts against the quota while it runs and goes as soon as a copy fails."""

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import Server, free_port, make_client, wait_until
from test_tokens import Issuer, config_text


class Redirector(BaseHTTPRequestHandler):
    """Answers every GET and PUT with a redirect to `target` (a hop the first check never saw)."""

    target = ""

    def log_message(self, *args):
        pass

    def redirect(self):
        self.send_response(307)
        self.send_header("Location", type(self).target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = redirect
    do_PUT = redirect


class Plain(BaseHTTPRequestHandler):
    """A small 'internal service' on loopback."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"internal only\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def http_servers():
    servers = {}
    for name, handler in (("redirector", Redirector), ("plain", Plain)):
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield servers
    for server in servers.values():
        server.shutdown()


@pytest.fixture(scope="module")
def issuer():
    return Issuer()


def gateway(tmp_path_factory, issuer, allow=None):
    """A gateway with an admin listener, trusting `issuer`, with `outbound_allow = allow`."""
    base = tmp_path_factory.mktemp("tpc-ssrf")
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    config = base / "isthmus.toml"
    allow_line = "" if allow is None else f"outbound_allow = {json.dumps(allow)}\n"
    config.write_text(allow_line + config_text(jwks))
    admin_port = free_port()
    srv = Server(base / "data", extra_args=["--config", str(config), "--admin-address", f"127.0.0.1:{admin_port}"])
    srv.admin = f"http://127.0.0.1:{admin_port}"
    make_client(srv.endpoint).create_bucket(Bucket="data")
    make_client(srv.endpoint).put_object(Bucket="data", Key="mine.bin", Body=b"alice's bytes")
    return srv


@pytest.fixture(scope="module")
def closed(tmp_path_factory, issuer):
    """The default: no outbound_allow."""
    srv = gateway(tmp_path_factory, issuer)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def loopback_allowed(tmp_path_factory, issuer):
    """An operator who opened 127.0.0.0/8 (two gateways on one host)."""
    srv = gateway(tmp_path_factory, issuer, allow=["127.0.0.0/8"])
    yield srv
    srv.stop()


def copy(srv, token, key, **headers):
    with requests.request("COPY", f"{srv.endpoint}/data/{key}", headers={"Authorization": f"Bearer {token}", **headers},
                          stream=True, timeout=60) as r:
        return r.status_code, r.text


def absent(srv, key, bucket="data"):
    try:
        make_client(srv.endpoint).head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        return err.response["Error"]["Code"] in ("404", "NoSuchKey")
    return False


def test_a_user_cannot_pull_the_admin_listener_into_a_bucket(closed, issuer):
    """The audit: a non-root user pulled the private admin /metrics page into its bucket."""
    token = issuer.token("storage.create:/data storage.read:/data")
    assert requests.get(closed.admin + "/metrics", timeout=10).status_code == 200
    status, text = copy(closed, token, "stolen-metrics", Source=closed.admin + "/metrics")
    assert status == 403 and "own listeners" in text, text
    assert absent(closed, "stolen-metrics")


@pytest.mark.parametrize("source", [
    "http://localhost:{port}/",           # a name: judged by what it resolves to
    "http://127.1:{port}/",               # short, decimal and IPv6 forms of loopback
    "http://2130706433:{port}/",
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://0.0.0.0:{port}/",
])
def test_loopback_in_every_spelling_is_refused_by_default(closed, issuer, http_servers, source):
    token = issuer.token("storage.create:/data")
    url = source.format(port=http_servers["plain"].server_address[1])
    status, text = copy(closed, token, "internal.txt", Source=url)
    assert status == 403, (url, text)
    assert absent(closed, "internal.txt")


def test_private_and_link_local_destinations_are_refused_for_push(closed, issuer):
    token = issuer.token("storage.read:/data")
    for url in ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/x", "http://192.168.0.1/x", "http://[fe80::1]/x"]:
        status, text = copy(closed, token, "mine.bin", Destination=url)
        assert status == 403, (url, text)


def test_allowing_loopback_still_keeps_the_gateways_own_listeners_out(loopback_allowed, issuer, http_servers):
    srv = loopback_allowed
    token = issuer.token("storage.create:/data storage.read:/data")
    for url in [srv.admin + "/metrics", srv.endpoint + "/data/mine.bin"]:
        status, text = copy(srv, token, "own.bin", Source=url)
        assert status == 403 and "own listeners" in text, (url, text)
    assert absent(srv, "own.bin")
    # What the operator opened is reached.
    status, text = copy(srv, token, "internal.txt", Source=f"http://127.0.0.1:{http_servers['plain'].server_address[1]}/")
    assert status == 202 and text.strip().endswith("success: Created"), text
    assert make_client(srv.endpoint).get_object(Bucket="data", Key="internal.txt")["Body"].read() == b"internal only\n"


def test_every_redirect_hop_is_checked_again(loopback_allowed, issuer, http_servers):
    """The source is allowed; it redirects to the admin listener: the hop is refused and
    nothing is stored (before, redirects were followed unchecked)."""
    srv = loopback_allowed
    Redirector.target = srv.admin + "/metrics"
    redirector = f"http://127.0.0.1:{http_servers['redirector'].server_address[1]}/file"
    status, text = copy(srv, issuer.token("storage.create:/data"), "redirected.bin", Source=redirector)
    assert status == 202 and "failure:" in text and "own listeners" in text, text
    assert absent(srv, "redirected.bin")
    assert "outbound connection refused" in srv.output()


def test_a_push_of_a_link_out_of_the_bucket_sends_nothing(loopback_allowed, issuer, http_servers, tmp_path):
    """Traversal through third-party copy: a push of a key that is a link leading out of the
    bucket finds no object, and nothing is sent."""
    import os
    srv = loopback_allowed
    (tmp_path / "secret.txt").write_bytes(b"outside the data root")
    os.symlink(tmp_path / "secret.txt", srv.root / "data" / "link.txt")
    destination = f"http://127.0.0.1:{http_servers['plain'].server_address[1]}/received"
    status, text = copy(srv, issuer.token("storage.read:/data"), "link.txt", Destination=destination)
    assert status == 404 and "NoSuchKey" in text, text
    for key in ["../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd"]:
        status, _ = copy(srv, issuer.token("storage.read:/data"), key, Destination=destination)
        assert status in (400, 403, 404), key


# Issue 42, findings 3 and 7: outbound work is bounded.

TIB = 1 << 40
MIB = 1 << 20


class Silent:
    """A source that accepts connections and never answers (nor reads)."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.connections = []
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/file"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self):
        self.listener.close()
        for connection in self.connections:
            connection.close()


class Liar(BaseHTTPRequestHandler):
    """Announces `size` bytes for the one-byte probe; to any other range sends `send` bytes, then
    (with `trickle`) one more every 0.2 s until the gateway hangs up, else closes. Records the
    ranges asked for."""

    size = 0
    send = 0
    trickle = False
    ranges = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        cls = type(self)
        asked = self.headers.get("Range", "")
        cls.ranges.append(asked)
        if asked == "bytes=0-0":
            self.send_response(206)
            self.send_header("Content-Range", f"bytes 0-0/{cls.size}")
            self.send_header("Content-Length", "1")
            self.end_headers()
            self.wfile.write(b"x")
            return
        first, last = (int(x) for x in asked.split("=")[1].split("-"))
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{cls.size}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        self.wfile.write(b"y" * cls.send)
        self.wfile.flush()
        while cls.trickle:
            time.sleep(0.2)
            try:
                self.wfile.write(b"y")
                self.wfile.flush()
            except OSError:
                return
        self.close_connection = True


@pytest.fixture
def silent():
    source = Silent()
    yield source
    source.close()


@pytest.fixture
def liar():
    Liar.size, Liar.send, Liar.trickle, Liar.ranges = 0, 0, False, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Liar)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/claimed.bin"
    yield server
    Liar.trickle = False
    server.shutdown()


def bounded_gateway(tmp_path_factory, issuer, settings):
    """A gateway reaching loopback, with `settings` (top-level keys), Alice and cmsprod (both
    given bucket `data`; cmsprod also `capped`, whose quota is 16 MiB)."""
    base = tmp_path_factory.mktemp("tpc-bounds")
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    config = base / "isthmus.toml"
    config.write_text('outbound_allow = ["127.0.0.0/8"]\n' + settings + config_text(jwks, 'buckets = ["data", "capped"]')
                      + '[[quotas]]\nbucket = "capped"\nmax_bytes = 16777216\n')
    srv = Server(base / "data", extra_args=["--config", str(config)])
    root = make_client(srv.endpoint)
    for bucket in ("data", "capped"):
        root.create_bucket(Bucket=bucket)
    return srv


@pytest.fixture(scope="module")
def quick(tmp_path_factory, issuer):
    """Gives a silent source 1 s and any copy 3 s."""
    srv = bounded_gateway(tmp_path_factory, issuer, "tpc_response_timeout_seconds = 1\ntpc_deadline_seconds = 3\n")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def capped(tmp_path_factory, issuer):
    """Three copies at once, two per user; a silent source is waited on for long."""
    srv = bounded_gateway(tmp_path_factory, issuer, "tpc_max_copies = 3\ntpc_max_copies_per_user = 2\n"
                          "tpc_response_timeout_seconds = 60\n")
    yield srv
    srv.stop()


def prod_token(issuer, scope):
    """A token of another user (cmsprod, by its group)."""
    return issuer.token(scope, sub="production-robot", **{"wlcg.groups": ["/cms/prod"]})


def start_copy(srv, token, path, source=None, destination=None):
    """Sends a COPY (a pull from `source` or a push to `destination`); the response once its
    status is known (its body still streaming)."""
    remote = {"Source": source} if source else {"Destination": destination}
    return requests.request("COPY", f"{srv.endpoint}/{path}", stream=True, timeout=30,
                            headers={"Authorization": f"Bearer {token}", **remote})


def outcome_of(response, within=20):
    """A copy's streamed answer, read until it ends or `within` seconds pass (markers come every
    second, so a copy that never ends would otherwise be waited on forever)."""
    text, deadline = "", time.monotonic() + within
    with response:
        for chunk in response.iter_content(chunk_size=None):
            text += chunk.decode()
            if time.monotonic() > deadline:
                break
    return text


def staged(srv):
    """Pull staging the gateway keeps: files in ROOT/.isthmus/tpc, and unnamed files it holds
    open there (Linux names them `<dir>/#<inode> (deleted)`)."""
    directory = srv.root / ".isthmus" / "tpc"
    found = [str(p) for p in directory.iterdir()] if directory.exists() else []
    prefix = os.path.realpath(directory) + "/"
    for fd in os.listdir(f"/proc/{srv.proc.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{srv.proc.pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            found.append(target)
    return found


def test_copies_from_a_source_that_never_answers_are_capped_and_others_are_served(capped, issuer, silent,
                                                                                  http_servers):
    """The audit's 512 copies from a silent source stalled every other user's PUT: now each
    user and the gateway have a cap (503 SlowDown past it), the copies wait on threads of
    their own, and other users' PUTs and GETs are served while they hang."""
    srv = capped
    alice, prod = issuer.token("storage.create:/data"), prod_token(issuer, "storage.create:/data")
    held = []
    root = make_client(srv.endpoint)
    try:
        for key in ("data/a0", "data/a1"):
            held.append(start_copy(srv, alice, key, silent.url))
            assert held[-1].status_code == 202
        over_mine = start_copy(srv, alice, "data/a2", silent.url)
        held.append(over_mine)
        assert over_mine.status_code == 503, over_mine.status_code
        assert "SlowDown" in over_mine.text and "tpc_max_copies_per_user" in over_mine.text, over_mine.text
        held.append(start_copy(srv, prod, "data/p0", silent.url))
        assert held[-1].status_code == 202
        over_all = start_copy(srv, prod, "data/p1", silent.url)
        held.append(over_all)
        assert over_all.status_code == 503 and "(tpc_max_copies)" in over_all.text, over_all.text
        # Every admitted copy reached the source and hangs there; the gateway serves others.
        assert wait_until(lambda: len(silent.connections) >= 3)
        root.put_object(Bucket="data", Key="meanwhile.txt", Body=b"still served")
        assert root.get_object(Bucket="data", Key="meanwhile.txt")["Body"].read() == b"still served"
    finally:
        for response in held:
            response.close()
    # The source hangs up: the copies fail and give their slots back.
    silent.close()
    plain = f"http://127.0.0.1:{http_servers['plain'].server_address[1]}/"
    assert wait_until(lambda: copy(srv, alice, "after.txt", Source=plain)[0] == 202)
    assert root.get_object(Bucket="data", Key="after.txt")["Body"].read() == b"internal only\n"


def test_a_source_that_never_answers_fails_in_time_and_leaves_nothing(quick, issuer, silent):
    answer = start_copy(quick, issuer.token("storage.create:/data"), "data/never.bin", silent.url)
    assert answer.status_code == 202
    text = outcome_of(answer)
    assert "failure: RequestTimeout" in text and "tpc_response_timeout_seconds" in text, text
    assert absent(quick, "never.bin")
    assert staged(quick) == []
    # A push to a destination that never answers ends the same way.
    make_client(quick.endpoint).put_object(Bucket="data", Key="mine.bin", Body=b"alice's bytes")
    answer = start_copy(quick, issuer.token("storage.read:/data"), "data/mine.bin", destination=silent.url)
    assert answer.status_code == 202
    text = outcome_of(answer)
    assert "failure: RequestTimeout" in text, text


def test_a_source_claiming_8_tib_is_refused_before_anything_is_staged(quick, issuer, liar):
    """Before, the claim made an 8 TiB sparse staging file, fetched a chunk, and kept the file
    for a day after the source stopped sending."""
    Liar.size, Liar.send = 8 * TIB, 1000
    status, text = copy(quick, issuer.token("storage.create:/data"), "huge.bin", Source=liar.url)
    assert status == 202
    assert staged(quick) == [], "no staging file was made"
    assert Liar.ranges == ["bytes=0-0"], "nothing but the probe was asked of the source"
    assert "failure: InsufficientStorage" in text, text
    # Over the bucket's quota (16 MiB), a claim is refused by the quota, again before staging.
    Liar.ranges = []
    prod = prod_token(issuer, "storage.create:/capped")
    text = outcome_of(start_copy(quick, prod, "capped/huge.bin", liar.url))
    assert "failure: QuotaExceeded" in text, text
    assert Liar.ranges == ["bytes=0-0"]
    assert staged(quick) == [] and absent(quick, "huge.bin", bucket="capped")


def test_staging_counts_against_the_quota_while_it_runs_and_goes_when_the_copy_fails(quick, issuer, liar):
    """A 6 MiB pull into a 16 MiB bucket holds 12 MiB while it runs (the staged copy and the
    object); the source trickles until the copy's deadline, then the copy fails, its staging
    goes at once, and the room comes back."""
    Liar.size, Liar.send, Liar.trickle = 6 * MIB, 1000, True
    prod = prod_token(issuer, "storage.create:/capped")
    outcome = {}

    def pull():
        outcome["text"] = outcome_of(start_copy(quick, prod, "capped/trickled.bin", liar.url))

    worker = threading.Thread(target=pull)
    worker.start()
    # The pull was admitted (its chunk is being asked for): 12 MiB of the 16 are held.
    assert wait_until(lambda: len(Liar.ranges) >= 2)
    root = make_client(quick.endpoint)
    with pytest.raises(ClientError) as refused:
        root.put_object(Bucket="capped", Key="five.bin", Body=os.urandom(5 * MIB))
    assert refused.value.response["Error"]["Code"] == "QuotaExceeded"
    assert len(staged(quick)) == 1, "one staging file while the pull runs"
    worker.join(timeout=20)
    assert "failure: RequestTimeout" in outcome.get("text", "") and "tpc_deadline_seconds" in outcome["text"], outcome
    Liar.trickle = False
    assert staged(quick) == []
    assert absent(quick, "trickled.bin", bucket="capped")
    root.put_object(Bucket="capped", Key="five.bin", Body=os.urandom(5 * MIB))


def test_a_failed_pull_leaves_no_staged_file(quick, issuer, liar):
    """The source sends part of each chunk and hangs up, every time: the pull tries the chunk
    again, fails, and keeps nothing (before, it kept the bytes for a day, counted to no one)."""
    Liar.size, Liar.send = 3 * MIB, 64 * 1024
    status, text = copy(quick, issuer.token("storage.create:/data"), "broken.bin", Source=liar.url)
    assert status == 202 and "failure:" in text, text
    assert staged(quick) == []
    assert absent(quick, "broken.bin")
    assert Liar.ranges.count(f"bytes=0-{3 * MIB - 1}") == 3, "the chunk is tried three times"

