"""Helpers for the meta server tests: a `kiln meta serve --foreground`
server on a socket of the test's own, its counters, and a raw protocol
client (docs/meta-server.md)."""
import json
import os
import socket
import struct
import subprocess
import time

MAGIC = 0x4E4C494B
VERSION = 2
ROLE_META = 2
HELLO, HELLO_OK, REFUSED = 1, 2, 3
REFUSE_VERSION, REFUSE_PEER, REFUSE_BUILD = 1, 2, 4
STATS = 20


class Server:
    def __init__(self, kiln, tmp, *args):
        self.kiln = str(kiln)
        self.socket = str(tmp / "meta.sock")
        self.proc = subprocess.Popen([self.kiln, "meta", "serve", "--foreground", "--socket", self.socket,
                                      *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith(f"KILN_META_SOCKET={self.socket};"), (line, self.proc.stderr.read())
        self.env = dict(os.environ, KILN_META_SOCKET=self.socket)
        self.env.pop("KILN_SOCKET", None)

    def stats(self):
        r = subprocess.run([self.kiln, "meta", "stats", "--json"], env=self.env, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def wait_stats(self, pred, timeout=20):
        end = time.monotonic() + timeout
        while True:
            st = self.stats()
            if pred(st):
                return st
            assert time.monotonic() < end, f"server counters never got there: {st}"
            time.sleep(0.05)

    def meta(self, *args, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("timeout", 120)
        return subprocess.run([self.kiln, "meta", *map(str, args)], env=self.env, **kw)

    def close(self):
        """Stops the server as `kiln meta stop` would (SIGTERM: drain, clean
        up) and checks that it had nothing to say (a sanitizer build reports
        leaks and errors at exit)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        if rc != -9:  # not killed by the test itself
            assert rc == 0 and "Sanitizer" not in err, err
            assert not os.path.exists(self.socket)


def raw_hello(ident, version=VERSION):
    return struct.pack("=HHI", HELLO, 0, 12 + len(ident)) + \
        struct.pack("=IHHI", MAGIC, version, ROLE_META, os.getpid()) + ident


def handshake(sock_path, ident, version=VERSION):
    """(type, reason or None) of the server's answer to a HELLO."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(sock_path)
    try:
        s.send(raw_hello(ident, version))
    except BrokenPipeError:
        pass  # refused at connect: the answer is waiting
    data = s.recv(65536)
    s.close()
    typ = struct.unpack_from("=H", data)[0]
    return typ, struct.unpack_from("=I", data, 8)[0] if typ == REFUSED else None


def build_id(path):
    """The GNU build id of an ELF file, as bytes (readelf -n)."""
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return bytes.fromhex(line.split("Build ID:")[1].strip())
    raise AssertionError(f"{path} has no build id")


def stall_pipe():
    """A pipe with the smallest buffer, whose reader never reads: a job
    writing more than a page to it blocks mid-output."""
    r, w = os.pipe()
    import fcntl
    fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
    return r, w
