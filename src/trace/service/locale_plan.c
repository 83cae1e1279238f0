/* The locale plan (locale_plan.h): the files glibc 2.36's _nl_find_locale
 * may open for a name (locale/findlocale.c, intl/explodename.c,
 * intl/l10nflist.c, intl/localealias.c, locale/loadarchive.c), checked
 * against the sandbox. */
#include "trace/service/locale_plan.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NCATS 13
#define LC_ALL_BIT 6
#define NAME_MAX_LEN 255 /* valid_locale_name's limit */

static const char *const cat_names[NCATS] = {
	"LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "LC_ALL",
	"LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
};

/* XPG mask bits of intl/loadinfo.h. */
enum { XPG_NORM_CODESET = 1, XPG_CODESET = 2, XPG_TERRITORY = 4, XPG_MODIFIER = 8 };

struct str_list {
	char **v;
	size_t n;
};

struct locale_plan_cache {
	bool alias_read, archive_read;
	bool alias_exists, archive_exists;
	struct str_list alias_keys, alias_values; /* parallel */
	struct str_list archive_names;
};

static void list_free(struct str_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = (struct str_list){ 0 };
}

static int list_add(struct str_list *l, const char *s, size_t n)
{
	char **v = realloc(l->v, (l->n + 1) * sizeof *v);
	if (!v)
		return -1;
	l->v = v;
	if (!(v[l->n] = strndup(s, n)))
		return -1;
	l->n++;
	return 0;
}

struct locale_plan_cache *locale_plan_cache_new(void)
{
	return calloc(1, sizeof(struct locale_plan_cache));
}

void locale_plan_cache_free(struct locale_plan_cache *c)
{
	if (!c)
		return;
	list_free(&c->alias_keys);
	list_free(&c->alias_values);
	list_free(&c->archive_names);
	free(c);
}

/* locale.alias as read_alias_file parses it: per line, leading white
 * space, '#' comments, an alias and a value separated by white space
 * (lines are read 400 bytes at a time: the rest of a longer line is a line
 * of its own, as with glibc's fgets). */
static void read_aliases(struct locale_plan_cache *c, const char *file)
{
	c->alias_read = true;
	FILE *f = fopen(file, "re");
	if (!f)
		return;
	c->alias_exists = true;
	char buf[400];
	while (fgets(buf, sizeof buf, f)) {
		char *cp = buf;
		while (isspace((unsigned char)*cp))
			cp++;
		if (!*cp || *cp == '#')
			continue;
		char *alias = cp;
		while (*cp && !isspace((unsigned char)*cp))
			cp++;
		size_t alen = (size_t)(cp - alias);
		while (isspace((unsigned char)*cp))
			cp++;
		if (!*cp)
			continue;
		char *value = cp;
		while (*cp && !isspace((unsigned char)*cp))
			cp++;
		if (list_add(&c->alias_keys, alias, alen) < 0 ||
		    list_add(&c->alias_values, value, (size_t)(cp - value)) < 0)
			break;
	}
	fclose(f);
}

struct locarhead {
	uint32_t magic, serial, namehash_offset, namehash_used, namehash_size, string_offset,
		string_used, string_size, locrectab_offset, locrectab_used, locrectab_size,
		sumhash_offset, sumhash_used, sumhash_size;
};
struct namehashent {
	uint32_t hashval, name_offset, locrec_offset;
};
#define AR_MAGIC 0xde020109u

/* The names locale-archive holds (every entry of its name table). */
static void read_archive(struct locale_plan_cache *c, const char *file)
{
	c->archive_read = true;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	c->archive_exists = true;
	struct stat st;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct locarhead))
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	size_t size = (size_t)st.st_size;
	struct locarhead h;
	memcpy(&h, m, sizeof h);
	if (h.magic == AR_MAGIC && h.namehash_offset <= size &&
	    h.namehash_size <= (size - h.namehash_offset) / sizeof(struct namehashent)) {
		const char *base = m;
		for (uint32_t i = 0; i < h.namehash_size; i++) {
			struct namehashent e;
			memcpy(&e, base + h.namehash_offset + (size_t)i * sizeof e, sizeof e);
			if (!e.name_offset || e.name_offset >= size || !e.locrec_offset)
				continue;
			size_t n = strnlen(base + e.name_offset, size - e.name_offset);
			if (list_add(&c->archive_names, base + e.name_offset, n) < 0)
				break;
		}
	}
	munmap(m, size);
}

