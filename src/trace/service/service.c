/* Message handlers of the trace service. Every message is validated in full
 * before anything is decided: a malformed one returns -1 and the server closes
 * that connection only. */
#include "trace/service/service.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "ipc/msg.h"
#include "trace/service/recall.h"
#include "trace/service/unused.h"

#define ACCESS_ALL 0x7fu
#define QFLAGS_ALL ((unsigned)(KILN_Q_NOFOLLOW | KILN_Q_PROBE))
#define NAME_MAX_BYTES 255

struct trace_service *trace_service_new(const struct policy *policy, struct sbx_oracle oracle,
					bool report_only)
{
	struct trace_service *ts = calloc(1, sizeof *ts);
	if (!ts)
		return NULL;
	sandbox_init(&ts->sbx, policy, oracle);
	tracelog_init(&ts->log, report_only);
	ts->report_only = report_only;
	ts->locale_env = (struct locale_env){ .locale_dir = "/usr/lib/locale",
					      .alias_file = "/usr/share/locale/locale.alias",
					      .archive = "/usr/lib/locale/locale-archive" };
	if (!(ts->locales = locale_plan_cache_new())) {
		trace_service_free(ts);
		return NULL;
	}
	return ts;
}

void trace_service_free(struct trace_service *ts)
{
	if (!ts)
		return;
	sandbox_free(&ts->sbx);
	tracelog_free(&ts->log);
	locale_plan_cache_free(ts->locales);
	free(ts);
}

int trace_service_hello(void *ctx, pid_t pid, const char *cmdline, size_t len)
{
	struct trace_service *ts = ctx;
	return tracelog_client(&ts->log, pid, cmdline, len);
}

/* A path in a message: absolute, no NUL byte, not too long. Copied into
 * ts->path NUL-terminated. */
static int take_path(struct trace_service *ts, const char *p, size_t n)
{
	if (n == 0 || n > KILN_PATH_MAX || p[0] != '/' || memchr(p, '\0', n))
		return -1;
	memcpy(ts->path, p, n);
	ts->path[n] = '\0';
	return 0;
}

static pid_t client_pid(const struct trace_service *ts, int client)
{
	return client >= 0 && (size_t)client < ts->log.nclients ? ts->log.clients[client].pid : 0;
}

/* How an ALLOW binds to the file the client then opens (docs/protocol.md):
 * not at all when the walk stayed in managed trees; by RESOLVE_NO_SYMLINKS
 * when the area rule gives the same answer and the walk followed no symlink;
 * else by the identities the walk saw. */
static void bind_answer(const struct trace_service *ts, unsigned access, struct kiln_verdict_msg *v)
{
	const struct sbx_decision *d = &ts->dec;
	if (d->verdict != KILN_V_ALLOW || d->stable)
		return;
	v->bind = verdict_cache_area_verdict(ts->sbx.policy, ts->path, access) == KILN_V_ALLOW &&
			  !d->links
		  ? KILN_BIND_NO_SYMLINKS
		  : KILN_BIND_IDENT;
	v->id_flags = (uint16_t)d->id_flags;
	v->dev = d->dev;
	v->ino = d->ino;
	v->dir_dev = d->dir_dev;
	v->dir_ino = d->dir_ino;
}

/* The struct kiln_query of a QUERY or NOTE payload, its path in ts->path;
 * -1 when malformed. */
static int take_query(struct trace_service *ts, const char *payload, size_t len,
		      struct kiln_query *q)
{
	if (len < sizeof *q)
		return -1;
	memcpy(q, payload, sizeof *q);
	if (q->pathlen != len - sizeof *q || (q->access & ~ACCESS_ALL) || !q->access ||
	    (q->qflags & ~QFLAGS_ALL) || take_path(ts, payload + sizeof *q, q->pathlen) < 0)
		return -1;
	return 0;
}

/* Whether decisions go into the verdict cache. */
static bool caching(const struct trace_service *ts)
{
	return ts->vc && !ts->report_only;
}

/* The decision for a QUERY or a NOTE about ts->path, logged; a STABLE ALLOW
 * that is no finding is kept for the next build to recall. */
static void decide(struct trace_service *ts, int client, const struct kiln_query *q)
{
	sandbox_decide(&ts->sbx, client_pid(ts, client), ts->path, q->access, q->qflags, &ts->dec);
	tracelog_query(&ts->log, client, ts->path, q->access, &ts->dec);
	if (ts->recall && sbx_stable_allow(&ts->dec))
		recall_remember(ts->recall, ts->path, q->access, q->qflags);
}

