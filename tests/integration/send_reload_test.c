/*
 * send_reload_test.c: SIGHUP, weir-send re-reading weir.conf: an upstream
 * added or removed (deliveries in flight go on), a file with errors
 * changes nothing (each error with file and line; deliverers keep the
 * snapshot), keys read only at start, concurrency raised live,
 * delay_warning turned on.
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
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_fixture.h"

TestSuite(send_reload, .init = sf_setup, .fini = sf_teardown, .timeout = 120);

/* ---- SIGHUP: re-reading weir.conf ---- */

static void
hup_and_wait(const char *what)
{
	int before = sf_count_in_log(what), i;

	cr_assert(kill(sf.d1.pid, SIGHUP) == 0);
	for (i = 0; i < 500 && sf_count_in_log(what) <= before; i++)
		usleep(10000);
	cr_assert(sf_count_in_log(what) > before, "no \"%s\" after SIGHUP:\n%s", what,
	    sf_send_log(&sf.d1));
}

/* Replace the first `from` in the config file by `to`. */
static void
conf_replace(const char *from, const char *to)
{
	struct buf b = BUF_INIT, n = BUF_INIT;
	const char *p;

	tl_read(sf.s.qt.conf, &b);
	p = strstr(buf_cstr(&b), from);
	cr_assert(p, "\"%s\" not in the config:\n%s", from, buf_cstr(&b));
	buf_add(&n, b.s, (size_t)(p - b.s));
	buf_adds(&n, to);
	buf_adds(&n, p + strlen(from));
	tl_write(sf.s.qt.conf, n.s, n.len);
	buf_free(&b);
	buf_free(&n);
}

static int
conf_lines(void)
{
	struct buf b = BUF_INIT;
	size_t i;
	int n = 0;

	tl_read(sf.s.qt.conf, &b);
	for (i = 0; i < b.len; i++)
		n += b.s[i] == '\n';
	buf_free(&b);
	return n;
}

/* No upstream takes alice's mail; a reload adds one: her message goes at
 * once through it, without waiting for its retry. */
Test(send_reload, reload_adds_upstream)
{
	const char *r1[] = { "x@example.net", NULL };
	char *c0, *w0;

	sf_teardown();
	sf_setup_with("upstream \"lists\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  senders = {\"*@lists.example.org\"}\n}\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", r1, SF_MSG1);
	cr_assert(sh_wait_for(sf_log_has, "no upstream", 5000), "%s", sf_send_log(&sf.d1));
	sh_conf_append(&sf.s, "upstream \"main\" {\n  host = \"127.0.0.2\"\n  port = 2525\n"
	    "  tls = \"none\"\n}\n");
	hup_and_wait("reloaded");
	cr_assert(sf_log_has("upstreams 2,"), "%s", sf_send_log(&sf.d1));
	cr_assert(sf_log_has("messages moved to another upstream: 1\n"), "%s", sf_send_log(&sf.d1));
	sf_wait_calls(1, 5000);
	sf_wait_empty(5000);
	c0 = sf_call(0);
	w0 = xasprintf("%s\tmain\t127.0.0.2\talice@example.org\tx@example.net", sf.s.qt.conf);
	cr_assert_str_eq(c0, w0);
	free(c0);
	free(w0);
}

/* A file with errors changes nothing: each error with file and line;
 * mail still goes.  Keys read at start only are logged and kept. */
Test(send_reload, reload_bad_file_and_restart_only_keys)
{
	const char *r1[] = { "x@example.net", NULL }, *r0[] = { "slow@example.net", NULL };
	char *want, *ok = xasprintf("%s/slow-ok", sf.s.qt.tmp);
	int line;

	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", r0, SF_MSG1);
	cr_assert(sh_wait_for(sf_log_has, "deferred <slow@example.net>", 5000), "%s", sf_send_log(&sf.d1));
	line = conf_lines() + 2;
	sh_conf_append(&sf.s, "concurrency = 3\nretry_skip = 0\n");
	hup_and_wait("stays in force");
	want = xasprintf("SIGHUP: %s:%d: retry_skip = 0 is out of range", sf.s.qt.conf, line);
	cr_assert(sf_log_has(want), "no \"%s\":\n%s", want, sf_send_log(&sf.d1));
	free(want);
	cr_assert(!sf_log_has("reloaded"), "%s", sf_send_log(&sf.d1));
	/* weir-send goes on with what it had (weir flush and sendmail read
	 * the broken file too: do what weir flush does by hand). */
	tl_write(ok, "", 0);
	{
		char *fl = xasprintf("%s/lock/flush", sf.s.qt.qdir);
		char *tr = xasprintf("%s/lock/trigger", sf.s.qt.qdir);
		int fd;

		tl_write(fl, "", 0);
		fd = open(tr, O_WRONLY | O_NONBLOCK);
		cr_assert(fd >= 0 && write(fd, "", 1) == 1, "pull %s", tr);
		close(fd);
		free(fl);
		free(tr);
	}
	sf_wait_calls(2, 5000);
	sf_wait_empty(5000);
	/* ...and so did the deliverer: its -c is weir-send's snapshot of
	 * the file as it was, not the broken file. */
	{
		char *c1 = sf_call(1), *cp = xasprintf("%s/conf.1", sf.s.qt.tmp);
		struct buf got = BUF_INIT;

		cr_assert(strncmp(c1, "snapshot /proc/self/fd/", 23) == 0,
		    "the deliverer read the file itself: %s", c1);
		tl_read(cp, &got);
		cr_assert(strstr(buf_cstr(&got), "upstream \"up1\""), "%s", buf_cstr(&got));
		cr_assert(!strstr(buf_cstr(&got), "retry_skip = 0"), "the broken config reached "
		    "the deliverer:\n%s", buf_cstr(&got));
		buf_free(&got);
		free(cp);
		free(c1);
	}
	free(ok);
	/* Fixed, with keys weir-send reads only at start changed. */
	conf_replace("retry_skip = 0\n", "retry_skip = 30\ngate_socket = \"/nonexistent/sf.gate.sock\"\n"
	    "queue_split = 7\n");
	hup_and_wait("reloaded");
	cr_assert(sf_log_has("gate_socket = \"/nonexistent/sf.gate.sock\" needs a restart of weir-send"),
	    "%s", sf_send_log(&sf.d1));
	cr_assert(sf_log_has("queue_split = 7 needs a restart of weir-send"), "%s", sf_send_log(&sf.d1));
	cr_assert(sf_log_has("concurrency 3, queue_lifetime 604800 s, retry_skip 30,"), "%s",
	    sf_send_log(&sf.d1));
	conf_replace("queue_split = 7\n", "");	/* sendmail must agree with the queue */
	sf_inject("alice@example.org", r1, SF_MSG1);
	sf_wait_calls(3, 5000);
	sf_wait_empty(5000);
	sf_assert_queue_sound();
}

