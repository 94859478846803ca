#!/usr/bin/env python3
"""Duality at scale: list fresh POSIX-written files of 10 GiB (sparse) page by page over S3, and
measure the p99 of small HEADs alone and while large foreign files are listed, read and HEADed
by other clients. Starts its own gateway on 127.0.0.1 over a temporary root.

    python3 bench/foreign_files.py [--files 1000] [--heads 2000] [--binary target/release/isthmus]
"""

import argparse
import os
import statistics
import sys
import tempfile
import multiprocessing
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import Server, make_client  # noqa: E402


def p99(samples):
    return statistics.quantiles(samples, n=100)[98]


def head_latencies(s3, bucket, key, count):
    out = []
    for _ in range(count):
        t = time.perf_counter()
        s3.head_object(Bucket=bucket, Key=key)
        out.append(time.perf_counter() - t)
    return out


def busy(endpoint, out, stop, kind, n):
    """One load client (its own process, so the measuring client keeps its GIL): makes fresh
    large foreign files and lists, reads or HEADs them."""
    client = make_client(endpoint)
    i = 0
    while not stop.is_set():
        name = out / f"fresh-{kind}-{n}-{i}.h5"
        with open(name, "wb") as f:
            f.truncate(10 << 30)
        key = f"run1/{name.name}"
        if kind == "list":
            client.list_objects_v2(Bucket="sim", Prefix="run1/", MaxKeys=1000)
        elif kind == "get":
            client.get_object(Bucket="sim", Key=key, Range="bytes=0-1048575")["Body"].read()
        else:
            client.head_object(Bucket="sim", Key=key)
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--heads", type=int, default=2000)
    ap.add_argument("--binary", default=None)
    ap.add_argument("--loaders", type=int, default=1, help="load processes per kind (list, get, head)")
    args = ap.parse_args()
    if args.binary:
        os.environ["ISTHMUS_BIN"] = args.binary
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(Path(tmp) / "data")
        try:
            s3 = make_client(srv.endpoint)
            s3.create_bucket(Bucket="sim")
            s3.put_object(Bucket="sim", Key="small", Body=b"x" * 4096)
            out = srv.root / "sim" / "run1"
            out.mkdir()
            for i in range(args.files):
                with open(out / f"field-{i:05}.h5", "wb") as f:
                    f.truncate(10 << 30)
            # Listing page by page (1000 keys a page, as clients page by default), first time;
            # the time includes botocore parsing the XML of each page.
            started = time.perf_counter()
            keys, token = 0, None
            while True:
                kw = {"ContinuationToken": token} if token else {}
                page = s3.list_objects_v2(Bucket="sim", Prefix="run1/", MaxKeys=1000, **kw)
                keys += page.get("KeyCount", 0)
                if not page.get("IsTruncated"):
                    break
                token = page["NextContinuationToken"]
            elapsed = time.perf_counter() - started
            print(f"list {keys} fresh 10 GiB sparse files: {elapsed:.3f} s, {keys / elapsed:,.0f} keys/s")
            # Small HEADs alone, then with large foreign files listed, read and HEADed.
            idle = head_latencies(s3, "sim", "small", args.heads)
            stop = multiprocessing.Event()
            loaders = [
                multiprocessing.Process(target=busy, args=(srv.endpoint, out, stop, k, n))
                for n in range(args.loaders)
                for k in ("list", "get", "head")
            ]
            for t in loaders:
                t.start()
            time.sleep(1)
            loaded = head_latencies(s3, "sim", "small", args.heads)
            stop.set()
            for t in loaders:
                t.join()
            a, b = p99(idle) * 1e3, p99(loaded) * 1e3
            print(f"small HEAD p99: alone {a:.2f} ms, with {3 * args.loaders} clients on large foreign files {b:.2f} ms ({b / a:.2f}x)")
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