/* The other read class (STAT or READ) of a STAT or READ question whose ALLOW
 * was just given, when its answer for the same path and qflags is that ALLOW
 * too for the whole run and nobody has asked it yet (proto.h, `ahead`): the
 * asker may answer it itself and tell us with a NOTE, which is decided and
 * logged as its QUERY would have been. A finding (unknown to the registry)
 * is never answered ahead. EXEC is not: its cached answer carries flags. */
static uint32_t answered_ahead(struct trace_service *ts, int client, const struct kiln_query *q)
{
	const struct sbx_decision *d = &ts->dec;
	if (!caching(ts) || (q->access != KILN_A_STAT && q->access != KILN_A_READ) ||
	    !sbx_stable_allow(d))
		return 0;
	unsigned other = q->access == KILN_A_STAT ? KILN_A_READ : KILN_A_STAT;
	if (verdict_cache_has(ts->vc, ts->path, other, q->qflags))
		return 0;
	struct sbx_decision *o = &ts->ahead;
	sandbox_decide(&ts->sbx, client_pid(ts, client), ts->path, other, q->qflags, o);
	return sbx_stable_allow(o) ? other : 0;
}

static int on_query(struct trace_service *ts, int client, int fd, const char *payload, size_t len)
{
	struct kiln_query q;
	if (take_query(ts, payload, len, &q) < 0)
		return -1;
	decide(ts, client, &q);
	struct kiln_verdict_msg v = { .verdict = ts->report_only ? KILN_V_ALLOW : ts->dec.verdict };
	if (!ts->report_only)
		bind_answer(ts, q.access, &v);
	v.ahead = answered_ahead(ts, client, &q);
	if (v.verdict == KILN_V_ALLOW)
		sandbox_write_passed(&ts->sbx, ts->path, q.access, &ts->dec);
	/* Before the answer: the asker's next identical question is a hit. */
	if (caching(ts))
		verdict_cache_query(ts->vc, ts->path, q.access, q.qflags, &ts->dec);
	/* Recalled meanwhile (it missed before): logged now, not again on use. */
	if (ts->recall)
		recall_claim(ts->recall, ts->vc, ts->path, q.access, q.qflags);
	return kiln_msg_send(fd, KILN_MSG_VERDICT, &v, sizeof v, NULL, 0, MSG_DONTWAIT);
}

/* A read-class question the client answered itself: about a path it found
 * absent, with no symlink on its way (docs/verdict-cache.md, "Absent
 * paths": every verdict ends in the real call's ENOENT), or one a VERDICT
 * answered ahead. Decided, logged and cached as a QUERY is; nothing is sent
 * back. */
static int on_note(struct trace_service *ts, int client, const char *payload, size_t len)
{
	struct kiln_query q;
	if (take_query(ts, payload, len, &q) < 0 || (q.access & ~KILN_A_READ_CLASSES))
		return -1;
	ts->log.cache.notes++;
	/* Told again before the first one was read (by this process or
	 * another): the answer is in the map already, as for a hit. Unless it
	 * is there because it was recalled after the teller missed it, and
	 * nobody used it yet: then this is its first asking. */
	if (caching(ts) && verdict_cache_has(ts->vc, ts->path, q.access, q.qflags) &&
	    !(ts->recall && recall_claim(ts->recall, ts->vc, ts->path, q.access, q.qflags)))
		return 0;
	ts->log.cache.notes_decided++;
	decide(ts, client, &q);
	if (caching(ts))
		verdict_cache_query(ts->vc, ts->path, q.access, q.qflags, &ts->dec);
	return 0;
}

