"""glibc's own opens of its data follow the sandbox (docs/glibc-data.md):
locale data of a package outside the closure is absent for setlocale and
newlocale exactly as locale data that does not exist, and glibc's fallback
to another locale directory goes where it goes in a tree without the hidden
one. Each answer under kiln is compared with glibc's own answer in a tree
where the hidden files really are missing (the oracle), never with a
hard-coded one."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from conftest import run
from runas import manifest_text

C_UTF8 = "/usr/lib/locale/C.utf8"

# Prints, per argument NAME, what setlocale(LC_ALL, NAME) and
# newlocale(LC_ALL_MASK, NAME, 0) return (errno on failure) and which
# LC_CTYPE file that mapped (glibc keeps loaded data mapped: only the new
# one is shown). "env:NAME" runs
# setlocale(LC_ALL, "") with LC_ALL=NAME in the environment.
PROBE = r'''
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.setlocale.restype = ctypes.c_char_p
libc.newlocale.restype = ctypes.c_void_p
libc.newlocale.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
seen = set()
def mapped():
    with open("/proc/self/maps") as f:
        now = {l.split()[-1] for l in f if l.rstrip().endswith("/LC_CTYPE")}
    new = sorted(now - seen)
    seen.update(now)
    return ",".join(os.path.basename(os.path.dirname(p)) for p in new) or "-"
mapped()  # what the interpreter loaded at start
for arg in sys.argv[1:]:
    name = arg
    if arg.startswith("env:"):
        os.environ["LC_ALL"] = name = arg[4:]
        arg = ""
    libc.setlocale(6, b"C")
    ctypes.set_errno(0)
    r = libc.setlocale(6, arg.encode())
    e = ctypes.get_errno()
    print(name, "setlocale", r.decode() if r else "NULL:" + errno.errorcode.get(e, str(e)), mapped())
    ctypes.set_errno(0)
    loc = libc.newlocale(8127, name.encode(), None)
    e = ctypes.get_errno()
    print(name, "newlocale", "OK" if loc else "NULL:" + errno.errorcode.get(e, str(e)))
    if loc:
        libc.freelocale(ctypes.c_void_p(loc))
    os.environ.pop("LC_ALL", None)
'''


class LocaleWorld:
    """sys/locale holds locales (copies of C.utf8) owned by packages of a
    manifest registry: xx_XX.utf8 (locales-xx, not declared), yy_YY.utf8
    (locales-yy-hidden, not declared) and yy (locales-yy, declared). The
    same tree without the hidden ones is the oracle."""

    def __init__(self, kiln):
        self.kiln = str(kiln)
        self.top = tempfile.mkdtemp(prefix="kiln-locale-", dir="/tmp")
        self.sys = os.path.join(self.top, "sys")
        self.loc = os.path.join(self.sys, "locale")
        self.oracle = os.path.join(self.top, "oracle")
        self.build = os.path.join(self.top, "build")
        os.makedirs(self.build)
        for name in ("xx_XX.utf8", "yy_YY.utf8", "yy", "vv_VV.utf8"):
            shutil.copytree(C_UTF8, os.path.join(self.loc, name))
        os.makedirs(self.oracle)
        for name in ("yy", "vv_VV.utf8"):
            shutil.copytree(C_UTF8, os.path.join(self.oracle, name))

        def files(d):
            out = [d + "/"]
            for base, dirs, names in os.walk(d):
                out += [os.path.join(base, n) + "/" for n in dirs] + [os.path.join(base, n) for n in names]
            return out
        S, L = self.sys, self.loc
        manifest = os.path.join(self.top, "manifest")
        with open(manifest, "w") as f:
            f.write(manifest_text([
                ("base", True, [f"{S}/", f"{L}/"]),
                ("locales-xx", False, files(f"{L}/xx_XX.utf8")),
                ("locales-yy-hidden", False, files(f"{L}/yy_YY.utf8")),
                ("locales-yy", False, files(f"{L}/yy") + files(f"{L}/vv_VV.utf8")),
            ]))
        self.db = os.path.join(self.top, "registry.db")
        r = run([self.kiln, "registry", "--db", self.db, "import", "manifest", manifest])
        assert r.returncode == 0, r.stderr

    def probe(self, names, traced=True, locpath=None, extra=()):
        script = os.path.join(self.build, "probe.py")
        with open(script, "w") as f:
            f.write(PROBE)
        env = dict(os.environ, LOCPATH=locpath or (self.loc if traced else self.oracle))
        env.pop("LC_ALL", None)
        cmd = [sys.executable, script, *names]
        if traced:
            cmd = [self.kiln, "trace", "--db", self.db, "--deps", "locales-yy", "--ask", self.sys,
                   "--json", "-o", os.path.join(self.top, "report.json"), *extra, "--", *cmd]
        r = run(cmd, env=env, cwd=self.build)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout.splitlines(), r.stderr

    def report(self):
        with open(os.path.join(self.top, "report.json")) as f:
            return json.load(f)

    def cleanup(self):
        shutil.rmtree(self.top, ignore_errors=True)


@pytest.fixture
def lworld(kiln_bin):
    if not os.path.isdir(C_UTF8):
        pytest.skip(f"{C_UTF8} (libc-bin) is not installed")
    w = LocaleWorld(kiln_bin)
    yield w
    w.cleanup()


NAMES = ["xx_XX.UTF-8", "zz_ZZ.UTF-8", "env:xx_XX.UTF-8", "yy_YY.UTF-8", "yy_YY", "vv_VV.UTF-8",
         "C", "C.UTF-8"]


def test_hidden_locale_data_is_absent_for_glibc(lworld):
    got, err = lworld.probe(NAMES)
    want, _ = lworld.probe(NAMES, traced=False)
    assert got == want
    # The oracle agrees with what the test means: xx is absent, yy_YY falls
    # back to yy, vv_VV (declared) loads.
    assert "xx_XX.UTF-8 setlocale NULL:ENOENT -" in got, got
    assert "yy_YY.UTF-8 setlocale yy_YY.UTF-8 yy" in got
    assert "vv_VV.UTF-8 setlocale vv_VV.UTF-8 vv_VV.utf8" in got
    # The packages whose locale data glibc would have loaded are named.
    hidden = {h["package"] for h in lworld.report()["hidden"] if "package" in h}
    assert hidden == {"locales-xx", "locales-yy-hidden"}
    assert "locales-xx (" in err


def test_without_kiln_the_hidden_locales_load(lworld):
    # The same probe with every locale present and no kiln: the test's
    # hidden locales do exist for glibc, so the answers above are kiln's.
    got, _ = lworld.probe(["xx_XX.UTF-8", "yy_YY.UTF-8"], traced=False, locpath=lworld.loc)
    assert "xx_XX.UTF-8 setlocale xx_XX.UTF-8 xx_XX.utf8" in got
    assert "yy_YY.UTF-8 setlocale yy_YY.UTF-8 yy_YY.utf8" in got


def test_report_only_hides_nothing_but_names_them(lworld):
    got, err = lworld.probe(["xx_XX.UTF-8"], extra=["--report-only"])
    assert "xx_XX.UTF-8 setlocale xx_XX.UTF-8 xx_XX.utf8" in got
    assert "locales-xx (" in err


# SIGSYS after a checked window: the program's own disposition still holds.
SIGSYS_PROBE = r'''
import ctypes, os, signal, sys
libc = ctypes.CDLL(None)
libc.setlocale.restype = ctypes.c_char_p
if sys.argv[1] == "handler":
    signal.signal(signal.SIGSYS, lambda s, f: print("handler ran", flush=True))
print(libc.setlocale(6, b"yy_YY.UTF-8"), flush=True)
os.kill(os.getpid(), signal.SIGSYS)
print("after", flush=True)
'''


@pytest.mark.parametrize("mode", ["handler", "default"])
def test_program_sigsys_disposition_survives_a_checked_window(lworld, mode):
    script = os.path.join(lworld.build, "sigsys.py")
    with open(script, "w") as f:
        f.write(SIGSYS_PROBE)
    env = dict(os.environ, LOCPATH=lworld.loc)
    r = subprocess.run([lworld.kiln, "trace", "--db", lworld.db, "--deps", "locales-yy", "--ask",
                        lworld.sys, "--", sys.executable, script, mode],
                       env=env, cwd=lworld.build, capture_output=True, text=True, timeout=60)
    assert "b'yy_YY.UTF-8'" in r.stdout
    if mode == "handler":
        assert r.returncode == 0 and "handler ran" in r.stdout and "after" in r.stdout
    else:
        assert r.returncode == 128 + signal.SIGSYS and "after" not in r.stdout


ENV_PROBE = r'''
import ctypes, os
libc = ctypes.CDLL(None)
libc.setlocale.restype = ctypes.c_char_p
print(os.environ.get("KILN_LOCALES", "-"))
print(libc.setlocale(6, b""))
'''


@pytest.mark.parametrize("deny", [False, True])
def test_the_environments_locale_is_planned_before_the_build(lworld, deny):
    # sbuild's LC_ALL=C.UTF-8 is planned once, before the build: processes
    # need not ask (KILN_LOCALES). Hidden, it is not listed, and fails.
    script = os.path.join(lworld.build, "envprobe.py")
    with open(script, "w") as f:
        f.write(ENV_PROBE)
    env = dict(os.environ, LC_ALL="C.UTF-8")
    env.pop("LOCPATH", None)
    extra = ["--deny", C_UTF8] if deny else []
    r = run([lworld.kiln, "trace", "--db", lworld.db, *extra, "--", sys.executable, script],
            env=env, cwd=lworld.build)
    assert r.returncode == 0, r.stderr
    names, result = r.stdout.splitlines()
    if deny:
        assert "C.UTF-8" not in names.split(":") and result == "None"
        assert "(deny rules)" in r.stderr and C_UTF8 in r.stderr
    else:
        assert "C.UTF-8" in names.split(":") and result == "b'C.UTF-8'"


# ---- NSS, gconv, the time zone: the planned-ahead sets ----------------------

DATA_PROBE = r'''
import ctypes, errno, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
libc.iconv_open.restype = ctypes.c_void_p
libc.getservbyname.restype = ctypes.c_void_p
print("KILN_CLEAN", os.environ.get("KILN_CLEAN", "-"))
for name in ("http", "nosuchservice"):
    print("getservbyname", name, "found" if libc.getservbyname(name.encode(), b"tcp") else "none")
for pair in ((b"IBM1047", b"UTF-8"), (b"UTF-16", b"UTF-8")):
    ctypes.set_errno(0)
    cd = libc.iconv_open(*pair)
    ok = cd is not None and cd != ctypes.c_void_p(-1).value
    print("iconv_open", pair[0].decode(), "OK" if ok else errno.errorcode[ctypes.get_errno()])
os.environ["TZ"] = "Europe/Paris"
time.tzset()
print("tz", time.strftime("%Z %z", time.localtime(1700000000)))
'''

SERVICES = "/etc/services"
IBM1047 = "/usr/lib/x86_64-linux-gnu/gconv/IBM1047.so"
PARIS = "/usr/share/zoneinfo/Europe/Paris"


def oracle(script, env):
    """The probe where the files the traced run hides really are missing:
    in a mount namespace of its own, with copies of /etc and the gconv
    directory without them and an empty directory over the zone file's."""
    tmp = tempfile.mkdtemp(prefix="kiln-oracle-", dir="/tmp")
    try:
        gconv = os.path.dirname(IBM1047)
        sh = (f"cp -a /etc {tmp}/etc && rm {tmp}/etc/services && mount --bind {tmp}/etc /etc && "
              f"cp -a {gconv} {tmp}/gconv && rm {tmp}/gconv/IBM1047.so {tmp}/gconv/gconv-modules.cache && "
              f"mount --bind {tmp}/gconv {gconv} && mkdir {tmp}/europe && "
              f"mount --bind {tmp}/europe {os.path.dirname(PARIS)} && exec {sys.executable} {script}")
        r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", sh], env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout.splitlines()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the oracle needs a mount namespace (root)")
