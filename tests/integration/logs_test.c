/*
 * logs_test.c: the log as an operator reads it (issue 15), from a whole
 * relay run: the real sendmail (-v), weir-queue, weir-gate, weir-send and
 * weir-remote against tests/upstream/upstream.py on loopback.
 *
 * - Every line of weir-send's and weir-gate's logs (weir-remote's lines
 *   are in weir-send's) is in the one form of lib/log.h:
 *   "TIME PROG[PID]: LEVEL: TEXT", TIME left out under the journal.
 * - A message delivered at its first attempt to one recipient makes
 *   exactly LINES_PER_DELIVERED lines (queued, delivering, delivered,
 *   end); the SMTP transcript is only there with log_level = "verbose".
 * - grep of a message's id (INODE.SEC.NSEC, as sendmail -v says it) tells its
 *   story in order, from queued to end: delivered, deferred then
 *   delivered, bounced (and its bounce's own story).
 * - No text can split a line: control bytes are escaped.
 *
 * Trusts: the processes it starts.  Test code only (Criterion).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "relay_helpers.h"

#define SENDER "alice@src.example"
/* queued, delivering, delivered, end: the bound for one recipient. */
#define LINES_PER_DELIVERED 4

static struct rt t;

static void
setup(void)
{
	unsetenv("JOURNAL_STREAM");
	rt_setup(&t, 2);
}

static void
teardown(void)
{
	rt_teardown(&t);
}

TestSuite(logs, .init = setup, .fini = teardown, .timeout = 120);

static const char policy[] = "upstream \"isp\" { rate = {\"20 per 1s\"} }\n";

/* sendmail -v -f SENDER rcpt < msg: the id it says, malloc'ed. */
static char *
send_v(const char *rcpt, const char *msg)
{
	const char *args[] = { "-v", "-f", SENDER, rcpt };
	struct tl_result r = rt_run(&t, "sendmail", args, 4, msg);
	const char *p = strstr(buf_cstr(&r.out), "queued as ");
	char *id;
	size_t n;

	cr_assert_eq(r.status, 0, "sendmail exit %d: %s", r.status, buf_cstr(&r.err));
	cr_assert(p, "sendmail -v said no id: \"%s\"", buf_cstr(&r.out));
	p += strlen("queued as ");
	n = strspn(p, "0123456789.");
	cr_assert(n > 2 && p[n] == '\n' && strchr(p, '.') && strchr(p, '.') < p + n,
	    "sendmail -v: \"%s\"", buf_cstr(&r.out));
	id = xstrndup(p, n);
	tl_result_free(&r);
	return id;
}

/* Every log of the run: weir-send's runs, then weir-gate's. */
static char *
all_logs(void)
{
	struct buf b = BUF_INIT;
	char *s = rt_send_logs(&t), *r;

	tl_read(t.gate_log, &b);
	r = xasprintf("%s%s", s, buf_cstr(&b));
	free(s);
	buf_free(&b);
	return r;
}

/* Assert every line is in the log form; stamped says whether TIME must
 * be there (1) or must not (0).  How many lines. */
static size_t
assert_form(const char *logs, int stamped)
{
	regex_t re;
	const char *p;
	size_t n = 0;

	cr_assert(regcomp(&re, "^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}"
	    "[+-][0-9]{4} )?weir-(send|gate|remote|queue)\\[[0-9]+\\]: (info|warning|debug): "
	    "[^[:cntrl:]]+$", REG_EXTENDED) == 0);
	for (p = logs; *p; n++) {
		const char *nl = strchr(p, '\n');
		char *line;
		regmatch_t m[2];

		cr_assert(nl, "a last line without its newline: \"%s\"", p);
		line = xstrndup(p, (size_t)(nl - p));
		cr_assert(regexec(&re, line, 2, m, 0) == 0, "not in the log form: \"%s\"", line);
		cr_assert_eq(m[1].rm_so >= 0, stamped, "%s: \"%s\"",
		    stamped ? "no time stamp" : "a time stamp under the journal", line);
		if (strstr(line, ": msg "))
			cr_assert(strstr(line, "]: info: msg ") || strstr(line, "]: warning: msg ") ||
			    strstr(line, "]: debug: msg "), "\"msg\" not first: \"%s\"", line);
		free(line);
		p = nl + 1;
	}
	regfree(&re);
	return n;
}

