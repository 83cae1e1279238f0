/* The client side of the shared verdict cache (docs/verdict-cache.md): the
 * map the trace server fills, consulted before every round trip.
 *
 * The map is attached lazily on a process's first question (raw open
 * O_RDONLY, mapped PROT_READ: this process can never write a verdict), its
 * fd moved above KT_FD_MIN like the connections and protected the same way.
 * A map that cannot be opened, fails its header check or lacks the verdict
 * cache's header tag turns the cache off for this process, with one
 * message: every question then takes the round trip, as with --no-cache.
 *
 * A STABLE value is the answer. An AREA value is the answer only if the path
 * has no symlink on its way right now: openat2(O_PATH, RESOLVE_NO_SYMLINKS),
 * the same moment a round trip would have had the server look; otherwise the
 * server is asked.
 *
 * A name with no verdict of its own, in a directory whose 'S' value gives
 * every name there the AREA verdict ALLOW (a fresh temporary file), is
 * answered the same way once the access is written into the access log.
 *
 * A recalled value (a key the last build of the same sandbox asked, put in
 * before anyone asked it) is used only after its bit in the recall bitmap is
 * set: how the server hears that the path was used.
 *
 * Statistics go to a separate, client-writable file (sharded counters and a
 * pid bitmap): relaxed atomic adds on a cache line shared only with the
 * threads of the same shard, which is chosen by thread id (a process's first
 * asking thread: by pid). The access log is in the same file. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "trace/kt.h"
#include "common/rawsys.h"
#include "trace/vcache.h"

#define KT_FD_MIN 100

enum { UNTRIED, ATTACHING, READY, OFF };

static KT_HOT _Atomic int state;
static KT_HOT struct shmmap map;
static KT_HOT struct vc_counters *ctr;
static KT_HOT uint64_t *pid_bits;
static KT_HOT uint64_t pid_words;
static KT_HOT struct vc_log_slot *log_slots;
static KT_HOT uint64_t log_nslots;
static KT_HOT uint64_t *recall_words;
static KT_HOT uint64_t recall_nbits;
/* This thread's shard + 1 (0: not chosen yet). Per thread, not per
 * process: two threads adding to one cache line take turns owning it, a
 * line transfer between cores on every hit. */
static KT_TLS int thread_shard;
static KT_HOT _Atomic int mark_pending; /* a forked child not yet counted as a process */
/* Questions this process's other threads asked the server while one thread
 * was attaching (the statistics file not mapped yet): misses, counted once
 * it is. */
static KT_HOT _Atomic unsigned long unattached_misses;

/* ---- attach ---------------------------------------------------------------- */

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

static void say_off(const char *path, const char *why)
{
	char msg[768];
	size_t n = put(msg, 0, sizeof msg, "kiln: verdict cache ");
	n = put(msg, n, sizeof msg, path);
	n = put(msg, n, sizeof msg, ": ");
	n = put(msg, n, sizeof msg, why);
	n = put(msg, n, sizeof msg, "; this process asks the trace server for every check\n");
	kt_write(2, msg, n);
}

static void set_pid_bit(int pid)
{
	if (ctr && pid >= 0 && (uint64_t)pid / 64 < pid_words)
		__atomic_fetch_or(&pid_bits[pid / 64], 1ull << (pid % 64), __ATOMIC_RELAXED);
}

static void mark_pid(int pid)
{
	if (!ctr)
		return;
	thread_shard = pid % VC_SHARDS + 1;
	/* A read first: in a forked child the file's pages are not mapped yet,
	 * and a read fault maps the pages around it (the shards' page and the
	 * bitmap's first ones, for pids under 491,520) where a write fault maps
	 * one page. One page fault per forked child instead of two. */
	(void)__atomic_load_n(&ctr->magic, __ATOMIC_RELAXED);
	set_pid_bit(pid);
}

/* Opens the statistics file: the map's path with VC_COUNTERS_SUFFIX. That
 * path is in the run directory, whose socket's path fits a sockaddr_un
 * (108 bytes: kiln trace makes it only where that fits), so a small buffer holds
 * it: this runs once per process at the bottom of the first question's
 * stack, below its question buffer, where a path buffer of PATH_MAX made
 * one stack page fault more in about half of the processes
 * (docs/benchmarks.md, the twenty-second session). */
