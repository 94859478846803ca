"""Property: with identity = "posix", for random trees of files with random owners and modes,
every S3 operation a user attempts succeeds exactly when the same operation by that user's
shell (a process running with the user's uid and groups) would.

Two identical trees are made per example: the gateway serves one, the shell works on the twin,
so operations that change the tree (PUT, DELETE) are compared without one disturbing the other."""

import grp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Server, make_client
from test_identity import SECRET, USERS, code_of, config_text, traversable_root, unix  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users and switches identities (CI runs as root)")

ACTORS = ["alice", "bob", "carol"]

# What the shell does for each operation, run as the user (one process per user and tree).
SHELL = r"""
import json, os, sys
results = {}
for op, path, parent in json.loads(sys.argv[1]):
    try:
        if op == "get":
            with open(path, "rb") as f:
                f.read()
        elif op == "put":
            # A new file in an existing directory, then renamed over the name, as a careful
            # writer does (this also needs write access to the directory).
            tmp = os.path.join(parent, ".shell-tmp")
            with open(tmp, "wb") as f:
                f.write(b"new")
            os.rename(tmp, path)
        elif op == "delete":
            os.unlink(path)
        results[f"{op} {path}"] = "OK"
    except OSError:
        results[f"{op} {path}"] = "DENIED"
print(json.dumps(results))
"""

node = st.fixed_dictionaries(
    {
        "owner": st.sampled_from(ACTORS),
        "group_project": st.booleans(),
        "mode": st.sampled_from([0o600, 0o640, 0o644, 0o660, 0o666, 0o400]),
    }
)
dir_node = st.fixed_dictionaries(
    {
        "owner": st.sampled_from(ACTORS),
        "group_project": st.booleans(),
        "mode": st.sampled_from([0o700, 0o750, 0o755, 0o770, 0o775, 0o777, 0o711, 0o1777]),
    }
)
tree = st.fixed_dictionaries(
    {
        "dirs": st.lists(dir_node, min_size=1, max_size=3),
        "files": st.lists(st.tuples(st.integers(0, 3), node), min_size=1, max_size=6),
    }
)


@pytest.fixture(scope="module")
def gateway(unix):
    base, root = traversable_root("isthmus-property-")
    config = base / "isthmus.toml"
    config.write_text(config_text())
    srv = Server(root, extra_args=["--config", str(config)])
    clients = {u: make_client(srv.endpoint, u, SECRET) for u in ACTORS}
    yield base, root, unix, clients
    srv.stop()
    shutil.rmtree(base, ignore_errors=True)


def build(base: Path, spec, unix, project_gid):
    """Makes the tree; returns (relative file paths, relative directory paths)."""
    base.mkdir()
    os.chmod(base, 0o755)
    dirs = [""]
    for i, d in enumerate(spec["dirs"]):
        rel = f"d{i}"
        (base / rel).mkdir()
        dirs.append(rel)
    files = []
    for i, (where, f) in enumerate(spec["files"]):
        rel = os.path.join(dirs[where % len(dirs)], f"f{i}")
        path = base / rel
        path.write_bytes(b"old")
        owner = unix[f["owner"]]
        os.chown(path, owner.pw_uid, project_gid if f["group_project"] else owner.pw_gid)
        path.chmod(f["mode"])
        files.append(rel)
    for i, d in enumerate(spec["dirs"]):
        owner = unix[d["owner"]]
        os.chown(base / f"d{i}", owner.pw_uid, project_gid if d["group_project"] else owner.pw_gid)
        os.chmod(base / f"d{i}", d["mode"])
    return files, dirs[1:]


def shell_outcomes(user, twin: Path, ops):
    name = USERS[user]
    args = [[op, str(twin / rel), str((twin / rel).parent)] for op, rel in ops]
    out = subprocess.run(
        ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", sys.executable, "-c", SHELL, json.dumps(args)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    results = json.loads(out)
    return {(op, rel): results[f"{op} {twin / rel}"] for op, rel in ops}


counter = iter(range(1_000_000))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=tree, actor=st.sampled_from(ACTORS))
def test_s3_succeeds_exactly_when_the_shell_does(gateway, spec, actor):
    base, root, unix, clients = gateway
    project_gid = grp.getgrnam("isth-proj").gr_gid
    bucket = f"prop{next(counter)}"
    files, dirs = build(root / bucket, spec, unix, project_gid)
    build(base / f"twin-{bucket}", spec, unix, project_gid)
    client = clients[actor]
    # Reads first, then writes of new keys and replacements, then deletes (the shell's
    # twin sees the same sequence).
    ops = [("get", f) for f in files]
    ops += [("put", f) for f in files] + [("put", os.path.join(d, "new")) for d in dirs]
    ops += [("delete", f) for f in files]
    shell = shell_outcomes(actor, base / f"twin-{bucket}", ops)
    for op, rel in ops:
        if op == "get":
            got = code_of(client.get_object, Bucket=bucket, Key=rel)
        elif op == "put":
            got = code_of(client.put_object, Bucket=bucket, Key=rel, Body=b"new")
        else:
            got = code_of(client.delete_object, Bucket=bucket, Key=rel)
        s3 = "OK" if got == "OK" else ("DENIED" if got == "AccessDenied" else got)
        assert s3 == shell[(op, rel)], (actor, op, rel, spec)
    # Listing: a key is listed exactly when the shell can list every directory on its path
    # and read the file.
    listed = {o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])}
    remaining = [rel for rel in files if (root / bucket / rel).exists()]
    readable = shell_outcomes(actor, root / bucket, [("get", rel) for rel in remaining])
    for rel in remaining:
        parent = os.path.dirname(rel)
        parent_listable = parent == "" or shell_lists(actor, root / bucket / parent)
        expected = readable[("get", rel)] == "OK" and parent_listable
        assert (rel in listed) == expected, (actor, rel, spec)


def shell_lists(user, directory: Path) -> bool:
    name = USERS[user]
    return (
        subprocess.run(
            ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "ls", str(directory)], capture_output=True
        ).returncode
        == 0
    )
