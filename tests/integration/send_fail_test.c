/*
 * send_fail_test.c: what weir-send does with a recipient not delivered
 * at once.  Bounces from <> (delivered in turn, with sender ""), also
 * when weir-send has only -c; double bounces from <#@[]> to the admin;
 * failed double bounces dropped; temporary failures (mailq shows them;
 * a pass over every recipient, then one retry); a crashing, babbling,
 * short or missing deliverer (nothing bounced or marked done, the queue
 * sound); expiry after queue_lifetime (own failures only); `weir flush`
 * after failed bounces and for deferred recipients.
 *
 * The fixture (tests/lib/send_fixture.h): the real weir-send on a scratch
 * queue, fed by the real sendmail and weir-queue, a real weir-gate with
 * room for everything unless the test says otherwise, and the stand-in
 * deliverer tests/upstream/deliver.py, which logs its arguments and the
 * message it got and answers per recipient by the address.  Waits are
 * for events: the deliverer's calls, files, log lines, and weir-send's
 * "idle" line after the event a check is about (weir-send(8), LOGS).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_fixture.h"
#include "sendmail_helpers.h"

TestSuite(send_fail, .init = sf_setup, .fini = sf_teardown, .timeout = 120);

/* ---- bounces ---- */

static void
bounce_case(int bare)
{
	const char *rcpts[] = { "good@example.net", "bad@example.net", NULL };
	struct buf b = BUF_INIT;
	char *e0, *e1, *mp;

	sf_start_send(&sf.d1, bare);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(2, 5000);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 2, "%zu calls", sf_ncalls());
	e0 = sf_call_env(0);
	e1 = sf_call_env(1);
	cr_assert_str_eq(e0, "alice@example.org\tgood@example.net,bad@example.net");
	/* The bounce: from <>, to the sender, delivered in turn. */
	cr_assert_str_eq(e1, "\talice@example.org");
	mp = xasprintf("%s/msg.1", sf.s.qt.tmp);
	tl_read(mp, &b);
	cr_assert(strstr(buf_cstr(&b), "\nTo: alice@example.org\n"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "report-type=delivery-status"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "\nFinal-Recipient: rfc822; bad@example.net\n"
	    "Action: failed\nStatus: 5.1.1\n"), "%s", buf_cstr(&b));
	cr_assert(!strstr(buf_cstr(&b), "Final-Recipient: rfc822; good@"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "\nSubject: one\n"), "no original header: %s", buf_cstr(&b));
	sf_assert_queue_sound();
	free(e0);
	free(e1);
	free(mp);
	buf_free(&b);
}

Test(send_fail, permanent_failure_bounces_to_sender) { bounce_case(0); }

/* weir-send is told its config by -c only: its bounces must still go
 * into its own queue (not /etc/weir's or /var/spool/weir). */
Test(send_fail, bounce_with_config_by_c_only) { bounce_case(1); }

Test(send_fail, double_bounce_to_admin)
{
	char *e0, *e1;

	sf_start_send(&sf.d1, 0);
	sf_inject_raw(S("F\0Tbad@example.net\0\0"), SF_MSG1);
	sf_wait_calls(2, 10000);
	sf_wait_empty(10000);
	cr_assert_eq(sf_ncalls(), 2);
	e0 = sf_call_env(0);
	e1 = sf_call_env(1);
	cr_assert_str_eq(e0, "\tbad@example.net");
	cr_assert_str_eq(e1, "#@[]\t" SH_ADMIN);
	free(e0);
	free(e1);
	sf_assert_queue_sound();
}

/* A failed double bounce is dropped: nothing more is sent. */
Test(send_fail, failed_double_bounce_dropped)
{
	sf_start_send(&sf.d1, 0);
	sf_inject_raw(S("F#@[]\0Tbad@example.net\0\0"), SF_MSG1);
	sf_wait_calls(1, 10000);
	sf_wait_empty(10000);
	sf_wait_idle(": end\n", 1, SF_QUIET, 5000);	/* and no triple bounce */
	cr_assert_eq(sf_ncalls(), 1, "%zu calls", sf_ncalls());
	sf_assert_queue_sound();
}

/* ---- temporary failures and deliverer trouble ---- */

static void
mailq_shows(const char *want)
{
	struct tl_result r;

	smt_run(&sf.s.qt, "mailq", NULL, NULL, 0, NULL, &r);
	cr_assert_eq(r.status, 0, "mailq exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(strstr(buf_cstr(&r.out), want), "mailq lacks \"%s\":\n%s", want, buf_cstr(&r.out));
	tl_result_free(&r);
}

