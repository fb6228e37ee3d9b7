/*
 * authfix_test.c: an authentication suspension belongs to the
 * credentials that failed (issue 22 item 3; weir-gate(8)), with `weir
 * run` as the package runs it (a restart is a stop and a start):
 *   - a wrong password suspends the upstream; a restart with the same
 *     credentials keeps the suspension (nothing sent, no AUTH tried);
 *   - a restart after the secret file is fixed lifts it: the three
 *     messages arrive within 30 s.
 * Every process started here dies with the test (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

#define SENDER "alice@src.example"
/* weir-gate's status of a suspended upstream; of one holding N
 * requests with none granted (max_connections = 1). */
#define SUSPENDED "suspended until"
#define HOLDS(n) "grants held: 0 (max 1); waiting: " n " "

TestSuite(authfix, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 120);

/* The upstream saw more than *arg AUTH attempts. */
static int
more_auth(struct rt *rt, void *arg)
{
	struct rt_rec r;
	size_t n;

	rt_rec_load(rt, &r);
	n = r.nauth;
	rt_rec_free(&r);
	return n > *(size_t *)arg;
}

static void
restart(void)
{
	int st = rt_run_stop(&t, 20000);

	cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "weir run: status %d", st);
	rt_run_start(&t);
}

/* Before: the suspension was replayed from the journal whatever the
 * credentials, and mail waited out the rest of it (5 minutes, up to an
 * hour) after the password was fixed and weir restarted. */
Test(authfix, fixed_password_works_at_restart)
{
	struct rt_rec r;
	size_t i, three = 3, nauth;
	char *status;
	double t0;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	sh_conf_append(&t.s, "log_level = \"verbose\"\n");	/* rt_wait_idle */
	rt_policy(&t, "upstream \"isp\" { rate = \"8 per 1m\" max_connections = 1 }\n");
	tl_write(t.secret, "wrong-secret", 12);
	rt_run_start(&t);
	for (i = 0; i < three; i++) {
		char *rcpt = xasprintf("fix%zu@dst.example", i);
		const char *rv[] = { rcpt };

		rt_sendmail(&t, SENDER, rv, 1, "Subject: fix\n\nbody\n");
		free(rcpt);
	}
	cr_assert(rt_wait(rt_gate_status_has, &t, SUSPENDED, 20000), "not suspended:\n%s",
	    rt_run_log(&t));

	/* Restarted with the same credentials: still suspended, and nothing
	 * tried once the new weir-send has asked again for all three (its
	 * idle line) and the gate holds the three and has granted none: an
	 * AUTH needs a grant, and none comes for the suspension's 5 min. */
	restart();
	cr_assert(rt_wait(rt_run_log_has, &t, "authentication suspension kept until", 10000),
	    "%s", rt_run_log(&t));
	cr_assert(rt_wait(rt_run_log_has, &t, "connected to weir-gate", 10000), "%s",
	    rt_run_log(&t));
	cr_assert(rt_gate_status_has(&t, SUSPENDED), "the suspension went with the restart");
	status = rt_gate_status(&t);
	cr_assert(strstr(status, "then reload or restart weir (a restart with the same "
	    "credentials keeps the suspension); `weir resume isp` tries again now"), "%s", status);
	free(status);
	rt_rec_load(&t, &r);
	nauth = r.nauth;
	cr_assert_eq(r.nauth_fail, 1, "%zu AUTH failures", r.nauth_fail);
	rt_rec_free(&r);
	rt_wait_idle(&t, "connected to weir-gate", 2, "0 running, 0 granted, 3 asking weir-gate,",
	    10000);
	cr_assert(rt_wait(rt_gate_status_has, &t, HOLDS("3"), 10000), "%s", rt_gate_status(&t));
	cr_assert(!more_auth(&t, &nauth), "AUTH tried again while suspended");
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 0, "%zu messages sent while suspended", r.n);
	rt_rec_free(&r);

	/* Stopped, the secret fixed, started: the three within 30 s. */
	cr_assert(rt_run_stop(&t, 20000) >= 0);
	tl_write(t.secret, RT_SECRET, strlen(RT_SECRET));
	t0 = rt_now();
	rt_run_start(&t);
	cr_assert(rt_wait(rt_ndata_at_least, &t, &three, 30000 - (int)((rt_now() - t0) * 1000)),
	    "not all 3 delivered within 30 s of the start:\n%s", rt_send_logs_tail(&t, 4000));
	cr_assert(rt_run_log_has(&t, "authentication suspension lifted: its credentials changed"),
	    "%s", rt_run_log(&t));
	rt_say("fixed password, restart: 3 messages delivered %.1f s after the start",
	    rt_now() - t0);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 3, "%zu transactions", r.n);
	cr_assert_eq(r.nauth_fail, 1, "%zu AUTH failures", r.nauth_fail);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
}

/* The gate notes the credentials again at a reload: a password changed
 * to another wrong one and reloaded fails again, and that suspension
 * belongs to the new password: a restart without a change keeps it.
 * (Noted only at start, the gate would take the new failure for the old
 * password's and lift it at the restart: one more AUTH.) */
Test(authfix, reload_notes_the_new_credentials)
{
	struct rt_rec r;
	size_t nauth;
	char *log;
	const char *rv[] = { "again@dst.example" };

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	sh_conf_append(&t.s, "log_level = \"verbose\"\n");	/* rt_wait_idle */
	rt_policy(&t, "upstream \"isp\" { rate = \"8 per 1m\" max_connections = 1 }\n");
	tl_write(t.secret, "wrong-secret", 12);
	rt_run_start(&t);
	rt_sendmail(&t, SENDER, rv, 1, "Subject: again\n\nbody\n");
	cr_assert(rt_wait(rt_gate_status_has, &t, SUSPENDED, 20000), "not suspended:\n%s",
	    rt_run_log(&t));
	tl_write(t.secret, "wrong-again", 11);
	cr_assert_eq(kill(t.run, SIGHUP), 0);
	cr_assert(rt_wait(rt_run_log_has, &t, "authentication suspension lifted (SIGHUP)", 10000),
	    "%s", rt_run_log(&t));
	/* The message, deferred, tried again now: a second failure. */
	rt_flush(&t);
	nauth = 1;
	cr_assert(rt_wait(more_auth, &t, &nauth, 20000), "no second AUTH after the reload");
	cr_assert(rt_wait(rt_gate_status_has, &t, SUSPENDED, 20000), "not suspended again");
	restart();
	cr_assert(rt_wait(rt_run_log_has, &t, "connected to weir-gate", 10000), "%s",
	    rt_run_log(&t));
	log = rt_run_log(&t);
	cr_assert(strstr(log, "authentication suspension kept until") != NULL, "%s", log);
	free(log);
	cr_assert(rt_gate_status_has(&t, SUSPENDED), "the suspension went with the restart");
	rt_rec_load(&t, &r);
	nauth = r.nauth;
	cr_assert_eq(r.nauth_fail, 2, "%zu AUTH failures", r.nauth_fail);
	rt_rec_free(&r);
	rt_wait_idle(&t, "connected to weir-gate", 2, "0 running, 0 granted, 1 asking weir-gate,",
	    10000);
	cr_assert(rt_wait(rt_gate_status_has, &t, HOLDS("1"), 10000), "%s", rt_gate_status(&t));
	cr_assert(!more_auth(&t, &nauth), "AUTH tried again after the restart");
}