@pytest.mark.skipif(not all(os.path.exists(p) for p in (SERVICES, IBM1047, PARIS)),
                    reason="netbase, libc6's gconv modules or tzdata missing")
def test_nss_gconv_and_tz_files_hidden_are_absent_for_glibc(lworld):
    script = os.path.join(lworld.build, "data.py")
    with open(script, "w") as f:
        f.write(DATA_PROBE)
    env = dict(os.environ)
    env.pop("TZ", None)
    env.pop("GCONV_PATH", None)
    r = run([lworld.kiln, "trace", "--db", lworld.db, "--deny", SERVICES, "--deny", IBM1047,
             "--deny", os.path.dirname(PARIS), "--", sys.executable, script], env=env, cwd=lworld.build)
    assert r.returncode == 0, r.stderr
    got = r.stdout.splitlines()
    clean = got[0].split(" ", 1)[1].split()
    assert "nss:services" not in clean and "gconv" not in clean and "nss:passwd" in clean
    assert got[1:] == oracle(script, env)[1:]
    # and the oracle shows what the test means: nothing found, EINVAL, no zone
    assert "getservbyname http none" in got and "iconv_open IBM1047 EINVAL" in got
    assert "iconv_open UTF-16 OK" in got and "tz CET +0100" not in got
    for path in (SERVICES, IBM1047):
        assert path in r.stderr
    # Without kiln, everything is found.
    plain = run([sys.executable, script], env=env).stdout.splitlines()
    assert "getservbyname http found" in plain and "iconv_open IBM1047 OK" in plain
    assert "tz CET +0100" in plain