Test(send_fail, temporary_failure_stays_queued)
{
	const char *rcpts[] = { "slow@example.net", "ok@example.net", NULL };
	unsigned long id;

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(1, 10000);
	sf_wait_idle("deferred <slow@example.net>", 1, SF_QUIET, 5000);
	id = sf_only_info();
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Tslow@example.net\0Dok@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id), "bounce/ for a temporary failure");
	cr_assert(sh_exists(&sf.s, Q_MESS, id));
	mailq_shows("\tremote\tslow@example.net\n");
	mailq_shows("  done\tremote\tok@example.net\n");
	cr_assert_eq(sf_ncalls(), 1, "retried at once: %zu calls", sf_ncalls());
	sf_assert_queue_sound();
}

/* Recipients put off in one batch do not keep the later ones from
 * being tried: an attempt is a pass over all of them, then one retry. */
Test(send_fail, deferred_batch_does_not_starve_the_rest)
{
	const char *rcpts[] = { "slow1@example.net", "slow2@example.net", "r3@example.net",
		"r4@example.net", "r5@example.net", NULL };
	char *e0, *e1, *e2;
	unsigned long id;

	sf_teardown();
	sf_setup_with("upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 2\n}\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(3, 10000);
	sf_wait_idle("delivered to <r5@example.net>", 1, SF_QUIET, 5000);
	e0 = sf_call_env(0);
	e1 = sf_call_env(1);
	e2 = sf_call_env(2);
	cr_assert_str_eq(e0, "alice@example.org\tslow1@example.net,slow2@example.net");
	cr_assert_str_eq(e1, "alice@example.org\tr3@example.net,r4@example.net");
	cr_assert_str_eq(e2, "alice@example.org\tr5@example.net");
	id = sf_only_info();
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Tslow1@example.net\0Tslow2@example.net\0"
	    "Dr3@example.net\0Dr4@example.net\0Dr5@example.net\0"));
	/* The pass is over: the two put off wait for their retry. */
	cr_assert_eq(sf_ncalls(), 3, "%zu calls", sf_ncalls());
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id), "bounce/ for temporary failures");
	free(e0);
	free(e1);
	free(e2);
	sf_assert_queue_sound();
}

/* The deliverer dies, babbles, or stops short: nothing bounced, nothing
 * marked done, the message stays, the queue is sound. */
static void
trouble_case(const char *bad_rcpt)
{
	const char *rcpts[] = { "ok@example.net", bad_rcpt, "bad@example.net", NULL };
	struct buf want = BUF_INIT;
	unsigned long id;
	char *line = xasprintf("deferred <%s>", bad_rcpt);

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(1, 10000);
	sf_wait_idle(line, 1, SF_QUIET, 5000);
	id = sf_only_info();
	buf_printf(&want, "Tok@example.net%cT%s%cTbad@example.net%c", 0, bad_rcpt, 0, 0);
	sh_assert_file(&sf.s, Q_REMOTE, id, want.s, want.len);
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id), "bounce/ after deliverer trouble");
	cr_assert_eq(sf_ncalls(), 1, "%zu calls", sf_ncalls());
	mailq_shows("\tremote\tok@example.net\n");
	sf_assert_queue_sound();
	buf_free(&want);
	free(line);
}

Test(send_fail, deliverer_crashes) { trouble_case("crash@example.net"); }

Test(send_fail, deliverer_prints_garbage) { trouble_case("garbage@example.net"); }

Test(send_fail, deliverer_omits_message_report) { trouble_case("nomsg@example.net"); }

/* The deliverer cannot be run at all: deferred, nothing marked done. */
/* The missing deliverer seen: exec failed before the message was
 * handed to the session (its attempt is deferred) or after (it could not
 * be handed over: tried again later). */
static int
deliverer_failed(void *arg)
{
	(void)arg;
	return sf_log_has("deferred <bad@example.net>") ||
	    sf_log_has("a message could not be handed over");
}

Test(send_fail, deliverer_missing)
{
	const char *env[] = { "WEIR_REMOTE=/nonexistent/weir-remote", sf.env_qq, sf.env_conf, NULL };
	const char *rcpts[] = { "ok@example.net", "bad@example.net", NULL };
	unsigned long id;

	shd_start(&sf.d1, &sf.s, env);
	cr_assert(sh_wait_for(sf_log_has, "started on", 5000), "%s", sf_send_log(&sf.d1));
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	cr_assert(sh_wait_for(deliverer_failed, NULL, 5000), "%s", sf_send_log(&sf.d1));
	sf_wait_idle(sf_log_has("deferred <bad@example.net>") ? "deferred <bad@example.net>" :
	    "a message could not be handed over", 1, SF_QUIET, 5000);
	id = sf_only_info();
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Tok@example.net\0Tbad@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id));
	sf_assert_queue_sound();
}

