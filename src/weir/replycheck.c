/*
 * replycheck.c: `weir check-config --reply "REPLY"`: what an upstream's
 * reply means for the relay, and why, for each upstream of weir.conf,
 * at each step it can answer (mail/trouble.h, mail/replyclass.h): the
 * rules weir-remote uses, built the way it builds them (the upstream's
 * reply_rules, policy.conf's throttle_reply patterns and its
 * builtin_throttle_replies, the built-in table), and which one took the
 * reply: a rule of weir.conf with its line, a pattern of the policy, a
 * row of the table, or the reply's code at that step.
 *
 * Output, for each upstream (or, with none, for the built-in rules):
 *
 *   upstream "NAME":
 *     at mail, rcpt, dot: quota: suspends the upstream for its quota,
 *       never bounced; fallback_when "quota" sends its mail on to
 *       "isp" -- weir.conf:14: reply_rules "quota: 554 5.2.0 *"
 *
 * steps with the same class, action and reason on one line.
 *
 * Trusts: the administrator's files and argument.  Config keys:
 * upstream sections (reply_rules, fallback, fallback_when), policy_file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "mail/confparse.h"
#include "mail/policy.h"
#include "mail/replyclass.h"
#include "mail/route.h"
#include "mail/trouble.h"
#include "weir/weir.h"

static const enum smtp_stage steps[] = { STAGE_BANNER, STAGE_EHLO, STAGE_AUTH, STAGE_MAIL,
	STAGE_RCPT, STAGE_DATA, STAGE_DATA_END };
#define NSTEPS (sizeof steps / sizeof steps[0])

/* What v means at st, in words, into out. */
static void
meaning(const struct trouble_verdict *v, enum smtp_stage st, struct buf *out)
{
	switch (v->action) {
	case T_ACCEPT:
		buf_adds(out, "accepted");
		return;
	case T_BOUNCE:
		buf_adds(out, st == STAGE_RCPT ? "a 5xx: bounces that recipient" :
		    "a 5xx: bounces the message");
		return;
	case T_SUSPEND:
		buf_adds(out, v->cls == RC_QUOTA ? "suspends the upstream for its quota "
		    "(2h, doubling), never bounced" : "suspends the upstream (a throttle), never "
		    "bounced");
		return;
	case T_DEFER:
		if (st == STAGE_BANNER && v->cls == RC_UNAVAILABLE)
			buf_adds(out, "the upstream is not reached (no greeting): deferred");
		else if (st == STAGE_AUTH && v->cls == RC_AUTH)
			buf_adds(out, "deferred; a 5xx suspends the upstream (our credentials)");
		else
			buf_adds(out, "deferred, never bounced");
		return;
	}
}

/* The fallback_when condition of u that v sends its mail on by, if any:
 * the route kind, or -1. */
static int
route_kind_of(const struct weir_upstream *u, const struct trouble_verdict *v,
    enum smtp_stage st)
{
	int k = -1;

	if (u == NULL || u->fallback.n == 0)
		return -1;
	if (v->action == T_SUSPEND)
		k = v->cls == RC_QUOTA ? RK_QUOTA : RK_THROTTLED;
	else if (st == STAGE_BANNER && v->cls == RC_UNAVAILABLE)
		k = RK_UNREACHABLE;
	else if (st == STAGE_AUTH && v->cls == RC_AUTH)
		k = RK_AUTH;
	/* A quota's suspension is a throttle's too (route.h). */
	if (k == RK_QUOTA && u->when.s[RK_QUOTA] == RK_OFF)
		k = RK_THROTTLED;
	return k >= 0 && u->when.s[k] != RK_OFF ? k : -1;
}

/* Why v: which rule took the reply. */
static void
reason(const struct trouble_verdict *v, const struct policy *pol, struct buf *out)
{
	switch (v->origin) {
	case TO_RULE:
		buf_printf(out, "%s%sreply_rules \"%s: %s\"", v->where ? v->where : "",
		    v->where ? ": " : "", reply_class_name(v->cls), v->pattern);
		break;
	case TO_POLICY:
		buf_printf(out, "%s: throttle_reply \"%s\"", pol && pol->file ? pol->file :
		    "the policy", v->pattern);
		break;
	case TO_ADDED:
		buf_printf(out, "pattern \"%s\"", v->pattern);
		break;
	case TO_TABLE:
		buf_printf(out, "built-in row %d \"%s\"", v->index + 1, v->pattern);
		break;
	case TO_DEFAULT:
		buf_adds(out, "no pattern: its code at this step");
		break;
	case TO_POSITIVE:
		buf_adds(out, "a positive reply");
		break;
	}
}

