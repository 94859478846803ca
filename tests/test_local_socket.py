"""The local door: `isthmus serve --local-socket`, no HTTP and no keys. Real Unix users (made
here) connect from their own processes; the gateway knows each by its uid (SO_PEERCRED) and,
with identity = "posix", acts with its permissions. Python, the C library and Debian's `s3` tool
(through the libs3 drop-in) all speak it."""

import hashlib
import io
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import isthmus  # loaded here: the children that become other users cannot read /root
import pytest

from conftest import REPO, Server, make_client
from test_embedded_c import READER, compile_c, prefix  # noqa: F401 (the fixture)
from test_identity import SECRET, USERS, config_text, traversable_root, unix  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")


@pytest.fixture
def node(unix):
    """A posix-mode gateway with a local socket, on a data root every user may traverse; a
    shared bucket where everyone may write."""
    base, root = traversable_root("isthmus-local-")
    shared = root / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    socket = base / "isthmus.sock"
    config = base / "isthmus.toml"
    config.write_text(config_text())
    srv = Server(root, extra_args=["--config", str(config), "--local-socket", str(socket)])
    deadline = time.time() + 5
    while not socket.exists():
        assert time.time() < deadline, srv.output()
        time.sleep(0.05)
    yield srv, root, socket, unix
    srv.stop()
    assert not socket.exists(), "the socket file is removed when the gateway stops"
    shutil.rmtree(base, ignore_errors=True)


def as_user(user, *cmd, env=None, **kwargs):
    """Runs a program as `user` (uid, gid and groups)."""
    name = USERS.get(user, user)
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", *cmd], capture_output=True, text=True, env=full_env, timeout=120, **kwargs
    )


def fork_as(user, fn, ready=None):
    """Runs `fn()` in a forked child that became `user` (this interpreter is not executable by
    other users, so no new one is started). Returns the child's pid and a pipe: the child
    writes "ready" to it when `ready` says so, then `repr(fn())` or the exception it raised."""
    pw = pwd.getpwnam(USERS.get(user, user))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            os.chdir("/")
            out, code = repr(fn(lambda: os.write(w, b"ready\n"))), 0
        except BaseException as e:  # reported to the parent
            out = f"{type(e).__name__}: {e.args!r}"
        os.write(w, out.encode())
        os._exit(code)
    os.close(w)
    return pid, os.fdopen(r, "rb")


def python_as(user, socket, fn):
    """`fn(store)` as `user`, with `store = isthmus.connect(socket)`; returns what it returned
    (as repr) or fails with what it raised."""

    def body(_ready):
        return fn(isthmus.connect(f"unix://{socket}"))

    pid, pipe = fork_as(user, body)
    out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0, out


def test_python_users_act_as_themselves_without_keys(node):
    srv, root, socket, unix = node

    def write_and_read(store):
        store.put_object("shared", "alice.txt", b"from alice")
        return store.get_object("shared", "alice.txt")

    assert python_as("alice", socket, write_and_read) == (True, repr(b"from alice"))
    st = (root / "shared" / "alice.txt").stat()
    assert st.st_uid == unix["alice"].pw_uid
    assert st.st_mode & 0o777 == 0o640  # alice's umask 027
    (root / "shared" / "alice.txt").chmod(0o600)
    ok, out = python_as("bob", socket, lambda store: store.get_object("shared", "alice.txt"))
    assert not ok and "AccessDenied" in out, out
    # The same object over HTTP, signed as alice.
    alice = make_client(srv.endpoint, "alice", SECRET)
    assert alice.get_object(Bucket="shared", Key="alice.txt")["Body"].read() == b"from alice"

    # Streaming both ways: 20 MiB in and out in pieces.
    def stream(store):
        data = bytes(range(256)) * (80 * 1024)
        store.put_stream("shared", "big/bob.bin", io.BytesIO(data))
        h = hashlib.md5()
        with store.open_object("shared", "big/bob.bin") as r:
            while chunk := r.read(1 << 20):
                h.update(chunk)
        return h.hexdigest() == hashlib.md5(data).hexdigest()

    assert python_as("bob", socket, stream) == (True, "True")
    assert (root / "shared" / "big" / "bob.bin").stat().st_uid == unix["bob"].pw_uid