static long open_counters(const char *path)
{
	char p[256];
	size_t l = strlen(path);
	if (l + sizeof VC_COUNTERS_SUFFIX > sizeof p)
		return -ENAMETOOLONG;
	memcpy(p, path, l);
	memcpy(p + l, VC_COUNTERS_SUFFIX, sizeof VC_COUNTERS_SUFFIX);
	return kt_sys4(SYS_openat, AT_FDCWD, p, O_RDWR | O_CLOEXEC, 0);
}

/* The statistics file: optional (without it nothing is counted). Not
 * inlined: it runs once per process, get() on every question. */
static __attribute__((noinline)) void attach_counters(const char *path)
{
	long fd = open_counters(path);
	if (fd < 0)
		return;
	struct stat st;
	long r = kt_sys2(SYS_fstat, fd, &st);
	long addr = -1;
	if (r == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= sizeof(struct vc_counters))
		addr = kt_sys6(SYS_mmap, 0, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	kt_close((int)fd);
	if (kt_sys_failed(addr))
		return;
	struct vc_counters *c = (struct vc_counters *)addr;
	uint64_t room = ((uint64_t)st.st_size - sizeof *c) / sizeof(uint64_t);
	if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != VC_COUNTERS_MAGIC) {
		kt_sys2(SYS_munmap, addr, st.st_size);
		return;
	}
	uint64_t words = __atomic_load_n(&c->pid_words, __ATOMIC_RELAXED);
	pid_words = words < room ? words : room;
	pid_bits = (uint64_t *)(c + 1);
	uint64_t off = __atomic_load_n(&c->log_off, __ATOMIC_RELAXED);
	uint64_t ns = __atomic_load_n(&c->log_slots, __ATOMIC_RELAXED);
	if (off >= vc_counters_size(pid_words) && off % 8 == 0 && off <= (uint64_t)st.st_size &&
	    ns <= ((uint64_t)st.st_size - off) / VC_LOG_SLOT) {
		log_slots = (struct vc_log_slot *)(addr + (long)off);
		log_nslots = ns;
	}
	off = __atomic_load_n(&c->recall_off, __ATOMIC_RELAXED);
	uint64_t nb = __atomic_load_n(&c->recall_bits, __ATOMIC_RELAXED);
	if (off >= vc_counters_size(pid_words) && off % 8 == 0 && off <= (uint64_t)st.st_size &&
	    nb <= VC_RECALL_MAX && (nb + 63) / 64 <= ((uint64_t)st.st_size - off) / 8) {
		recall_words = (uint64_t *)(addr + (long)off);
		recall_nbits = nb;
	}
	ctr = c;
	mark_pid(kt_getpid());
}

static struct shmmap *attach(void)
{
	const char *path = kt_env(KILN_ENV_CACHE);
	if (!path || !*path)
		return NULL; /* --no-cache: not an error */
	long fd = kt_sys4(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		say_off(path, "cannot open it");
		return NULL;
	}
	long hi = kt_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, KT_FD_MIN);
	if (hi >= 0) {
		kt_close((int)fd);
		fd = hi;
	}
	char err[256];
	if (shmmap_attach_fd(&map, (int)fd, SHMMAP_RDONLY, err, sizeof err) != 0) {
		kt_close((int)fd);
		say_off(path, err);
		return NULL;
	}
	map.own_fd = 1;
	if (map.tag != VC_TAG) {
		shmmap_detach(&map);
		say_off(path, "not a kiln verdict cache of format 2");
		return NULL;
	}
	attach_counters(path);
	return &map;
}

/* In a vfork child: the parent's map if it has one (the child counted as a
 * process on its first question, in the pid bitmap only: the shard is the
 * parent's), never an attach of its own (its fd would be recorded in the
 * parent's memory but open only in the child). */
static struct shmmap *get_in_vfork_child(int st)
{
	if (st != READY || kt_vfork_child == KT_VFORK_NO_FDS)
		return NULL;
	if (kt_vfork_child == KT_VFORK_CHILD) {
		set_pid_bit(kt_getpid());
		kt_vfork_child = KT_VFORK_COUNTED;
	}
	return &map;
}

