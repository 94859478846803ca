"""The libs3 drop-in (target/release/libs3.so, SONAME libs3.so.2): programs built against
Debian's libs3, including Debian's own `s3` tool, run unchanged in-process on ISTHMUS_ROOT when
the host name is `isthmus`, and share the data with a running gateway."""

import os
import shutil
import subprocess

import pytest

from conftest import REPO, Server, make_client

SOURCE = REPO / "tests" / "c" / "libs3_roundtrip.c"
LIBDIR = REPO / "target" / "release"


def dropin_env(root):
    if not (LIBDIR / "libs3.so.2").exists():
        pytest.fail("target/release/libs3.so.2 is missing: build with `cargo build --release`")
    env = dict(os.environ)
    env.update({"LD_LIBRARY_PATH": str(LIBDIR), "ISTHMUS_ROOT": str(root), "S3_HOSTNAME": "isthmus", "S3_ACCESS_KEY_ID": "unused", "S3_SECRET_ACCESS_KEY": "unused"})
    return env


def s3_tool(root, *args, check=True):
    exe = shutil.which("s3")
    if exe is None:
        pytest.fail("Debian's s3 tool (package libs3-2) is not installed")
    r = subprocess.run([exe, "-u", *args], env=dropin_env(root), capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0 and "ERROR" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r


def test_the_library_is_loaded_instead_of_debians(tmp_path):
    out = subprocess.run(["ldd", shutil.which("s3")], env=dropin_env(tmp_path), capture_output=True, text=True).stdout
    assert str(LIBDIR / "libs3.so.2") in out


def test_debian_s3_tool_in_process(tmp_path):
    root = tmp_path / "root"
    s3_tool(root, "create", "tool-bucket")
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 5))
    s3_tool(root, "put", "tool-bucket/dir/in.bin", f"filename={src}")
    assert (root / "tool-bucket" / "dir" / "in.bin").read_bytes() == src.read_bytes()
    assert "dir/in.bin" in s3_tool(root, "list", "tool-bucket").stdout
    assert "ETag" in s3_tool(root, "head", "tool-bucket/dir/in.bin").stdout
    out = tmp_path / "out.bin"
    s3_tool(root, "get", "tool-bucket/dir/in.bin", f"filename={out}")
    assert out.read_bytes() == src.read_bytes()
    s3_tool(root, "copy", "tool-bucket/dir/in.bin", "tool-bucket/copy.bin")
    assert (root / "tool-bucket" / "copy.bin").read_bytes() == src.read_bytes()
    missing = s3_tool(root, "get", "tool-bucket/nope", f"filename={tmp_path / 'x'}", check=False)
    assert "ErrorNoSuchKey" in missing.stdout + missing.stderr
    s3_tool(root, "delete", "tool-bucket/dir/in.bin")
    s3_tool(root, "delete", "tool-bucket/copy.bin")
    s3_tool(root, "delete", "tool-bucket")
    assert not (root / "tool-bucket").exists()


def test_c_program_built_against_debians_libs3(tmp_path):
    exe = tmp_path / "roundtrip"
    subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SOURCE), "-ls3"], check=True)
    r = subprocess.run([str(exe), "c-dropin"], env=dropin_env(tmp_path / "root"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "delete bucket ok" in r.stdout


def test_shares_data_with_a_running_gateway(tmp_path):
    root = tmp_path / "data"
    srv = Server(root)
    try:
        http = make_client(srv.endpoint)
        http.create_bucket(Bucket="shared")
        http.put_object(Bucket="shared", Key="from-gateway", Body=b"served over HTTP")
        out = tmp_path / "got"
        s3_tool(root, "get", "shared/from-gateway", f"filename={out}")
        assert out.read_bytes() == b"served over HTTP"
        src = tmp_path / "in"
        src.write_bytes(b"written in-process through libs3")
        s3_tool(root, "put", "shared/from-libs3", f"filename={src}")
        assert http.get_object(Bucket="shared", Key="from-libs3")["Body"].read() == src.read_bytes()
    finally:
        srv.stop()


def test_other_hosts_are_refused_clearly(tmp_path):
    env = dropin_env(tmp_path)
    env["S3_HOSTNAME"] = "s3.amazonaws.com"
    r = subprocess.run([shutil.which("s3"), "-u", "list"], env=env, capture_output=True, text=True, timeout=30)
    assert "NameLookupError" in r.stdout + r.stderr
