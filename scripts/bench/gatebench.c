/*
 * gatebench.c: load generator for scripts/bench/gate.sh (not a test).
 * Speaks to a running weir-gate through the client stub.
 *
 *   gatebench SOCKET rate N CONNS     N acquire+report cycles spread over
 *                                     CONNS connections, all in flight at
 *                                     once; prints grants/s
 *   gatebench SOCKET latency N        N sequential acquire->grant on one
 *                                     connection (each reported); prints
 *                                     median, p99, max in microseconds
 *   gatebench SOCKET gap SECONDS      acquire->grant, report, again, for
 *                                     SECONDS on one connection; prints
 *                                     the longest wait for a grant and
 *                                     when it began (wall clock)
 *   gatebench SOCKET hold N SECONDS   N waiting requests (one connection
 *                                     each) held open for SECONDS; prints
 *                                     nothing
 *   gatebench SOCKET window C SECONDS PER_MS
 *                                     C clients in a loop (acquire, "send"
 *                                     for 0-99 ms, report) for SECONDS;
 *                                     prints the most sends whose
 *                                     grant..report meets any PER_MS
 *                                     window, and the sends in total
 *
 * Upstream "up", weights 1 message 1 recipient.  Trusts: the gate.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/gateclient.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
expect(struct gate_client *gc, enum gp_rverb v)
{
	struct gp_reply r;
	const char *why = "closed";

	if (gc_wait_reply(gc, &r, &why) != 1)
		fatalx(1, "reply: %s", why);
	if (r.verb != v)
		fatalx(1, "unexpected reply %d (%s)", (int)r.verb, r.text);
}

/* Read what client i has and hand each complete reply to fn. */
typedef void reply_fn(int i, const struct gp_reply *r, void *arg);

