"""The preload library attaches to the map and looks entries up inside
arbitrary programs, in signal handlers and after fork: the object files that
implement attach, lookup and insert may call only async-signal-safe libc
functions, never malloc, stdio or a lock. Checked on the built objects."""
import subprocess

import pytest

HOOK_PATH_OBJECTS = ["attach", "map", "hash", "errbuf", "lazy"]
ALLOWED = {
    # syscalls wrappers (__open_2, __open64_2: open under _FORTIFY_SOURCE)
    "open", "open64", "__open_2", "__open64_2", "close", "fstat", "fstat64", "pread", "pread64", "mmap", "mmap64",
    "munmap", "madvise", "fallocate", "fallocate64", "__errno_location",
    # pure memory functions
    "memcmp", "memcpy", "memset", "bcmp",
    # compiler support
    "__stack_chk_fail", "_GLOBAL_OFFSET_TABLE_",
}


def undefined_symbols(path):
    out = subprocess.run(["nm", "-u", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@pytest.mark.parametrize("name", HOOK_PATH_OBJECTS)
def test_hook_path_calls_only_signal_safe_functions(build_dir, name):
    obj = build_dir / "obj" / "src" / "shm" / f"{name}.o"
    if not obj.exists():
        pytest.fail(f"{obj} not built")
    calls = {s for s in undefined_symbols(obj)
             if not s.startswith(("shmmap_", "shm_eb_", "__asan", "__tsan", "__ubsan",
                                  "__sanitizer", "__msan"))}
    assert calls <= ALLOWED, f"{obj.name} calls {sorted(calls - ALLOWED)}"


# What a traced process's first question runs to attach the map: in the
# preload library these are raw system calls (src/shm/sys.h), not libc
# functions whose PLT slots ld.so would resolve on the spot in every
# process. (open and close: attach by path, and failures; not the trace
# library's path, which opens the file itself.)
READER_SYSCALL_WRAPPERS = {"fstat", "fstat64", "pread", "pread64", "mmap", "mmap64", "munmap",
                           "madvise"}


def test_preload_attach_makes_raw_system_calls(build_dir):
    obj = build_dir / "obj-nosan" / "src" / "shm" / "attach.o"
    if not obj.exists():
        pytest.fail(f"{obj} not built")
    calls = undefined_symbols(obj) & READER_SYSCALL_WRAPPERS
    assert not calls, f"the preload library's {obj.name} calls libc's {sorted(calls)}"