/* The map, or NULL. `asking`: the caller's question counts as a hit or a
 * miss, and one asked while another thread attaches goes to the server. */
static struct shmmap *get(int asking)
{
	int st = atomic_load_explicit(&state, memory_order_acquire);
	if (__builtin_expect(st == READY && !kt_vfork_child, 1))
		return &map;
	if (kt_vfork_child)
		return get_in_vfork_child(st);
	if (st == UNTRIED && atomic_compare_exchange_strong(&state, &st, ATTACHING)) {
		struct shmmap *m = attach();
		atomic_store_explicit(&state, m ? READY : OFF, memory_order_release);
		return m;
	}
	if (st == READY)
		return &map;
	if (st == ATTACHING && asking)
		atomic_fetch_add_explicit(&unattached_misses, 1, memory_order_relaxed);
	return NULL;
}

/* A process counts once it asks something (as it would by connecting with
 * --no-cache), so a forked child is marked on its first question. */
void kt_cache_after_fork(void)
{
	atomic_store_explicit(&mark_pending, 1, memory_order_relaxed);
}

static void mark_if_forked(void)
{
	if (__builtin_expect(atomic_load_explicit(&mark_pending, memory_order_relaxed), 0) &&
	    !kt_vfork_child && atomic_exchange(&mark_pending, 0))
		mark_pid(kt_getpid());
}

int kt_cache_fd(void)
{
	return atomic_load_explicit(&state, memory_order_acquire) == READY ? map.fd : -1;
}

void kt_cache_move_fd(void)
{
	int fd = kt_cache_fd();
	if (fd < 0)
		return;
	long nfd = kt_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, KT_FD_MIN);
	if (nfd < 0) {
		/* No fd to spare: the map keeps working from what is known to be
		 * backed; growth is then not seen (misses, never a crash). */
		__atomic_store_n(&map.fd, -1, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&map.fd, (int)nfd, __ATOMIC_RELAXED);
	}
	kt_close(fd);
}

/* ---- lookups ------------------------------------------------------------- */

static struct vc_shard *my_shard(struct vc_counters *c)
{
	int sh = thread_shard;
	if (__builtin_expect(!sh, 0)) /* a thread other than the first to ask */
		thread_shard = sh = (int)(kt_sys0(SYS_gettid) % VC_SHARDS) + 1;
	return &c->shard[sh - 1];
}

static void count(int hit, int listing)
{
	struct vc_counters *c = ctr;
	if (!c)
		return;
	struct vc_shard *s = my_shard(c);
	if (__builtin_expect(atomic_load_explicit(&unattached_misses, memory_order_relaxed) != 0, 0))
		__atomic_fetch_add(&s->misses, atomic_exchange(&unattached_misses, 0), __ATOMIC_RELAXED);
	__atomic_fetch_add(hit ? &s->hits : &s->misses, 1, __ATOMIC_RELAXED);
	if (hit && listing)
		__atomic_fetch_add(&s->listings, 1, __ATOMIC_RELAXED);
}

void kt_cache_count_ahead(void)
{
	struct vc_counters *c = ctr;
	if (c)
		__atomic_fetch_add(&my_shard(c)->ahead, 1, __ATOMIC_RELAXED);
}

/* openat2(O_PATH, RESOLVE_NO_SYMLINKS) of absolute `path`: 1 when it
 * opened (closed again), else -errno. */
static long open_no_symlinks(const char *path, int nofollow)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_NO_SYMLINKS,
	};
	long fd = kt_openat2(path, &how);
	if (fd < 0)
		return fd;
	kt_close((int)fd);
	return 1;
}

int kt_no_symlinks(const char *path, int nofollow)
{
	/* ENOENT: no symlink before the missing component (the walk stops
	 * there, the server's too). ENOTDIR: none before the file that is not
	 * a directory (the kernel meets a symlink first and says ELOOP; dpkg's
	 * helpers probe debian/NAME.install/DEBIAN/...). ELOOP: a symlink.
	 * Anything else: ask. */
	long r = open_no_symlinks(path, nofollow);
	return r == 1 || r == -ENOENT || r == -ENOTDIR;
}

/* open(O_PATH) of absolute `path`, following symlinks as the real call's
 * walk does: 1 when it opened (closed again), else -errno. */
