/*
 * replies_test.c: the providers' replies read as they mean them (issue
 * 31), through the real binaries and stand-in upstreams on loopback
 * (tests/upstream/upstream.py, answering the replies of
 * tests/data/replies.txt).
 *
 *   corpus_quota_and_rate_never_bounce
 *       every quota and rate reply of the corpus, at MAIL, at RCPT and
 *       after the final dot, given by one stand-in to the real
 *       weir-remote (one message each, no gate): no recipient is
 *       bounced ('h') and no message fails ('D'), and each report
 *       carries the reply the stand-in gave.
 *   microsoft_quota_at_rcpt_waits / microsoft_quota_after_dot_waits
 *       (item 2) Microsoft 365's SubmissionQuotaExceeded at RCPT and
 *       after the dot, through weir-send and weir-gate: no bounce, the
 *       message stays queued, the gate suspends the upstream for its
 *       quota.  On the old code both bounced.
 *   upstream_rules_come_first
 *       an upstream's reply_rules: a wrong 5xx made temporary is deferred,
 *       an unknown reply made a quota goes to the backup; check-config
 *       --reply names the rule and its line.
 *   gmail_quota_goes_to_the_backup
 *       (item 3) "452 4.5.3 Daily sending quota exceeded" at RCPT, with
 *       a backup and the default fallback_when: the message goes
 *       through the backup at once, after one try at the primary.  On
 *       the old code it was deferred at the primary and never moved.
 *
 * Ports are picked by the kernel, loopback only; every process is
 * stopped at the end, even on failure (relay_helpers.h).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "relay_helpers.h"

#define CORPUS "tests/data/replies.txt"
#define SENDER "alice@src.example"

static struct rt t;
static struct rt_peer b;

static void
setup(void)
{
	rt_setup(&t, 2);
	memset(&b, 0, sizeof b);
}

static void
teardown(void)
{
	rt_peer_free(&b);
	rt_teardown(&t);
}

TestSuite(replies, .init = setup, .fini = teardown, .timeout = 240);

struct creply {
	char *text;
	int quota;	/* 1 quota, 0 rate */
};

/* The corpus's quota and rate replies (each text once). */
static size_t
quota_and_rate(struct creply **out)
{
	FILE *f = fopen(CORPUS, "r");
	char line[2048];
	struct creply *v = NULL;
	size_t n = 0, i;

	cr_assert_not_null(f, "%s", CORPUS);
	while (fgets(line, sizeof line, f)) {
		char *reply, *cls, *end;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		reply = strchr(line, '\t');
		cr_assert_not_null(reply);
		reply++;
		cls = strchr(reply, '\t');
		cr_assert_not_null(cls);
		*cls++ = '\0';
		end = strchr(cls, '\t');
		cr_assert_not_null(end);
		*end = '\0';
		if (strcmp(cls, "quota") != 0 && strcmp(cls, "rate") != 0)
			continue;
		for (i = 0; i < n && strcmp(v[i].text, reply) != 0; i++)
			;
		if (i < n)
			continue;
		v = xrealloc(v, (n + 1) * sizeof *v);
		v[n].text = xstrdup(reply);
		v[n].quota = strcmp(cls, "quota") == 0;
		n++;
	}
	fclose(f);
	*out = v;
	return n;
}

/* The reports of one weir-remote run (mail/remote.h): how many 'h', and
 * the message's letter; every report must carry want (the reply). */
static void
check_reports(struct tl_result *r, const char *want, const char *where)
{
	const char *p = r->out.s ? r->out.s : "", *end = p + r->out.len;
	size_t n = 0;

	cr_assert_eq(r->status, 0, "%s: exit %d: %s", where, r->status, buf_cstr(&r->err));
	while (p < end) {
		size_t len = strlen(p);

		n++;
		cr_assert(p[0] != 'h', "%s: a recipient bounced: %s", where, p);
		cr_assert(p[0] != 'D', "%s: the message failed: %s", where, p);
		cr_assert(strstr(p, want) != NULL, "%s: the report does not carry the reply: %s",
		    where, p);
		p += len + 1;
	}
	cr_assert_eq(n, 2, "%s: %zu reports: %s", where, n, buf_cstr(&r->out));
}

