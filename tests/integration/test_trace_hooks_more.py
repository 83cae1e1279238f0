"""The preload library beyond single calls: symlinks, directory listings,
processes (fork, vfork, exec, spawn, threads, signal handlers), kiln's
environment surviving programs that clear it, and kiln's fds surviving
programs that close them. Against the fake trace server."""
import os
import shutil
import stat as st
import subprocess
import sys

import pytest

from fake_trace_server import FakeServer, EXEC, LIST, STAT
from tracefix import HOOKCALL, PRELOAD, env_for, hookcall, make_tree, result


@pytest.fixture
def tree(tmp_path):
    rules, deep = make_tree(tmp_path)
    with FakeServer(rules) as srv:
        yield tmp_path, srv, deep


def statuses(lines):
    return [result(l)[2] for l in lines]


# ---- symlinks -------------------------------------------------------------

def test_symlink_cases(tree):
    root, srv, deep = tree
    cases = [
        ("vis/lnk_ok", "OK"),            # allowed link to allowed file
        ("vis/lnk_hid", "ENOENT"),       # hidden target through an allowed symlink
        ("badlink", "ENOENT"),           # the symlink itself is hidden
        ("vis/dirlink/b", "ENOENT"),     # symlinked intermediate directory
        ("vis/sub/../a", "OK"),          # ".." is the server's to resolve
        ("vis/sub/../../hid/b", "ENOENT"),
        ("vis/dirlink/../vis/a", "ENOENT"),  # passes through a hidden directory
        ("vis/chain1", "ENOENT"),        # relative chain ending in a hidden file
        ("vis/loop1", "ELOOP"),          # loops: the kernel's ELOOP
    ]
    args = []
    for p, _ in cases:
        args += ["stat", f"{root}/{p}"]
    lines, _ = hookcall(srv.path, *args)
    assert statuses(lines) == [want for _, want in cases]


def test_paths_over_1000_characters(tree):
    root, srv, deep = tree
    assert len(str(deep / "hidden")) > 1000
    rel = os.path.relpath(deep, root)
    lines, _ = hookcall(srv.path, "stat", deep / "seen", "stat", deep / "hidden",
                        "open", deep / "hidden", "r", "stat", f"{rel}/seen", "stat", f"{rel}/hidden",
                        "readdir", deep, cwd=root)
    assert statuses(lines) == ["OK", "ENOENT", "ENOENT", "OK", "ENOENT", "OK"]
    assert lines[-1].split()[3:] == ["seen"]


def test_path_too_long_for_the_protocol(tree):
    """A relative path whose absolute form exceeds 4096 bytes: refused with
    ENAMETOOLONG rather than asked about truncated."""
    root, srv, deep = tree
    rel = "/".join(["."] + [".."] * 0 + ["x" * 200] * 21)
    lines, _ = hookcall(srv.path, "stat", rel, cwd=deep)
    assert statuses(lines) == ["ENAMETOOLONG"]


# ---- directory listings ------------------------------------------------------

LISTERS = ["readdir", "readdir64", "readdir_r", "getdents64", "sys_getdents64", "scandir"]


@pytest.mark.parametrize("lister", LISTERS)
def test_listing_hides_entries(tree, lister):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, lister, root, lister, f"{root}/vis", lister, f"{root}/hid")
    top, vis, hid = (l.split() for l in lines)
    assert top[2:] == ["OK", "deep", "ro", "vis"]           # hid and badlink gone
    assert "c" not in vis and {"a", "x", "lnk_hid", "sub"} <= set(vis[3:])
    assert hid[1:3] == ["-1", "ENOENT"]


def test_listing_is_one_question_per_buffer(tree):
    """A directory of 300 entries read with readdir: one QUERY_DIR batch
    (one getdents buffer), not one question per entry."""
    root, srv, _ = tree
    big = root / "vis" / "big"
    big.mkdir()
    for i in range(300):
        (big / f"f{i:03}").write_text("")
    srv.rules.append(("hide", str(big / "f007")))
    lines, _ = hookcall(srv.path, "readdir", big)
    names = lines[0].split()[3:]
    assert len(names) == 299 and "f007" not in names
    dir_queries = [q for q in srv.queries() if q[1] == "dir"]
    assert len(dir_queries) == 1 and dir_queries[0][3] == 300
    assert not [q for q in srv.queries() if q[1] == "query" and q[2].startswith(str(big) + "/")]


def test_more_open_streams_than_buffers(tree):
    """100 DIR streams open at once (kiln batches 64): the others fall back to
    one question per entry and hide the same entries."""
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "manydirs", 100, f"{root}/vis")
    words = lines[0].split()
    assert words[:2] == ["manydirs", "agree=100"]
    names = words[4:]
    assert "a" in names and "c" not in names and "lnk_hid" in names


