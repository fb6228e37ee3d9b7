/*
 * conftab_test.c: the key tables of weir.conf and policy.conf
 * (src/mail/conftab.c) on a table of its own with one key of each kind:
 * each kind's message for a bad value (the text config.c and policy.c
 * promise, conftab.h), the file's rule called for the kinds it serves,
 * the defaults, the values copied, and conftab_set's reading of a value
 * given as text.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/timefmt.h"
#include "mail/config.h"
#include "mail/confparse.h"
#include "mail/conftab.h"

struct t {
	char *s, *o, *a;
	unsigned i;
	long long l, d;
	int b, c, w;
	struct strlist ls;
};

static const char *const ab[] = { "a", "b", NULL };

#define F(f) offsetof(struct t, f), NULL
static const struct conftab_key tab[] = {
	{ "s",  K_STR,      "def", 0, 0, 0, F(s) },
	{ "o",  K_OPTSTR,   "opt", 0, 0, 0, F(o) },
	{ "a",  K_ACCOUNT,  NULL, 0, 0, 0, F(a) },
	{ "i",  K_INT,      NULL, 5, 1, 10, F(i) },
	{ "l",  K_LONG,     NULL, -2, -3, 3, F(l) },
	{ "d",  K_DURATION, "30s", 0, 1, 60, F(d) },
	{ "b",  K_BOOL,     NULL, 1, 0, 0, F(b) },
	{ "c",  K_CHOICE,   "b", 0, 0, 0, offsetof(struct t, c), ab },
	{ "ls", K_LIST,     NULL, 0, 0, 0, F(ls) },
	{ "p",  K_PATTERNS, NULL, 0, 0, 0, CONFTAB_NOFF, NULL },
	{ "w",  K_WORD,     "xyz", 0, 0, 0, F(w) },
	{ "ws", K_WORDS,    NULL, 0, 0, 0, CONFTAB_NOFF, NULL },
};
#define N (sizeof tab / sizeof tab[0])

/* The file's rule: no "q" in a value; a word is stored as its length. */
static const char *
rule(const struct conftab_key *k, const char *v, void *field)
{
	if (strchr(v, 'q'))
		return "no q";
	if (k->kind == K_WORD && field)
		*(int *)field = (int)strlen(v);
	return NULL;
}

static int
validate(cfg_t *cfg, cfg_opt_t *opt)
{
	return conftab_check(cfg, opt, conftab_find(tab, N, opt->name), rule);
}

/* text parsed into *x over the defaults: 0, or -1 with the errors in err. */
static int
load(const char *text, struct t *x, struct buf *err)
{
	cfg_opt_t opts[N + 1];
	struct buf b = BUF_INIT;
	cfg_t *cfg;
	size_t i;
	int r;

	conftab_opts(tab, N, opts);
	cfg = cfg_init(opts, CFGF_NONE);
	cr_assert(cfg != NULL);
	for (i = 0; i < N; i++)
		cfg_set_validate_func(cfg, tab[i].name, validate);
	memset(x, 0, sizeof *x);
	conftab_defaults(tab, N, x, rule);
	buf_adds(&b, text);
	r = confparse_text(cfg, "t.conf", &b, err);
	if (r == 0)
		conftab_copy(tab, N, x, cfg, rule);
	cfg_free(cfg);
	buf_free(&b);
	return r;
}

static void
bad(const char *text, const char *want)
{
	struct buf err = BUF_INIT;
	struct t x;

	cr_assert_eq(load(text, &x, &err), -1, "%s", text);
	cr_assert_str_eq(err.s, want, "%s", text);
	conftab_free(tab, N, &x);
	buf_free(&err);
}

