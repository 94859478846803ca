#!/usr/bin/env python3
"""Duality at scale: list fresh POSIX-written files of 10 GiB (sparse) page by page over S3, and
measure the p99 of small HEADs alone and while large foreign files are listed, read and HEADed
by other clients. Starts its own gateway on 127.0.0.1 over a temporary root.

    python3 bench/foreign_files.py [--files 1000] [--heads 2000] [--loaders 1] [--rate 0]
                                   [--binary target/release/isthmus]
"""

import argparse
import http.client
import os
import re
import statistics
import sys
import tempfile
import multiprocessing
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import ACCESS_KEY, SECRET_KEY, Server, make_client  # noqa: E402
from sigv4 import signed_get  # noqa: E402


def p99(samples):
    return statistics.quantiles(samples, n=100)[98]


def head_latencies(s3, raw, bucket, key, count):
    """HEAD latencies of one small object, through boto3 and through a client that does not
    parse (closer to what the gateway itself takes), alternating."""
    boto, direct = [], []
    for _ in range(count):
        t = time.perf_counter()
        s3.head_object(Bucket=bucket, Key=key)
        boto.append(time.perf_counter() - t)
        t = time.perf_counter()
        raw.request("HEAD", f"/{bucket}/{key}")
        direct.append(time.perf_counter() - t)
    return boto, direct


class RawClient:
    """Signed requests over one keep-alive connection, without an SDK's parsing: the load and
    the listing measure the gateway, not the client's XML handling."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.conn = http.client.HTTPConnection(endpoint.split("://", 1)[1])

    def request(self, method, path, query=None, headers=None):
        url, signed = signed_get(self.endpoint, ACCESS_KEY, SECRET_KEY, path, query or {}, method)
        self.conn.request(method, url.split(self.endpoint, 1)[1], headers={**signed, **(headers or {})})
        response = self.conn.getresponse()
        body = response.read()
        assert response.status in (200, 206), (response.status, body[:500])
        return body

    def list_all(self, bucket, prefix, page_size):
        """Lists page by page; returns the number of keys."""
        keys, token = 0, None
        while True:
            query = {"list-type": "2", "prefix": prefix, "max-keys": page_size}
            if token:
                query["continuation-token"] = token
            body = self.request("GET", f"/{bucket}", query)
            keys += body.count(b"<Key>")
            if b"<IsTruncated>true</IsTruncated>" not in body:
                return keys
            token = re.search(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>", body).group(1).decode()


def make_fresh_files(out, names):
    for name in names:
        with open(out / name, "wb") as f:
            f.truncate(10 << 30)


def busy(endpoint, out, stop, kind, n, rate):
    """One load client (its own process, so the measuring client keeps its GIL): makes fresh
    large foreign files and lists, reads or HEADs them, `rate` times a second (0: as fast as it
    can, which on a small machine measures the clients' CPU more than the gateway)."""
    client = RawClient(endpoint)
    if rate:
        # Paced clients yield the CPU to the measuring client and the gateway when they have to
        # compete: on a shared small machine they stand in for clients on other hosts.
        os.nice(19)
    i = 0
    next_at = time.perf_counter()
    while not stop.is_set():
        if rate:
            next_at += 1 / rate
            time.sleep(max(0.0, next_at - time.perf_counter()))
        name = out / f"fresh-{kind}-{n}-{i}.h5"
        with open(name, "wb") as f:
            f.truncate(10 << 30)
        key = f"run1/{name.name}"
        if kind == "list":
            client.list_all("sim", "run1/", 1000)
        elif kind == "get":
            client.request("GET", f"/sim/{key}", headers={"Range": "bytes=0-1048575"})
        else:
            client.request("HEAD", f"/sim/{key}")
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--heads", type=int, default=2000)
    ap.add_argument("--binary", default=None)
    ap.add_argument("--loaders", type=int, default=1, help="load processes per kind (list, get, head)")
    ap.add_argument("--rate", type=float, default=0, help="operations a second per load process (0: unpaced)")
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
            make_fresh_files(out, [f"field-{i:05}.h5" for i in range(args.files)])
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
            print(f"list {keys} fresh 10 GiB sparse files with boto3: {elapsed:.3f} s, {keys / elapsed:,.0f} keys/s")
            # The same with a client that does not parse: each round lists files no request saw.
            for page_size in (1000, 100):
                for round_ in range(3):
                    fresh = out.parent / f"run{page_size}-{round_}"
                    fresh.mkdir()
                    make_fresh_files(fresh, [f"field-{i:05}.h5" for i in range(args.files)])
                    started = time.perf_counter()
                    keys = RawClient(srv.endpoint).list_all("sim", f"{fresh.name}/", page_size)
                    elapsed = time.perf_counter() - started
                    print(
                        f"list {keys} fresh 10 GiB sparse files, {page_size} a page, raw HTTP: "
                        f"{elapsed:.3f} s, {keys / elapsed:,.0f} keys/s"
                    )
            # Small HEADs alone, then with large foreign files listed, read and HEADed.
            raw = RawClient(srv.endpoint)
            idle = head_latencies(s3, raw, "sim", "small", args.heads)
            stop = multiprocessing.Event()
            loaders = [
                multiprocessing.Process(target=busy, args=(srv.endpoint, out, stop, k, n, args.rate))
                for n in range(args.loaders)
                for k in ("list", "get", "head")
            ]
            for t in loaders:
                t.start()
            time.sleep(1)
            loaded = head_latencies(s3, raw, "sim", "small", args.heads)
            stop.set()
            for t in loaders:
                t.join()
            pace = f"{args.rate:g} ops/s each" if args.rate else "unpaced"
            for name, alone, busy_ in (("boto3", idle[0], loaded[0]), ("raw HTTP", idle[1], loaded[1])):
                a, b = p99(alone) * 1e3, p99(busy_) * 1e3
                m, n = statistics.median(alone) * 1e3, statistics.median(busy_) * 1e3
                print(
                    f"small HEAD p99 ({name}): alone {a:.2f} ms, with {3 * args.loaders} clients ({pace}) on large "
                    f"foreign files {b:.2f} ms ({b / a:.2f}x); median {m:.2f} -> {n:.2f} ms"
                )
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