@pytest.mark.parametrize("walker", ["nftw", "ftw", "fts"])
def test_tree_walks_skip_hidden(tree, walker):
    root, srv, _ = tree
    w = root / "walk"
    for d in ["sub", "hiddir/inner"]:
        (w / d).mkdir(parents=True)
    for f in ["a", "sub/b", "hiddir/x", "hiddir/inner/y", "hidfile"]:
        (w / f).write_text("")
    srv.rules += [("hide", str(w / "hiddir")), ("hide", str(w / "hidfile"))]
    lines, _ = hookcall(srv.path, walker, w, walker, f"{root}/hid")
    assert lines[0].split()[:3] == [walker, "0", "OK"]
    assert lines[0].split()[3:] == [str(w), f"{w}/a", f"{w}/sub", f"{w}/sub/b"]
    assert lines[1].split()[1:3] == ["-1", "ENOENT"]
    # a hidden directory is not even descended into
    assert not [q for q in srv.queries() if "/hiddir/" in q[2]]


def test_glob_drops_hidden(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "glob", f"{root}/*/*", "glob", f"{root}/hid/*")
    found = lines[0].split()[2:]
    assert f"{root}/vis/a" in found and f"{root}/ro/f" in found
    assert not [f for f in found if "/hid/" in f or f.endswith("/vis/c")]
    assert lines[1].split()[:2] == ["glob", "3"]  # GLOB_NOMATCH
    # glob listed the directories: its results are asked as listing entries,
    # one batch per directory, never looked up one by one as the program's
    asked = srv.queries()
    assert not [q for q in asked if q[1] == "query" and q[2].startswith(f"{root}/")
                and q[2].count("/") > str(root).count("/") + 1], asked
    dirs = sorted(q[2] for q in asked if q[1] == "dir")
    assert dirs == sorted(f"{root}/{d}" for d in ("deep", "ro", "vis"))
    # each directory is asked for as a listing first (as opendir does); the
    # hidden one's results go without a batch
    listed = sorted(q[2] for q in asked if q[1] == "query" and q[2].count("/") == str(root).count("/") + 1)
    assert listed == sorted(f"{root}/{d}" for d in ("deep", "hid", "hid", "ro", "vis"))


def test_glob_of_a_literal_name_is_a_lookup(tree):
    """A pattern whose last component has no magic: glob looks each result
    up (glibc stats it) instead of listing its directory, so the results are
    the program's own lookups, asked one by one, never a listing."""
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "glob", f"{root}/vis/c", "glob", f"{root}/vis/a",
                        "glob", f"{root}/*/f", "glob", f"{root}/vis/{{a,c,x}}")
    assert lines[0].split() == ["glob", "3"]      # hidden: GLOB_NOMATCH, as absent
    assert lines[1].split() == ["glob", "0", f"{root}/vis/a"]
    assert lines[2].split() == ["glob", "0", f"{root}/ro/f"]
    assert lines[3].split()[:2] == ["glob", "3"]  # no GLOB_BRACE: a literal "{a,c,x}"
    asked = srv.queries()
    assert not [q for q in asked if q[1] == "dir"], asked
    stats = [q[2] for q in asked if q[1] == "query" and q[3] == STAT]
    assert f"{root}/vis/c" in stats and f"{root}/vis/a" in stats and f"{root}/ro/f" in stats
    assert not [q for q in asked if q[1] == "query" and q[3] == LIST
                and q[2] in (f"{root}/vis", f"{root}/ro")], asked


def test_glob_of_only_hidden_matches_is_glob_of_nothing(tree):
    """Every match hidden: glob answers as when nothing is there. GLOB_NOCHECK
    gives the pattern back, GLOB_NOMAGIC a pattern without magic; otherwise
    GLOB_NOMATCH. Each pattern against one naming something truly absent."""
    root, srv, _ = tree
    cases = [
        ("glob_nocheck", "hid/*", "absent/*"),        # a hidden directory
        ("glob_nocheck", "vis/[c]", "vis/[z]"),       # a hidden file among visible ones
        ("glob_nocheck", "*/[c]", "*/[z]"),
        ("glob_nocheck", "hid/b", "absent/b"),        # no magic
        ("glob_nomagic", "vis/c", "vis/zz"),
        ("glob_nomagic", "hid/b", "absent/b"),
        ("glob_nomagic", "hid/*", "absent/*"),        # magic: GLOB_NOMATCH
        ("glob", "vis/[c]", "vis/[z]"),
        ("glob", "vis/c", "vis/zz"),
    ]
    args = []
    for cmd, hidden, absent in cases:
        args += [cmd, f"{root}/{hidden}", cmd, f"{root}/{absent}"]
    lines, _ = hookcall(srv.path, *args)
    assert len(lines) == 2 * len(cases), lines
    for n, (cmd, hidden, absent) in enumerate(cases):
        got_h = lines[2 * n].replace(f"{root}/{hidden}", "PATTERN")
        got_a = lines[2 * n + 1].replace(f"{root}/{absent}", "PATTERN")
        assert got_h == got_a, (cmd, hidden, lines[2 * n], lines[2 * n + 1])
    assert lines[0] == "glob 0 PATTERN".replace("PATTERN", f"{root}/hid/*")
    assert lines[12].split()[:2] == ["glob", "3"]


