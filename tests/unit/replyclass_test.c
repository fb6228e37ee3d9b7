/*
 * replyclass_test.c: the table of reply classes (mail/replyclass.h)
 * against the corpus of real replies in tests/data/replies.txt: each
 * gets the class its line says at its stage, through the classifier the
 * deliverer uses (trouble_judge, no policy and no rules); a quota or
 * rate reply never bounces at any stage; and the table's own rules
 * (stage masks, names, the suspension each row carries).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "mail/replyclass.h"
#include "mail/trouble.h"
#include "testlib.h"

#define CORPUS "tests/data/replies.txt"

struct entry {
	int st;
	char *reply;
	int cls;
	char *source;
	int lineno;
};

static struct entry *corpus;
static size_t ncorpus;

/* The corpus, every line strictly read: four TAB-separated fields. */
static void
load(void)
{
	FILE *f = fopen(CORPUS, "r");
	char line[2048];
	int lineno = 0;

	cr_assert_not_null(f, "%s: cannot open (run from the top of the tree)", CORPUS);
	while (fgets(line, sizeof line, f)) {
		char *fld[4], *p = line, *nl = strchr(line, '\n');
		struct entry *e;
		int k;

		lineno++;
		cr_assert_not_null(nl, "%s:%d: no newline, or a line too long", CORPUS, lineno);
		*nl = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		for (k = 0; k < 4; k++) {
			fld[k] = p;
			p = strchr(p, '\t');
			if (k < 3) {
				cr_assert_not_null(p, "%s:%d: %d fields, 4 wanted", CORPUS, lineno, k + 1);
				*p++ = '\0';
			}
		}
		cr_assert_null(p, "%s:%d: more than 4 fields", CORPUS, lineno);
		corpus = xrealloc(corpus, (ncorpus + 1) * sizeof *corpus);
		e = &corpus[ncorpus++];
		e->lineno = lineno;
		e->st = reply_stage_from_word(fld[0]);
		cr_assert_geq(e->st, 0, "%s:%d: stage \"%s\"", CORPUS, lineno, fld[0]);
		e->reply = xstrdup(fld[1]);
		e->cls = reply_class_from_name(fld[2], strlen(fld[2]));
		cr_assert_geq(e->cls, 0, "%s:%d: class \"%s\"", CORPUS, lineno, fld[2]);
		cr_assert_gt(strlen(fld[3]), 20, "%s:%d: no source named", CORPUS, lineno);
		cr_assert(strstr(fld[3], "20"), "%s:%d: the source has no date", CORPUS, lineno);
		e->source = xstrdup(fld[3]);
	}
	fclose(f);
}

static void
unload(void)
{
	size_t i;

	for (i = 0; i < ncorpus; i++) {
		free(corpus[i].reply);
		free(corpus[i].source);
	}
	free(corpus);
	corpus = NULL;
	ncorpus = 0;
}

TestSuite(replyclass, .init = load, .fini = unload);

/* What the deliverer's classifier says of reply (one line) at st. */
static void
judge(const char *reply, int st, struct trouble_verdict *v)
{
	struct trouble_rules *t = trouble_new();
	struct smtp_reply r;
	char *wire = xasprintf("%s\r\n", reply);
	const char *why = NULL;

	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_parse(&r, wire, strlen(wire), &why), REPLY_DONE, "%s: %s", reply,
	    why);
	trouble_judge(t, (enum smtp_stage)st, &r, v);
	smtp_reply_free(&r);
	trouble_free(t);
	free(wire);
}

Test(replyclass, corpus_is_big_enough_and_spread)
{
	size_t i, per[RC_COUNT] = { 0 };

	cr_assert_geq(ncorpus, 80, "only %zu replies in %s", ncorpus, CORPUS);
	for (i = 0; i < ncorpus; i++)
		per[corpus[i].cls]++;
	for (i = RC_RECIPIENT; i < RC_COUNT; i++)
		cr_assert_geq(per[i], 5, "only %zu replies of class %s", per[i],
		    reply_class_name((enum reply_class)i));
}

Test(replyclass, every_corpus_reply_gets_its_class)
{
	struct buf bad = BUF_INIT;
	size_t i, nbad = 0;

	for (i = 0; i < ncorpus; i++) {
		struct trouble_verdict v;

		judge(corpus[i].reply, corpus[i].st, &v);
		if ((int)v.cls != corpus[i].cls) {
			buf_printf(&bad, "%s:%d: %s at %s: %s, wanted %s (%s)\n", CORPUS,
			    corpus[i].lineno, corpus[i].reply, reply_stage_word(corpus[i].st),
			    reply_class_name(v.cls), reply_class_name(corpus[i].cls),
			    v.pattern ? v.pattern : "no pattern");
			nbad++;
		}
	}
	cr_assert_eq(nbad, 0, "%zu of %zu replies misclassed:\n%s", nbad, ncorpus, buf_cstr(&bad));
	buf_free(&bad);
}

/* Issue 31, items 2 and 3: a quota or rate reply suspends the upstream
 * at every stage it can come at, and never bounces, 4xx or 5xx; the
 * quota ones say so. */
