/*
 * send_notes_test.c: weir's own notes (sched/S/N, sched/alive): the
 * waiting credit carried across restarts and kept out of the message's
 * age, leftover and malformed notes; and the delay warning they mark
 * (once, only when due, retried when it could not be queued).
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
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/timefmt.h"
#include "mail/schedfile.h"
#include "send_fixture.h"

TestSuite(send_notes, .init = sf_setup, .fini = sf_teardown, .timeout = 120);

/* ---- the waiting credit ---- */

#define WEEK (7 * 86400LL)

static long long
birth_of(unsigned long id)
{
	char *ip = sh_qpath(&sf.s, Q_INFO, id);
	long long b = (long long)sh_mtime(ip);

	free(ip);
	return b;
}

/* Its id in the log (mail/queue.h), from info/'s mtime. */
static char *
qid_of(unsigned long id)
{
	char *ip = sh_qpath(&sf.s, Q_INFO, id), qid[QUEUE_ID_MAX];
	struct stat st;

	cr_assert(stat(ip, &st) == 0, "stat %s: %s", ip, strerror(errno));
	free(ip);
	return xstrdup(queue_msgid(qid, id, &st.st_mtim));
}

static char *
note_path(unsigned long id)
{
	return xasprintf("%s/sched/%lu/%lu", sf.s.qt.qdir, id % 23, id);
}

static void
make_sched_dirs(void)
{
	char *p = xasprintf("%s/sched", sf.s.qt.qdir);
	unsigned k;

	cr_assert(mkdir(p, 0700) == 0 || errno == EEXIST, "mkdir %s", p);
	for (k = 0; k < 23; k++) {
		char *sub = xasprintf("%s/%u", p, k);

		cr_assert(mkdir(sub, 0700) == 0 || errno == EEXIST, "mkdir %s", sub);
		free(sub);
	}
	free(p);
}

static void
write_note(unsigned long id, long long birth, long long waited, long long since, long long warned)
{
	struct schednote n = { birth, waited, since, warned };
	struct buf b = BUF_INIT;
	char *p = note_path(id);

	make_sched_dirs();
	schedfile_format(&n, &b);
	tl_write(p, b.s, b.len);
	buf_free(&b);
	free(p);
}

/* Read id's note; 0 if there is none. */
static int
read_note(unsigned long id, struct schednote *n)
{
	char *p = note_path(id);
	struct buf b = BUF_INIT, why = BUF_INIT;
	int r = 0;

	if (access(p, F_OK) == 0) {
		tl_read(p, &b);
		cr_assert(schedfile_parse(buf_cstr(&b), b.len, n, &why) == 0, "%s: %s: \"%s\"", p,
		    buf_cstr(&why), buf_cstr(&b));
		r = 1;
	}
	buf_free(&b);
	buf_free(&why);
	free(p);
	return r;
}

static long long
read_alive(void)
{
	char *p = xasprintf("%s/sched/alive", sf.s.qt.qdir);
	struct buf b = BUF_INIT;
	long long t = 0;

	tl_read(p, &b);
	cr_assert(schedfile_parse_alive(buf_cstr(&b), b.len, &t) == 0, "sched/alive: \"%s\"",
	    buf_cstr(&b));
	buf_free(&b);
	free(p);
	return t;
}

/* id's line of sched/waits: 1 and *w, or 0 (no file, or no line). */
static int
read_wait(unsigned long id, struct schedwait *w)
{
	char *p = xasprintf("%s/sched/waits", sf.s.qt.qdir);
	struct buf b = BUF_INIT, why = BUF_INIT;
	struct schedwait *v;
	const struct schedwait *f;
	size_t n;
	int r = 0;

	if (access(p, F_OK) == 0) {
		tl_read(p, &b);
		cr_assert(schedfile_parse_waits(b.s, b.len, &v, &n, &why) == 0, "%s: %s", p,
		    buf_cstr(&why));
		if ((f = schedfile_find_wait(v, n, id)) != NULL) {
			*w = *f;
			r = 1;
		}
		free(v);
	}
	buf_free(&b);
	buf_free(&why);
	free(p);
	return r;
}

