# kiln — one non-recursive Makefile.
#
#   make            build build/kiln, build/libkiln-trace.so and the man pages
#   make check      unit tests (cmocka) + end-to-end tests (pytest) + check-deb
#   make check-deb  build the Debian package, lintian, unpack it, run what it installed
#   make check-packages  real Debian packages built under kiln trace (slow)
#   make check-fidelity  configure in a clean chroot against kiln trace (slow, root)
#   make demo       build kiln and run its main job on a real example
#   make bench      every benchmark (or bench-shm, bench-registry, bench-meta,
#                   bench-preload, bench-trace, bench-trace-deb: docs/benchmarks.md)
#   make install    PREFIX=/usr/local DESTDIR= (what the Debian package holds)
#   make deps       install the build and test dependencies (as root)
#   make SAN=address|thread|undefined check
#
# The Debian packages kiln needs are listed once, in debian/control's
# Build-Depends (.ci/deps reads it): `make` and `make install` only check
# them and name what is missing; `make check`, `make demo`, `make deps` and
# .ci/run install what is missing when run as root.
#
# Sources are found by directory (docs/design.md has the layout), so adding
# a .c file to a component needs no Makefile change.

CC      ?= cc
PYTHON  ?= /usr/bin/python3
PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?=
# Debian's multiarch triplet: the preload library lives in
# $(PREFIX)/lib/$(MULTIARCH)/kiln, where kiln looks for it (src/cli/preload_path.c).
MULTIARCH  ?= $(or $(shell $(CC) -print-multiarch 2>/dev/null),x86_64-linux-gnu)
BINDIR     ?= $(PREFIX)/bin
PKGLIBDIR  ?= $(PREFIX)/lib/$(MULTIARCH)/kiln
SYSCONFDIR ?= /etc
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/kiln
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

PKGS := sqlite3 libdw libelf capstone

ifeq ($(SAN),)
BUILD := build
else
BUILD := build/san-$(SAN)
endif

BASE_CFLAGS := -std=c17 -Wall -Wextra -Werror -g -fPIC -D_GNU_SOURCE -Isrc \
               -I$(BUILD)/gen -fno-strict-aliasing -MMD -MP
OPT_CFLAGS  := -O2
PKG_CFLAGS   = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS  = $(shell pkg-config --libs cmocka 2>/dev/null)

ifneq ($(SAN),)
SAN_FLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer
ifeq ($(SAN),undefined)
SAN_FLAGS += -fno-sanitize-recover=all
endif
OPT_CFLAGS := -O1
endif

CFLAGS  ?=
LDFLAGS ?=
ALL_CFLAGS  = $(BASE_CFLAGS) $(OPT_CFLAGS) $(SAN_FLAGS) $(PKG_CFLAGS) $(CPPFLAGS) $(CFLAGS)
# Code that runs inside other programs (the preload library and the helper
# programs it is tested with) is never sanitized: a sanitizer runtime cannot be
# preloaded into arbitrary programs.
NOSAN_CFLAGS = $(BASE_CFLAGS) -O2 $(PKG_CFLAGS) $(CPPFLAGS) $(CFLAGS)

# ---- version: debian/changelog's, plus `git describe` in a git checkout ----
# (braces: the sed script's parentheses would end a $(shell ...))
VERSION_BASE := ${shell sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog 2>/dev/null}
GIT_TOP      := $(shell git rev-parse --show-toplevel 2>/dev/null)
GIT_REV      := $(if $(filter $(CURDIR),$(GIT_TOP)),$(shell git describe --always --dirty 2>/dev/null))
KILN_VERSION := $(or $(VERSION_BASE),unknown)$(if $(GIT_REV), (git $(GIT_REV)))
VERSION_H    := $(BUILD)/gen/kiln_version.h

# Rewritten only when the version changes, so that nothing else rebuilds.
$(VERSION_H): FORCE
	@mkdir -p $(@D)
	@printf '#define KILN_VERSION "%s"\n' '$(KILN_VERSION)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/src/common/version.o: $(VERSION_H)