def test_glob_mark_and_relative_results(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "glob_mark", "*/*", cwd=root)
    found = lines[0].split()[2:]
    assert "vis/sub/" in found and "vis/a" in found and "hid/dir/" not in found
    assert not [f for f in found if f.startswith("hid/") or f == "vis/c"]


# ---- processes ----------------------------------------------------------------

def test_fork_child_has_its_own_connection(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "stat", f"{root}/vis/a", "fork", "stat", f"{root}/hid/b", ";",
                        "stat", f"{root}/hid/b")
    assert statuses(lines) == ["OK", "ENOENT", "ENOENT"]
    assert len(set(srv.hellos)) == 2  # parent and child each connected


def test_fork_children_find_the_fd_functions_looked_up(tree, tmp_path):
    """A forked child that sets up its descriptors before anything else (a
    shell's child of a pipe) finds the real fcntl and close already looked
    up by its parent: no dlsym in each child (ld.so's LD_DEBUG=bindings
    shows every symbol the library looks up, with the pid of the process)."""
    _, srv, _ = tree
    dbg = tmp_path / "ld-debug"
    dbg.mkdir()
    env = env_for(srv.path, {"LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(dbg / "pid")})
    args = []
    for _ in range(3):
        args += ["fork", "dupfd-close", "200", ";"]
    lines, _ = hookcall(srv.path, *args, env=env)
    assert [l.split()[2] for l in lines] == ["OK"] * 3
    lookups = {}  # pid -> the real functions the library looked up in it
    for f in dbg.iterdir():  # a forked child writes to its parent's file
        for l in f.read_text().splitlines():
            if f"binding file {PRELOAD} " in l and "normal symbol `" in l:
                lookups.setdefault(l.split(":")[0].strip(), set()).add(
                    l.split("`")[1].split("'")[0])
    parent = [p for p, names in lookups.items() if "fork" in names]
    assert len(parent) == 1, lookups
    assert {"fcntl", "close"} <= lookups[parent[0]]
    for p, names in lookups.items():
        if p != parent[0]:
            assert not names & {"fcntl", "close", "dup2", "dup3"}, (p, names)


def test_vfork_exec(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "stat", f"{root}/vis/a",
                        "vfork-exec", HOOKCALL, "stat", f"{root}/hid/b", ";",
                        "vfork-exec", f"{root}/hid/b", ";")
    assert lines[0].split()[2] == "OK"
    assert lines[1].split()[2] == "ENOENT"      # the exec'd child is traced
    assert lines[2] == "vfork-exec 0"
    assert lines[3] == "vfork-exec 127"         # exec of a hidden file fails


def test_vfork_child_asking_first_leaves_the_parent_nothing(tree):
    """The child of a vfork shares the parent's memory: when it asks before
    the program has, it connects for itself and leaves no connection or fd
    behind that the parent would take for its own. A hidden file and a
    really absent one look the same to it."""
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "vfork-stat", f"{root}/hid/b", "vfork-stat", f"{root}/vis/nothere",
                        "vfork-stat", f"{root}/vis/lnk_hid", "vfork-stat", f"{root}/vis/a",
                        "dupfd-close", 100, "dupfd-close", 101, "dupfd-close", 102,
                        "stat", f"{root}/hid/b", "stat", f"{root}/vis/a",
                        "dupfd-close", 100, "vfork-stat", f"{root}/hid/dir",
                        "stat", f"{root}/vis/x")
    assert lines == ["vfork-stat -1 ENOENT"] * 3 + ["vfork-stat 0 OK"] + ["dupfd-close 0 OK"] * 3 + \
        ["stat -1 ENOENT", "stat 0 OK", "dupfd-close 0 OK", "vfork-stat -1 ENOENT", "stat 0 OK"]
    # five children and the parent, each as itself and once: the parent's
    # three questions share the one connection it keeps
    assert len(srv.hellos) == len(set(srv.hellos)) == 6, srv.hellos
    asked = {q[2] for q in srv.queries()}
    assert {f"{root}/hid/b", f"{root}/vis/a", f"{root}/hid/dir", f"{root}/vis/x"} <= asked


@pytest.mark.parametrize("fd", [100, 101, 107, 108])
def test_vfork_child_taking_kiln_fd_numbers(tree, fd):
    """A shell's `exec 100<file` or a spawner's dup2 in a vfork child lands
    on one of kiln's numbers: the child gets it, and the parent keeps its
    own connection, which it goes on using."""
    root, srv, _ = tree
    os.chmod(root / "hid" / "b", 0o755)
    lines, _ = hookcall(srv.path, "stat", f"{root}/vis/a",
                        "vfork-dup2-exec", fd, HOOKCALL, "stat", f"{root}/hid/b", "dupfd-close", fd, ";",
                        "vfork-dup2-exec", fd, f"{root}/hid/b", ";",
                        "vfork-closefrom-exec", HOOKCALL, "stat", f"{root}/vis/c", ";",
                        "vfork-loop", 20, HOOKCALL, "stat", f"{root}/vis/x", ";",
                        "stat", f"{root}/hid/b", "stat", f"{root}/vis/a", "dupfd-close", 100)
    assert lines == ["stat 0 OK", "stat -1 ENOENT", "dupfd-close 0 OK", f"vfork-dup2-exec 0",
                     "vfork-dup2-exec 127", "stat -1 ENOENT", "vfork-closefrom-exec 0"] + \
        ["stat 0 OK"] * 20 + ["vfork-loop 0 OK", "stat -1 ENOENT", "stat 0 OK", "dupfd-close 0 OK"]
    parent = srv.hellos[0]
    assert srv.hellos.count(parent) == 1  # the parent never had to reconnect


def test_vfork_while_threads_ask(tree):
    """Other threads of the parent go on asking while a vfork child does."""
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "vforkstorm", 40, f"{root}/hid/b", HOOKCALL, "stat",
                        f"{root}/vis/c", ";", "stat", f"{root}/vis/a")
    assert lines[-2:] == ["vforkstorm 0 OK", "stat 0 OK"]
    assert lines[:-2] == ["stat -1 ENOENT"] * 40


