/*
 * redis_test.c: several real build/bin/weir-gate instances sharing one
 * upstream's windows through a real redis-server (policy.conf's
 * `shared`), started by the test on a Unix socket in its scratch folder
 * without persistence:
 *   - three gates, 10 requests each at once, "5 per 3s": every request is
 *     granted, and no 3-second span of sends (grant received .. report
 *     sent, at the test's clock) holds more than 5;
 *   - Redis stopped: no grant, the log and `status` say so; Redis back
 *     (empty): grants resume;
 *   - Redis restarted empty: a gate writes its own sends back before any
 *     other gate is granted anything;
 *   - leases (-g 0: the shortest, SHARED_LEASE_MIN_MS): a grant held
 *     three leases long by a live gate keeps its slot (the gate renews
 *     it); once that gate is killed, the slot frees one lease (and one
 *     period) later, not an hour later; a gate restarted on its journal
 *     takes over the grants its previous run left held;
 *   - max_connections across hosts with kept sessions' slots, held
 *     longer than a lease while their messages go without one;
 *   - status: weir-gate's (text and JSON) and `weir status` show the
 *     store, and each window as Redis counts it for every host next to
 *     the gate's own count; "unknown" once the store is gone.
 * This is the gate-level test (clients speak the gate protocol and
 * report at once); not through full weir instances and an upstream.
 * Every process started is killed in the fixture's fini and dies with
 * the test (PR_SET_PDEATHSIG).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gate/shared.h"
#include "lib/alloc.h"
#include "lib/jsonparse.h"
#include "mail/gateclient.h"
#include "mail/gatestatus.h"
#include "testlib.h"

#define NGATE 3

static char *dir, *rsock, *policy, *wconf;
static char *gsock[NGATE], *gjournal[NGATE], *glog[NGATE];
static pid_t gpid[NGATE], rpid = -1;
/* Redis servers on loopback TCP (a master and a replica) */
static pid_t tpid[2] = { -1, -1 };
static unsigned tport[2];

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
reap(pid_t *pid)
{
	int st;

	if (*pid <= 0)
		return;
	kill(*pid, SIGKILL);
	while (waitpid(*pid, &st, 0) < 0 && errno == EINTR)
		;
	*pid = -1;
}

/* Run argv with stdout and stderr appended to log; returns its pid. */
static pid_t
spawn(const char *const *argv, const char *log)
{
	pid_t pid = fork();
	int fd;

	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void
wait_sock(const char *path, pid_t pid, const char *log)
{
	int i, st;

	for (i = 0; i < 1000; i++) {
		if (tl_sock_answers(path))
			return;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			struct buf b = BUF_INIT;

			tl_read(log, &b);
			cr_assert_fail("exited before %s answered: %s", path, buf_cstr(&b));
		}
		poll(NULL, 0, 10);
	}
	cr_assert_fail("%s does not answer", path);
}

/* Gate i, with -g grace unless NULL. */
static void
start_gate_g(int i, const char *grace)
{
	char *bin = tl_bin("weir-gate");
	const char *argv[] = { bin, "-c", wconf, "-p", policy, "-s", gsock[i], "-j",
		gjournal[i], grace ? "-g" : NULL, grace, NULL };

	gpid[i] = spawn(argv, glog[i]);
	wait_sock(gsock[i], gpid[i], glog[i]);
	free(bin);
}

static void
start_gate(int i)
{
	start_gate_g(i, NULL);
}

/* The policy: one upstream "up" at rate, shared through store (NULL:
 * the Unix socket's Redis), and extra lines. */
static void
write_policy_at(const char *rate, const char *store, const char *extra)
{
	char *sock = xasprintf("unix:%s", rsock);
	char *text = xasprintf("upstream \"up\" {\n  rate = {\"%s\"}\n  shared = \"%s\"\n%s}\n",
	    rate, store ? store : sock, extra ? extra : "");

	tl_write(policy, text, strlen(text));
	free(text);
	free(sock);
}

static void
write_policy(const char *rate)
{
	write_policy_at(rate, NULL, NULL);
}

static void
setup(void)
{
	int i;

	dir = tl_tmpdir();
	rsock = xasprintf("%s/redis.sock", dir);
	policy = xasprintf("%s/policy.conf", dir);
	wconf = xasprintf("%s/weir.conf", dir);
	tl_write(wconf, "", 0);
	for (i = 0; i < NGATE; i++) {
		gsock[i] = xasprintf("%s/gate%d.sock", dir, i);
		gjournal[i] = xasprintf("%s/journal%d", dir, i);
		glog[i] = xasprintf("%s/gate%d.log", dir, i);
		gpid[i] = -1;
	}
	rpid = tl_redis_start(dir, rsock);
}

static void
teardown(void)
{
	int i;

	for (i = 0; i < NGATE; i++) {
		reap(&gpid[i]);
		free(gsock[i]);
		free(gjournal[i]);
		free(glog[i]);
	}
	reap(&rpid);
	reap(&tpid[0]);
	reap(&tpid[1]);
	tl_rmtree(dir);
	free(dir);
	free(rsock);
	free(policy);
	free(wconf);
}

