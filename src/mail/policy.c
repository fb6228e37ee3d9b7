/*
 * policy.c: policy.conf (see policy.h for the shape).  Every key is
 * declared once, in the tables below (one table per block), with its
 * kind, default and range; the libconfuse option lists are built from the
 * tables, values are checked while the parser still knows the line
 * (per-key validate callbacks, then one per block for what involves
 * several keys), and after parsing the values are copied into the typed
 * structs.  No other file calls cfg_get*() on this file.
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
#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/timefmt.h"
#include "mail/confparse.h"
#include "mail/policy.h"

enum kkind { K_INT, K_DUR, K_STR, K_UNIT, K_RESET, K_PATTERNS, K_RATES, K_BOOL };

struct pkey {
	const char *name;
	enum kkind kind;
	const char *sdef;	/* K_DUR, K_STR, K_UNIT default; NULL: none */
	long long idef;		/* K_INT, K_BOOL default */
	long long min, max;	/* K_INT, K_DUR (seconds) */
	size_t off;		/* K_INT, K_DUR, K_UNIT: field in the block's struct */
};

#define NOFF ((size_t)-1)
#define W(f) offsetof(struct policy_window, f)
#define U(f) offsetof(struct policy_upstream, f)
#define C(f) offsetof(struct policy_class, f)
#define T(f) offsetof(struct policy_throttle, f)

/* window { } */
static const struct pkey window_keys[] = {
	{ "limit", K_INT,   NULL, 0, 1, POLICY_LIMIT_MAX, W(limit) },
	{ "per",   K_DUR,   NULL, 0, 1, POLICY_PERIOD_MAX, W(per) },
	{ "unit",  K_UNIT,  "messages", 0, 0, 0, W(unit) },
	{ "reset", K_RESET, NULL, 0, 0, 0, NOFF },
	{ NULL, 0, NULL, 0, 0, 0, 0 }
};

/* upstream "name" { } (beside its window blocks) */
static const struct pkey upstream_keys[] = {
	{ "rate",                    K_RATES, NULL, 0, 0, 0, NOFF },
	{ "max_recipients",          K_INT, NULL, 100, 0, 1000000, U(max_recipients) },
	{ "max_connections",         K_INT, NULL, 0, 0, 10000, U(max_connections) },
	{ "messages_per_connection", K_INT, NULL, 0, 0, 1000000, U(messages_per_connection) },
	{ "grace",                   K_DUR, NULL, 0, 1, POLICY_GRACE_MAX, U(grace) },
	{ "shared",                  K_STR, NULL, 0, 0, 0, NOFF },
	{ "shared_secret_file",      K_STR, NULL, 0, 0, 0, NOFF },
	{ NULL, 0, NULL, 0, 0, 0, 0 }
};

/* class "name" { } */
static const struct pkey class_keys[] = {
	{ "priority",       K_INT, NULL, 0, -1000, 1000, C(priority) },
	{ "senders",        K_PATTERNS, NULL, 0, 0, 0, NOFF },
	{ "min_recipients", K_INT, NULL, 0, 0, 1000000, C(min_recipients) },
	{ "max_recipients", K_INT, NULL, 0, 0, 1000000, C(max_recipients) },
	{ NULL, 0, NULL, 0, 0, 0, 0 }
};

/* throttle_reply { } */
static const struct pkey throttle_keys[] = {
	{ "pattern",     K_STR, NULL, 0, 0, 0, NOFF },
	{ "suspend",     K_DUR, NULL, 0, 1, POLICY_PERIOD_MAX, T(suspend) },
	{ "max_suspend", K_DUR, NULL, 0, 1, POLICY_PERIOD_MAX, T(max_suspend) },
	{ NULL, 0, NULL, 0, 0, 0, 0 }
};

/* top level (beside the blocks) */
static const struct pkey top_keys[] = {
	{ "builtin_throttle_replies", K_BOOL, NULL, 1, 0, 0, NOFF },
	{ NULL, 0, NULL, 0, 0, 0, 0 }
};

