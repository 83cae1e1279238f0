#include "trace/service/trace_server.h"
#include "trace/service/trusted.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/outfile.h"
#include "server/server.h"
#include "trace/service/build_type.h"
#include "trace/service/control.h"
#include "trace/service/data_plans.h"
#include "trace/service/deps.h"
#include "trace/service/diagnosis.h"
#include "trace/service/postinst_dirs.h"
#include "trace/service/recall.h"
#include "trace/service/report.h"
#include "trace/service/rundir.h"
#include "trace/service/service.h"
#include "trace/service/unused.h"

/* "R" and NAME=VALUE lines for the build's environment (the trusted
 * libraries, trusted.h; the plans made ahead), or "E" and an error message. */
static void say_ready(int fd, const char *err, const char *vars)
{
	char buf[4096];
	int n = err ? snprintf(buf, sizeof buf, "E%s", err) : snprintf(buf, sizeof buf, "R%s", vars);
	if (n < 0 || (size_t)n >= sizeof buf)
		n = snprintf(buf, sizeof buf, "R"); /* too long: no fast paths, still right */
	if (write(fd, buf, (size_t)n) < 0) {
		/* kiln is gone; the lifeline will tell the loop */
	}
	close(fd);
}

/* The sandbox as the data plans ask it: the gconv directory decided once
 * for its entries (trace_service_entry_hidden). */
struct plan_sandbox {
	struct trace_service *ts;
	struct trace_entry_memo memo;
};

static int plan_look(void *ctx, const char *path, struct locale_seen *seen)
{
	return trace_service_look(((struct plan_sandbox *)ctx)->ts, path, seen);
}

static int plan_entry_hidden(void *ctx, const char *dir, const char *name)
{
	struct plan_sandbox *p = ctx;
	return trace_service_entry_hidden(p->ts, &p->memo, dir, name);
}

/* The plans made before the build starts (docs/glibc-data.md), as the
 * variables KILN_LOCALES (the names of the build's environment whose
 * locale plan is CLEAN for every category with LOCPATH unset) and
 * KILN_CLEAN (data_plans.h), each "NAME=VALUE\n". None under
 * --report-only, where every plan is CLEAN but the report wants to see each
 * asking. */
static void plan_ahead(struct trace_service *ts, const struct trace_server_config *cfg,
		       char *out, size_t cap)
{
	out[0] = '\0';
	if (cfg->report_only)
		return;
	size_t o = (size_t)snprintf(out, cap, "%s=", KILN_ENV_LOCALES), first = o;
	for (size_t i = 0; i < cfg->nlocales; i++) {
		const char *name = cfg->locales[i];
		size_t l = strlen(name);
		bool stable;
		if (!l || strchr(name, ':') || strchr(name, '\n') || o + l + 2 > cap / 2 ||
		    trace_service_locale_plan(ts, -1, "", 0x1fbfu, name, &stable) != KILN_D_CLEAN ||
		    !stable)
			continue;
		o += (size_t)snprintf(out + o, cap - o, "%s%s", o > first ? ":" : "", name);
	}
	o += (size_t)snprintf(out + o, cap - o, "\n%s=", KILN_ENV_CLEAN);
	struct data_where w = data_where_default();
	struct plan_sandbox ps = { .ts = ts };
	struct data_sandbox sb = { &ps, plan_look, plan_entry_hidden };
	o += data_plans_clean(&w, &sb, out + o, cap - o - 1);
	/* mo:NAME: any domain's catalogs in /usr/share/locale for locale NAME
	 * (LANGUAGE unset), the gettext hooks' fast path. */
	for (size_t i = 0; i < cfg->nlocales; i++) {
		const char *name = cfg->locales[i];
		bool stable;
		if (strchr(name, ' ') || strchr(name, '\n') || o + strlen(name) + 6 > cap - 2 ||
		    trace_service_catalog_plan(ts, -1, "/usr/share/locale", NULL, "LC_MESSAGES", name,
					       &stable) != KILN_D_CLEAN ||
		    !stable)
			continue;
		o += (size_t)snprintf(out + o, cap - o, "%smo:%s", o ? " " : "", name);
	}
	snprintf(out + o, cap - o, "\n");
	for (size_t i = 0; i < cfg->nlocales; i++)
		trace_service_libc_messages(ts, -1, cfg->locales[i]);
}

/* Colours only for a terminal, and not when NO_COLOR is set to anything
 * (no-color.org) or the terminal is dumb. */
static bool wants_colour(FILE *f)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
	return isatty(fileno(f)) && !(no && *no) && !(term && !strcmp(term, "dumb"));
}

