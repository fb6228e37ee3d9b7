/*
 * sentinel_test.c: weir-gate's shared windows through Redis Sentinel
 * (policy.conf's shared = "redis-sentinel://H:P,H:P,H:P/weirm"), with
 * Debian's redis-server and redis-sentinel on free loopback ports: a
 * master and two replicas, three sentinels (quorum 2, down after 1 s).
 *
 * Suite sentinel (gates alone, a client speaking the gate protocol): a
 * sentinel that refuses the password, a master name no sentinel knows, a
 * "sentinel" that answers anything but Redis's protocol: the gate grants
 * nothing, its one log line and its status name the sentinel and the
 * error, the request waits (nothing lost) and is granted once the
 * cause is mended.
 *
 * Suite sentinel_relay (three whole relays, one stand-in upstream, "5 per
 * 3s", 10 messages per relay queued at once; counted at the upstream's
 * own clock):
 *   master_killed_mid_burst   SIGKILL of the master after 8 sends: no
 *                             window over its limit, every message
 *                             exactly once, every gate found the new
 *                             master, mail resumed within STALL_BOUND s
 *                             of the kill (the figure is printed)
 *   master_frozen_then_thawed SIGSTOP of the master until the sentinels
 *                             promoted a replica, then SIGCONT: the same,
 *                             and no gate ever used the old master again
 *                             (it is demoted)
 *   two_of_three_down         the master and a replica killed while the
 *                             other replica is frozen for 6 s: no master,
 *                             no send accepted meanwhile; once thawed and
 *                             promoted, mail resumes, nothing lost
 *
 * Waits are for events (the sentinels' answers, the upstream's record,
 * log lines, empty queues), bounded; the 6 s freeze is the scenario.
 * Every process started is killed at the end, even on failure: the
 * Redis servers and sentinels here, the rest by hs_teardown.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hosts_helpers.h"
#include "lib/alloc.h"
#include "mail/gateclient.h"

#define NRED 3
#define NSEN 3
#define MASTER "weirm"
#define LIMIT 5
#define PER 3.0
#define NHOST 3
#define PER_HOST 10
/* From the master's death to the next send at the upstream, s: the
 * sentinels' 1 s down-after and election, the gates' second, the
 * rebuild's 3 s hold, a window's wait: about 6-9 s measured; bound
 * generous for a loaded machine. */
#define STALL_BOUND 25.0

static struct {
	char *dir;
	unsigned rport[NRED], sport[NSEN];
	pid_t rpid[NRED], spid[NSEN];
	const char *pass;	/* the sentinels' password, or NULL */
	pid_t garbage;		/* a listener that answers garbage, or 0 */
	unsigned gport;
} S;

static struct rt t[NHOST];

static void
reap(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGCONT);
	kill(*pid, SIGKILL);
	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
	*pid = 0;
}

/* A connection to sentinel i (authenticated), or NULL if it is down. */
static redisContext *
sentinel(int i)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)S.sport[i], tv);
	redisReply *rep;

	if (c == NULL || c->err) {
		if (c)
			redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	if (S.pass) {
		rep = redisCommand(c, "AUTH %s", S.pass);
		cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "sentinel AUTH");
		freeReplyObject(rep);
	}
	return c;
}

/* Field f of sentinel i's SENTINEL MASTER, as a number; -1 if none. */
static long long
master_field(int i, const char *f)
{
	redisContext *c = sentinel(i);
	redisReply *rep;
	long long v = -1;
	size_t k;

	if (c == NULL)
		return -1;
	rep = redisCommand(c, "SENTINEL MASTER %s", MASTER);
	if (rep && rep->type == REDIS_REPLY_ARRAY)
		for (k = 0; k + 1 < rep->elements; k += 2)
			if (strcmp(rep->element[k]->str, f) == 0)
				v = atoll(rep->element[k + 1]->str);
	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return v;
}

/* The master's port as sentinel i names it (0: none). */
static unsigned
named_by(int i)
{
	long long p = master_field(i, "port");

	return p > 0 ? (unsigned)p : 0;
}