/* ---- queue lifetime ---- */

/* A message older than queue_lifetime (8 days here): an own temporary
 * failure becomes permanent (bounced); deliverer trouble never does. */
Test(send_fail, expired_own_failure_bounces)
{
	struct buf b = BUF_INIT;
	char *e1, *mp;

	sf_aged_s5("alice@example.org", S("Tslow@example.net\0"), 8 * 86400);
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(2, 10000);
	sf_wait_empty(10000);
	e1 = sf_call_env(1);
	cr_assert_str_eq(e1, "\talice@example.org");
	mp = xasprintf("%s/msg.1", sf.s.qt.tmp);
	tl_read(mp, &b);
	cr_assert(strstr(buf_cstr(&b), "Final-Recipient: rfc822; slow@example.net\nAction: failed\n"
	    "Status: 5.2.1\n"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "in the queue too long"), "%s", buf_cstr(&b));
	free(e1);
	free(mp);
	buf_free(&b);
}

Test(send_fail, expired_deliverer_crash_no_bounce)
{
	unsigned long id = sf_aged_s5("alice@example.org", S("Tcrash@example.net\0"), 8 * 86400);

	sf_start_send(&sf.d1, 0);
	sf_wait_calls(1, 10000);
	sf_wait_idle("deferred <crash@example.net>", 1, SF_QUIET, 5000);
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Tcrash@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id));
	cr_assert_eq(sf_ncalls(), 1);
}

/* ---- weir flush ---- */

static int
three_not_queued(void *arg)
{
	(void)arg;
	return sf_count_in_log("not queued") >= 3;
}

/* Bounces that could not be queued wait for their retry; `weir flush`
 * tries them at once: each message then finishes (and leaves weir-send's
 * table while the flush is walking it).  glibc's tunables make a use of
 * freed memory crash instead of going unnoticed. */
Test(send_fail, flush_after_failed_bounces)
{
	char *flag, *e_qq = sf_failing_qq(&flag);
	const char *env[] = { sf.env_remote, e_qq, sf.env_conf,
		"GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.perturb=165", NULL };
	const char *rcpts[] = { "bad@example.net", NULL };
	int st, i;

	for (i = 0; i < 3; i++)
		sf_inject("alice@example.org", rcpts, SF_MSG1);
	shd_start(&sf.d1, &sf.s, env);
	cr_assert(sh_wait_for(three_not_queued, NULL, 10000), "%s", sf_send_log(&sf.d1));
	cr_assert_eq(sf_ncalls(), 3);
	cr_assert(unlink(flag) == 0);
	sf_run_flush();
	if (!sh_wait_for(sf_log_has, "flush: ", 5000)) {
		st = 0;
		cr_assert(!shd_exited(&sf.d1, &st), "weir-send died during the flush (%s %d):\n%s",
		    WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) :
		    WEXITSTATUS(st), sf_send_log(&sf.d1));
		cr_assert_fail("no flush logged:\n%s", sf_send_log(&sf.d1));
	}
	sf_wait_calls(6, 10000);
	sf_wait_empty(10000);
	cr_assert(!shd_exited(&sf.d1, &st), "weir-send died (status 0x%x):\n%s", st,
	    sf_send_log(&sf.d1));
	for (i = 3; i < 6; i++) {
		char *e = sf_call_env((size_t)i);

		cr_assert_str_eq(e, "\talice@example.org");
		free(e);
	}
	free(flag);
	free(e_qq);
}

/* A deferred recipient waits for its retry (minutes away); `weir flush`
 * has it tried at once, alone (the delivered one is not sent again). */
Test(send_fail, flush_retries_deferred_recipients_only)
{
	const char *rcpts[] = { "slow@example.net", "ok@example.net", NULL };
	char *ok = xasprintf("%s/slow-ok", sf.s.qt.tmp), *e1;

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_idle("deferred <slow@example.net>", 1, SF_QUIET, 5000);
	cr_assert_eq(sf_ncalls(), 1);
	tl_write(ok, "", 0);
	sf_run_flush();
	sf_wait_calls(2, 3000);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 2);
	e1 = sf_call_env(1);
	cr_assert_str_eq(e1, "alice@example.org\tslow@example.net");
	free(e1);
	free(ok);
}