/* The text report to FILE (output rules of common/outfile.h), else stderr. */
static int write_text_report(const struct tracelog *t, const struct trace_diagnosis *d,
			     struct report_style *st, const char *file, char *err, size_t errlen)
{
	if (!file) {
		st->colour = wants_colour(stderr);
		/* stderr is unbuffered: rendered in memory first, the report
		 * is one write, not one per piece (or character) of it. */
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);
		if (m) {
			tracelog_write_text(t, d, st, m);
			if (fclose(m) == 0) {
				fwrite(buf, 1, len, stderr);
				free(buf);
				return 0;
			}
			free(buf);
		}
		tracelog_write_text(t, d, st, stderr);
		return 0;
	}
	struct outfile o;
	FILE *f = outfile_fopen(&o, AT_FDCWD, file, STDOUT_FILENO, 0, err, errlen);
	if (!f)
		return -1;
	st->colour = wants_colour(f);
	tracelog_write_text(t, d, st, f);
	return outfile_commit(&o, err, errlen);
}

/* Someone opens the registry file to write it: the copy, then the lease
 * given up (the writer waits until then). */
static int take_registry_copy(void *ctx, char *err, size_t errlen)
{
	struct trace_service *ts = ctx;
	return registry_snapshot_take(ts->leased, err, errlen); /* once: then a no-op */
}

/* The last build's keys for this sandbox: the registry, the profile, the
 * host architecture and the declared Build-Depends name it (recall.h).
 * recall_open's return. */
static int open_recall(struct recall *r, const struct trace_server_config *cfg,
		       const char **declared, size_t ndeclared, char *err, size_t errlen)
{
	char id[8192];
	size_t n = (size_t)snprintf(id, sizeof id, "%s\n%d\n%s\n", cfg->db, (int)cfg->profile,
				    deps_host_arch());
	for (size_t i = 0; i < ndeclared && n < sizeof id; i++)
		n += (size_t)snprintf(id + n, sizeof id - n, "%s\n", declared[i]);
	return recall_open(r, cfg->recall_dir, id, n < sizeof id ? n : sizeof id - 1, err, errlen);
}