EXECS = ["spawn", "spawnp", "exec-env", "execv", "execvp", "execvpe", "execl", "execle", "execlp",
         "execveat", "fexecve"]
BY_NAME = ("spawnp", "execvp", "execvpe", "execlp")  # PATH searched


@pytest.mark.parametrize("how", EXECS)
def test_exec_and_spawn(tree, how):
    root, srv, _ = tree
    prog = "hookcall" if how in BY_NAME else str(HOOKCALL)
    lines, _ = hookcall(srv.path, how, "keep", prog, "stat", f"{root}/hid/b", ";")
    assert lines == ["stat -1 ENOENT", f"{how} 0 OK"]
    assert any(q[3] & EXEC for q in srv.queries())


@pytest.mark.parametrize("how", [h for h in EXECS if h not in BY_NAME])
def test_exec_of_hidden_target_fails(tree, how):
    root, srv, _ = tree
    os.chmod(root / "hid" / "b", 0o755)
    lines, _ = hookcall(srv.path, how, "keep", f"{root}/hid/b", ";",
                        how, "keep", f"{root}/vis/lnk_hid", ";")
    assert lines == [f"{how} -1 ENOENT"] * 2  # (fexecve: its open already fails)


def test_dirfd_of_a_hidden_directory(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "raw-openat", f"{root}/hid", "b",
                        "raw-openat", f"{root}/vis", "a")
    assert statuses(lines) == ["ENOENT", "ENOENT", "OK", "OK"]


def test_fexecve_checks_the_fd(tree):
    """An fd of a hidden file obtained behind kiln's back cannot be run."""
    root, srv, _ = tree
    os.chmod(root / "hid" / "b", 0o755)
    lines, _ = hookcall(srv.path, "raw-fexecve", "keep", f"{root}/hid/b", ";",
                        "raw-fexecve", "keep", HOOKCALL, "stat", f"{root}/vis/a", ";")
    assert lines == ["raw-fexecve -1 ENOENT", "stat 0 OK", "raw-fexecve 0 OK"]


def test_script_interpreter_is_checked(tree):
    root, srv, _ = tree
    interp = root / "hid" / "interp"
    shutil.copy("/bin/sh", interp)
    script = root / "vis" / "script"
    script.write_text(f"#!{interp}\necho ran\n")
    script.chmod(0o755)
    ok = root / "vis" / "okscript"
    ok.write_text("#!/bin/sh\necho ran\n")
    ok.chmod(0o755)
    lines, _ = hookcall(srv.path, "exec-env", "keep", script, ";", "spawn", "keep", script, ";",
                        "exec-env", "keep", ok, ";")
    assert lines == ["exec-env -1 ENOENT", "spawn -1 ENOENT", "ran", "exec-env 0 OK"]


