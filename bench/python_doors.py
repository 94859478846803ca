#!/usr/bin/env python3
"""4 KiB PUT and GET from Python through every door, in one run, as ratios to raw POSIX:
raw POSIX from Python (temporary file + write + rename; open + read), the native `isthmus`
API, the boto3 drop-in (in-process), and the same boto3 code over HTTP to a gateway.

    python3 bench/python_doors.py [--seconds 3] [--dir /path/on/fs]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import isthmus  # noqa: E402
import isthmus.boto3  # noqa: E402
from conftest import Server, make_client  # noqa: E402

DATA = os.urandom(4096)


KEYS = 200


def rate(seconds, op):
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or n < KEYS:
        op(n)
        n += 1
    return n / (time.perf_counter() - start)


def posix_ops(root):
    d = Path(root) / "posix"
    d.mkdir(parents=True, exist_ok=True)

    def put(n):
        tmp = d / f".tmp{n}"
        with open(tmp, "wb") as f:
            f.write(DATA)
        os.rename(tmp, d / f"k{n % KEYS}")

    def get(n):
        with open(d / f"k{n % KEYS}", "rb") as f:
            f.read()

    return put, get


def s3_ops(s3, bucket):
    def put(n):
        s3.put_object(Bucket=bucket, Key=f"k{n % KEYS}", Body=DATA)

    def get(n):
        s3.get_object(Bucket=bucket, Key=f"k{n % KEYS}")["Body"].read()

    return put, get


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp) / "data"
        store = isthmus.Store(str(root), durability="relaxed")
        store.create_bucket("native")

        def nput(n):
            store.put_object("native", f"k{n % KEYS}", DATA)

        def nget(n):
            store.get_object("native", f"k{n % KEYS}")

        drop_in = isthmus.boto3.client(str(root), store=store)
        drop_in.create_bucket(Bucket="dropin")
        server = Server(root, extra_args=["--durability", "relaxed"])
        try:
            http = make_client(server.endpoint)
            http.create_bucket(Bucket="overhttp")
            doors = [("posix (Python)", posix_ops(tmp)), ("native API", (nput, nget)), ("boto3 drop-in", s3_ops(drop_in, "dropin")), ("boto3 over HTTP", s3_ops(http, "overhttp"))]
            results = {}
            for name, (put, get) in doors:
                put_rate = rate(args.seconds, put)
                get_rate = rate(args.seconds, get)
                results[name] = (put_rate, get_rate)
        finally:
            server.stop()
    base = results["posix (Python)"]
    print(f"{'door':18} {'PUT ops/s':>10} {'vs POSIX':>9} {'GET ops/s':>10} {'vs POSIX':>9}")
    for name, (p, g) in results.items():
        print(f"{name:18} {p:10.0f} {p / base[0]:9.1%} {g:10.0f} {g / base[1]:9.1%}")
    d, h = results["boto3 drop-in"], results["boto3 over HTTP"]
    print(f"boto3 drop-in vs HTTP: PUT x{d[0] / h[0]:.1f}, GET x{d[1] / h[1]:.1f}")


if __name__ == "__main__":
    main()