/* Provider replies that mean "slow down", tried after the file's own:
 * the one built-in list, for the gate's suspension periods and for the
 * deliverers' classifier (mail/trouble.c, through
 * policy_builtin_throttles).  Words about the client or the session,
 * never a bare "4.7.x" or "try again later", which greylisting says of
 * one recipient or one message.  "[ -]": a reply's first line, or the
 * gate's one-line form of a multi-line reply. */
#define SUSP_DEFAULT	POLICY_SUSPEND_DEFAULT, POLICY_MAX_SUSPEND_DEFAULT
static const struct policy_throttle builtin_throttles[] = {
	{ (char *)"421[ -]*",               SUSP_DEFAULT, 1 },	/* closing */
	{ (char *)"550[ -]5.4.5*",          3600, 24 * 3600, 1 },	/* Gmail daily limit */
	{ (char *)"*too many*",             SUSP_DEFAULT, 1 },
	{ (char *)"*rate limit*",           SUSP_DEFAULT, 1 },
	{ (char *)"*ratelimit*",            SUSP_DEFAULT, 1 },
	{ (char *)"*rate-limit*",           SUSP_DEFAULT, 1 },
	{ (char *)"*throttl*",              SUSP_DEFAULT, 1 },	/* SES: "454 Throttling failure" */
	{ (char *)"*slow down*",            SUSP_DEFAULT, 1 },
	{ (char *)"*unusual rate*",         SUSP_DEFAULT, 1 },	/* Gmail's 4.7.28 */
	{ (char *)"*quota exceeded*",       SUSP_DEFAULT, 1 },
	{ (char *)"*sending limit*",        SUSP_DEFAULT, 1 },
};
#undef SUSP_DEFAULT