def _kernel_exec_errno(path):
    """What execve of path gives without kiln: 'OK' or the errno's name."""
    r = subprocess.run(
        [sys.executable, "-c",
         "import os, sys, errno\n"
         "try:\n    os.execv(sys.argv[1], [sys.argv[1]])\n"
         "except OSError as e:\n    print('errno', errno.errorcode[e.errno])\n", str(path)],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    out = r.stdout.split()
    return out[1] if out[:1] == ["errno"] else "OK"


def test_long_interpreter_lines_fail_as_the_kernel_fails_them(tree):
    """The kernel reads 256 bytes of a #! line: a name that does not end in
    them (no newline, no space) is refused with ENOEXEC, not looked up, and
    one that ends in them runs with its arguments cut. The same errno as
    without kiln, from exec and spawn (a shell then runs the file itself)."""
    root, srv, _ = tree
    cases = []
    for name, text in [
        ("cut", "#!/" + "x" * 300 + "\necho ran\n"),              # name past byte 255
        ("cut256", "#!/" + "x" * 253),                            # 256 bytes, no newline
        ("fits255", "#!/" + "x" * 252),                           # 255: ends in the padding
        ("spaces", "#!" + " " * 300 + "/bin/sh\necho ran\n"),     # name past byte 255
        ("args", "#!/bin/echo " + "a" * 300 + "\n"),                 # cut arguments: runs
    ]:
        p = root / "vis" / name
        p.write_text(text)
        p.chmod(0o755)
        cases.append((p, _kernel_exec_errno(p)))
    assert [want for _, want in cases] == ["ENOEXEC", "ENOEXEC", "ENOENT", "ENOEXEC", "OK"], cases
    for p, want in cases:
        lines, _ = hookcall(srv.path, "exec-env", "keep", p, ";")
        assert lines[-1] == f"exec-env {'0' if want == 'OK' else '-1'} {want}", (p.name, lines)


def test_system_and_popen(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "system", f"{HOOKCALL} stat {root}/hid/b",
                        "popen", f"{HOOKCALL} stat {root}/vis/c")
    assert lines == ["stat -1 ENOENT", "system 0 OK", "stat -1 ENOENT", "popen 0 OK"]


def test_threads_race_on_first_connection(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "threads", 32, f"{root}/hid/b")
    assert lines == ["threads 32 OK"]


def test_fork_while_threads_are_asking(tree):
    """Children forked while other threads hold pooled connections mid-question
    get their own connections and correct answers."""
    root, srv, _ = tree
    lines, err = hookcall(srv.path, "forkstorm", 40, f"{root}/hid/b")
    assert lines == ["forkstorm 0 OK"]
    assert "kiln:" not in err


def test_hook_entered_from_signal_handler(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "signal", f"{root}/hid/b", f"{root}/vis/a")
    assert lines == ["signal 0 OK"]


def test_setid_exec_is_reported(tree):
    root, srv, _ = tree
    prog = root / "vis" / "setgid-prog"
    shutil.copy("/bin/true", prog)
    os.chmod(prog, 0o2755)
    assert os.stat(prog).st_mode & st.S_ISGID
    lines, _ = hookcall(srv.path, "exec-env", "keep", prog, ";")
    assert lines == ["exec-env 0 OK"]
    assert [(e[1], e[2]) for e in srv.events_when(1)] == [(1, str(prog))]


def test_static_exec_is_reported(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "exec-env", "keep", "/sbin/ldconfig", "--version", ";")
    assert lines[-1] == "exec-env 0 OK"
    assert [(e[1], e[2]) for e in srv.events_when(1)] == [(2, "/sbin/ldconfig")]


# ---- kiln's environment survives the program ---------------------------------

@pytest.mark.parametrize("how", ["clear", "unset", "empty", "badsock"])
@pytest.mark.parametrize("via", EXECS)
def test_env_clearing_does_not_escape(tree, how, via):
    root, srv, _ = tree
    # (with a cleared environment, a PATH search uses the default PATH)
    prog = "hookcall" if via in BY_NAME and how != "clear" else str(HOOKCALL)
    lines, _ = hookcall(srv.path, via, how, prog, "stat", f"{root}/hid/b", ";")
    assert lines == ["stat -1 ENOENT", f"{via} 0 OK"]


def test_env_unset_in_process_then_system(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "unsetenv", "system", f"{HOOKCALL} stat {root}/hid/b",
                        "popen", f"{HOOKCALL} getenv LD_PRELOAD")
    assert lines[:2] == ["stat -1 ENOENT", "system 0 OK"]
    assert lines[2] == f"getenv LD_PRELOAD={PRELOAD}"


def test_program_preload_kept_after_kiln(tree):
    root, srv, _ = tree
    env = env_for(srv.path)
    lines, _ = hookcall(srv.path, "exec-env", "keep", HOOKCALL, "getenv", "LD_PRELOAD", ";", env=env)
    assert lines[0] == f"getenv LD_PRELOAD={PRELOAD}"


@pytest.mark.parametrize("via", ["exec-env", "execveat", "spawn"])
def test_large_environment_reaches_the_program_whole(tree, via):
    """An environment bigger than the exec hook's vector on the stack (it maps
    one): every variable of the program's arrives, and kiln's come back."""
    root, srv, _ = tree
    big = {f"BIGENV_{i}": str(i) for i in range(600)}  # hookcall passes on 1,000
    lines, _ = hookcall(srv.path, via, "keep", HOOKCALL, "getenv", "BIGENV_0",
                        "getenv", "BIGENV_599", "getenv", "LD_PRELOAD", "stat", f"{root}/hid/b",
                        ";", env=env_for(srv.path, big))
    assert lines == ["getenv BIGENV_0=0", "getenv BIGENV_599=599",
                     f"getenv LD_PRELOAD={PRELOAD}", "stat -1 ENOENT", f"{via} 0 OK"]


# ---- kiln's fds survive the program ------------------------------------------

@pytest.mark.parametrize("closer", ["close_range", "closefrom", "closeall", "dup2all", "dup3all",
                                    "sys_close_range", "sys_closeall"])
def test_fd_closers_do_not_break_tracing(tree, closer):
    root, srv, _ = tree
    lines, err = hookcall(srv.path, "stat", f"{root}/hid/b", closer, "stat", f"{root}/hid/b",
                          "stat", f"{root}/vis/a")
    assert statuses(lines) == ["ENOENT", "OK", "ENOENT", "OK"]
    assert "kiln:" not in err


@pytest.mark.parametrize("check", ["open_fds", "sys_open_fds"])
def test_kilns_fds_look_closed_to_fcntl(tree, check):
    """What closefrom leaves of kiln's fds is not open to the program:
    libbsd's closefrom test checks every number with fcntl."""
    root, srv, _ = tree
    lines, err = hookcall(srv.path, "stat", f"{root}/hid/b", "closefrom", check,
                          "stat", f"{root}/hid/b", check, "stat", f"{root}/vis/a")
    assert lines == ["stat -1 ENOENT", "closefrom 0 OK", check, "stat -1 ENOENT", check,
                     "stat 0 OK"], err


@pytest.mark.parametrize("lister,where", [("readdir", "/proc/self/fd"), ("readdir", "/dev/fd"),
                                          ("scandir", "/proc/self/fd"),
                                          ("getdents64", "/proc/self/fd"),
                                          ("sys_getdents64", "/proc/self/fd"),
                                          ("glob", "/proc/self/fd/*"),
                                          ("readdir", "/proc/thread-self/fd")])
def test_kilns_fds_are_not_in_the_programs_fd_listing(tree, lister, where):
    """A test suite comparing its open fds before and after an operation
    lists /proc/self/fd: kiln's connection and map are not the program's."""
    root, srv, _ = tree
    lines, err = hookcall(srv.path, "stat", f"{root}/vis/a", "open_fds", lister, where)
    assert lines[0] == "stat 0 OK"
    names = [n.rsplit("/", 1)[-1] for n in lines[2].split()[3 if lister != "glob" else 2:]]
    assert names and all(n.isdigit() for n in names), lines
    assert not [n for n in names if int(n) >= 100], lines


def test_hook_before_kilns_constructor(tree, tmp_path):
    """Another preloaded library's constructor runs before kiln's and calls
    stat(): kiln initialises on that first call and answers correctly."""
    import subprocess
    root, srv, _ = tree
    src = tmp_path / "early.c"
    src.write_text(
        '#include <stdio.h>\n#include <sys/stat.h>\n#include <errno.h>\n#include <string.h>\n'
        '#include <stdlib.h>\n'
        '__attribute__((constructor)) static void early(void) {\n'
        '  struct stat st; int r = stat(getenv("EARLY_PATH"), &st);\n'
        '  printf("early %d %s\\n", r, r ? strerrorname_np(errno) : "OK"); fflush(stdout); }\n')
    lib = tmp_path / "early.so"
    subprocess.run(["cc", "-D_GNU_SOURCE", "-shared", "-fPIC", "-o", lib, src], check=True)
    env = env_for(srv.path, {"EARLY_PATH": f"{root}/hid/b"})
    env["LD_PRELOAD"] = f"{PRELOAD}:{lib}"
    lines, _ = hookcall(srv.path, "stat", f"{root}/vis/c", env=env)
    assert lines == ["early -1 ENOENT", "stat -1 ENOENT"]


@pytest.mark.parametrize("how", ["spawnp", "execvp"])
def test_path_search_skips_hidden_candidates(tree, how):
    """A program found first in a hidden directory of PATH is skipped: the
    search goes on to the next candidate, as if the first did not exist."""
    root, srv, _ = tree
    for d, word in (("hid", "hidden"), ("vis", "visible")):
        tool = root / d / "tool"
        tool.write_text(f"#!/bin/sh\necho {word}\n")
        tool.chmod(0o755)
    env = env_for(srv.path)
    env["PATH"] = f"{root}/hid:{root}/vis:/usr/bin:/bin"
    lines, _ = hookcall(srv.path, how, "keep", "tool", ";", env=env)
    assert lines == ["visible", f"{how} 0 OK"]


# ---- system() and popen() leave the program's environment alone ----------------

def test_system_does_not_touch_the_callers_environ(tree):
    """Another thread reading environ or calling setenv while system() runs
    sees the program's own environment, and its setenv is not undone."""
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "unsetenv", "system-envrace",
                        "system", f"{HOOKCALL} stat {root}/hid/b")
    assert lines == ["system-envrace 0 environ=same setenv=kept",
                     "stat -1 ENOENT", "system 0 OK"]


