/* The trace server fills the shared verdict cache: see verdict_cache.h and
 * docs/verdict-cache.md for why nothing it inserts can go stale. */
#include "trace/service/verdict_cache.h"

#include "ipc/proto.h"
#include "trace/execfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITES (KILN_A_WRITE | KILN_A_CREATE | KILN_A_DELETE)

static uint64_t pid_words(void)
{
	unsigned long max = 4194304; /* the kernel's ceiling (PID_MAX_LIMIT) */
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
	if (f) {
		unsigned long v;
		if (fscanf(f, "%lu", &v) == 1 && v > 0 && v <= max)
			max = v;
		fclose(f);
	}
	return max / 64 + 1;
}

static int create_counters(struct verdict_cache *vc, const char *path, uint32_t recall_bits,
			   char *err, size_t errlen)
{
	uint64_t words = pid_words();
	size_t log_off = vc_log_offset(words), recall_off = vc_recall_offset(words);
	/* sparse: pages as used */
	size_t len = recall_off + ((size_t)recall_bits + 63) / 64 * sizeof(uint64_t);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		snprintf(err, errlen, "%s: cannot create the cache statistics file: %s", path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map the cache statistics file: %s", path,
			 strerror(errno));
		return -1;
	}
	vc->ctr = p;
	vc->ctr_len = len;
	vc->pid_words = words; /* the file's copy is for clients, who may scribble on it */
	vc->ctr->pid_words = words;
	vc->ctr->log_off = log_off;
	vc->ctr->log_slots = VC_LOG_SLOTS;
	vc->log_off = log_off;
	if (recall_bits) {
		vc->ctr->recall_off = recall_off;
		vc->ctr->recall_bits = recall_bits;
		vc->recall = (uint64_t *)((char *)p + recall_off);
		vc->recall_bits = recall_bits;
	}
	__atomic_store_n(&vc->ctr->magic, VC_COUNTERS_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

int verdict_cache_create(struct verdict_cache *vc, const char *path, struct sandbox *sbx,
			 uint32_t recall_bits, char *err, size_t errlen)
{
	*vc = (struct verdict_cache){ .policy = sbx->policy, .sbx = sbx };
	/* A root of 2^14 slots (128 KiB), not the map's default 2^18 (2 MiB):
	 * every traced process faults in the root pages its lookups touch, and
	 * a new process's lookups land all over a 2 MiB root (GNU hello's
	 * configure + make, 4,564 processes: 37,200 page faults in the root,
	 * 10,700 with this one; the map held 5,100 keys, 2.5 per bucket here).
	 * A build with far more keys goes on below overflow slots: one more
	 * load per lookup, still no system call.
	 * 256 MiB reserved, not the default 1 GiB: every process that attaches
	 * (and every child it forks) tears the reservation's page tables down
	 * when it exits or execs, about 6 us more for 1 GiB than for 256 MiB
	 * (spawn + exit of a program mapping either, 1,500 runs each; 4 MiB
	 * costs what 256 MiB does; a traced process doing one cached stat,
	 * `preload spawn-stat 1000` x 4: 932.7 us against 924.6 us, median
	 * wall per process). hello's map holds 5,000 keys in under
	 * 2 MiB; 256 MiB holds about two million. A full map stops taking
	 * inserts: the rest are round trips, never wrong answers.
	 * 1 MiB committed at first, not the map's default 4 MiB: committing
	 * is the server's fallocate before the build starts and tmpfs's
	 * freeing at its end (together 1 ms of `kiln trace`'s fixed 17); zlib's
	 * 1,500 keys fit, and a bigger build's map doubles as it fills (a
	 * process that attached before reads the new size with one fstat). */
	struct shmmap_params params = { .mode = 0400, .root_bits = 14, .tag = VC_TAG,
					.initial_size = 1ull << 20, .max_size = 256ull << 20 };
	if (shmmap_create(&vc->map, path, &params, err, errlen) < 0)
		return -1;
	char cpath[4096];
	if (snprintf(cpath, sizeof cpath, "%s%s", path, VC_COUNTERS_SUFFIX) >= (int)sizeof cpath) {
		snprintf(err, errlen, "%s: path too long", path);
		goto fail;
	}
	if (recall_bits > VC_RECALL_MAX)
		recall_bits = VC_RECALL_MAX;
	if (create_counters(vc, cpath, recall_bits, err, errlen) < 0)
		goto fail;
	return 0;
fail:
	shmmap_detach(&vc->map);
	unlink(path);
	return -1;
}

void verdict_cache_close(struct verdict_cache *vc)
{
	shmmap_detach(&vc->map);
	if (vc->ctr)
		munmap(vc->ctr, vc->ctr_len);
	vc->ctr = NULL;
}

/* Whether the value went in (a key holds its first value for the run). */
static bool put(struct verdict_cache *vc, const char *key, size_t klen, uint64_t value)
{
	if (vc->stop || !klen)
		return false;
	uint64_t winner;
	enum shmmap_status st = shmmap_insert(&vc->map, key, klen, value, &winner);
	if (st == SHMMAP_INSERTED)
		vc->inserts++;
	else if (st == SHMMAP_FULL || st == SHMMAP_CORRUPT) {
		vc->full++;
		vc->stop = true; /* clients ask the server for the rest: slower, never wrong */
	}
	return st == SHMMAP_INSERTED;
}

/* Under /proc, only what no process owns: /proc/filesystems, /proc/sys/...
 * (every libselinux-linked program reads /proc/filesystems; a third of a
 * configure run's connections were for it alone). /proc itself (its listing
 * names processes), /proc/PID, /proc/self and /proc/thread-self (the server
 * reads those as the asking client's) are never area nodes. The symlinks
 * of the top level (/proc/mounts, /proc/net) are caught by the client's
 * RESOLVE_NO_SYMLINKS check, as everywhere. */
static bool proc_clean(const char *q)
{
	if (strncmp(q, "/proc", 5) || (q[5] != '\0' && q[5] != '/'))
		return true;
	const char *c = q + 5;
	if (!*c++ || !*c)
		return false;
	size_t n = strcspn(c, "/");
	if ((n == 4 && !memcmp(c, "self", 4)) || (n == 11 && !memcmp(c, "thread-self", 11)))
		return false;
	return strspn(c, "0123456789") < n;
}

/* Canonical node q is visible whatever the file system holds, as the
 * server's walk decides it (sandbox.c, visibility): the rule that governs
 * it shows it (allow, read), or hides it (deny) while q leads to a visible
 * area below (the invoking user's home, hidden by the chroot profile, on
 * the way to a build directory inside it); a rule that asks the registry
 * depends on the file. And q is not a per-process part of /proc. `last`:
 * q is the walk's end (/proc is a clean step on the way to
 * /proc/filesystems, never an end). */
static bool node_clean(const struct policy *p, const char *q, bool last)
{
	if (!strcmp(q, "/proc") ? last : !proc_clean(q))
		return false;
	enum policy_action a = policy_action_for(p, q);
	return a < POLICY_ASK || (a == POLICY_DENY && policy_leads_to_visible(p, q, strlen(q)));
}

/* Walks `path` lexically ("." dropped, ".." popping) as the server's walk
 * does when no symlink is met, checking every node it visits; the lexical
 * result goes to out (KILN_PATH_MAX + 1 bytes). `end_shown`: the end must
 * be shown by its own rule, not only lead to a visible area (a directory
 * hidden but on the way is listed with only that way shown: neither its
 * listing nor its names are an area's). */
static bool walk_clean(const struct policy *p, const char *path, char *out, bool end_shown)
{
	size_t len = 0;
	const char *c = path;
	for (;;) {
		while (*c == '/')
			c++;
		if (!*c)
			break;
		size_t n = strcspn(c, "/");
		if (n == 1 && c[0] == '.') {
		} else if (n == 2 && c[0] == '.' && c[1] == '.') {
			while (len && out[len - 1] != '/')
				len--;
			if (len)
				len--;
		} else {
			if (len + 1 + n > KILN_PATH_MAX)
				return false;
			out[len++] = '/';
			memcpy(out + len, c, n);
			len += n;
			out[len] = '\0';
			if (!node_clean(p, out, c[n] == '\0' || !c[n + strspn(c + n, "/")]))
				return false;
		}
		c += n;
	}
	if (!len)
		out[len++] = '/';
	out[len] = '\0';
	return !end_shown || policy_action_for(p, out) < POLICY_ASK;
}

int verdict_cache_area_verdict(const struct policy *p, const char *path, unsigned access)
{
	char norm[KILN_PATH_MAX + 1];
	if (path[0] != '/' || strlen(path) > KILN_PATH_MAX || !walk_clean(p, path, norm, false))
		return -1;
	unsigned writes = access & WRITES;
	if (!writes || policy_action_for(p, norm) == POLICY_ALLOW)
		return KILN_V_ALLOW;
	/* A write or delete outside the writable areas is refused whether the
	 * path exists or not; creating a name is not when it is an existing
	 * directory (mkdir -p): that depends on the state, so it is asked. */
	return (writes & (KILN_A_WRITE | KILN_A_DELETE)) ? KILN_V_DENY : -1;
}

/* dir is absolute, lexically clean, and shown by its own rule with every
 * node on its way: what a directory's listing or names value needs first. */
static bool dir_shown_clean(const struct policy *p, const char *dir)
{
	char norm[KILN_PATH_MAX + 1];
	return dir[0] == '/' && strlen(dir) <= KILN_PATH_MAX && walk_clean(p, dir, norm, true) &&
	       !strcmp(norm, dir);
}

bool verdict_cache_area_listing(const struct policy *p, const char *dir)
{
	size_t dl = strlen(dir);
	if (!dir_shown_clean(p, dir))
		return false;
	/* An entry is hidden only by a hiding or asking rule for it or below. */
	for (size_t i = 0; i < p->n; i++) {
		const struct policy_rule *r = &p->rules[i];
		if (r->action >= POLICY_ASK &&
		    (dl == 1 || (r->len > dl && !strncmp(r->prefix, dir, dl) && r->prefix[dl] == '/')))
			return false;
	}
	return true;
}

bool verdict_cache_area_names(const struct policy *p, const char *dir)
{
	size_t dl = strlen(dir);
	if (dl <= 1 || !dir_shown_clean(p, dir) ||
	    (!strncmp(dir, "/proc", 5) && (dir[5] == '\0' || dir[5] == '/')))
		return false;
	/* A name X of dir is covered by the rules covering dir (walk_clean
	 * checked those) and by a rule for dir/X itself; rules deeper down
	 * cover other nodes. A rule for dir/X with the action every other name
	 * of dir has (the build directory `allow`ed inside /tmp) changes
	 * nothing for X; any other withholds the value. */
	enum policy_action here = policy_action_for(p, dir);
	for (size_t i = 0; i < p->n; i++) {
		const struct policy_rule *r = &p->rules[i];
		if (r->len > dl + 1 && !strncmp(r->prefix, dir, dl) && r->prefix[dl] == '/' &&
		    !memchr(r->prefix + dl + 1, '/', r->len - dl - 1) && r->action != here)
			return false;
	}
	return true;
}

/* The 'S' value of path's directory, once a name in it was answered ALLOW by
 * the area rule: any other name there would be too (same walk but for one
 * clean last node, no rule below the directory to make it differ). */
static void put_names(struct verdict_cache *vc, const char *path, unsigned access, unsigned qflags)
{
	const char *slash = strrchr(path, '/');
	size_t dl = (size_t)(slash - path);
	char dir[KILN_PATH_MAX + 1];
	if (!dl || !slash[1] || dl > KILN_PATH_MAX)
		return;
	memcpy(dir, path, dl);
	dir[dl] = '\0';
	if (!verdict_cache_area_names(vc->policy, dir))
		return;
	char key[SHMMAP_MAX_KEY];
	put(vc, key, vc_key_names(key, dir, dl, access, qflags), vc_value(VC_AREA, KILN_V_ALLOW));
}

static long fd_pread(void *ctx, void *buf, size_t n, long off)
{
	return pread(*(int *)ctx, buf, n, off);
}

/* VC_F_PLAIN_EXEC when the program at path is one the exec check would
 * run with nothing to report or check further (execfile.h), read here as
 * the client would read it; else 0 (and the client reads it itself). Only
 * a regular file is opened (never a device or a FIFO). */
static unsigned exec_flags(const char *path, unsigned qflags)
{
	int nofollow = (qflags & KILN_Q_NOFOLLOW) != 0;
	struct stat st;
	if (fstatat(AT_FDCWD, path, &st, nofollow ? AT_SYMLINK_NOFOLLOW : 0) != 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0)
		return 0;
	char interp[256];
	unsigned facts = ~0u;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		facts = kt_execfile_inspect(st.st_mode, fd_pread, &fd, interp, sizeof interp);
	close(fd);
	return facts == 0 ? VC_F_PLAIN_EXEC : 0;
}

bool verdict_cache_has(const struct verdict_cache *vc, const char *path, unsigned access,
		       unsigned qflags)
{
	char key[SHMMAP_MAX_KEY];
	uint64_t v;
	size_t klen = vc_key_verdict(key, path, strlen(path), access, qflags);
	return klen && shmmap_lookup((struct shmmap *)&vc->map, key, klen, &v);
}

void verdict_cache_query(struct verdict_cache *vc, const char *path, unsigned access,
			 unsigned qflags, const struct sbx_decision *d)
{
	if (vc->stop || d->reason == SBX_FAILED)
		return;
	char key[SHMMAP_MAX_KEY];
	size_t klen = vc_key_verdict(key, path, strlen(path), access, qflags);
	if (d->stable) {
		unsigned flags = access == KILN_A_EXEC && d->verdict == KILN_V_ALLOW
					 ? exec_flags(path, qflags)
					 : 0;
		put(vc, key, klen, vc_value_flags(VC_STABLE, d->verdict, flags));
		return;
	}
	/* Only when the decision just made agrees (it may not: the path has a
	 * symlink on its way right now). */
	int area = verdict_cache_area_verdict(vc->policy, path, access);
	/* A write probe outside the writable areas depends on whether the
	 * file exists (EACCES or the kernel's ENOENT): asked every time. */
	if ((qflags & KILN_Q_PROBE) && area != KILN_V_ALLOW)
		return;
	if (area >= 0 && (unsigned)area == d->verdict) {
		put(vc, key, klen, vc_value(VC_AREA, (unsigned)area));
		if (area == KILN_V_ALLOW)
			put_names(vc, path, access, qflags);
	}
}

bool verdict_cache_recall(struct verdict_cache *vc, const char *path, unsigned access,
			  unsigned qflags, const struct sbx_decision *d, uint32_t index)
{
	if (vc->stop || index >= vc->recall_bits || !sbx_stable_allow(d))
		return false;
	char key[SHMMAP_MAX_KEY];
	size_t klen = vc_key_verdict(key, path, strlen(path), access, qflags);
	unsigned flags = access == KILN_A_EXEC ? exec_flags(path, qflags) : 0;
	return put(vc, key, klen, vc_value_recalled(KILN_V_ALLOW, flags, index));
}

uint64_t *verdict_cache_recall_bitmap(const struct verdict_cache *vc, uint32_t *bits)
{
	*bits = vc->recall ? vc->recall_bits : 0;
	return vc->recall;
}

bool verdict_cache_recall_done(struct verdict_cache *vc, const char *path, unsigned access,
			       unsigned qflags, uint32_t index)
{
	char key[SHMMAP_MAX_KEY];
	uint64_t v;
	unsigned kind, ans;
	size_t klen = vc_key_verdict(key, path, strlen(path), access, qflags);
	if (!klen || !shmmap_lookup(&vc->map, key, klen, &v) || !vc_parse(v, &kind, &ans) ||
	    !(vc_flags(v) & VC_F_RECALLED) || vc_recall_index(v) != index)
		return false;
	shmmap_replace(&vc->map, key, klen, v,
		       vc_value_flags(VC_STABLE, ans, vc_flags(v) & ~(unsigned)VC_F_RECALLED));
	return true;
}

long verdict_cache_recalled(const struct verdict_cache *vc, const char *path, unsigned access,
			    unsigned qflags)
{
	char key[SHMMAP_MAX_KEY];
	uint64_t v;
	unsigned kind, ans;
	size_t klen = vc_key_verdict(key, path, strlen(path), access, qflags);
	if (!klen || !shmmap_lookup((struct shmmap *)&vc->map, key, klen, &v) ||
	    !vc_parse(v, &kind, &ans) || !(vc_flags(v) & VC_F_RECALLED))
		return -1;
	return (long)vc_recall_index(v);
}

void verdict_cache_listing(struct verdict_cache *vc, const char *dir, const struct sbx_decision *d,
			   const char *entries, size_t count, const unsigned char *hidden)
{
	if (vc->stop || d->reason == SBX_FAILED)
		return;
	size_t dl = strlen(dir);
	char key[SHMMAP_MAX_KEY];
	if (!d->stable) {
		if (d->verdict == KILN_V_ALLOW && verdict_cache_area_listing(vc->policy, dir))
			put(vc, key, vc_key_listing(key, dir, dl), vc_value(VC_AREA, VC_LIST_NONE));
		return;
	}
	if (d->verdict != KILN_V_ALLOW) {
		put(vc, key, vc_key_listing(key, dir, dl), vc_value(VC_STABLE, VC_LIST_ALL));
		return;
	}
	if (!d->exists)
		return;
	/* Entries first, so a client that finds the listing key finds them. */
	char node[SBX_BUF + 256 + 2];
	size_t nl = strlen(d->node);
	if (nl + 2 + 255 >= sizeof node)
		return;
	memcpy(node, d->node, nl);
	if (!(nl == 1 && node[0] == '/'))
		node[nl++] = '/';
	size_t pre = vc_key_entry_prefix(key, dir, dl);
	const char *p = entries;
	for (size_t i = 0; i < count; i++) {
		uint16_t len;
		memcpy(&len, p, sizeof len);
		p += sizeof len;
		memcpy(node + nl, p, len);
		node[nl + len] = '\0';
		if (sandbox_path_stable(vc->sbx, node))
			put(vc, key, vc_key_entry_name(key, pre, p, len),
			    vc_value(VC_STABLE, hidden[i] ? 1 : 0));
		p += len;
	}
	put(vc, key, vc_key_listing(key, dir, dl), vc_value(VC_STABLE, VC_LIST_ENTRIES));
}

void verdict_cache_data(struct verdict_cache *vc, unsigned kind, unsigned arg, const char *a,
			size_t alen, const char *b, size_t blen, unsigned answer)
{
	if (vc->stop)
		return;
	char key[SHMMAP_MAX_KEY];
	size_t klen = vc_key_data(key, kind, arg, a, alen, b, blen);
	if (klen)
		put(vc, key, klen, vc_value(VC_STABLE, answer));
}

void verdict_cache_stats(const struct verdict_cache *vc, struct verdict_cache_stats *st)
{
	*st = (struct verdict_cache_stats){ 0 };
	if (vc->ctr) {
		for (int i = 0; i < VC_SHARDS; i++) {
			const struct vc_shard *s = &vc->ctr->shard[i];
			st->hits += __atomic_load_n(&s->hits, __ATOMIC_RELAXED);
			st->misses += __atomic_load_n(&s->misses, __ATOMIC_RELAXED);
			st->listings += __atomic_load_n(&s->listings, __ATOMIC_RELAXED);
			st->ahead += __atomic_load_n(&s->ahead, __ATOMIC_RELAXED);
		}
	}
	struct shmmap_stats ms;
	shmmap_stats((struct shmmap *)&vc->map, &ms);
	st->map_bytes = ms.bytes_committed;
	st->entries = ms.entries;
}

/* A slot is believed only if it is committed, its path is absolute,
 * NUL-terminated and lexically clean as the client keys it (no empty, "." or
 * ".." component), and the map, which only the server writes, holds the
 * 'S' value of its directory for its access class: then the server itself
 * said that every name there is allowed. */
static bool slot_path_clean(const char *p)
{
	if (p[0] != '/' || !p[1])
		return false;
	for (const char *c = p + 1;;) {
		size_t n = strcspn(c, "/");
		if (!n || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[n])
			return true;
		c += n + 1;
	}
}

static bool slot_read(const struct verdict_cache *vc, uint64_t i)
{
	return vc->log_read[i / 8] & (1u << (i % 8));
}

size_t verdict_cache_read_log(struct verdict_cache *vc,
			      void (*seen)(void *ctx, pid_t pid, const char *path, unsigned access),
			      void *ctx)
{
	if (!vc->ctr)
		return 0;
	uint64_t next = __atomic_load_n(&vc->ctr->log_next, __ATOMIC_ACQUIRE);
	if (next > VC_LOG_SLOTS)
		next = VC_LOG_SLOTS;
	const struct vc_log_slot *slots =
		(const struct vc_log_slot *)((const char *)vc->ctr + vc->log_off);
	size_t believed = 0;
	for (uint64_t i = vc->log_from; i < next; i++) {
		if (slot_read(vc, i))
			continue;
		uint32_t commit = __atomic_load_n(&slots[i].commit, __ATOMIC_ACQUIRE);
		if ((commit >> 16) != VC_LOG_MAGIC)
			continue; /* being written, or its writer was killed: next time */
		vc->log_read[i / 8] |= (unsigned char)(1u << (i % 8));
		char path[VC_LOG_PATH];
		memcpy(path, slots[i].path, sizeof path);
		int32_t pid = slots[i].pid;
		if (!memchr(path, '\0', sizeof path) || !slot_path_clean(path))
			continue;
		unsigned access = (commit >> 8) & 0xff, qflags = commit & 0xff;
		const char *slash = strrchr(path, '/');
		size_t dl = (size_t)(slash - path), plen = strlen(path);
		char key[SHMMAP_MAX_KEY];
		size_t klen = vc_key_names(key, path, dl, access, qflags);
		uint64_t v;
		unsigned kind, ans;
		if (!dl || !klen || !shmmap_lookup(&vc->map, key, klen, &v) ||
		    !vc_parse(v, &kind, &ans) || kind != VC_AREA || ans != KILN_V_ALLOW)
			continue;
		seen(ctx, (pid_t)pid, path, access);
		/* What the 'S' value says of every name there, said of this one. */
		put(vc, key, vc_key_verdict(key, path, plen, access, qflags),
		    vc_value(VC_AREA, KILN_V_ALLOW));
		believed++;
	}
	while (vc->log_from < next && slot_read(vc, vc->log_from))
		vc->log_from++;
	vc->logged += believed;
	return believed;
}

const uint64_t *verdict_cache_pids(const struct verdict_cache *vc, size_t *words)
{
	if (!vc->ctr) {
		*words = 0;
		return NULL;
	}
	*words = (size_t)vc->pid_words;
	return (const uint64_t *)(vc->ctr + 1);
}