static void
write_waits(const char *lines)
{
	char *p = xasprintf("%s/sched/waits", sf.s.qt.qdir);

	make_sched_dirs();
	tl_write(p, lines, strlen(lines));
	free(p);
}

static void
write_alive(long long t)
{
	char *p = xasprintf("%s/sched/alive", sf.s.qt.qdir), *v = xasprintf("%lld\n", t);

	make_sched_dirs();
	tl_write(p, v, strlen(v));
	free(p);
	free(v);
}

static char *
delivered_msg(size_t i)
{
	char *mp = xasprintf("%s/msg.%zu", sf.s.qt.tmp, i);
	struct buf b = BUF_INIT;

	tl_read(mp, &b);
	free(mp);
	return b.s ? b.s : xstrdup("");
}

/* weir-send's log says s seconds of qid's waiting were carried over. */
static void
assert_carried(const char *qid, long long secs)
{
	char *line = xasprintf("msg %s: %lld s of waiting carried over\n", qid, secs);

	cr_assert(sf_log_has(line), "no \"%s\":\n%s", line, sf_send_log(&sf.d1));
	free(line);
}

/* A note says the message waited 600 s, or waited from 900 s ago until
 * sched/alive said weir-send last ran 300 s ago: either way it is not
 * yet past queue_lifetime (7d + 300 s old) and a temporary refusal does
 * not bounce it.  A note left by an earlier message with the same id
 * (another birth) is ignored and removed: that one bounces. */