static bool has(const struct str_list *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

/* _nl_normalize_codeset: alphanumerics only, lower case, "iso" before an
 * all-digit name. */
static void normalize_codeset(const char *cs, size_t n, char *out, size_t cap)
{
	bool digits = true;
	for (size_t i = 0; i < n; i++)
		if (isalnum((unsigned char)cs[i]) && !isdigit((unsigned char)cs[i]))
			digits = false;
	size_t o = 0;
	if (digits && cap > 3) {
		memcpy(out, "iso", 3);
		o = 3;
	}
	for (size_t i = 0; i < n && o + 1 < cap; i++)
		if (isalpha((unsigned char)cs[i]))
			out[o++] = (char)tolower((unsigned char)cs[i]);
		else if (isdigit((unsigned char)cs[i]))
			out[o++] = cs[i];
	out[o] = '\0';
}

/* The name the archive is searched with: its codeset normalized. */
static void archive_key(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s", name);
	const char *p = strchr(name, '.');
	if (!p || p[1] == '@' || !p[1])
		return;
	p++;
	const char *rest = strchrnul(p, '@');
	char norm[NAME_MAX_LEN + 4];
	normalize_codeset(p, (size_t)(rest - p), norm, sizeof norm);
	snprintf(out, cap, "%.*s%s%s", (int)(p - name), name, norm, rest);
}

/* valid_locale_name of locale/findlocale.c. */
static bool valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n > NAME_MAX_LEN || memmem(name, n, "/../", 4) || !strcmp(name, ".."))
		return false;
	if (n >= 3 && (!strncmp(name, "../", 3) || !strcmp(name + n - 3, "/..")))
		return false;
	return !(strchr(name, '/') && name[0] != '/');
}

struct exploded {
	char buf[NAME_MAX_LEN + 1], norm[NAME_MAX_LEN + 4];
	const char *language, *territory, *codeset, *modifier;
	int mask;
};

/* _nl_explode_name, including its quirk: the codeset is compared with its
 * normalized form before a following "@modifier" is cut off. */
static void explode(const char *name, struct exploded *e)
{
	snprintf(e->buf, sizeof e->buf, "%s", name);
	char *cp = e->buf;
	e->language = cp;
	e->territory = e->codeset = e->modifier = NULL;
	e->norm[0] = '\0';
	e->mask = 0;
	while (*cp && *cp != '_' && *cp != '@' && *cp != '.')
		cp++;
	if (cp == e->language) {
		cp = strchr(e->language, '\0');
	} else {
		if (*cp == '_') {
			*cp++ = '\0';
			e->territory = cp;
			while (*cp && *cp != '.' && *cp != '@')
				cp++;
			e->mask |= XPG_TERRITORY;
		}
		if (*cp == '.') {
			*cp++ = '\0';
			e->codeset = cp;
			while (*cp && *cp != '@')
				cp++;
			e->mask |= XPG_CODESET;
			if (cp != e->codeset) {
				normalize_codeset(e->codeset, (size_t)(cp - e->codeset), e->norm,
						  sizeof e->norm);
				if (strcmp(e->codeset, e->norm))
					e->mask |= XPG_NORM_CODESET;
			}
		}
	}
	if (*cp == '@') {
		*cp++ = '\0';
		e->modifier = cp;
		if (*cp)
			e->mask |= XPG_MODIFIER;
	}
	if (e->territory && !e->territory[0])
		e->mask &= ~XPG_TERRITORY;
	if (e->codeset && !e->codeset[0])
		e->mask &= ~XPG_CODESET;
}

/* The directory list glibc searches: LOCPATH's entries (empty ones
 * dropped), then the default directory. 0 when an entry is relative (to a
 * cwd the server does not know) or too long, or there are too many. */
static size_t split_dirs(const char *locpath, const char *def, char dirs[][4097], size_t cap)
{
	size_t n = 0;
	for (const char *p = locpath; *p;) {
		size_t k = strcspn(p, ":");
		if (k && (k >= 4097 || p[0] != '/' || n + 1 >= cap))
			return 0;
		if (k) {
			memcpy(dirs[n], p, k);
			dirs[n++][k] = '\0';
		}
		p += k;
		if (*p == ':')
			p++;
	}
	snprintf(dirs[n++], 4097, "%s", def);
	return n;
}

/* What a candidate tells: any hidden file met (*hidden), any visible one
 * (*visible), or -1: the sandbox could not decide. */
struct tally {
	bool hidden, visible;
};