static long open_following(const char *path, int nofollow)
{
	long fd = kt_sys4(SYS_openat, AT_FDCWD, path,
			  O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0), 0);
	if (fd >= 0) {
		kt_close((int)fd);
		return 1;
	}
	return fd;
}

int kt_cache_absent(const char *path, int nofollow, int through_symlinks)
{
	if (atomic_load_explicit(&state, memory_order_acquire) != READY)
		return 0;
	long r = open_no_symlinks(path, nofollow);
	return r == -ENOENT ||
	       (r == -ELOOP && through_symlinks && open_following(path, nofollow) == -ENOENT);
}

/* A recalled value may be used once its key's bit is set (the first user
 * sets it): 0 when there is no bitmap to set it in, and the caller asks. */
static int recall_told(uint64_t v)
{
	uint32_t i = vc_recall_index(v);
	if (!recall_words || i >= recall_nbits)
		return 0;
	uint64_t bit = 1ull << (i % 64), *w = &recall_words[i / 64];
	if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(w, bit, __ATOMIC_RELAXED);
	return 1;
}

/* 1 with key's well-formed value, its kind and answer; 0 when the key is
 * absent or could not be built (klen 0), or its value is garbage. */
static int value_of(struct shmmap *m, const char *key, size_t klen, uint64_t *v, unsigned *kind,
		    unsigned *ans)
{
	return klen && shmmap_lookup(m, key, klen, v) && vc_parse(*v, kind, ans);
}

/* Writes the access into a slot of the access log: 0 when there is none
 * free (or no log), and the caller asks the server instead. */
static int log_access(const char *path, size_t plen, unsigned access, unsigned qflags)
{
	struct vc_counters *c = ctr;
	if (!c || !log_slots || plen + 1 > VC_LOG_PATH)
		return 0;
	if (__atomic_load_n(&c->log_next, __ATOMIC_RELAXED) >= log_nslots)
		return 0;
	uint64_t i = __atomic_fetch_add(&c->log_next, 1, __ATOMIC_RELAXED);
	if (i >= log_nslots)
		return 0;
	struct vc_log_slot *s = &log_slots[i];
	memcpy(s->path, path, plen);
	s->path[plen] = '\0';
	s->pid = kt_getpid();
	__atomic_store_n(&s->commit, vc_log_commit(access, qflags), __ATOMIC_RELEASE);
	return 1;
}

/* The 'S' value of the path's directory: every name there is allowed by the
 * area rule, if the path has no symlink on its way (checked here, always:
 * a later ELOOP of a bound open would log a verdict the server then
 * contradicts). abs holds the path's 'V' key: its directory's 'S' key is
 * built in place over the name's first bytes, which are put back. */
static int names_ask(struct shmmap *m, char *abs, size_t plen, unsigned access, unsigned qflags,
		     int bind, unsigned *how)
{
	if (!log_slots)
		return 0;
	size_t dl = plen;
	while (dl && abs[dl - 1] != '/')
		dl--;
	if (dl < 2 || dl == plen)
		return 0; /* a name in / itself, or no name */
	/* ".." names the directory's parent, not a name in it: the value says
	 * nothing of it (a write to the build directory's parent is refused),
	 * and the server believes no slot with a ".." in it. */
	if (plen - dl == 2 && abs[dl] == '.' && abs[dl + 1] == '.')
		return 0;
	dl--;         /* the directory, without the slash */
	char save[4];
	memcpy(save, abs + dl, 4);
	size_t klen = vc_key_names(abs, abs, dl, access, qflags);
	uint64_t v;
	unsigned kind, ans;
	int found = value_of(m, abs, klen, &v, &kind, &ans) &&
		    kind == VC_AREA && ans == KILN_V_ALLOW;
	memcpy(abs + dl, save, 4);
	abs[plen] = '\0';
	if (!found || !kt_no_symlinks(abs, (qflags & KILN_Q_NOFOLLOW) != 0) ||
	    !log_access(abs, plen, access, qflags))
		return 0;
	*how = bind ? KILN_BIND_NO_SYMLINKS : KILN_BIND_ANY;
	return 1;
}

