/*
 * trouble.c: reply and situation to action; the rules are listed in
 * trouble.h and nowhere else.  Trusts: nothing.  Config keys: none (see
 * trouble.h for policy.conf's throttle_reply).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/trouble.h"


/* A RCPT refusal that is about us, not the recipient. */
static const char *const builtin_relay[] = {
	"530 *",
	"*relay*denied*",
	"*relaying denied*",
	"*not permitted to relay*",
	"*relay not permitted*",
	"*relay access denied*",
	"*authentication required*",
	"*must authenticate*",
	"*sender*not*authori*",
	"5?? 5.7.0 *",
	"5?? 5.7.1 *relay*",
	"5?? 5.7.8 *",
};

struct patlist {
	char **p;
	size_t n;
};

struct trouble_rules {
	struct patlist custom;		/* policy.conf's throttle_reply, tried first */
	struct patlist builtin;		/* policy.c's built-in throttle list */
	int builtin_off;		/* policy.conf: builtin_throttle_replies = false */
	struct patlist throttle, relay;	/* added by trouble_add_throttle/_relay */
};

static void
pat_add(struct patlist *l, const char *p)
{
	l->p = xrealloc(l->p, (l->n + 1) * sizeof *l->p);
	l->p[l->n++] = xstrdup(p);
}

struct trouble_rules *
trouble_new(void)
{
	struct trouble_rules *t = xcalloc(1, sizeof *t);
	const struct policy_throttle *thr;
	size_t i, n = policy_builtin_throttles(&thr);

	/* The "slow down" replies: the one list, policy.c's. */
	for (i = 0; i < n; i++)
		pat_add(&t->builtin, thr[i].pattern);
	for (i = 0; i < sizeof builtin_relay / sizeof builtin_relay[0]; i++)
		pat_add(&t->relay, builtin_relay[i]);
	return t;
}

static void
pat_free(struct patlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->p[i]);
	free(l->p);
}

void
trouble_free(struct trouble_rules *t)
{
	if (t == NULL)
		return;
	pat_free(&t->custom);
	pat_free(&t->builtin);
	pat_free(&t->throttle);
	pat_free(&t->relay);
	free(t);
}

void trouble_add_throttle(struct trouble_rules *t, const char *p) { pat_add(&t->throttle, p); }
void trouble_add_relay(struct trouble_rules *t, const char *p) { pat_add(&t->relay, p); }

void
trouble_add_policy(struct trouble_rules *t, const struct policy *p)
{
	size_t i;

	for (i = 0; i < p->nthr; i++)
		if (!p->thr[i].builtin)
			pat_add(&t->custom, p->thr[i].pattern);
	if (!p->builtin_throttles)
		t->builtin_off = 1;
}

/* "CODE first-line-text", matched against each pattern. */
static int
matches(const struct patlist *l, const struct smtp_reply *r)
{
	char line[SMTP_REPLY_LINE_MAX + 8];
	size_t i, n = 0;
	int k;

	k = snprintf(line, sizeof line, "%03d ", r->code);
	if (k < 0)
		return 0;
	n = (size_t)k;
	for (i = 0; i < r->text.len && r->text.s[i] != '\n' && n + 1 < sizeof line; i++)
		line[n++] = r->text.s[i];
	line[n] = '\0';
	for (i = 0; i < l->n; i++)
		if (fnmatch(l->p[i], line, FNM_CASEFOLD) == 0)
			return 1;
	return 0;
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

/* A RCPT (or end-of-data) reply whose enhanced status code is about the
 * recipient, not about us: X.1.x addressing, X.2.x mailbox ("552 5.2.2
 * mailbox full, quota exceeded"), X.5.3 too many recipients (a cap on
 * one transaction).  Such a reply is never a throttle, whatever its text. */
static int
about_recipient(enum smtp_stage st, const struct smtp_reply *r)
{
	const char *e = r->esc;

	if (st != STAGE_RCPT && st != STAGE_DATA_END)
		return 0;
	if (e[0] == '\0' || e[1] != '.')
		return 0;
	return e[2] == '1' || e[2] == '2' || (e[2] == '5' && strcmp(e + 3, ".3") == 0);
}

enum trouble_action
trouble_reply(const struct trouble_rules *t, enum smtp_stage st, const struct smtp_reply *r)
{
	if (positive(st, r->code))
		return T_ACCEPT;
	if (matches(&t->custom, r))
		return T_SUSPEND;
	if (!about_recipient(st, r) && ((!t->builtin_off && matches(&t->builtin, r)) ||
	    matches(&t->throttle, r)))
		return T_SUSPEND;
	/* A positive-class reply where it is not expected (a 3xx to RCPT, a
	 * 250 to DATA) is a protocol error: never permanent. */
	if (r->code / 100 != 5)
		return T_DEFER;
	switch (st) {
	case STAGE_RCPT:
		return matches(&t->relay, r) ? T_DEFER : T_BOUNCE;
	case STAGE_DATA:
	case STAGE_DATA_END:
		return T_BOUNCE;
	default:
		return T_DEFER;	/* the relay refusing us */
	}
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
