"""A small trace server for testing the preload library before (and apart
from) the real one: it speaks docs/protocol.md and decides from a rules list.

Rules: ("hide", PREFIX) hides PREFIX and everything under it;
("deny", PREFIX, CLASSES) refuses those access classes under PREFIX.
Prefixes match whole components. Like the real server, it resolves each
path one component at a time: a symlink it traverses is itself checked, so
a hidden target stays hidden through any chain of symlinks."""
import os
import socket
import struct
import tempfile
import threading
import time

STAT, READ, WRITE, EXEC, LIST, CREATE, DELETE = (1 << i for i in range(7))
NOFOLLOW = 1
ALLOW, HIDE, DENY = 0, 1, 2
MAGIC, VERSION = 0x4E4C494B, 2
HELLO, HELLO_OK, REFUSED, QUERY, VERDICT, QUERY_DIR, VERDICT_DIR, EVENT = range(1, 9)
HDR = struct.Struct("=HHI")


def under(path, prefix):
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


class FakeServer:
    def __init__(self, rules=(), refuse=False):
        self.rules = list(rules)
        self.refuse = refuse
        self.dir = tempfile.mkdtemp(prefix="kiln-fake-")
        self.path = os.path.join(self.dir, "sock")
        self.log = []          # (pid, kind, path, access, qflags, verdict)
        self.events = []       # (pid, kind, path)
        self.hellos = []       # pids
        self.lock = threading.Lock()
        self.conns = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(self.path)
        self.sock.listen(128)
        self.alive = True
        threading.Thread(target=self._accept, daemon=True).start()

    # ---- decisions -------------------------------------------------------
    def _hidden(self, p):
        return any(r[0] == "hide" and under(p, r[1]) for r in self.rules)

    def _denied(self, p, access):
        return any(r[0] == "deny" and under(p, r[1]) and (access & r[2]) for r in self.rules)

    def decide(self, path, access, qflags):
        todo = [c for c in path.split("/") if c]
        cur, hops = "/", 0
        while todo:
            comp = todo.pop(0)
            if comp == ".":
                continue
            if comp == "..":
                cur = os.path.dirname(cur) or "/"
                continue
            nxt = os.path.join(cur, comp)
            if self._hidden(nxt):
                return HIDE
            last = not todo
            if os.path.islink(nxt) and not (last and qflags & NOFOLLOW):
                hops += 1
                if hops > 40:
                    return ALLOW  # the kernel reports ELOOP itself
                target = os.readlink(nxt)
                if target.startswith("/"):
                    cur = "/"
                todo = [c for c in target.split("/") if c] + todo
                continue
            cur = nxt
        if self._hidden(cur):
            return HIDE
        if self._denied(cur, access):
            return DENY
        return ALLOW

    # ---- protocol --------------------------------------------------------
    def _accept(self):
        while self.alive:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        pid = 0
        try:
            creds = c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid = struct.unpack("3i", creds)[0]
            msg = c.recv(65536)
            t, _, ln = HDR.unpack_from(msg)
            magic, ver, role, _ = struct.unpack_from("=IHHI", msg, 8)
            if t != HELLO or magic != MAGIC or ver != VERSION:
                return
            with self.lock:
                self.hellos.append(pid)
            if self.refuse:
                text = b"server shutting down"
                c.send(HDR.pack(REFUSED, 0, 4 + len(text)) + struct.pack("=I", 3) + text)
                return
            c.send(HDR.pack(HELLO_OK, 0, 8) + struct.pack("=IHH", MAGIC, VERSION, 0))
            while True:
                msg = c.recv(65536)
                if not msg:
                    return
                t, _, ln = HDR.unpack_from(msg)
                body = msg[8:]
                if len(body) != ln:
                    return
                if t == QUERY:
                    access, qflags, plen = struct.unpack_from("=III", body)
                    path = body[12:12 + plen].decode("utf-8", "surrogateescape")
                    v = self.decide(path, access, qflags)
                    with self.lock:
                        self.log.append((pid, "query", path, access, qflags, v))
                    # bind ANY: the preload library uses the answer as is
                    c.send(HDR.pack(VERDICT, 0, 48) + struct.pack("=IHHQQQQII", v, 0, 0, 0, 0, 0, 0, 0, 0))
                elif t == QUERY_DIR:
                    count, dlen = struct.unpack_from("=II", body)
                    d = body[8:8 + dlen].decode("utf-8", "surrogateescape")
                    at, out = 8 + dlen, []
                    for _ in range(count):
                        (nl,) = struct.unpack_from("=H", body, at)
                        name = body[at + 2:at + 2 + nl].decode("utf-8", "surrogateescape")
                        at += 2 + nl
                        out.append(1 if self.decide(os.path.join(d, name), STAT, NOFOLLOW) == HIDE else 0)
                    with self.lock:
                        self.log.append((pid, "dir", d, count, 0, sum(out)))
                    c.send(HDR.pack(VERDICT_DIR, 0, 4 + count) + struct.pack("=I", count) + bytes(out))
                elif t == EVENT:
                    kind, plen = struct.unpack_from("=II", body)
                    with self.lock:
                        self.events.append((pid, kind, body[8:8 + plen].decode()))
                else:
                    return
        except (OSError, struct.error):
            return
        finally:
            c.close()

    def events_when(self, n, timeout=10):
        """The events, once at least n have arrived (events are one-way
        messages: the client does not wait for the server to read them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.events) >= n:
                    break
            time.sleep(0.01)
        with self.lock:
            return list(self.events)

    def queries(self):
        with self.lock:
            return list(self.log)

    def stop(self):
        """The server dies: listening socket and every connection closed."""
        self.alive = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        try:
            os.rmdir(self.dir)
        except OSError:
            pass
