/* conftab.c: see conftab.h.  Trusts: the tables (their defaults are
 * valid: a bad one is a panic at load). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/config.h"
#include "mail/conftab.h"

const struct conftab_key *
conftab_find(const struct conftab_key *tab, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(tab[i].name, name) == 0)
			return &tab[i];
	return NULL;
}

static int
choice_index(const struct conftab_key *k, const char *v)
{
	int i;

	for (i = 0; k->choices[i]; i++)
		if (strcmp(k->choices[i], v) == 0)
			return i;
	return -1;
}

void
conftab_opts(const struct conftab_key *tab, size_t n, cfg_opt_t *opts)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char *name = (char *)tab[i].name;

		switch (tab[i].kind) {
		case K_INT:
		case K_LONG:
			opts[i] = (cfg_opt_t)CFG_INT(name, tab[i].idef, CFGF_NODEFAULT);
			break;
		case K_BOOL:
			opts[i] = (cfg_opt_t)CFG_BOOL(name, cfg_true, CFGF_NODEFAULT);
			break;
		case K_LIST:
		case K_PATTERNS:
		case K_WORDS:
			opts[i] = (cfg_opt_t)CFG_STR_LIST(name, NULL, CFGF_NODEFAULT);
			break;
		default:
			opts[i] = (cfg_opt_t)CFG_STR(name, NULL, CFGF_NODEFAULT);
			break;
		}
	}
	opts[n] = (cfg_opt_t)CFG_END();
}

static int
in_range(const struct conftab_key *k, long long v)
{
	return v >= k->min && v <= k->max;
}

/* Why s is not a value of k, of a string kind (K_STR, K_OPTSTR,
 * K_ACCOUNT), or NULL; "" for a K_STR left empty. */
static const char *
string_problem(const struct conftab_key *k, const char *s, conftab_rule *rule)
{
	if (*s == '\0')
		return k->kind == K_STR ? "" : NULL;
	return rule ? rule(k, s, NULL) : NULL;
}

int
conftab_check(cfg_t *cfg, cfg_opt_t *opt, const struct conftab_key *k, conftab_rule *rule)
{
	const char *why, *s;
	long long v;
	unsigned i;

	if (k == NULL)
		return 0;
	switch (k->kind) {
	case K_CHOICE:
		s = cfg_opt_getnstr(opt, 0);
		if (choice_index(k, s) < 0) {
			struct buf all = BUF_INIT;

			for (i = 0; k->choices[i]; i++)
				buf_printf(&all, "%s%s", i ? ", " : "", k->choices[i]);
			cfg_error(cfg, "%s = \"%s\": must be one of %s", k->name, s, all.s);
			buf_free(&all);
			return -1;
		}
		return 0;
	case K_LIST:
	case K_PATTERNS:
		for (i = 0; i < cfg_opt_size(opt); i++)
			if (*cfg_opt_getnstr(opt, i) == '\0') {
				cfg_error(cfg, "%s: %s", k->name, k->kind == K_PATTERNS ?
				    "empty pattern" : "an empty string in the list");
				return -1;
			}
		return 0;
	case K_WORD:
	case K_WORDS:
		for (i = 0; i < cfg_opt_size(opt); i++) {
			s = cfg_opt_getnstr(opt, i);
			if ((why = rule(k, s, NULL)) != NULL) {
				cfg_error(cfg, "%s: \"%s\": %s", k->name, s, why);
				return -1;
			}
		}
		return 0;
	case K_STR:
	case K_OPTSTR:
	case K_ACCOUNT:
		s = cfg_opt_getnstr(opt, 0);
		if ((why = string_problem(k, s, rule)) == NULL)
			return 0;
		if (*why == '\0')
			cfg_error(cfg, "%s must not be empty", k->name);
		else
			cfg_error(cfg, "%s = \"%s\": %s", k->name, s, why);
		return -1;
	case K_INT:
	case K_LONG:
		v = cfg_opt_getnint(opt, 0);
		break;
	case K_DURATION:
		s = cfg_opt_getnstr(opt, 0);
		if (duration_parse(s, &v, &why) < 0) {
			cfg_error(cfg, "%s: \"%s\": %s", k->name, s, why);
			return -1;
		}
		break;
	default:
		return 0;
	}
	if (!in_range(k, v)) {
		cfg_error(cfg, "%s = %lld is out of range %lld..%lld%s", k->name, v, k->min,
		    k->max, k->kind == K_DURATION ? " seconds" : "");
		return -1;
	}
	return 0;
}

/* The number v into field, as k's kind keeps it. */
static void
set_number(const struct conftab_key *k, char *field, long long v)
{
	if (k->kind == K_INT)
		*(unsigned *)field = (unsigned)v;
	else if (k->kind == K_BOOL)
		*(int *)field = v != 0;
	else
		*(long long *)field = v;	/* K_LONG, K_DURATION */
}

/* The string s for k into field (a default when def). */
static void
set_value(const struct conftab_key *k, char *field, const char *s, conftab_rule *rule,
    int def)
{
	const char *why;
	long long v;

	switch (k->kind) {
	case K_STR:
	case K_OPTSTR:
	case K_ACCOUNT:
		free(*(char **)field);
		*(char **)field = *s ? xstrdup(s) : NULL;
		break;
	case K_CHOICE:
		*(int *)field = choice_index(k, s);
		break;
	case K_DURATION:
		if (duration_parse(s, &v, &why) < 0)
			panic("%s: bad %s", k->name, def ? "default" : "value after validation");
		set_number(k, field, v);
		break;
	case K_WORD:
		if (rule(k, s, field) != NULL)
			panic("%s: bad %s", k->name, def ? "default" : "value after validation");
		break;
	default:
		break;
	}
}