TestSuite(redis, .init = setup, .fini = teardown, .timeout = 120);

static int
log_has(int i, const char *s)
{
	struct buf b = BUF_INIT;
	int has;

	tl_read(glog[i], &b);
	has = strstr(buf_cstr(&b), s) != NULL;
	buf_free(&b);
	return has;
}

/* How many times gate i's log holds s. */
static size_t
log_count(int i, const char *s)
{
	struct buf b = BUF_INIT;
	size_t n;

	tl_read(glog[i], &b);
	n = tl_count(buf_cstr(&b), s);
	buf_free(&b);
	return n;
}

static void
wait_log(int i, const char *s, int ms)
{
	int64_t end = now_us() + (int64_t)ms * 1000;

	while (!log_has(i, s)) {
		if (now_us() > end) {
			struct buf b = BUF_INIT;

			tl_read(glog[i], &b);
			cr_assert_fail("gate %d never logged \"%s\": %s", i, s, buf_cstr(&b));
		}
		poll(NULL, 0, 20);
	}
}

/* Send one message now: acquire (conns connections: 0 for a kept
 * session's message, its slot held apart), wait for the grant (up to
 * ms), report. */
static int
send_conns(struct gate_client *gc, uint32_t tag, uint32_t conns, int ms)
{
	struct gp_reply r;

	cr_assert_eq(gc_acquire(gc, tag, "up", NULL, NULL, 1, 1, conns), 0);
	if (!tl_gate_reply(gc, &r, ms))
		return 0;
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(gc_report_sent(gc, tag, 1, -1), 0);
	cr_assert_eq(tl_gate_reply(gc, &r, 10000), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	return 1;
}

static int
send_one(struct gate_client *gc, uint32_t tag, int ms)
{
	return send_conns(gc, tag, 1, ms);
}

#define PER_GATE 10
#define LIMIT 5
#define PER_US 3000000LL

Test(redis, three_gates_one_window)
{
	struct gate_client gc[NGATE];
	struct pollfd p[NGATE];
	int64_t start[NGATE * PER_GATE], end[NGATE * PER_GATE], deadline;
	struct gp_reply r;
	const char *why;
	int i, j, n = 0, worst = 0;
	uint32_t t;

	write_policy("5 per 3s");
	for (i = 0; i < NGATE; i++) {
		start_gate(i);
		cr_assert_eq(gc_connect(&gc[i], gsock[i]), 0);
		for (t = 1; t <= PER_GATE; t++)
			cr_assert_eq(gc_acquire(&gc[i], t, "up", NULL, NULL, 1, 1, 1), 0);
		p[i].fd = gc[i].fd;
		p[i].events = POLLIN;
	}
	deadline = now_us() + 60 * 1000000LL;
	while (n < NGATE * PER_GATE && now_us() < deadline) {
		cr_assert(poll(p, NGATE, 1000) >= 0);
		for (i = 0; i < NGATE; i++) {
			if (p[i].revents)
				cr_assert_eq(gc_fill(&gc[i]), 1, "gate %d closed", i);
			while (gc_next_reply(&gc[i], &r, &why) == 1) {
				if (r.verb == GP_R_OK)
					continue;
				cr_assert_eq(r.verb, GP_R_GRANT, "gate %d: verb %d", i, r.verb);
				/* The send's acceptance lies in [grant read, report
				 * written]: the end is taken before the write (after
				 * it, a client put off the CPU there stretched it past
				 * the gate's own log time: seen as "6 within 3 s"). */
				start[n] = now_us();
				end[n++] = now_us();
				cr_assert_eq(gc_report_sent(&gc[i], r.tag, 1, -1), 0);
			}
		}
	}
	cr_assert_eq(n, NGATE * PER_GATE, "only %d of %d granted", n, NGATE * PER_GATE);
	/* The worst span: sends that may have been accepted within 3 s. */
	for (i = 0; i < n; i++) {
		int c = 0;

		for (j = 0; j < n; j++)
			if (start[j] <= start[i] && end[j] > start[i] - PER_US)
				c++;
		if (c > worst)
			worst = c;
	}
	{
		/* How near it came: the shortest span from a send's end to the
		 * start of the LIMIT-th send after it (sorted by start). */
		int64_t v[NGATE * PER_GATE], tmp, near = INT64_MAX;

		memcpy(v, start, sizeof v);
		for (i = 1; i < n; i++)
			for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
				tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp;
			}
		for (i = 0; i + LIMIT < n; i++)
			if (v[i + LIMIT] - v[i] < near)
				near = v[i + LIMIT] - v[i];
		cr_log_info("three gates: nearest %d-apart sends %lld us apart (window %lld us)",
		    LIMIT, (long long)near, PER_US);
	}
	cr_assert_leq(worst, LIMIT, "%d sends within 3 s across the gates", worst);
	/* 30 sends at 5 per 3 s: the last batch goes after 15 s. */
	{
		int64_t first = start[0], last = start[0];

		for (i = 0; i < n; i++) {
			if (start[i] < first)
				first = start[i];
			if (start[i] > last)
				last = start[i];
		}
		cr_assert_geq(last - first, 15 * 1000000LL - 100000, "too fast: %lld us",
		    (long long)(last - first));
	}
	for (i = 0; i < NGATE; i++)
		gc_close(&gc[i]);
}