static int look_file(const struct locale_env *env, const char *path, const char *cat,
		     struct tally *t)
{
	struct locale_seen s;
	if (env->look(env->ctx, path, &s) < 0)
		return -1;
	if (!s.exists)
		return 0;
	if (s.hidden) {
		t->hidden = true;
		return 0;
	}
	if (!s.is_dir) {
		t->visible = true;
		return 0;
	}
	/* LOCALE/LC_foo is a directory: glibc opens LOCALE/LC_foo/SYS_LC_foo. */
	char sub[8192];
	if ((size_t)snprintf(sub, sizeof sub, "%s/SYS_%s", path, cat) >= sizeof sub)
		return -1;
	if (env->look(env->ctx, sub, &s) < 0)
		return -1;
	if (s.exists && s.hidden)
		t->hidden = true;
	else if (s.exists)
		t->visible = true;
	return 0;
}

/* Calls fn(arg, DIR/VARIANT) for every directory VARIANT of `name` that
 * _nl_make_l10nflist builds in each directory of dirs. */
static int each_variant(char dirs[][4097], size_t ndirs, const char *name,
			int (*fn)(void *, const char *), void *arg)
{
	struct exploded e;
	explode(name, &e);
	for (int cnt = e.mask; cnt >= 0; cnt--) {
		if ((cnt & ~e.mask) || ((cnt & XPG_CODESET) && (cnt & XPG_NORM_CODESET)))
			continue; /* not a subset, or never opened (decided = 1) */
		for (size_t d = 0; d < ndirs; d++) {
			char path[4097 + NAME_MAX_LEN + 8];
			int n = snprintf(path, sizeof path, "%s/%s%s%s%s%s%s%s%s%s", dirs[d], e.language,
					 (cnt & XPG_TERRITORY) ? "_" : "",
					 (cnt & XPG_TERRITORY) ? e.territory : "",
					 (cnt & XPG_CODESET) ? "." : "", (cnt & XPG_CODESET) ? e.codeset : "",
					 (cnt & XPG_NORM_CODESET) ? "." : "",
					 (cnt & XPG_NORM_CODESET) ? e.norm : "",
					 (cnt & XPG_MODIFIER) ? "@" : "",
					 (cnt & XPG_MODIFIER) ? e.modifier : "");
			if (n < 0 || (size_t)n >= sizeof path || fn(arg, path) < 0)
				return -1;
		}
	}
	return 0;
}

/* A file below each variant directory: LC_foo (with the SYS_LC_foo rule
 * when `cat` is given) or LC_MESSAGES/DOMAIN.mo. */
struct below {
	const struct locale_env *env;
	const char *file, *cat;
	struct tally *t;
};

static int look_below(void *arg, const char *variant)
{
	struct below *b = arg;
	char path[8192];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", variant, b->file) >= sizeof path)
		return -1;
	if (b->cat)
		return look_file(b->env, path, b->cat, b->t);
	struct locale_seen s;
	if (b->env->look(b->env->ctx, path, &s) < 0)
		return -1;
	if (s.exists)
		*(s.hidden ? &b->t->hidden : &b->t->visible) = true;
	return 0;
}

/* Every candidate of `name` for category `cat`. */
static int look_name(const struct locale_env *env, char dirs[][4097], size_t ndirs,
		     const char *name, const char *cat, struct tally *t)
{
	struct below b = { env, cat, cat, t };
	return each_variant(dirs, ndirs, name, look_below, &b);
}

/* What the sandbox says of a whole file (alias file, archive). */
static int look_whole(const struct locale_env *env, const char *path, bool *hidden)
{
	struct locale_seen s;
	if (env->look(env->ctx, path, &s) < 0)
		return -1;
	*hidden = s.exists && s.hidden;
	return 0;
}