int
conftab_set(const struct conftab_key *k, const char *v, void *base, conftab_rule *rule)
{
	char *field = (char *)base + k->off, *end;
	const char *why;
	long long n;

	switch (k->kind) {
	case K_STR:
	case K_OPTSTR:
	case K_ACCOUNT:
		if (string_problem(k, v, rule) != NULL)
			return -1;
		set_value(k, field, v, rule, 0);
		return 0;
	case K_INT:
		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || end == v || *end || !in_range(k, n))
			return -1;
		set_number(k, field, n);
		return 0;
	case K_DURATION:
		if (duration_parse(v, &n, &why) < 0 || !in_range(k, n))
			return -1;
		set_number(k, field, n);
		return 0;
	default:
		return -1;
	}
}

void
conftab_format(const struct conftab_key *k, const void *base, struct buf *out)
{
	const char *field = (const char *)base + k->off;
	const struct strlist *l;
	const char *s;
	char d[64];
	size_t i;

	switch (k->kind) {
	case K_STR: case K_OPTSTR: case K_ACCOUNT:
		s = *(char *const *)field;
		if (s)
			buf_printf(out, "\"%s\"", s);
		else
			buf_adds(out, "(none)");
		break;
	case K_INT:
		buf_printf(out, "%u", *(const unsigned *)field);
		break;
	case K_LONG:
		buf_printf(out, "%lld", *(const long long *)field);
		break;
	case K_BOOL:
		buf_adds(out, *(const int *)field ? "true" : "false");
		break;
	case K_DURATION:
		duration_format(d, sizeof d, *(const long long *)field);
		buf_adds(out, d);
		break;
	case K_CHOICE:
		i = (size_t)*(const int *)field;
		if (*(const int *)field < 0)
			buf_adds(out, "(none)");
		else
			buf_printf(out, "\"%s\"", k->choices[i]);
		break;
	case K_LIST:
		l = (const struct strlist *)field;
		if (l->n == 0) {
			buf_adds(out, "(none)");
			break;
		}
		buf_addc(out, '{');
		for (i = 0; i < l->n; i++)
			buf_printf(out, "%s\"%s\"", i ? ", " : "", l->v[i]);
		buf_addc(out, '}');
		break;
	default:
		buf_adds(out, "?");
		break;
	}
}

static void
list_free(struct strlist *l)
{
	size_t j;

	for (j = 0; j < l->n; j++)
		free(l->v[j]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void
conftab_defaults(const struct conftab_key *tab, size_t n, void *base, conftab_rule *rule)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char *field = (char *)base + tab[i].off;

		if (tab[i].off == CONFTAB_NOFF)
			continue;
		switch (tab[i].kind) {
		case K_INT: case K_LONG: case K_BOOL:
			set_number(&tab[i], field, tab[i].idef);
			break;
		case K_DURATION:
			set_number(&tab[i], field, 0);
			break;
		case K_LIST:
			memset(field, 0, sizeof(struct strlist));
			break;
		case K_CHOICE:
			*(int *)field = -1;
			break;
		case K_STR: case K_OPTSTR: case K_ACCOUNT:
			*(char **)field = NULL;
			break;
		default:
			break;
		}
		if (tab[i].def)
			set_value(&tab[i], field, tab[i].def, rule, 1);
	}
}

void
conftab_copy(const struct conftab_key *tab, size_t n, void *base, cfg_t *cfg,
    conftab_rule *rule)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		char *field = (char *)base + tab[i].off;
		const char *name = tab[i].name;
		struct strlist *l;

		if (tab[i].off == CONFTAB_NOFF || cfg_size(cfg, name) == 0)
			continue;
		switch (tab[i].kind) {
		case K_INT: case K_LONG:
			set_number(&tab[i], field, cfg_getint(cfg, name));
			break;
		case K_BOOL:
			set_number(&tab[i], field, cfg_getbool(cfg, name));
			break;
		case K_LIST:
			l = (struct strlist *)field;
			list_free(l);
			l->n = cfg_size(cfg, name);
			l->v = xcalloc(l->n + 1, sizeof *l->v);
			for (j = 0; j < l->n; j++)
				l->v[j] = xstrdup(cfg_getnstr(cfg, name, (unsigned)j));
			break;
		default:
			if (cfg_getstr(cfg, name))
				set_value(&tab[i], field, cfg_getstr(cfg, name), rule, 0);
			break;
		}
	}
}

void
conftab_free(const struct conftab_key *tab, size_t n, void *base)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char *field = (char *)base + tab[i].off;

		if (tab[i].off == CONFTAB_NOFF)
			continue;
		if (tab[i].kind == K_STR || tab[i].kind == K_ACCOUNT || tab[i].kind == K_OPTSTR) {
			free(*(char **)field);
			*(char **)field = NULL;
		} else if (tab[i].kind == K_LIST) {
			list_free((struct strlist *)field);
		}
	}
}
