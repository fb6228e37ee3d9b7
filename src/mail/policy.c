/*
 * policy.c: policy.conf (see policy.h for the shape).  Every key is
 * declared once, in the tables below (one table per block), with its
 * kind, default and range (mail/conftab.h); the libconfuse option lists
 * are built from the tables, values are checked while the parser still
 * knows the line (per-key validate callbacks, then one per block for what
 * involves several keys), and after parsing the values are copied into
 * the typed structs.  No other file calls cfg_get*() on this file.
 *
 * Trusts: the file's owner.  Nonsense (zero or negative limit, zero
 * period, a reset that disagrees with per, unknown unit or zone) is an
 * error with file:line, never a guess.
 *
 * Zones for calendar windows: UTC/GMT/Z and fixed offsets (+HHMM, -HH:MM,
 * UTC+H[:MM]).  Named zones with daylight saving are not accepted: their
 * days are not all 24 hours long.
 */
#include <confuse.h>
#include <ctype.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/decimal.h"
#include "lib/timefmt.h"
#include "mail/confparse.h"
#include "mail/conftab.h"
#include "mail/policy.h"
#include "mail/replyclass.h"

#define NOFF CONFTAB_NOFF, NULL
#define W(f) offsetof(struct policy_window, f), NULL
#define U(f) offsetof(struct policy_upstream, f), NULL
#define C(f) offsetof(struct policy_class, f), NULL
#define T(f) offsetof(struct policy_throttle, f), NULL
#define P(f) offsetof(struct policy, f), NULL
#define NKEYS(t) (sizeof t / sizeof t[0])

/* window { } */
static const struct conftab_key window_keys[] = {
	{ "limit", K_LONG,     NULL, 0, 1, POLICY_LIMIT_MAX, W(limit) },
	{ "per",   K_DURATION, NULL, 0, 1, POLICY_PERIOD_MAX, W(per) },
	{ "unit",  K_WORD,     "messages", 0, 0, 0, W(unit) },
	{ "reset", K_WORD,     NULL, 0, 0, 0, NOFF },
};

/* upstream "name" { } (beside its window blocks) */
static const struct conftab_key upstream_keys[] = {
	{ "rate",                    K_WORDS, NULL, 0, 0, 0, NOFF },
	{ "max_recipients",          K_LONG, NULL, 100, 0, 1000000, U(max_recipients) },
	{ "max_connections",         K_LONG, NULL, 0, 0, 10000, U(max_connections) },
	{ "messages_per_connection", K_LONG, NULL, 0, 0, 1000000, U(messages_per_connection) },
	{ "grace",                   K_DURATION, NULL, 0, 1, POLICY_GRACE_MAX, U(grace) },
	{ "shared",                  K_STR, NULL, 0, 0, 0, NOFF },
	{ "shared_secret_file",      K_STR, NULL, 0, 0, 0, NOFF },
	{ "shared_sentinel_secret_file", K_STR, NULL, 0, 0, 0, NOFF },
};

/* class "name" { } */
static const struct conftab_key class_keys[] = {
	{ "priority",       K_LONG, NULL, 0, -1000, 1000, C(priority) },
	{ "senders",        K_PATTERNS, NULL, 0, 0, 0, NOFF },
	{ "min_recipients", K_LONG, NULL, 0, 0, 1000000, C(min_recipients) },
	{ "max_recipients", K_LONG, NULL, 0, 0, 1000000, C(max_recipients) },
};

/* throttle_reply { } */
static const struct conftab_key throttle_keys[] = {
	{ "pattern",     K_STR, NULL, 0, 0, 0, NOFF },
	{ "suspend",     K_DURATION, NULL, 0, 1, POLICY_PERIOD_MAX, T(suspend) },
	{ "max_suspend", K_DURATION, NULL, 0, 1, POLICY_PERIOD_MAX, T(max_suspend) },
};

/* top level (beside the blocks) */
static const struct conftab_key top_keys[] = {
	{ "builtin_throttle_replies", K_BOOL, NULL, 1, 0, 0, P(builtin_throttles) },
};

