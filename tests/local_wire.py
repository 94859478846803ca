"""A raw peer of the local door, for tests that play a hostile local process without the
isthmus Python module: the handshake, frames of MessagePack as the gateway's rmp_serde writes
them (structs as maps, enums as {"Variant": fields}, unit variants as strings), body chunks, and
every descriptor the gateway passes with a reply (SCM_RIGHTS), kept for the test to use."""

import array
import os
import socket
import struct

MAGIC = b"ISTHMUS\0"
END = 0


def pack(value) -> bytes:
    """MessagePack of None, bool, int (>= 0), str, bytes, list/tuple and dict."""
    if value is None:
        return b"\xc0"
    if value is True or value is False:
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative integers are not needed here")
        for limit, head, fmt in ((0x7F, None, None), (0xFF, b"\xcc", ">B"), (0xFFFF, b"\xcd", ">H"),
                                 (0xFFFFFFFF, b"\xce", ">I"), (2**64 - 1, b"\xcf", ">Q")):
            if value <= limit:
                return bytes([value]) if head is None else head + struct.pack(fmt, value)
        raise ValueError("integer too large")
    if isinstance(value, str):
        raw = value.encode()
        return _sized(len(raw), 0xA0, 32, b"\xd9", b"\xda", b"\xdb") + raw
    if isinstance(value, bytes):
        return _sized(len(value), None, 0, b"\xc4", b"\xc5", b"\xc6") + value
    if isinstance(value, (list, tuple)):
        return _sized(len(value), 0x90, 16, None, b"\xdc", b"\xdd") + b"".join(pack(v) for v in value)
    if isinstance(value, dict):
        body = b"".join(pack(k) + pack(v) for k, v in value.items())
        return _sized(len(value), 0x80, 16, None, b"\xde", b"\xdf") + body
    raise TypeError(f"cannot pack {type(value).__name__}")


def _sized(n, fix, fix_limit, head8, head16, head32):
    if fix is not None and n < fix_limit:
        return bytes([fix | n])
    if head8 is not None and n <= 0xFF:
        return head8 + struct.pack(">B", n)
    if n <= 0xFFFF:
        return head16 + struct.pack(">H", n)
    return head32 + struct.pack(">I", n)


def unpack(data: bytes):
    value, at = _unpack(data, 0)
    if at != len(data):
        raise ValueError("trailing bytes")
    return value


def _unpack(d, i):
    b = d[i]
    i += 1
    if b <= 0x7F:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F:
        return _map(d, i, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _list(d, i, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return d[i:i + n].decode(), i + n
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in simple:
        return simple[b], i
    fixed = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
             0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
    if b in fixed:
        size = struct.calcsize(fixed[b])
        return struct.unpack(fixed[b], d[i:i + size])[0], i + size
    lengths = {0xC4: ">B", 0xC5: ">H", 0xC6: ">I", 0xD9: ">B", 0xDA: ">H", 0xDB: ">I",
               0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I"}
    if b in lengths:
        size = struct.calcsize(lengths[b])
        n = struct.unpack(lengths[b], d[i:i + size])[0]
        i += size
        if b in (0xC4, 0xC5, 0xC6):
            return bytes(d[i:i + n]), i + n
        if b in (0xD9, 0xDA, 0xDB):
            return d[i:i + n].decode(), i + n
        if b in (0xDC, 0xDD):
            return _list(d, i, n)
        return _map(d, i, n)
    raise ValueError(f"unsupported MessagePack byte {b:#x}")


def _list(d, i, n):
    out = []
    for _ in range(n):
        v, i = _unpack(d, i)
        out.append(v)
    return out, i


def _map(d, i, n):
    out = {}
    for _ in range(n):
        k, i = _unpack(d, i)
        v, i = _unpack(d, i)
        out[k] = v
    return out, i


class Peer:
    """A connection to the local socket at `path`, after the handshake offering versions
    `lowest` to `highest`: `version` is what the gateway chose, `user` whom it took us for."""

    def __init__(self, path, lowest=1, highest=0xFFFF):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.buffer = b""
        self.descriptors = []
        self.sock.sendall(MAGIC + struct.pack("<HH", lowest, highest))
        assert self.read(8) == MAGIC
        (self.version,) = struct.unpack("<H", self.read(2))
        self.user = self.frame()

    def close(self):
        for fd in self.descriptors:
            try:
                os.close(fd)
            except OSError:
                pass
        self.sock.close()

    def _receive(self):
        fds = array.array("i")
        data, ancillary, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(16 * fds.itemsize))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        self.descriptors.extend(fds)
        if not data:
            raise ConnectionError("the gateway closed the connection")
        self.buffer += data

    def read(self, n):
        while len(self.buffer) < n:
            self._receive()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def frame(self):
        (length,) = struct.unpack("<I", self.read(4))
        return unpack(self.read(length))

    def send(self, request, body=None):
        """Sends a request frame, and `body` (bytes) as chunks and the end if given."""
        payload = pack(request)
        wire = struct.pack("<I", len(payload)) + payload
        if body is not None:
            if body:
                wire += struct.pack("<I", len(body)) + body
            wire += struct.pack("<I", END)
        self.sock.sendall(wire)

    def call(self, request, body=None):
        """A request and its reply frame: ("Ok", value) or ("Err", {code, status, message})."""
        self.send(request, body)
        (outcome, value), = self.frame().items()
        return outcome, value

    def chunks(self):
        """A body's bytes as chunks up to its end."""
        out = b""
        while True:
            (n,) = struct.unpack("<I", self.read(4))
            if n == END:
                return out
            if n == 0xFFFFFFFF:
                raise IOError(f"the body was broken off: {self.frame()}")
            out += self.read(n)