/* A condition for sh_wait_for(): the deliverers' conc.log (arg) has a
 * line. */
static int
conc_begun(void *arg)
{
	struct buf b = BUF_INIT;
	int r;

	if (access(arg, F_OK) != 0)
		return 0;
	tl_read(arg, &b);
	r = b.len > 0;
	buf_free(&b);
	return r;
}

/* concurrency raised live (1 to 3) while a delivery runs: two more start
 * at once; the one in flight finishes and is applied. */
Test(send_reload, reload_concurrency_live)
{
	char *hang = xasprintf("%s/hang", sf.s.qt.tmp);
	char *cl = xasprintf("%s/conc.log", sf.s.qt.tmp);
	struct buf b = BUF_INIT;
	size_t n = 6;
	int max;

	sh_conf_append(&sf.s, "concurrency = 1\n");
	sf_inject_numbered(n);
	tl_write(hang, "1.5", 3);
	sf_start_send(&sf.d1, 0);
	/* One runs (1.5 s), the five others are granted and wait for it. */
	sf_wait_idle("delivering to", 1, "1 running, 5 granted, 0 asking weir-gate,", 5000);
	cr_assert(sh_wait_for(conc_begun, cl, 5000), "the deliverer did not begin");
	tl_read(cl, &b);
	cr_assert_eq(b.len > 0 && strchr(b.s, '\n') == b.s + b.len - 1, 1,
	    "more than one delivery before the reload:\n%s", buf_cstr(&b));
	buf_reset(&b);
	sh_conf_append(&sf.s, "concurrency = 3\n");
	hup_and_wait("reloaded");
	sf_wait_empty(20000);
	tl_read(cl, &b);
	max = sf_max_at_once(&b);
	cr_assert_eq(max, 3, "%d deliveries at once after concurrency = 3:\n%s", max, buf_cstr(&b));
	sf_assert_all_delivered(n);
	buf_free(&b);
	free(hang);
	free(cl);
}

/* The upstream of a delivery in flight is renamed away: the delivery
 * goes on and is applied; the next message uses the new name. */
Test(send_reload, reload_removes_upstream_in_flight)
{
	const char *r1[] = { "x@example.net", NULL }, *r2[] = { "y@example.net", NULL };
	char *hang = xasprintf("%s/hang", sf.s.qt.tmp), *e, *c1, *w1;

	tl_write(hang, "1.5", 3);
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", r1, SF_MSG1);
	cr_assert(sh_wait_for(sf_log_has, "delivering to", 5000), "%s", sf_send_log(&sf.d1));
	conf_replace("upstream \"up1\"", "upstream \"main\"");
	hup_and_wait("reloaded");
	cr_assert(sf_log_has("upstream up1 is no longer configured; its 1 deliveries in flight go on"),
	    "%s", sf_send_log(&sf.d1));
	sf_wait_empty(10000);
	cr_assert(sf_log_has("delivered to <x@example.net>"), "%s", sf_send_log(&sf.d1));
	cr_assert(unlink(hang) == 0);
	sf_inject("alice@example.org", r2, SF_MSG1);
	sf_wait_calls(2, 5000);
	sf_wait_empty(5000);
	e = sf_call_env(0);
	cr_assert_str_eq(e, "alice@example.org\tx@example.net");
	c1 = sf_call(1);
	w1 = xasprintf("%s\tmain\t127.0.0.1\talice@example.org\ty@example.net", sf.s.qt.conf);
	cr_assert_str_eq(c1, w1);
	sf_assert_queue_sound();
	free(e);
	free(c1);
	free(w1);
	free(hang);
}

/* delay_warning turned on by a reload applies at the next refusal. */
Test(send_reload, reload_enables_delay_warning)
{
	sf_aged_s5("alice@example.org", S("Tslow@example.net\0"), 2 * 3600);
	sf_start_send(&sf.d1, 0);
	sf_wait_idle("deferred <slow@example.net>", 1, SF_QUIET, 5000);
	cr_assert_eq(sf_ncalls(), 1);
	sh_conf_append(&sf.s, "delay_warning = \"1h\"\n");
	hup_and_wait("reloaded");
	cr_assert(sf_log_has("delay_warning 3600 s"), "%s", sf_send_log(&sf.d1));
	sf_run_flush();
	cr_assert(sh_wait_for(sf_log_has, "delay warning to <alice@example.org> queued", 5000), "%s",
	    sf_send_log(&sf.d1));
	sf_wait_calls(3, 5000);
}