/* Provider replies that suspend the upstream, tried after the file's
 * own: the rows of the one table of reply classes (mail/replyclass.h)
 * that carry a suspension (quota, rate, a 421 closing the session), for
 * the gate's suspension periods; the deliverers' classifier
 * (mail/trouble.c) reads the same rows. */
size_t
policy_builtin_throttles(const struct policy_throttle **out)
{
	static struct policy_throttle list[256];
	static size_t n;
	const struct reply_row *rows;
	size_t nrows, i;

	if (n == 0) {
		rows = reply_rows(&nrows);
		for (i = 0; i < nrows && n < sizeof list / sizeof list[0]; i++)
			if (rows[i].suspend > 0)
				list[n++] = (struct policy_throttle){ (char *)rows[i].pattern,
				    rows[i].suspend, rows[i].max_suspend, 1 };
	}
	*out = list;
	return n;
}

static const char *const unit_names[UNIT_COUNT] = {
	"messages", "recipients", "connections",
};

const char *
policy_unit_name(enum policy_unit u)
{
	return (unsigned)u < UNIT_COUNT ? unit_names[u] : "?";
}

int
policy_unit_parse(const char *s, enum policy_unit *u)
{
	size_t i, n;

	for (i = 0; i < UNIT_COUNT; i++) {
		n = strlen(unit_names[i]);
		/* "messages" or "message" */
		if (strcmp(s, unit_names[i]) == 0 ||
		    (strncmp(s, unit_names[i], n - 1) == 0 && s[n - 1] == '\0')) {
			*u = (enum policy_unit)i;
			return 0;
		}
	}
	return -1;
}

/* Strict unsigned decimal, at most max. */
static int
parse_num(const char *s, long long max, long long *out)
{
	long long v = 0;

	if (*s == '\0')
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (max - (*s - '0')) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

/* Split s (a copy is made) on blanks into at most max words. */
static size_t
split_words(char *s, char **w, size_t max)
{
	size_t n = 0;
	char *save = NULL, *tok;

	for (tok = strtok_r(s, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (n == max)
			return max + 1;
		w[n++] = tok;
	}
	return n;
}

/* Zone: seconds east of UTC. */
static int
zone_parse(const char *z, long long *east, const char **why)
{
	long long h, m = 0;
	const char *p = z;
	char hh[3] = "", mm[3] = "";
	int sign;

	if (strcasecmp(z, "UTC") == 0 || strcasecmp(z, "GMT") == 0 || strcmp(z, "Z") == 0) {
		*east = 0;
		return 0;
	}
	if (strncasecmp(p, "UTC", 3) == 0 || strncasecmp(p, "GMT", 3) == 0)
		p += 3;
	if (*p != '+' && *p != '-')
		goto bad;
	sign = *p++ == '-' ? -1 : 1;
	/* H, HH, HHMM, H:MM, HH:MM */
	if (isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]) &&
	    isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]) && p[4] == '\0') {
		memcpy(hh, p, 2);
		memcpy(mm, p + 2, 2);
	} else {
		const char *colon = strchr(p, ':');
		size_t hl = colon ? (size_t)(colon - p) : strlen(p);

		if (hl < 1 || hl > 2)
			goto bad;
		memcpy(hh, p, hl);
		if (colon) {
			if (strlen(colon + 1) != 2)
				goto bad;
			memcpy(mm, colon + 1, 2);
		}
	}
	if (parse_num(hh, 14, &h) < 0 || (mm[0] && parse_num(mm, 59, &m) < 0))
		goto bad;
	if (h * 60 + m > 14 * 60)
		goto bad;
	*east = sign * (h * 3600 + m * 60);
	return 0;
bad:
	*why = "unknown zone (use UTC or a fixed offset such as +0200, -05:00, UTC+1)";
	return -1;
}