size_t
policy_builtin_throttles(const struct policy_throttle **out)
{
	*out = builtin_throttles;
	return sizeof builtin_throttles / sizeof builtin_throttles[0];
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

static const struct pkey *
find_key(const struct pkey *t, const char *name)
{
	for (; t->name; t++)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

static int
check_value(cfg_t *cfg, cfg_opt_t *opt, const struct pkey *k)
{
	const char *why = NULL, *s;
	long long v = 0, a;
	struct policy_window w;
	enum policy_unit u;
	unsigned i;

	switch (k->kind) {
	case K_INT:
		v = cfg_opt_getnint(opt, 0);
		break;
	case K_DUR:
		s = cfg_opt_getnstr(opt, 0);
		if (duration_parse(s, &v, &why) < 0) {
			cfg_error(cfg, "%s: \"%s\": %s", k->name, s, why);
			return -1;
		}
		break;
	case K_STR:
		if (*cfg_opt_getnstr(opt, 0) == '\0') {
			cfg_error(cfg, "%s must not be empty", k->name);
			return -1;
		}
		return 0;
	case K_UNIT:
		if (policy_unit_parse(cfg_opt_getnstr(opt, 0), &u) < 0) {
			cfg_error(cfg, "unit: \"%s\": use messages, recipients or connections",
			    cfg_opt_getnstr(opt, 0));
			return -1;
		}
		return 0;
	case K_RESET:
		if (policy_reset_parse(cfg_opt_getnstr(opt, 0), &v, &a, &why) < 0) {
			cfg_error(cfg, "reset: \"%s\": %s", cfg_opt_getnstr(opt, 0), why);
			return -1;
		}
		return 0;
	case K_RATES:
		for (i = 0; i < cfg_opt_size(opt); i++)
			if (policy_rate_parse(cfg_opt_getnstr(opt, i), &w, &why) < 0) {
				cfg_error(cfg, "rate: \"%s\": %s", cfg_opt_getnstr(opt, i), why);
				return -1;
			}
		return 0;
	case K_PATTERNS:
		for (i = 0; i < cfg_opt_size(opt); i++)
			if (*cfg_opt_getnstr(opt, i) == '\0') {
				cfg_error(cfg, "%s: empty pattern", k->name);
				return -1;
			}
		return 0;
	case K_BOOL:
		return 0;
	}
	if (v < k->min || v > k->max) {
		cfg_error(cfg, "%s = %lld is out of range %lld..%lld%s", k->name, v, k->min,
		    k->max, k->kind == K_DUR ? " seconds" : "");
		return -1;
	}
	return 0;
}

#define VALIDATOR(fn, table) \
	static int fn(cfg_t *cfg, cfg_opt_t *opt) { \
		const struct pkey *k = find_key(table, opt->name); \
		return k ? check_value(cfg, opt, k) : 0; \
	}
VALIDATOR(validate_window_key, window_keys)
VALIDATOR(validate_upstream_key, upstream_keys)
VALIDATOR(validate_class_key, class_keys)
VALIDATOR(validate_throttle_key, throttle_keys)

/* Where each table's keys live, for the per-key validate callbacks. */
static const struct {
	const char *prefix;
	const struct pkey *keys;
	cfg_validate_callback_t validate;
} blocks[] = {
	{ "upstream|window|", window_keys, validate_window_key },
	{ "upstream|", upstream_keys, validate_upstream_key },
	{ "class|", class_keys, validate_class_key },
	{ "throttle_reply|", throttle_keys, validate_throttle_key },
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
		free(sh.host);
	} else if (cfg_size(u, "shared_secret_file")) {
		cfg_error(cfg, "shared_secret_file without shared");
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

/* Options for one block: its keys, then its sub-blocks (NULL-ended). */
static cfg_opt_t *
build_opts(const struct pkey *t, const cfg_opt_t *subs, size_t nsubs)
{
	size_t n = 0, i;
	cfg_opt_t *o;

	while (t[n].name)
		n++;
	o = xcalloc(n + nsubs + 1, sizeof *o);
	for (i = 0; i < n; i++) {
		char *name = (char *)t[i].name;

		switch (t[i].kind) {
		case K_INT:
			o[i] = (cfg_opt_t)CFG_INT(name, 0, CFGF_NODEFAULT);
			break;
		case K_BOOL:
			o[i] = (cfg_opt_t)CFG_BOOL(name, t[i].idef ? cfg_true : cfg_false, CFGF_NONE);
			break;
		case K_RATES:
		case K_PATTERNS:
			o[i] = (cfg_opt_t)CFG_STR_LIST(name, NULL, CFGF_NODEFAULT);
			break;
		default:
			o[i] = (cfg_opt_t)CFG_STR(name, NULL, CFGF_NODEFAULT);
			break;
		}
	}
	for (i = 0; i < nsubs; i++)
		o[n + i] = subs[i];
	o[n + nsubs] = (cfg_opt_t)CFG_END();
	return o;
}

/* Copy K_INT, K_DUR and K_UNIT values (or their defaults) into dst. */
static void
copy_scalars(const struct pkey *t, cfg_t *sec, void *dst)
{
	const char *why, *s;
	long long v;
	enum policy_unit u;

	for (; t->name; t++) {
		char *f = (char *)dst + t->off;
		int set = cfg_size(sec, t->name) > 0;

		if (t->off == NOFF)
			continue;
		switch (t->kind) {
		case K_INT:
			*(long long *)f = set ? cfg_getint(sec, t->name) : t->idef;
			break;
		case K_DUR:
			s = set ? cfg_getstr(sec, t->name) : t->sdef;
			v = 0;
			if (s && duration_parse(s, &v, &why) < 0)
				panic("policy: %s: bad value after validation", t->name);
			*(long long *)f = v;
			break;
		case K_UNIT:
			s = set ? cfg_getstr(sec, t->name) : t->sdef;
			if (policy_unit_parse(s, &u) < 0)
				panic("policy: %s: bad unit after validation", t->name);
			*(enum policy_unit *)f = u;
			break;
		default:
			break;
		}
	}
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
	copy_scalars(upstream_keys, sec, u);
	if (cfg_size(sec, "shared"))
		u->shared = xstrdup(cfg_getstr(sec, "shared"));
	if (cfg_size(sec, "shared_secret_file"))
		u->shared_secret_file = xstrdup(cfg_getstr(sec, "shared_secret_file"));
	for (i = 0; i < cfg_size(sec, "window"); i++) {
		ws = cfg_getnsec(sec, "window", i);
		memset(&w, 0, sizeof w);
		copy_scalars(window_keys, ws, &w);
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
	copy_scalars(class_keys, sec, c);
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
	copy_scalars(throttle_keys, sec, t);
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
	const struct pkey *k;
	cfg_t *cfg;
	size_t i, nbuilt = 0;
	int rc = -1;

	memset(p, 0, sizeof *p);
	wopts = build_opts(window_keys, NULL, 0);
	usub[0] = (cfg_opt_t)CFG_SEC("window", wopts, CFGF_MULTI);
	uopts = build_opts(upstream_keys, usub, 1);
	copts = build_opts(class_keys, NULL, 0);
	topts = build_opts(throttle_keys, NULL, 0);
	tsub[0] = (cfg_opt_t)CFG_SEC("upstream", uopts, CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES);
	tsub[1] = (cfg_opt_t)CFG_SEC("class", copts, CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES);
	tsub[2] = (cfg_opt_t)CFG_SEC("throttle_reply", topts, CFGF_MULTI);
	top = build_opts(top_keys, tsub, 3);

	cfg = cfg_init(top, CFGF_NONE);
	if (cfg == NULL) {
		buf_printf(err, "%s: cannot initialise the config parser\n", path);
		goto out_opts;
	}
	for (i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
		for (k = blocks[i].keys; k->name; k++) {
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
	p->builtin_throttles = cfg_getbool(cfg, "builtin_throttle_replies") ? 1 : 0;
	if (p->builtin_throttles)
		nbuilt = sizeof builtin_throttles / sizeof builtin_throttles[0];
	p->nthr = cfg_size(cfg, "throttle_reply");
	p->thr = xcalloc(p->nthr + nbuilt + 1, sizeof *p->thr);
	for (i = 0; i < p->nthr; i++)
		copy_throttle(&p->thr[i], cfg_getnsec(cfg, "throttle_reply", (unsigned)i));
	for (i = 0; i < nbuilt; i++) {
		p->thr[p->nthr] = builtin_throttles[i];
		p->thr[p->nthr++].pattern = xstrdup(builtin_throttles[i].pattern);
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

int
policy_shared_parse(const char *s, struct policy_shared *sh, const char **why)
{
	const char *p, *colon, *slash;
	char *end;
	long v;

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
	if (strncmp(s, "redis://", 8) != 0) {
		*why = "use redis://HOST:PORT/DB, unix:/PATH or /PATH";
		return -1;
	}
	p = s + 8;
	colon = strchr(p, ':');
	slash = strchr(p, '/');
	if (colon == NULL || colon == p || (slash && slash < colon)) {
		*why = "use redis://HOST:PORT/DB";
		return -1;
	}
	errno = 0;
	v = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || v < 1 || v > 65535 || (*end != '\0' && *end != '/')) {
		*why = "the port is 1 to 65535";
		return -1;
	}
	sh->port = (int)v;
	if (*end == '/' && end[1] != '\0') {
		const char *d = end + 1;

		errno = 0;
		v = strtol(d, &end, 10);
		if (errno || end == d || *end != '\0' || v < 0 || v > 1000000) {
			*why = "the database is a number";
			return -1;
		}
		sh->db = (int)v;
	}
	sh->host = xstrndup(p, (size_t)(colon - p));
	return 0;
}

void
policy_free(struct policy *p)
{
	size_t i, j;

	for (i = 0; i < p->nup; i++) {
		free(p->up[i].name);
		free(p->up[i].shared);
		free(p->up[i].shared_secret_file);
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
	static const struct pkey *const tables[] = {
		top_keys, upstream_keys, window_keys, class_keys, throttle_keys,
	};
	size_t t, k;

	for (t = 0; t < sizeof tables / sizeof tables[0]; t++)
		for (k = 0; tables[t][k].name; k++)
			if (i-- == 0)
				return tables[t][k].name;
	return NULL;
}
