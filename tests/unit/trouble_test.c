/* trouble_test.c: the reply/situation to action mapping. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/trouble.h"
#include "testlib.h"

static struct trouble_rules *rules;

static void setup(void) { rules = trouble_new(); }
static void teardown(void) { trouble_free(rules); }

TestSuite(trouble, .init = setup, .fini = teardown);

static enum trouble_action
act(enum smtp_stage st, const char *reply)
{
	struct smtp_reply r;
	const char *why = NULL;
	enum trouble_action a;

	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_parse(&r, reply, strlen(reply), &why), REPLY_DONE, "%s: %s",
	    reply, why);
	a = trouble_reply(rules, st, &r);
	smtp_reply_free(&r);
	return a;
}

Test(trouble, positive_replies_accept)
{
	cr_assert_eq(act(STAGE_BANNER, "220 hi\r\n"), T_ACCEPT);
	cr_assert_eq(act(STAGE_RCPT, "250 ok\r\n"), T_ACCEPT);
	cr_assert_eq(act(STAGE_RCPT, "251 forwarded\r\n"), T_ACCEPT);
	cr_assert_eq(act(STAGE_DATA, "354 go\r\n"), T_ACCEPT);
	cr_assert_eq(act(STAGE_AUTH, "334 \r\n"), T_ACCEPT);
	cr_assert_eq(act(STAGE_AUTH, "235 ok\r\n"), T_ACCEPT);
	cr_assert_eq(act(STAGE_DATA_END, "250 queued\r\n"), T_ACCEPT);
}

Test(trouble, unexpected_positive_classes_defer)
{
	cr_assert_eq(act(STAGE_DATA, "250 ok\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "354 what\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_MAIL, "334 what\r\n"), T_DEFER);
}

Test(trouble, relay_stages_never_bounce)
{
	static const enum smtp_stage st[] = { STAGE_BANNER, STAGE_EHLO, STAGE_STARTTLS,
		STAGE_AUTH, STAGE_MAIL };
	size_t i;

	for (i = 0; i < sizeof st / sizeof st[0]; i++) {
		cr_assert_eq(act(st[i], "554 go away\r\n"), T_DEFER, "%s", trouble_stage_name(st[i]));
		cr_assert_eq(act(st[i], "535 5.7.8 bad credentials\r\n"), T_DEFER);
		cr_assert_eq(act(st[i], "451 later\r\n"), T_DEFER);
		cr_assert_eq(act(st[i], "553 sender refused\r\n"), T_DEFER);
	}
}

Test(trouble, rcpt_and_data)
{
	cr_assert_eq(act(STAGE_RCPT, "550 5.1.1 no such user\r\n"), T_BOUNCE);
	cr_assert_eq(act(STAGE_RCPT, "450 4.2.0 mailbox busy\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_DATA, "554 no\r\n"), T_BOUNCE);
	cr_assert_eq(act(STAGE_DATA, "451 local error\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_DATA_END, "554 5.7.1 spam\r\n"), T_BOUNCE);
	cr_assert_eq(act(STAGE_DATA_END, "452 full\r\n"), T_DEFER);
}

Test(trouble, rcpt_refusals_about_the_relay_defer)
{
	cr_assert_eq(act(STAGE_RCPT, "554 5.7.1 <a@b>: Relay access denied\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "550 5.7.1 Relaying denied\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "530 5.7.0 Authentication required\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "550 Sender not authorized\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "553 5.7.1 you must authenticate first\r\n"), T_DEFER);
}

Test(trouble, throttle_replies_suspend_whatever_the_stage)
{
	cr_assert_eq(act(STAGE_RCPT, "421 4.7.0 closing\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_MAIL, "421 closing\r\n"), T_SUSPEND);
	/* At the greeting a 421 is the upstream not reached (issue 31). */
	cr_assert_eq(act(STAGE_BANNER, "421 busy\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "550 5.4.5 Daily user sending quota exceeded.\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_DATA_END, "550 5.4.5 Daily sending limit\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_MAIL, "454 Throttling failure: Maximum sending rate exceeded.\r\n"),
	    T_SUSPEND);
	cr_assert_eq(act(STAGE_RCPT, "550 Rate limit exceeded\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_RCPT, "451 4.7.1 please slow down\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_RCPT, "421 4.7.0 Try again later\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_DATA_END, "554 TOO MANY messages\r\n"), T_SUSPEND);
}

/* A full mailbox or a per-transaction cap is about the recipient: one
 * such reply must not suspend the whole relay. */
Test(trouble, recipient_codes_are_never_a_throttle)
{
	cr_assert_eq(act(STAGE_RCPT, "552 5.2.2 Mailbox full, quota exceeded\r\n"), T_BOUNCE);
	cr_assert_eq(act(STAGE_RCPT, "452 4.2.2 Over quota, try again later\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "550 5.1.1 too many unknown users\r\n"), T_BOUNCE);
	cr_assert_eq(act(STAGE_RCPT, "452 4.5.3 Too many recipients\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_DATA_END, "552 5.2.2 quota exceeded\r\n"), T_BOUNCE);
	/* The same words with a policy code still throttle. */
	cr_assert_eq(act(STAGE_RCPT, "550 5.4.5 Daily user sending quota exceeded.\r\n"),
	    T_SUSPEND);
	cr_assert_eq(act(STAGE_MAIL, "452 4.2.2 quota exceeded\r\n"), T_SUSPEND);
}

Test(trouble, added_patterns)
{
	cr_assert_eq(act(STAGE_DATA_END, "554 5.7.0 Spammy\r\n"), T_BOUNCE);
	trouble_add_throttle(rules, "554 5.7.0 spammy*");
	cr_assert_eq(act(STAGE_DATA_END, "554 5.7.0 Spammy\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_RCPT, "550 nope\r\n"), T_BOUNCE);
	trouble_add_relay(rules, "550 nope");
	cr_assert_eq(act(STAGE_RCPT, "550 nope\r\n"), T_DEFER);
}

Test(trouble, only_the_first_line_is_matched)
{
	cr_assert_eq(act(STAGE_RCPT, "550-no such user\r\n550 rate limit\r\n"), T_BOUNCE);
}

Test(trouble, situations)
{
	cr_assert_eq(trouble_situation(SIT_TIMEOUT), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_LOST), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_BADREPLY), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_CONNECT), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_TLS), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_NO_STARTTLS), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_INJECTION), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_NO_MECH), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_SECRET), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_LOCAL), T_DEFER);
	cr_assert_eq(trouble_situation(SIT_LINE_TOO_LONG), T_BOUNCE);
	cr_assert_eq(trouble_situation(SIT_TOO_BIG), T_BOUNCE);
}