static int
hhmm_parse(const char *s, long long *secs)
{
	long long h, m;
	char hh[3] = "", mm[3] = "";
	const char *colon = strchr(s, ':');

	if (colon == NULL || colon - s < 1 || colon - s > 2 || strlen(colon + 1) != 2)
		return -1;
	memcpy(hh, s, (size_t)(colon - s));
	memcpy(mm, colon + 1, 2);
	if (parse_num(hh, 23, &h) < 0 || parse_num(mm, 59, &m) < 0)
		return -1;
	*secs = h * 3600 + m * 60;
	return 0;
}

static int
reset_words(char **w, size_t n, long long *per, long long *align, const char **why)
{
	long long at = 0, east = 0;
	size_t i = 0;

	if (n == 1 && strcasecmp(w[0], "hourly") == 0) {
		*per = 3600;
		*align = 0;
		return 0;
	}
	if (n >= 1 && strcasecmp(w[0], "daily") == 0) {
		i = 1;
		if (n == 1)
			goto done;
		if (strcasecmp(w[1], "at") != 0 || n < 3)
			goto bad;
		i = 2;
	}
	if (i >= n || hhmm_parse(w[i], &at) < 0)
		goto bad;
	i++;
	if (i < n && zone_parse(w[i++], &east, why) < 0)
		return -1;
	if (i != n)
		goto bad;
done:
	*per = 86400;
	*align = ((at - east) % 86400 + 86400) % 86400;
	return 0;
bad:
	*why = "reset must be \"hourly\", \"daily\", \"daily at HH:MM [ZONE]\" or \"HH:MM [ZONE]\"";
	return -1;
}

int
policy_reset_parse(const char *s, long long *per, long long *align, const char **why)
{
	char *copy = xstrdup(s), *w[8];
	size_t n = split_words(copy, w, 8);
	int r;

	if (n == 0 || n > 8) {
		free(copy);
		*why = n == 0 ? "empty reset" : "reset: too many words";
		return -1;
	}
	r = reset_words(w, n, per, align, why);
	free(copy);
	return r;
}

int
policy_rate_parse(const char *s, struct policy_window *win, const char **why)
{
	char *copy = xstrdup(s), *w[10];
	size_t n = split_words(copy, w, 10), i = 0;
	struct policy_window v;
	int r = -1;

	memset(&v, 0, sizeof v);
	v.unit = UNIT_MESSAGES;
	if (n == 0 || n > 10) {
		*why = "a rate looks like \"8 per 1m\" or \"10000 recipients per 1d\"";
		goto out;
	}
	if (parse_num(w[0], POLICY_LIMIT_MAX, &v.limit) < 0 || v.limit < 1) {
		*why = "the limit must be a whole number from 1 to 1000000000";
		goto out;
	}
	i = 1;
	if (i < n && policy_unit_parse(w[i], &v.unit) == 0)
		i++;
	if (i < n && strcasecmp(w[i], "per") == 0) {
		if (i + 2 != n) {
			*why = "expected one duration after \"per\" (like 1m, 1h, 1d)";
			goto out;
		}
		if (duration_parse(w[i + 1], &v.per, why) < 0)
			goto out;
		if (v.per < 1 || v.per > POLICY_PERIOD_MAX) {
			*why = "the period must be from 1s to 366d";
			goto out;
		}
	} else if (i < n) {
		if (reset_words(w + i, n - i, &v.per, &v.align, why) < 0)
			goto out;
		v.calendar = 1;
	} else {
		*why = "expected \"per DURATION\", \"daily ...\" or \"hourly\" after the limit";
		goto out;
	}
	*win = v;
	r = 0;
out:
	free(copy);
	return r;
}

/* ---- parsing ---- */

/* policy.conf's rule for its words (conftab.h): unit, reset, rate. */
static const char *
word_rule(const struct conftab_key *k, const char *v, void *field)
{
	const char *why = NULL;
	struct policy_window w;
	enum policy_unit u;
	long long per, align;

	if (strcmp(k->name, "unit") == 0) {
		if (policy_unit_parse(v, &u) < 0)
			return "use messages, recipients or connections";
		if (field)
			*(enum policy_unit *)field = u;
	} else if (strcmp(k->name, "reset") == 0) {
		(void)policy_reset_parse(v, &per, &align, &why);
	} else if (strcmp(k->name, "rate") == 0) {
		(void)policy_rate_parse(v, &w, &why);
	}
	return why;
}

