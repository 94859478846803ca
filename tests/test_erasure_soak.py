"""A fault soak of an erasure-coded pool through the real gateway: eight clients write and read
their own keys for a bounded time while drives are taken away, given back, blanked (a replaced
disk) and, where loop mounts work, filled to the last byte, never more than the pool's parity
at once. Every read must return the bytes of a write that may be current (never torn, never
another key's, never an older acknowledged version), and at the end every acknowledged write
reads back byte-exact, still with two drives removed once the pool has healed.

CI runs it for ISTHMUS_SOAK_SECONDS (default 20); the long run is the same test with a larger
value (docs/operator/pools.md gives the figures of one)."""

import os
import random
import shutil
import subprocess
import threading
import time

import botocore.exceptions
import pytest

from conftest import Server, binary, make_client
from test_erasure_pool import BUCKET, body, check_body

SOAK_SECONDS = float(os.environ.get("ISTHMUS_SOAK_SECONDS", "20"))
CLIENTS = 8
KEYS_PER_CLIENT = 12
SIZES = [0, 700, 20_000, 100_000, 300_000]


def try_loop_mount(image, mount_point, size_mib):
    """Mounts a fresh ext4 image of `size_mib` MiB at `mount_point`; False when this machine
    cannot (not root, no loop devices)."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        return False
    subprocess.run(["truncate", "-s", f"{size_mib}M", str(image)], check=True)
    # 4 KiB blocks, as on a real disk (small images default to 1 KiB, where an object's
    # record does not fit one extended attribute).
    made = subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", str(image)], capture_output=True)
    mount_point.mkdir(parents=True, exist_ok=True)
    return made.returncode == 0 and subprocess.run(
        ["mount", "-o", "loop", str(image), str(mount_point)], capture_output=True
    ).returncode == 0


class Ledger:
    """What each key may hold: its last acknowledged version, and versions whose write failed
    after it (a failed write may or may not have been committed)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.possible = {}
        self.acknowledged = {}

    def attempt(self, key, version):
        with self.lock:
            self.possible.setdefault(key, set()).add(version)

    def acknowledge(self, key, version, size):
        with self.lock:
            self.possible[key] = {version}
            self.acknowledged[key] = (version, size)

    def check(self, key, data):
        check_body(key, data)
        version = int(data.split(b":", 3)[1])
        with self.lock:
            assert version in self.possible.get(key, set()), f"{key}: version {version} is not a current one"


def client_loop(endpoint, number, ledger, stop, stats, failures):
    s3 = make_client(endpoint)
    rng = random.Random(number)
    version = 0
    while not stop.is_set():
        key = f"c{number}/k{rng.randrange(KEYS_PER_CLIENT)}"
        try:
            if rng.random() < 0.5 or key not in ledger.acknowledged:
                version += 1
                size = rng.choice(SIZES)
                ledger.attempt(key, version)
                try:
                    s3.put_object(Bucket=BUCKET, Key=key, Body=body(key, version, size))
                except botocore.exceptions.ClientError as err:
                    stats["write errors"] += 1
                    stats.setdefault("write error codes", set()).add(err.response["Error"]["Code"])
                    continue
                ledger.acknowledge(key, version, size)
                stats["writes"] += 1
            else:
                try:
                    data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                except botocore.exceptions.ClientError as err:
                    stats["read errors"] += 1
                    stats.setdefault("read error codes", set()).add(err.response["Error"]["Code"])
                    continue
                if data:
                    ledger.check(key, data)
                stats["reads"] += 1
        except AssertionError as err:
            failures.append(str(err))
            stop.set()


