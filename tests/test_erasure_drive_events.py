"""Drive events of an erasure-coded pool through the real gateway, on six loop-mounted ext4 file
systems (a 4+2 pool): a disk unmounted while serving (nothing lands in its empty mount point on
the parent's disk; mounted again it is used again), a full disk (every object whole or refused
with InsufficientStorage, no partial shard or temporary left, the full disk still serves
reads), a disk remounted read-only (reads and writes go on, the drive is used again once
read-write), and the gateway restarted with a disk missing. Skipped where loop mounts are
impossible (not root, no loop devices)."""

import errno
import os
import shutil
import subprocess
import time

import boto3.s3.transfer
import botocore.exceptions
import pytest

from conftest import Server, make_client, wait_until
from test_erasure_pool import BUCKET, body, cli, write_pools

IMAGE_MIB = 40


def run(*args):
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


class LoopPool:
    """Six ext4 images, each on a loop device mounted at a drive directory of a 4+2 pool."""

    def __init__(self, tmp_path):
        self.root = tmp_path / "data"
        self.drives = write_pools(self.root, tmp_path / "drives")
        self.images = [tmp_path / f"image{i}" for i in range(6)]
        self.devices = []
        self.servers = []
        for image, drive in zip(self.images, self.drives):
            with open(image, "wb") as f:
                f.truncate(IMAGE_MIB << 20)
            # No blocks reserved for root: the gateway (root here) meets ENOSPC when the disk is full.
            run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
            device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True,
                                    text=True, timeout=60).stdout.strip()
            self.devices.append(device)
            drive.mkdir(parents=True)
            self.mount(self.drives.index(drive))

    def mount(self, i):
        run("mount", self.devices[i], str(self.drives[i]))

    def umount(self, i, lazy=False):
        run("umount", *(["-l"] if lazy else []), str(self.drives[i]))

    def remount(self, i, mode):
        # A file open for writing makes a remount read-only busy for a moment: retry.
        deadline = time.monotonic() + 10
        while True:
            try:
                return run("mount", "-o", f"remount,{mode}", str(self.drives[i]))
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def start(self):
        server = Server(self.root)
        self.servers.append(server)
        return server

    def close(self):
        for server in self.servers:
            server.stop()
        for drive in self.drives:
            subprocess.run(["umount", "-l", str(drive)], capture_output=True)
        for device in self.devices:
            subprocess.run(["losetup", "-d", device], capture_output=True)


@pytest.fixture
def loops(tmp_path):
    if os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("mkfs.ext4", "losetup", "mount", "umount")):
        pytest.skip("loop mounts need root and mkfs.ext4, losetup, mount")
    pool = None
    try:
        pool = LoopPool(tmp_path)
    except (subprocess.CalledProcessError, OSError) as err:
        if pool is not None:
            pool.close()
        pytest.skip(f"loop mounts are not possible here: {getattr(err, 'stderr', None) or err}")
    try:
        yield pool
    finally:
        pool.close()


def put_all(s3, objects):
    for key, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)


def check_all(s3, objects):
    for key, data in objects.items():
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data, key


def shapes(prefix, version=1):
    return {f"{prefix}/{size}": body(f"{prefix}/{size}", version, size) for size in (3000, 70_000, 400_001, 1_500_000)}


def used_again(s3, drive, prefix):
    """Whether the gateway writes to `drive` again: a new object's record lands there."""
    n = [0]

    def landed():
        n[0] += 1
        key = f"{prefix}/{n[0]}"
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
        return (drive / BUCKET / key).exists()

    return wait_until(landed, timeout=10)


def make_bucket(s3):
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})


def whole_without(loops, lost, objects):
    """Heals the pool, then restarts the gateway with the drives `lost` unmounted: every object
    reads byte-exact from the others (so the drives kept carry their share)."""
    report = cli("heal", "ec", "--root", str(loops.root))
    assert "unreadable" not in report.stdout + report.stderr, report.stdout
    for server in loops.servers:
        server.stop()
    for i in lost:
        loops.umount(i)
    check_all(make_client(loops.start().endpoint), objects)


def test_a_disk_unmounted_while_serving_is_never_written_and_comes_back(loops):
    srv = loops.start()
    s3 = make_client(srv.endpoint)
    make_bucket(s3)
    objects = shapes("before")
    put_all(s3, objects)
    # Unmounted while the gateway holds it open (lazily, as a busy disk is): its mount point
    # is now an empty directory on the parent's disk.
    loops.umount(2, lazy=True)
    away = shapes("away")
    put_all(s3, away)
    big = body("away/multipart", 1, 11 << 20)
    config = boto3.s3.transfer.TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    s3.upload_fileobj(__import__("io").BytesIO(big), BUCKET, "away/multipart", Config=config)
    away["away/multipart"] = big
    s3.create_bucket(Bucket="ec-second", CreateBucketConfiguration={"LocationConstraint": "ec"})
    objects.update(away)
    check_all(s3, objects)
    assert wait_until(lambda: "not mounted" in srv.output(), timeout=5), srv.output()[-3000:]
    assert os.listdir(loops.drives[2]) == [], "written into the empty mount point on the parent's disk"
    # Mounted again: used again, and once healed it carries what it missed.
    loops.mount(2)
    assert used_again(s3, loops.drives[2], "probe"), "the drive was not used again"
    check_all(s3, objects)
    whole_without(loops, [0, 5], objects)