static void
replies(struct gate_client *gc, int i, reply_fn *fn, void *arg)
{
	struct gp_reply r;
	const char *why = "closed";
	int k;

	if (gc_fill(gc) <= 0)
		fatal(1, "read");
	while ((k = gc_next_reply(gc, &r, &why)) == 1) {
		if (r.verb != GP_R_GRANT && r.verb != GP_R_OK)
			fatalx(1, "unexpected reply %d (%s)", (int)r.verb, r.text);
		fn(i, &r, arg);
	}
	if (k < 0)
		fatalx(1, "reply: %s", why);
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct rate_state {
	struct gate_client *gc;
	uint32_t *tag;
	long n, started, done;
};

static void
rate_reply(int i, const struct gp_reply *r, void *arg)
{
	struct rate_state *st = arg;

	if (r->verb == GP_R_GRANT) {
		if (gc_report_sent(&st->gc[i], r->tag, 1, -1) < 0)
			fatal(1, "write");
		return;
	}
	st->done++;
	if (st->started < st->n) {
		st->started++;
		if (gc_acquire(&st->gc[i], ++st->tag[i], "up", NULL, NULL, 1, 1, 0) < 0)
			fatal(1, "write");
	}
}

static void
rate(const char *sock, long n, int conns)
{
	struct rate_state st = { xcalloc((size_t)conns, sizeof *st.gc),
	    xcalloc((size_t)conns, sizeof *st.tag), n, 0, 0 };
	struct pollfd *pf = xcalloc((size_t)conns, sizeof *pf);
	double t0;
	int i;

	for (i = 0; i < conns; i++)
		if (gc_connect(&st.gc[i], sock) < 0)
			fatal(1, "connect");
	t0 = now_s();
	for (i = 0; i < conns && st.started < n; i++, st.started++)
		if (gc_acquire(&st.gc[i], st.tag[i] = 1, "up", NULL, NULL, 1, 1, 0) < 0)
			fatal(1, "write");
	while (st.done < n) {
		for (i = 0; i < conns; i++)
			pf[i] = (struct pollfd){ st.gc[i].fd, POLLIN, 0 };
		if (poll(pf, (nfds_t)conns, -1) < 0 && errno != EINTR)
			fatal(1, "poll");
		for (i = 0; i < conns; i++)
			if (pf[i].revents)
				replies(&st.gc[i], i, rate_reply, &st);
	}
	printf("%.0f grants/s (%ld grants, %d connections, %.3f s)\n",
	    (double)n / (now_s() - t0), n, conns, now_s() - t0);
}

static void
latency(const char *sock, long n)
{
	struct gate_client gc;
	double *lat = xcalloc((size_t)n, sizeof *lat), t;
	long i;

	if (gc_connect(&gc, sock) < 0)
		fatal(1, "connect");
	for (i = 0; i < n; i++) {
		t = now_s();
		if (gc_acquire(&gc, (uint32_t)i + 1, "up", NULL, NULL, 1, 1, 0) < 0)
			fatal(1, "write");
		expect(&gc, GP_R_GRANT);
		lat[i] = (now_s() - t) * 1e6;
		if (gc_report_sent(&gc, (uint32_t)i + 1, 1, -1) < 0)
			fatal(1, "write");
		expect(&gc, GP_R_OK);
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp);
	printf("immediate grant latency: median %.0f us, p99 %.0f us, max %.0f us (%ld grants)\n",
	    lat[n / 2], lat[n * 99 / 100], lat[n - 1], n);
}

static void
gap(const char *sock, int secs)
{
	struct gate_client gc;
	double t, end = now_s() + secs, worst = 0;
	struct timespec wall, worst_wall = { 0, 0 };
	uint32_t tag = 0;
	char when[32];

	if (gc_connect(&gc, sock) < 0)
		fatal(1, "connect");
	while (now_s() < end) {
		t = now_s();
		clock_gettime(CLOCK_REALTIME, &wall);
		if (gc_acquire(&gc, ++tag, "up", NULL, NULL, 1, 1, 0) < 0)
			fatal(1, "write");
		expect(&gc, GP_R_GRANT);
		if (now_s() - t > worst) {
			worst = now_s() - t;
			worst_wall = wall;
		}
		if (gc_report_sent(&gc, tag, 1, -1) < 0)
			fatal(1, "write");
		expect(&gc, GP_R_OK);
	}
	strftime(when, sizeof when, "%H:%M:%S", gmtime(&worst_wall.tv_sec));
	printf("longest wait for a grant: %.3f s, from %s.%03ld UTC (%u grants)\n", worst, when,
	    worst_wall.tv_nsec / 1000000, tag);
}

static void
hold(const char *sock, long n, int secs)
{
	struct gate_client *gc = xcalloc((size_t)n, sizeof *gc);
	long i;

	for (i = 0; i < n; i++) {
		if (gc_connect(&gc[i], sock) < 0)
			fatal(1, "connect");
		if (gc_acquire(&gc[i], 1, "up", NULL, NULL, 1, 1, 0) < 0)
			fatal(1, "write");
	}
	poll(NULL, 0, secs * 1000);
	for (i = 0; i < n; i++)
		gc_close(&gc[i]);
}

static double
ms(void)
{
	return now_s() * 1000;
}

struct window_state {
	struct gate_client *gc;
	double *g, *due;
	uint32_t *tag;
	unsigned seed;
};

static void
window_reply(int i, const struct gp_reply *r, void *arg)
{
	struct window_state *st = arg;

	if (r->verb == GP_R_GRANT) {
		st->g[i] = ms();
		st->due[i] = st->g[i] + rand_r(&st->seed) % 100;
	} else if (gc_acquire(&st->gc[i], ++st->tag[i], "up", NULL, NULL, 1, 1, 0) < 0) {
		fatal(1, "write");
	}
}

static void
window(const char *sock, int nc, int secs, double per)
{
	struct window_state st = { xcalloc((size_t)nc, sizeof *st.gc),
	    xcalloc((size_t)nc, sizeof *st.g), xcalloc((size_t)nc, sizeof *st.due),
	    xcalloc((size_t)nc, sizeof *st.tag), 1 };
	struct pollfd *pf = xcalloc((size_t)nc, sizeof *pf);
	double *sg = NULL, *sr = NULL, end = ms() + secs * 1000.0, t;
	size_t n = 0, cap = 0, a, b, worst = 0;
	int i, timeout;

	for (i = 0; i < nc; i++) {
		if (gc_connect(&st.gc[i], sock) < 0)
			fatal(1, "connect");
		if (gc_acquire(&st.gc[i], st.tag[i] = 1, "up", NULL, NULL, 1, 1, 0) < 0)
			fatal(1, "write");
	}
	while ((t = ms()) < end) {
		timeout = 100;
		for (i = 0; i < nc; i++) {
			if (st.due[i] > 0 && t >= st.due[i]) {
				if (n == cap) {
					cap = cap ? cap * 2 : 256;
					sg = xrealloc(sg, cap * sizeof *sg);
					sr = xrealloc(sr, cap * sizeof *sr);
				}
				sg[n] = st.g[i];
				sr[n++] = t;
				st.due[i] = 0;
				if (gc_report_sent(&st.gc[i], st.tag[i], 1, -1) < 0)
					fatal(1, "write");
			} else if (st.due[i] > 0 && st.due[i] - t < timeout) {
				timeout = (int)(st.due[i] - t) + 1;
			}
			pf[i] = (struct pollfd){ st.gc[i].fd, POLLIN, 0 };
		}
		if (poll(pf, (nfds_t)nc, timeout) < 0 && errno != EINTR)
			fatal(1, "poll");
		for (i = 0; i < nc; i++)
			if (pf[i].revents)
				replies(&st.gc[i], i, window_reply, &st);
	}
	/* The most sends whose [grant, report] meets (t - per, t], t at a grant. */
	for (a = 0; a < n; a++) {
		size_t cnt = 0;

		for (b = 0; b < n; b++)
			if (sg[b] <= sg[a] && sr[b] > sg[a] - per)
				cnt++;
		if (cnt > worst)
			worst = cnt;
	}
	printf("worst count in any %.0f ms window: %zu (%zu sends in %d s, %d clients)\n",
	    per, worst, n, secs, nc);
}

int
main(int argc, char **argv)
{
	log_init("gatebench");
	if (argc == 5 && strcmp(argv[2], "rate") == 0)
		rate(argv[1], atol(argv[3]), atoi(argv[4]));
	else if (argc == 4 && strcmp(argv[2], "latency") == 0)
		latency(argv[1], atol(argv[3]));
	else if (argc == 4 && strcmp(argv[2], "gap") == 0)
		gap(argv[1], atoi(argv[3]));
	else if (argc == 5 && strcmp(argv[2], "hold") == 0)
		hold(argv[1], atol(argv[3]), atoi(argv[4]));
	else if (argc == 6 && strcmp(argv[2], "window") == 0)
		window(argv[1], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
	else {
		fprintf(stderr, "usage: gatebench SOCKET rate N CONNS | latency N | gap SECONDS | hold N SECONDS"
		    " | window CLIENTS SECONDS PER_MS\n");
		return 2;
	}
	return 0;
}
