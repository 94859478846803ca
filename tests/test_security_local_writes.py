"""In-place writes through the local socket, attacked by the local users themselves (issue 42,
finding 6): real Unix users (made here) talk to a real posix-identity gateway with a raw client
of the protocol (tests/local_wire.py), asking for an object's file for in-place writes and then
trying to grow the object past its size and its bucket's quota, and to get write access to a
file they could not reach by path. Protocol 3 passed a read-write descriptor of the file, which
did both; protocol 4 passes none: each in-place write is a request the gateway judges and
bounds."""

import fcntl
import json
import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from conftest import Server, make_client
from local_wire import Peer
from test_identity import SECRET, USERS, config_text, unix  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")

SIZE = 48 << 10
QUOTA = f'[[quotas]]\nbucket = "quota"\nmax_bytes = {SIZE}\n'


def gateway(base_mode):
    """A posix-identity gateway whose data root sits in a directory of `base_mode`, its socket
    in a directory every user may reach, the bucket `quota` (everyone may write; at most SIZE
    bytes) holding alice's object `shard` of SIZE bytes: the quota is full."""
    base = Path(tempfile.mkdtemp(prefix="isthmus-local-writes-"))
    root = base / "data"
    root.mkdir()
    root.chmod(0o755)
    (root / "quota").mkdir()
    (root / "quota").chmod(0o1777)
    sockets = Path(tempfile.mkdtemp(prefix="isthmus-local-writes-socket-"))
    sockets.chmod(0o755)
    socket = sockets / "isthmus.sock"
    config = base / "isthmus.toml"
    config.write_text(config_text() + QUOTA)
    srv = Server(root, extra_args=["--config", str(config), "--local-socket", str(socket)])
    deadline = time.time() + 5
    while not socket.exists():
        assert time.time() < deadline, srv.output()
        time.sleep(0.05)
    alice = make_client(srv.endpoint, "alice", SECRET)
    alice.put_object(Bucket="quota", Key="shard", Body=b"\0" * SIZE)
    base.chmod(base_mode)
    return srv, root, socket, alice, [base, sockets]


@pytest.fixture
def reachable(unix):
    srv, root, socket, alice, dirs = gateway(0o755)
    yield srv, root, socket, alice
    srv.stop()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def unreachable(unix):
    """The data root's parent is 0700: no user but root reaches a file under it by path."""
    srv, root, socket, alice, dirs = gateway(0o700)
    yield srv, root, socket, alice
    srv.stop()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def as_user(user, fn):
    """`fn()` in a forked child that became `user`; what it returned (through JSON), or fails
    with what it raised."""
    pw = pwd.getpwnam(USERS[user])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            out, code = json.dumps(fn()), 0
        except BaseException as e:  # reported to the parent
            out = f"{type(e).__name__}: {e!r}"
        os.write(w, out.encode())
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return json.loads(out)


def shard(size=SIZE):
    return {"Object": {"bucket": "quota", "key": "shard", "size": size}}


def write(peer, file, pieces, body):
    """An in-place write request; its outcome and, for an error, its code."""
    outcome, value = peer.call({"UpdateWrite": {"file": file, "pieces": pieces}}, body)
    return outcome if outcome == "Ok" else value["code"]


def try_to_grow(socket):
    """As a hostile peer: ask for the object's file, then write past its end every way the
    gateway allows (the descriptor it passes, in-place requests with a true or a false size)."""
    peer = Peer(socket)
    outcome, reply = peer.call({"ObjectFileForUpdate": {"bucket": "quota", "key": "shard"}})
    seen = {"version": peer.version, "reply": [outcome, reply], "descriptors": len(peer.descriptors)}
    for fd in peer.descriptors:
        try:
            os.pwrite(fd, b"x" * 4096, SIZE + (1 << 20))
            seen["grown through the descriptor"] = True
        except OSError as e:
            seen["descriptor refused"] = e.errno
    if peer.version >= 4:
        seen["past the end"] = write(peer, shard(), [[SIZE - 2, 4096]], b"y" * 4096)
        seen["a false size"] = write(peer, shard(1 << 30), [[SIZE + 100, 4096]], b"z" * 4096)
        seen["offset wraps"] = write(peer, shard(), [[2**64 - 2, 4]], b"wrap")
        outcome, value = peer.call({"UpdateLock": {"bucket": "quota", "key": "shard", "size": 1 << 30}})
        seen["lock with a false size"] = value["code"] if outcome == "Err" else outcome
        seen["inside"] = write(peer, shard(), [[0, 4]], b"mine")
    peer.close()
    return seen