#define VALIDATOR(fn, table) \
	static int fn(cfg_t *cfg, cfg_opt_t *opt) { \
		return conftab_check(cfg, opt, conftab_find(table, NKEYS(table), opt->name), \
		    word_rule); \
	}
VALIDATOR(validate_window_key, window_keys)
VALIDATOR(validate_upstream_key, upstream_keys)
VALIDATOR(validate_class_key, class_keys)
VALIDATOR(validate_throttle_key, throttle_keys)

/* Where each table's keys live, for the per-key validate callbacks. */
static const struct {
	const char *prefix;
	const struct conftab_key *keys;
	size_t n;
	cfg_validate_callback_t validate;
} blocks[] = {
	{ "upstream|window|", window_keys, NKEYS(window_keys), validate_window_key },
	{ "upstream|", upstream_keys, NKEYS(upstream_keys), validate_upstream_key },
	{ "class|", class_keys, NKEYS(class_keys), validate_class_key },
	{ "throttle_reply|", throttle_keys, NKEYS(throttle_keys), validate_throttle_key },
};

/* The last section of opt: the one that has just been closed. */
static cfg_t *
last_sec(cfg_opt_t *opt)
{
	return cfg_opt_getnsec(opt, cfg_opt_size(opt) - 1);
}

static int
validate_window(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *w = last_sec(opt);
	long long per = 0, rper, align;
	const char *why;

	if (cfg_size(w, "limit") == 0) {
		cfg_error(cfg, "window: limit is required");
		return -1;
	}
	if (cfg_size(w, "per") && duration_parse(cfg_getstr(w, "per"), &per, &why) < 0)
		return -1;	/* already reported */
	if (cfg_size(w, "reset")) {
		if (policy_reset_parse(cfg_getstr(w, "reset"), &rper, &align, &why) < 0)
			return -1;
		if (per != 0 && per != rper) {
			cfg_error(cfg, "window: per = \"%s\" disagrees with reset = \"%s\" "
			    "(a daily reset counts per 1d, hourly per 1h)",
			    cfg_getstr(w, "per"), cfg_getstr(w, "reset"));
			return -1;
		}
	} else if (per == 0) {
		cfg_error(cfg, "window: per is required (or a reset such as \"daily at 00:00 UTC\")");
		return -1;
	}
	return 0;
}

static int
validate_class(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *c = last_sec(opt);
	long long lo = cfg_size(c, "min_recipients") ? cfg_getint(c, "min_recipients") : 0;
	long long hi = cfg_size(c, "max_recipients") ? cfg_getint(c, "max_recipients") : 0;

	if (hi != 0 && lo > hi) {
		cfg_error(cfg, "class \"%s\": min_recipients %lld is above max_recipients %lld",
		    cfg_title(c), lo, hi);
		return -1;
	}
	if (strlen(cfg_title(c)) > POLICY_NAME_MAX) {
		cfg_error(cfg, "class name longer than %d characters", POLICY_NAME_MAX);
		return -1;
	}
	return 0;
}

int
policy_valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > POLICY_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '-' && *s != '_')
			return 0;
	return 1;
}

static int
validate_upstream(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *u = last_sec(opt);

	if (strcmp(cfg_title(u), POLICY_ANY_UPSTREAM) != 0 && !policy_valid_name(cfg_title(u))) {
		cfg_error(cfg, "upstream \"%s\": a name is 1 to %d of A-Z a-z 0-9 . - _, "
		    "or \"*\" (every other upstream)", cfg_title(u), POLICY_NAME_MAX);
		return -1;
	}
	if (cfg_size(u, "shared")) {
		struct policy_shared sh;
		const char *why;

		if (policy_shared_parse(cfg_getstr(u, "shared"), &sh, &why) < 0) {
			cfg_error(cfg, "shared: \"%s\": %s", cfg_getstr(u, "shared"), why);
			return -1;
		}
		if (sh.nsent == 0 && cfg_size(u, "shared_sentinel_secret_file")) {
			policy_shared_free(&sh);
			cfg_error(cfg, "shared_sentinel_secret_file without redis-sentinel:// in shared");
			return -1;
		}
		policy_shared_free(&sh);
	} else if (cfg_size(u, "shared_secret_file") || cfg_size(u, "shared_sentinel_secret_file")) {
		cfg_error(cfg, "%s without shared", cfg_size(u, "shared_secret_file") ?
		    "shared_secret_file" : "shared_sentinel_secret_file");
		return -1;
	}
	return 0;
}

