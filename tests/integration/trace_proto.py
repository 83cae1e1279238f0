"""A small client of kiln's trace protocol (docs/protocol.md,
src/ipc/proto.h), for driving the trace server without the preload library."""
import os
import socket
import struct

MAGIC = 0x4E4C494B
VERSION = 2
MSG_MAX = 65536

HELLO, HELLO_OK, REFUSED, QUERY, VERDICT, QUERY_DIR, VERDICT_DIR, EVENT, QUERY_DATA, NOTE = \
    range(1, 11)
# VERDICT: verdict, bind, id_flags, dev, ino, dir_dev, dir_ino, ahead, reserved
# (src/ipc/proto.h)
VERDICT_MSG = struct.Struct("=IHHQQQQII")
BIND_ANY, BIND_NO_SYMLINKS, BIND_IDENT = 0, 1, 2
ID_FILE, ID_DEV_ONLY, ID_DIR = 1, 2, 4
REFUSE_VERSION, REFUSE_PEER, REFUSE_BUSY = 1, 2, 3

STAT, READ, WRITE, EXEC, LIST, CREATE, DELETE = (1 << i for i in range(7))
NOFOLLOW, PROBE = 1, 2
ALLOW, HIDE, DENY = 0, 1, 2
DATA_LOCALE = 1
CLEAN, ABSENT, CHECK = 0, 1, 2
SETUID_EXEC, STATIC_EXEC = 1, 2

HDR = struct.Struct("=HHI")


def msg(mtype, payload=b"", flags=0, length=None):
    return HDR.pack(mtype, flags, len(payload) if length is None else length) + payload


def hello(version=VERSION, role=1, magic=MAGIC, pid=None):
    return msg(HELLO, struct.pack("=IHHI", magic, version, role, os.getpid() if pid is None else pid))


def query(path, access, qflags=0):
    p = path.encode() if isinstance(path, str) else path
    return msg(QUERY, struct.pack("=III", access, qflags, len(p)) + p)


def note(path, access, qflags=0):
    """A question the client answered itself (an absent path): no reply."""
    return msg(NOTE, query(path, access, qflags)[HDR.size:])


def query_dir(d, names):
    db = d.encode()
    body = b"".join(struct.pack("=H", len(n.encode())) + n.encode() for n in names)
    return msg(QUERY_DIR, struct.pack("=II", len(names), len(db)) + db + body)


def query_data(kind, arg, a, b):
    a, b = (x.encode() if isinstance(x, str) else x for x in (a, b))
    return msg(QUERY_DATA, struct.pack("=III", kind, arg, len(a)) + a + b)


def event(kind, path):
    p = path.encode()
    return msg(EVENT, struct.pack("=II", kind, len(p)) + p)


class Client:
    def __init__(self, sock_path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(timeout)
        self.s.connect(sock_path)

    def send(self, data):
        self.s.send(data)

    def recv(self):
        """(type, payload), or None at end of stream."""
        data = self.s.recv(MSG_MAX)
        if not data:
            return None
        t, _flags, n = HDR.unpack_from(data)
        assert n == len(data) - HDR.size
        return t, data[HDR.size:]

    def handshake(self):
        self.send(hello())
        t, p = self.recv()
        assert t == HELLO_OK, (t, p)
        magic, version, _ = struct.unpack("=IHH", p)
        assert (magic, version) == (MAGIC, VERSION)
        return self

    def ask_bound(self, path, access, qflags=0):
        """(verdict, bind, id_flags, dev, ino, dir_dev, dir_ino, ahead, reserved) of a
        query."""
        self.send(query(path, access, qflags))
        r = self.recv()
        assert r is not None, "server closed the connection"
        t, p = r
        assert t == VERDICT
        return VERDICT_MSG.unpack(p)

    def ask(self, path, access, qflags=0):
        return self.ask_bound(path, access, qflags)[0]

    def ask_data(self, kind, arg, a, b):
        self.send(query_data(kind, arg, a, b))
        r = self.recv()
        assert r is not None, "server closed the connection"
        t, p = r
        assert t == VERDICT
        return VERDICT_MSG.unpack(p)[0]

    def ask_dir(self, d, names):
        self.send(query_dir(d, names))
        t, p = self.recv()
        assert t == VERDICT_DIR
        (count,) = struct.unpack_from("=I", p)
        assert count == len(names)
        return list(p[4:4 + count])

    def closed(self):
        """True if the server closed this connection."""
        try:
            return self.s.recv(MSG_MAX) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.s.close()
