/*
 * queuectl_test.c: the operator's queue control, `weir hold`, release,
 * delete, requeue (src/weir/control.c, src/send/control.c,
 * src/mail/qctl.c), with the real weir-gate, weir-send, weir-remote and
 * the stand-in upstream (relay_helpers.h).  queue-check is clean after
 * every command.
 *
 *   stopped_then_running   weir-send stopped: hold and delete act on the
 *                          queue at once (todo/ messages); at its start the
 *                          held one stays, the deleted one never goes, the
 *                          other is delivered; release (running) sends it
 *   held_survives_restart  a held message 8 days old: not tried, not
 *                          bounced across a kill -9 of weir-send; released,
 *                          its refusal is a deferral, not an expiry (the
 *                          held time is not age)
 *   delete_mid_send        delete of a message whose delivery hangs after
 *                          the final dot waits (the request stays, the
 *                          message whole), and is done when the delivery
 *                          ends; delete --from and requeue while running
 *   resume_lifts_suspension  `weir resume isp` after a 421: weir-gate lifts
 *                          the suspension and logs it; an unknown upstream
 *                          is refused (exit 1)
 *   queue_check_on_a_live_queue  queue-check again and again while 120
 *                          messages go in, through and out: no problem
 *                          in any run
 *
 * Trusts: the processes the test started.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

#define SENDER "alice@src.example"

TestSuite(queuectl, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 120);

static const char policy_fast[] = "upstream \"isp\" { rate = {\"10 per 1s\"} }\n";

/* `weir -c CONF verb [-w 30] args...`: its exit code, its output in out. */
static int
weir(struct buf *out, const char *verb, const char *a1, const char *a2)
{
	const char *args[] = { "-c", t.s.qt.conf, verb, "-w", "30", a1, a2 };
	size_t n = a2 ? 7 : a1 ? 6 : 5;
	struct tl_result r = rt_run(&t, "weir", args, n, NULL);
	int st = r.status;

	buf_reset(out);
	buf_add(out, buf_cstr(&r.out), r.out.len);
	buf_add(out, buf_cstr(&r.err), r.err.len);
	buf_add(out, "", 0);
	out->len--;
	tl_result_free(&r);
	return st;
}

static int
held_file(unsigned long id)
{
	char *p = xasprintf("%s/hold/%lu", t.s.qt.qdir, id);
	int r = access(p, F_OK) == 0;

	free(p);
	return r;
}

/* The id of the message to rcpt, from `weir queue`'s "#ID" before the
 * address (weir-send may be stopped: todo/ is listed too). */
static unsigned long
id_of(const char *rcpt)
{
	const char *args[] = { "-c", t.s.qt.conf, "queue" };
	struct tl_result res = rt_run(&t, "weir", args, 3, NULL);
	char *mq = xstrdup(buf_cstr(&res.out)), *p = strstr(mq, rcpt), *h;
	unsigned long id = 0;

	tl_result_free(&res);
	cr_assert(p, "<%s> not in mailq:\n%s", rcpt, mq);
	*p = '\0';
	h = strrchr(mq, '#');
	cr_assert(h);
	id = strtoul(h + 1, NULL, 10);
	free(mq);
	return id;
}

static char *
idstr(unsigned long id)
{
	return xasprintf("%lu", id);
}

/* ---- 1. weir-send stopped, then running ---- */