static int
validate_throttle(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *t = last_sec(opt);
	long long s = POLICY_SUSPEND_DEFAULT, m;
	const char *why;

	if (cfg_size(t, "pattern") == 0) {
		cfg_error(cfg, "throttle_reply: pattern is required");
		return -1;
	}
	if (cfg_size(t, "suspend") && duration_parse(cfg_getstr(t, "suspend"), &s, &why) < 0)
		return -1;
	if (cfg_size(t, "max_suspend") &&
	    duration_parse(cfg_getstr(t, "max_suspend"), &m, &why) == 0 && m < s) {
		cfg_error(cfg, "throttle_reply: max_suspend is shorter than suspend");
		return -1;
	}
	return 0;
}

/* Options for one block: its keys, then its sub-blocks. */
static cfg_opt_t *
build_opts(const struct conftab_key *t, size_t n, const cfg_opt_t *subs, size_t nsubs)
{
	cfg_opt_t *o = xcalloc(n + nsubs + 1, sizeof *o);
	size_t i;

	conftab_opts(t, n, o);
	for (i = 0; i < nsubs; i++)
		o[n + i] = subs[i];
	o[n + nsubs] = (cfg_opt_t)CFG_END();
	return o;
}

/* The keys of t stored in the block's struct (dst, zeroed), set or at
 * their defaults. */
static void
copy_scalars(const struct conftab_key *t, size_t n, cfg_t *sec, void *dst)
{
	conftab_defaults(t, n, dst, word_rule);
	conftab_copy(t, n, dst, sec, word_rule);
}

static void
add_window(struct policy_upstream *u, const struct policy_window *w)
{
	u->win = xrealloc(u->win, (u->nwin + 1) * sizeof *u->win);
	u->win[u->nwin++] = *w;
}

static void
copy_upstream(struct policy_upstream *u, cfg_t *sec)
{
	struct policy_window w;
	const char *why;
	unsigned i;
	cfg_t *ws;

	memset(u, 0, sizeof *u);
	u->name = xstrdup(cfg_title(sec));
	u->line = sec->line;
	copy_scalars(upstream_keys, NKEYS(upstream_keys), sec, u);
	if (cfg_size(sec, "shared"))
		u->shared = xstrdup(cfg_getstr(sec, "shared"));
	if (cfg_size(sec, "shared_secret_file"))
		u->shared_secret_file = xstrdup(cfg_getstr(sec, "shared_secret_file"));
	if (cfg_size(sec, "shared_sentinel_secret_file"))
		u->shared_sentinel_secret_file = xstrdup(cfg_getstr(sec,
		    "shared_sentinel_secret_file"));
	for (i = 0; i < cfg_size(sec, "window"); i++) {
		ws = cfg_getnsec(sec, "window", i);
		memset(&w, 0, sizeof w);
		copy_scalars(window_keys, NKEYS(window_keys), ws, &w);
		w.line = ws->line;
		if (cfg_size(ws, "reset")) {
			if (policy_reset_parse(cfg_getstr(ws, "reset"), &w.per, &w.align, &why) < 0)
				panic("policy: reset: bad value after validation");
			w.calendar = 1;
		}
		add_window(u, &w);
	}
	for (i = 0; i < cfg_size(sec, "rate"); i++) {
		if (policy_rate_parse(cfg_getnstr(sec, "rate", i), &w, &why) < 0)
			panic("policy: rate: bad value after validation");
		w.line = sec->line;
		add_window(u, &w);
	}
}