int kt_cache_ask(char *abs, size_t plen, unsigned access, unsigned qflags, int bind, int *verdict,
		 unsigned *how)
{
	struct shmmap *m = get(1);
	if (!m)
		return 0;
	mark_if_forked();
	size_t klen = vc_key_verdict(abs, abs, plen, access, qflags);
	uint64_t v;
	unsigned kind, ans;
	if (!klen)
		goto miss;
	if (!shmmap_lookup(m, abs, klen, &v)) {
		if (names_ask(m, abs, plen, access, qflags, bind, how))
			goto hit_allow;
		goto miss;
	}
	if (!vc_parse(v, &kind, &ans) || ans > KILN_V_DENY ||
	    ((vc_flags(v) & VC_F_RECALLED) && !recall_told(v)))
		goto miss;
	*how = KILN_BIND_ANY;
	if (kind == VC_AREA) {
		/* An ALLOW for a caller that binds: its open is the symlink
		 * check (openat2 RESOLVE_NO_SYMLINKS with its own flags). */
		if (bind && ans == KILN_V_ALLOW)
			*how = KILN_BIND_NO_SYMLINKS;
		else if (!kt_no_symlinks(abs, (qflags & KILN_Q_NOFOLLOW) != 0))
			goto miss;
	}
	count(1, 0);
	*verdict = (int)ans;
	return 1;
hit_allow:
	count(1, 0);
	*verdict = KILN_V_ALLOW;
	return 1;
miss:
	count(0, 0);
	return 0;
}

int kt_cache_exec_plain(char *abs, size_t plen, unsigned qflags)
{
	struct shmmap *m = get(0);
	if (!m)
		return 0;
	size_t klen = vc_key_verdict(abs, abs, plen, KILN_A_EXEC, qflags);
	uint64_t v;
	unsigned kind, ans;
	int plain = value_of(m, abs, klen, &v, &kind, &ans) &&
		    kind == VC_STABLE && ans == KILN_V_ALLOW && (vc_flags(v) & VC_F_PLAIN_EXEC) &&
		    (!(vc_flags(v) & VC_F_RECALLED) || recall_told(v));
	abs[plen] = '\0';
	if (!plain)
		return 0;
	mark_if_forked();
	count(1, 0);
	return 1;
}

int kt_cache_ask_key(const char *key, size_t klen, int *answer)
{
	struct shmmap *m = get(1);
	if (!m)
		return 0;
	mark_if_forked();
	uint64_t v;
	unsigned kind, ans;
	if (!value_of(m, key, klen, &v, &kind, &ans) ||
	    kind != VC_STABLE) {
		count(0, 0);
		return 0;
	}
	count(1, 0);
	*answer = (int)ans;
	return 1;
}

static int is_dot(const char *nm)
{
	return nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2]));
}

int kt_cache_ask_dir(const char *dir, const char *const *names, size_t n, unsigned char *hidden)
{
	struct shmmap *m = get(1);
	if (!m)
		return 0;
	mark_if_forked();
	char key[SHMMAP_MAX_KEY];
	size_t dlen = strlen(dir);
	size_t klen = vc_key_listing(key, dir, dlen);
	uint64_t v;
	unsigned kind, ans;
	if (!value_of(m, key, klen, &v, &kind, &ans))
		goto miss;
	if (kind == VC_AREA) {
		if (ans != VC_LIST_NONE || !kt_no_symlinks(dir, 0))
			goto miss;
		memset(hidden, 0, n);
	} else if (ans == VC_LIST_ALL) {
		memset(hidden, 1, n);
	} else if (ans == VC_LIST_NONE) {
		memset(hidden, 0, n);
	} else if (ans == VC_LIST_ENTRIES) {
		size_t pre = vc_key_entry_prefix(key, dir, dlen);
		for (size_t i = 0; i < n; i++) {
			if (is_dot(names[i])) {
				hidden[i] = 0;
				continue;
			}
			size_t el = vc_key_entry_name(key, pre, names[i], strlen(names[i]));
			if (!value_of(m, key, el, &v, &kind, &ans) ||
			    kind != VC_STABLE || ans > 1)
				goto miss;
			hidden[i] = (unsigned char)ans;
		}
	} else {
		goto miss;
	}
	count(1, 1);
	return 1;
miss:
	count(0, 0);
	return 0;
}