def test_a_peer_cannot_grow_an_object_past_its_size_or_its_bucket_quota(reachable):
    srv, root, socket, alice = reachable
    path = root / "quota" / "shard"
    seen = as_user("alice", lambda: try_to_grow(socket))
    assert alice.head_object(Bucket="quota", Key="shard")["ContentLength"] == SIZE, seen
    assert path.stat().st_size == SIZE, seen
    assert seen["descriptors"] == 0, f"a descriptor of the file was passed: {seen}"
    assert seen["version"] >= 4 and seen["reply"][0] == "Ok" and "UpdateFile" in seen["reply"][1], seen
    # Every way past the end is refused before a byte is written; the object's own bytes can
    # still be written in place by its owner.
    assert seen["past the end"] == "InvalidArgument", seen
    assert seen["a false size"] == "PreconditionFailed", seen
    assert seen["offset wraps"] == "InvalidArgument", seen
    assert seen["lock with a false size"] == "PreconditionFailed", seen
    assert seen["inside"] == "Ok", seen
    assert path.read_bytes()[:4] == b"mine" and path.stat().st_size == SIZE
    # The quota is still full, and still enforced.
    with pytest.raises(ClientError) as refused:
        alice.put_object(Bucket="quota", Key="one-more", Body=b"1")
    assert refused.value.response["Error"]["Code"] == "QuotaExceeded"


def ask_for_the_file(socket, path):
    """Whether this user can open `path` itself, and what asking the gateway for it gives."""
    try:
        os.close(os.open(path, os.O_RDWR))
        by_path = "opened"
    except OSError as e:
        by_path = e.errno
    peer = Peer(socket)
    outcome, reply = peer.call({"ObjectFileForUpdate": {"bucket": "quota", "key": "shard"}})
    writable = [fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY for fd in peer.descriptors]
    written = write(peer, shard(), [[0, 5]], b"owned") if peer.version >= 4 else None
    peer.close()
    return {"by path": by_path, "reply": [outcome, reply], "writable descriptors": writable, "written": written}


def test_a_user_who_cannot_reach_the_file_gets_no_writable_descriptor(unreachable):
    """The data root's parent is 0700: alice cannot open her object's file by path. Protocol 3
    handed her a read-write descriptor of it all the same (opened by the gateway beneath the
    bucket); now she gets none, and bob, whom the kernel refuses the file, writes nothing."""
    srv, root, socket, alice = unreachable
    path = root / "quota" / "shard"
    seen = as_user("alice", lambda: ask_for_the_file(socket, str(path)))
    assert seen["by path"] == 13, f"alice reached the file by path: {seen}"  # EACCES
    assert seen["writable descriptors"] == [], f"a writable descriptor of a file alice cannot reach: {seen}"
    # Her requests are judged as all her requests are (her own object, through the gateway).
    assert seen["written"] == "Ok", seen
    assert path.stat().st_size == SIZE
    before = path.read_bytes()
    seen = as_user("bob", lambda: ask_for_the_file(socket, str(path)))
    assert seen["writable descriptors"] == [] and seen["reply"][0] == "Err", seen
    assert seen["reply"][1]["code"] == "AccessDenied" and seen["written"] == "AccessDenied", seen
    assert path.read_bytes() == before