static int on_query_dir(struct trace_service *ts, int client, int fd, const char *payload, size_t len)
{
	struct kiln_query_dir q;
	if (len < sizeof q)
		return -1;
	memcpy(&q, payload, sizeof q);
	if (q.dirlen > len - sizeof q || take_path(ts, payload + sizeof q, q.dirlen) < 0)
		return -1;
	/* Validate every entry before answering any. */
	const char *p = payload + sizeof q + q.dirlen, *end = payload + len;
	if (q.count > (size_t)(end - p) / sizeof(uint16_t))
		return -1;
	for (uint32_t i = 0; i < q.count; i++) {
		uint16_t nl;
		if ((size_t)(end - p) < sizeof nl)
			return -1;
		memcpy(&nl, p, sizeof nl);
		p += sizeof nl;
		if (nl == 0 || nl > NAME_MAX_BYTES || nl > (size_t)(end - p) || memchr(p, '/', nl) ||
		    memchr(p, '\0', nl))
			return -1;
		p += nl;
	}
	if (p != end)
		return -1;

	unsigned char hidden[KILN_MSG_MAX];
	memset(hidden, 0, q.count);
	sandbox_decide(&ts->sbx, client_pid(ts, client), ts->path, KILN_A_LIST, 0, &ts->dec);
	unsigned long nhidden = 0;
	if (!ts->report_only && ts->dec.verdict == KILN_V_ALLOW && ts->dec.exists) {
		char name[NAME_MAX_BYTES + 1];
		p = payload + sizeof q + q.dirlen;
		for (uint32_t i = 0; i < q.count; i++) {
			uint16_t nl;
			memcpy(&nl, p, sizeof nl);
			p += sizeof nl;
			memcpy(name, p, nl);
			name[nl] = '\0';
			p += nl;
			bool dots = !strcmp(name, ".") || !strcmp(name, "..");
			if (!dots && sandbox_entry_hidden(&ts->sbx, ts->dec.node, name)) {
				hidden[i] = 1;
				nhidden++;
			}
		}
	} else if (!ts->report_only && ts->dec.verdict != KILN_V_ALLOW) {
		/* The directory itself is hidden: so is everything in it. */
		memset(hidden, 1, q.count);
		nhidden = q.count;
	}
	tracelog_dir(&ts->log, nhidden);
	if (caching(ts))
		verdict_cache_listing(ts->vc, ts->path, &ts->dec, payload + sizeof q + q.dirlen, q.count,
				      hidden);
	struct kiln_verdict_dir v = { .count = q.count };
	return kiln_msg_send(fd, KILN_MSG_VERDICT_DIR, &v, sizeof v, hidden, q.count, MSG_DONTWAIT);
}

/* A file a locale plan looks at, as the build would see it; hidden ones are
 * findings of the asking process (client -1: nobody asked, not recorded). */
struct data_look {
	struct trace_service *ts;
	int client;
	bool stable;
	const char *loaded_by_glibc; /* non-NULL: hidden files met are ones glibc loads for
				      * itself (not hidden), noted with this as why */
};

static int data_look(void *ctx, const char *path, struct locale_seen *seen)
{
	struct data_look *l = ctx;
	struct trace_service *ts = l->ts;
	sandbox_decide(&ts->sbx, client_pid(ts, l->client), path, KILN_A_READ, 0, &ts->dec);
	if (ts->dec.reason == SBX_FAILED)
		return -1;
	l->stable &= ts->dec.stable;
	seen->hidden = ts->dec.verdict == KILN_V_HIDE;
	seen->exists = seen->hidden || ts->dec.exists;
	struct stat st;
	seen->is_dir = seen->exists && !seen->hidden && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	size_t pl = strlen(path);
	if (seen->hidden && l->loaded_by_glibc) {
		/* Only the catalogs (locale.alias is the hooks' to follow), and
		 * only one that is there: a hidden message directory need not
		 * hold glibc's catalog at all. */
		if (pl > 3 && !strcmp(path + pl - 3, ".mo") && stat(path, &st) == 0 &&
		    S_ISREG(st.st_mode))
			tracelog_unhidden(&ts->log, l->client, path, ts->dec.pkg, l->loaded_by_glibc);
	}
	else if (seen->hidden && l->client >= 0)
		tracelog_seen(&ts->log, l->client, path, KILN_A_READ, &ts->dec);
	return 0;
}

int trace_service_look(void *ts, const char *path, struct locale_seen *seen)
{
	struct data_look l = { ts, -1, true, NULL };
	return data_look(&l, path, seen);
}

int trace_service_entry_hidden(struct trace_service *ts, struct trace_entry_memo *m, const char *dir,
			       const char *name)
{
	if (!m->valid || strcmp(m->dir, dir)) {
		size_t dl = strlen(dir);
		m->valid = false;
		if (dl >= sizeof m->dir)
			return -1;
		sandbox_decide(&ts->sbx, 0, dir, KILN_A_LIST, 0, &ts->dec);
		if (ts->dec.reason == SBX_FAILED || strlen(ts->dec.node) >= sizeof m->node)
			return -1;
		memcpy(m->dir, dir, dl + 1);
		strcpy(m->node, ts->dec.node);
		m->visible = ts->dec.verdict == KILN_V_ALLOW && ts->dec.exists;
		m->valid = true;
	}
	if (!m->visible)
		return -1;
	return sandbox_entry_hidden(&ts->sbx, m->node, name) ? 1 : 0;
}