int trace_server_main(const struct trace_server_config *cfg, int ready_fd, int lifeline_fd)
{
	char err[1024];
	struct dep_list control = { 0 };
	struct registry_pkgset closure = { 0 };
	const char **declared = NULL;
	size_t ndeclared = 0;
	struct trace_service *ts = NULL;
	struct verdict_cache vc = { 0 };
	struct touched *touched = NULL;
	struct owners_memo owners = { .max = OWNERS_MEMO_MAX };
	struct recall recall = { 0 };
	int listen_fd = -1, rc = TRACE_SERVER_FAILED;
	pid_t kiln = getppid();

	/* The registry is held under a read lease, its copy taken only when
	 * someone opens the file to write it (SIGIO, answered in the server's
	 * loop); where no lease can be had the copy is taken while the closure
	 * and the plans are worked out from the file under SQLite's lock, and
	 * finished before the build can reach the file (docs/registry.md,
	 * Snapshot). */
	sigset_t sigio;
	sigemptyset(&sigio);
	sigaddset(&sigio, SIGIO);
	sigprocmask(SIG_BLOCK, &sigio, NULL);
	struct kiln_registry *reg = registry_open(cfg->db, REGISTRY_SNAPSHOT_LATER | REGISTRY_SNAPSHOT_LEASE,
						  err, sizeof err);
	if (!reg)
		goto fail;
	if (cfg->control &&
	    control_build_depends(cfg->control, deps_host_arch(), getenv("DEB_BUILD_PROFILES"),
				  cfg->build_parts, &control, err, sizeof err) < 0)
		goto fail;
	if (trace_deps_closure_named(reg, cfg->profile, cfg->deps, cfg->ndeps, cfg->control ? &control : NULL,
				     stderr, &closure, &declared, &ndeclared, err, sizeof err) < 0)
		goto fail;
	if (postinst_dirs_add(cfg->policy, reg, &closure, err, sizeof err) < 0)
		goto fail;
	struct registry_oracle ro = { .reg = reg, .closure = &closure, .owners = &owners };
	ts = trace_service_new(cfg->policy, registry_oracle(&ro), cfg->report_only);
	if (!ts) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	if (tracelog_set_path(&ts->log, cfg->build_path) < 0) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	ts->log.declared = declared;
	ts->log.ndeclared = ndeclared;
	/* From the first path logged on (the plans' own, made below). */
	if (ndeclared && (touched = touched_new(cfg->policy, reg))) {
		touched_share(touched, &ts->sbx, &owners);
		ts->touched = touched;
		ts->log.track_allowed = true;
		touched_ahead(touched, cfg->profile, declared, ndeclared, &closure);
	}
	ts->log.build_parts = cfg->control ? cfg->build_parts : 0;
	ts->log.build_left_out = control.left_out;
	if (control.left_out) {
		struct dep_list all = { 0 };
		int lo = control_build_depends(cfg->control, deps_host_arch(), getenv("DEB_BUILD_PROFILES"),
					       BUILD_FULL, &all, err, sizeof err);
		if (lo == 0)
			lo = trace_deps_left_out(reg, cfg->profile, cfg->deps, cfg->ndeps, &all, &closure,
						 &ts->log.left_out, err, sizeof err);
		dep_list_free(&all);
		if (lo < 0)
			goto fail;
	}
	ts->log.build_type_from = cfg->build_type_from;
	ts->log.closure_size = closure.n;
	if (cfg->cache && !cfg->report_only) {
		if (cfg->recall_dir) {
			int r = open_recall(&recall, cfg, declared, ndeclared, err, sizeof err);
			if (r < 0)
				goto fail;
			if (r > 0)
				fprintf(stderr, "kiln trace: %s\n", err);
			ts->recall = &recall;
		}
		if (verdict_cache_create(&vc, cfg->cache, &ts->sbx, (uint32_t)recall.n, err,
					 sizeof err) < 0)
			goto fail;
		ts->vc = &vc;
		ts->log.cache.enabled = true;
		ts->log.cache_pids = verdict_cache_pids(&vc, &ts->log.cache_pid_words);
	}
	if ((listen_fd = kiln_server_listen(cfg->socket, err, sizeof err)) < 0)
		goto fail;
	char vars[4000];
	int tn = snprintf(vars, sizeof vars, "%s=", KILN_ENV_TRUSTED);
	trusted_libs(&ts->sbx, vars + tn, 1100);
	size_t vn = strlen(vars);
	vn += (size_t)snprintf(vars + vn, sizeof vars - vn, "\n");
	plan_ahead(ts, cfg, vars + vn, sizeof vars - vn);
	if (registry_snapshot_finish(reg, err, sizeof err) < 0)
		goto fail;
	say_ready(ready_fd, NULL, vars);
	ready_fd = -1;

	struct kiln_service hooks = trace_service_hooks(ts);
	if (registry_snapshot_kind(reg) == REGISTRY_SNAPSHOT_LEASED) {
		ts->leased = reg;
		hooks.sigio = take_registry_copy;
	}
	struct kiln_server_stats stats;
	char note[128];
	int run = kiln_server_run(listen_fd, lifeline_fd, &hooks, note, sizeof note, &stats,
				  err, sizeof err);
	close(listen_fd);
	unlink(cfg->socket);
	if (run < 0)
		fprintf(stderr, "kiln trace: server: %s\n", err);
	/* A writer that came as the build ended does not wait for the report. */
	sigset_t pending;
	if (run == 0 && ts->leased && sigpending(&pending) == 0 && sigismember(&pending, SIGIO) == 1 &&
	    take_registry_copy(ts, err, sizeof err) < 0) {
		fprintf(stderr, "kiln trace: server: %s\n", err);
		run = -1;
	}

	int status = -1;
	const char *st = strstr(note, "status ");
	if (!st || sscanf(st, "status %d", &status) != 1)
		status = -1;
	/* No status: the server could not go on (run < 0: its clients would
	 * fail closed), or kiln was killed (its end closed the lifeline;
	 * getppid() may not have changed yet) or the server was told to stop:
	 * nobody else may be left to end the build and clean up. */
	bool kiln_gone = !st && run == 0;
	if (!st) {
		const char *pg = strstr(note, "pgid ");
		long pgid = 0;
		if (!pg || sscanf(pg, "pgid %ld", &pgid) != 1)
			pgid = 0;
		bool group;
		size_t n = trace_end_build(cfg->rundir, (pid_t)pgid, &group);
		char how[128];
		snprintf(how, sizeof how, group ? "killed its process group and %zu processes outside it"
						: "killed %zu processes", n);
		if (kiln_gone)
			fprintf(stderr, "kiln trace: server: kiln (pid %ld) died before the build ended; "
					"ended the build (%s)\n", (long)kiln, how);
		else
			fprintf(stderr, "kiln trace: server: ended the build (%s)\n", how);
	}
	ts->log.registry_snapshot = registry_snapshot_kind(reg);
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		ts->log.server_cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
				     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	if (ts->vc) {
		trace_service_read_access_log(ts);
		ts->log.cache.logged = ts->vc->logged;
		struct verdict_cache_stats cs;
		verdict_cache_stats(ts->vc, &cs);
		ts->log.cache.hits = cs.hits;
		ts->log.cache.misses = cs.misses;
		ts->log.cache.listings = cs.listings;
		ts->log.cache.ahead = cs.ahead;
		ts->log.cache.map_bytes = cs.map_bytes;
		ts->log.cache.entries = cs.entries;
		ts->log.cache.recalled = recall.put;
		ts->log.cache.recall_used = recall.used;
	}
	char cwd[PATH_MAX];
	struct trace_diagnosis diag;
	struct diag_input din = { .log = &ts->log, .reg = reg, .closure = &closure,
				  .profile = cfg->profile, .control = cfg->control ? &control : NULL,
				  .policy = cfg->policy, .exit_status = status, .touched = touched,
				  .build_dir = getcwd(cwd, sizeof cwd) ? cwd : NULL };
	struct timespec d0, d1;
	clock_gettime(CLOCK_MONOTONIC, &d0);
	if (trace_diagnose(&din, &diag, stderr) < 0)
		fprintf(stderr, "kiln trace: out of memory working out the report's verdict\n");
	clock_gettime(CLOCK_MONOTONIC, &d1);
	rc = diag.violations ? TRACE_SERVER_VIOLATIONS : TRACE_SERVER_CLEAN;
	bool intact = registry_snapshot_intact(reg);
	if (!intact)
		fprintf(stderr, "kiln trace: server: %s: the registry was written under kiln's lease "
				"(the kernel gave the writer its way after /proc/sys/fs/lease-break-time): "
				"the report's ranking and unused Build-Depends may not be the registry's "
				"the build started with\n", cfg->db);
	struct report_style style = { .quiet = cfg->quiet, .strict = cfg->strict, .json = cfg->json_name,
				      .log = cfg->log_name, .build_dir = din.build_dir };
	if (write_text_report(&ts->log, &diag, &style, cfg->report, err, sizeof err) < 0) {
		fprintf(stderr, "kiln trace: %s\n", err);
		rc = TRACE_SERVER_FAILED;
	}
	if (cfg->stats) {
		tracelog_write_stats(&ts->log, stderr);
		fprintf(stderr, "  verdict      %.3f s to rank, diagnose and find the unused (after the build)\n",
			(double)(d1.tv_sec - d0.tv_sec) + (double)(d1.tv_nsec - d0.tv_nsec) / 1e9);
	}
	if (getenv("KILN_TRACE_MEMO_STATS"))
		fprintf(stderr, "kiln trace: server: walk memo %s: %lu of %lu queries answered from it, "
				"%zu entries, %lu flushes\n", ts->sbx.memo_walks ? "on" : "off",
			ts->sbx.walk_hits, ts->log.queries + ts->log.dir_queries, ts->sbx.walks.n,
			ts->sbx.walk_flushes);
	if (cfg->json && tracelog_write_json(&ts->log, &diag, cfg->json, err, sizeof err) < 0) {
		fprintf(stderr, "kiln trace: %s\n", err);
		rc = TRACE_SERVER_FAILED;
	}
	if (cfg->log && tracelog_write_log(&ts->log, cfg->log, err, sizeof err) < 0) {
		fprintf(stderr, "kiln trace: %s\n", err);
		rc = TRACE_SERVER_FAILED;
	}
	if (run < 0 || !intact)
		rc = TRACE_SERVER_FAILED;
	/* Only after a build that ran to its end (a hint: a failure is said, not fatal). */
	if (ts->recall && st && recall_save(ts->recall, err, sizeof err) < 0)
		fprintf(stderr, "kiln trace: not keeping this build's questions for the next: %s\n",
			err);
	if (kiln_gone && trace_rundir_remove(cfg->rundir, err, sizeof err) < 0)
		fprintf(stderr, "kiln trace: server: %s\n", err);
	/* The process ends here: what the run held (the log, the memos, the
	 * registry and its copy, the map) goes with it at once rather than
	 * being given back piece by piece while kiln waits to exit. */
	fflush(NULL);
	_exit(rc);
fail:
	say_ready(ready_fd, err, NULL);
	if (ts && ts->vc)
		verdict_cache_close(&vc);
	trace_service_free(ts);
	touched_free(touched);
	owners_memo_free(&owners);
	recall_free(&recall);
	registry_pkgset_free(&closure);
	free(declared);
	dep_list_free(&control);
	if (reg)
		registry_close(reg);
	return rc;
}
