/*
 * takeover_test.c: weir taking over a queue a stock qmail left, run for
 * real: the files are written byte for byte as qmail-queue and qmail-send
 * write them, then the real weir-gate, weir-send and weir-remote deliver
 * to the stand-in upstream (tests/upstream/upstream.py, through
 * relay_helpers).
 * Covers: recipients qmail-send left pending in local/ (with a remote
 * recipient done or pending, or alone) reach the admin address through
 * weir's local rule, none is dropped, and `weir queue-check` notes them
 * until then; a todo/ from a stock qmail-queue with a control byte in one
 * recipient: the good ones are delivered, the bad one bounced to the
 * sender with the reason, nothing left behind; local recipients through
 * /etc/aliases' format (aliases_file): a list, a nested alias, an
 * :include: file, a pipe refused, both for sendmail's mail and for what
 * qmail-send left in local/.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

#define S(x) x, sizeof(x) - 1
#define SENDER "someone@src.example"

TestSuite(takeover, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 90);

static const char qmail_mess[] =
    "Received: (qmail 4242 invoked by uid 1000); 21 Nov 2026 10:00:00 -0000\n"
    "From: someone@src.example\nSubject: from qmail\n\nhello\n";

static void
start_all(void)
{
	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = \"1000 per 1s\" }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
}

/* S5 as qmail-send leaves it when stopped before a local delivery. */
static unsigned long
put_s5(const char *remote, size_t rlen, const char *local, size_t llen)
{
	unsigned long id = sh_put_mess(&t.s, S(qmail_mess));
	char *ip;

	sh_write(&t.s, Q_INFO, id, S("F" SENDER "\0"));
	ip = sh_qpath(&t.s, Q_INFO, id);
	sh_set_mtime(ip, time(NULL) - 60);
	free(ip);
	if (remote)
		sh_write(&t.s, Q_REMOTE, id, remote, rlen);
	sh_write(&t.s, Q_LOCAL, id, local, llen);
	return id;
}

/* weir queue-check notes the pending local recipients, finds no problem. */
static void
assert_noted(const char *what)
{
	struct buf out = BUF_INIT;
	int code = sh_queue_check(&t.s, &out);

	cr_assert_eq(code, 0, "queue-check exit %d:\n%s", code, buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), " 0 problems"), "queue-check:\n%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), what), "queue-check does not say \"%s\":\n%s", what,
	    buf_cstr(&out));
	buf_free(&out);
}

static void
pending_case(const char *remote, size_t rlen, const char *local, size_t llen,
    const char *const *want, size_t nwant, size_t nadmin)
{
	struct rt_rec r;
	size_t i, n = 0;

	put_s5(remote, rlen, local, llen);
	assert_noted("left pending by qmail-send");
	start_all();
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	for (i = 0; i < nwant; i++)
		cr_assert_eq(rt_rec_count(&r, SENDER, want[i]), 1, "<%s> not delivered once:\n%s",
		    want[i], rt_send_logs_tail(&t, 4000));
	n = rt_rec_count(&r, SENDER, SH_ADMIN);
	cr_assert_eq(n, nadmin, "the admin got %zu copies, expected %zu:\n%s", n, nadmin,
	    rt_send_logs_tail(&t, 4000));
	rt_assert_no_bounce(&t, &r);
	rt_assert_queue_empty(&t);
	rt_assert_queue_sound(&t);
	cr_assert(rt_log_count(&t, "left pending in local/ by qmail") >= 1);
	rt_rec_free(&r);
}

/* One remote recipient delivered, the local one pending: before, weir
 * ended the message and removed local/ with it. */
Test(takeover, local_pending_after_remote_done)
{
	pending_case(S("Dx@dest.example\0"), S("Tjoe@box.example\0"), NULL, 0, 1);
}

/* Both pending: the remote one goes to its address, the local one to
 * the admin. */
Test(takeover, local_and_remote_pending)
{
	const char *want[] = { "x@dest.example" };

	pending_case(S("Tx@dest.example\0"), S("Dold@box.example\0Tjoe@box.example\0"), want, 1, 1);
}