# ---- message catalogs ---------------------------------------------------------

def write_mo(path, pairs):
    """A GNU .mo catalog of {msgid: msgstr} (the format gettext documents)."""
    import struct
    keys = sorted(pairs)
    ids = b"".join(k.encode() + b"\0" for k in keys)
    strs = b"".join(pairs[k].encode() + b"\0" for k in keys)
    n = len(keys)
    koff, voff = 28, 28 + 8 * n
    start = 28 + 16 * n
    ktab, vtab, at = b"", b"", start
    for k in keys:
        ktab += struct.pack("=II", len(k.encode()), at)
        at += len(k.encode()) + 1
    for k in keys:
        vtab += struct.pack("=II", len(pairs[k].encode()), at)
        at += len(pairs[k].encode()) + 1
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("=Iiiiiii", 0x950412de, 0, n, koff, voff, 0, 0) + ktab + vtab + ids + strs)


CATALOG_PROBE = r'''
import ctypes, sys
libc = ctypes.CDLL(None)
for f in ("dcgettext", "dgettext", "bindtextdomain", "setlocale"):
    getattr(libc, f).restype = ctypes.c_char_p
print(libc.setlocale(6, b"vv_VV.UTF-8"))
for dom in ("hidden", "seen"):
    libc.bindtextdomain(dom.encode(), sys.argv[1].encode())
    print(dom, "hello", libc.dcgettext(dom.encode(), b"hello", 5).decode(),
          libc.dgettext(dom.encode(), b"hello").decode())
'''


