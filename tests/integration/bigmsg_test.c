/*
 * bigmsg_test.c: issue 5's message to 10,000 recipients through the
 * whole real relay (the stand-in upstream, weir-gate, weir-send,
 * weir-remote, sendmail and weir-queue; relay_helpers.h).  It takes a
 * few seconds, so it runs in make check; relay/big_list does 1,000
 * with a few refusals at chosen places.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_fixture.h"

TestSuite(bigmsg, .init = rt_fixture_setup, .fini = rt_fixture_teardown, .timeout = 180);

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Issue 5: one message to 10,000 recipients through the real relay,
 * every 97th refused with 550 by the upstream (103 of them): delivered
 * in transactions of at most 100 (the cap), every other recipient
 * exactly once, weir-send's peak RSS (sampled from /proc every 10 ms)
 * under a generous 64 MB, what it read under 20 times the recipient
 * file (issue 36), and one bounce naming exactly the 103.  The
 * time, the peak RSS and the transactions are printed (BENCHMARKS.md,
 * "One message to 10,000 recipients").
 */
Test(bigmsg, ten_thousand_recipients)
{
	enum { N = 10000, EVERY = 97, CAP = 100 };
	char **rc = xcalloc(N, sizeof *rc), **got = NULL, *rfile, *flagv;
	const char *flags[3];
	struct buf refuse = BUF_INIT, b = BUF_INIT;
	struct rt_rec r;
	size_t i, k, nbad = N / EVERY, ngot = 0, nb = 0, bi = 0, samples, nf = 0;
	long max_rss;
	long long rchar0, rchar, rsize;
	struct timespec t0, t1;
	double secs;

	for (i = 0; i < N; i++) {
		rc[i] = xasprintf("r%05zu@big.example", i + 1);
		if ((i + 1) % EVERY == 0)
			buf_printf(&refuse, "rcpt:%s=550 5.1.1 no such user\n", rc[i]);
	}
	rfile = xasprintf("%s/refuse.txt", t.s.qt.tmp);
	tl_write(rfile, refuse.s, refuse.len);
	flagv = xasprintf("--reply-file=%s", rfile);
	flags[0] = flagv;
	flags[1] = NULL;
	rt_upstream_start(&t, "good", flags, 0);
	rt_conf_upstream(&t, "  max_recipients = 100\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"50 per 1s\"} max_recipients = 100 }\n");
	rt_gate_start(&t, "2s");
	rt_send_start(&t);
	rchar0 = rt_proc_io(t.send.pid, "rchar");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rt_sendmail(&t, RT_SOAK_SENDER, (const char *const *)rc, N,
	    "Subject: to ten thousand\n\nhello all\n");
	max_rss = rt_send_peak_rss(&t, 300000, &samples);
	rt_wait_empty(&t, 1000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	rchar = rt_proc_io(t.send.pid, "rchar") - rchar0;
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert(samples > 5, "only %zu memory samples", samples);
	cr_assert(max_rss < 64 * 1024, "weir-send's RSS reached %ld kB", max_rss);
	/* Issue 36: each batch reads its own part of remote/S/N, not the
	 * whole file (which made the sends O(n^2) in the recipients: 20 MB
	 * read here, 100 times the file).  The reads also count the
	 * deliverers' reports. */
	for (i = 0, rsize = 0; i < N; i++)
		rsize += (long long)strlen(rc[i]) + 2;
	cr_assert(rchar0 >= 0 && rchar > 0 && rchar < 20 * rsize,
	    "weir-send read %lld bytes for a remote file of %lld", rchar, rsize);
	rt_rec_load(&t, &r);
	for (i = 0; i < r.n; i++) {
		if (strcmp(r.v[i].sender, "<>") == 0) {
			nb++;
			bi = i;
			continue;
		}
		cr_assert(r.v[i].nrcpt <= CAP, "a transaction with %zu recipients", r.v[i].nrcpt);
		got = xrealloc(got, (ngot + r.v[i].nrcpt) * sizeof *got);
		for (k = 0; k < r.v[i].nrcpt; k++)
			got[ngot++] = r.v[i].rcpts[k];
	}
	/* Every good recipient exactly once, no refused one: the sorted
	 * list of what the upstream accepted is the good ones in order. */
	cr_assert_eq(ngot, N - nbad, "%zu recipients accepted, expected %zu", ngot, N - nbad);
	qsort(got, ngot, sizeof *got, cmp_str);
	for (i = 0, k = 0; i < N; i++) {
		if ((i + 1) % EVERY == 0)
			continue;
		cr_assert_str_eq(got[k], rc[i], "accepted #%zu is <%s>, expected <%s>", k, got[k],
		    rc[i]);
		k++;
	}
	cr_assert(r.n - nb >= (N - nbad + CAP - 1) / CAP, "%zu transactions", r.n - nb);
	/* One bounce to the sender, naming exactly the refused ones. */
	cr_assert_eq(nb, 1, "%zu bounces", nb);
	cr_assert_str_eq(r.v[bi].rcpts[0], RT_SOAK_SENDER);
	rt_rec_message(&t, &r.v[bi], &b);
	{
		const char *p = buf_cstr(&b);

		while ((p = strstr(p, "Final-Recipient: rfc822; ")) != NULL) {
			unsigned long n;

			p += 25;
			cr_assert(sscanf(p, "r%5lu@big.example\r", &n) == 1 && n % EVERY == 0,
			    "the bounce names <%.30s>, which was not refused", p);
			nf++;
		}
	}
	cr_assert_eq(nf, nbad, "the bounce names %zu recipients, %zu were refused", nf, nbad);
	for (i = EVERY - 1; i < N; i += EVERY) {
		char *want = xasprintf("Final-Recipient: rfc822; %s\r\n", rc[i]);

		cr_assert(strstr(buf_cstr(&b), want), "the bounce misses <%s>", rc[i]);
		free(want);
	}
	rt_assert_window(&r, 50, 1.0);
	rt_assert_queue_sound(&t);
	rt_say("bigmsg: 10,000 recipients: %.1f s from sendmail to an empty queue, %zu "
	    "transactions (and 1 bounce), weir-send's peak RSS %ld kB over %zu samples, %zu "
	    "refused and bounced, %lld bytes read by weir-send (remote/ file: %lld)\n", secs,
	    r.n - nb, max_rss, samples, nf, rchar, rsize);
	free(got);
	rt_rec_free(&r);
	buf_free(&b);
	buf_free(&refuse);
	free(rfile);
	free(flagv);
	for (i = 0; i < N; i++)
		free(rc[i]);
	free(rc);
}