def fill(drive, leave=0):
    """Fills the file system of `drive` (again), leaving about `leave` bytes free."""
    (drive / "filler").unlink(missing_ok=True)
    reserve = drive / "reserve"
    if leave:
        reserve.write_bytes(b"\0" * leave)
    fd = os.open(drive / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        size = 1 << 20
        while size >= 512:
            try:
                os.write(fd, b"\xff" * size)
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
                size //= 2
        os.fsync(fd)
    finally:
        os.close(fd)
    if leave:
        reserve.unlink()


def pool_files(drive):
    """The pool's files on a drive: shards, records of uploads, temporaries anywhere."""
    return sorted(str(p.relative_to(drive)) for p in drive.rglob("*") if p.is_file() and "filler" not in p.name)


def test_a_full_disk_leaves_objects_whole_or_refused(loops):
    srv = loops.start()
    s3 = make_client(srv.endpoint)
    make_bucket(s3)
    objects = shapes("before", 1) | {f"before/{i}": body(f"before/{i}", 1, 200_000 + i) for i in range(6)}
    put_all(s3, objects)
    full = loops.drives[1]
    # Records late on a drive finish in the background: the pool settles before the drive fills.
    assert wait_until(lambda: all((d / BUCKET / k).exists() for d in loops.drives for k in objects), timeout=10)
    fill(full)
    before = pool_files(full)
    # One drive full: writes go on with the quorum; nothing of them stays on the full drive.
    later = shapes("full")
    put_all(s3, later)
    objects.update(later)
    assert wait_until(lambda: pool_files(full) == before, timeout=10), set(pool_files(full)) ^ set(before)
    # Room for part of a shard only: the drive fills in the middle of the object's shard.
    fill(full, leave=300 << 10)
    mid = {"mid": body("mid", 1, 4 << 20)}
    put_all(s3, mid)
    objects.update(mid)
    check_all(s3, objects)
    assert "No space left" in srv.output(), "the drive did not fill during the write"
    # Every shard on the full drive is whole (as long as its siblings on a drive with room);
    # the healer may have rebuilt some into the room left, never halfway.
    assert wait_until(lambda: not any(".heal." in f or ".tmp" in f for f in pool_files(full)), timeout=10)
    shards = full / ".isthmus" / "ec" / "data" / BUCKET
    for shard in shards.iterdir():
        sibling = loops.drives[0] / ".isthmus" / "ec" / "data" / BUCKET / shard.name
        assert shard.stat().st_size == sibling.stat().st_size, f"{shard.name}: a partial shard"
    # Three drives full: fewer than the write quorum have room; a write is refused with
    # InsufficientStorage and the object stays as it was.
    for drive in loops.drives[1:4]:
        fill(drive)
    for key in ("before/3000", "before/400001"):
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            s3.put_object(Bucket=BUCKET, Key=key, Body=body(key, 2, len(objects[key])))
        assert refused.value.response["Error"]["Code"] == "InsufficientStorage", refused.value.response
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 507
    for _ in range(5):
        check_all(s3, objects)
    for drive in loops.drives[1:4]:
        leftovers = [f for f in pool_files(drive) if ".tmp" in f or ".heal." in f]
        assert leftovers == [], leftovers
    # The full drives still serve reads, also after a restart: with two others gone, the
    # objects written before the drives filled (a shard on each) read whole from them.
    for server in loops.servers:
        server.stop()
    loops.umount(0)
    loops.umount(5)
    check_all(make_client(loops.start().endpoint), {k: v for k, v in objects.items() if k.startswith("before/")})


def logged_states(srv, drive):
    """The states the gateway's log gave `drive`, in order."""
    lines = [line for line in srv.output().splitlines() if str(drive) in line and 'state="' in line]
    return [line.split('state="')[1].split('"')[0] for line in lines]


def test_a_disk_remounted_read_only_serves_reads_and_writes_go_on(loops):
    srv = loops.start()
    s3 = make_client(srv.endpoint)
    make_bucket(s3)
    objects = shapes("before")
    put_all(s3, objects)
    ro = loops.drives[3]
    loops.remount(3, "ro")
    later = shapes("read-only")
    put_all(s3, later)
    objects.update(later)
    check_all(s3, objects)
    assert wait_until(lambda: logged_states(srv, ro)[-1:] == ["read-only"], timeout=5), srv.output()[-3000:]
    assert not (ro / BUCKET / "read-only").exists()
    # Restarted while read-only, with two other drives gone: the read-only drive serves the
    # shards it holds.
    srv.stop()
    loops.umount(0)
    loops.umount(1)
    srv = loops.start()
    check_all(make_client(srv.endpoint), {k: v for k, v in objects.items() if k.startswith("before/")})
    assert logged_states(srv, ro)[-1:] == ["read-only"], srv.output()[-3000:]
    srv.stop()
    loops.mount(0)
    loops.mount(1)
    # Read-write again: writes reach the drive again within a recheck.
    srv = loops.start()
    s3 = make_client(srv.endpoint)
    loops.remount(3, "rw")
    assert used_again(s3, ro, "probe"), "the drive was not written again"
    assert wait_until(lambda: logged_states(srv, ro)[-2:] == ["read-only", "online"], timeout=5), srv.output()
    check_all(s3, objects)
    whole_without(loops, [0, 1], objects)


def test_the_gateway_restarted_with_a_disk_missing_serves_and_takes_it_back(loops):
    srv = loops.start()
    s3 = make_client(srv.endpoint)
    make_bucket(s3)
    objects = shapes("before")
    put_all(s3, objects)
    srv.stop()
    loops.umount(4)
    s3 = make_client(loops.start().endpoint)
    check_all(s3, objects)
    later = shapes("missing")
    put_all(s3, later)
    objects.update(later)
    check_all(s3, objects)
    assert os.listdir(loops.drives[4]) == [], "the unmounted disk's mount point was written"
    loops.mount(4)
    assert used_again(s3, loops.drives[4], "probe"), "the drive was not used again"
    whole_without(loops, [0, 1], objects)
