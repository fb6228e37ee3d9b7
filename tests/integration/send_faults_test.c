/*
 * send_faults_test.c: weir-send under faults.  kill -9 while delivering
 * and at many instants, then a restart (every recipient and bounce
 * delivered at least once, the queue sound); a second weir-send refused;
 * failing system calls through the fault shim ($WEIR_FAULTINJ:
 * bounce/ unwritable, the D mark's fdatasync, preprocessing, tried again
 * 30 s after a full disk) and the order of the durable steps (the shim's
 * call log).
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_fixture.h"

TestSuite(send_faults, .init = sf_setup, .fini = sf_teardown, .timeout = 120);

/* ---- crashes of weir-send itself ---- */

Test(send_faults, kill9_while_delivering_then_restart)
{
	char name[32], *hang = xasprintf("%s/hang", sf.s.qt.tmp);
	const char *rcpts[] = { name, NULL };
	size_t i, n = 6;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		sf_inject("alice@example.org", rcpts, SF_MSG1);
	}
	tl_write(hang, "0.5", 3);
	sf_start_send(&sf.d1, 0);
	sf_wait_calls(1, 5000);
	shd_kill9(&sf.d1);			/* weir-send and the deliverers in flight */
	cr_assert(unlink(hang) == 0);
	sf_start_send(&sf.d1, 0);
	sf_wait_settled(15000);
	sf_assert_all_delivered(n);
	sf_assert_queue_sound();
	free(hang);
}

/* kill -9 at many instants while messages are preprocessed, delivered,
 * bounced and eliminated; every recipient is delivered at least once. */
Test(send_faults, kill9_at_many_instants)
{
	char name[32];
	const char *rcpts[] = { name, "bad@example.net", NULL };
	size_t i, n = 8;
	int k;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		sf_inject("alice@example.org", rcpts, SF_MSG1);
	}
	for (k = 0; k < 12; k++) {
		sf_start_send(&sf.d1, 0);
		/* A little later each time (paced instants, not a wait for an
		 * event): at different steps of what runs. */
		usleep((useconds_t)(k * 15000));
		shd_kill9(&sf.d1);
		sf_assert_queue_sound();
	}
	sf_start_send(&sf.d1, 0);
	sf_wait_settled(30000);
	sf_assert_all_delivered(n);
	/* And every message's bounce (for bad@) reached its sender. */
	{
		size_t c, nb = 0, nc = sf_ncalls();

		for (c = 0; c < nc; c++) {
			char *e = sf_call_env(c);

			nb += strcmp(e, "\talice@example.org") == 0;
			free(e);
		}
		cr_assert(nb >= n, "%zu bounces delivered for %zu messages", nb, n);
	}
	sf_assert_queue_sound();
}

/* ---- one scheduler per queue ---- */

Test(send_faults, second_instance_refused)
{
	const char *env[] = { sf.env_remote, sf.env_qq, sf.env_conf, NULL };
	const char *rcpts[] = { "bob@example.net", NULL };
	char *l2;
	int st, i;

	sf_start_send(&sf.d1, 0);
	shd_start(&sf.d2, &sf.s, env);
	for (i = 0; i < 500 && !shd_exited(&sf.d2, &st); i++)
		usleep(10000);
	cr_assert_eq(sf.d2.pid, 0, "a second weir-send runs on the same queue");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 111, "second weir-send: status 0x%x", st);
	l2 = sf_send_log(&sf.d2);
	cr_assert(strstr(l2, "sendmutex"), "second weir-send said: %s", l2);
	/* The first one still works. */
	cr_assert(!shd_exited(&sf.d1, &st), "the first weir-send died");
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_empty(10000);
	free(l2);
}

/* ---- the order of durable steps (through the fault shim's call log) ---- */

static struct buf flog;

/* Index of the first line at or after from that is "<pid> op ... path=P ..."
 * (P exactly), or -1. */