/* The lines of logs holding "msg ID:", joined by '\n', malloc'ed; their
 * number in *n. */
static char *
story(const char *logs, const char *id, size_t *n)
{
	char *key = xasprintf(": msg %s: ", id);
	struct buf b = BUF_INIT;
	const char *p;

	*n = 0;
	for (p = logs; *p; ) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = xstrndup(p, len);

		if (strstr(line, key)) {
			buf_adds(&b, line);
			buf_addc(&b, '\n');
			(*n)++;
		}
		free(line);
		p += len + (nl != NULL);
	}
	free(key);
	return xstrdup(buf_cstr(&b));
}

/* Assert the story holds the events steps[0..], each after the one
 * before it. */
static void
assert_in_order(const char *st, const char *id, const char *const *steps, size_t n)
{
	const char *p = st;
	size_t i;

	for (i = 0; i < n; i++) {
		const char *q = strstr(p, steps[i]);

		cr_assert(q, "msg %s: no \"%s\" after the step before; its story:\n%s", id, steps[i],
		    st);
		p = q + strlen(steps[i]);
	}
}

static size_t
count(const char *s, const char *what)
{
	size_t n = 0;

	while ((s = strstr(s, what)) != NULL) {
		n++;
		s += strlen(what);
	}
	return n;
}

Test(logs, relay_run)
{
	const char *flags[] = { "--reply", "rcpt:grey@dest.example=451 4.7.1 greylisted, try "
		"again later", "--reply", "rcpt:bad@dest.example=550 5.1.1 no such user", NULL };
	char *ok[3], *grey, *bad, *logs, *st, *bid, *key;
	const char *p;
	size_t i, n, lines, nmsg = 0, stale;
	unsigned port;

	rt_upstream_start(&t, "good", flags, 0);
	port = t.port;
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, policy);
	rt_gate_start(&t, "2s");
	/* All queued before weir-send starts (ids_never_repeat is about an
	 * inode freed and reused). */
	for (i = 0; i < 3; i++) {
		char *to = xasprintf("ok%zu@dest.example", i + 1);

		ok[i] = send_v(to, "Subject: ok\n\nhello\n");
		free(to);
	}
	grey = send_v("grey@dest.example", "Subject: grey\n\nlater\n");
	bad = send_v("bad@dest.example", "Subject: bad\n\nnobody\n");
	rt_send_start(&t);
	/* Three delivered, one bounced, its bounce delivered: five ends. */
	rt_wait_log(&t, ": end\n", 5, 30000);
	rt_wait_log(&t, "deferred <grey@dest.example>", 1, 30000);
	/* The greylisting is over: the next attempt goes through. */
	rt_upstream_stop(&t);
	rt_upstream_start(&t, "good", NULL, port);
	rt_flush_until_empty(&t, 60000);
	rt_wait_log(&t, ": end\n", 6, 30000);

	logs = all_logs();
	lines = assert_form(logs, 1);
	cr_assert_eq(count(logs, "weir-remote["), 0, "weir-remote's transcript at the normal "
	    "level:\n%s", logs);

	/* Delivered at the first attempt: the bound, in order. */
	for (i = 0; i < 3; i++) {
		const char *steps[] = { ": queued, from <" SENDER ">, 1 recipient(s), ",
			": delivering to 1 recipient via isp, ", ": delivered to <",
			"250 2.0.0 OK queued as ", ": end" };

		st = story(logs, ok[i], &n);
		cr_assert_eq(n, LINES_PER_DELIVERED, "msg %s: %zu lines, the bound is %d:\n%s", ok[i],
		    n, LINES_PER_DELIVERED, st);
		assert_in_order(st, ok[i], steps, 5);
		free(st);
		nmsg++;
	}
	/* Deferred, then delivered. */
	{
		const char *steps[] = { ": queued, from <", ": delivering to 1 recipient",
			": deferred <grey@dest.example>: ", "greylisted, try again later",
			": delivering to 1 recipient", ": delivered to <grey@dest.example>: ",
			": end" };

		st = story(logs, grey, &n);
		assert_in_order(st, grey, steps, 7);
		/* The upstream's restart closed weir-send's idle session: the
		 * retry may find it so (two lines more: an attempt and its
		 * "not sent"), once, then go on a new one. */
		stale = count(st, ": not sent: the upstream had closed the session");
		cr_assert(stale <= 1, "msg %s: %zu stale sessions:\n%s", grey, stale, st);
		cr_assert_eq(n, 6 + 2 * stale, "msg %s: %zu lines:\n%s", grey, n, st);
		free(st);
		nmsg++;
	}
	/* Bounced; its bounce is a message of its own, delivered. */
	{
		const char *steps[] = { ": queued, from <", ": delivering to 1 recipient",
			": bounced <bad@dest.example>: ", "550 5.1.1 no such user", ": end" };
		const char *bsteps[] = { ": queued, from <>, 1 recipient(s)",
			": delivered to <" SENDER ">: ", ": end" };

		st = story(logs, bad, &n);
		assert_in_order(st, bad, steps, 5);
		free(st);
		/* "msg ID: bounce to <alice> queued as BID". */
		key = xasprintf(": msg %s: bounce to <" SENDER "> queued as ", bad);
		p = strstr(logs, key);
		cr_assert(p, "no \"%s\" in:\n%s", key, logs);
		p += strlen(key);
		bid = xstrndup(p, strspn(p, "0123456789."));
		st = story(logs, bid, &n);
		assert_in_order(st, bid, bsteps, 3);
		cr_assert_eq(n, LINES_PER_DELIVERED, "bounce %s: %zu lines:\n%s", bid, n, st);
		free(st);
		free(bid);
		free(key);
		nmsg += 2;
	}
	rt_say("relay run: %zu log lines for %zu messages (%d per message delivered at once)",
	    lines, nmsg, LINES_PER_DELIVERED);
	free(logs);
	for (i = 0; i < 3; i++)
		free(ok[i]);
	free(grey);
	free(bad);
}