Test(queuectl, stopped_then_running)
{
	const char *a[] = { "keep@dest.example" }, *b[] = { "gone@dest.example" },
	    *c[] = { "go@dest.example" };
	struct buf out = BUF_INIT;
	unsigned long ia, ib;
	char *sa, *sb;
	struct rt_rec r;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, policy_fast);
	rt_sendmail(&t, SENDER, a, 1, "Subject: keep\n\nkeep\n");
	rt_sendmail(&t, SENDER, b, 1, "Subject: gone\n\ngone\n");
	rt_sendmail(&t, SENDER, c, 1, "Subject: go\n\ngo\n");
	ia = id_of("keep@dest.example");
	ib = id_of("gone@dest.example");
	sa = idstr(ia);
	sb = idstr(ib);
	/* Stopped: the command holds lock/sendmutex and acts itself. */
	cr_assert_eq(weir(&out, "hold", sa, NULL), 0, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), ": held"), "%s", buf_cstr(&out));
	cr_assert(held_file(ia));
	rt_assert_queue_sound(&t);
	cr_assert_eq(weir(&out, "delete", sb, NULL), 0, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), ": deleted"), "%s", buf_cstr(&out));
	rt_assert_queue_sound(&t);
	cr_assert_eq(weir(&out, "delete", sb, NULL), 1, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), ": no such message"), "%s", buf_cstr(&out));
	/* Running: the held one stays, the deleted one never goes. */
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_wait_log(&t, "delivered to <go@dest.example>", 1, 20000);
	rt_assert_queue_sound(&t);
	cr_assert(held_file(ia));
	cr_assert_eq(rt_mailq_count(rt_mailq(&t)), 1);
	/* Release, weir-send running: it acts, removes the request, sends. */
	cr_assert_eq(weir(&out, "release", sa, NULL), 0, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), ": released"), "%s", buf_cstr(&out));
	rt_wait_empty(&t, 20000);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.n, 2, "%zu transactions", r.n);
	cr_assert_eq(rt_rec_count(&r, SENDER, "keep@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&r, SENDER, "go@dest.example"), 1);
	cr_assert_eq(rt_rec_count(&r, SENDER, "gone@dest.example"), 0);
	rt_assert_no_bounce(&t, &r);
	rt_assert_queue_sound(&t);
	cr_assert(!held_file(ia));
	rt_rec_free(&r);
	buf_free(&out);
	free(sa);
	free(sb);
}

/* ---- 2. a held message survives restarts, is neither sent nor expired ---- */

/* An S5 message to rcpt queued 8 days ago (past the 7-day lifetime),
 * held since a minute after it was queued. */
static unsigned long
old_held(const char *rcpt)
{
	static const char mess[] = "Received: (weir 1 invoked by uid 0); x\nSubject: old\n\nold\n";
	unsigned long id = sh_put_mess(&t.s, mess, sizeof mess - 1);
	time_t birth = time(NULL) - 8 * 86400;
	char *ip, *hp, *hold, rec[256];
	int n;

	n = snprintf(rec, sizeof rec, "T%s", rcpt);
	sh_write(&t.s, Q_INFO, id, "F" SENDER, sizeof SENDER + 1);
	sh_write(&t.s, Q_REMOTE, id, rec, (size_t)n + 1);
	ip = sh_qpath(&t.s, Q_INFO, id);
	sh_set_mtime(ip, birth);
	hp = xasprintf("%s/hold/%lu", t.s.qt.qdir, id);
	hold = xasprintf("birth %lld\nsince %lld\n", (long long)birth, (long long)birth + 60);
	tl_write(hp, hold, strlen(hold));
	free(ip);
	free(hp);
	free(hold);
	return id;
}

Test(queuectl, held_survives_restart)
{
	const char *flags[] = { "--reply", "rcpt:old@dest.example=451 4.2.0 try later", NULL };
	const char *s1[] = { "s1@dest.example" }, *s2[] = { "s2@dest.example" };
	struct buf out = BUF_INIT;
	unsigned long id = old_held("old@dest.example");
	char *sid = idstr(id);
	struct rt_rec r;

	/* Leftovers of a message that is gone (a crash in a delete): notes
	 * for queue-check, removed at weir-send's start. */
	tl_write(xasprintf("%s/hold/4242", t.s.qt.qdir), "birth 1\nsince 2\n", 16);
	tl_write(xasprintf("%s/reply/4242", t.s.qt.qdir), "birth 1\nnext 0\nx@y\0z\n", 21);
	{
		struct buf qc = BUF_INIT;

		cr_assert_eq(sh_queue_check(&t.s, &qc), 0, "%s", buf_cstr(&qc));
		cr_assert(strstr(buf_cstr(&qc), "hold/4242: left by a message that is gone") &&
		    strstr(buf_cstr(&qc), "reply/4242: left by"), "%s", buf_cstr(&qc));
		buf_free(&qc);
	}
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, policy_fast);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	/* A message queued after it is delivered: the held one was due
	 * first, and was not tried. */
	rt_sendmail(&t, SENDER, s1, 1, "Subject: s1\n\ns1\n");
	rt_wait_log(&t, "delivered to <s1@dest.example>", 1, 20000);
	cr_assert(!held_file(4242), "a leftover hold/ file was not cleaned up");
	rt_send_kill9(&t);
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, s2, 1, "Subject: s2\n\ns2\n");
	rt_wait_log(&t, "delivered to <s2@dest.example>", 1, 20000);
	rt_rec_load(&t, &r);
	cr_assert_eq(r.nmail, 2, "%zu MAIL commands: the held message was tried", r.nmail);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	cr_assert(sh_exists(&t.s, Q_MESS, id) && held_file(id));
	{
		const char *qa[] = { "-c", t.s.qt.conf, "queue" };
		struct tl_result l = rt_run(&t, "weir", qa, 3, NULL);

		cr_assert(strstr(buf_cstr(&l.out), "<" SENDER ">  held\n"), "%s", buf_cstr(&l.out));
		tl_result_free(&l);
	}
	cr_assert_eq(weir(&out, "requeue", sid, NULL), 1, "%s", buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), "held: release it"), "%s", buf_cstr(&out));
	rt_assert_queue_sound(&t);
	/* Released: tried now; the refusal defers it (8 days old, but held
	 * for all but a minute of them: not expired). */
	cr_assert_eq(weir(&out, "release", sid, NULL), 0, "%s", buf_cstr(&out));
	rt_wait_log(&t, "deferred <old@dest.example>", 1, 20000);
	rt_rec_load(&t, &r);
	rt_assert_no_bounce(&t, &r);
	rt_rec_free(&r);
	cr_assert(sh_exists(&t.s, Q_MESS, id) && !held_file(id));
	rt_assert_queue_sound(&t);
	/* The listings give the last reply and the next attempt. */
	{
		const char *qa[] = { "-c", t.s.qt.conf, "queue" };
		const char *qj[] = { "-c", t.s.qt.conf, "queue", "--json" };
		struct tl_result l = rt_run(&t, "weir", qa, 3, NULL);

		cr_assert(strstr(buf_cstr(&l.out), "\tremote\told@dest.example\n\t\t(") &&
		    strstr(buf_cstr(&l.out), "451 4.2.0 try later") &&
		    strstr(buf_cstr(&l.out), ">  next "), "%s", buf_cstr(&l.out));
		tl_result_free(&l);
		l = rt_run(&t, "weir", qj, 4, NULL);
		cr_assert(strstr(buf_cstr(&l.out), "\"held\":false,\"next_attempt\":\"20") &&
		    strstr(buf_cstr(&l.out), "\"delay_reason\":\"") &&
		    strstr(buf_cstr(&l.out), "451 4.2.0 try later"), "%s", buf_cstr(&l.out));
		tl_result_free(&l);
	}
	buf_free(&out);
	free(sid);
}