Test(replyclass, quota_and_rate_never_bounce_at_any_stage)
{
	static const int stages[] = { STAGE_BANNER, STAGE_EHLO, STAGE_AUTH, STAGE_MAIL, STAGE_RCPT,
		STAGE_DATA, STAGE_DATA_END };
	size_t i, k, n = 0;

	for (i = 0; i < ncorpus; i++) {
		if (corpus[i].cls != RC_QUOTA && corpus[i].cls != RC_RATE)
			continue;
		for (k = 0; k < sizeof stages / sizeof stages[0]; k++) {
			struct trouble_verdict v;

			judge(corpus[i].reply, stages[k], &v);
			cr_assert_eq(v.action, T_SUSPEND, "%s:%d: %s at %s: %s", CORPUS,
			    corpus[i].lineno, corpus[i].reply, reply_stage_word(stages[k]),
			    trouble_action_name(v.action));
			n++;
		}
	}
	cr_assert_geq(n, 7 * 40);
}

/* The replies that made the issue: Microsoft's submission quota, whose
 * X.2.0 and 554 read as the recipient's before; Gmail's daily quota
 * with the code of a per-transaction cap. */
Test(replyclass, the_issues_replies)
{
	struct trouble_verdict v;

	judge("554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; "
	    "Failed to process message due to a permanent exception", STAGE_RCPT, &v);
	cr_assert_eq(v.cls, RC_QUOTA);
	cr_assert_eq(v.action, T_SUSPEND);
	judge("452 4.5.3 Daily sending quota exceeded", STAGE_RCPT, &v);
	cr_assert_eq(v.cls, RC_QUOTA);
	judge("452 4.5.3 Daily sending quota exceeded", STAGE_DATA_END, &v);
	cr_assert_eq(v.cls, RC_QUOTA);
	/* The same code with a cap's words is no quota, and no throttle. */
	judge("452 4.5.3 Too many recipients", STAGE_RCPT, &v);
	cr_assert_eq(v.cls, RC_TEMPORARY);
	cr_assert_eq(v.action, T_DEFER);
}

/* Item 4: a greeting of 421 or 554 is the upstream not reached (a
 * deferral the deliverer reports as no greeting), not a throttle; a
 * rate at the greeting still is one. */
Test(replyclass, greeting_refusals_are_unreachable)
{
	static const char *const replies[] = { "421 Service not available", "554 no",
		"421 4.3.2 Service not available, closing transmission channel",
		"554 5.7.1 Service unavailable; Client host blocked" };
	struct trouble_verdict v;
	size_t i;

	for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
		judge(replies[i], STAGE_BANNER, &v);
		cr_assert_eq(v.cls, RC_UNAVAILABLE, "%s", replies[i]);
		cr_assert_eq(v.action, T_DEFER, "%s", replies[i]);
	}
	judge("421 4.3.2 Connection rate limit exceeded.", STAGE_BANNER, &v);
	cr_assert_eq(v.action, T_SUSPEND);
	/* The same 421 after the greeting closes the session: a suspension,
	 * as before. */
	judge("421 Service not available", STAGE_MAIL, &v);
	cr_assert_eq(v.action, T_SUSPEND);
}

/* Rows restricted to RCPT and the dot leave other stages alone: a full
 * mailbox at MAIL is the account's. */
Test(replyclass, stage_masks)
{
	struct trouble_verdict v;

	judge("452 4.2.2 quota exceeded", STAGE_RCPT, &v);
	cr_assert_eq(v.cls, RC_RECIPIENT);
	judge("452 4.2.2 quota exceeded", STAGE_MAIL, &v);
	cr_assert_eq(v.cls, RC_QUOTA);
	cr_assert_eq(v.origin, TO_TABLE);
	cr_assert(reply_row_takes(&reply_rows(&(size_t){ 0 })[v.index], STAGE_MAIL,
	    "452 4.2.2 quota exceeded"));
}

/* Every row that suspends carries its periods, and only those: the
 * gate's list (policy_builtin_throttles) is theirs. */
Test(replyclass, suspensions_belong_to_their_classes)
{
	const struct reply_row *rows;
	const struct policy_throttle *thr;
	size_t n, i, nthr, k = 0;

	rows = reply_rows(&n);
	nthr = policy_builtin_throttles(&thr);
	for (i = 0; i < n; i++) {
		int susp = rows[i].cls == RC_QUOTA || rows[i].cls == RC_RATE ||
		    rows[i].cls == RC_UNAVAILABLE;

		cr_assert_eq(rows[i].suspend > 0, susp, "row %zu %s", i, rows[i].pattern);
		cr_assert_geq(rows[i].max_suspend, rows[i].suspend);
		if (rows[i].cls == RC_QUOTA)
			cr_assert_gt(rows[i].suspend, 3600, "a quota row waits longer than "
			    "fallback_when's quota 1h: %s", rows[i].pattern);
		if (susp) {
			cr_assert_lt(k, nthr);
			cr_assert_str_eq(thr[k].pattern, rows[i].pattern);
			cr_assert_eq(thr[k].suspend, rows[i].suspend);
			k++;
		}
	}
	cr_assert_eq(k, nthr);
}

Test(replyclass, names)
{
	int c;

	for (c = RC_RECIPIENT; c < RC_COUNT; c++)
		cr_assert_eq(reply_class_from_name(reply_class_name((enum reply_class)c),
		    strlen(reply_class_name((enum reply_class)c))), c);
	cr_assert_eq(reply_class_from_name("none", 4), -1);
	cr_assert_eq(reply_class_from_name("quot", 4), -1);
	cr_assert_eq(reply_stage_from_word("dot"), STAGE_DATA_END);
	cr_assert_eq(reply_stage_from_word("connect"), -1);
	cr_assert_str_eq(reply_stage_word(STAGE_RCPT), "rcpt");
}
