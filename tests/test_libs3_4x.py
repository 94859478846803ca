"""The libs3 drop-in's two faces driven as IOR's S3-libs3 backend drives libs3
(tests/c/libs3_ior_calls.c): the libs3 4.1 face (target/release/libs3.so.4, built against
crates/libs3-4/include/libs3.h, with multipart uploads and ranged copies) and the 2.0 face
(target/release/libs3.so.2, built against Debian's header), each in-process (host `isthmus`)
and through a gateway's local socket (host `unix:PATH`, as a Unix user; a user the gateway
does not map is refused)."""

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO, Server
from test_identity import USERS, config_text, traversable_root, unix  # noqa: F401 (the fixture)

SOURCE = REPO / "tests" / "c" / "libs3_ior_calls.c"
LIBDIR = REPO / "target" / "release"
HEADER_4 = REPO / "crates" / "libs3-4" / "include" / "libs3.h"
DEBIAN_HEADER = Path("/usr/include/libs3.h")
FACES = ["4", "2"]


def library(face):
    path = LIBDIR / f"libs3.so.{face}"
    if not path.exists():
        pytest.fail(f"{path} is missing: build with `cargo build --release`")
    return path


@pytest.fixture(scope="module")
def programs():
    """The IOR-style program built against each face's header, in a directory every user may
    read (the socket tests run it as other users)."""
    base = Path(tempfile.mkdtemp(prefix="isthmus-libs3-4x-"))
    base.chmod(0o755)
    built = {}
    for face in FACES:
        library(face)
        exe = base / f"ior_calls_{face}"
        if face == "4":
            flags = ["-I", str(HEADER_4.parent), "-L", str(LIBDIR / "libs3-4")]
        else:
            flags = []
        subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", *flags, "-o", str(exe), str(SOURCE), "-ls3"], check=True)
        built[face] = exe
    yield built
    shutil.rmtree(base, ignore_errors=True)


def run(exe, host, bucket, *extra, env=None, user=None):
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": str(LIBDIR), **(env or {})}
    prefix = []
    if user == "nobody":
        prefix = ["setpriv", "--reuid=nobody", "--regid=65534", "--clear-groups"]
    elif user is not None:
        name = USERS[user]
        prefix = ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups"]
    return subprocess.run([*prefix, str(exe), host, bucket, *extra], env=full_env, capture_output=True, text=True, timeout=120, cwd="/")


def test_each_face_has_its_soname_and_exactly_its_headers_functions():
    for face, header in (("4", HEADER_4), ("2", DEBIAN_HEADER)):
        dynamic = subprocess.run(["readelf", "-d", str(library(face))], capture_output=True, text=True, check=True).stdout
        assert f"Library soname: [libs3.so.{face}]" in dynamic
        symbols = subprocess.run(["nm", "-D", "--defined-only", str(library(face))], capture_output=True, text=True, check=True).stdout
        exported = set(re.findall(r" T (S3_\w+)$", symbols, re.M))
        declared = set(re.findall(r"\b(S3_[a-z_]+)\s*\(", re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)))
        assert exported == declared, f"libs3.so.{face}: missing {declared - exported}, extra {exported - declared}"


def test_status_names_follow_the_4x_header():
    """S3_get_status_name(n) is the name the header gives n, for every status of libs3 4.1."""
    text = HEADER_4.read_text()
    values = {int(v): name for name, v in re.findall(r"S3Status(\w+) = (\d+)", text)}
    assert sorted(values) == list(range(135))
    lib = ctypes.CDLL(str(library("4")))
    lib.S3_get_status_name.restype = ctypes.c_char_p
    assert {n: lib.S3_get_status_name(n).decode() for n in range(135)} == values
    assert lib.S3_get_status_name(135) == b"Unknown"
    retryable = {values[n] for n in range(135) if lib.S3_status_is_retryable(n)}
    assert retryable == {"NameLookupError", "FailedToConnect", "ConnectionFailed", "ErrorInternalError", "ErrorOperationAborted", "ErrorRequestTimeout"}


@pytest.mark.parametrize("face", FACES)
def test_ior_calls_in_process(programs, face, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    ldd = subprocess.run(["ldd", str(programs[face])], env={"LD_LIBRARY_PATH": str(LIBDIR)}, capture_output=True, text=True).stdout
    assert str(LIBDIR / f"libs3.so.{face}") in ldd, ldd
    r = run(programs[face], "isthmus", "ior-bucket", env={"ISTHMUS_ROOT": str(root)})
    assert r.returncode == 0 and "all done" in r.stdout, r.stdout + r.stderr
    assert ("complete multipart" in r.stdout) == (face == "4")
    assert not (root / "isthmus").exists(), "no bucket named after the host"
    assert not (root / "ior-bucket").exists()


@pytest.fixture
def socket_node(unix):  # noqa: F811 (the fixture)
    """A posix-identity gateway on a local socket, over a data root where users may create
    buckets."""
    base, root = traversable_root("isthmus-libs3-4x-")
    root.chmod(0o1777)
    socket = base / "isthmus.sock"
    config = base / "isthmus.toml"
    config.write_text(config_text())
    srv = Server(root, extra_args=["--config", str(config), "--local-socket", str(socket)])
    deadline = time.time() + 5
    while not socket.exists():
        assert time.time() < deadline, srv.output()
        time.sleep(0.05)
    yield root, socket, unix
    srv.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")
@pytest.mark.parametrize("face", FACES)
def test_ior_calls_through_the_socket(programs, socket_node, face):
    root, socket, unix = socket_node
    bucket = f"ior-socket-{face}"
    r = run(programs[face], f"unix:{socket}", bucket, user="alice")
    assert r.returncode == 0 and "all done" in r.stdout, r.stdout + r.stderr
    assert not (root / bucket).exists()
    denied = run(programs[face], f"unix:{socket}", bucket, "denied", user="nobody")
    assert denied.returncode == 0 and "ErrorAccessDenied" in denied.stdout, denied.stdout + denied.stderr
