/*
 * rewrite_test.c: sender rewriting per upstream (issue 13, "Local mail
 * and senders"; mail/rewrite.h) through the real binaries: sendmail and
 * weir-queue inject, weir-gate and weir-send run, weir-remote rewrites,
 * and the stand-in upstream tests/upstream/upstream.py records what it
 * was given (MAIL FROM with its SIZE, the message).
 *
 *   map_default_and_header
 *       root@box.localdomain (exact entry) and a bare "cron" (local-part
 *       entry, injected by weir-queue as a stock qmail program would)
 *       arrive with the mapped MAIL FROM and From: address, the display
 *       name and comment kept; www-data at the host name gets the default;
 *       a sender in the map's domain is unchanged; the null sender <> is
 *       unchanged; a From: with two addresses is left and logged; SIZE=
 *       is the size of what was sent; one log line per change, with the
 *       queue id weir-send logs.
 *   without_header_option
 *       rewrite_header_from off: the envelope only.
 *   check_config
 *       weir check-config's warnings: an address local to this host in
 *       the map or the default, a local accepted domain, a setting that
 *       does nothing, an account named by an address with no rewriting.
 *
 * Ports are picked by the kernel, loopback only; each test has its own
 * folder; every process is stopped at the end, even on failure
 * (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/jsonparse.h"
#include "relay_helpers.h"

static struct rt t;

static void
setup(void)
{
	rt_setup(&t, 1);	/* one delivery at a time: MAIL events in data order */
}

static void
teardown(void)
{
	rt_teardown(&t);
}

TestSuite(rewrite, .init = setup, .fini = teardown, .timeout = 90);

static const char upconf[] =
    "  rewrite_sender = {\"root@box.localdomain admin@example.org\",\n"
    "                    \"cron cron@example.org\"}\n"
    "  rewrite_default = \"relay@example.org\"\n";

static void
start(const char *extra)
{
	const char *flags[] = { "--ehlo-extra", "SIZE 100000000", NULL };
	char *conf = xasprintf("%s%s", upconf, extra);

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, conf);
	rt_policy(&t, "upstream \"isp\" { rate = {\"100 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	free(conf);
}

/* The stand-in's MAIL events, in order: sender and SIZE= (-1: none). */
struct mailev {
	char sender[256];
	long long size;
};

static size_t
mail_events(struct mailev *v, size_t max)
{
	struct buf text = BUF_INIT, why = BUF_INIT;
	const char *p, *nl, *ev, *o;
	size_t n = 0, i;

	cr_assert_eq(read_file_at(AT_FDCWD, t.record, &text, 1 << 24), 0);
	for (p = buf_cstr(&text); *p; p = nl + 1) {
		struct json_object *j, *opts;

		nl = strchr(p, '\n');
		cr_assert_not_null(nl);
		j = json_parse_strict(p, (size_t)(nl - p), 1 << 20, &why);
		cr_assert_not_null(j, "%s", buf_cstr(&why));
		ev = jp_str(jp_get(j, "event"));
		if (ev && strcmp(ev, "mail") == 0) {
			cr_assert_lt(n, max);
			cr_assert_not_null(jp_str(jp_get(j, "sender")));
			snprintf(v[n].sender, sizeof v[n].sender, "%s", jp_str(jp_get(j, "sender")));
			v[n].size = -1;
			opts = jp_get(j, "options");
			for (i = 0; i < jp_len(opts); i++)
				if ((o = jp_str(jp_at(opts, i))) && strncmp(o, "SIZE=", 5) == 0)
					v[n].size = atoll(o + 5);
			n++;
		}
		json_object_put(j);
	}
	buf_free(&why);
	buf_free(&text);
	return n;
}

/* The data event to rcpt (asserts there is exactly one); its index. */
static size_t
data_to(const struct rt_rec *r, const char *rcpt)
{
	size_t i, found = r->n;

	for (i = 0; i < r->n; i++)
		if (r->v[i].nrcpt == 1 && strcmp(r->v[i].rcpts[0], rcpt) == 0) {
			cr_assert_eq(found, r->n, "<%s> received twice", rcpt);
			found = i;
		}
	cr_assert_neq(found, r->n, "nothing received for <%s>", rcpt);
	return found;
}

/* The message to rcpt holds line (CRLF added), as received. */
static void
assert_line(const struct rt_rec *r, const char *rcpt, const char *line)
{
	struct buf copy = BUF_INIT;
	char *want = xasprintf("\r\n%s\r\n", line);

	rt_rec_message(&t, &r->v[data_to(r, rcpt)], &copy);
	cr_assert(strstr(buf_cstr(&copy), want), "to <%s>: no \"%s\" in:\n%s", rcpt, line,
	    buf_cstr(&copy));
	free(want);
	buf_free(&copy);
}