/* log_level = "verbose": the transcript is there, still one form. */
Test(logs, verbose)
{
	char *id, *logs;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	sh_conf_append(&t.s, "log_level = \"verbose\"\n");
	rt_policy(&t, policy);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	id = send_v("v@dest.example", "Subject: v\n\nverbose\n");
	rt_wait_log(&t, ": end\n", 1, 30000);
	logs = all_logs();
	assert_form(logs, 1);
	cr_assert(strstr(logs, "]: debug: 127.0.0.1:") && strstr(logs, ": RCPT -> DATA"),
	    "no transcript at the verbose level:\n%s", logs);
	free(logs);
	free(id);
}

/* A wait of note is in the delivering line: of two messages under
 * "1 per 2s", whichever goes second waits about 2 s for its grant
 * (weir-send's deliver.c names a wait of a second or more); the first
 * does not wait. */
static unsigned long
waited_in_line(const char *logs, const char *id)
{
	size_t n;
	char *st = story(logs, id, &n), *p = strstr(st, ": delivering to 1 recipient via isp, ");
	unsigned long w = 0;

	cr_assert(n == LINES_PER_DELIVERED && p, "msg %s:\n%s", id, st);
	if ((p = strstr(p, ", after ")) != NULL) {
		w = strtoul(p + 8, NULL, 10);
		cr_assert(strncmp(p + 8 + strspn(p + 8, "0123456789"), " s in line\n", 11) == 0,
		    "msg %s:\n%s", id, st);
	}
	free(st);
	return w;
}