static long
find_op(long from, const char *op, const char *path)
{
	const char *p = buf_cstr(&flog);
	long i = 0;
	char *pat = xasprintf(" path=%s ", path), *opat = xasprintf(" %s ", op);

	for (; p && *p; i++) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char *line = xstrndup(p, n);
		const char *sp = strchr(line, ' ');

		if (i >= from && sp && strncmp(sp, opat, strlen(opat)) == 0 && strstr(line, pat)) {
			free(line);
			free(pat);
			free(opat);
			return i;
		}
		free(line);
		p = e ? e + 1 : NULL;
	}
	free(pat);
	free(opat);
	return -1;
}

/* a happens, then b after it; returns b's index. */
static long
then(long a, const char *op, const char *path, const char *what)
{
	long b;

	cr_assert(a >= 0, "%s: the step before it never happened", what);
	b = find_op(a + 1, op, path);
	cr_assert(b > a, "%s: no %s %s after line %ld", what, op, path, a);
	return b;
}

Test(send_faults, durable_order_of_steps)
{
	const char *rcpts[] = { "bob@example.net", NULL };
	const char *fi = qt_faultinj();
	char *logp, *e1, *e2, *e3;
	char *todo, *intd, *info, *remote, *mess, *infod, *remoted, *intdd;
	unsigned long *ids, id;
	long i;

	if (fi == NULL) {
		sf_teardown();	/* Criterion runs no .fini after a skip */
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ)");
	}
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	cr_assert_eq(qt_list(&sf.s.qt, "todo", &ids), 1);
	id = ids[0];
	free(ids);
	logp = xasprintf("%s/fault.log", sf.s.qt.tmp);
	e1 = xasprintf("LD_PRELOAD=%s", fi);
	e2 = xasprintf("WEIR_FAULT_LOG=%s", logp);
	e3 = xstrdup("WEIR_FAULT_PROG=weir-send");
	{
		const char *env[] = { sf.env_remote, sf.env_qq, sf.env_conf, e1, e2, e3, NULL };

		shd_start(&sf.d1, &sf.s, env);
	}
	sf_wait_empty(10000);
	shd_stop(&sf.d1);
	tl_read(logp, &flog);
	todo = sh_qpath(&sf.s, Q_TODO, id);
	intd = sh_qpath(&sf.s, Q_INTD, id);
	info = sh_qpath(&sf.s, Q_INFO, id);
	remote = sh_qpath(&sf.s, Q_REMOTE, id);
	mess = sh_qpath(&sf.s, Q_MESS, id);
	intdd = xstrndup(intd, (size_t)(strrchr(intd, '/') - intd));
	infod = xstrndup(info, (size_t)(strrchr(info, '/') - info));
	remoted = xstrndup(remote, (size_t)(strrchr(remote, '/') - remote));

	/* S4 to S5: info and remote durable, their folders too, then intd
	 * gone durably (S5 has no intd), then todo. */
	i = find_op(0, "fsync", info);
	i = then(i, "fsync", remote, "preprocess");
	i = then(i, "fsync", infod, "preprocess");
	i = then(i, "fsync", remoted, "preprocess");
	i = then(i, "unlinkat", intd, "preprocess");
	i = then(i, "fsync", intdd, "preprocess: intd/N's removal durable before todo/N's");
	i = then(i, "unlinkat", todo, "preprocess");
	/* The D mark durable (its data: the bytes are overwritten) before
	 * elimination. */
	i = then(i, "pwrite", remote, "delivery");
	i = then(i, "fdatasync", remote, "delivery");
	/* S5 to S1: remote gone durably before info (S2 has no remote), info
	 * gone durably before mess (no info/ without mess/). */
	i = then(i, "unlinkat", remote, "elimination");
	i = then(i, "fsync", remoted, "elimination: remote/N's removal durable before info/N's");
	i = then(i, "unlinkat", info, "elimination");
	i = then(i, "fsync", infod, "elimination: info/N's removal durable before mess/N's");
	then(i, "unlinkat", mess, "elimination");

	buf_free(&flog);
	free(logp);
	free(e1);
	free(e2);
	free(e3);
	free(todo);
	free(intd);
	free(info);
	free(remote);
	free(mess);
	free(intdd);
	free(infod);
	free(remoted);
}

/* ---- failing system calls in weir-send (the fault shim) ---- */