/* The rules weir-remote would use for u (NULL: none), with the rules'
 * lines in text. */
static struct trouble_rules *
rules_for(const struct weir_config *c, const struct weir_upstream *u, const struct policy *pol,
    const char *text)
{
	struct trouble_rules *t = trouble_new();
	enum reply_class cls;
	const char *pat, *why;
	char where[512];
	size_t i;
	int line;

	for (i = 0; u && i < u->reply_rules.n; i++) {
		if (reply_rule_parse(u->reply_rules.v[i], &cls, &pat, &why) < 0)
			continue;	/* the loader said so */
		line = text ? confparse_key_line(text, u->name, NULL, u->reply_rules.v[i],
		    u->line) : 0;
		if (line)
			snprintf(where, sizeof where, "%s:%d", c->file ? c->file : "weir.conf",
			    line);
		else
			snprintf(where, sizeof where, "%s", c->file ? c->file : "weir.conf");
		trouble_add_rule(t, cls, pat, where);
	}
	if (pol)
		trouble_add_policy(t, pol);
	return t;
}

/* The lines for one upstream u (NULL: the built-in rules alone). */
static void
explain(const struct weir_config *c, const struct weir_upstream *u, const struct policy *pol,
    const char *text, const struct smtp_reply *r)
{
	struct trouble_rules *t = rules_for(c, u, pol, text);
	struct trouble_verdict v[NSTEPS];
	struct buf what[NSTEPS], why[NSTEPS];
	size_t i, j;
	int done[NSTEPS] = { 0 };

	if (u)
		printf("upstream \"%s\":\n", u->name);
	else
		printf("no upstream section: the built-in rules and the policy's\n");
	for (i = 0; i < NSTEPS; i++) {
		int k;

		trouble_judge(t, steps[i], r, &v[i]);
		what[i] = (struct buf)BUF_INIT;
		why[i] = (struct buf)BUF_INIT;
		buf_printf(&what[i], "%s: ", reply_class_name(v[i].cls));
		meaning(&v[i], steps[i], &what[i]);
		if ((k = route_kind_of(u, &v[i], steps[i])) >= 0)
			buf_printf(&what[i], "; fallback_when \"%s\" sends its mail on to \"%s\"",
			    route_kind_name((enum route_kind)k), u->fallback.v[0]);
		reason(&v[i], pol, &why[i]);
	}
	for (i = 0; i < NSTEPS; i++) {
		if (done[i])
			continue;
		printf("  at %s", reply_stage_word(steps[i]));
		for (j = i + 1; j < NSTEPS; j++)
			if (!done[j] && strcmp(what[i].s, what[j].s) == 0 &&
			    strcmp(why[i].s, why[j].s) == 0) {
				printf(", %s", reply_stage_word(steps[j]));
				done[j] = 1;
			}
		printf(": %s -- %s\n", what[i].s, why[i].s);
	}
	for (i = 0; i < NSTEPS; i++) {
		buf_free(&what[i]);
		buf_free(&why[i]);
	}
	trouble_free(t);
}

int
check_reply(const struct weir_config *c, const struct policy *pol, const char *text,
    const char *reply)
{
	struct smtp_reply r;
	struct buf wire = BUF_INIT;
	const char *why = NULL;
	size_t i;

	smtp_reply_init(&r);
	buf_printf(&wire, "%s\r\n", reply);
	if (strchr(reply, '\n') || strchr(reply, '\r') ||
	    smtp_reply_parse(&r, wire.s, wire.len, &why) != REPLY_DONE) {
		log_warnx("--reply \"%s\": not one SMTP reply line (\"554 5.2.0 text\"): %s", reply,
		    why ? why : "a line break in it");
		buf_free(&wire);
		smtp_reply_free(&r);
		return 2;
	}
	printf("reply \"%s\"%s:\n", reply, pol ? "" : " (no policy file read)");
	for (i = 0; i < c->nupstreams; i++)
		explain(c, &c->upstreams[i], pol, text, &r);
	if (c->nupstreams == 0)
		explain(c, NULL, pol, text, &r);
	buf_free(&wire);
	smtp_reply_free(&r);
	return 0;
}
