"""Third-party copy as an attacker uses it (issue 28, finding 2: SSRF). A signed user asks the
gateway to fetch a URL into a bucket (pull) or send an object to one (push): by default the
gateway reaches no loopback, private or link-local host and never its own listeners; the
operator opens what is needed with `outbound_allow`; every redirect hop and every DNS answer
is checked again. Also: pulls of the same source to the same object by two users never share
staging."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import Server, free_port, make_client
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


def absent(srv, key):
    try:
        make_client(srv.endpoint).head_object(Bucket="data", Key=key)
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
