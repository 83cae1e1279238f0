/* The command-line parser of every kiln command: see cliopt.h. */
#include "common/cliopt.h"

#include <stdarg.h>
#include <string.h>

void cliopt_init(struct cliparse *p, const char *cmd, const struct cliopt *opts, int argc,
		 char **argv, enum cliopt_order order, FILE *err)
{
	*p = (struct cliparse){ .cmd = cmd, .opts = opts, .argc = argc, .argv = argv,
				.order = order, .err = err, .next = 1 };
}

static int vusage(FILE *err, const char *cmd, const char *fmt, va_list ap)
{
	/* One write of the whole line: several commands may share the stream. */
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	fprintf(err, "%s: %s; see '%s --help'\n", cmd, msg, cmd);
	return CLIOPT_EXIT_USAGE;
}

int cliopt_usage(const struct cliparse *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vusage(p->err, p->cmd, fmt, ap);
	va_end(ap);
	return CLIOPT_EXIT_USAGE;
}

int cliopt_usage_for(FILE *err, const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vusage(err, cmd, fmt, ap);
	va_end(ap);
	return CLIOPT_EXIT_USAGE;
}

static const struct cliopt *find_long(const struct cliopt *o, const char *name, size_t n)
{
	for (; o->name; o++)
		if (strlen(o->name) == n && !strncmp(o->name, name, n))
			return o;
	return NULL;
}

static const struct cliopt *find_short(const struct cliopt *o, char c)
{
	for (; o->name; o++)
		if (o->shortname && o->shortname == c)
			return o;
	return NULL;
}

/* A valued option's value: the rest of its word (INLINE, may be NULL) or
 * the next argument. */
static int take_value(struct cliparse *p, const struct cliopt *o, const char *inline_value)
{
	if (inline_value) {
		p->value = inline_value;
		return o->id;
	}
	if (p->next >= p->argc) {
		cliopt_usage(p, "option '%s' needs a value (%s)", p->opt, o->arg);
		return CLIOPT_ERROR;
	}
	p->value = p->argv[p->next++];
	return o->id;
}

static int long_option(struct cliparse *p, const char *word)
{
	const char *eq = strchr(word, '=');
	size_t n = eq ? (size_t)(eq - word) : strlen(word);
	snprintf(p->optbuf, sizeof p->optbuf, "--%.*s", (int)n, word);
	p->opt = p->optbuf;
	const struct cliopt *o = find_long(p->opts, word, n);
	if (!o && n == 4 && !strncmp(word, "help", 4))
		return CLIOPT_HELP;
	if (!o && n == 7 && !strncmp(word, "version", 7))
		return CLIOPT_VERSION;
	if (!o) {
		cliopt_usage(p, "unknown option '%s'", p->opt);
		return CLIOPT_ERROR;
	}
	if (!o->arg) {
		if (eq) {
			cliopt_usage(p, "option '%s' takes no value", p->opt);
			return CLIOPT_ERROR;
		}
		return o->id;
	}
	return take_value(p, o, eq ? eq + 1 : NULL);
}

static int short_option(struct cliparse *p)
{
	char c = *p->bundle++;
	snprintf(p->optbuf, sizeof p->optbuf, "-%c", c);
	p->opt = p->optbuf;
	const struct cliopt *o = find_short(p->opts, c);
	if (!o && c == 'h')
		return CLIOPT_HELP;
	if (!o) {
		cliopt_usage(p, "unknown option '%s'", p->opt);
		return CLIOPT_ERROR;
	}
	if (!o->arg)
		return o->id;
	const char *rest = *p->bundle ? p->bundle : NULL;
	p->bundle = NULL;
	return take_value(p, o, rest);
}

int cliopt_next(struct cliparse *p)
{
	p->value = NULL;
	p->opt = NULL;
	if (p->bundle && *p->bundle)
		return short_option(p);
	p->bundle = NULL;
	if (p->next >= p->argc)
		return CLIOPT_END;
	const char *a = p->argv[p->next];
	if (p->only_args || a[0] != '-' || !a[1]) {
		if (p->order == CLIOPT_IN_ORDER)
			return CLIOPT_END;
		p->next++;
		p->value = a;
		return CLIOPT_ARG;
	}
	p->next++;
	if (!strcmp(a, "--")) {
		p->only_args = 1;
		return p->order == CLIOPT_IN_ORDER ? CLIOPT_END : cliopt_next(p);
	}
	if (a[1] == '-')
		return long_option(p, a + 2);
	p->bundle = a + 1;
	return short_option(p);
}

const char *cliopt_peek(const struct cliparse *p)
{
	return p->bundle && *p->bundle ? NULL : p->next < p->argc ? p->argv[p->next] : NULL;
}

void cliopt_skip(struct cliparse *p)
{
	if (p->next < p->argc)
		p->next++;
}

char **cliopt_rest(const struct cliparse *p)
{
	return p->argv + p->next;
}

int cliopt_nrest(const struct cliparse *p)
{
	return p->argc - p->next;
}

#define HELP_COLUMN 28

void cliopt_print_options(FILE *out, const struct cliopt *o)
{
	for (; o->name; o++) {
		if (!o->help)
			continue;
		char head[96];
		int n = snprintf(head, sizeof head, "  %c%c%s--%s%s%s", o->shortname ? '-' : ' ',
				 o->shortname ? o->shortname : ' ', o->shortname ? ", " : "  ", o->name,
				 o->arg ? " " : "", o->arg ? o->arg : "");
		fputs(head, out);
		const char *h = o->help;
		if (n >= HELP_COLUMN - 1)
			fprintf(out, "\n%*s", HELP_COLUMN, "");
		else
			fprintf(out, "%*s", HELP_COLUMN - n, "");
		for (;;) {
			size_t len = strcspn(h, "\n");
			fprintf(out, "%.*s\n", (int)len, h);
			if (!h[len])
				break;
			h += len + 1;
			fprintf(out, "%*s", HELP_COLUMN, "");
		}
	}
	fprintf(out, "  -h, --help                this text\n"
		     "      --version             kiln's version\n");
}

int cliopt_answer(int id, void (*usage)(FILE *out), FILE *out)
{
	switch (id) {
	case CLIOPT_ERROR:
		return CLIOPT_EXIT_USAGE;
	case CLIOPT_HELP:
		usage(out);
		return 0;
	case CLIOPT_VERSION:
		cliopt_print_version(out);
		return 0;
	}
	return -1;
}

void cliopt_print_version(FILE *out)
{
	fprintf(out, "kiln %s\n", kiln_version);
}