Test(redis, down_means_no_grant)
{
	struct gate_client gc;
	struct tl_result res;
	char *bin = tl_bin("weir-gate");
	const char *argv[] = { bin, "-c", wconf, "-s", gsock[0], "status", NULL };
	struct tl_run run = { .argv = argv };

	write_policy("100 per 1s");
	start_gate(0);
	cr_assert_eq(gc_connect(&gc, gsock[0]), 0);
	cr_assert_eq(send_one(&gc, 1, 5000), 1);
	reap(&rpid);
	wait_log(0, "unreachable", 5000);
	cr_assert_eq(send_one(&gc, 2, 1500), 0, "granted while Redis is down");
	tl_run(&run, &res);
	cr_assert(strstr(buf_cstr(&res.out), ": UNREACHABLE"), "%s",
	    buf_cstr(&res.out));
	tl_result_free(&res);
	rpid = tl_redis_start(dir, rsock);
	{
		struct gp_reply r;

		cr_assert_eq(tl_gate_reply(&gc, &r, 10000), 1, "no grant after Redis is back");
		cr_assert_eq(r.verb, GP_R_GRANT);
	}
	cr_assert(log_has(0, "answers again"));
	/* Once at its start, once when the store came back. */
	cr_assert_eq(log_count(0, "wrote back this host's"), 2);
	gc_close(&gc);
	free(bin);
}

/*
 * Redis killed under a gate run by valgrind: the line saying the store
 * went names why, and valgrind finds no error (mark_down() copied the
 * reason out of the hiredis context it had just freed: valgrind's
 * "Invalid read", a line ending in garbage).  The gate is stopped
 * (SIGTERM) so that valgrind's exit status says what it saw.
 */
Test(redis, store_killed_under_valgrind, .timeout = 120)
{
	char *bin = tl_bin("weir-gate");
	const char *argv[] = { "valgrind", "-q", "--error-exitcode=70", "--leak-check=no",
		bin, "-c", wconf, "-p", policy, "-s", gsock[0], "-j", gjournal[0], NULL };
	struct gate_client gc;
	struct buf b = BUF_INIT;
	const char *line, *p;
	int st;

	write_policy("100 per 1s");
	gpid[0] = spawn(argv, glog[0]);
	wait_sock(gsock[0], gpid[0], glog[0]);
	cr_assert_eq(gc_connect(&gc, gsock[0]), 0);
	cr_assert_eq(send_one(&gc, 1, 20000), 1);
	reap(&rpid);
	wait_log(0, "unreachable: ", 20000);
	gc_close(&gc);
	cr_assert_eq(kill(gpid[0], SIGTERM), 0);
	while (waitpid(gpid[0], &st, 0) < 0)
		cr_assert_eq(errno, EINTR);
	gpid[0] = -1;
	tl_read(glog[0], &b);
	line = strstr(buf_cstr(&b), "unreachable: ");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 70, "valgrind found errors:\n%s",
	    buf_cstr(&b));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit %d:\n%s", st, buf_cstr(&b));
	/* The reason as hiredis said it: words, not freed memory. */
	line += strlen("unreachable: ");
	for (p = line; *p != ';' && *p != '\n' && *p; p++)
		cr_assert(*p >= ' ' && *p <= '~', "a byte 0x%02x in the reason:\n%s",
		    (unsigned char)*p, buf_cstr(&b));
	cr_assert(p - line >= 8 && *p == ';', "no reason:\n%s", buf_cstr(&b));
	buf_free(&b);
	free(bin);
}

Test(redis, empty_restart_writes_back_first)
{
	struct gate_client a, b;
	struct gp_reply r;
	uint32_t t;

	write_policy("3 per 30s");
	start_gate(0);
	start_gate(1);
	cr_assert_eq(gc_connect(&a, gsock[0]), 0);
	cr_assert_eq(gc_connect(&b, gsock[1]), 0);
	for (t = 1; t <= 3; t++)
		cr_assert_eq(send_one(&a, t, 5000), 1);
	/* Redis restarted without persistence: its history is gone. */
	reap(&rpid);
	rpid = tl_redis_start(dir, rsock);
	wait_log(0, "wrote back this host's 3 sends", 5000);
	/* Gate 1 has sent nothing itself; only the written-back history
	 * keeps it from granting (the hold after an empty restart is 3 s). */
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert_eq(tl_gate_reply(&b, &r, 6000), 0, "gate 1 granted: the window was forgotten");
	gc_close(&a);
	gc_close(&b);
}

/* Seconds (at the test's clock) from the call to the next reply on gc,
 * at most ms; -1 if none came. */
static double
grant_after(struct gate_client *gc, int ms)
{
	int64_t t0 = now_us();
	struct gp_reply r;

	if (!tl_gate_reply(gc, &r, ms))
		return -1;
	cr_assert_eq(r.verb, GP_R_GRANT);
	return (double)(now_us() - t0) / 1e6;
}

