/* When a call that makes glibc load its own data needs the checked window
 * (docs/glibc-data.md): not when the server planned its data set clean for
 * the run (KILN_CLEAN), nor once a window around the same kind of call met
 * nothing hidden in this process (glibc has then loaded, or given up on,
 * what it needed: an NSS module that could not be loaded is not tried
 * again), nor, for the time zone, while TZ is what the last window saw
 * (glibc reads the zone file again only when TZ changes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/kt.h"

static const char *const set_names[KT_DATA_NSETS] = {
	"nss:aliases", "nss:ethers", "nss:group", "nss:gshadow", "nss:hosts", "nss:initgroups",
	"nss:netgroup", "nss:networks", "nss:passwd", "nss:protocols", "nss:publickey", "nss:rpc",
	"nss:services", "nss:shadow", "gconv", "tz",
};

/* Bit s: set s is clean for this process (planned, or learned). */
static KT_HOT _Atomic unsigned clean_sets;
static KT_HOT _Atomic int planned_read;

/* The time zone a window last loaded: a 64-bit hash of the TZ value (0:
 * none yet). Two values of TZ in one process that hash alike would make the
 * second one skip its window; with FNV-1a over 64 bits, not a real risk. */
static KT_HOT _Atomic uint64_t tz_seen;

static uint64_t tz_hash(const char *tz)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *tz; tz++)
		h = (h ^ (unsigned char)*tz) * 0x100000001b3ull;
	return h ? h : 1;
}

static unsigned planned(void)
{
	if (atomic_load_explicit(&planned_read, memory_order_acquire))
		return atomic_load_explicit(&clean_sets, memory_order_relaxed);
	unsigned bits = 0;
	const char *list = kt_env(KILN_ENV_CLEAN);
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, " ");
		for (int s = 0; s < KT_DATA_NSETS; s++)
			if (strlen(set_names[s]) == n && !memcmp(p, set_names[s], n))
				bits |= 1u << s;
		p += n + (p[n] == ' ');
	}
	atomic_fetch_or(&clean_sets, bits);
	atomic_store_explicit(&planned_read, 1, memory_order_release);
	return atomic_load_explicit(&clean_sets, memory_order_relaxed);
}

static int tz_is_seen(const char *tz)
{
	return atomic_load_explicit(&tz_seen, memory_order_relaxed) == tz_hash(tz);
}

static void tz_remember(const char *tz)
{
	atomic_store_explicit(&tz_seen, tz_hash(tz), memory_order_relaxed);
}

int kt_planned_token(const char *prefix, const char *name)
{
	const char *list = kt_env(KILN_ENV_CLEAN);
	size_t pl = strlen(prefix), nl = strlen(name);
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, " ");
		if (n == pl + nl && !memcmp(p, prefix, pl) && !memcmp(p + pl, name, nl))
			return 1;
		p += n + (p[n] == ' ');
	}
	return 0;
}

int kt_data_window(enum kt_data_set set, struct kt_window *w)
{
	kt_init();
	unsigned clean = planned();
	if (set == KT_DATA_TZ) {
		const char *tz = getenv("TZ");
		if (!tz ? (clean & (1u << set)) != 0 : tz_is_seen(tz))
			return 0;
	} else if (set == KT_DATA_GCONV) {
		/* GCONV_PATH's directories come first, and the plan did not see them. */
		if ((clean & (1u << set)) && !getenv("GCONV_PATH"))
			return 0;
	} else if (clean & (1u << set)) {
		return 0;
	}
	kt_enter();
	if (kt_window_open(w) < 0) {
		kt_leave();
		return 0; /* no window on this kernel: called unchecked */
	}
	return 1;
}

void kt_data_done(enum kt_data_set set, struct kt_window *w)
{
	int met_hidden = kt_window_close(w);
	kt_leave();
	if (set == KT_DATA_TZ) {
		const char *tz = getenv("TZ");
		if (tz)
			tz_remember(tz);
		else if (!met_hidden)
			atomic_fetch_or(&clean_sets, 1u << set);
	} else if (set != KT_DATA_GCONV && !met_hidden) {
		atomic_fetch_or(&clean_sets, 1u << set);
	}
}
