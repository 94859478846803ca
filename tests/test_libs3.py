"""Old HPC clients: a C program built against Debian's libs3 2.0 and Debian's `s3` tool, both
signing with AWS Signature Version 2; and the switch that refuses SigV2."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ACCESS_KEY, SECRET_KEY, Server, make_client

SOURCE = Path(__file__).parent / "c" / "libs3_roundtrip.c"


def libs3_env(server):
    env = dict(os.environ)
    env.update({"S3_HOSTNAME": server.endpoint.split("://")[1], "S3_ACCESS_KEY_ID": ACCESS_KEY, "S3_SECRET_ACCESS_KEY": SECRET_KEY})
    return env


@pytest.fixture(scope="module")
def libs3_program(tmp_path_factory):
    if not Path("/usr/include/libs3.h").exists():
        pytest.fail("libs3-dev is not installed: run the README's test command, which installs it")
    exe = tmp_path_factory.mktemp("c") / "libs3_roundtrip"
    subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SOURCE), "-ls3"], check=True)
    return exe


def test_c_program_against_libs3(server, libs3_program):
    r = subprocess.run([str(libs3_program), "c-bucket"], env=libs3_env(server), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "delete bucket ok" in r.stdout
    assert not (server.root / "c-bucket").exists()


@pytest.mark.posix_only
def test_debian_s3_tool(server, s3, tmp_path):
    exe = shutil.which("s3")
    if exe is None:
        pytest.fail("Debian's s3 tool (package libs3-2) is not installed")
    env = libs3_env(server)

    def run(*args):
        r = subprocess.run([exe, "-u", *args], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    run("create", "tool-bucket")
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(200_000))
    run("put", "tool-bucket/data/in.bin", f"filename={src}")
    assert (server.root / "tool-bucket/data/in.bin").read_bytes() == src.read_bytes()
    assert "data/in.bin" in run("list", "tool-bucket")
    # Data written over SigV4 by boto3 is read back by the SigV2 tool, and vice versa.
    s3.put_object(Bucket="tool-bucket", Key="from-boto3", Body=b"hello from boto3")
    out = tmp_path / "out.bin"
    run("get", "tool-bucket/from-boto3", f"filename={out}")
    assert out.read_bytes() == b"hello from boto3"
    run("delete", "tool-bucket/data/in.bin")
    run("delete", "tool-bucket/from-boto3")
    run("delete", "tool-bucket")


def test_sigv2_can_be_switched_off(tmp_path, libs3_program):
    srv = Server(tmp_path / "data", extra_args=["--disable-sigv2"])
    try:
        r = subprocess.run([str(libs3_program), "refused"], env=libs3_env(srv), capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert not (srv.root / "refused").exists()
        # SigV4 clients are unaffected.
        make_client(srv.endpoint).create_bucket(Bucket="still-fine")
    finally:
        srv.stop()