def chaos_loop(root, drives, filled, stop, events):
    """Takes drives away and gives them back, blanks them, fills the mounted one. A drive that
    was away, blank or full has missed writes until the pool is healed (the operator's heal
    runs here while the clients go on), so it counts against the parity until then: never
    more than two drives (the pool's parity) are hurt at once."""
    rng = random.Random(int(os.environ.get("ISTHMUS_SOAK_SEED", "7")))
    away, behind = {}, set()
    full = None
    while not stop.wait(rng.uniform(0.4, 1.2)):
        hurt = set(away) | behind | ({full[0]} if full else set())
        event = rng.choice(["away", "back", "blank", "fill", "unfill", "heal"])
        whole = [i for i in range(len(drives)) if i not in hurt]
        if event == "away" and len(hurt) < 2:
            i = rng.choice(whole)
            away[i] = drives[i].with_name(f"away{i}")
            drives[i].rename(away[i])
        elif event == "back" and away:
            i = rng.choice(sorted(away))
            give_back(drives, i, away.pop(i))
            behind.add(i)
        elif event == "blank" and len(hurt) < 2:
            # A replaced disk: the old one is gone for good, an empty one takes its slot.
            i = rng.choice(whole)
            drives[i].rename(drives[i].with_name(f"old{i}-{time.monotonic_ns()}"))
            drives[i].mkdir()
            behind.add(i)
        elif event == "fill" and filled and full is None and len(hurt) < 2:
            i = rng.choice(whole)
            full = (i, drives[i].parent / "filler")
            with open(full[1], "wb") as out:
                try:
                    while True:
                        out.write(b"\0" * (1 << 20))
                        out.flush()
                except OSError:
                    pass
        elif event == "unfill" and full is not None:
            full[1].unlink()
            behind.add(full[0])
            full = None
        elif event == "heal" and behind:
            healed = subprocess.run([str(binary()), "heal", "ec", "--root", str(root)], capture_output=True,
                                    timeout=300)
            if healed.returncode == 0:
                behind -= set(range(len(drives))) - set(away)
        else:
            continue
        events.append(event)
    for i, old in away.items():
        give_back(drives, i, old)
    if full is not None:
        full[1].unlink()


def give_back(drives, i, old):
    """Puts drive `i` back in its slot, where nothing may have been made while it was away."""
    assert not drives[i].exists(), f"the gateway wrote where drive {i} was away: {list(drives[i].rglob('*'))[:5]}"
    old.rename(drives[i])


def guarded(target, failures):
    """Runs `target`, its exception a failure of the test."""

    def run(*args):
        try:
            target(*args)
        except Exception as err:  # noqa: BLE001 (reported, not swallowed)
            failures.append(f"{target.__name__}: {err!r}")

    return run


def test_no_acknowledged_write_is_lost_while_drives_come_and_go(tmp_path):
    root = tmp_path / "data"
    # Each drive a directory on a file system of its own (a loop-mounted ext4 image) where
    # this machine can mount, so one drive can be filled; plain directories otherwise.
    mounts = [tmp_path / f"disk{i}" for i in range(6)]
    filled = all(try_loop_mount(tmp_path / f"disk{i}.img", mounts[i], 96) for i in range(6))
    drives = [(mounts[i] if filled else tmp_path / "drives") / f"d{i}" for i in range(6)]
    (root / ".isthmus").mkdir(parents=True)
    (root / ".isthmus" / "pools.toml").write_text(
        '[[pool]]\nname = "ec"\nkind = "erasure"\ndata = 4\nparity = 2\nblock_size = "64KiB"\n'
        f"drives = [{', '.join(repr(str(d)) for d in drives)}]\n".replace("'", '"')
    )
    try:
        srv = Server(root)
        try:
            s3 = make_client(srv.endpoint)
            s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
            ledger, stop, failures, events = Ledger(), threading.Event(), [], []
            stats = {"writes": 0, "reads": 0, "write errors": 0, "read errors": 0}
            clients = [
                threading.Thread(target=guarded(client_loop, failures), args=(srv.endpoint, n, ledger, stop, stats, failures))
                for n in range(CLIENTS)
            ]
            chaos = threading.Thread(target=guarded(chaos_loop, failures), args=(root, drives, filled, stop, events))
            for thread in clients + [chaos]:
                thread.start()
            stop.wait(SOAK_SECONDS)
            stop.set()
            for thread in clients + [chaos]:
                thread.join(timeout=120)
            print(f"soak: {SOAK_SECONDS} s, {stats}, events {events}, filled drive: {filled}")
            assert not failures, failures
            assert stats["writes"] > 0 and stats["reads"] > 0 and len(events) > 3, (stats, events)
            # Within the pool's parity, reads never fail and writes only while a drive leaves.
            assert stats["read errors"] == 0, stats
            assert stats["write errors"] <= max(3, stats["writes"] // 50), stats
            heal = subprocess.run([str(binary()), "heal", "ec", "--root", str(root)], capture_output=True,
                                  text=True, timeout=300)
            assert heal.returncode == 0, heal.stderr
            for key, (version, size) in ledger.acknowledged.items():
                assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body(key, version, size), key
        finally:
            srv.stop()
        # Healed: any two drives may go and every acknowledged write still reads.
        for i in (0, 5):
            drives[i].rename(drives[i].with_name(f"gone{i}"))
        srv = Server(root)
        try:
            s3 = make_client(srv.endpoint)
            for key, (version, size) in ledger.acknowledged.items():
                assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body(key, version, size), key
        finally:
            srv.stop()
    finally:
        for mount in mounts:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)