Test(send_notes, credit_from_note_keeps_message_alive)
{
	unsigned long a, b, c;
	long long now = time(NULL);
	struct schednote n;
	char *line, *cp, *m, *qa, *qb, *qc;
	size_t k;

	a = sf_aged_s5("alice@example.org", S("Tslow1@example.net\0"), WEEK + 300);
	b = sf_aged_s5("alice@example.org", S("Tslow2@example.net\0"), WEEK + 300);
	c = sf_aged_s5("alice@example.org", S("Tslow3@example.net\0"), WEEK + 300);
	write_note(a, birth_of(a), 600, 0, 0);
	write_note(b, birth_of(b), 0, now - 900, 0);
	write_alive(now - 300);
	write_note(c, birth_of(c) - 1, 600, 0, 0);
	qa = qid_of(a);
	qb = qid_of(b);
	qc = qid_of(c);
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(4, 10000);	/* three attempts and slow3's bounce */
	sf_wait_idle("deferred <slow2@example.net>", 1, SF_QUIET, 5000);
	assert_carried(qa, 600);
	assert_carried(qb, 600);
	line = xasprintf("msg %s: removing sched/%lu/%lu, left by an earlier message", qc,
	    c % 23, c);
	cr_assert(sf_log_has(line), "no \"%s\":\n%s", line, sf_send_log(&sf.d1));
	free(line);
	sh_assert_file(&sf.s, Q_REMOTE, a, S("Tslow1@example.net\0"));
	sh_assert_file(&sf.s, Q_REMOTE, b, S("Tslow2@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_BOUNCE, a) && !sh_exists(&sf.s, Q_BOUNCE, b));
	cr_assert(!sh_exists(&sf.s, Q_INFO, c), "slow3 was not bounced:\n%s", sf_send_log(&sf.d1));
	cr_assert_eq(sf_ncalls(), 4, "%zu calls", sf_ncalls());
	/* The bounce is the last call after slow3's, whatever order the
	 * three attempts took. */
	for (k = 0; k < 4; k++) {
		cp = sf_call_env(k);
		if (strcmp(cp, "\talice@example.org") == 0)
			break;
		free(cp);
	}
	cr_assert(k < 4, "no bounce among the calls");
	m = delivered_msg(k);
	cr_assert(strstr(m, "Final-Recipient: rfc822; slow3@example.net\nAction: failed\n"), "%s", m);
	/* b's open wait is closed now, its credit kept. */
	cr_assert(read_note(b, &n), "b's note is gone");
	cr_assert_eq(n.waited, 600, "b's note: waited %lld\n%s", n.waited, sf_send_log(&sf.d1));
	cr_assert_eq(n.since, 0, "b's note still says it waits (since %lld)", n.since);
	cr_assert_eq(n.birth, birth_of(b));
	sf_assert_queue_sound();
	free(cp);
	free(m);
	free(qa);
	free(qb);
	free(qc);
}

static int
waits_has_open_wait(void *arg)
{
	struct schedwait w;

	return read_wait(*(unsigned long *)arg, &w) && w.since != 0;
}

static int
alive_reached(void *arg)
{
	return read_alive() >= *(long long *)arg;
}

/* The credit across a real restart: a message waits at weir-gate (the
 * window is used up); weir-send lists its open wait in sched/waits at its
 * next sweep, and writes no note of its own for it, not even after the
 * 30 s that once made it write one (a backlog of 10,000 wrote 10,000
 * files).  It is killed, and the next weir-send credits the wait up to
 * sched/alive.  Then the window opens and the message goes; its line
 * goes with it. */
Test(send_notes, credit_survives_restart)
{
	const char *r0[] = { "bob@example.net", NULL }, *r1[] = { "carol@example.net", NULL };
	struct schednote n;
	struct schedwait w;
	unsigned long id;
	long long alive, carried, until;
	char *line, *qa;

	sf_policy("upstream \"up1\" { rate = \"1 per 1h\" }\n"
	    "upstream \"lists\" { rate = \"1 per 1h\" }\nupstream \"main\" { rate = \"1 per 1h\" }\n");
	sf_start_send(&sf.d1, 0);
	sf_inject("alice@example.org", r0, SF_MSG1);
	sf_wait_calls(1, 5000);
	cr_assert(sh_wait_for(sf_log_has, ": end\n", 5000), "%s", sf_send_log(&sf.d1));
	sf_inject("alice@example.org", r1, SF_MSG1);
	cr_assert(sh_wait_for(sf_todo_empty, NULL, 5000));
	id = sf_only_info();
	cr_assert(sh_wait_for(waits_has_open_wait, &id, 20000), "no open wait listed for %lu:\n%s",
	    id, sf_send_log(&sf.d1));
	cr_assert(read_wait(id, &w));
	cr_assert_eq(w.birth, birth_of(id));
	/* Past the 30 s and the sweep after them: still no note. */
	until = w.since + 41;
	cr_assert(sh_wait_for(alive_reached, &until, 60000), "sched/alive stopped at %lld",
	    read_alive());
	cr_assert(!read_note(id, &n), "a note for an open wait: waited %lld since %lld", n.waited,
	    n.since);
	cr_assert(read_wait(id, &w) && w.since != 0, "the open wait left sched/waits");
	shd_kill9(&sf.d1);
	cr_assert_eq(sf_ncalls(), 1, "sent past the gate");
	cr_assert(read_wait(id, &w));
	alive = read_alive();
	carried = w.waited + (alive > w.since ? alive - w.since : 0);
	cr_assert(carried >= 40, "only %lld s to carry over (waits: waited %lld since %lld; alive %lld)",
	    carried, w.waited, w.since, alive);
	sf_start_send(&sf.d1, 0);
	qa = qid_of(id);
	line = xasprintf("msg %s: %lld s of waiting carried over\n", qa, carried);
	cr_assert(sh_wait_for(sf_log_has, line, 5000), "no \"%s\":\n%s", line, sf_send_log(&sf.d1));
	free(line);
	sf_policy("upstream \"up1\" { rate = \"1000 per 1s\" }\n"
	    "upstream \"lists\" { rate = \"1000 per 1s\" }\nupstream \"main\" { rate = \"1000 per 1s\" }\n");
	sf_wait_calls(2, 10000);
	sf_wait_empty(5000);
	cr_assert(sh_wait_for(sf_log_has, ": end\n", 5000));
	cr_assert(!read_note(id, &n), "the note outlived its message");
	sf_assert_queue_sound();
	free(qa);
}

/* A line of sched/waits carries its credit as a note does: waited, plus
 * the open wait up to sched/alive.  With both a note and a line the
 * larger credit counts (each is the credit as it was when written); a
 * line left by an earlier message with the same id (another birth)
 * counts nothing: that message bounces. */
Test(send_notes, credit_from_waits_line)
{
	unsigned long a, b, c;
	long long now = time(NULL);
	char *lines, *qa, *qb;

	a = sf_aged_s5("alice@example.org", S("Tslow1@example.net\0"), WEEK + 300);
	b = sf_aged_s5("alice@example.org", S("Tslow2@example.net\0"), WEEK + 300);
	c = sf_aged_s5("alice@example.org", S("Tslow3@example.net\0"), WEEK + 300);
	write_note(b, birth_of(b), 700, 0, 0);
	lines = xasprintf("%lu %lld 100 %lld\n%lu %lld 100 %lld\n%lu %lld 600 0\n",
	    a, birth_of(a), now - 800, b, birth_of(b), now - 500, c, birth_of(c) - 1);
	write_waits(lines);
	write_alive(now - 300);
	qa = qid_of(a);
	qb = qid_of(b);
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(4, 10000);	/* three attempts and slow3's bounce */
	sf_wait_idle("deferred <slow2@example.net>", 1, SF_QUIET, 5000);
	assert_carried(qa, 600);
	assert_carried(qb, 700);
	sh_assert_file(&sf.s, Q_REMOTE, a, S("Tslow1@example.net\0"));
	sh_assert_file(&sf.s, Q_REMOTE, b, S("Tslow2@example.net\0"));
	cr_assert(!sh_exists(&sf.s, Q_INFO, c), "slow3 was not bounced:\n%s", sf_send_log(&sf.d1));
	sf_assert_queue_sound();
	free(lines);
	free(qa);
	free(qb);
}

/* A note whose message is gone is removed by the cleanup at start;
 * queue-check reports a malformed note (notes are not fsynced: a power
 * cut can leave one so) as a note, not a problem. */
Test(send_notes, note_leftover_and_malformed)
{
	struct buf out = BUF_INIT;
	char *p = note_path(4242), *bad;
	const char *rcpts[] = { "slow@example.net", NULL };
	unsigned long id;

	write_note(4242, 1700000000, 5, 0, 0);
	sf_start_send(&sf.d1, 0);
	cr_assert(sh_wait_for(sf_log_has, "removed sched/", 5000), "%s", sf_send_log(&sf.d1));
	cr_assert(access(p, F_OK) != 0, "%s is still there", p);
	sf_assert_queue_sound();
	/* A message deferred: then a broken note for it is reported. */
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	cr_assert(sh_wait_for(sf_log_has, "deferred <slow@example.net>", 5000), "%s", sf_send_log(&sf.d1));
	shd_stop(&sf.d1);
	id = sf_only_info();
	bad = note_path(id);
	tl_write(bad, "birth 1\nwaited x\n", 17);
	cr_assert_eq(sh_queue_check(&sf.s, &out), 0, "queue-check failed a malformed note:\n%s",
	    buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), "line 2") && strstr(buf_cstr(&out), "weir-send replaces it"),
	    "%s", buf_cstr(&out));
	/* weir-send takes an unreadable note as "no credit, warned", and
	 * writes it so. */
	sf_start_send(&sf.d1, 0);
	cr_assert(sh_wait_for(sf_log_has, "is malformed", 5000), "%s", sf_send_log(&sf.d1));
	{
		struct schednote n;

		cr_assert(read_note(id, &n), "no note");
		cr_assert(n.warned != 0 && n.waited == 0 && n.birth == birth_of(id),
		    "note: warned %lld waited %lld", n.warned, n.waited);
	}
	sf_assert_queue_sound();
	buf_free(&out);
	free(p);
	free(bad);
}