int locale_plan(const struct locale_env *env, struct locale_plan_cache *cache,
		const char *locpath, unsigned catmask, const char *name)
{
	if (!strcmp(name, "C") || !strcmp(name, "POSIX") || !name[0] || !valid_name(name))
		return KILN_D_CLEAN; /* nothing loaded: built in, or EINVAL */
	struct locale_plan_cache own = { 0 };
	struct locale_plan_cache *c = cache ? cache : &own;
	int ret = KILN_D_CHECK;
	bool use_archive = !locpath[0];
	if (!c->alias_read)
		read_aliases(c, env->alias_file);
	if (use_archive && !c->archive_read)
		read_archive(c, env->archive);

	/* The alias expansions glibc makes (the file is read whether the
	 * build may see it or not); the chroot makes them only if it may. */
	struct str_list values = { 0 };
	for (size_t i = 0; i < c->alias_keys.n; i++)
		if (!strcasecmp(c->alias_keys.v[i], name) &&
		    list_add(&values, c->alias_values.v[i], strlen(c->alias_values.v[i])) < 0)
			goto out;
	bool alias_hidden = false, archive_hidden = false;
	if ((c->alias_exists && look_whole(env, env->alias_file, &alias_hidden) < 0) ||
	    (use_archive && c->archive_exists && look_whole(env, env->archive, &archive_hidden) < 0))
		goto out;

	static char dirs[64][4097];
	size_t ndirs = split_dirs(locpath, env->locale_dir, dirs, 64);
	if (!ndirs)
		goto out;
	bool any_hidden = false, absent = false;
	for (int cat = 0; cat < NCATS; cat++) {
		if (cat == LC_ALL_BIT || !(catmask & (1u << cat)))
			continue;
		/* real: what glibc may open here; seen: what it may open in a
		 * sandbox where hidden files are absent. */
		struct tally real = { 0 }, seen = { 0 };
		if (alias_hidden && values.n)
			real.hidden = true; /* an expansion the chroot would not make */
		for (size_t v = 0; v <= values.n; v++) {
			const char *n = v ? values.v[v - 1] : name;
			bool via_alias = v > 0;
			char key[2 * NAME_MAX_LEN + 8];
			archive_key(n, key, sizeof key);
			if (use_archive && has(&c->archive_names, key)) {
				if (archive_hidden)
					real.hidden = true;
				else
					real.visible = true;
				if (!archive_hidden && !(via_alias && alias_hidden))
					seen.visible = true;
			}
			struct tally t = { 0 };
			if (look_name(env, dirs, ndirs, n, cat_names[cat], &t) < 0)
				goto out;
			real.hidden |= t.hidden;
			real.visible |= t.visible;
			if (!(via_alias && alias_hidden))
				seen.visible |= t.visible;
		}
		any_hidden |= real.hidden;
		if (real.hidden && !seen.visible)
			absent = true;
	}
	ret = absent ? KILN_D_ABSENT : any_hidden ? KILN_D_CHECK : KILN_D_CLEAN;
out:
	list_free(&values);
	if (c == &own) {
		list_free(&own.alias_keys);
		list_free(&own.alias_values);
		list_free(&own.archive_names);
	}
	return ret;
}

/* Every file of DIRNAME/VARIANT/CATEGORY (any domain), or one domain's. */
struct catalogs {
	const struct locale_env *env;
	const char *category, *domain;
	struct tally *t;
};

static int look_catalogs(void *arg, const char *variant)
{
	struct catalogs *c = arg;
	char path[8192];
	if (c->domain) {
		struct below b = { c->env, NULL, NULL, c->t };
		snprintf(path, sizeof path, "%s/%s.mo", c->category, c->domain);
		b.file = path;
		return look_below(&b, variant);
	}
	if ((size_t)snprintf(path, sizeof path, "%s/%s", variant, c->category) >= sizeof path)
		return -1;
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		struct below b = { c->env, NULL, NULL, c->t };
		char file[512];
		snprintf(file, sizeof file, "%s/%s", c->category, e->d_name);
		b.file = file;
		rc = look_below(&b, variant);
	}
	closedir(d);
	return rc;
}

int catalog_plan(const struct locale_env *env, struct locale_plan_cache *cache, const char *dirname,
		 const char *category, const char *domain, const char *languages)
{
	struct locale_plan_cache own = { 0 };
	struct locale_plan_cache *c = cache ? cache : &own;
	if (!c->alias_read)
		read_aliases(c, env->alias_file);
	int ret = KILN_D_CHECK;
	bool alias_hidden = false;
	if (dirname[0] != '/' || (c->alias_exists && look_whole(env, env->alias_file, &alias_hidden) < 0))
		goto out;
	static char dirs[1][4097];
	snprintf(dirs[0], sizeof dirs[0], "%s", dirname);
	struct tally t = { 0 };
	struct catalogs cat = { env, category, domain, &t };
	for (const char *p = languages; *p;) {
		size_t n = strcspn(p, ":");
		char lang[NAME_MAX_LEN + 1];
		if (n && n <= NAME_MAX_LEN) {
			memcpy(lang, p, n);
			lang[n] = '\0';
			if (!strcmp(lang, "C") || !strcmp(lang, "POSIX"))
				break;
			if (each_variant(dirs, 1, lang, look_catalogs, &cat) < 0)
				goto out;
			for (size_t i = 0; i < c->alias_keys.n; i++) {
				if (strcasecmp(c->alias_keys.v[i], lang))
					continue;
				t.hidden |= alias_hidden;
				if (each_variant(dirs, 1, c->alias_values.v[i], look_catalogs, &cat) < 0)
					goto out;
			}
		}
		p += n + (p[n] == ':');
	}
	ret = t.hidden ? KILN_D_CHECK : KILN_D_CLEAN;
out:
	if (c == &own) {
		list_free(&own.alias_keys);
		list_free(&own.alias_values);
		list_free(&own.archive_names);
	}
	return ret;
}