def test_popen_does_not_touch_the_callers_environ(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "unsetenv", "popen-envrace", 100,
                        "popen", f"{HOOKCALL} stat {root}/hid/b")
    assert lines == ["popen-envrace 0 environ=same", "stat -1 ENOENT", "popen 0 OK"]


def test_system_signal_semantics(tree):
    """As glibc's: the caller ignores SIGINT and SIGQUIT during the call, the
    shell gets them back at their default; NULL asks whether a shell exists."""
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "system-raw", "kill -INT $PPID; kill -QUIT $PPID; exit 4",
                        "system-raw", "kill -INT $$", "system-raw", "NULL")
    assert lines == ["system-raw 4 OK", "system-raw signal 2", "system-raw NULL 1"]


def test_popen_keeps_glibcs_contract(tree):
    root, srv, _ = tree
    lines, _ = hookcall(srv.path, "popen-modes")
    assert lines == ["mode-rw EINVAL", "mode-rx EINVAL", "flags w=0 re=1",
                     "earlier stream in child: closed", "pclose 0", "pclose 0",
                     "fclose 0", "fclose 5"]


def test_hidden_shell(tmp_path):
    """A hidden /bin/sh: system() reports it as glibc reports a shell that
    cannot be spawned (status 127, errno set), popen() fails with it."""
    with FakeServer([("hide", os.path.realpath("/bin") + "/sh")]) as srv:
        lines, _ = hookcall(srv.path, "system-raw", "true", "popen", "true")
    assert lines == ["system-raw 127 ENOENT", "popen -1 ENOENT"]


