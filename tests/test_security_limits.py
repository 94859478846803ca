"""Bounds on what a request may bring (issue 42, finding 8): a SigV2 presigned URL lives at most
seven days, as a SigV4 one does (its `Expires` was taken as given, 10^9 s ahead worked), and a
request's header section is refused past 400 KiB, as SECURITY.md says (a single 500 KB header
was accepted). Each test plays the client against a real gateway."""

import socket

import pytest

from conftest import make_client

WEEK = 7 * 24 * 3600
MAX_HEADER_SECTION = 400 * 1024


@pytest.fixture
def public_object(server, s3):
    s3.create_bucket(Bucket="limits")
    s3.put_object(Bucket="limits", Key="k", Body=b"the bytes", ACL="public-read")
    return server, s3


def fetch(url, timeout=10):
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_a_sigv2_presigned_url_lives_at_most_a_week(public_object):
    server, s3 = public_object
    s3.put_object_acl(Bucket="limits", Key="k", ACL="private")
    v2 = make_client(server.endpoint, signature_version="s3")
    params = {"Bucket": "limits", "Key": "k"}
    for seconds in (10**9, WEEK + 3600):
        status, body = fetch(v2.generate_presigned_url("get_object", Params=params, ExpiresIn=seconds))
        assert status == 403, (seconds, body)
        assert b"<Code>AuthorizationQueryParametersError</Code>" in body and b"a week" in body, body
        assert b"the bytes" not in body
    for seconds in (60, WEEK - 60):
        url = v2.generate_presigned_url("get_object", Params=params, ExpiresIn=seconds)
        assert fetch(url) == (200, b"the bytes"), seconds


def raw_get(endpoint, path, headers, timeout=10):
    """A GET with `headers` on a connection of its own: (status, body), or (None, why) when the
    gateway closed the connection without an answer the client could read."""
    host, port = endpoint.removeprefix("http://").split(":")
    head = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        try:
            conn.sendall(head.encode())
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError) as err:
            if not answer:
                return None, repr(err)
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_the_header_section_is_bounded_at_400_kib(public_object):
    server, _ = public_object
    for size in (8 * 1024, 300 * 1024):
        status, body = raw_get(server.endpoint, "/limits/k", {"X-Padding": "a" * size})
        assert (status, body) == (200, b"the bytes"), size
    # Just past the bound (the whole head still fits hyper's buffer): the gateway's own answer.
    status, body = raw_get(server.endpoint, "/limits/k", {"X-Padding": "a" * MAX_HEADER_SECTION})
    assert status == 431, body
    assert b"<Code>RequestHeaderSectionTooLarge</Code>" in body and b"409600" in body, body
    # A single 500 KB header: refused (by the gateway, or by hyper once its buffer is full and
    # the connection closes), however the bytes arrive.
    for attempt in range(10):
        status, body = raw_get(server.endpoint, "/limits/k", {"X-Padding": "a" * 500_000})
        assert status in (431, None), (attempt, status, body)
    # Spread over several headers, the section is bounded as a whole.
    several = {f"X-Padding-{i}": "a" * (81 * 1024) for i in range(5)}
    status, body = raw_get(server.endpoint, "/limits/k", several)
    assert status == 431 and b"RequestHeaderSectionTooLarge" in body, body
    # The gateway still serves.
    assert raw_get(server.endpoint, "/limits/k", {}) == (200, b"the bytes")