void trace_service_libc_messages(struct trace_service *ts, int client, const char *locale)
{
	struct data_look l = { ts, client, true, "glibc's own messages (strerror, getopt...) in this "
						 "locale come from it" };
	struct locale_env env = ts->locale_env;
	env.ctx = &l;
	env.look = data_look;
	catalog_plan(&env, ts->locales, "/usr/share/locale", "LC_MESSAGES", "libc", locale);
}

int trace_service_locale_plan(struct trace_service *ts, int client, const char *locpath,
			      unsigned catmask, const char *name, bool *stable)
{
	struct data_look l = { ts, client, true, NULL };
	struct locale_env env = ts->locale_env;
	env.ctx = &l;
	env.look = data_look;
	int answer = locale_plan(&env, ts->locales, locpath, catmask, name);
	*stable = l.stable;
	/* A locale for messages that loads: glibc translates its own messages
	 * with catalogs no hook can keep from it. */
	if (answer != KILN_D_ABSENT && (catmask & (1u << 5)))
		trace_service_libc_messages(ts, client, name);
	return answer;
}

int trace_service_catalog_plan(struct trace_service *ts, int client, const char *dirname,
			       const char *domain, const char *category, const char *languages,
			       bool *stable)
{
	struct data_look l = { ts, client, true, NULL };
	struct locale_env env = ts->locale_env;
	env.ctx = &l;
	env.look = data_look;
	int answer = catalog_plan(&env, ts->locales, dirname, category, domain, languages);
	*stable = l.stable;
	return answer;
}

/* "DOMAIN\nLC_CATEGORY\nLANGUAGES" of a catalog question, split in place;
 * -1 if malformed. */
static int split_catalog(char *b, char **domain, char **category, char **languages)
{
	*domain = b;
	char *nl = strchr(b, '\n');
	if (!nl || nl == b)
		return -1;
	*nl = '\0';
	*category = nl + 1;
	if (!(nl = strchr(*category, '\n')) || strncmp(*category, "LC_", 3))
		return -1;
	*nl = '\0';
	*languages = nl + 1;
	return strchr(*languages, '\n') || strchr(*domain, '/') ? -1 : 0;
}

static int on_query_data(struct trace_service *ts, int client, int fd, const char *payload, size_t len)
{
	struct kiln_query_data q;
	if (len < sizeof q)
		return -1;
	memcpy(&q, payload, sizeof q);
	size_t blen = len - sizeof q - (q.alen <= len - sizeof q ? q.alen : 0);
	if ((q.kind != KILN_D_LOCALE && q.kind != KILN_D_CATALOG) || q.alen > len - sizeof q ||
	    q.alen > KILN_PATH_MAX || blen > KILN_PATH_MAX ||
	    (q.kind == KILN_D_LOCALE && (!q.arg || (q.arg & ~0x1fbfu))) ||
	    (q.kind == KILN_D_CATALOG && q.arg != 1))
		return -1;
	const char *a = payload + sizeof q, *b = a + q.alen;
	if (memchr(a, '\0', q.alen + blen))
		return -1;
	char as[KILN_PATH_MAX + 1], bs[KILN_PATH_MAX + 1];
	memcpy(as, a, q.alen);
	as[q.alen] = '\0';
	memcpy(bs, b, blen);
	bs[blen] = '\0';
	bool stable;
	int answer;
	if (q.kind == KILN_D_CATALOG) {
		char copy[KILN_PATH_MAX + 1], *domain, *category, *languages;
		memcpy(copy, bs, blen + 1);
		if (split_catalog(copy, &domain, &category, &languages) < 0)
			return -1;
		ts->log.queries++;
		answer = trace_service_catalog_plan(ts, client, as, domain, category, languages, &stable);
	} else {
		ts->log.queries++;
		answer = trace_service_locale_plan(ts, client, as, q.arg, bs, &stable);
	}
	struct kiln_verdict_msg v = { .verdict = ts->report_only ? KILN_D_CLEAN : (uint32_t)answer };
	if (caching(ts) && stable)
		verdict_cache_data(ts->vc, q.kind, q.arg, as, q.alen, bs, blen, (unsigned)answer);
	return kiln_msg_send(fd, KILN_MSG_VERDICT, &v, sizeof v, NULL, 0, MSG_DONTWAIT);
}