# ---- posix_spawn file actions that change directory --------------------------

def test_spawn_relative_target_after_chdir_actions(tree):
    """A relative target is looked up where the file actions leave the child:
    addchdir_np (absolute, relative, chained) and addfchdir_np."""
    root, srv, _ = tree
    for d in ("vis", "hid"):
        shutil.copy("/bin/true", root / d / "prog")
        os.chmod(root / d / "prog", 0o755)
    lines, _ = hookcall(
        srv.path,
        "spawn-cd", "spawn", f"cd:{root}/hid", "./prog", ";",
        "spawn-cd", "spawn", f"cd:{root}/vis", "./prog", ";",
        "spawn-cd", "spawn", "cd:vis", "cd:../hid", "prog", ";",
        "spawn-cd", "spawn", "cd:vis", "cd:sub", "cd:..", "prog", ";",
        "spawn-cd", "spawn", "cd:hid", "cd:../vis", "prog", ";",  # through hid/
        "spawn-cd", "spawn", f"fcd:{root}/hid", "prog", ";",
        "spawn-cd", "spawn", f"cd:{root}/vis", f"fcd:{root}/hid", "prog", ";",
        "spawn-cd", "spawn", f"fcd:{root}/hid", "cd:../vis", "prog", ";",  # through hid/
        "spawn-cd", "spawn", f"fcd:{root}/vis", "prog", ";",
        "spawn-cd", "spawn", f"fcd:{root}/vis", f"{root}/hid/prog", ";",
        cwd=root)
    assert lines == ["spawn -1 ENOENT", "spawn 0 OK", "spawn -1 ENOENT", "spawn 0 OK",
                     "spawn -1 ENOENT", "spawn -1 ENOENT", "spawn -1 ENOENT", "spawn -1 ENOENT",
                     "spawn 0 OK", "spawn -1 ENOENT"]