/* The master's port when every sentinel names the same one (else 0). */
static unsigned
master_port(void)
{
	unsigned p = named_by(0);
	int i;

	for (i = 1; i < NSEN; i++)
		if (named_by(i) != p)
			return 0;
	return p;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait up to ms until every sentinel names a master other than old
 * (want: that very one, if not 0); its port. */
static unsigned
wait_master(unsigned old, unsigned want, int ms)
{
	int64_t end = now_ms() + ms;
	unsigned p;

	while ((p = master_port()) == 0 || p == old || (want && p != want)) {
		cr_assert(now_ms() < end, "the sentinels name no new master after %d ms (%u)", ms,
		    p);
		poll(NULL, 0, 100);
	}
	return p;
}

/* Which Redis listens on port. */
static int
redis_at(unsigned port)
{
	int i;

	for (i = 0; i < NRED; i++)
		if (S.rport[i] == port)
			return i;
	cr_assert_fail("no Redis of ours on %u", port);
	return -1;
}

/* The role of Redis i ("master", "slave"), malloc'ed. */
static char *
role_of(int i)
{
	redisContext *c = redisConnect("127.0.0.1", (int)S.rport[i]);
	redisReply *rep;
	char *r;

	cr_assert(c && !c->err);
	rep = redisCommand(c, "ROLE");
	cr_assert(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0);
	r = xstrdup(rep->element[0]->str);
	freeReplyObject(rep);
	redisFree(c);
	return r;
}

/* Three Redis (0 the master) and three sentinels watching it; returns
 * once every sentinel knows the two others and both replicas. */
static void
sentinels_start(const char *pass)
{
	char mp[16];
	const char *replica[] = { "--replicaof", "127.0.0.1", mp, NULL };
	int64_t end;
	int i;

	S.pass = pass;
	for (i = 0; i < NRED; i++) {
		S.rport[i] = tl_free_port();
		snprintf(mp, sizeof mp, "%u", S.rport[0]);
		S.rpid[i] = tl_redis_start_tcp(S.dir, S.rport[i], i ? replica : NULL);
	}
	for (i = 0; i < NSEN; i++) {
		char *conf, *log, *text;
		const char *argv[3] = { "redis-sentinel", NULL, NULL };

		S.sport[i] = tl_free_port();
		conf = xasprintf("%s/sentinel-%u.conf", S.dir, S.sport[i]);
		log = xasprintf("%s/sentinel-%u.log", S.dir, S.sport[i]);
		text = xasprintf("port %u\nbind 127.0.0.1\ndir %s\n"
		    "sentinel monitor %s 127.0.0.1 %u 2\n"
		    "sentinel down-after-milliseconds %s 1000\n"
		    "sentinel failover-timeout %s 4000\n"
		    "%s%s%s%s%s",
		    S.sport[i], S.dir, MASTER, S.rport[0], MASTER, MASTER,
		    pass ? "requirepass " : "", pass ? pass : "", pass ? "\nsentinel sentinel-pass " : "",
		    pass ? pass : "", pass ? "\n" : "");
		tl_write(conf, text, strlen(text));
		argv[1] = conf;
		S.spid[i] = tl_start_listening(argv, log, NULL, S.sport[i]);
		free(conf);
		free(log);
		free(text);
	}
	end = now_ms() + 30000;
	for (i = 0; i < NSEN; i++)
		while (master_field(i, "num-other-sentinels") != NSEN - 1 ||
		    master_field(i, "num-slaves") != NRED - 1) {
			cr_assert(now_ms() < end, "sentinel %d does not see the others", i);
			poll(NULL, 0, 100);
		}
}

/* "redis-sentinel://127.0.0.1:P,...: the sentinels from..to, then name. */
static char *
spec(int from, int to, const char *name)
{
	struct buf b = BUF_INIT;
	int i;

	buf_adds(&b, "redis-sentinel://");
	for (i = from; i <= to; i++)
		buf_printf(&b, "%s127.0.0.1:%u", i > from ? "," : "", S.sport[i]);
	buf_printf(&b, "/%s", name);
	return b.s;
}

/* ---- suite sentinel: the gate alone ---- */

static char *gdir, *gsock, *gjournal, *glog, *gpolicy, *gconf, *gsecret;
static pid_t gpid;

static void
gate_setup(void)
{
	memset(&S, 0, sizeof S);
	gdir = tl_tmpdir();
	S.dir = gdir;
	gsock = xasprintf("%s/gate.sock", gdir);
	gjournal = xasprintf("%s/journal", gdir);
	glog = xasprintf("%s/gate.log", gdir);
	gpolicy = xasprintf("%s/policy.conf", gdir);
	gconf = xasprintf("%s/weir.conf", gdir);
	gsecret = xasprintf("%s/sentinel.secret", gdir);
	tl_write(gconf, "", 0);
	gpid = 0;
}

static void
stop_all(void)
{
	int i;

	for (i = 0; i < NSEN; i++)
		reap(&S.spid[i]);
	for (i = 0; i < NRED; i++)
		reap(&S.rpid[i]);
	reap(&S.garbage);
}

static void
gate_teardown(void)
{
	reap(&gpid);
	stop_all();
	tl_rmtree(gdir);
	free(gdir);
	free(gsock);
	free(gjournal);
	free(glog);
	free(gpolicy);
	free(gconf);
	free(gsecret);
}

TestSuite(sentinel, .init = gate_setup, .fini = gate_teardown, .timeout = 90);

static void
gate_policy(const char *store, const char *secret)
{
	char *text = xasprintf("upstream \"up\" {\n  rate = {\"100 per 1s\"}\n  shared = \"%s\"\n"
	    "%s%s%s}\n", store, secret ? "  shared_sentinel_secret_file = \"" : "",
	    secret ? secret : "", secret ? "\"\n" : "");

	tl_write(gpolicy, text, strlen(text));
	free(text);
}

static void
gate_start(void)
{
	const char *args[] = { "-p", gpolicy, "-s", gsock, "-j", gjournal, NULL };
	int i;

	gpid = tl_spawn("weir-gate", gconf, args, glog);
	for (i = 0; i < 1000 && !tl_sock_answers(gsock); i++)
		poll(NULL, 0, 10);
	cr_assert(tl_sock_answers(gsock), "weir-gate does not answer");
}

static size_t
glog_count(const char *what)
{
	struct buf b = BUF_INIT;
	size_t n;

	tl_read(glog, &b);
	n = tl_count(buf_cstr(&b), what);
	buf_free(&b);
	return n;
}

/*
 * The gate under a broken store: its request waits (no grant, no
 * error) while the gate tries again, once a second; one log line and
 * the status name the error; then mend() fixes the cause and the
 * request is granted.
 */
static void
fails_closed_then_mended(const char *error, void (*mend)(void))
{
	struct gate_client gc;
	struct gp_reply r;
	char *st;
	int64_t end = now_ms() + 20000;

	gate_start();
	cr_assert_eq(gc_connect(&gc, gsock), 0);
	cr_assert_eq(gc_acquire(&gc, 1, "up", NULL, NULL, 1, 1, 1), 0);
	while (glog_count("unreachable") == 0) {
		cr_assert(now_ms() < end, "no line saying the store is unreachable");
		poll(NULL, 0, 50);
	}
	/* Four more tries (one a second) bring no answer and no line. */
	cr_assert_eq(tl_gate_reply(&gc, &r, 4000), 0, "an answer (%d) with the store broken",
	    r.verb);
	st = tl_gate_status(gconf, gsock, 0);
	cr_assert(strstr(st, error), "status does not say \"%s\":\n%s", error, st);
	free(st);
	cr_assert_eq(glog_count("unreachable"), 1, "the log flaps");
	cr_assert_eq(glog_count(error), 1, "the error is not in the log line");
	mend();
	cr_assert_eq(tl_gate_reply(&gc, &r, 15000), 1, "no grant once mended");
	cr_assert_eq(r.verb, GP_R_GRANT);
	cr_assert_eq(glog_count("answers again"), 1);
	gc_close(&gc);
}

static void
right_password(void)
{
	tl_write(gsecret, "spw-93\n", 7);	/* read again at each try */
}

Test(sentinel, wrong_password)
{
	char *s;
	char err[128];

	sentinels_start("spw-93");
	s = spec(0, 2, MASTER);
	tl_write(gsecret, "not-it\n", 7);
	cr_assert_eq(chmod(gsecret, 0600), 0);
	gate_policy(s, gsecret);
	snprintf(err, sizeof err, "sentinel 127.0.0.1:%u: AUTH: WRONGPASS", S.sport[0]);
	fails_closed_then_mended(err, right_password);
	free(s);
}

static void
known_name(void)
{
	char *s = spec(0, 2, MASTER);

	gate_policy(s, NULL);
	cr_assert_eq(kill(gpid, SIGHUP), 0);
	free(s);
}

Test(sentinel, unknown_master_name)
{
	char *s;
	char err[128];

	sentinels_start(NULL);
	s = spec(0, 2, "nosuch");
	gate_policy(s, NULL);
	snprintf(err, sizeof err, "sentinel 127.0.0.1:%u: SENTINEL MASTER: ERR No such master",
	    S.sport[1]);
	fails_closed_then_mended(err, known_name);
	free(s);
}

/* A listener on S.gport that answers every connection with an HTTP
 * error and closes it. */
static void
garbage_start(void)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), on = 1, c;
	pid_t parent = getpid();

	cr_assert(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	S.gport = tl_free_port();
	sa.sin_port = htons((uint16_t)S.gport);
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	cr_assert(listen(fd, 16) == 0);
	S.garbage = fork();
	cr_assert(S.garbage >= 0);
	if (S.garbage == 0) {
		static const char resp[] = "HTTP/1.1 400 Bad Request\r\n\r\n";

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		for (;;) {
			if ((c = accept(fd, NULL, NULL)) < 0)
				continue;
			if (write(c, resp, sizeof resp - 1) < 0)
				_exit(1);
			close(c);
		}
	}
	close(fd);
}

