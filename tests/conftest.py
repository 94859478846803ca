"""Fixtures that start the real `isthmus` binary on a free 127.0.0.1 port over a temporary
data root, and clients (boto3, the aws CLI) pointed at it."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

REPO = Path(__file__).resolve().parent.parent
ACCESS_KEY = "ISTHMUSTESTACCESSKEY"
SECRET_KEY = "isthmus-test-secret-key-0123456789abcdef"


def binary() -> Path:
    path = Path(os.environ.get("ISTHMUS_BIN", REPO / "target" / "release" / "isthmus"))
    if not path.exists():
        pytest.exit(f"{path} not found: build it with `cargo build --release` (or set ISTHMUS_BIN)", returncode=2)
    return path


def bench_binary() -> Path:
    """The benchmark binary `isthmus bench ...` runs: ISTHMUS_BENCH_BIN, else the build's
    target/release/isthmus-bench. Exported as ISTHMUS_BENCH_BIN for every process the tests
    start (see pytest_configure), so `isthmus bench` finds it when ISTHMUS_BIN is a copy of the
    gateway elsewhere, with no isthmus-bench beside it."""
    return Path(os.environ.get("ISTHMUS_BENCH_BIN", REPO / "target" / "release" / "isthmus-bench"))


def wait_until(predicate, timeout=10.0):
    """Polls `predicate` until it holds or `timeout` seconds pass; its last answer."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def staged_files(bucket_dir, pid=None, with_data=False):
    """Writes in progress (or left behind) in a bucket: files in its staging area (file systems
    without unnamed files), hidden `.isthmus.tmp*` names beside the objects, and, given the
    gateway's `pid`, the unnamed (O_TMPFILE) files it holds open there, which Linux names
    `<directory>/#<inode> (deleted)`. `with_data`: only those with bytes in them."""
    bucket_dir = Path(os.path.realpath(bucket_dir))
    staging = bucket_dir / ".isthmus" / "tmp"
    named = (list(staging.iterdir()) if staging.exists() else []) + list(bucket_dir.rglob(".isthmus.tmp*"))
    candidates = [(str(p), str(p)) for p in named]
    for fd in os.listdir(f"/proc/{pid}/fd") if pid else []:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{bucket_dir}/") and "/#" in target and target.endswith(" (deleted)"):
            candidates.append((target, f"/proc/{pid}/fd/{fd}"))
    found = []
    for name, path in candidates:
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if size > 0 or not with_data:
            found.append(name)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ISTHMUS_TEST_POOL=erasure runs the suite's S3 behaviour on an erasure-coded pool: every
# gateway a test starts gets a 4+2 pool over six drive directories beside its root, as the
# default pool (so buckets made without a LocationConstraint land there). 64 KiB blocks and a
# 4 KiB inline limit make small test objects span several blocks.
TEST_POOL = os.environ.get("ISTHMUS_TEST_POOL", "posix")


def pytest_configure(config):
    os.environ["ISTHMUS_BENCH_BIN"] = str(bench_binary())
    config.addinivalue_line(
        "markers", "posix_only: the test looks at objects as files on the data root (file/object duality)"
    )
    config.addinivalue_line(
        "markers", "heavy: needs a heavy fixture (a CephFS cluster, a browser) or minutes of benchmarks (the reproduced "
        "studies): only `scripts/test --full` runs it"
    )


def pytest_collection_modifyitems(config, items):
    """On an erasure-coded default pool, tests of file/object duality do not apply: deselected."""
    if TEST_POOL != "erasure":
        return
    kept = [item for item in items if item.get_closest_marker("posix_only") is None]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def use_erasure_default_pool(root: Path, drives_dir: Path):
    table = root / ".isthmus" / "pools.toml"
    if table.exists():
        return
    table.parent.mkdir(parents=True, exist_ok=True)
    drives = ", ".join(f'"{drives_dir / f"d{i}"}"' for i in range(6))
    table.write_text(
        'default = "ec"\n[[pool]]\nname = "ec"\nkind = "erasure"\n'
        f'drives = [{drives}]\ndata = 4\nparity = 2\nblock_size = "64KiB"\ninline_limit = "4KiB"\n'
    )


class Server:
    """A running gateway: its endpoint, data root and process."""

    def __init__(self, root: Path, extra_args=(), env=None):
        self.root = root
        if TEST_POOL == "erasure":
            use_erasure_default_pool(root, root.parent / f"{root.name}-drives")
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(root.parent / f"server-{self.port}.log", "w+")
        full_env = dict(os.environ)
        full_env.update({"ISTHMUS_ROOT_ACCESS_KEY": ACCESS_KEY, "ISTHMUS_ROOT_SECRET_KEY": SECRET_KEY})
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [str(binary()), "serve", "--root", str(root), "--address", f"127.0.0.1:{self.port}", *extra_args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early: {self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not start")

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def rss_peak_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def console_server(root: Path, extra_args=(), env=None) -> Server:
    """A gateway with its web console on an address of its own (`--console-listen`): the
    console's URL is `server.console`, the S3 API's `server.endpoint`."""
    port = free_port()
    server = Server(root, extra_args=["--console-listen", f"127.0.0.1:{port}", *extra_args], env=env)
    server.console = f"http://127.0.0.1:{port}"

    def accepts():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    if not wait_until(accepts):
        output = server.output()
        server.stop()
        raise RuntimeError(f"the console's listener did not start: {output}")
    return server


def code_of(call, **kwargs):
    """The S3 error code a boto3 call answers with, or "OK"."""
    from botocore.exceptions import ClientError

    try:
        call(**kwargs)
    except ClientError as err:
        return err.response["Error"]["Code"]
    return "OK"


def make_client(endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY, **config):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}, **config),
    )


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "data"
    srv = Server(root)
    yield srv
    srv.stop()


@pytest.fixture
def s3(server):
    return make_client(server.endpoint)


@pytest.fixture
def bucket(s3):
    s3.create_bucket(Bucket="test-bucket")
    return "test-bucket"


@pytest.fixture
def aws(server, tmp_path):
    """Runs the aws CLI against the server with its default settings."""
    exe = shutil.which("aws")
    if exe is None:
        pytest.fail("the aws CLI is not installed: run the README's test command, which installs it")
    env = dict(os.environ)
    env.update(
        {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
        }
    )

    def run(*args, check=True, timeout=120):
        result = subprocess.run([exe, "--endpoint-url", server.endpoint, *args], env=env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"aws {' '.join(args)} failed: {result.stderr}")
        return result

    return run