Test(replies, corpus_quota_and_rate_never_bounce)
{
	static const char *const stages[] = { "mail", "rcpt", "dataend" };
	struct creply *v;
	size_t n = quota_and_rate(&v), i, k, nquota = 0;
	char *file = xasprintf("%s/replies.txt", t.s.qt.tmp);
	const char *flags[] = { "--reply-file", file, NULL };
	struct buf lines = BUF_INIT;
	struct rt_rec rec;

	for (i = 0; i < n; i++) {
		nquota += v[i].quota;
		buf_printf(&lines, "mail:s%zu@src.example=%s\n", i, v[i].text);
		buf_printf(&lines, "rcpt:r%zu@dst.example=%s\n", i, v[i].text);
		buf_printf(&lines, "dataend:d%zu@dst.example=%s\n", i, v[i].text);
	}
	cr_assert_geq(nquota, 10);
	cr_assert_geq(n - nquota, 20);
	tl_write(file, lines.s, lines.len);
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "");
	for (i = 0; i < n; i++) {
		for (k = 0; k < 3; k++) {
			char *sender = xasprintf(k == 0 ? "s%zu@src.example" : SENDER, i);
			char *rcpt = xasprintf("%c%zu@dst.example", k == 2 ? 'd' : 'r', i);
			char *where = xasprintf("%s at %s", v[i].text, stages[k]);
			const char *args[] = { "-c", t.s.qt.conf, "-u", "isp", "127.0.0.1", sender,
				rcpt };
			struct tl_result r;
			char want[24];

			/* The report's one line: its first 20 bytes are the server's. */
			snprintf(want, sizeof want, "%.20s", v[i].text);
			r = rt_run(&t, "weir-remote", args, 7, "Subject: quota\n\nbody\n");
			check_reports(&r, want, where);
			tl_result_free(&r);
			free(sender);
			free(rcpt);
			free(where);
		}
	}
	/* The stand-in did meet each stage: its record holds every MAIL,
	 * every RCPT, and every final dot it refused. */
	rt_rec_load(&t, &rec);
	cr_assert_eq(rec.n, n, "%zu final dots for %zu replies after the dot", rec.n, n);
	rt_rec_free(&rec);
	for (i = 0; i < n; i++)
		free(v[i].text);
	free(v);
	buf_free(&lines);
	free(file);
}

#define MS_QUOTA "554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; " \
	"Failed to process message due to a permanent exception with message Cannot submit message."

/* One message to rcpt, met by MS_QUOTA at stage (rcpt or dataend). */
static void
microsoft_quota(const char *stage)
{
	const char *rcpt = "q@dst.example";
	char *reply = xasprintf("%s:%s=%s", stage, rcpt, MS_QUOTA);
	const char *flags[] = { "--reply", reply, NULL };
	char *gst, *mq;

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, &rcpt, 1, "Subject: quota\n\nbody\n");
	rt_wait_log(&t, "deferred <q@dst.example>", 1, 30000);
	/* It met the reply (the stand-in's record), was not bounced, and
	 * waits in the queue while the gate suspends the upstream for its
	 * quota. */
	cr_assert(rt_logged(&t, "SubmissionQuotaExceeded", 1, 1000));
	cr_assert(rt_wait(rt_gate_status_has, &t, (void *)"SubmissionQuotaExceeded", 10000),
	    "the gate did not suspend the upstream:\n%s", rt_send_logs_tail(&t, 3000));
	gst = rt_gate_status(&t);
	cr_assert(strstr(gst, "suspended"), "%s", gst);
	free(gst);
	cr_assert_eq(rt_log_count(&t, "quota is spent"), 1, "%s", rt_send_logs_tail(&t, 3000));
	{
		struct rt_rec rec;

		rt_rec_load(&t, &rec);
		rt_assert_no_bounce(&t, &rec);
		rt_rec_free(&rec);
	}
	mq = rt_mailq(&t);
	cr_assert_eq(rt_mailq_count(mq), 1, "%s", mq);
	free(mq);
	free(reply);
}

Test(replies, microsoft_quota_at_rcpt_waits)
{
	microsoft_quota("rcpt");
}

Test(replies, microsoft_quota_after_dot_waits)
{
	microsoft_quota("dataend");
}