def test_hidden_catalogs_are_absent_for_gettext(kiln_bin, tmp_path):
    if not os.path.isdir(C_UTF8):
        pytest.skip(f"{C_UTF8} (libc-bin) is not installed")
    top = tmp_path
    sysd, loc, share = top / "sys", top / "sys" / "locale", top / "sys" / "share"
    shutil.copytree(C_UTF8, loc / "vv_VV.utf8")
    write_mo(str(share / "vv" / "LC_MESSAGES" / "hidden.mo"), {"hello": "bonjour"})
    write_mo(str(share / "vv" / "LC_MESSAGES" / "seen.mo"), {"hello": "salut"})
    files = [f"{sysd}/", f"{loc}/", f"{share}/", f"{share}/vv/", f"{share}/vv/LC_MESSAGES/"]
    locale_files = [str(p) + ("/" if p.is_dir() else "") for p in [loc / "vv_VV.utf8",
                                                                  *(loc / "vv_VV.utf8").rglob("*")]]
    (top / "manifest").write_text(manifest_text([
        ("base", True, files),
        ("locales-vv", False, locale_files + [f"{share}/vv/LC_MESSAGES/seen.mo"]),
        ("vv-l10n", False, [f"{share}/vv/LC_MESSAGES/hidden.mo"]),
    ]))
    db = top / "registry.db"
    assert run([kiln_bin, "registry", "--db", db, "import", "manifest", top / "manifest"]).returncode == 0
    script = top / "cat.py"
    script.write_text(CATALOG_PROBE)
    env = dict(os.environ, LOCPATH=str(loc))
    env.pop("LANGUAGE", None)
    build = top / "build"
    build.mkdir()
    r = run([kiln_bin, "trace", "--db", db, "--deps", "locales-vv", "--ask", sysd, "--",
             sys.executable, script, share], env=env, cwd=build)
    assert r.returncode == 0, r.stderr
    # The oracle: the same without the hidden catalog.
    plain = run([sys.executable, script, share], env=env).stdout.splitlines()
    assert "hidden hello bonjour bonjour" in plain
    os.unlink(share / "vv" / "LC_MESSAGES" / "hidden.mo")
    oracle_out = run([sys.executable, script, share], env=env).stdout.splitlines()
    assert r.stdout.splitlines() == oracle_out
    assert "hidden hello hello hello" in oracle_out and "seen hello salut salut" in oracle_out
    assert "vv-l10n (1)" in r.stderr and "hidden.mo" in r.stderr


