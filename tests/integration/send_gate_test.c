/*
 * send_gate_test.c: weir-send and weir-gate.  Nothing goes without the
 * gate; a gate restart (kill -9); a throttle never bounces and suspends
 * the upstream; a "2 per 1s" rate honoured; the gate's
 * recipients-per-transaction cap.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_fixture.h"

TestSuite(send_gate, .init = sf_setup, .fini = sf_teardown, .timeout = 120);

/* Start times of the deliverers, from conc.log, in seconds. */
static size_t
starts(double *t, size_t max)
{
	char *cl = xasprintf("%s/conc.log", sf.s.qt.tmp), *line;
	struct buf b = BUF_INIT;
	const char *p;
	size_t n = 0;

	tl_read(cl, &b);
	for (p = buf_cstr(&b); *p && n < max; p = strchr(p, '\n') + 1) {
		line = xstrndup(p, (size_t)(strchr(p, '\n') - p));
		if (line[0] == 'B')
			t[n++] = strtod(strrchr(line, ' ') + 1, NULL);
		free(line);
	}
	buf_free(&b);
	free(cl);
	return n;
}

/* No gate, nothing sent; the gate comes, the mail goes. */
Test(send_gate, waits_for_the_gate)
{
	const char *rcpts[] = { "bob@example.net", NULL };

	shd_stop(&sf.gate);
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	/* Taken in, and waiting for the gate. */
	sf_wait_idle(": queued, from <", 1, "0 running, 0 granted, 1 asking weir-gate,", 5000);
	cr_assert_eq(sf_ncalls(), 0, "sent without a gate");
	cr_assert(!sf_settled(NULL));
	shd_start_gate(&sf.gate, &sf.s, sf.gsock);
	sf_wait_calls(1, 35000);	/* reconnects after 1, 2, 4 ... 30 s */
	sf_wait_empty(5000);
}

/* The gate restarts (kill -9): weir-send reconnects and goes on. */
Test(send_gate, gate_restart)
{
	const char *rcpts[] = { "bob@example.net", NULL };

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(1, 5000);
	sf_wait_empty(5000);
	shd_kill9(&sf.gate);
	cr_assert(sh_wait_for(sf_log_has, "lost weir-gate", 5000), "%s", sf_send_log(&sf.d1));
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_idle(": queued, from <", 2, "0 running, 0 granted, 1 asking weir-gate,", 5000);
	cr_assert_eq(sf_ncalls(), 1, "sent without a gate");
	shd_start_gate(&sf.gate, &sf.s, sf.gsock);
	sf_wait_calls(2, 35000);
	sf_wait_empty(5000);
	cr_assert(!shd_exited(&sf.d1, NULL), "weir-send died with the gate");
}

/* The upstream says slow down: nothing bounced (even for a message
 * past queue_lifetime), nothing marked done, and the upstream is
 * suspended: another message waits too. */
Test(send_gate, throttle_never_bounces_and_suspends)
{
	const char *rcpts[] = { "ok@example.net", NULL };
	unsigned long id = sf_aged_s5("alice@example.org",
	    S("Tthrottle@example.net\0Tok2@example.net\0"), 8 * 86400);

	sf_start_send(&sf.d1, 0);
	sf_wait_calls(1, 5000);
	sf_wait_idle("throttl", 1, "0 running, 0 granted,", 5000);	/* asking, suspended */
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Tthrottle@example.net\0Tok2@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, id), "a throttle became a bounce");
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	/* Taken in, and held back or asking the gate, which does not grant. */
	sf_wait_idle(": queued, from <", 1, "0 running, 0 granted,", 5000);
	cr_assert_eq(sf_ncalls(), 1, "sent while the upstream is suspended:\n%s", sf_send_log(&sf.d1));
	sf_assert_queue_sound();
}

/* "2 per 1s": six messages take their time, never 3 starts within a
 * second; everything still goes. */
Test(send_gate, gate_rate_is_honoured)
{
	char name[32];
	const char *rcpts[] = { name, NULL };
	double t[16];
	size_t i, j, n = 6, k;

	sf_policy("upstream \"up1\" { rate = \"2 per 1s\" }\n"
	    "upstream \"lists\" { rate = \"2 per 1s\" }\nupstream \"main\" { rate = \"2 per 1s\" }\n");
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		sf_inject("alice@example.org", rcpts, SF_MSG1);
	}
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(n, 15000);
	sf_wait_empty(5000);
	k = starts(t, 16);
	cr_assert_eq(k, n);
	for (i = 0; i < k; i++) {
		size_t in = 0;

		for (j = 0; j < k; j++)
			in += t[j] >= t[i] && t[j] < t[i] + 0.95;
		cr_assert(in <= 2, "%zu deliveries started within 0.95 s of %.3f", in, t[i]);
	}
	sf_assert_all_delivered(n);
}

/* The gate's own recipients-per-transaction cap (policy.conf) cuts a
 * batch that weir.conf's max_recipients allowed: the rest follows. */
Test(send_gate, gate_caps_recipients_per_transaction)
{
	const char *rcpts[] = { "r1@example.net", "r2@example.net", "r3@example.net",
		"r4@example.net", "bad5@example.net", NULL };
	char *e0, *e1, *e2;

	sf_policy("upstream \"up1\" { rate = \"1000 per 1s\" max_recipients = 2 }\n"
	    "upstream \"lists\" { rate = \"1000 per 1s\" }\nupstream \"main\" { rate = \"1000 per 1s\" }\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(4, 10000);	/* 3 transactions, then the bounce for bad5 */
	sf_wait_empty(5000);
	e0 = sf_call_env(0);
	e1 = sf_call_env(1);
	e2 = sf_call_env(2);
	cr_assert_str_eq(e0, "alice@example.org\tr1@example.net,r2@example.net");
	cr_assert_str_eq(e1, "alice@example.org\tr3@example.net,r4@example.net");
	cr_assert_str_eq(e2, "alice@example.org\tbad5@example.net");
	cr_assert_eq(sf_ncalls(), 4);
	free(e0);
	free(e1);
	free(e2);
	sf_assert_queue_sound();
}
