"""Zarr v3 arrays through Isthmus, with numpy in and out.

    import numpy as np, isthmus
    store = isthmus.Store("/lustre/project/data")          # or isthmus.connect("unix:///...")
    where = isthmus.Location.engine(store, "runs", prefix="2026")
    a = isthmus.Array.create(where, "vel.zarr", shape=(100, 64, 64), dtype="float32",
                             chunks=(10, 64, 64), codecs="zstd:3")
    a[0:10] = np.ones((10, 64, 64), np.float32)             # region write
    block = a[0:10, ::4, ::4]                               # region read (strided), numpy out

    far = isthmus.Location.remote("http://other-site:9000", "bucket", key, secret)
    session = isthmus.Transfers(consistency="session")     # asynchronous regions
    t = session.write(a, block, offset=(0, 0, 0), stride=(1, 4, 4))
    ...compute...
    t.wait()                                               # visible from here on

The array is at once plain files (`runs/2026/vel.zarr/zarr.json`, `c/0/0/0`...) that
zarr-python reads from the path, and objects any Zarr client reads over S3.
"""

import json

import numpy as np

from . import _native

__all__ = ["Array", "Location", "Transfer", "Transfers"]

Location = _native.Location


def _region(shape, key):
    """offset, count, stride of a numpy-style index (ints and slices with positive steps)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - len(key) + 1) + key[at + 1 :]
    if len(key) > len(shape):
        raise IndexError(f"{len(key)} indices for {len(shape)} dimensions")
    key = key + (slice(None),) * (len(shape) - len(key))
    offset, count, stride, squeeze = [], [], [], []
    for dim, (k, extent) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            start, stop, step = k.indices(extent)
            if step < 1:
                raise IndexError("steps must be positive")
            offset.append(start)
            count.append(max(0, (stop - start + step - 1) // step))
            stride.append(step)
        else:
            index = int(k)
            if index < 0:
                index += extent
            if not 0 <= index < extent:
                raise IndexError(f"index {k} is outside dimension {dim} of extent {extent}")
            offset.append(index)
            count.append(1)
            stride.append(1)
            squeeze.append(dim)
    return offset, count, stride, tuple(squeeze)


class Array:
    """A Zarr v3 array on an Isthmus engine or a remote S3 endpoint."""

    def __init__(self, native):
        self._native = native
        self.dtype = np.dtype(native.dtype)

    @classmethod
    def create(cls, location, path, shape, dtype, chunks, codecs="", inner_chunks=None,
               fill_value=None, attributes=None, dimension_names=None):
        """A new array. `codecs`: "zstd:3", "gzip:5", "blosc:lz4:5:shuffle", "crc32c", comma-
        separated (or a list); `inner_chunks` makes each chunk a shard of inner chunks."""
        if not isinstance(codecs, str):
            codecs = ",".join(codecs)
        native = _native.Array.create(
            location, path, list(shape), np.dtype(dtype).str, list(chunks), codecs,
            list(inner_chunks) if inner_chunks is not None else None,
            None if fill_value is None else float(fill_value),
            json.dumps(attributes or {}),
            list(dimension_names) if dimension_names is not None else None,
        )
        return cls(native)

    @classmethod
    def open(cls, location, path):
        return cls(_native.Array.open(location, path))

    @property
    def shape(self):
        return tuple(self._native.shape)

    @property
    def ndim(self):
        return len(self._native.shape)

    @property
    def chunks(self):
        return tuple(self._native.chunks)

    @property
    def attrs(self):
        return json.loads(self._native.attributes)

    @property
    def metadata(self):
        return json.loads(self._native.metadata)

    def read(self, offset=None, count=None, stride=None, out=None):
        """The region as a numpy array (into `out` when given)."""
        offset = list(offset) if offset is not None else [0] * self.ndim
        count = list(count) if count is not None else [e - o for e, o in zip(self.shape, offset)]
        if out is None:
            out = np.empty(count, dtype=self.dtype)
        self._native.read_into(offset, count, out, list(stride) if stride is not None else None)
        return out

    def write(self, data, offset=None, stride=None):
        """Writes `data` (its shape is the region's count) at `offset`."""
        data = np.ascontiguousarray(data, dtype=self.dtype)
        offset = list(offset) if offset is not None else [0] * self.ndim
        self._native.write(offset, list(data.shape), data, list(stride) if stride is not None else None)

    def allocate_shards(self):
        """Creates every missing shard of an array of uncompressed shards (`inner_chunks` and
        no codecs) now, so every later region write goes in place into an existing file; the
        number created. Other arrays refuse it."""
        return self._native.allocate_shards()

    def __getitem__(self, key):
        offset, count, stride, squeeze = _region(self.shape, key)
        out = self.read(offset, count, stride)
        return out.squeeze(axis=squeeze) if squeeze else out

    def __setitem__(self, key, value):
        offset, count, stride, _ = _region(self.shape, key)
        data = np.broadcast_to(np.asarray(value, dtype=self.dtype), count)
        self.write(data, offset, stride)

    def __repr__(self):
        return f"<isthmus.Array {self._native.path} shape={self.shape} dtype={self.dtype} chunks={self.chunks}>"


class Transfer:
    """One region moving between a numpy buffer and an array (PDC-style): `start()` returns at
    once for session consistency (a write's buffer is copied, so it may be reused), `wait()`
    makes a write visible or fills a read's buffer."""

    def __init__(self, session, native, buffer):
        self._session = session
        self._native = native
        self.buffer = buffer

    def start(self):
        self._session.start_all([self])
        return self

    def status(self):
        return self._session._native.status(self._native)

    def wait(self):
        self._session._native.wait(self._native, None if self._native.is_write else self.buffer)
        return self.buffer


class Transfers:
    """A transfer session: `buffer_bytes` bounds the memory of copies and reads in flight
    (`start` waits when it is full), `threads` the chunk I/O pool; `consistency` is "session"
    (visible after wait) or "strong" (visible when start returns)."""

    def __init__(self, buffer_bytes=None, threads=None, consistency="session"):
        self._native = _native.Transfers(buffer_bytes, threads, consistency)

    def create(self, array, direction, buffer=None, offset=None, count=None, stride=None, consistency=None):
        """A transfer of a region; a read fills `buffer` (allocated when None), a write sends it."""
        offset = list(offset) if offset is not None else [0] * array.ndim
        if direction == "write":
            buffer = np.ascontiguousarray(buffer, dtype=array.dtype)
            count = list(buffer.shape)
        else:
            if count is None:
                count = list(buffer.shape) if buffer is not None else [e - o for e, o in zip(array.shape, offset)]
            if buffer is None:
                buffer = np.empty(count, dtype=array.dtype)
        native = self._native.create(array._native, direction, offset, list(count),
                                     list(stride) if stride is not None else None, consistency)
        return Transfer(self, native, buffer)

    def read(self, array, offset=None, count=None, stride=None, out=None, consistency=None):
        """Creates and starts a read."""
        return self.create(array, "read", out, offset, count, stride, consistency).start()

    def write(self, array, data, offset=None, stride=None, consistency=None):
        """Creates and starts a write."""
        return self.create(array, "write", data, offset, None, stride, consistency).start()

    def start_all(self, transfers):
        """Starts a batch: small regions are merged chunk by chunk into fewer, larger I/Os."""
        self._native.start_all([(t._native, t.buffer if t._native.is_write else None) for t in transfers])

    def wait_all(self, transfers):
        errors = []
        for t in transfers:
            try:
                t.wait()
            except Exception as err:  # every transfer is waited for; the first error is raised
                errors.append(err)
        if errors:
            raise errors[0]

    def flush(self):
        """Waits until every session write is visible."""
        self._native.flush()

    @property
    def buffer_peak(self):
        return self._native.buffer_peak

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.flush()
