#!/usr/bin/env python3
"""Soak test: many workers doing mixed PUT/GET/DELETE/LIST with every byte read back checked
against what was written. Prints operations, errors, data losses and the server's RSS
high-water mark. Runs standalone for minutes (it starts its own server):

    python3 tests/soak.py --minutes 5 --workers 8

and briefly inside the test suite (test_soak.py)."""

import argparse
import hashlib
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from botocore.exceptions import ClientError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import Server, make_client  # noqa: E402


def payload(key, version, size):
    seed = hashlib.sha256(f"{key}/{version}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def worker(endpoint, bucket, index, deadline, stats, lock, rng):
    s3 = make_client(endpoint)
    known = {}  # key -> (version, size): what this worker last wrote and was acknowledged
    version = 0
    counts = {"put": 0, "get": 0, "delete": 0, "list": 0, "errors": 0, "losses": 0, "bytes": 0}
    first_error = None
    while time.time() < deadline:
        op = rng.choices(["put", "get", "delete", "list"], weights=[4, 4, 1, 1])[0]
        key = f"w{index}/k{rng.randrange(40)}"
        try:
            if op == "put":
                version += 1
                size = rng.choice([0, 1, 4096, 100_000, 1_500_000, 6_000_000])
                s3.put_object(Bucket=bucket, Key=key, Body=payload(key, version, size))
                known[key] = (version, size)
                counts["bytes"] += size
            elif op == "get":
                try:
                    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                    expected = known.get(key)
                    if expected is None or body != payload(key, *expected):
                        counts["losses"] += 1
                    counts["bytes"] += len(body)
                except ClientError as exc:
                    if exc.response["Error"]["Code"] != "NoSuchKey":
                        raise
                    if key in known:
                        counts["losses"] += 1
            elif op == "delete":
                s3.delete_object(Bucket=bucket, Key=key)
                known.pop(key, None)
            else:
                listed = set()
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"w{index}/", PaginationConfig={"PageSize": 7}):
                    listed.update(o["Key"] for o in page.get("Contents", []))
                if listed != set(known):
                    counts["losses"] += 1
            counts[op] += 1
        except Exception as exc:  # noqa: BLE001 - counted and reported
            counts["errors"] += 1
            first_error = first_error or repr(exc)
    with lock:
        for k, v in counts.items():
            stats[k] = stats.get(k, 0) + v
        if first_error and "first_error" not in stats:
            stats["first_error"] = first_error


def soak(seconds, workers, seed=1):
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", extra_args=["--durability", "relaxed"])
        try:
            make_client(server.endpoint).create_bucket(Bucket="soak")
            stats, lock = {}, threading.Lock()
            deadline = time.time() + seconds
            threads = [threading.Thread(target=worker, args=(server.endpoint, "soak", i, deadline, stats, lock, random.Random(seed + i))) for i in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stats["rss_peak_mib"] = server.rss_peak_kib() / 1024
            stats["alive"] = server.proc.poll() is None
            return stats
        finally:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    stats = soak(args.minutes * 60, args.workers)
    ops = sum(stats.get(k, 0) for k in ("put", "get", "delete", "list"))
    print(f"operations={ops} put={stats.get('put', 0)} get={stats.get('get', 0)} delete={stats.get('delete', 0)} list={stats.get('list', 0)}")
    print(f"bytes={stats.get('bytes', 0)} errors={stats.get('errors', 0)} data_losses={stats.get('losses', 0)} rss_peak_mib={stats['rss_peak_mib']:.1f}")
    if stats.get("first_error"):
        print("first error:", stats["first_error"])
    sys.exit(0 if stats.get("errors", 0) == 0 and stats.get("losses", 0) == 0 else 1)


if __name__ == "__main__":
    main()