static void
real_sentinels(void)
{
	char *s = spec(0, 2, MASTER);
	char *both = xasprintf("redis-sentinel://127.0.0.1:%u,%s", S.gport, s + 17);

	/* The garbage one stays listed: the others answer. */
	gate_policy(both, NULL);
	cr_assert_eq(kill(gpid, SIGHUP), 0);
	free(s);
	free(both);
}

Test(sentinel, sentinel_answers_garbage)
{
	char *s;
	char err[160];

	sentinels_start(NULL);
	garbage_start();
	s = xasprintf("redis-sentinel://127.0.0.1:%u/%s", S.gport, MASTER);
	gate_policy(s, NULL);
	snprintf(err, sizeof err, "sentinel 127.0.0.1:%u: SENTINEL MASTER: Protocol error",
	    S.gport);
	fails_closed_then_mended(err, real_sentinels);
	free(s);
}

/* ---- suite sentinel_relay: three whole relays ---- */

static void
relay_setup(void)
{
	int i;

	memset(&S, 0, sizeof S);
	for (i = 0; i < NHOST; i++)
		rt_setup(&t[i], 2);
	S.dir = xasprintf("%s/redis", t[0].s.qt.tmp);
	cr_assert(mkdir(S.dir, 0700) == 0);
}

static void
relay_teardown(void)
{
	hs_teardown(t, NHOST);
	stop_all();
	free(S.dir);
}