SETLOCALE_PROBE = r'''
import ctypes, sys
libc = ctypes.CDLL(None)
libc.setlocale.restype = ctypes.c_char_p
for name in sys.argv[1:]:
    print(name, libc.setlocale(6, name.encode()))
'''


def message_languages(base="/usr/share/locale"):
    """A language whose message directory on this machine holds no libc.mo,
    and one whose does (libc-l10n): (without, with), either None."""
    without = with_libc = None
    for lang in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        d = os.path.join(base, lang, "LC_MESSAGES")
        if len(lang) not in (2, 3) or not lang.isalpha() or not os.path.isdir(d):
            continue
        if os.path.isfile(os.path.join(d, "libc.mo")):
            with_libc = with_libc or lang
        else:
            without = without or lang
    return without, with_libc


def test_only_catalogs_that_exist_are_named_as_loaded_by_glibc(kiln_bin, tmp_path):
    """glibc translates its own messages with the libc.mo of the messages
    locale, hidden or not: the report names such a catalog when it exists,
    and never one that does not (a hidden message directory without it)."""
    without, with_libc = message_languages()
    if not (without and with_libc) or not os.path.isdir(C_UTF8):
        pytest.skip("needs /usr/share/locale/L/LC_MESSAGES with and without libc.mo, and C.utf8")
    loc = tmp_path / "locale"
    names = [f"{without}_QQ.UTF-8", f"{with_libc}_QQ.UTF-8"]
    for name in names:
        shutil.copytree(C_UTF8, loc / name.replace("UTF-8", "utf8"))

    def owned(lang):
        d = f"/usr/share/locale/{lang}/LC_MESSAGES"
        return [d + "/"] + [os.path.join(d, n) for n in sorted(os.listdir(d))]
    manifest = tmp_path / "manifest"
    manifest.write_text(manifest_text([
        ("base", True, ["/usr/", "/usr/share/", "/usr/share/locale/"]),
        ("msgs-without-libc", False, owned(without)),
        ("msgs-with-libc", False, owned(with_libc)),
    ]))
    db = tmp_path / "registry.db"
    r = run([kiln_bin, "registry", "--db", db, "import", "manifest", manifest])
    assert r.returncode == 0, r.stderr
    script = tmp_path / "setlocale.py"
    script.write_text(SETLOCALE_PROBE)
    env = dict(os.environ, LOCPATH=str(loc))
    env.pop("LC_ALL", None)
    report = tmp_path / "report.json"
    r = run([kiln_bin, "trace", "--db", db, "--ask", "/usr/share/locale", "--json", "-o", report,
             "--", sys.executable, script, *names], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in names:   # both locales load: their catalogs are glibc's to use
        assert f"{name} b'{name}'" in r.stdout, r.stdout
    named = {u["path"]: u["package"] for u in json.loads(report.read_text())["unhidden_glibc_data"]}
    assert named == {f"/usr/share/locale/{with_libc}/LC_MESSAGES/libc.mo": "msgs-with-libc"}, named
