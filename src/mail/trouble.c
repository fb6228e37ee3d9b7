/*
 * trouble.c: reply and situation to action; the rules are listed in
 * trouble.h and nowhere else, the classes of replies in replyclass.c.
 * Trusts: nothing.  Config keys: none (see trouble.h for policy.conf's
 * throttle_reply and weir.conf's reply_rules).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/trouble.h"

struct pat {
	char *p;
	enum reply_class cls;
	char *where;
};

struct patlist {
	struct pat *v;
	size_t n;
};

struct trouble_rules {
	struct patlist rules;		/* the upstream's reply_rules, tried first */
	struct patlist custom;		/* policy.conf's throttle_reply */
	int builtin_off;		/* policy.conf: builtin_throttle_replies = false */
	struct patlist added;		/* trouble_add_throttle/_relay */
};

static void
pat_add(struct patlist *l, const char *p, enum reply_class cls, const char *where)
{
	l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
	l->v[l->n].p = xstrdup(p);
	l->v[l->n].cls = cls;
	l->v[l->n].where = where ? xstrdup(where) : NULL;
	l->n++;
}

static void
pat_free(struct patlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		free(l->v[i].p);
		free(l->v[i].where);
	}
	free(l->v);
}

struct trouble_rules *
trouble_new(void)
{
	return xcalloc(1, sizeof(struct trouble_rules));
}

void
trouble_free(struct trouble_rules *t)
{
	if (t == NULL)
		return;
	pat_free(&t->custom);
	pat_free(&t->rules);
	pat_free(&t->added);
	free(t);
}

void trouble_add_throttle(struct trouble_rules *t, const char *p) { pat_add(&t->added, p, RC_RATE, NULL); }
void trouble_add_relay(struct trouble_rules *t, const char *p) { pat_add(&t->added, p, RC_RELAY, NULL); }

void
trouble_add_rule(struct trouble_rules *t, enum reply_class cls, const char *pattern,
    const char *where)
{
	pat_add(&t->rules, pattern, cls, where);
}

void
trouble_add_rules(struct trouble_rules *t, const struct strlist *rules)
{
	enum reply_class cls;
	const char *pat, *why;
	size_t i;

	for (i = 0; i < rules->n; i++)
		if (reply_rule_parse(rules->v[i], &cls, &pat, &why) == 0)
			trouble_add_rule(t, cls, pat, NULL);
}

void
trouble_add_policy(struct trouble_rules *t, const struct policy *p)
{
	size_t i;

	for (i = 0; i < p->nthr; i++)
		if (!p->thr[i].builtin)
			pat_add(&t->custom, p->thr[i].pattern, RC_RATE, NULL);
	if (!p->builtin_throttles)
		t->builtin_off = 1;
}

/* The first pattern of l that takes line: its index, or -1. */
static int
find(const struct patlist *l, const char *line)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (fnmatch(l->v[i].p, line, FNM_CASEFOLD) == 0)
			return (int)i;
	return -1;
}

static int
positive(enum smtp_stage st, int code)
{
	switch (st) {
	case STAGE_DATA:
		return code == 354;
	case STAGE_AUTH:
		return code / 100 == 2 || code == 334;
	default:
		return code / 100 == 2;
	}
}

enum trouble_action
trouble_action_of(enum smtp_stage st, enum reply_class c, int code, int suspends)
{
	switch (c) {
	case RC_QUOTA:
	case RC_RATE:
		return suspends ? T_SUSPEND : T_DEFER;
	case RC_UNAVAILABLE:
		/* At the greeting: not reached (weir-remote says so). */
		return st != STAGE_BANNER && code == 421 && suspends ? T_SUSPEND : T_DEFER;
	case RC_RECIPIENT:
		if (code / 100 != 5)
			return T_DEFER;
		return st == STAGE_RCPT || st == STAGE_DATA || st == STAGE_DATA_END ? T_BOUNCE :
		    T_DEFER;
	default:
		return T_DEFER;
	}
}

void
trouble_judge(const struct trouble_rules *t, enum smtp_stage st, const struct smtp_reply *r,
    struct trouble_verdict *v)
{
	char line[REPLY_LINE_MAX];
	const struct reply_row *rows;
	size_t nrows;
	int k, suspends = 1;

	memset(v, 0, sizeof *v);
	v->index = -1;
	if (positive(st, r->code)) {
		v->action = T_ACCEPT;
		v->origin = TO_POSITIVE;
		return;
	}
	reply_line(r, line, sizeof line);
	if ((k = find(&t->rules, line)) >= 0) {
		v->origin = TO_RULE;
		v->cls = t->rules.v[k].cls;
		v->pattern = t->rules.v[k].p;
		v->where = t->rules.v[k].where;
		v->index = k;
	} else if ((k = find(&t->custom, line)) >= 0) {
		v->origin = TO_POLICY;
		v->cls = RC_RATE;
		v->pattern = t->custom.v[k].p;
	} else if ((k = find(&t->added, line)) >= 0) {
		v->origin = TO_ADDED;
		v->cls = t->added.v[k].cls;
		v->pattern = t->added.v[k].p;
	} else if ((k = reply_row_find(st, line)) >= 0) {
		rows = reply_rows(&nrows);
		v->origin = TO_TABLE;
		v->cls = rows[k].cls;
		v->pattern = rows[k].pattern;
		v->index = k;
		suspends = !t->builtin_off;
	} else {
		v->origin = TO_DEFAULT;
		v->cls = reply_class_default(st, r->code);
		suspends = !t->builtin_off;	/* a bare 421 is a built-in row's too */
	}
	v->action = trouble_action_of(st, v->cls, r->code, suspends);
}

enum trouble_action
trouble_reply(const struct trouble_rules *t, enum smtp_stage st, const struct smtp_reply *r)
{
	struct trouble_verdict v;

	trouble_judge(t, st, r, &v);
	return v.action;
}

enum trouble_action
trouble_situation(enum trouble_situation sit)
{
	switch (sit) {
	case SIT_LINE_TOO_LONG:
	case SIT_TOO_BIG:
		return T_BOUNCE;
	default:
		return T_DEFER;
	}
}

int
trouble_identical_refusals(size_t nrcpt, size_t nsame_5xx, size_t naccepted)
{
	return naccepted == 0 && nrcpt >= 2 && nsame_5xx == nrcpt;
}

const char *
trouble_action_name(enum trouble_action a)
{
	static const char *const names[] = { "accept", "defer", "bounce", "suspend" };

	return (unsigned)a < 4 ? names[a] : "?";
}

const char *
trouble_stage_name(enum smtp_stage st)
{
	static const char *const names[STAGE_COUNT] = {
		"connect", "banner", "EHLO", "STARTTLS", "TLS", "AUTH", "MAIL FROM",
		"RCPT TO", "DATA", "end of data", "QUIT", "local",
	};

	return (unsigned)st < STAGE_COUNT ? names[st] : "?";
}