TestSuite(sentinel_relay, .init = relay_setup, .fini = relay_teardown, .timeout = 240);

/* The sentinels, the relays under "5 per 3s" through them, the mail
 * queued and sending; returns once 8 sends reached the upstream, with
 * the recipients in *rcpt and the master's index. */
static int
burst_started(char ***rcpt)
{
	char pol[512], *s;

	sentinels_start(NULL);
	s = spec(0, 2, MASTER);
	snprintf(pol, sizeof pol, "upstream \"isp\" {\n  rate = {\"%d per %.0fs\"}\n"
	    "  shared = \"%s\"\n}\n", LIMIT, PER, s);
	free(s);
	hs_start(t, NHOST, pol, "2s");
	*rcpt = hs_queue_mail(t, NHOST, PER_HOST);
	hs_start_sends(t, NHOST);
	hs_wait_ndata(t, 8, 60000);
	return redis_at(master_port());
}

/* The first send at the upstream after time at, or -1. */
static double
first_after(const struct rt_rec *r, double at)
{
	double best = -1;
	size_t i;

	for (i = 0; i < r->n; i++)
		if (r->v[i].time > at && (best < 0 || r->v[i].time < best))
			best = r->v[i].time;
	return best;
}

/* Drained, then: every message exactly once, the window held at the
 * upstream, no bounce, sound queues, each gate found port as the
 * master.  The record in *r. */
static void
drained_and_sound(char **rcpt, unsigned port, struct rt_rec *r)
{
	char line[96];

	hs_wait_all_drained(t, NHOST, 120000, 1);
	rt_rec_load(&t[0], r);
	hs_assert_delivered(r, rcpt, NHOST * PER_HOST, 1);
	rt_assert_window(r, LIMIT, PER);
	hs_assert_sound(t, NHOST, r);
	snprintf(line, sizeof line, "master %s 127.0.0.1:%u (was", MASTER, port);
	hs_wait_gates_logged(t, NHOST, line, 1, 1000);
}