Test(replies, gmail_quota_goes_to_the_backup)
{
	const char *rcpt = "g@dst.example";
	const char *flags[] = { "--reply", "rcpt=452 4.5.3 Daily sending quota exceeded", NULL };
	struct rt_rec ri, rb;

	rt_upstream_start(&t, "good", flags, 0);
	rt_peer_start(&t, &b, "backup", NULL, 0);
	/* fallback_when as by default: unreachable 10m, authentication,
	 * quota 1h. */
	rt_conf_upstream_at(&t, "isp", t.port, "  fallback = {\"backup\"}\n");
	rt_conf_upstream_at(&t, "backup", b.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"backup\" { rate = {\"10 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, &rcpt, 1, "Subject: quota\n\nbody\n");
	rt_wait_empty(&t, 30000);
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rb);
	cr_assert_eq(ri.n, 0, "isp took it");
	cr_assert_eq(rt_rec_count(&rb, NULL, rcpt), 1, "not delivered through the backup:\n%s",
	    rt_send_logs_tail(&t, 3000));
	cr_assert_eq(rt_log_count(&t, "deferred <g@dst.example>: "), 1,
	    "one try at isp:\n%s", rt_send_logs_tail(&t, 3000));
	cr_assert_eq(rt_log_count(&t, "upstream isp: its mail goes through backup from now on "
	    "(quota"), 1, "%s", rt_send_logs_tail(&t, 3000));
	rt_assert_no_bounce(&t, &rb);
	rt_rec_free(&ri);
	rt_rec_free(&rb);
}

/* Item 2 of the "what to build": an upstream's reply_rules in
 * weir.conf come before the table: a provider's wrong 5xx made
 * temporary is deferred, not bounced; a reply the table does not know
 * made a quota sends the mail to the backup; weir check-config --reply
 * names the rule with its line, and where the mail goes.  The old code
 * refused the key (weir-send does not start). */
Test(replies, upstream_rules_come_first)
{
	const char *ra = "a@dst.example", *rq = "q@dst.example";
	const char *flags[] = { "--reply", "rcpt:a@dst.example=550 5.7.1 Unfortunately, try later",
		"--reply", "rcpt:q@dst.example=554 5.7.0 Your account reached its limit", NULL };
	const char *args[] = { "-c", t.s.qt.conf, "check-config", "--reply",
		"554 5.7.0 Your account reached its limit" };
	struct tl_result r;
	struct rt_rec ri, rb;
	char *where;

	rt_upstream_start(&t, "good", flags, 0);
	rt_peer_start(&t, &b, "backup", NULL, 0);
	rt_conf_upstream_at(&t, "isp", t.port, "  fallback = {\"backup\"}\n"
	    "  reply_rules = {\"temporary: 550 5.7.1 *try later*\",\n"
	    "                 \"quota: 554 5.7.0 *reached its limit*\"}\n");
	rt_conf_upstream_at(&t, "backup", b.port, "");
	rt_policy(&t, "upstream \"isp\" { rate = {\"10 per 1s\"} }\n"
	    "upstream \"backup\" { rate = {\"10 per 1s\"} }\n");
	r = rt_run(&t, "weir", args, 5, NULL);
	cr_assert_eq(r.status, 0, "%s%s", buf_cstr(&r.out), buf_cstr(&r.err));
	where = xasprintf("%s:", t.s.qt.conf);
	cr_assert(strstr(buf_cstr(&r.out), "at banner, ehlo, auth, mail, rcpt, data, dot: quota: "
	    "suspends the upstream for its quota"), "%s", buf_cstr(&r.out));
	cr_assert(strstr(buf_cstr(&r.out), "fallback_when \"quota\" sends its mail on to "
	    "\"backup\" -- "), "%s", buf_cstr(&r.out));
	cr_assert(strstr(buf_cstr(&r.out), where), "%s", buf_cstr(&r.out));
	cr_assert(strstr(buf_cstr(&r.out), ": reply_rules \"quota: 554 5.7.0 *reached its limit*\""),
	    "%s", buf_cstr(&r.out));
	tl_result_free(&r);
	free(where);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, &ra, 1, "Subject: wrong 5xx\n\nbody\n");
	rt_wait_log(&t, "deferred <a@dst.example>", 1, 30000);
	rt_sendmail(&t, SENDER, &rq, 1, "Subject: quota\n\nbody\n");
	cr_assert(rt_wait(rt_peer_ndata_at_least, &t, &(struct rt_peer_count){ &b, 1 }, 30000),
	    "q never reached the backup:\n%s", rt_send_logs_tail(&t, 3000));
	rt_rec_load(&t, &ri);
	rt_rec_load_file(b.record, &rb);
	cr_assert_eq(ri.n, 0);
	cr_assert_eq(rt_rec_count(&rb, NULL, rq), 1);
	rt_assert_no_bounce(&t, &rb);
	rt_rec_free(&ri);
	rt_rec_free(&rb);
}