/* Only local recipients, no remote/ at all. */
Test(takeover, local_only)
{
	pending_case(NULL, 0, S("Tjoe@box.example\0Tann@box.example\0"), NULL, 0, 2);
}

/* A stock qmail-queue's todo/ with a control byte in one recipient: the
 * others are delivered, that one is bounced with the reason.  Before,
 * the todo/ entry stayed forever and nobody got anything. */
Test(takeover, control_byte_rcpt_bounced_others_delivered)
{
	static const char todo[] = "u1000\0p4242\0F" SENDER "\0Tok@dest.example\0"
	    "Tevil\r\nRCPT TO:<x@y>@dest.example\0Tok2@dest.example\0";
	struct rt_rec r;
	struct buf b = BUF_INIT, out = BUF_INIT;
	size_t i, nb = 0, bi = 0;

	sh_put_s4(&t.s, S(qmail_mess), S(todo), 1);
	cr_assert_eq(sh_queue_check(&t.s, &out), 0, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), "weir-send bounces it"), "%s", buf_cstr(&out));
	start_all();
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	cr_assert_eq(rt_rec_count(&r, SENDER, "ok@dest.example"), 1, "%s",
	    rt_send_logs_tail(&t, 4000));
	cr_assert_eq(rt_rec_count(&r, SENDER, "ok2@dest.example"), 1);
	for (i = 0; i < r.n; i++) {
		size_t k;

		for (k = 0; k < r.v[i].nrcpt; k++)
			cr_assert(strchr(r.v[i].rcpts[k], '\r') == NULL &&
			    strchr(r.v[i].rcpts[k], '\n') == NULL, "a control byte reached the upstream");
		if (strcmp(r.v[i].sender, "<>") == 0) {
			nb++;
			bi = i;
		}
	}
	cr_assert_eq(nb, 1, "%zu bounces at the upstream", nb);
	cr_assert_eq(r.v[bi].nrcpt, 1);
	cr_assert_str_eq(r.v[bi].rcpts[0], SENDER);
	rt_rec_message(&t, &r.v[bi], &b);
	cr_assert(strstr(buf_cstr(&b), "control character"), "%s", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "Status: 5.1.3"), "%s", buf_cstr(&b));
	rt_assert_queue_empty(&t);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	buf_free(&b);
	buf_free(&out);
}

/* aliases_file: "root" from sendmail and "joe" left by qmail-send in
 * local/ reach the addresses the aliases name, not the admin. */
Test(takeover, aliases_for_local_recipients)
{
	const char *r[] = { "root" };
	char *ap = xasprintf("%s/aliases", t.s.qt.tmp), *inc = xasprintf("%s/ops", t.s.qt.tmp);
	char *text = xasprintf("root: ops, |/bin/cat\nops: :include:%s\njoe: joe@dest.example\n", inc);
	char *line = xasprintf("aliases_file = \"%s\"\n", ap);
	struct rt_rec rec;

	tl_write(inc, "one@dest.example, two@dest.example\n", 35);
	tl_write(ap, text, strlen(text));
	sh_conf_append(&t.s, line);
	put_s5(S("Dx@dest.example\0"), S("Tjoe@box.example\0"));
	start_all();
	rt_sendmail(&t, SENDER, r, 1, "Subject: to root\n\nhi\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &rec);
	cr_assert_eq(rt_rec_count(&rec, SENDER, "one@dest.example"), 1, "%s",
	    rt_send_logs_tail(&t, 4000));
	cr_assert_eq(rt_rec_count(&rec, SENDER, "two@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&rec, SENDER, "joe@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&rec, SENDER, SH_ADMIN), 0);
	cr_assert(rt_log_count(&t, "\"|/bin/cat\" refused") == 1, "%s", rt_send_logs_tail(&t, 4000));
	rt_assert_no_bounce(&t, &rec);
	rt_assert_queue_sound(&t);
	rt_rec_free(&rec);
	free(ap);
	free(inc);
	free(text);
	free(line);
}