Test(sentinel_relay, master_killed_mid_burst)
{
	char **rcpt;
	struct rt_rec r;
	double killed, back;
	unsigned old, now;
	int m, i;

	m = burst_started(&rcpt);
	old = S.rport[m];
	reap(&S.rpid[m]);
	killed = rt_now();
	now = wait_master(old, 0, 60000);
	drained_and_sound(rcpt, now, &r);
	back = first_after(&r, killed);
	rt_say("sentinel: master killed: first send %.3f s after the kill, %zu sends", back - killed,
	    r.n);
	cr_assert(back - killed <= STALL_BOUND, "mail resumed %.3f s after the kill",
	    back - killed);
	/* Each gate's status says where the master is now (as the
	 * sentinels name it now: on a loaded machine they may fail over a
	 * second time, the first replica promoted being slow to answer
	 * within down-after), that it switched, and that the window is
	 * whole again. */
	now = wait_master(old, 0, 1000);
	for (i = 0; i < NHOST; i++) {
		char *st = rt_gate_status(&t[i]), *want = xasprintf("at master %s 127.0.0.1:%u (",
		    MASTER, now);
		const char *p = strstr(st, want);

		cr_assert(p && (strncmp(p + strlen(want), "1 switch of master, the last", 28) == 0 ||
		    strstr(p, " switches of master, the last")) && strstr(st, "; window: whole;"),
		    "gate %d:\n%s", i, st);
		free(want);
		free(st);
	}
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * PER_HOST);
}

Test(sentinel_relay, master_frozen_then_thawed)
{
	char **rcpt, line[96], *role;
	struct rt_rec r;
	unsigned old, now;
	int64_t end;
	int m, i;

	m = burst_started(&rcpt);
	old = S.rport[m];
	cr_assert_eq(kill(S.rpid[m], SIGSTOP), 0);
	now = wait_master(old, 0, 60000);
	cr_assert_eq(kill(S.rpid[m], SIGCONT), 0);
	/* The sentinels demote the old master. */
	end = now_ms() + 60000;
	while (strcmp((role = role_of(m)), "slave") != 0) {
		free(role);
		cr_assert(now_ms() < end, "the old master was never demoted");
		poll(NULL, 0, 200);
	}
	free(role);
	drained_and_sound(rcpt, now, &r);
	/* No gate went back to it: each lost the store while it was frozen
	 * (one line), found it again at the new master (one line, naming
	 * where: a script answered there), and never switched to the old. */
	for (i = 0; i < NHOST; i++) {
		cr_assert_eq(hs_gate_log_count(&t[i], "unreachable"), 1, "gate %d", i);
		snprintf(line, sizeof line, "answers again (master %s 127.0.0.1:%u)", MASTER, now);
		if (hs_gate_log_count(&t[i], line) != 1) {
			struct buf b = BUF_INIT;

			tl_read(t[i].gate_log, &b);
			cr_assert_fail("gate %d did not come back once at the new master (%s):\n%s", i,
			    line, buf_cstr(&b));
		}
		snprintf(line, sizeof line, "master %s 127.0.0.1:%u (was", MASTER, old);
		cr_assert_eq(hs_gate_log_count(&t[i], line), 0, "gate %d used the old master again", i);
	}
	rt_say("sentinel: master frozen and thawed: %zu sends", r.n);
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * PER_HOST);
}

Test(sentinel_relay, two_of_three_down)
{
	char **rcpt;
	struct rt_rec r;
	double down, thawed;
	unsigned old, now;
	size_t i, during = 0;
	int m, a, b;

	m = burst_started(&rcpt);
	old = S.rport[m];
	a = (m + 1) % NRED;
	b = (m + 2) % NRED;
	/* No master can be had: the master and one replica dead, the other
	 * frozen. */
	cr_assert_eq(kill(S.rpid[b], SIGSTOP), 0);
	reap(&S.rpid[m]);
	reap(&S.rpid[a]);
	down = rt_now();
	sleep(6);	/* the outage: the case, not a wait for an event */
	cr_assert_eq(master_port(), old, "a master was promoted while none could be");
	thawed = rt_now();
	cr_assert_eq(kill(S.rpid[b], SIGCONT), 0);
	now = wait_master(old, S.rport[b], 90000);
	drained_and_sound(rcpt, now, &r);
	/* Only what was granted before the kill (in flight) may have been
	 * accepted in the outage. */
	for (i = 0; i < r.n; i++)
		if (r.v[i].time > down + 2.0 && r.v[i].time < thawed)
			during++;
	cr_assert_eq(during, 0, "%zu sends accepted with no master", during);
	rt_say("sentinel: two of three down: first send %.3f s after the thaw",
	    first_after(&r, thawed) - thawed);
	rt_rec_free(&r);
	hs_free_rcpts(rcpt, NHOST * PER_HOST);
}
