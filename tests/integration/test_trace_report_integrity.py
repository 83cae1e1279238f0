"""The report is trustworthy and valid whatever the build names its files
(issue 9, class 8): --json is always valid UTF-8 JSON (bytes that are not
UTF-8 come back exactly through Python's surrogateescape), the text report
and --log keep one line per entry (newlines and control characters escaped,
docs/trace-report.md), and a client sending garbage cannot flood stderr or
change the verdicts given to others."""
import json
import os
import random
import re
import socket
import struct
import time

import trace_proto as tp
from test_trace_server import connect, traced, world  # noqa: F401 (fixtures)

NASTY = [
    b"new\nline  [sr-----]\n      first reached by pid 1: fake",
    b"tab\there",
    b"esc\x1b[31mred\x1b[0m",
    b"latin1-\xe9-\xff",
    b"half-utf8-\xe2\x82",
    b"c1-\xc2\x9b-csi",
    b"back\\slash\\n",
    b"cr\rreturn",
    "ok-ütf8-日本".encode(),
]


def unescape_text(s):
    """Inverse of the documented text/log escaping: bytes of the name."""
    out = bytearray()
    i = 0
    b = s.encode()
    while i < len(b):
        if b[i:i + 1] == b"\\":
            n = b[i + 1:i + 2]
            if n == b"\\":
                out += b"\\"
                i += 2
            elif n in (b"n", b"t", b"r"):
                out += {b"n": b"\n", b"t": b"\t", b"r": b"\r"}[n]
                i += 2
            else:
                assert n == b"x", s
                out.append(int(b[i + 2:i + 4], 16))
                i += 4
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def test_names_with_newlines_control_and_invalid_utf8(world, traced):
    t = traced("--json", "-o", "report.json", "--log", "access.log")
    c = connect(t)
    inc = os.fsencode(world.inc)
    plug = os.fsencode(world.lib) + b"/foo-plugins/"
    for name in NASTY:
        # refused writes: the path asked is the finding's key
        assert c.ask(inc + b"/" + name, tp.CREATE | tp.WRITE) == tp.DENY
        # unknown: a file of that name that exists, owned by no package
        with open(inc + b"/u-" + name, "w"):
            pass
        assert c.ask(inc + b"/u-" + name, tp.READ) == tp.ALLOW
    # hidden: a hidden directory, reached `via` the first nasty name (a file
    # that exists in it, so that the finding is ranked and shown in full)
    with open(plug + NASTY[0], "w"):
        pass
    assert c.ask(plug + NASTY[0], tp.READ) == tp.HIDE
    rc, err_text = t.finish()
    assert rc == 0

    # JSON: strictly valid UTF-8, parses, and gives the exact bytes back.
    raw = (world.build / "report.json").read_bytes()
    raw.decode("utf-8", errors="strict")
    assert b"\n  {\"path\":" in raw and all(ch >= 0x20 or ch == 0x0a for ch in raw)
    rep = json.loads(raw)
    refused = {os.fsencode(r["path"]) for r in rep["refused_writes"]}
    assert refused == {inc + b"/" + n for n in NASTY}
    unknown = {os.fsencode(u["path"]) for u in rep["unknown"]}
    assert unknown == {inc + b"/u-" + n for n in NASTY}
    [hid] = rep["hidden"]
    assert os.fsencode(hid["via"]) == plug + NASTY[0]

    # --log: one line per path; every name comes back from its escaped form.
    log = (world.build / "access.log").read_bytes().decode("utf-8", errors="strict")
    lines = log.splitlines()
    assert all(re.fullmatch(r"[srwxlcd-]{7} [a-z,]+ \S.*", l) for l in lines), lines
    names = {unescape_text(l.split(" ", 2)[2]) for l in lines}
    assert {inc + b"/" + n for n in NASTY} <= names
    assert {inc + b"/u-" + n for n in NASTY} <= names
    assert plug + NASTY[0] in names

    # text report: no fake line, no raw control character, every name whole.
    assert "\x1b" not in err_text and "\r" not in err_text and "\x9b" not in err_text
    assert not any(l.startswith("      first reached by pid 1: fake") for l in err_text.splitlines())
    shown = [l.rsplit("  [", 1)[0].strip() for l in err_text.splitlines()
             if l.startswith("    " + str(world.inc) + "/")]
    assert len(shown) == 2 * len(NASTY)
    assert {unescape_text(s) for s in shown} == ({inc + b"/" + n for n in NASTY} |
                                                {inc + b"/u-" + n for n in NASTY})
    assert unescape_text(err_text.split(" via ")[1].split("\n")[0]) == plug + NASTY[0]


