/*
 * promise_test.c: what weir-gate promises (weir-gate(8), "What the gate
 * promises"; issue 12), end to end, measured at the stand-in upstream's
 * own clock (its record), with weir-gate's defaults (no -g), as
 * `weir run` and the package run it:
 *   - a weir-send killed after the final dot, the upstream taking 8 s to
 *     answer it: the send counts until death + grace, so the next one
 *     never lands inside the window of the first.
 * Every process started here dies with the test (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"

static struct rt t;

static void
setup(void)
{
	rt_setup(&t, 1);
}

static void
teardown(void)
{
	rt_teardown(&t);
}

TestSuite(promise, .init = setup, .fini = teardown, .timeout = 120);

static int
ndata_at_least(struct rt *rt, void *arg)
{
	return rt_rec_ndata(rt) >= *(size_t *)arg;
}

/* The upstream has begun to take its time over the final dot. */
static int
delaying(struct rt *rt, void *arg)
{
	struct buf b = BUF_INIT;
	int yes;

	(void)arg;
	if (read_file_at(AT_FDCWD, rt->record, &b, 1 << 22) < 0) {
		buf_free(&b);
		return 0;
	}
	yes = b.s && strstr(b.s, "\"event\": \"delaying\"") != NULL;
	buf_free(&b);
	return yes;
}

/* "1 per 10s"; the first message's final dot takes the upstream 8 s;
 * weir-send (and with it weir-remote) is killed right after the dot.
 * Before: the gate counted the dropped grant 5 s after the kill, granted
 * the next at kill + 15 s, and the upstream accepted two messages 7 s
 * apart.  Now the send counts as accepted at any instant until the kill
 * + 10 min: nothing more reaches the upstream in the 20 s watched, and
 * the gate's status says when the next grant is due. */
Test(promise, dead_sender_slow_final_dot)
{
	const char *flags[] = { "--dataend-delay", "slow@dst.example=8", NULL };
	const char *slow[] = { "slow@dst.example" }, *fast[] = { "fast@dst.example" };
	struct rt_rec r;
	size_t one = 1, two = 2;
	char *st;
	double t0;

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"1 per 10s\" }\n");
	rt_gate_start(&t, NULL);
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, slow, 1, "Subject: slow\n\nfirst\n");
	cr_assert(rt_wait(delaying, &t, NULL, 30000), "the final dot never reached the upstream");
	rt_send_kill9(&t);
	t0 = rt_now();
	rt_sendmail(&t, SENDER, fast, 1, "Subject: fast\n\nsecond\n");
	rt_send_start(&t);
	cr_assert(rt_wait(ndata_at_least, &t, &one, 20000), "the slow message was never accepted");
	/* The old gate let the next one through at ~t0 + 15 s. */
	(void)rt_wait(ndata_at_least, &t, &two, (int)((t0 + 25 - rt_now()) * 1000));
	rt_rec_load(&t, &r);
	rt_say("dead sender, slow final dot: %zu accepted in 25 s after the kill", r.n);
	rt_assert_window(&r, 1, 10.0);
	rt_rec_free(&r);
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "unknown 1") != NULL, "%s", st);
	free(st);
}
