"""libisthmus from C: the example program (built with the installed header, library and
pkg-config file, shared and static), and data shared with a running gateway on the same root."""

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, Server, make_client

READER = r"""
#include <isthmus.h>
#include <stdio.h>
int main(int argc, char **argv) {
    struct IsthmusStore *store = NULL;
    if (argc != 4 || isthmus_open(argv[1], 1, &store) != ISTHMUS_STATUS_OK) return 1;
    static char buf[1 << 16];
    size_t len = 0;
    struct IsthmusObjectInfo info;
    enum IsthmusStatus s = isthmus_get(store, argv[2], argv[3], 0, 0, (uint8_t *)buf, sizeof buf, &len, &info);
    if (s != ISTHMUS_STATUS_OK) { fprintf(stderr, "%s: %s\n", isthmus_status_name(s), isthmus_last_error()); return 1; }
    printf("%s\n%.*s", info.etag, (int)len, buf);
    isthmus_close(store);
    return 0;
}
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    subprocess.run([str(REPO / "scripts" / "install-embed"), str(prefix)], check=True, capture_output=True)
    return prefix


def compile_c(prefix, source, out, static=False):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "isthmus"], env=env, check=True, capture_output=True, text=True).stdout.split()
    if static:
        flags = [f for f in flags if f != "-listhmus"] + [str(prefix / "lib" / "libisthmus.a"), "-lpthread", "-ldl", "-lm", "-lstdc++"]
    subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(source), *flags, "-lpthread"], check=True)
    return out


def run(prefix, exe, *args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(prefix / "lib"))
    return subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("static", [False, True])
def test_example_program(prefix, tmp_path, static):
    exe = compile_c(prefix, REPO / "crates" / "embed" / "examples" / "example.c", tmp_path / "example", static)
    root = tmp_path / "root"
    r = run(prefix, exe, str(root))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "range 6+4: from" in r.stdout and r.stdout.strip().endswith("done")
    assert "prefix greetings/" in r.stdout and "object big.bin" in r.stdout
    # The status groups errors; the code is the S3 code the gateway and Python report.
    assert "complete with a small first part: InvalidPart, code EntityTooSmall" in r.stdout
    assert (root / "embedded" / "greetings" / "hello.txt").read_bytes() == b"hello from C"


def test_interoperates_with_a_running_gateway(prefix, tmp_path):
    root = tmp_path / "data"
    exe = compile_c(prefix, REPO / "crates" / "embed" / "examples" / "example.c", tmp_path / "example")
    assert run(prefix, exe, str(root)).returncode == 0
    source = tmp_path / "reader.c"
    source.write_text(READER)
    reader = compile_c(prefix, source, tmp_path / "reader")
    srv = Server(root)
    try:
        s3 = make_client(srv.endpoint)
        # Written in-process by C, served by the gateway with the same ETag.
        got = s3.get_object(Bucket="embedded", Key="greetings/hello.txt")
        assert got["Body"].read() == b"hello from C"
        assert got["ETag"] == '"%s"' % hashlib.md5(b"hello from C").hexdigest()
        # Written over S3 while the gateway runs, read in-process at the same time.
        s3.put_object(Bucket="embedded", Key="from-s3.txt", Body=b"via the gateway")
        r = run(prefix, reader, str(root), "embedded", "from-s3.txt")
        assert r.returncode == 0, r.stderr
        etag, body = r.stdout.split("\n", 1)
        assert body == "via the gateway" and etag == hashlib.md5(b"via the gateway").hexdigest()
        r = run(prefix, reader, str(root), "embedded", "nope")
        assert r.returncode == 1 and "NoSuchKey" in r.stderr
    finally:
        srv.stop()


def test_the_c_library_runs_with_the_callers_permissions(prefix):
    """libisthmus does its file-system calls as the calling process: run as `nobody`, it reads
    what nobody may read and gets AccessDenied for a 0600 file of root's."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the program as another user (CI runs as root)")
    base = Path(tempfile.mkdtemp(prefix="isthmus-c-perm-"))
    try:
        base.chmod(0o755)
        source = base / "reader.c"
        source.write_text(READER)
        exe = compile_c(prefix, source, base / "reader", static=True)
        root = base / "root"
        s3_root = run(prefix, exe, str(root), "none", "none")  # creates the root's internal area
        assert s3_root.returncode == 1
        bucket = root / "perm"
        bucket.mkdir()
        (bucket / "open").write_bytes(b"for everyone")
        (bucket / "secret").write_bytes(b"root only")
        (bucket / "secret").chmod(0o600)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        ok = subprocess.run([*as_nobody, str(exe), str(root), "perm", "open"], capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0 and ok.stdout.endswith("for everyone"), ok.stdout + ok.stderr
        denied = subprocess.run([*as_nobody, str(exe), str(root), "perm", "secret"], capture_output=True, text=True, timeout=60)
        assert denied.returncode == 1 and "not permitted" in denied.stderr, denied.stdout + denied.stderr
        as_root = run(prefix, exe, str(root), "perm", "secret")
        assert as_root.returncode == 0 and as_root.stdout.endswith("root only")
    finally:
        shutil.rmtree(base)


def test_arrays_and_transfers_from_c(prefix, tmp_path):
    """isthmus_array_* and isthmus_transfer_*: session writes per step, a strided read, the
    refusals; zarr-python reads the same array from the path."""
    import numpy as np
    import zarr

    exe = compile_c(prefix, REPO / "tests" / "c" / "array_transfers.c", tmp_path / "array_transfers")
    root = tmp_path / "root"
    r = run(prefix, exe, str(root))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines() if " " in line)
    assert lines["twice"] == "AlreadyExists AlreadyExists"
    assert lines["overlap"] == "TransferRefused"
    assert float(lines["first"]) == 0.0
    reference = np.concatenate([np.arange(40, dtype=np.float32).reshape(4, 10) + t * 100 for t in range(6)])
    assert [float(x) for x in lines["strided"].split()] == reference[1::4, 3::5].ravel().tolist()
    assert lines["shape"] == "24 10 element 4"
    from_path = zarr.open_array(str(root / "arrays" / "c.zarr"), mode="r")
    np.testing.assert_array_equal(from_path[:], reference)
    assert dict(from_path.attrs) == {"origin": "c"}