/* ---- 3. delete of a message being sent; delete --from, requeue ---- */

static int
deliverer_running(struct rt *rt, void *arg)
{
	(void)arg;
	return rt_deliverers(rt, 0, NULL, 0) > 0 && rt_log_count(rt, "delivering to") > 0;
}

Test(queuectl, delete_mid_send)
{
	const char *flags[] = { "--hang", "dataend", NULL };
	const char *a[] = { "stuck@dest.example" };
	struct buf out = BUF_INIT;
	const char *args[] = { "-c", t.s.qt.conf, "delete", "-w", "2", NULL };
	struct tl_result res;
	unsigned long id;
	unsigned port;
	char *sid;

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "  timeout_data_end = \"60s\"\n");
	rt_policy(&t, policy_fast);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, a, 1, "Subject: stuck\n\nstuck\n");
	cr_assert(rt_wait(deliverer_running, &t, NULL, 20000), "no delivery started");
	id = id_of("stuck@dest.example");
	sid = idstr(id);
	args[5] = sid;
	/* The deliverer is past the final dot, waiting for the reply. */
	res = rt_run(&t, "weir", args, 6, NULL);
	cr_assert_eq(res.status, 1, "exit %d: %s%s", res.status, buf_cstr(&res.out),
	    buf_cstr(&res.err));
	cr_assert(strstr(buf_cstr(&res.out), "the request stays"), "%s", buf_cstr(&res.out));
	tl_result_free(&res);
	/* Whole: nothing removed under the deliverer. */
	cr_assert(sh_exists(&t.s, Q_MESS, id) && sh_exists(&t.s, Q_INFO, id) &&
	    sh_exists(&t.s, Q_REMOTE, id));
	rt_assert_queue_sound(&t);
	cr_assert(rt_logged(&t, "delete waits for the attempt in flight", 1, 5000));
	/* The delivery ends (the upstream goes away): the delete is done. */
	port = t.port;
	rt_upstream_stop(&t);
	rt_wait_log(&t, "deleted by the operator", 1, 30000);
	cr_assert(!sh_exists(&t.s, Q_MESS, id));
	rt_assert_queue_sound(&t);
	/* An upstream that defers: delete --from and requeue while running. */
	{
		const char *f2[] = { "--reply", "rcpt=451 4.2.0 try later", NULL };
		const char *b[] = { "b@dest.example" }, *c[] = { "c@dest.example" };
		struct rt_rec r;
		size_t before;
		char *sc;

		rt_upstream_start(&t, "good", f2, port);
		rt_sendmail(&t, "bob@other.example", b, 1, "Subject: b\n\nb\n");
		rt_sendmail(&t, SENDER, c, 1, "Subject: c\n\nc\n");
		rt_wait_log(&t, "deferred <b@dest.example>", 1, 20000);
		rt_wait_log(&t, "deferred <c@dest.example>", 1, 20000);
		cr_assert_eq(weir(&out, "delete", "--from", "BOB@*"), 0, "%s", buf_cstr(&out));
		cr_assert(strstr(buf_cstr(&out), ": deleted"), "%s", buf_cstr(&out));
		rt_assert_queue_sound(&t);
		cr_assert_eq(rt_mailq_count(rt_mailq(&t)), 1);
		sc = idstr(id_of("c@dest.example"));
		before = rt_log_count(&t, "deferred <c@dest.example>");
		cr_assert_eq(weir(&out, "requeue", sc, NULL), 0, "%s", buf_cstr(&out));
		rt_wait_log(&t, "deferred <c@dest.example>", before + 1, 20000);
		rt_rec_load(&t, &r);
		rt_assert_no_bounce(&t, &r);
		rt_rec_free(&r);
		cr_assert_eq(weir(&out, "delete", "--all", NULL), 0, "%s", buf_cstr(&out));
		rt_assert_queue_sound(&t);
		cr_assert_eq(rt_mailq_count(rt_mailq(&t)), 0);
		free(sc);
	}
	buf_free(&out);
	free(sid);
}

