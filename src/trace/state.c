/* Process-wide state of the preload library: the environment captured at
 * start-up (put back into every exec), the re-entrancy guard, lazily resolved
 * real symbols and the coverage marks.
 *
 * The constructor only copies a handful of environment strings (no dlsym, no
 * connect, no mmap): the budget is about 50 us per process for everything. */
#include <dlfcn.h>
#include <string.h>
#include <sys/prctl.h>

#include "trace/kt.h"
#include "common/rawsys.h"

extern char **environ;

__thread int kt_guard __attribute__((tls_model("initial-exec")));
__thread int kt_vfork_child __attribute__((tls_model("initial-exec")));
KT_HOT int kt_marks;
KT_HOT _Atomic int kt_no_openat2;

/* kiln's variables, restored into every exec environment. */
#define KEPT(name) { name, sizeof name - 1 }
static const struct {
	const char *name;
	size_t len; /* known here: every process would strlen them all */
} kept[] = {
	KEPT("LD_PRELOAD"), KEPT(KILN_ENV_SOCKET), KEPT(KILN_ENV_PRELOAD), KEPT(KILN_ENV_CACHE),
	KEPT(KILN_ENV_RUNDIR), KEPT(KILN_ENV_NAMESPACES), KEPT("KILN_TRACE_MARKS"),
	KEPT(KILN_ENV_TRUSTED), KEPT(KILN_ENV_LOCALES), KEPT(KILN_ENV_CLEAN),
};
#define NKEPT (sizeof kept / sizeof kept[0])

static char env_store[3 * 4096];
static KT_HOT const char *env_ptr[NKEPT];   /* "NAME=value" inside env_store */
static KT_HOT const char *env_list[NKEPT];  /* the non-NULL ones, packed */
static KT_HOT size_t env_count;
static KT_HOT _Atomic int init_state;        /* 0 not yet, 1 in progress, 2 done */

static size_t name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');
	return eq ? (size_t)(eq - entry) : strlen(entry);
}

/* A program kiln ran by fd would be named after the fd's number. */
static void set_comm(const char *name)
{
	kt_sys2(SYS_prctl, PR_SET_NAME, name);
}

static void capture(void)
{
	size_t used = 0;
	for (char **e = environ; e && *e; e++) {
		if (!kt_may_be_kept(*e))
			continue;
		size_t nl = name_len(*e);
		if (nl == sizeof KILN_ENV_EXEC_NAME - 1 && !memcmp(*e, KILN_ENV_EXEC_NAME, nl))
			set_comm(*e + nl + 1);
		for (size_t k = 0; k < NKEPT; k++) {
			if (env_ptr[k] || kept[k].len != nl || memcmp(*e, kept[k].name, nl) != 0)
				continue;
			size_t len = strlen(*e) + 1;
			if (used + len > sizeof env_store)
				break; /* absurdly long: not kept */
			memcpy(env_store + used, *e, len);
			env_ptr[k] = env_store + used;
			used += len;
		}
	}
	for (size_t k = 0; k < NKEPT; k++)
		if (env_ptr[k])
			env_list[env_count++] = env_ptr[k];
}

void kt_init(void)
{
	if (atomic_load_explicit(&init_state, memory_order_acquire) == 2)
		return;
	int expect = 0;
	if (!atomic_compare_exchange_strong(&init_state, &expect, 1))
		return; /* done, or being done by another thread right now */
	capture();
	atomic_store_explicit(&init_state, 2, memory_order_release);
	const char *m = kt_env("KILN_TRACE_MARKS");
	kt_marks = m && m[0] == '1';
	/* valgrind puts its own preload libraries first in its client's
	 * LD_PRELOAD (and takes them out again for a child it does not
	 * follow). It does not emulate openat2, and its core, not this
	 * library, makes the client's system calls: a checked window would
	 * trap every one of them (SIGSYS kills valgrind). */
	const char *pre = kt_env("LD_PRELOAD");
	if (pre && strstr(pre, "/vgpreload_core-")) {
		atomic_store_explicit(&kt_no_openat2, 1, memory_order_relaxed);
		kt_window_disable();
	}
}

const char *kt_env(const char *name)
{
	if (atomic_load_explicit(&init_state, memory_order_acquire) != 2)
		return NULL;
	size_t nl = strlen(name);
	for (size_t k = 0; k < NKEPT; k++)
		if (env_ptr[k] && memcmp(env_ptr[k], name, nl) == 0 && env_ptr[k][nl] == '=')
			return env_ptr[k] + nl + 1;
	return NULL;
}

const char *const *kt_env_all(size_t *n)
{
	if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) {
		*n = 0;
		return env_list;
	}
	*n = env_count;
	return env_list;
}

void kt_mark(int which)
{
	kt_close(which);
}

void *kt_real(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (p)
		return p;
	kt_guard++;
	p = dlsym(RTLD_NEXT, name);
	kt_guard--;
	atomic_store_explicit(slot, p, memory_order_release);
	return p;
}

__attribute__((constructor)) static void kt_constructor(void)
{
	kt_init();
	if (kt_marks)
		kt_mark(KT_MARK_START);
}