static void
copy_class(struct policy_class *c, cfg_t *sec)
{
	unsigned i;

	memset(c, 0, sizeof *c);
	c->name = xstrdup(cfg_title(sec));
	c->line = sec->line;
	copy_scalars(class_keys, NKEYS(class_keys), sec, c);
	c->nsenders = cfg_size(sec, "senders");
	c->senders = xcalloc(c->nsenders + 1, sizeof *c->senders);
	for (i = 0; i < c->nsenders; i++)
		c->senders[i] = xstrdup(cfg_getnstr(sec, "senders", i));
}

static void
copy_throttle(struct policy_throttle *t, cfg_t *sec)
{
	memset(t, 0, sizeof *t);
	t->pattern = xstrdup(cfg_getstr(sec, "pattern"));
	copy_scalars(throttle_keys, NKEYS(throttle_keys), sec, t);
	/* Not given: the default suspend; the default max_suspend, or
	 * suspend if that is longer. */
	if (cfg_size(sec, "suspend") == 0)
		t->suspend = POLICY_SUSPEND_DEFAULT;
	if (cfg_size(sec, "max_suspend") == 0)
		t->max_suspend = t->suspend > POLICY_MAX_SUSPEND_DEFAULT ? t->suspend :
		    POLICY_MAX_SUSPEND_DEFAULT;
}