/* ---- 4. resume: a suspension lifted early ---- */

Test(queuectl, resume_lifts_suspension)
{
	const char *flags[] = { "--reply", "mail=421 4.7.0 too many messages, slow down", NULL };
	const char *a[] = { "r@dest.example" };
	char *st;

	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, policy_fast);
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rt_sendmail(&t, SENDER, a, 1, "Subject: r\n\nr\n");
	rt_wait_log(&t, "deferred <r@dest.example>", 1, 20000);
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "suspended"), "not suspended:\n%s", st);
	free(st);
	{
		const char *args[] = { "-c", t.s.qt.conf, "resume", "nosuch" };
		struct tl_result r = rt_run(&t, "weir", args, 4, NULL);

		cr_assert_eq(r.status, 1, "exit %d: %s%s", r.status, buf_cstr(&r.out),
		    buf_cstr(&r.err));
		tl_result_free(&r);
		args[3] = "isp";
		r = rt_run(&t, "weir", args, 4, NULL);
		cr_assert_eq(r.status, 0, "exit %d: %s%s", r.status, buf_cstr(&r.out),
		    buf_cstr(&r.err));
		cr_assert(strstr(buf_cstr(&r.out), "upstream isp: suspensions lifted"), "%s",
		    buf_cstr(&r.out));
		tl_result_free(&r);
	}
	st = rt_gate_status(&t);
	cr_assert(strstr(st, "suspended") == NULL, "still suspended:\n%s", st);
	free(st);
	st = xasprintf("%s", t.gate_log);
	{
		struct buf gl = BUF_INIT;

		tl_read(st, &gl);
		cr_assert(strstr(buf_cstr(&gl), "upstream isp: suspensions lifted (resume)"), "%s",
		    buf_cstr(&gl));
		buf_free(&gl);
	}
	free(st);
}

/* ---- 5. queue-check on a live queue ---- */

/*
 * queue-check while mail goes in, is preprocessed, delivered and removed:
 * a shell injects 120 messages through sendmail one after another, and
 * queue-check runs again and again meanwhile.  Every run must find no
 * problem: a folder listed before a message's preprocessing and another
 * after it, or a file removed between its folder's listing and its own
 * reading, is weir-send at work, not a broken queue.
 */
Test(queuectl, queue_check_on_a_live_queue)
{
	static const char script[] =
	    "i=0; while [ $i -lt 120 ]; do "
	    "printf 'Subject: live %s\\n\\nhello\\n' $i | \"$1\" -f " SENDER " live$i@dest.example "
	    "|| exit 1; i=$((i + 1)); done";
	char *sm = tl_bin("sendmail");
	const char *argv[] = { "/bin/sh", "-c", script, "sh", sm, NULL };
	const char *env[12];
	struct buf out = BUF_INIT;
	size_t k = 0, runs = 0;
	pid_t pid;
	int st = -1, code;

	rt_upstream_start(&t, "good", NULL, 0);
	rt_conf_upstream(&t, NULL);
	rt_policy(&t, "upstream \"isp\" { rate = {\"40 per 1s\"} }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	env[k++] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	for (size_t i = 0; i < 8 && t.s.qt.envs[i]; i++)
		env[k++] = t.s.qt.envs[i];
	env[k] = NULL;
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execve(argv[0], (char *const *)argv, (char *const *)env);
		_exit(127);
	}
	for (;;) {
		int done = waitpid(pid, &st, WNOHANG) == pid;

		code = sh_queue_check(&t.s, &out);
		runs++;
		cr_assert(code == 0 && strstr(buf_cstr(&out), " 0 problems"),
		    "queue-check run %zu on the live queue: exit %d\n%s", runs, code,
		    buf_cstr(&out));
		if (done)
			break;
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the injecting shell: 0x%x", st);
	rt_wait_empty(&t, 60000);
	rt_assert_queue_sound(&t);
	cr_log_info("queue-check ran %zu times on the live queue", runs);
	buf_free(&out);
	free(sm);
}