/* ---- the delay warning ---- */

/* One warning, at the first temporary refusal after delay_warning: every
 * pending recipient (the refused one with its reply, the one not tried
 * yet), none delivered; Action: delayed, Will-Retry-Until the end of the
 * lifetime.  Never a second one: not at the next refusal, not after a
 * kill -9 and restart. */
Test(send_notes, delay_warning_once)
{
	unsigned long id;
	struct schednote n;
	char *m, *e, date[DATE_RFC5322_MAX], *want;
	int k, found = 0;
	size_t warning;

	sf_teardown();
	sf_setup_with("delay_warning = \"1h\"\n"
	    "upstream \"up1\" {\n  host = \"127.0.0.1\"\n  port = 2525\n  tls = \"none\"\n"
	    "  max_recipients = 2\n}\n");
	id = sf_aged_s5("alice@example.org", S("Tslow@example.net\0Tok@example.net\0Tlater@example.net\0"),
	    2 * 3600);
	sf_start_send(&sf.d1, 0);
	/* The pass: (slow, ok), then (later); the warning, queued when the
	 * first batch came back, races with the second batch. */
	sf_wait_calls(3, 10000);
	e = sf_call_env(0);
	cr_assert_str_eq(e, "alice@example.org\tslow@example.net,ok@example.net");
	free(e);
	e = sf_call_env(1);
	warning = strcmp(e, "\talice@example.org") == 0 ? 1 : 2;
	free(e);
	e = sf_call_env(3 - warning);
	cr_assert_str_eq(e, "alice@example.org\tlater@example.net");
	free(e);
	e = sf_call_env(warning);
	cr_assert_str_eq(e, "\talice@example.org", "the warning went to: %s", e);
	free(e);
	m = delivered_msg(warning);
	cr_assert(strstr(m, "\nTo: alice@example.org\n"), "%s", m);
	cr_assert(strstr(m, "\nSubject: delivery delayed (still trying)\n"), "%s", m);
	cr_assert(strstr(m, "report-type=delivery-status"), "%s", m);
	cr_assert(strstr(m, "\nFinal-Recipient: rfc822; slow@example.net\nAction: delayed\n"
	    "Status: 4.2.1\nDiagnostic-Code: smtp; 127.0.0.1 does not like recipient. Remote host "
	    "said: 451 4.2.1 try later\nWill-Retry-Until: "), "%s", m);
	cr_assert(strstr(m, "\nFinal-Recipient: rfc822; later@example.net\nAction: delayed\n"
	    "Status: 4.0.0\nWill-Retry-Until: "), "%s", m);
	cr_assert(strstr(m, "<later@example.net>:\nNo reply yet"), "%s", m);
	cr_assert(!strstr(m, "ok@example.net"), "a delivered recipient is listed:\n%s", m);
	cr_assert(strstr(m, "\nSubject: aged\n"), "no original header:\n%s", m);
	/* Will-Retry-Until: birth + queue_lifetime (+ the few seconds waited). */
	for (k = 0; k < 5 && !found; k++) {
		date_rfc5322(date, (time_t)(birth_of(id) + WEEK + k));
		want = xasprintf("Will-Retry-Until: %s\n", date);
		found = strstr(m, want) != NULL;
		free(want);
	}
	cr_assert(found, "Will-Retry-Until is not the end of the lifetime:\n%s", m);
	free(m);
	cr_assert(read_note(id, &n) && n.warned != 0, "no durable mark");
	cr_assert_eq(sf_count_in_log("delay warning to <alice@example.org> queued"), 1);
	/* The next refusal: no second warning. */
	cr_assert(sh_wait_for(sf_log_has, "delivered to <later@example.net>", 5000));
	sf_run_flush();
	sf_wait_calls(4, 5000);
	e = sf_call_env(3);
	cr_assert_str_eq(e, "alice@example.org\tslow@example.net");
	free(e);
	sf_wait_idle("deferred <slow@example.net>", 2, SF_QUIET, 5000);
	cr_assert_eq(sf_ncalls(), 4, "a second warning? %zu calls", sf_ncalls());
	/* kill -9 and restart: tried at once, refused, still no warning. */
	shd_kill9(&sf.d1);
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(5, 5000);
	sf_wait_idle("deferred <slow@example.net>", 1, SF_QUIET, 5000);
	cr_assert_eq(sf_ncalls(), 5, "a second warning after a restart? %zu calls", sf_ncalls());
	cr_assert_eq(sf_count_in_log("delay warning"), 0, "%s", sf_send_log(&sf.d1));
	sf_assert_queue_sound();
}

