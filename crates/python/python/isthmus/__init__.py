"""Isthmus, in-process: S3 semantics (buckets, objects with ETags, ranged reads, ordered listing,
multipart uploads) on a POSIX directory, with no server and no HTTP. The same directory can be
served by `isthmus serve` at the same time.

    import isthmus
    store = isthmus.Store("/lustre/project/data")
    store.put_object("runs", "2026/result.h5", data)        # any contiguous buffer
    data = store.get_object("runs", "2026/result.h5")       # bytes
    with store.open_object("runs", "2026/big.h5") as r:    # any size, in pieces
        while chunk := r.read(1 << 20): ...
    store.put_stream("runs", "2026/big.h5", open("big.h5", "rb"))

    store = isthmus.connect("unix:///run/isthmus.sock")   # the node's gateway, no keys:
                                                           # the same calls, as your Unix user

Arrays (Zarr v3, numpy in and out, asynchronous region transfers): see `isthmus.array`.

Errors raise `isthmus.IsthmusError` with `args == (s3_code, message)`.
"""

from ._native import IsthmusError, Store, connect
from .array import Array, Location, Transfer, Transfers
from .remote import Gateway

__all__ = ["Array", "Gateway", "IsthmusError", "Location", "Store", "Transfer", "Transfers", "connect", "iter_objects"]


def iter_objects(store, bucket, prefix="", delimiter=None):
    """Every object (dict) and common prefix (str) under `prefix`, in key order, page by page."""
    marker = None
    while True:
        page = store.list_objects(bucket, prefix=prefix, delimiter=delimiter, start_after=marker)
        items = [(o["key"], o) for o in page["objects"]] + [(p, p) for p in page["common_prefixes"]]
        for _, item in sorted(items, key=lambda kv: kv[0].encode()):
            yield item
        if not page["is_truncated"]:
            return
        marker = page["next_marker"]