def _descriptors_of(path):
    """This process's open descriptors on `path`."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == path:
                found.append(int(name))
        except OSError:
            pass
    return found


def test_a_large_get_hands_the_reader_its_file_and_only_to_whom_may_read_it(node):
    """From 256 KiB a GET through the socket answers with a read-only descriptor of the
    object's file, opened with the user's identity: the owner reads its own file directly, and
    cannot write through it; another user is refused and holds no descriptor afterwards."""
    srv, root, socket, unix = node
    payload = os.urandom(1 << 20)
    path = os.path.realpath(root / "shared" / "big" / "alice-private.bin")
    ok, out = python_as("alice", socket, lambda store: store.put_object("shared", "big/alice-private.bin", payload))
    assert ok, out
    os.chmod(path, 0o600)

    def alice_reads(store):
        with store.open_object("shared", "big/alice-private.bin") as reader:
            held = _descriptors_of(path)
            data = reader.read()
            refused = []
            for fd in held:
                try:
                    os.write(fd, b"overwrite")
                    refused.append(False)
                except OSError as e:
                    refused.append(e.errno == 9)  # EBADF: opened read-only
        return len(held) == 1, data == payload, refused == [True]

    assert python_as("alice", socket, alice_reads) == (True, "(True, True, True)")

    def bob_tries(store):
        try:
            store.get_object("shared", "big/alice-private.bin")
            return "read it"
        except Exception as e:  # the refusal, as the binding raises it
            return "AccessDenied" in str(e), _descriptors_of(path)

    assert python_as("bob", socket, bob_tries) == (True, "(True, [])")
    with open(path, "rb") as f:
        assert f.read() == payload


def test_arrays_through_the_socket_write_uncompressed_shards_in_place_as_the_user(node):
    """A peer served as its own Unix user gets the shard's file (opened as that user) and
    writes regions into it in place; a user the kernel refuses the file writes nothing."""
    srv, root, socket, unix = node
    shard = root / "shared" / "alice.zarr" / "c" / "0" / "0"

    def alice_writes(store):
        import numpy as np

        where = isthmus.Location.engine(store, "shared")
        a = isthmus.Array.create(where, "alice.zarr", shape=(4, 64), dtype="float32", chunks=(4, 64),
                                 inner_chunks=(1, 16))
        a.allocate_shards()
        inode = os.stat(shard).st_ino
        for row in range(4):
            a[row, 16:32] = np.full(16, row, np.float32)
        return os.stat(shard).st_ino == inode, float(a[3, 20]), float(a[3, 0])

    assert python_as("alice", socket, alice_writes) == (True, "(True, 3.0, 0.0)")
    assert shard.stat().st_uid == unix["alice"].pw_uid
    array_dir = root / "shared" / "alice.zarr"
    for path in [array_dir, *array_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # everyone reads; alice alone writes
    before = shard.read_bytes()

    def bob_writes(store):
        where = isthmus.Location.engine(store, "shared")
        a = isthmus.Array.open(where, "alice.zarr")
        try:
            a[0, 0:16] = 5.0
            return "written"
        except isthmus.IsthmusError as e:
            return e.args[0], float(a[0, 0])

    ok, out = python_as("bob", socket, bob_writes)
    assert (ok, out) == (True, repr(("AccessDenied", 0.0))), out
    assert shard.read_bytes() == before


def test_a_peer_that_maps_to_no_user_is_refused(node):
    srv, root, socket, unix = node
    ok, out = python_as("nobody", socket, lambda store: store.list_buckets())
    assert not ok and "AccessDenied" in out and "maps to no S3 user" in out, out


def test_a_client_killed_mid_upload_leaves_nothing(node):
    srv, root, socket, unix = node

    def slow_upload(ready):
        store = isthmus.connect(f"unix://{socket}")

        class Slow:
            sent = 0

            def read(self, n=-1):
                self.sent += 1
                if self.sent == 4:
                    ready()
                if self.sent > 4:
                    time.sleep(0.2)
                return b"x" * (1 << 20)

        store.put_stream("shared", "partial.bin", Slow())

    pid, pipe = fork_as("alice", slow_upload)
    assert pipe.readline() == b"ready\n"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    time.sleep(0.5)
    names = sorted(p.name for p in (root / "shared").iterdir())
    assert "partial.bin" not in names and not [n for n in names if n.startswith(".isthmus.")], names
    # The gateway goes on serving.
    assert python_as("alice", socket, lambda store: len(store.list_buckets()) > 0) == (True, "True")


def test_the_c_library_and_debians_s3_tool_through_the_socket(node, prefix, tmp_path):  # noqa: F811
    srv, root, socket, unix = node
    (root / "shared" / "hello").write_bytes(b"hello from the node")
    (root / "shared" / "hello").chmod(0o644)
    (root / "shared" / "secret").write_bytes(b"admin only")
    (root / "shared" / "secret").chmod(0o600)
    base = Path(tempfile.mkdtemp(prefix="isthmus-local-c-"))
    base.chmod(0o755)
    try:
        source = base / "reader.c"
        source.write_text(READER)
        exe = compile_c(prefix, source, base / "reader", static=True)
        ok = as_user("carol", str(exe), f"unix://{socket}", "shared", "hello")
        assert ok.returncode == 0 and ok.stdout.endswith("hello from the node"), ok.stdout + ok.stderr
        denied = as_user("carol", str(exe), f"unix://{socket}", "shared", "secret")
        assert denied.returncode == 1 and "AccessDenied" in denied.stderr, denied.stdout + denied.stderr
        # Debian's s3 tool with the libs3 drop-in: S3_HOSTNAME names the socket, no keys.
        exe_s3 = shutil.which("s3")
        if exe_s3 is None:
            pytest.fail("Debian's s3 tool (package libs3-2) is not installed")
        env = {
            "LD_LIBRARY_PATH": str(REPO / "target" / "release"),
            "S3_HOSTNAME": f"unix:{socket}",
            "S3_ACCESS_KEY_ID": "unused",
            "S3_SECRET_ACCESS_KEY": "unused",
        }
        src = base / "in.bin"
        src.write_bytes(os.urandom(3 * 1024 * 1024 + 7))
        src.chmod(0o644)
        put = as_user("carol", exe_s3, "-u", "put", "shared/tool/in.bin", f"filename={src}", env=env, cwd="/")
        assert put.returncode == 0 and "ERROR" not in put.stdout + put.stderr, put.stdout + put.stderr
        assert (root / "shared" / "tool" / "in.bin").read_bytes() == src.read_bytes()
        assert (root / "shared" / "tool" / "in.bin").stat().st_uid == unix["carol"].pw_uid
        listed = as_user("carol", exe_s3, "-u", "list", "shared", env=env, cwd="/")
        assert "tool/in.bin" in listed.stdout, listed.stdout + listed.stderr
        out = base / "out.bin"
        os.chown(base, unix["carol"].pw_uid, -1)
        got = as_user("carol", exe_s3, "-u", "get", "shared/tool/in.bin", f"filename={out}", env=env, cwd="/")
        assert got.returncode == 0, got.stdout + got.stderr
        assert out.read_bytes() == src.read_bytes()
        secret = as_user("carol", exe_s3, "-u", "get", "shared/secret", f"filename={base / 'x'}", env=env, cwd="/")
        assert "AccessDenied" in secret.stdout + secret.stderr, secret.stdout + secret.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_refused_to_start_on_a_socket_in_use(node, tmp_path):
    srv, root, socket, unix = node
    result = subprocess.run(
        [str(REPO / "target" / "release" / "isthmus"), "serve", "--root", str(tmp_path / "other"), "--address", "127.0.0.1:0", "--local-socket", str(socket)],
        capture_output=True,
        text=True,
        timeout=20,
        env=dict(os.environ, ISTHMUS_ROOT_ACCESS_KEY="rootkey", ISTHMUS_ROOT_SECRET_KEY="root-secret-123"),
    )
    assert result.returncode != 0 and "in use" in result.stderr, result.stderr
    assert socket.exists()