int
policy_load(struct policy *p, const char *path, struct buf *err)
{
	cfg_opt_t *wopts, *uopts, *copts, *topts, *top;
	cfg_opt_t usub[1], tsub[3];
	const struct conftab_key *k;
	cfg_t *cfg;
	size_t i, nbuilt = 0;
	const struct policy_throttle *builtin = NULL;
	int rc = -1;

	memset(p, 0, sizeof *p);
	wopts = build_opts(window_keys, NKEYS(window_keys), NULL, 0);
	usub[0] = (cfg_opt_t)CFG_SEC("window", wopts, CFGF_MULTI);
	uopts = build_opts(upstream_keys, NKEYS(upstream_keys), usub, 1);
	copts = build_opts(class_keys, NKEYS(class_keys), NULL, 0);
	topts = build_opts(throttle_keys, NKEYS(throttle_keys), NULL, 0);
	tsub[0] = (cfg_opt_t)CFG_SEC("upstream", uopts, CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES);
	tsub[1] = (cfg_opt_t)CFG_SEC("class", copts, CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES);
	tsub[2] = (cfg_opt_t)CFG_SEC("throttle_reply", topts, CFGF_MULTI);
	top = build_opts(top_keys, NKEYS(top_keys), tsub, 3);

	cfg = cfg_init(top, CFGF_NONE);
	if (cfg == NULL) {
		buf_printf(err, "%s: cannot initialise the config parser\n", path);
		goto out_opts;
	}
	for (i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
		for (k = blocks[i].keys; k < blocks[i].keys + blocks[i].n; k++) {
			char *kpath = xasprintf("%s%s", blocks[i].prefix, k->name);

			cfg_set_validate_func(cfg, kpath, blocks[i].validate);
			free(kpath);
		}
	cfg_set_validate_func(cfg, "upstream|window", validate_window);
	cfg_set_validate_func(cfg, "upstream", validate_upstream);
	cfg_set_validate_func(cfg, "class", validate_class);
	cfg_set_validate_func(cfg, "throttle_reply", validate_throttle);

	if (confparse(cfg, path, err) < 0)
		goto out;

	p->file = xstrdup(path);
	p->nup = cfg_size(cfg, "upstream");
	p->up = xcalloc(p->nup + 1, sizeof *p->up);
	for (i = 0; i < p->nup; i++)
		copy_upstream(&p->up[i], cfg_getnsec(cfg, "upstream", (unsigned)i));
	p->ncls = cfg_size(cfg, "class");
	p->cls = xcalloc(p->ncls + 1, sizeof *p->cls);
	for (i = 0; i < p->ncls; i++)
		copy_class(&p->cls[i], cfg_getnsec(cfg, "class", (unsigned)i));
	copy_scalars(top_keys, NKEYS(top_keys), cfg, p);
	if (p->builtin_throttles)
		nbuilt = policy_builtin_throttles(&builtin);
	p->nthr = cfg_size(cfg, "throttle_reply");
	p->thr = xcalloc(p->nthr + nbuilt + 1, sizeof *p->thr);
	for (i = 0; i < p->nthr; i++)
		copy_throttle(&p->thr[i], cfg_getnsec(cfg, "throttle_reply", (unsigned)i));
	for (i = 0; i < nbuilt; i++) {
		p->thr[p->nthr] = builtin[i];
		p->thr[p->nthr++].pattern = xstrdup(builtin[i].pattern);
	}
	rc = 0;
out:
	cfg_free(cfg);
out_opts:
	free(wopts);
	free(uopts);
	free(copts);
	free(topts);
	free(top);
	if (rc < 0)
		policy_free(p);
	return rc;
}

/* "HOST:PORT" in s[0..n): *host (malloc'ed) and *port (digits only).
 * 0 ok; -1 with why. */
static int
host_port(const char *s, size_t n, char **host, int *port, const char **why)
{
	const char *colon = memrchr(s, ':', n);
	uint64_t v;

	if (colon == NULL || colon == s) {
		*why = "each address is HOST:PORT";
		return -1;
	}
	if (dec_parse(colon + 1, n - (size_t)(colon + 1 - s), 65535, &v) < 0 || v < 1) {
		*why = "the port is 1 to 65535";
		return -1;
	}
	*port = (int)v;
	*host = xstrndup(s, (size_t)(colon - s));
	return 0;
}

/* "/DB" at the end of a redis:// or redis-sentinel:// form, or "". */
static int
db_number(const char *d, int *db, const char **why)
{
	uint64_t v;

	if (*d == '\0' || (d[0] == '/' && d[1] == '\0'))
		return 0;
	if (d[0] != '/' || dec_parse(d + 1, strlen(d + 1), 1000000, &v) < 0) {
		*why = "the database is a number";
		return -1;
	}
	*db = (int)v;
	return 0;
}

static int
sentinels_parse(const char *p, struct policy_shared *sh, const char **why)
{
	const char *slash = strchr(p, '/'), *a, *comma, *name, *nend;
	char *master;

	if (slash == NULL || slash == p) {
		*why = "use redis-sentinel://HOST:PORT,HOST:PORT,.../MASTER";
		return -1;
	}
	for (a = p;; a = comma + 1) {
		comma = memchr(a, ',', (size_t)(slash - a));
		if (comma == NULL)
			comma = slash;
		if (sh->nsent == POLICY_SENTINELS_MAX) {
			*why = "at most 16 sentinels";
			return -1;
		}
		if (host_port(a, (size_t)(comma - a), &sh->sent_host[sh->nsent],
		    &sh->sent_port[sh->nsent], why) < 0)
			return -1;
		sh->nsent++;
		if (comma == slash)
			break;
	}
	name = slash + 1;
	nend = strchr(name, '/');
	if (nend == NULL)
		nend = name + strlen(name);
	master = xstrndup(name, (size_t)(nend - name));
	sh->master = master;
	if (!policy_valid_name(master)) {
		*why = "the master's name is 1 to 64 of A-Z a-z 0-9 . - _";
		return -1;
	}
	return db_number(nend, &sh->db, why);
}

int
policy_shared_parse(const char *s, struct policy_shared *sh, const char **why)
{
	const char *p, *slash;

	memset(sh, 0, sizeof *sh);
	if (strncmp(s, "unix:", 5) == 0)
		s += 5;
	if (s[0] == '/') {
		if (strlen(s) >= 108) {
			*why = "a socket path is at most 107 bytes";
			return -1;
		}
		sh->host = xstrdup(s);
		sh->unix_socket = 1;
		return 0;
	}
	if (strncmp(s, "redis-sentinel://", 17) == 0) {
		if (sentinels_parse(s + 17, sh, why) < 0) {
			policy_shared_free(sh);
			return -1;
		}
		return 0;
	}
	if (strncmp(s, "redis://", 8) != 0) {
		*why = "use redis://HOST:PORT/DB, redis-sentinel://HOST:PORT,.../MASTER, "
		    "unix:/PATH or /PATH";
		return -1;
	}
	p = s + 8;
	slash = strchr(p, '/');
	if (slash == NULL)
		slash = p + strlen(p);
	if (memchr(p, ':', (size_t)(slash - p)) == NULL) {
		*why = "use redis://HOST:PORT/DB";
		return -1;
	}
	if (host_port(p, (size_t)(slash - p), &sh->host, &sh->port, why) < 0 ||
	    db_number(slash, &sh->db, why) < 0) {
		policy_shared_free(sh);
		return -1;
	}
	return 0;
}

void
policy_shared_free(struct policy_shared *sh)
{
	size_t i;

	free(sh->host);
	for (i = 0; i < sh->nsent; i++)
		free(sh->sent_host[i]);
	free(sh->master);
	memset(sh, 0, sizeof *sh);
}

void
policy_free(struct policy *p)
{
	size_t i, j;

	for (i = 0; i < p->nup; i++) {
		free(p->up[i].name);
		free(p->up[i].shared);
		free(p->up[i].shared_secret_file);
		free(p->up[i].shared_sentinel_secret_file);
		free(p->up[i].win);
	}
	free(p->up);
	for (i = 0; i < p->ncls; i++) {
		free(p->cls[i].name);
		for (j = 0; j < p->cls[i].nsenders; j++)
			free(p->cls[i].senders[j]);
		free(p->cls[i].senders);
	}
	free(p->cls);
	for (i = 0; i < p->nthr; i++)
		free(p->thr[i].pattern);
	free(p->thr);
	free(p->file);
	memset(p, 0, sizeof *p);
}

const struct policy_upstream *
policy_upstream(const struct policy *p, const char *name)
{
	size_t i;

	const struct policy_upstream *any = NULL;

	for (i = 0; i < p->nup; i++) {
		if (strcmp(p->up[i].name, name) == 0)
			return &p->up[i];
		if (strcmp(p->up[i].name, POLICY_ANY_UPSTREAM) == 0)
			any = &p->up[i];
	}
	return any;
}

static int
sender_matches(const struct policy_class *c, const char *sender)
{
	size_t i;

	if (c->nsenders == 0)
		return 1;
	if (sender == NULL)
		return 0;
	for (i = 0; i < c->nsenders; i++)
		if (fnmatch(c->senders[i], sender, FNM_CASEFOLD) == 0)
			return 1;
	return 0;
}

const struct policy_class *
policy_class_for(const struct policy *p, const char *name, const char *sender,
    long long rcpts)
{
	size_t i;

	if (name) {
		for (i = 0; i < p->ncls; i++)
			if (strcmp(p->cls[i].name, name) == 0)
				return &p->cls[i];
		return NULL;
	}
	for (i = 0; i < p->ncls; i++) {
		const struct policy_class *c = &p->cls[i];

		if (rcpts < c->min_recipients)
			continue;
		if (c->max_recipients != 0 && rcpts > c->max_recipients)
			continue;
		if (sender_matches(c, sender))
			return c;
	}
	return NULL;
}

const struct policy_throttle *
policy_throttle_match(const struct policy *p, const char *reply)
{
	size_t i;

	for (i = 0; i < p->nthr; i++)
		if (fnmatch(p->thr[i].pattern, reply, FNM_CASEFOLD) == 0)
			return &p->thr[i];
	return NULL;
}

const char *
policy_key_name(size_t i)
{
	static const struct {
		const struct conftab_key *keys;
		size_t n;
	} tables[] = {
		{ top_keys, NKEYS(top_keys) }, { upstream_keys, NKEYS(upstream_keys) },
		{ window_keys, NKEYS(window_keys) }, { class_keys, NKEYS(class_keys) },
		{ throttle_keys, NKEYS(throttle_keys) },
	};
	size_t t;

	for (t = 0; t < sizeof tables / sizeof tables[0]; t++) {
		if (i < tables[t].n)
			return tables[t].keys[i].name;
		i -= tables[t].n;
	}
	return NULL;
}