#define LEASE_S (SHARED_LEASE_MIN_MS / 1000)

/* Gates 0 (-g grace0) and 1 (-g grace1) under rate, a client of each;
 * a's first request granted and held; its grant id. */
static uint64_t
hold_one(const char *rate, const char *grace0, const char *grace1, struct gate_client *a,
    struct gate_client *b)
{
	struct gp_reply r;

	write_policy(rate);
	start_gate_g(0, grace0);
	start_gate_g(1, grace1);
	cr_assert_eq(gc_connect(a, gsock[0]), 0);
	cr_assert_eq(gc_connect(b, gsock[1]), 0);
	cr_assert_eq(gc_acquire(a, 1, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert_eq(tl_gate_reply(a, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	return r.id;
}

Test(redis, lease_renewed_while_held_ends_after_death, .timeout = 60)
{
	struct gate_client a, b;
	struct gp_reply r;
	double got;

	/* Gate 0 grants one and its client holds it (a slow delivery). */
	(void)hold_one("1 per 2s", "0", "0", &a, &b);
	/* Three leases long, gate 1 gets nothing: gate 0 renews. */
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert_eq(tl_gate_reply(&b, &r, 3 * LEASE_S * 1000), 0,
	    "granted while another host's grant is held and renewed");
	/* Gate 0 dies holding it: free once the lease ends (a send that may
	 * have happened until then, so one period more), not in an hour. */
	reap(&gpid[0]);
	got = grant_after(&b, (LEASE_S + 2 + 3) * 1000);
	cr_assert(got >= 0, "no grant %d s after the holder died", LEASE_S + 2 + 3);
	cr_assert(got >= 2.0, "granted %.3f s after the holder died: its lease was not counted",
	    got);
	gc_close(&a);
	gc_close(&b);
}

Test(redis, restarted_gate_takes_over_its_grants, .timeout = 60)
{
	struct gate_client a, b;
	double got;

	(void)hold_one("1 per 1s", "8s", "0", &a, &b);
	/* Killed holding it, down for 5 s (the scenario), restarted: its
	 * journal counts the grant until the restart + 8 s, and so must
	 * Redis, though the lease gate 0 last renewed ends sooner. */
	reap(&gpid[0]);
	gc_close(&a);
	sleep(5);	/* the 5 s down: the case, not a wait for an event */
	start_gate_g(0, "8s");
	wait_log(0, "serving", 5000);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 1), 0);
	got = grant_after(&b, 20000);
	cr_assert(got >= 0, "no grant 20 s after the restart");
	cr_assert(got >= 7.0, "granted %.3f s after the restart: the grant left held was not "
	    "taken over (8 s of grace)", got);
	gc_close(&b);
}

/*
 * max_connections across hosts, as kept sessions use it: a session holds
 * a connection slot (0 messages, 0 recipients, 1 connection) for its
 * whole life, longer than a lease, and its messages (1 message, 0
 * connections) go without another.  Two gates, max_connections 2: a
 * third slot waits while both are held three leases long (each gate
 * renews its own), messages are granted all along, and the third is
 * granted once a session ends (NOMAIL: the connection logged).
 */
Test(redis, session_slots_count_across_hosts, .timeout = 60)
{
	struct gate_client a, b;
	struct gp_reply r;
	char *text = xasprintf("upstream \"up\" {\n  rate = {\"100 per 1s\"}\n"
	    "  max_connections = 2\n  shared = \"unix:%s\"\n}\n", rsock);
	uint32_t t;

	tl_write(policy, text, strlen(text));
	free(text);
	start_gate_g(0, "0");
	start_gate_g(1, "0");
	cr_assert_eq(gc_connect(&a, gsock[0]), 0);
	cr_assert_eq(gc_connect(&b, gsock[1]), 0);
	cr_assert_eq(gc_acquire(&a, 1, "up", NULL, NULL, 0, 0, 1), 0);
	cr_assert_eq(tl_gate_reply(&a, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 0, 0, 1), 0);
	cr_assert_eq(tl_gate_reply(&b, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	/* A third session, on gate 1: both slots are held, one by the other
	 * host.  Meanwhile gate 0's session sends a message a second. */
	cr_assert_eq(gc_acquire(&b, 2, "up", NULL, NULL, 0, 0, 1), 0);
	for (t = 10; t < 10 + 3 * LEASE_S; t++) {
		cr_assert_eq(send_conns(&a, t, 0, 5000), 1, "a session's message waited for a connection slot");
		cr_assert_eq(tl_gate_reply(&b, &r, 1000), 0,
		    "a third connection granted with max_connections 2 (after %u s)", t - 10);
	}
	/* Gate 0's session ends: its slot frees and the third is granted. */
	cr_assert_eq(gc_report_nomail(&a, 1), 0);
	cr_assert_eq(tl_gate_reply(&a, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	cr_assert_eq(tl_gate_reply(&b, &r, 5000), 1, "no slot once a session ended");
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(r.tag, 2);
	gc_close(&a);
	gc_close(&b);
}

/* weir-gate status (json or not) of gate i, malloc'ed. */
static char *
gate_status_of(int i, int json)
{
	return tl_gate_status(wconf, gsock[i], json);
}

/* Every member of a shared store that mail/gatestatus.h declares is in
 * the gate's JSON st, of its kind (gatestatus_test holds the rest of the
 * document to the header; a store's members need Redis). */
static void
shared_members_declared(const char *st)
{
	struct buf why = BUF_INIT;
	struct json_object *doc = json_parse_strict(st, strlen(st), 1 << 20, &why), *up, *v;
	size_t i, n = 0;

	cr_assert_not_null(doc, "%s", buf_cstr(&why));
	up = jp_at(jp_get(doc, GS_UPSTREAMS), 0);
	for (i = 0; i < gs_nmembers; i++) {
		const char *name = gs_members[i].path + strlen("upstreams[].");
		unsigned k = gs_members[i].kind;

		if (strncmp(gs_members[i].path, "upstreams[].shared", 18) != 0 ||
		    strcmp(name, GS_SHARED_ERROR) == 0)	/* only when down */
			continue;
		cr_assert(json_object_object_get_ex(up, name, &v), "no %s in %s", name, st);
		cr_assert(v == NULL ? (k & GS_K_NULL) : json_object_is_type(v, json_type_string) ?
		    (k & GS_K_STR) : json_object_is_type(v, json_type_int) && (k & GS_K_INT),
		    "%s is not of its declared kind in %s", name, st);
		n++;
	}
	cr_assert_eq(n, 7, "%zu shared members declared", n);
	json_object_put(doc);
	buf_free(&why);
}

Test(redis, status_shows_every_hosts_count)
{
	struct gate_client a, b;
	struct gp_reply r;
	struct tl_result res;
	char *st, *sconf = xasprintf("%s/status.conf", dir), *text;
	char *bin = tl_bin("weir");
	const char *argv[] = { bin, "-c", sconf, "status", NULL };
	struct tl_run run = { .argv = argv };

	write_policy("5 per 60s");
	start_gate(0);
	start_gate(1);
	cr_assert_eq(gc_connect(&a, gsock[0]), 0);
	cr_assert_eq(gc_connect(&b, gsock[1]), 0);
	/* Gate 0: 2 sent; gate 1: 1 sent, 1 held. */
	cr_assert_eq(send_one(&a, 1, 5000), 1);
	cr_assert_eq(send_one(&a, 2, 5000), 1);
	cr_assert_eq(send_one(&b, 1, 5000), 1);
	cr_assert_eq(gc_acquire(&b, 2, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert_eq(tl_gate_reply(&b, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_GRANT);
	st = gate_status_of(0, 0);
	cr_assert(strstr(st, "shared store unix:"), "%s", st);
	cr_assert(strstr(st, ": answers"), "%s", st);
	cr_assert(strstr(st, "  window 5 messages per 60s: 2 logged + 0 held = 2 of 5\n"
	    "    all hosts: 3 logged + 1 held = 4 of 5\n"), "%s", st);
	free(st);
	st = gate_status_of(1, 1);
	cr_assert(strstr(st, "\"logged\":1,\"held\":1,\"used\":2,\"all_hosts\":{\"logged\":3,"
	    "\"held\":1,\"used\":4}"), "%s", st);
	cr_assert(strstr(st, "\"shared\":\"ok\",\"shared_store\":\"unix:"), "%s", st);
	/* Where the store is, and the window whole (no switch: a Redis). */
	{
		char *m = xasprintf("\"shared_master\":\"%s\",\"shared_switches\":0,"
		    "\"shared_last_switch_ms\":null,\"shared_window\":\"whole\","
		    "\"shared_written_back_ms\":1", rsock);

		cr_assert(strstr(st, m), "no %s in\n%s", m, st);
		free(m);
	}
	shared_members_declared(st);
	free(st);
	/* weir status shows it too (the gate's text). */
	text = xasprintf("gate_socket = \"%s\"\nqueue_dir = \"%s/queue\"\npolicy_file = \"%s\"\n",
	    gsock[0], dir, policy);
	tl_write(sconf, text, strlen(text));
	free(text);
	tl_run(&run, &res);
	cr_assert(strstr(buf_cstr(&res.out), "all hosts: 3 logged + 1 held = 4 of 5"), "%s%s",
	    buf_cstr(&res.out), buf_cstr(&res.err));
	tl_result_free(&res);
	/* The store gone: unreachable, nothing counted for all hosts. */
	reap(&rpid);
	st = gate_status_of(0, 0);
	cr_assert(strstr(st, ": UNREACHABLE") && strstr(st, "all hosts: unknown"), "%s", st);
	free(st);
	gc_close(&a);
	gc_close(&b);
	free(sconf);
	free(bin);
}

/* ---- a store that misbehaves (issue 35) ---- */

/* A connection of the test's to Redis i on TCP. */
static redisContext *
tcp_redis(int i)
{
	redisContext *c = redisConnect("127.0.0.1", (int)tport[i]);

	cr_assert(c != NULL && !c->err, "redis %u: %s", tport[i], c ? c->errstr : "no memory");
	return c;
}

/* A command on c that must not fail; its reply. */
static redisReply *
rcmd(redisContext *c, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redisvCommand(c, fmt, ap);
	va_end(ap);
	cr_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt,
	    rep ? rep->str : c->errstr);
	return rep;
}

static void
rcmd_ok(redisContext *c, const char *fmt, const char *arg)
{
	freeReplyObject(rcmd(c, fmt, arg));
}

/* An integer field of INFO's text on c. */
static long long
info_ll(redisContext *c, const char *section, const char *key)
{
	redisReply *rep = rcmd(c, "INFO %s", section);
	char *k = xasprintf("\n%s:", key);
	const char *p = strstr(rep->str, k);
	long long v;

	cr_assert(p != NULL, "INFO %s: no %s", section, key);
	v = atoll(p + strlen(k));
	freeReplyObject(rep);
	free(k);
	return v;
}

/* Redis i on TCP; with a port of Redis to follow, its replica. */
static void
start_tcp(int i, unsigned master)
{
	char mp[16];
	const char *extra[] = { "--replicaof", "127.0.0.1", mp, NULL };

	tport[i] = tl_free_port();
	snprintf(mp, sizeof mp, "%u", master);
	tpid[i] = tl_redis_start_tcp(dir, tport[i], master ? extra : NULL);
}

/* Wait (up to ms) until a counter of INFO on c reaches at least n. */
static void
wait_info(redisContext *c, const char *section, const char *key, long long n, int ms)
{
	int64_t end = now_us() + (int64_t)ms * 1000;

	while (info_ll(c, section, key) < n) {
		cr_assert(now_us() < end, "INFO %s: %s stays below %lld", section, key, n);
		poll(NULL, 0, 20);
	}
}

/*
 * A gate pointed at a replica: one line when the store is found
 * unusable, however often the gate tries again, and one when it answers
 * (the replica promoted).  Before: "answers again" (SCRIPT LOAD works on
 * a replica) and "unreachable" (READONLY on the first script) every
 * second.
 */
Test(redis, replica_one_line_each_way, .timeout = 60)
{
	redisContext *rc;
	struct gate_client gc;
	struct gp_reply r;
	long long conns;
	char *store, *st;

	start_tcp(0, 0);
	start_tcp(1, tport[0]);
	rc = tcp_redis(1);
	store = xasprintf("redis://127.0.0.1:%u", tport[1]);
	write_policy_at("100 per 1s", store, NULL);
	start_gate(0);
	cr_assert_eq(gc_connect(&gc, gsock[0]), 0);
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 1, 1), 0);
	/* The gate has come back five times (a second apart). */
	conns = info_ll(rc, "stats", "total_connections_received");
	wait_info(rc, "stats", "total_connections_received", conns + 5, 20000);
	cr_assert_eq(tl_gate_reply(&gc, &r, 0), 0, "granted through a replica");
	cr_assert_eq(log_count(0, "unreachable"), 1, "the log flaps");
	cr_assert_eq(log_count(0, "answers again"), 0, "the log flaps");
	st = gate_status_of(0, 0);
	cr_assert(strstr(st, "is a replica (role slave), not the master"), "%s", st);
	free(st);
	/* Promoted: the gate writes its history back and grants. */
	rcmd_ok(rc, "REPLICAOF NO ONE", NULL);
	cr_assert_eq(tl_gate_reply(&gc, &r, 10000), 1, "no grant once the replica was promoted");
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(log_count(0, "unreachable"), 1);
	cr_assert_eq(log_count(0, "answers again"), 1);
	gc_close(&gc);
	redisFree(rc);
	free(store);
}

/* The "ACL SETUSER weir ..." lines of weir-gate(8), run on Redis at the
 * Unix socket, with the password PASSWORD made password; how many. */
static size_t
acl_from_manual(const char *password)
{
	struct buf man = BUF_INIT;
	redisContext *c = redisConnectUnix(rsock);
	char *line, *w, *save = NULL, *v[32];
	size_t lines = 0, n, i;

	cr_assert(c && !c->err);
	tl_read("src/gate/weir-gate.8", &man);
	for (line = strstr(man.s, "\nACL SETUSER weir "); line;
	    line = strstr(line + 1, "\nACL SETUSER weir ")) {
		char *copy = xstrndup(line + 1, strcspn(line + 1, "\n"));
		redisReply *rep;

		n = 0;
		for (w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
			cr_assert(n < 32);
			/* A troff escape would not be what Redis reads. */
			cr_assert(strchr(w, '\\') == NULL, "an escape in the ACL line: %s", w);
			v[n++] = strcmp(w, ">PASSWORD") == 0 ? xasprintf(">%s", password) : xstrdup(w);
		}
		rep = redisCommandArgv(c, (int)n, (const char **)v, NULL);
		cr_assert(rep && rep->type != REDIS_REPLY_ERROR, "%s: %s", line + 1,
		    rep ? rep->str : c->errstr);
		freeReplyObject(rep);
		for (i = 0; i < n; i++)
			free(v[i]);
		free(copy);
		lines++;
	}
	cr_assert_gt(lines, 0, "weir-gate(8) prints no \"ACL SETUSER weir\" line");
	redisFree(c);
	buf_free(&man);
	return lines;
}

/*
 * The ACL user weir-gate(8) prints, made in a real Redis 7 (which checks
 * each command a script runs), is all the gate needs: it grants; and it
 * is no more (no other key, no FLUSHALL).  A refused command (the user
 * then loses ZADD) gives one line, however often the gate tries, and
 * one when the right is back.
 */
Test(redis, acl_user_from_the_manual, .timeout = 60)
{
	char *secret = xasprintf("%s/redis.secret", dir), *opt;
	redisContext *u;
	redisReply *rep;
	struct gate_client gc;
	struct gp_reply r;
	long long tries;
	size_t i;

	acl_from_manual("pw-8a7b");
	tl_write(secret, "weir pw-8a7b\n", 13);
	cr_assert_eq(chmod(secret, 0600), 0);
	opt = xasprintf("  shared_secret_file = \"%s\"\n", secret);
	write_policy_at("100 per 1s", NULL, opt);
	start_gate(0);
	cr_assert_eq(gc_connect(&gc, gsock[0]), 0);
	cr_assert_eq(send_one(&gc, 1, 10000), 1, "no grant as the ACL user of the manual");
	cr_assert_eq(log_count(0, "unreachable"), 0);
	/* The user may do no more. */
	u = redisConnectUnix(rsock);
	cr_assert(u && !u->err);
	rep = redisCommand(u, "AUTH weir pw-8a7b");
	cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
	freeReplyObject(rep);
	rep = redisCommand(u, "GET other:key");
	cr_assert(rep && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "NOPERM"),
	    "the ACL user reads any key");
	freeReplyObject(rep);
	rep = redisCommand(u, "FLUSHALL");
	cr_assert(rep && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "NOPERM"),
	    "the ACL user may FLUSHALL");
	freeReplyObject(rep);
	redisFree(u);
	/* One right taken away: every script is refused; one line. */
	{
		redisContext *c = redisConnectUnix(rsock);

		cr_assert(c && !c->err);
		freeReplyObject(redisCommand(c, "ACL LOG RESET"));
		freeReplyObject(redisCommand(c, "ACL SETUSER weir -zadd"));
		cr_assert_eq(gc_acquire(&gc, 2, "up", NULL, NULL, 1, 1, 1), 0);
		/* Refused five times over (the ACL log counts them). */
		for (tries = 0; tries < 5;) {
			rep = redisCommand(c, "ACL LOG 1");
			cr_assert(rep && rep->type == REDIS_REPLY_ARRAY);
			tries = 0;
			if (rep->elements == 1)
				for (i = 0; i + 1 < rep->element[0]->elements; i += 2)
					if (strcmp(rep->element[0]->element[i]->str, "count") == 0)
						tries = rep->element[0]->element[i + 1]->integer;
			freeReplyObject(rep);
			poll(NULL, 0, 50);
		}
		cr_assert_eq(tl_gate_reply(&gc, &r, 0), 0, "granted without ZADD");
		cr_assert_eq(log_count(0, "unreachable"), 1, "the log flaps");
		cr_assert(log_has(0, "can't run this command"));
		cr_assert_eq(log_count(0, "answers again"), 0, "the log flaps");
		freeReplyObject(redisCommand(c, "ACL SETUSER weir +zadd"));
		cr_assert_eq(tl_gate_reply(&gc, &r, 10000), 1, "no grant once ZADD is back");
		cr_assert_eq(r.verb, GP_R_GRANT);
		cr_assert_eq(log_count(0, "answers again"), 1);
		redisFree(c);
	}
	gc_close(&gc);
	free(secret);
	free(opt);
}

/* Gates 0 and 1 under "3 per 30s" on store (NULL: the Unix socket's);
 * each sends one, then the store's history is kept by keep, then gate 0
 * sends one more: 3 of 3. */
static void
three_sent_two_kept(const char *store, struct gate_client *a, struct gate_client *b,
    void (*keep)(void *), void *arg)
{
	write_policy_at("3 per 30s", store, NULL);
	start_gate(0);
	start_gate(1);
	cr_assert_eq(gc_connect(a, gsock[0]), 0);
	cr_assert_eq(gc_connect(b, gsock[1]), 0);
	cr_assert_eq(send_one(b, 1, 10000), 1);
	cr_assert_eq(send_one(a, 1, 10000), 1);
	keep(arg);
	cr_assert_eq(send_one(a, 2, 5000), 1);
}

/* Gate 1 asks again: the store it now uses lacks gate 0's last send; it
 * must wait until gate 0 wrote its two back, and then for the window
 * (30 s). */
static void
gate1_must_wait(struct gate_client *a, struct gate_client *b)
{
	struct gp_reply r;

	cr_assert_eq(gc_acquire(b, 2, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert_eq(tl_gate_reply(b, &r, 8000), 0,
	    "gate 1 granted: the store's older history was trusted");
	wait_log(0, "wrote back this host's 2 sends", 1000);
	gc_close(a);
	gc_close(b);
}

static void
save_snapshot(void *arg)
{
	redisContext *c = redisConnectUnix(rsock);

	(void)arg;
	cr_assert(c && !c->err);
	rcmd_ok(c, "SAVE", NULL);
	redisFree(c);
}

/*
 * Redis killed and started again from an older snapshot (its RDB of
 * before gate 0's last send, which still holds the window's marks and
 * every host's): before, trusted, and gate 1 was granted a fourth send
 * within 30 s.
 */
Test(redis, older_snapshot_is_rebuilt, .timeout = 60)
{
	struct gate_client a, b;

	three_sent_two_kept(NULL, &a, &b, save_snapshot, NULL);
	reap(&rpid);
	rpid = tl_redis_start(dir, rsock);	/* loads dump.rdb */
	gate1_must_wait(&a, &b);
}

/* The replica (Redis 1) stops following the master and keeps what it has:
 * promoted now, it lacks what comes after. */
static void
promote_replica(void *arg)
{
	redisContext *m = tcp_redis(0), *rc = tcp_redis(1);
	redisReply *rep;

	(void)arg;
	/* Caught up, then cut off. */
	rep = rcmd(m, "WAIT 1 5000");
	cr_assert_eq(rep->integer, 1, "the replica does not follow");
	freeReplyObject(rep);
	rcmd_ok(rc, "REPLICAOF NO ONE", NULL);
	redisFree(m);
	redisFree(rc);
}

/*
 * The gates pointed (policy reload) at a replica promoted after the
 * master took gate 0's last grant (asynchronous replication: a
 * failover's promoted replica): before, trusted, as above.
 */
Test(redis, promoted_replica_is_rebuilt, .timeout = 60)
{
	struct gate_client a, b;
	char *m, *rpl;
	int i;

	start_tcp(0, 0);
	start_tcp(1, tport[0]);
	m = xasprintf("redis://127.0.0.1:%u", tport[0]);
	rpl = xasprintf("redis://127.0.0.1:%u", tport[1]);
	three_sent_two_kept(m, &a, &b, promote_replica, NULL);
	write_policy_at("3 per 30s", rpl, NULL);
	for (i = 0; i < 2; i++)
		cr_assert_eq(kill(gpid[i], SIGHUP), 0);
	gate1_must_wait(&a, &b);
	free(m);
	free(rpl);
}

/*
 * A grant refunded while the store was away (frozen: SIGSTOP) is given
 * back in the store once it answers again (gate 0 writes its history
 * back), not held for its lease (the gates' grace, 60 s): gate 1 is
 * granted within seconds of the thaw.
 */
Test(redis, outcome_learned_while_away_is_settled, .timeout = 60)
{
	struct gate_client a, b;
	struct gp_reply r;
	double got;

	(void)hold_one("1 per 1s", "60s", "60s", &a, &b);
	cr_assert_eq(kill(rpid, SIGSTOP), 0);
	wait_log(0, "unreachable", 10000);
	cr_assert_eq(gc_report_refund(&a, 1), 0);
	cr_assert_eq(tl_gate_reply(&a, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	cr_assert_eq(kill(rpid, SIGCONT), 0);
	wait_log(0, "answers again", 10000);
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 1), 0);
	got = grant_after(&b, 10000);
	cr_assert(got >= 0, "gate 1 not granted within 10 s: the refunded grant still holds its "
	    "slot in the store");
	gc_close(&a);
	gc_close(&b);
}

/*
 * SETTLE on a shared upstream: a grant whose client went away counts as
 * an unknown outcome, in the store too, until its grace (60 s here); a
 * SETTLE REFUND (a deliverer that outlived its weir-send said nothing
 * reached the upstream) frees its slot for every host at once: gate 0
 * writes its history back.  Before, the gate answered OK and the slot
 * stayed taken, here and in the store, for the grace.
 */
Test(redis, settled_send_frees_its_slot_everywhere, .timeout = 60)
{
	struct gate_client a, b, c;
	struct gp_reply r;
	uint64_t id;
	double got;

	id = hold_one("1 per 2s", "60s", "60s", &a, &b);
	gc_close(&a);	/* its client gone: an unknown outcome for 60 s */
	cr_assert_eq(gc_acquire(&b, 1, "up", NULL, NULL, 1, 1, 1), 0);
	cr_assert_eq(tl_gate_reply(&b, &r, 3000), 0, "granted beside an unknown outcome");
	cr_assert_eq(gc_connect(&c, gsock[0]), 0);
	cr_assert_eq(gc_settle(&c, "up", id, GP_REFUND, 0, -1, NULL), 0);
	cr_assert_eq(tl_gate_reply(&c, &r, 5000), 1);
	cr_assert_eq(r.verb, GP_R_OK);
	got = grant_after(&b, 10000);
	cr_assert(got >= 0, "gate 1 not granted 10 s after the settlement: the store still "
	    "counts the unknown outcome");
	gc_close(&b);
	gc_close(&c);
}
