# The Python half of `isthmus bench eqsim` (embedded in the binary, run with `python3 -c`):
#   generate PATH T X Y TC   writes the synthetic ground-motion file with h5py, as the
#                            simulation would: /vel (T, X, Y, 1) float32 in chunks of
#                            (TC, 32, 32, 1), gzip level 1 with shuffle; /lat and /lon (X, Y).
#   run                      reads a JSON plan on stdin and times the patterns on h5py (the
#                            baseline), h5py with a 1 GiB chunk cache, the gateway's
#                            server-side selection (HDF5 in place and the recommended Zarr
#                            layout) and zarr-python over S3 through the gateway; prints JSON.
import json
import statistics
import sys
import time

import numpy as np


def generate(path, t, x, y, tc):
    import h5py

    xs, ys = np.meshgrid(np.arange(x), np.arange(y), indexing="ij")
    r = np.hypot(xs - x / 3, ys - y / 2)
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        vel = f.create_dataset("vel", shape=(t, x, y, 1), dtype="f4", chunks=(tc, min(32, x), min(32, y), 1),
                               compression="gzip", compression_opts=1, shuffle=True)
        for t0 in range(0, t, tc):
            steps = np.arange(t0, min(t, t0 + tc))[:, None, None]
            # A wave leaving the epicentre, decaying with distance, with a little noise.
            block = np.sin(0.05 * steps - 0.15 * r) / (1 + 0.03 * r) + 0.01 * rng.standard_normal((len(steps), x, y))
            vel[t0:t0 + len(steps), :, :, 0] = block.astype("f4")
        chunks = (min(x, 128), min(y, 128))
        f.create_dataset("lat", data=37.0 + 0.001 * xs + 0.0001 * ys, chunks=chunks, compression="gzip")
        f.create_dataset("lon", data=-122.0 + 0.001 * ys - 0.0001 * xs, chunks=chunks, compression="gzip")
        f["vel"].attrs["units"] = "m/s"


def index_of(text):
    """`[a:b:c, i, ...]` as a numpy index."""
    parts = []
    for item in text.strip()[1:-1].split(","):
        item = item.strip()
        if ":" in item:
            parts.append(slice(*[int(v) if v else None for v in item.split(":")]))
        else:
            parts.append(int(item))
    return tuple(parts)


def check(kind, pattern, read):
    """Runs one pattern with `read(name, index)` -> ndarray and returns its check values."""
    if kind == "latlon":
        index = index_of(pattern["select"])
        lat, lon = read("lat", index), read("lon", index)
        return [float(lat.min()), float(lat.max()), float(lon.min()), float(lon.max())]
    a = read("vel", index_of(pattern["select"]))
    if kind == "where":
        hits = np.abs(a) > pattern["threshold"]
        return [int(hits.sum()), float(a[hits].sum(dtype=np.float64))]
    return [float(a.sum(dtype=np.float64)), int(a.size)]


def timed(plan, read):
    results = {}
    for pattern in plan["patterns"]:
        times, values = [], None
        for _ in range(plan["repeat"]):
            start = time.perf_counter()
            values = check(pattern["kind"], pattern, read)
            times.append(time.perf_counter() - start)
        results[pattern["name"]] = {"seconds": statistics.median(times), "check": values}
    return results


def gateway_reader(plan, key, dataset_of):
    import isthmus

    gw = isthmus.Gateway(plan["endpoint"], plan["access_key"], plan["secret_key"])

    def read(name, index):
        text = "[" + ",".join(f"{s.start if s.start is not None else ''}:{s.stop if s.stop is not None else ''}:{s.step or 1}"
                              if isinstance(s, slice) else str(s) for s in index) + "]"
        path, dataset = dataset_of(name)
        return gw.select(plan["bucket"], path, text, dataset=dataset)

    return read


def gateway_where(plan, path, dataset):
    """The threshold pattern as the gateway answers it: matches computed server-side."""
    import isthmus

    gw = isthmus.Gateway(plan["endpoint"], plan["access_key"], plan["secret_key"])

    def run(pattern):
        _, values = gw.where_all(plan["bucket"], path, f"abs(value)>{pattern['threshold']}", pattern["select"],
                                 dataset=dataset)
        return [int(len(values)), float(np.sum(values, dtype=np.float64))]

    return run


def run(plan):
    out = {}
    try:
        import h5py
    except ImportError as err:
        return {"error": f"h5py is needed for the baseline: {err}"}
    with h5py.File(plan["h5"], "r") as f:
        out["h5py"] = timed(plan, lambda name, index: f[name][index])
    with h5py.File(plan["h5"], "r", rdcc_nbytes=1 << 30, rdcc_nslots=1_000_003) as f:
        out["h5py, 1 GiB chunk cache"] = timed(plan, lambda name, index: f[name][index])
    try:
        import isthmus  # noqa: F401

        h5 = plan["h5_key"]
        rec = plan["zarr_recommended_key"]
        for label, reader, where in [
            ("gateway selection, HDF5 in place", gateway_reader(plan, h5, lambda n: (h5, f"/{n}")),
             gateway_where(plan, h5, "/vel")),
            ("gateway selection, Zarr recommended",
             gateway_reader(plan, rec, lambda n: (f"{rec}/{n}" if n == "vel" else f"{plan['zarr_key']}/{n}", None)),
             gateway_where(plan, f"{rec}/vel", None)),
        ]:
            results = timed({**plan, "patterns": [p for p in plan["patterns"] if p["kind"] != "where"]}, reader)
            for pattern in [p for p in plan["patterns"] if p["kind"] == "where"]:
                times, values = [], None
                for _ in range(plan["repeat"]):
                    start = time.perf_counter()
                    values = where(pattern)
                    times.append(time.perf_counter() - start)
                results[pattern["name"]] = {"seconds": statistics.median(times), "check": values}
            out[label] = results
    except ImportError as err:
        out["gateway selection"] = {"skipped": f"the isthmus Python package is not installed: {err}"}
    try:
        import zarr

        options = {"key": plan["access_key"], "secret": plan["secret_key"],
                   "client_kwargs": {"endpoint_url": plan["endpoint"], "region_name": "us-east-1"}}
        arrays = {name: zarr.open_array(f"s3://{plan['bucket']}/{plan['zarr_key']}/{name}", mode="r",
                                        storage_options=options) for name in ("vel", "lat", "lon")}
        out["zarr-python over S3 (gateway)"] = timed(plan, lambda name, index: arrays[name][index])
    except ImportError as err:
        out["zarr-python over S3 (gateway)"] = {"skipped": f"zarr and s3fs are needed: {err}"}
    return out


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2], *(int(v) for v in sys.argv[3:7]))
    else:
        print(json.dumps(run(json.load(sys.stdin))))