static void
start_faulty(const char *rules)
{
	const char *fi = qt_faultinj();
	char *e1, *e2, *e3 = xstrdup("WEIR_FAULT_PROG=weir-send");

	if (fi == NULL) {
		free(e3);
		sf_teardown();	/* Criterion runs no .fini after a skip */
		cr_skip_test("no fault-injection shim ($WEIR_FAULTINJ)");
	}
	e1 = xasprintf("LD_PRELOAD=%s", fi);
	e2 = xasprintf("WEIR_FAULT=%s", rules);
	{
		const char *env[] = { sf.env_remote, sf.env_qq, sf.env_conf, e1, e2, e3, NULL };

		shd_start(&sf.d1, &sf.s, env);
	}
	cr_assert(sh_wait_for(sf_log_has, "started on", 5000), "weir-send did not start:\n%s",
	    sf_send_log(&sf.d1));
	free(e1);
	free(e2);
	free(e3);
}

/* bounce/N cannot be written: the failed recipient is not marked done
 * (it will be tried again), the delivered one is. */
Test(send_faults, bounce_note_fails_recipient_not_done)
{
	const char *rcpts[] = { "good@example.net", "bad@example.net", NULL };
	unsigned long id;

	start_faulty("write@/bounce/=1+:ENOSPC");
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(1, 5000);
	sf_wait_idle("write bounce/", 1, SF_QUIET, 5000);
	id = sf_only_info();
	sh_assert_file(&sf.s, Q_REMOTE, id, S("Dgood@example.net\0Tbad@example.net\0"));
	cr_assert_eq(sf_ncalls(), 1);
	sf_assert_queue_sound();
}

/* The D marks cannot be made durable: the message is not eliminated. */
Test(send_faults, mark_fsync_fails_not_eliminated)
{
	const char *rcpts[] = { "good@example.net", NULL };
	unsigned long id;

	/* The D mark's fdatasync (preprocessing fsyncs remote/, the file
	 * and its folder). */
	start_faulty("fdatasync@/remote/=1+:EIO");
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_calls(1, 5000);
	sf_wait_idle("fdatasync", 1, SF_QUIET, 5000);
	id = sf_only_info();
	cr_assert(sh_exists(&sf.s, Q_MESS, id), "mess/ removed");
	cr_assert(sh_exists(&sf.s, Q_REMOTE, id), "remote/ removed");
	cr_assert_eq(sf_ncalls(), 1);
	sf_assert_queue_sound();
}

/* Preprocessing cannot write: todo/ stays, nothing is sent; a healthy
 * restart then delivers. */
Test(send_faults, preprocess_fails_then_restart)
{
	const char *rcpts[] = { "good@example.net", NULL };
	unsigned long *ids;

	start_faulty("write@/info/=1+:ENOSPC");
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	sf_wait_idle("write info/", 1, SF_QUIET, 5000);
	cr_assert_eq(qt_list(&sf.s.qt, "todo", &ids), 1, "todo/ gone after a failed preprocess");
	free(ids);
	cr_assert_eq(sf_ncalls(), 0);
	sf_assert_queue_sound();
	shd_stop(&sf.d1);
	sf_start_send(&sf.d1, 0);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 1);
}

/* The disk is full at preprocessing, then has room again: the message
 * goes within a minute, with no new mail, no flush, no restart.  Before,
 * it waited for the next trigger or the 25-minute rescan. */
Test(send_faults, preprocess_enospc_tried_again_soon)
{
	const char *rcpts[] = { "good@example.net", NULL };
	struct timespec t0, t1;

	start_faulty("write@/info/=1:ENOSPC");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sf_inject("alice@example.org", rcpts, SF_MSG1);
	cr_assert(sh_wait_for(sf_log_has, "write info/", 3000), "%s", sf_send_log(&sf.d1));
	sf_wait_calls(1, 60000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	sf_wait_empty(5000);
	cr_assert_eq(sf_ncalls(), 1);
	cr_assert(t1.tv_sec - t0.tv_sec >= 20, "tried again after %lld s: not the retry timer",
	    (long long)(t1.tv_sec - t0.tv_sec));
	sf_assert_queue_sound();
}