/* Of six messages refused alike, only the one that is a plain message,
 * old enough once its waits are taken off, gets a warning: not a bounce
 * (<>), not a double bounce (<#@[]>), not one queued 30 minutes ago, not
 * one that waited 90 of its 120 minutes. */
Test(send_notes, delay_warning_only_when_due)
{
	unsigned long old;
	unsigned long w;
	char *line, *qa;

	sf_teardown();
	sf_setup_with("delay_warning = \"1h\"\n" SF_UP1);
	sf_aged_s5("", S("Tslow@example.net\0"), 2 * 3600);
	sf_aged_s5("#@[]", S("Tslow@example.net\0"), 2 * 3600);
	sf_aged_s5("alice@example.org", S("Tslow@example.net\0"), 1800);
	w = sf_aged_s5("alice@example.org", S("Tslow@example.net\0"), 2 * 3600);
	write_note(w, birth_of(w), 5400, 0, 0);
	old = sf_aged_s5("old@example.org", S("Tslow@example.net\0"), 2 * 3600);
	qa = qid_of(w);
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(6, 10000);	/* five attempts, one warning */
	sf_wait_idle("delay warning to <old@example.org> queued", 1, SF_QUIET, 5000);
	cr_assert_eq(sf_count_in_log("deferred <slow@example.net>"), 5, "%s", sf_send_log(&sf.d1));
	cr_assert_eq(sf_count_in_log("delay warning"), 1, "%s", sf_send_log(&sf.d1));
	cr_assert_eq(sf_ncalls(), 6, "%zu calls", sf_ncalls());
	line = xasprintf("msg %s: 5400 s of waiting carried over", qa);
	cr_assert(sf_log_has(line), "%s", sf_send_log(&sf.d1));
	free(line);
	(void)old;
	sf_assert_queue_sound();
	free(qa);
}