Test(conftab, every_kinds_message)
{
	struct buf want = BUF_INIT;
	const char *why;
	long long v;

	bad("\ns = \"\"\n", "t.conf:2: s must not be empty\n");
	bad("s = \"aqa\"\n", "t.conf:1: s = \"aqa\": no q\n");
	bad("o = \"q\"\n", "t.conf:1: o = \"q\": no q\n");
	bad("a = \"q\"\n", "t.conf:1: a = \"q\": no q\n");
	bad("i = 0\n", "t.conf:1: i = 0 is out of range 1..10\n");
	bad("i = 11\n", "t.conf:1: i = 11 is out of range 1..10\n");
	bad("l = -4\n", "t.conf:1: l = -4 is out of range -3..3\n");
	bad("d = \"2m\"\n", "t.conf:1: d = 120 is out of range 1..60 seconds\n");
	bad("d = \"0s\"\n", "t.conf:1: d = 0 is out of range 1..60 seconds\n");
	cr_assert_eq(duration_parse("5x", &v, &why), -1);
	buf_printf(&want, "t.conf:1: d: \"5x\": %s\n", why);
	bad("d = \"5x\"\n", want.s);
	bad("c = \"z\"\n", "t.conf:1: c = \"z\": must be one of a, b\n");
	bad("ls = {\"x\", \"\"}\n", "t.conf:1: ls: an empty string in the list\n");
	bad("p = {\"*\", \"\"}\n", "t.conf:1: p: empty pattern\n");
	bad("w = \"q\"\n", "t.conf:1: w: \"q\": no q\n");
	bad("ws = {\"a\", \"q\"}\n", "t.conf:1: ws: \"q\": no q\n");
	buf_free(&want);
}

Test(conftab, defaults)
{
	struct buf err = BUF_INIT;
	struct t x;

	cr_assert_eq(load("", &x, &err), 0, "%s", err.s);
	cr_assert_str_eq(x.s, "def");
	cr_assert_str_eq(x.o, "opt");
	cr_assert_null(x.a);
	cr_assert_eq(x.i, 5);
	cr_assert_eq(x.l, -2);
	cr_assert_eq(x.d, 30);
	cr_assert_eq(x.b, 1);
	cr_assert_eq(x.c, 1);
	cr_assert_eq(x.ls.n, 0);
	cr_assert_eq(x.w, 3, "the rule stores a word's default");
	conftab_free(tab, N, &x);
	cr_assert_null(x.s);
	cr_assert_null(x.o);
}

Test(conftab, values_over_defaults)
{
	struct buf err = BUF_INIT;
	struct t x;

	cr_assert_eq(load("s = \"x\"\no = \"\"\na = \"root\"\ni = 10\nl = -3\nd = \"1m\"\n"
	    "b = false\nc = \"a\"\nls = {\"x\", \"y\"}\np = {\"*\"}\nw = \"ab\"\n"
	    "ws = {\"a\"}\n", &x, &err), 0, "%s", err.s);
	cr_assert_str_eq(x.s, "x");
	cr_assert_null(x.o, "\"\" is none");
	cr_assert_str_eq(x.a, "root");
	cr_assert_eq(x.i, 10);
	cr_assert_eq(x.l, -3);
	cr_assert_eq(x.d, 60);
	cr_assert_eq(x.b, 0);
	cr_assert_eq(x.c, 0);
	cr_assert_eq(x.ls.n, 2);
	cr_assert_str_eq(x.ls.v[1], "y");
	cr_assert_eq(x.w, 2);
	conftab_free(tab, N, &x);
	cr_assert_eq(x.ls.n, 0);
	cr_assert_null(x.ls.v);
	cr_assert_null(x.a);
}

Test(conftab, set_from_text)
{
	const struct conftab_key *k;
	struct t x;

	memset(&x, 0, sizeof x);
	conftab_defaults(tab, N, &x, rule);
	cr_assert_eq(conftab_set(conftab_find(tab, N, "i"), "7", &x, rule), 0);
	cr_assert_eq(x.i, 7);
	cr_assert_eq(conftab_set(conftab_find(tab, N, "i"), "11", &x, rule), -1, "out of range");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "i"), "7x", &x, rule), -1, "not a number");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "i"), "", &x, rule), -1, "empty");
	cr_assert_eq(x.i, 7, "a value refused leaves the one before");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "d"), "45s", &x, rule), 0);
	cr_assert_eq(x.d, 45);
	cr_assert_eq(conftab_set(conftab_find(tab, N, "d"), "2m", &x, rule), -1, "out of range");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "s"), "", &x, rule), -1, "K_STR empty");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "s"), "q", &x, rule), -1, "the rule");
	cr_assert_str_eq(x.s, "def");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "o"), "", &x, rule), 0, "K_OPTSTR none");
	cr_assert_null(x.o);
	cr_assert_eq(conftab_set(conftab_find(tab, N, "a"), "daemon", &x, rule), 0);
	cr_assert_str_eq(x.a, "daemon");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "b"), "true", &x, rule), -1,
	    "a kind not read from text");
	cr_assert_eq(conftab_set(conftab_find(tab, N, "c"), "a", &x, rule), -1,
	    "a kind not read from text");
	k = conftab_find(tab, N, "nope");
	cr_assert_null(k);
	conftab_free(tab, N, &x);
}