def test_argv_with_control_characters_is_escaped(world, kiln_bin):
    """The command line of the process that reached a file is shown too:
    an argument cannot forge a report line or reach the terminal raw."""
    import subprocess
    arg = "x\x1b[2J\n      first reached by pid 1: forged"
    r = subprocess.run([str(kiln_bin), "trace", *map(str, world.args), "--json", "-o", "r.json", "--",
                        "sh", "-c", 'cat "$1" "$0" 2>/dev/null; true', arg, f"{world.inc}/foo.h"],
                       cwd=world.build, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode("utf-8", errors="strict")
    assert "\x1b" not in err
    assert not any("forged" in l and not l.startswith("      first reached by pid ")
                   for l in err.splitlines())
    assert f"cat {world.inc}/foo.h x\\x1b[2J\\n      first reached" in err
    rep = json.loads((world.build / "r.json").read_bytes())
    [h] = rep["hidden"]
    assert h["argv"] == ["cat", f"{world.inc}/foo.h", arg]


# ---- protocol fuzzing ---------------------------------------------------

def _mutants(rng, world):
    inc = os.fsencode(world.inc)
    valid = [
        tp.query(inc + b"/dep.h", tp.READ),
        tp.query(inc + b"/foo.h", tp.STAT, tp.NOFOLLOW),
        tp.query_dir(str(world.inc), ["foo.h", "dep.h", "x"]),
        tp.event(tp.STATIC_EXEC, "/bin/true"),
        tp.hello(),
    ]
    kind = rng.randrange(5)
    if kind == 0:                                   # pure noise
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96)))
    m = bytearray(rng.choice(valid))
    if kind == 1:                                   # bit flips
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(m))
            m[i] ^= 1 << rng.randrange(8)
    elif kind == 2:                                 # header fields
        struct.pack_into("=HHI", m, 0, rng.choice([0, 4, 6, 8, 99, 0xffff]),
                         rng.choice([0, 1, 0xffff]), rng.choice([0, len(m) - 8, 1 << 31, 7]))
    elif kind == 3:                                 # truncation or padding
        m = m[:rng.randrange(len(m))] if rng.random() < 0.5 else m + bytes(rng.randrange(64))
    else:                                           # a well-formed query of random bytes
        name = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 40))).replace(b"\0", b"a")
        m = bytearray(tp.query(inc + b"/" + name, rng.choice([tp.STAT, tp.READ, tp.WRITE | tp.CREATE])))
    return bytes(m)


def test_protocol_fuzz_keeps_verdicts_and_bounds_output(world, traced):
    t = traced("--json", "-o", "fuzz.json")
    rng = random.Random(9)
    bystander = connect(t)
    deadline = time.monotonic() + 4
    sent = 0
    for n in range(1500):
        if time.monotonic() > deadline:
            break
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(2)
        s.connect(t.socket)
        try:
            if rng.random() < 0.8:                  # most get past the handshake
                s.send(tp.hello())
                s.recv(tp.MSG_MAX)
            for _ in range(rng.randrange(1, 4)):
                s.send(_mutants(rng, world))
                sent += 1
        except OSError:
            pass                                    # closed by the server: expected
        s.close()
        if n % 100 == 0:
            assert bystander.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
    assert sent > 500
    # Verdicts are still right, for an old and a new connection.
    assert bystander.ask(f"{world.inc}/foo.h", tp.READ) == tp.HIDE
    assert bystander.ask(f"{world.inc}/dep.h", tp.READ) == tp.ALLOW
    fresh = connect(t)
    assert fresh.ask(f"{world.inc}/foo.h", tp.STAT) == tp.HIDE
    assert fresh.ask(f"{world.inc}/base.h", tp.READ) == tp.ALLOW
    assert fresh.ask(f"{world.inc}/new.h", tp.CREATE | tp.WRITE) == tp.DENY
    rc, err = t.finish()
    assert rc == 0, err[-2000:]
    # Bounded output: a few closing messages, one summary, the report.
    assert len(err) < 32 * 1024, len(err)
    assert err.count("closing the connection") <= 5
    assert "connections closed as malformed in all" in err
    json.loads((world.build / "fuzz.json").read_bytes())