# Installed paths baked into the program (src/cli/preload_path.c, config.c),
# rewritten like the version: `make PREFIX=/usr` rebuilds what uses them.
PATHS_H := $(BUILD)/gen/kiln_paths.h
$(PATHS_H): FORCE
	@mkdir -p $(@D)
	@printf '#define KILN_MULTIARCH "%s"\n#define KILN_PKGLIBDIR "%s"\n#define KILN_SYSCONFDIR "%s"\n' \
	    '$(MULTIARCH)' '$(PKGLIBDIR)' '$(SYSCONFDIR)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/src/cli/preload_path.o $(BUILD)/obj/src/cli/config.o: $(PATHS_H)
.PHONY: FORCE
FORCE:

# ---- sources by component ------------------------------------------------
COMMON_SRC   := $(wildcard src/common/*.c)
SHM_SRC      := $(wildcard src/shm/*.c)
IPC_SRC      := $(wildcard src/ipc/*.c)
REGISTRY_SRC := $(wildcard src/registry/*.c)
SERVER_SRC   := $(wildcard src/server/*.c)
TRACESVC_SRC := $(wildcard src/trace/service/*.c)
META_SRC     := $(wildcard src/meta/*.c src/meta/tools/*.c)
TRACE_SRC    := $(wildcard src/trace/*.c src/trace/hooks/*.c) $(TRACE_GEN_SRC)
CLI_SRC      := $(wildcard src/cli/*.c)

CORE_SRC := $(COMMON_SRC) $(SHM_SRC) $(IPC_SRC) $(REGISTRY_SRC) $(SERVER_SRC) \
            $(TRACESVC_SRC) $(META_SRC)

obj     = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
objnosan = $(patsubst %.c,$(BUILD)/obj-nosan/%.o,$(1))

LIBKILN       := $(BUILD)/libkiln.a
LIBTRACECORE  := $(BUILD)/libkiln-trace-core.a
KILN          := $(BUILD)/kiln
PRELOAD       := $(BUILD)/libkiln-trace.so
AUDIT         := $(BUILD)/libkiln-audit.so

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
UNIT_SUPPORT := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
HELPER_SRC := $(wildcard tests/integration/helpers/*.c)
HELPER_BINS := $(patsubst tests/integration/helpers/%.c,$(BUILD)/tests/helpers/%,$(HELPER_SRC))
BENCH_SRC  := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
# Benchmark programs that link nothing of kiln: never sanitized (they run
# under the preload library), and built for the tests too (test_bench_harness).
BENCH_STANDALONE := $(BUILD)/bench/trace_micro $(BUILD)/bench/calibrate $(BUILD)/bench/preload

MAN_SRC   := $(wildcard man/*.scd)
MAN_PAGES := $(patsubst man/%.scd,$(BUILD)/man/%,$(MAN_SRC))

.PHONY: all man deps check check-deb check-packages check-fidelity unit integration demo bench \
	install clean
.DEFAULT_GOAL := all

all: $(KILN) $(PRELOAD) $(AUDIT) man

man: $(MAN_PAGES)
$(BUILD)/man/%: man/%.scd | $(BUILD)/.deps-build-ok
	@mkdir -p $(@D)
	scdoc < $< > $@.tmp && mv $@.tmp $@

# ---- Debian packages: checked, or installed (make check/demo, as root) -----
DEPS_MODE := $(if $(filter check demo check-deb,$(MAKECMDGOALS)),,--check)
deps:
	@bash .ci/deps
$(BUILD)/.deps-build-ok: debian/control .ci/deps
	@mkdir -p $(@D)
	@bash .ci/deps --build $(DEPS_MODE)
	@touch $@
$(BUILD)/.deps-test-ok: debian/control .ci/deps
	@mkdir -p $(@D)
	@bash .ci/deps $(DEPS_MODE)
	@touch $@

$(BUILD)/obj/%.o: %.c | $(BUILD)/.deps-build-ok
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj-nosan/%.o: %.c | $(BUILD)/.deps-build-ok
	@mkdir -p $(@D)
	$(CC) $(NOSAN_CFLAGS) -c $< -o $@

$(LIBKILN): $(call obj,$(CORE_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# The preload library's code, sanitized, for unit tests of its pure parts.
# Not the hooks: they define open, stat, close... and a static link would
# pull them into any unit test that calls those.
$(LIBTRACECORE): $(call obj,$(filter-out src/trace/hooks/%,$(TRACE_SRC)))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(KILN): $(call obj,$(CLI_SRC)) $(LIBKILN)
	$(CC) $(SAN_FLAGS) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(LIBKILN) $(PKG_LIBS) -lpthread

# The preload library links only src/shm, src/ipc and its own code, and
# exports nothing but its hooks (the version script is generated from the
# hook table and the hand-written hooks' KT_EXPORT definitions). It is linked
# without the C start files (crti/crtbegin: _init, _fini, the TM-clone and
# frame registration): its one constructor runs from .init_array, and every
# process of a build would otherwise fault in their pages at start and exit.
# Bound lazily, not with -z now: resolving all of its ~50 libc imports at load
# cost every process 34k instructions in ld.so (callgrind, a no-op program:
# 179k with -z now, 146k lazily, 133k with an empty library), and most
# processes call a handful. Lazy PLT resolution is async-signal-safe and
# takes no lock, so the hook path keeps its rules. -Bsymbolic-functions:
# its calls to its own hooks (close, open...) bind locally, no lookup.
# -z noseparate-code: one read+execute segment for headers, code and
# read-only data instead of three (two mmap calls fewer at load, and a
# hello build's traced processes take 16k fewer page faults).
PRELOAD_MAP := $(BUILD)/libkiln-trace.map
$(PRELOAD_MAP): src/trace/hooks/exports.sh src/trace/hooks/hooks.def $(wildcard src/trace/hooks/*.c)
	@mkdir -p $(@D)
	sh src/trace/hooks/exports.sh "$(CC)" src/trace/hooks > $@.tmp && mv $@.tmp $@
# The library's own string functions (src/trace/hooks/string.c) must not be
# compiled back into calls to memcpy or memset.
$(BUILD)/obj-nosan/src/trace/hooks/string.o: NOSAN_CFLAGS += -fno-tree-loop-distribute-patterns
# Debian's hardening flags ask for -z now (LDFLAGS): not for this library.
comma := ,
PRELOAD_LDFLAGS = $(filter-out -Wl$(comma)-z$(comma)now -Wl$(comma)-znow,$(LDFLAGS))
# Each function in a section of its own, so that src/trace/hot-text.ld can
# pack the code every traced process runs into one or two 64 KiB windows.
$(call objnosan,$(TRACE_SRC) $(SHM_SRC) $(IPC_SRC)): NOSAN_CFLAGS += -ffunction-sections
# src/shm in the preload (and audit) library makes raw system calls
# (src/shm/sys.h says why).
$(call objnosan,$(SHM_SRC)): NOSAN_CFLAGS += -DKILN_SHM_RAW_SYSCALLS
PRELOAD_HOT := src/trace/hot-text.ld
$(PRELOAD): $(call objnosan,$(TRACE_SRC) $(SHM_SRC) $(IPC_SRC)) $(PRELOAD_MAP) $(PRELOAD_HOT)
	$(CC) -shared -nostartfiles -Wl,-z,defs -Wl,-Bsymbolic-functions -Wl,-z,noseparate-code \
	    -Wl,--version-script=$(PRELOAD_MAP) -Wl,-T,$(PRELOAD_HOT) $(PRELOAD_LDFLAGS) \
	    -o $@ $(filter %.o,$^) -ldl -lpthread

# The audit library (LD_AUDIT) for processes that reached for a hidden
# library (src/trace/hooks/loader.c): kiln's client without the hooks,
# exporting la_version and la_objsearch only. It gets its own libc in the
# audit namespace; only such processes pay for it.
AUDIT_SRC := $(wildcard src/trace/audit/*.c src/trace/*.c)
$(AUDIT): $(call objnosan,$(AUDIT_SRC) $(SHM_SRC) $(IPC_SRC)) src/trace/audit/audit.map
	$(CC) -shared -Wl,-z,defs -Wl,-z,now -Wl,--version-script=src/trace/audit/audit.map $(LDFLAGS) \
	    -o $@ $(filter %.o,$^) -ldl -lpthread

$(BUILD)/tests/unit/%: tests/unit/%.c $(call obj,$(UNIT_SUPPORT)) $(LIBTRACECORE) $(LIBKILN) \
    | $(BUILD)/.deps-test-ok
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(call obj,$(UNIT_SUPPORT)) \
	    $(LIBTRACECORE) $(LIBKILN) $(PKG_LIBS) $(CMOCKA_LIBS) -lpthread -ldl

$(BUILD)/tests/helpers/%: tests/integration/helpers/%.c | $(BUILD)/.deps-test-ok
	@mkdir -p $(@D)
	$(CC) $(NOSAN_CFLAGS) -Wno-unused-result -o $@ $< -lpthread

$(BUILD)/bench/%: bench/%.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -O2 $(PKG_CFLAGS) $(CFLAGS) -o $@ $< \
	    $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC)) $(PKG_LIBS) -lpthread

$(BENCH_STANDALONE): $(BUILD)/bench/%: bench/%.c | $(BUILD)/.deps-build-ok
	@mkdir -p $(@D)
	$(CC) $(NOSAN_CFLAGS) -o $@ $< -lpthread

# ---- tests ---------------------------------------------------------------
# The packaging test runs after the others (a package build takes both
# cores), and not under a sanitizer (the package is built without one).
check: unit integration $(if $(SAN),,check-deb)

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# The trace tests run twice: with the shared verdict cache (the default) and
# without it (--no-cache), which must give the same answers.
integration: all $(HELPER_BINS) $(BENCH_STANDALONE) | $(BUILD)/.deps-test-ok
	KILN_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q tests/integration
	KILN_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q --kiln-no-cache tests/integration/test_trace_*.py

# Real Debian source packages built under kiln trace (minutes; installs
# missing build dependencies as root under /tmp/kiln-bench.lock): the
# report's verdict, ranking and unused list (tests/packages).
check-packages: all
	KILN_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q tests/packages

# Slow, not in `check`: ./configure of real Debian packages in a clean
# buildd chroot against kiln trace on the polluted host (docs/fidelity.md;
# root, network, the machine-wide lock). FIDELITY_PACKAGES=nano,wget for a subset.
comma := ,
check-fidelity: all
	KILN_BUILD=$(abspath $(BUILD)) $(PYTHON) tests/fidelity/fidelity.py $(subst $(comma), ,$(FIDELITY_PACKAGES))

# ---- demo and benchmarks -------------------------------------------------
demo: all
	KILN_BUILD=$(abspath $(BUILD)) bash examples/demo.sh

# Each benchmark NAME is driven by bench/run-NAME (any executable script),
# which measures side by side, prints a table of ratios and writes
# bench/out/NAME.json.
BENCHES := $(patsubst bench/run-%,%,$(wildcard bench/run-*))
# Built by pattern rules only as prerequisites: keep them between runs.
.SECONDARY: $(BENCH_BINS) $(call obj,$(UNIT_SUPPORT))
bench: $(addprefix bench-,$(BENCHES))
bench-%: all $(BENCH_BINS)
	@mkdir -p bench/out
	KILN_BUILD=$(abspath $(BUILD)) bench/run-$*

# The Debian package built (from a copy of the tree), checked by lintian,
# unpacked with dpkg -x, its programs run from there: about 40 s.
check-deb: | $(BUILD)/.deps-test-ok $(if $(filter check,$(MAKECMDGOALS)),integration)
	$(PYTHON) -m pytest -q tests/package

# ---- install: the files the Debian package holds (debian/rules runs this) --
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(DOCDIR)/docs \
	    $(DESTDIR)$(DOCDIR)/examples
	install -m 0755 $(KILN) $(DESTDIR)$(BINDIR)/kiln
	install -m 0644 $(PRELOAD) $(DESTDIR)$(PKGLIBDIR)/libkiln-trace.so
	install -m 0644 $(AUDIT) $(DESTDIR)$(PKGLIBDIR)/libkiln-audit.so
	install -m 0644 $(filter %.1,$(MAN_PAGES)) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(filter %.5,$(MAN_PAGES)) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 completions/kiln $(DESTDIR)$(BASHCOMPDIR)/kiln
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 $(wildcard docs/*.md) $(DESTDIR)$(DOCDIR)/docs/
	install -m 0644 examples/config examples/Makefile.meta $(DESTDIR)$(DOCDIR)/examples/

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