/* The warning cannot be queued: the mark is taken back, and the next
 * refusal sends it. */
Test(send_notes, delay_warning_retried_when_not_queued)
{
	char *flag, *e_qq;
	const char *env[] = { NULL, NULL, NULL, NULL };
	struct schednote n;
	unsigned long id;

	sf_teardown();
	sf_setup_with("delay_warning = \"1h\"\n" SF_UP1);
	e_qq = sf_failing_qq(&flag);
	env[0] = sf.env_remote;
	env[1] = e_qq;
	env[2] = sf.env_conf;
	id = sf_aged_s5("alice@example.org", S("Tslow@example.net\0"), 2 * 3600);
	shd_start(&sf.d1, &sf.s, env);
	sf_wait_idle("delay warning to <alice@example.org> not queued", 1, SF_QUIET, 10000);
	cr_assert(read_note(id, &n), "no note");
	cr_assert_eq(n.warned, 0, "the mark stayed although no warning was queued");
	cr_assert_eq(sf_ncalls(), 1);
	cr_assert(unlink(flag) == 0);
	sf_run_flush();
	cr_assert(sh_wait_for(sf_log_has, "delay warning to <alice@example.org> queued", 10000),
	    "%s", sf_send_log(&sf.d1));
	sf_wait_calls(3, 5000);
	{
		char *e = sf_call_env(2);

		cr_assert_str_eq(e, "\talice@example.org");
		free(e);
	}
	free(flag);
	free(e_qq);
}