Test(trouble, identical_refusals)
{
	cr_assert(trouble_identical_refusals(3, 3, 0));
	cr_assert(!trouble_identical_refusals(1, 1, 0));
	cr_assert(!trouble_identical_refusals(3, 2, 0));
	cr_assert(!trouble_identical_refusals(3, 3, 1));
}

Test(trouble, names)
{
	cr_assert_str_eq(trouble_action_name(T_SUSPEND), "suspend");
	cr_assert_str_eq(trouble_stage_name(STAGE_RCPT), "RCPT TO");
}

/* Greylisting speaks of one recipient or one message, not of us: it
 * defers that one and never suspends the relay (it used to match the
 * built-in "4?? 4.7.*" and "*try again later*"). */
Test(trouble, greylisting_is_no_throttle)
{
	cr_assert_eq(act(STAGE_RCPT, "451 4.7.1 greylisted, try again later\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_DATA_END, "451 4.7.1 Greylisted, please try again later\r\n"),
	    T_DEFER);
	cr_assert_eq(act(STAGE_MAIL, "450 4.7.1 try again later\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "550 5.1.1 no such user\r\n"), T_BOUNCE);
}

/* One list: a reply the deliverer takes for a throttle at MAIL is one the
 * gate has a suspension period for, and the other way round. */
Test(trouble, one_list_with_the_gate)
{
	static const char *const replies[] = {
		"421 4.7.0 Try again later", "451 4.7.1 Please slow down",
		"450 4.7.28 unusual rate of unsolicited mail",
		"550 5.4.5 Daily user sending quota exceeded.",
		"454 Throttling failure: Maximum sending rate exceeded.",
		"452 Too many messages from your IP", "450 Rate limit exceeded",
		"451 4.7.1 greylisted, try again later", "450 4.7.1 try again later",
		"550 5.7.1 Relay access denied", "451 4.3.0 local error",
	};
	struct policy p;
	size_t i;

	memset(&p, 0, sizeof p);
	p.nthr = policy_builtin_throttles((const struct policy_throttle **)&p.thr);
	for (i = 0; i < sizeof replies / sizeof replies[0]; i++) {
		char *wire = xasprintf("%s\r\n", replies[i]);

		cr_assert_eq(act(STAGE_MAIL, wire) == T_SUSPEND,
		    policy_throttle_match(&p, replies[i]) != NULL, "%s", replies[i]);
		free(wire);
	}
}

/* policy.conf's throttle_reply patterns, through the policy loader the
 * gate uses: tried first, even before the recipient-code exception;
 * its built-in patterns are not added (trouble.c has the one list). */
Test(trouble, policy_patterns_first)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/policy.conf", dir);
	static const char conf[] = "upstream \"isp\" { rate = \"1 per 1s\" }\n"
	    "throttle_reply { pattern = \"450 4.3.2 come back*\" suspend = \"1m\" }\n"
	    "throttle_reply { pattern = \"452 4.2.2 *\" suspend = \"1m\" }\n";
	struct policy p;
	struct buf err = BUF_INIT;

	memset(&p, 0, sizeof p);
	tl_write(path, conf, sizeof conf - 1);
	cr_assert_eq(policy_load(&p, path, &err), 0, "%s", err.s ? err.s : "");
	cr_assert_eq(act(STAGE_MAIL, "450 4.3.2 come back in a while\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "452 4.2.2 mailbox busy\r\n"), T_DEFER);
	trouble_add_policy(rules, &p);
	cr_assert_eq(act(STAGE_MAIL, "450 4.3.2 come back in a while\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_RCPT, "452 4.2.2 mailbox busy\r\n"), T_SUSPEND);
	/* The policy's own built-in "4xx 4.7.*" is not added. */
	cr_assert_eq(act(STAGE_RCPT, "451 4.7.1 greylisted, try again later\r\n"), T_DEFER);
	policy_free(&p);
	buf_free(&err);
	unlink(path);
	rmdir(dir);
	free(path);
	free(dir);
}

/* Load policy text into p (the loader the gate uses); the rules get it. */
static void
load_policy(struct policy *p, const char *text)
{
	char *dir = tl_tmpdir(), *path = xasprintf("%s/policy.conf", dir);
	struct buf err = BUF_INIT;

	memset(p, 0, sizeof *p);
	tl_write(path, text, strlen(text));
	cr_assert_eq(policy_load(p, path, &err), 0, "%s", err.s ? err.s : "");
	trouble_add_policy(rules, p);
	buf_free(&err);
	unlink(path);
	rmdir(dir);
	free(path);
	free(dir);
}

/* builtin_throttle_replies = false (policy.conf): only the
 * administrator's own throttle_reply patterns mean "slow down"; the
 * built-in ones are ordinary refusals again (issue 12). */
Test(trouble, builtin_throttle_replies_false)
{
	struct policy p;

	load_policy(&p, "upstream \"isp\" { rate = \"1 per 1s\" }\n"
	    "builtin_throttle_replies = false\n"
	    "throttle_reply { pattern = \"451 4.3.2 come back*\" suspend = \"1m\" }\n");
	cr_assert_eq(act(STAGE_MAIL, "451 4.3.2 come back in a while\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_MAIL, "421 4.7.0 Try again later\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_MAIL, "450 Rate limit exceeded\r\n"), T_DEFER);
	cr_assert_eq(act(STAGE_RCPT, "452 Too many messages from your IP\r\n"), T_DEFER);
	/* A quota reply no longer suspends, but never bounces either (issue
	 * 31: it bounced before). */
	cr_assert_eq(act(STAGE_DATA_END, "550 5.4.5 Daily user sending quota exceeded.\r\n"),
	    T_DEFER);
	/* Patterns added by hand stay (they are not the built-in list). */
	trouble_add_throttle(rules, "554 5.7.0 spammy*");
	cr_assert_eq(act(STAGE_DATA_END, "554 5.7.0 Spammy\r\n"), T_SUSPEND);
	policy_free(&p);
}

/* builtin_throttle_replies = true, said or by default: both lists. */
Test(trouble, builtin_throttle_replies_true)
{
	struct policy p;

	load_policy(&p, "upstream \"isp\" { rate = \"1 per 1s\" }\n"
	    "throttle_reply { pattern = \"451 4.3.2 come back*\" suspend = \"1m\" }\n");
	cr_assert_eq(act(STAGE_MAIL, "451 4.3.2 come back in a while\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_MAIL, "421 4.7.0 Try again later\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_MAIL, "450 Rate limit exceeded\r\n"), T_SUSPEND);
	policy_free(&p);
}

/* An upstream's reply_rules (weir.conf, issue 31) come first: before
 * the policy's throttle_reply patterns and the built-in table; a 5xx
 * made temporary is never a bounce, a class of quota suspends as one. */
Test(trouble, upstream_rules_first)
{
	struct trouble_verdict v;
	struct smtp_reply r;
	const char *why = NULL;
	static const char wire[] = "550 5.7.1 Unfortunately, try later\r\n";

	cr_assert_eq(act(STAGE_RCPT, "550 5.7.1 Unfortunately, try later\r\n"), T_BOUNCE);
	trouble_add_throttle(rules, "550 5.7.1 *");
	trouble_add_rule(rules, RC_TEMPORARY, "550 5.7.1 *try later*", "weir.conf:7");
	trouble_add_rule(rules, RC_QUOTA, "554 5.7.0 *account limit*", NULL);
	smtp_reply_init(&r);
	cr_assert_eq(smtp_reply_parse(&r, wire, strlen(wire), &why), REPLY_DONE);
	trouble_judge(rules, STAGE_RCPT, &r, &v);
	cr_assert_eq(v.action, T_DEFER);
	cr_assert_eq(v.cls, RC_TEMPORARY);
	cr_assert_eq(v.origin, TO_RULE);
	cr_assert_str_eq(v.where, "weir.conf:7");
	smtp_reply_free(&r);
	cr_assert_eq(act(STAGE_DATA_END, "554 5.7.0 your account limit is reached\r\n"), T_SUSPEND);
	cr_assert_eq(act(STAGE_DATA_END, "554 5.7.0 spam\r\n"), T_BOUNCE);
}