static void
assert_sender(const struct rt_rec *r, const char *rcpt, const char *sender)
{
	size_t i = data_to(r, rcpt);

	cr_assert_str_eq(r->v[i].sender, sender, "to <%s>: MAIL FROM <%s>, expected <%s>",
	    rcpt, r->v[i].sender, sender);
}

/* Inject one message with weir-queue itself (a bare local sender, as
 * qmail-inject or a daemon speaking qmail-queue gives it). */
static void
weir_queue(const char *sender, const char *rcpt, const char *msg)
{
	const char *rcpts[] = { rcpt, NULL };
	struct buf env = BUF_INIT;
	struct tl_result r;

	qt_envelope(&env, sender, rcpts);
	qt_inject(&t.s.qt, msg, strlen(msg), env.s, env.len, NULL, &r);
	cr_assert_eq(r.status, 0, "weir-queue exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
	buf_free(&env);
}

static void
send1(const char *sender, const char *rcpt, const char *msg)
{
	const char *r[] = { rcpt };

	rt_sendmail(&t, sender, r, 1, msg);
}

/* The one log line holding what; the queue id in it (weir-remote's -q)
 * is one weir-send delivered ("msg ID: delivering"). */
static void
assert_logged_once(const char *what)
{
	char *logs = rt_send_logs(&t), *p = strstr(logs, what), *line, *id, *deliv;

	cr_assert_not_null(p, "no \"%s\" in the log:\n%s", what, logs);
	cr_assert_null(strstr(p + 1, what), "\"%s\" logged twice:\n%s", what, logs);
	for (line = p; line > logs && line[-1] != '\n'; line--)
		;
	id = strstr(line, ": msg ");
	cr_assert(id && id < p, "no queue id in the line of \"%s\"", what);
	id += 6;
	deliv = xasprintf("msg %.*s: delivering", (int)strcspn(id, ": "), id);
	cr_assert_not_null(strstr(logs, deliv), "no \"%s\": not one weir-send delivered:\n%s",
	    deliv, logs);
	free(deliv);
	free(logs);
}

Test(rewrite, map_default_and_header)
{
	struct mailev mev[16];
	struct rt_rec r;
	struct buf copy = BUF_INIT;
	size_t i, nmail;

	start("  rewrite_header_from = true\n");
	send1("root@box.localdomain", "r1@dest.example",
	    "From: Root of Box <root@box.localdomain>\nSubject: one\n\nroot's mail\n");
	weir_queue("cron", "r2@dest.example",
	    "From: cron (Cron Daemon)\nSubject: two\n\ncron's mail\n");
	send1("www-data@" SH_HOST, "r3@dest.example",
	    "From: \"Web, server\"\n <www-data@" SH_HOST ">\nSubject: three\n\nweb\n");
	send1("me@example.org", "r4@dest.example",
	    "From: Me <me@example.org>\nSubject: four\n\nmine\n");
	send1("", "r5@dest.example",
	    "From: Mail Delivery <MAILER-DAEMON@example.org>\nSubject: five\n\nbounce\n");
	send1("cron@" SH_HOST, "r6@dest.example",
	    "From: root@box.localdomain, cron@box.localdomain\nSubject: six\n\ntwo\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 6, "%zu messages at the upstream", r.n);

	/* The map's exact entry; the display name kept. */
	assert_sender(&r, "r1@dest.example", "admin@example.org");
	assert_line(&r, "r1@dest.example", "From: Root of Box <admin@example.org>");
	/* A bare local part; cron's comment kept. */
	assert_sender(&r, "r2@dest.example", "cron@example.org");
	assert_line(&r, "r2@dest.example", "From: cron@example.org (Cron Daemon)");
	/* No entry, a local domain: the default; the fold kept. */
	assert_sender(&r, "r3@dest.example", "relay@example.org");
	assert_line(&r, "r3@dest.example", "From: \"Web, server\"\r\n <relay@example.org>");
	/* The map's domain: as it was. */
	assert_sender(&r, "r4@dest.example", "me@example.org");
	assert_line(&r, "r4@dest.example", "From: Me <me@example.org>");
	/* The null sender is never rewritten. */
	assert_sender(&r, "r5@dest.example", "<>");
	assert_line(&r, "r5@dest.example", "From: Mail Delivery <MAILER-DAEMON@example.org>");
	/* Two addresses in From: left as they are; the envelope still mapped. */
	assert_sender(&r, "r6@dest.example", "cron@example.org");
	assert_line(&r, "r6@dest.example", "From: root@box.localdomain, cron@box.localdomain");

	/* SIZE= is the size of what was sent, after the rewrite. */
	nmail = mail_events(mev, 16);
	cr_assert_eq(nmail, r.n, "%zu MAIL commands for %zu messages", nmail, r.n);
	for (i = 0; i < r.n; i++) {
		cr_assert_str_eq(mev[i].sender, r.v[i].sender);
		rt_rec_message(&t, &r.v[i], &copy);
		cr_assert_eq(mev[i].size, (long long)copy.len, "MAIL FROM <%s> SIZE=%lld, "
		    "the message was %zu bytes", mev[i].sender, mev[i].size, copy.len);
	}

	/* One line per change, with the queue id. */
	assert_logged_once("envelope sender <root@box.localdomain> -> <admin@example.org>");
	assert_logged_once("From: root@box.localdomain -> admin@example.org");
	assert_logged_once("envelope sender <cron> -> <cron@example.org>");
	assert_logged_once("From: cron -> cron@example.org");
	assert_logged_once("envelope sender <www-data@" SH_HOST "> -> <relay@example.org>");
	assert_logged_once("From: www-data@" SH_HOST " -> relay@example.org");
	assert_logged_once("envelope sender <cron@" SH_HOST "> -> <cron@example.org>");
	assert_logged_once("From: left as it is: not one mailbox");
	cr_assert_eq(rt_log_count(&t, "me@example.org ->"), 0);
	cr_assert_eq(rt_log_count(&t, "<> ->"), 0);
	rt_assert_queue_sound(&t);
	rt_rec_free(&r);
	buf_free(&copy);
}

Test(rewrite, without_header_option)
{
	struct rt_rec r;

	start("");
	send1("root@box.localdomain", "r1@dest.example",
	    "From: Root <root@box.localdomain>\nSubject: one\n\nroot's mail\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &r);
	assert_sender(&r, "r1@dest.example", "admin@example.org");
	assert_line(&r, "r1@dest.example", "From: Root <root@box.localdomain>");
	cr_assert_eq(rt_log_count(&t, "From: root@box.localdomain ->"), 0);
	rt_rec_free(&r);
}

/* weir check-config warns about rewriting that cannot work or does
 * nothing, with the line of the key. */
Test(rewrite, check_config)
{
	char *conf = xasprintf("%s/check.conf", t.s.qt.tmp);
	char *text = xasprintf("hostname = \"box.localdomain\"\n"
	    "upstream \"plain\" {\n  host = \"127.0.0.1\"\n  username = \"me@example.org\"\n"
	    "  secret_file = \"%s\"\n}\n"
	    "upstream \"local\" {\n  host = \"127.0.0.1\"\n"
	    "  rewrite_sender = {\"cron cron@box.localdomain\"}\n"
	    "  rewrite_default = \"me@localhost\"\n"
	    "  rewrite_domains = {\"box.localdomain\"}\n}\n"
	    "upstream \"idle\" {\n  host = \"127.0.0.1\"\n  rewrite_header_from = true\n}\n"
	    "upstream \"good\" {\n  host = \"127.0.0.1\"\n  username = \"me@example.org\"\n"
	    "  secret_file = \"%s\"\n  rewrite_default = \"me@example.org\"\n"
	    "  rewrite_header_from = true\n}\n", t.secret, t.secret);
	const char *args[] = { "-c", conf, "check-config" };
	struct tl_result r;
	const char *out;

	tl_write(conf, text, strlen(text));
	r = rt_run(&t, "weir", args, 3, NULL);
	out = buf_cstr(&r.out);
	cr_assert(strstr(out, ":2: warning: upstream \"plain\": no sender rewriting"), "%s", out);
	cr_assert(strstr(out, ":9: warning: upstream \"local\": rewrite_sender \"cron "
	    "cron@box.localdomain\" rewrites to an address local"), "%s", out);
	cr_assert(strstr(out, ":10: warning: upstream \"local\": rewrite_default "
	    "\"me@localhost\" is local"), "%s", out);
	cr_assert(strstr(out, ":11: warning: upstream \"local\": rewrite_domains names "
	    "\"box.localdomain\""), "%s", out);
	cr_assert(strstr(out, ":15: warning: upstream \"idle\": rewrite_header_from without"),
	    "%s", out);
	cr_assert_null(strstr(out, "upstream \"good\": no sender"), "%s", out);
	cr_assert_null(strstr(out, "upstream \"good\": rewrite"), "%s", out);
	tl_result_free(&r);
	free(text);
	free(conf);
}