static int on_event(struct trace_service *ts, int client, const char *payload, size_t len)
{
	struct kiln_event_msg e;
	if (len < sizeof e)
		return -1;
	memcpy(&e, payload, sizeof e);
	if (e.pathlen != len - sizeof e ||
	    (e.kind != KILN_E_SETUID_EXEC && e.kind != KILN_E_STATIC_EXEC) ||
	    take_path(ts, payload + sizeof e, e.pathlen) < 0)
		return -1;
	tracelog_event(&ts->log, client, e.kind, ts->path);
	return 0;
}

int trace_service_message(void *ctx, int client, int fd, const struct kiln_msg_hdr *h,
			  const void *payload, size_t len)
{
	struct trace_service *ts = ctx;
	if (h->flags)
		return -1;
	switch (h->type) {
	case KILN_MSG_QUERY:
		return on_query(ts, client, fd, payload, len);
	case KILN_MSG_QUERY_DIR:
		return on_query_dir(ts, client, fd, payload, len);
	case KILN_MSG_EVENT:
		return on_event(ts, client, payload, len);
	case KILN_MSG_NOTE:
		return on_note(ts, client, payload, len);
	case KILN_MSG_QUERY_DATA:
		return on_query_data(ts, client, fd, payload, len);
	default:
		return -1;
	}
}

/* An access a client answered from an 'S' value: logged as the server would
 * have on a round trip; never a finding (the area rule allows it), so who
 * asked first is not needed. */
static void logged_access(void *ctx, pid_t pid, const char *path, unsigned access)
{
	(void)pid;
	/* static: the struct holds two path buffers, and zeroing them for
	 * each slot was a third of the server's time reading the log */
	static const struct sbx_decision d = { .verdict = KILN_V_ALLOW, .reason = SBX_OK };
	tracelog_seen(ctx, -1, path, access, &d);
}

/* A recalled key a client used: logged as its round trip would have been
 * (a STABLE ALLOW, no finding: who asked first is not needed). */
static void recalled_access(void *ctx, const char *path, unsigned access)
{
	static const struct sbx_decision d = { .verdict = KILN_V_ALLOW, .reason = SBX_OK,
					       .stable = true };
	tracelog_query(ctx, -1, path, access, &d);
}

void trace_service_read_access_log(struct trace_service *ts)
{
	if (!ts->vc)
		return;
	verdict_cache_read_log(ts->vc, logged_access, &ts->log);
	if (ts->recall)
		recall_read(ts->recall, ts->vc, recalled_access, &ts->log);
}

static void tick(void *ctx)
{
	trace_service_read_access_log(ctx);
}

/* A few keys or paths at a time: a message that comes meanwhile waits for
 * no more than that (each is a decision, or an lstat or two and an owner
 * lookup: a few us). Recalled keys first: the build may ask them any
 * moment. */
static bool idle_pending(void *ctx);

static bool idle(void *ctx)
{
	struct trace_service *ts = ctx;
	if (ts->recall && recall_left(ts->recall))
		recall_ahead(ts->recall, &ts->sbx, ts->vc, 16);
	else if (ts->touched)
		touched_update(ts->touched, &ts->log, 16);
	return idle_pending(ctx);
}

/* Without this the loop would look once more after every turn with
 * messages, a system call each, with nothing to do. */
static bool idle_pending(void *ctx)
{
	struct trace_service *ts = ctx;
	return (ts->recall && recall_left(ts->recall)) ||
	       (ts->touched && touched_left(ts->touched, &ts->log) > 0);
}

struct kiln_service trace_service_hooks(struct trace_service *ts)
{
	return (struct kiln_service){
		.ctx = ts,
		.role = 1,
		.hello = trace_service_hello,
		.message = trace_service_message,
		/* The log is read at every turn with messages (a load when no
		 * slot is new) and every 250 ms when none come: an idle server's
		 * wake-ups interrupt the build's CPUs. Every 20 ms it cost zlib's
		 * configure + make -j2 about 0.1 s (twelve alternating pairs:
		 * -0.11 s wall, -0.21 s CPU at 250 ms); GNU hello's build takes
		 * 4,036 log slots instead of 3,076 (of 65,536). */
		.tick = tick,
		.tick_ms = 250,
		/* What the build touched is worked out as it runs, not between
		 * the build's end and the report (docs/trace-report.md, Cost). */
		.idle = idle,
		.idle_pending = idle_pending,
	};
}
