/*
 * hosts_helpers.c: see hosts_helpers.h.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hosts_helpers.h"
#include "lib/alloc.h"

void
hs_start(struct rt *t, size_t n, const char *policy_text, const char *grace)
{
	size_t i;

	rt_upstream_start(&t[0], "good", NULL, 0);
	for (i = 0; i < n; i++) {
		char *mine = t[i].certs;

		/* One upstream: its port, and its CA, for every host. */
		t[i].port = t[0].port;
		t[i].certs = t[0].certs;
		rt_conf_upstream(&t[i], NULL);
		t[i].certs = mine;
		rt_policy(&t[i], policy_text);
		rt_gate_start(&t[i], grace);
	}
}

void
hs_start_sends(struct rt *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		rt_send_start(&t[i]);
}

char **
hs_queue_mail(struct rt *t, size_t n, size_t per)
{
	char **rcpt = xcalloc(n * per, sizeof *rcpt);
	char msg[128];
	size_t i, k;

	for (i = 0; i < n; i++)
		for (k = 0; k < per; k++) {
			const char *r[1];

			rcpt[i * per + k] = xasprintf("h%zu-%zu@dst.example", i, k);
			r[0] = rcpt[i * per + k];
			snprintf(msg, sizeof msg, "Subject: host %zu note %zu\n\nbody\n", i, k);
			rt_sendmail(&t[i], HS_SENDER, r, 1, msg);
		}
	return rcpt;
}

void
hs_free_rcpts(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void
hs_wait_ndata(struct rt *t, size_t n, int ms)
{
	cr_assert(rt_wait(rt_ndata_at_least, &t[0], &n, ms), "only %zu of %zu sends at the "
	    "upstream after %d ms", rt_rec_ndata(&t[0]), n, ms);
}

size_t
hs_gate_log_count(struct rt *t, const char *what)
{
	struct buf b = BUF_INIT;
	size_t n;

	if (access(t->gate_log, F_OK) != 0)
		return 0;
	tl_read(t->gate_log, &b);
	n = tl_count(buf_cstr(&b), what);
	buf_free(&b);
	return n;
}

struct hosts {
	struct rt *t;
	size_t n;
	const char *what;
	size_t times;
};

static int
every_gate_logged(struct rt *unused, void *arg)
{
	const struct hosts *h = arg;
	size_t i;

	(void)unused;
	for (i = 0; i < h->n; i++)
		if (hs_gate_log_count(&h->t[i], h->what) < h->times)
			return 0;
	return 1;
}

void
hs_wait_gates_logged(struct rt *t, size_t n, const char *what, size_t times, int ms)
{
	struct hosts h = { t, n, what, times };
	struct buf b = BUF_INIT;
	size_t i;

	if (rt_wait(every_gate_logged, &t[0], &h, ms))
		return;
	for (i = 0; i < n && hs_gate_log_count(&t[i], what) >= times; i++)
		;
	tl_read(t[i].gate_log, &b);
	cr_assert_fail("gate %zu never logged \"%s\" %zu times:\n%s", i, what, times,
	    buf_cstr(&b));
}

static int
all_drained(struct rt *unused, void *arg)
{
	const struct hosts *h = arg;
	size_t i;

	(void)unused;
	for (i = 0; i < h->n; i++)
		if (!rt_drained(&h->t[i], NULL))
			return 0;
	return 1;
}

void
hs_wait_all_drained(struct rt *t, size_t n, int ms, int flush)
{
	struct hosts h = { t, n, NULL, 0 };
	int waited = 0;
	size_t i;

	while (!rt_wait(all_drained, &t[0], &h, flush ? 3000 : ms)) {
		waited += flush ? 3000 : ms;
		if (waited >= ms) {
			for (i = 0; i < n && rt_drained(&t[i], NULL); i++)
				;
			cr_assert_fail("host %zu not drained after %d ms:\n...%s", i, ms,
			    rt_send_logs_tail(&t[i], 4000));
		}
		for (i = 0; i < n; i++)
			rt_flush(&t[i]);
	}
}

size_t
hs_assert_delivered(const struct rt_rec *r, char **rcpt, size_t n, int exact)
{
	size_t i, extra = 0;

	for (i = 0; i < n; i++) {
		size_t c = rt_rec_count(r, HS_SENDER, rcpt[i]);

		cr_assert(c >= 1, "<%s> never delivered", rcpt[i]);
		cr_assert(!exact || c == 1, "<%s> delivered %zu times", rcpt[i], c);
		extra += c - 1;
	}
	cr_assert_eq(r->n, n + extra, "%zu transactions for %zu recipients and %zu repeats",
	    r->n, n, extra);
	return extra;
}

void
hs_assert_sound(struct rt *t, size_t n, const struct rt_rec *r)
{
	size_t i;

	for (i = 0; i < n; i++) {
		rt_assert_no_bounce(&t[i], r);
		rt_assert_queue_sound(&t[i]);
	}
}

void
hs_teardown(struct rt *t, size_t n)
{
	size_t i;

	/* Ours first, so that no rt_teardown kills another's processes
	 * behind its back. */
	for (i = 0; i < n; i++) {
		rt_send_kill9(&t[i]);
		rt_gate_kill9(&t[i]);
	}
	for (i = n; i > 0; i--)
		rt_teardown(&t[i - 1]);
}