Test(logs, wait_in_line)
{
	char *a, *b, *logs;
	unsigned long wa, wb;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = {\"1 per 2s\"} }\n");
	rt_gate_start(&t, "2s");
	a = send_v("a@dest.example", "Subject: a\n\nfirst\n");
	b = send_v("b@dest.example", "Subject: b\n\nsecond\n");
	rt_send_start(&t);
	rt_wait_log(&t, ": end\n", 2, 30000);
	logs = rt_send_logs(&t);
	assert_form(logs, 1);
	wa = waited_in_line(logs, a);
	wb = waited_in_line(logs, b);
	cr_assert((wa == 0) != (wb == 0) && wa + wb >= 1 && wa + wb <= 30,
	    "waits %lu s and %lu s; one of about 2 s was expected:\n%s", wa, wb, logs);
	free(logs);
	free(a);
	free(b);
}

/* Under systemd's journal ($JOURNAL_STREAM): no time stamp. */
Test(logs, journal)
{
	const char *env[] = { "JOURNAL_STREAM=8:12345", NULL };
	char *id, *logs;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, policy);
	rt_gate_start(&t, "2s");
	rt_send_start_env(&t, env);
	id = send_v("j@dest.example", "Subject: j\n\njournal\n");
	rt_wait_log(&t, ": end\n", 1, 30000);
	logs = rt_send_logs(&t);
	assert_form(logs, 0);
	free(logs);
	free(id);
}

/* No text splits a line: control bytes and backslashes escaped. */
Test(logs, escaped)
{
	char path[] = "/tmp/logs_test.XXXXXX";
	struct buf b = BUF_INIT;
	int fd = mkstemp(path), saved = dup(2);

	cr_assert(fd >= 0 && saved >= 0);
	cr_assert(dup2(fd, 2) == 2);
	log_init("weir-send");
	log_info("msg 1.2: deferred <a@b>: 451-first\r\n451 second\tthird\x01 back\\slash\n");
	log_debug("not at the normal level");
	log_set_level(LOG_VERBOSE);
	log_debug("now");
	cr_assert(dup2(saved, 2) == 2);
	tl_read(path, &b);
	unlink(path);
	close(fd);
	close(saved);
	cr_assert_eq(count(buf_cstr(&b), "\n"), 2, "\"%s\"", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "]: info: msg 1.2: deferred <a@b>: 451-first\\r\\n451 "
	    "second\\tthird\\x01 back\\\\slash\n"), "\"%s\"", buf_cstr(&b));
	cr_assert(strstr(buf_cstr(&b), "]: debug: now\n"), "\"%s\"", buf_cstr(&b));
	assert_form(buf_cstr(&b), 1);
	buf_free(&b);
}

/*
 * Inode numbers come back at once: a message that ends frees its inode
 * and the next one injected may get it, within the same second and the
 * same tick of the kernel's file times.  The id must still differ from
 * every earlier one.  Messages are ended here by hand, as weir-send ends
 * them (todo/ and intd/ first, mess/S/N last), so that the inode is free.
 */
Test(logs, ids_never_repeat)
{
	unsigned long prev_ino = 0;
	char *ids[200];
	size_t tries, k, reused = 0;

	for (tries = 0; tries < 200 && reused < 20; tries++) {
		char *id = send_v("r@dest.example", "Subject: r\n\nagain\n"), *end;
		unsigned long ino = strtoul(id, &end, 10);
		char *todo = xasprintf("%s/todo/%lu", t.s.qt.qdir, ino);
		char *intd = xasprintf("%s/intd/%lu", t.s.qt.qdir, ino);
		char *mess = xasprintf("%s/mess/%lu/%lu", t.s.qt.qdir, ino % t.s.qt.split, ino);

		reused += tries > 0 && ino == prev_ino;
		for (k = 0; k < tries; k++)
			cr_assert_str_neq(id, ids[k], "inode %lu came back and id %s repeated "
			    "(injection %zu and %zu)", ino, id, k, tries);
		cr_assert(unlink(todo) == 0 && unlink(intd) == 0 && unlink(mess) == 0,
		    "ending %s: %s", id, strerror(errno));
		ids[tries] = id;
		prev_ino = ino;
		free(todo);
		free(intd);
		free(mess);
	}
	for (k = 0; k < tries; k++)
		free(ids[k]);
	if (reused == 0)
		cr_skip_test("this file system gave no inode back in %zu injections", tries);
	rt_say("ids_never_repeat: an inode came back %zu times in %zu injections", reused, tries);
}