def test_spawnp_relative_path_entry_after_chdir_actions(tree):
    root, srv, _ = tree
    for d in ("vis", "hid"):
        shutil.copy("/bin/true", root / d / "prog")
        os.chmod(root / d / "prog", 0o755)
    env = env_for(srv.path)
    env["PATH"] = "."
    lines, _ = hookcall(srv.path, "spawn-cd", "spawnp", "cd:hid", "prog", ";",
                        "spawn-cd", "spawnp", "cd:vis", "prog", ";", env=env, cwd=root)
    assert lines == ["spawnp -1 ENOENT", "spawnp 0 OK"]


# ---- fts_children -----------------------------------------------------------------

@pytest.mark.parametrize("how", ["chdir", "nochdir"])
def test_fts_children_drops_hidden(tree, how):
    root, srv, _ = tree
    w = root / "walk"
    for d in ["sub", "hiddir/inner"]:
        (w / d).mkdir(parents=True)
    for f in ["a", "sub/b", "sub/hid2", "hiddir/x", "hiddir/inner/y", "hidfile"]:
        (w / f).write_text("")
    srv.rules += [("hide", str(w / "hiddir")), ("hide", str(w / "hidfile")),
                  ("hide", str(w / "sub/hid2"))]
    lines, _ = hookcall(srv.path, "fts_children", w, how, cwd=root)
    got = lines[0].split()[3:]
    assert [g for g in got if g.startswith("c:")] == [f"c:{w}/a", f"c:{w}/sub", f"c:{w}/sub/b"]
    assert [g for g in got if g.startswith("r:")] == [f"r:{w}", f"r:{w}/a", f"r:{w}/sub",
                                                       f"r:{w}/sub/b"]
    assert [g for g in got if not g.startswith(("c:", "r:"))] == [f"root:{w}"]
    # and with a relative root
    lines, _ = hookcall(srv.path, "fts_children", "walk", how, cwd=root)
    assert [g for g in lines[0].split()[3:] if g.startswith("c:")] == \
        ["c:walk/a", "c:walk/sub", "c:walk/sub/b"]


# ---- the exec wrappers share one checked sequence ------------------------------

def test_execveat_with_a_dirfd_and_empty_path(tree):
    root, srv, _ = tree
    for d in ("vis", "hid"):
        shutil.copy("/bin/true", root / d / "prog")
        os.chmod(root / d / "prog", 0o755)
    lines, _ = hookcall(srv.path, "execveat-dirfd", root, "hid/prog",
                        "execveat-dirfd", root, "vis/prog",
                        "execveat-empty", root / "hid" / "prog",
                        "execveat-empty", root / "vis" / "prog")
    assert lines == ["execveat-dirfd -1 ENOENT", "execveat-dirfd 0 OK",
                     "execveat-empty -1 ENOENT", "execveat-empty 0 OK"]


@pytest.mark.parametrize("how", ["execvp", "execvpe", "execlp"])
def test_file_without_interpreter_runs_under_sh(tree, how):
    """ENOEXEC: as glibc, the execvp family runs the file with /bin/sh,
    found by PATH or named with a slash."""
    root, srv, _ = tree
    script = root / "vis" / "plain"
    script.write_text(f"{HOOKCALL} stat {root}/hid/b\n")
    script.chmod(0o755)
    env = env_for(srv.path)
    env["PATH"] = f"{root}/vis:{env['PATH']}"
    lines, _ = hookcall(srv.path, how, "keep", "plain", ";", how, "keep", script, ";", env=env)
    assert lines == ["stat -1 ENOENT", f"{how} 0 OK", "stat -1 ENOENT", f"{how} 0 OK"]


def test_spawn_open_file_actions_are_checked(tree):
    """glibc opens addopen files in the child with internal calls: a hidden
    file fails the spawn as a missing one would (ENOENT), a refused write
    with EACCES, relative names where the chdir actions leave the child."""
    root, srv, _ = tree
    lines, _ = hookcall(
        srv.path,
        "spawn-cd", "spawn", f"open:{root}/hid/b", "/bin/true", ";",
        "spawn-cd", "spawn", f"open:{root}/vis/a", "/bin/true", ";",
        "spawn-cd", "spawn", f"openw:{root}/ro/f", "/bin/true", ";",
        "spawn-cd", "spawn", f"open:{root}/ro/f", "/bin/true", ";",
        "spawn-cd", "spawn", "cd:hid", "open:b", "/bin/true", ";",
        "spawn-cd", "spawn", "open:vis/c", "cd:vis", "open:a", "/bin/true", ";",
        "spawn-cd", "spawnp", f"open:{root}/vis/c", "true", ";",
        "spawn-cd", "spawn", "cd:vis", "open:a", "/bin/true", ";",
        cwd=root)
    assert lines == ["spawn -1 ENOENT", "spawn 0 OK", "spawn -1 EACCES", "spawn 0 OK",
                     "spawn -1 ENOENT", "spawn -1 ENOENT", "spawnp -1 ENOENT", "spawn 0 OK"]
