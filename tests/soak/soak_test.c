/*
 * soak_test.c: the long kill -9 soak of issue 5 ("Reliability"), run by
 * `make soak` (and so by `make crashtest`), not by `make check` (which
 * runs one short round: faultmatrix/soak_short).
 *
 * SOAK_ROUNDS rounds (default 4), each on a fresh queue and upstream:
 * SOAK_MESSAGES messages (default 300; every 10th to 1-5 recipients)
 * injected with sendmail (through weir-queued) while SOAK_KILLS kill -9s
 * (default 24) hit weir-send, the running weir-remotes, weir-gate or
 * weir-queued at pseudo-random moments.  Every round asserts what rt_soak_round() (relay_helpers.h)
 * promises: every recipient delivered at least once, duplicates only
 * for transactions in flight at a kill and no more than those, no
 * bounce, `weir queue-check` sound, the window invariant held at the
 * upstream over the whole round.  The seed is printed first; SOAK_SEED
 * replays a run's victims and pauses.
 *
 * soak/supervisor_killed (issue 22): the same rounds with the relay
 * under `weir run` (weir-gate with its defaults, as the package runs
 * it), the kills (SOAK_KILLS / 4, at least 1) all of `weir run` itself,
 * a new one started at once: it waits for the killed one's daemons,
 * which stop by themselves, and no process of a generation (counted)
 * is alive once the next has started; the same assertions.  A delivery
 * in flight at a kill counts as maybe sent for the gate's grace (10
 * minutes), hence fewer kills than the other rounds, whose gate has a
 * grace of 2 s.
 *
 * weir_send_killed_while_dots_are_held: a deliverer outlives weir-send.
 * SOAK_DOT_MESSAGES messages (default 60), one recipient each, every
 * third one's final dot held 2 s by the upstream, "5 per 2s", the gate's
 * default grace (10 minutes); SOAK_DOT_KILLS times (default 10) weir-send
 * is killed -9 while a dot is held (at a pseudo-random instant of the
 * hold) and started again.  Asserts: every recipient exactly once (each
 * held message's outcome handed on, none sent again), no bounce, the
 * window held, the queue sound, and drained within 3 minutes (a grant
 * held for the grace would stall it 10).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "relay_helpers.h"

static struct rt t;
static int live;

static void
teardown(void)
{
	if (live)
		rt_teardown(&t);
	live = 0;
}

static unsigned long
env_num(const char *name, unsigned long dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (v == NULL || *v == '\0')
		return dflt;
	n = strtoul(v, &end, 10);
	cr_assert(*end == '\0', "$%s is not a number: %s", name, v);
	return n;
}

TestSuite(soak, .fini = teardown, .timeout = 3600);

/* SOAK_ROUNDS rounds of o, each on a fresh rt, with a line each and one
 * for them all (what: "soak", "soak under weir run"). */
static void
soak(struct rt_soak *o, const char *what)
{
	unsigned long rounds = env_num("SOAK_ROUNDS", 4), i;
	struct rt_soak_result res, sum = { 0 };

	rt_say("%s: seed %llu (replay with SOAK_SEED=%llu), %lu rounds of %zu messages "
	    "and %zu kills", what, o->seed, o->seed, rounds, o->messages, o->kills);
	for (i = 0; i < rounds; i++) {
		o->round = (unsigned)i;
		rt_setup(&t, o->concurrency);
		live = 1;
		rt_soak_round(&t, o, &res);
		rt_say("%s: round %lu: %zu recipients in %zu transactions in %.1f s; kills: "
		    "%zu weir-send, %zu weir-remote (%zu found none running), %zu weir-gate, %zu "
		    "weir-queued (%zu sendmail runs again, %zu of their transactions repeated), "
		    "%zu weir run; %zu in flight; %zu duplicate transactions (bound %zu), %zu "
		    "extra copies; busiest window %zu of %u; %zu S2 leftovers", what, i,
		    res.recipients, res.transactions, res.seconds, res.send_kills,
		    res.remote_kills, res.remote_misses, res.gate_kills, res.queued_kills,
		    res.reinjected, res.reinjected_dups, res.run_kills, res.in_flight,
		    res.duplicates, res.dup_bound, res.extra_copies, res.worst, o->limit, res.s2);
		sum.recipients += res.recipients;
		sum.transactions += res.transactions;
		sum.send_kills += res.send_kills;
		sum.remote_kills += res.remote_kills;
		sum.gate_kills += res.gate_kills;
		sum.queued_kills += res.queued_kills;
		sum.run_kills += res.run_kills;
		sum.duplicates += res.duplicates;
		sum.dup_bound += res.dup_bound;
		sum.seconds += res.seconds;
		teardown();
	}
	rt_say("%s: seed %llu: %lu rounds, %zu messages, %zu recipients, %zu transactions, "
	    "kills %zu weir-send + %zu weir-remote + %zu weir-gate + %zu weir-queued + %zu weir "
	    "run, %zu duplicate transactions (bound %zu), %.1f s", what, o->seed, rounds,
	    rounds * o->messages, sum.recipients, sum.transactions, sum.send_kills,
	    sum.remote_kills, sum.gate_kills, sum.queued_kills, sum.run_kills, sum.duplicates,
	    sum.dup_bound, sum.seconds);
}

Test(soak, rounds)
{
	struct rt_soak o = {
		.seed = env_num("SOAK_SEED", (unsigned long)time(NULL) ^ (unsigned long)getpid()),
		.messages = env_num("SOAK_MESSAGES", 300),
		.kills = env_num("SOAK_KILLS", 24),
		.mean_gap_ms = (unsigned)env_num("SOAK_GAP_MS", 400),
		.limit = 20, .per = 1, .cap = 3, .concurrency = 2,
	};

	soak(&o, "soak");
}

Test(soak, supervisor_killed)
{
	unsigned long kills = env_num("SOAK_KILLS", 24) / 4;
	struct rt_soak o = {
		.seed = env_num("SOAK_SEED", (unsigned long)time(NULL) ^ (unsigned long)getpid()),
		.messages = env_num("SOAK_MESSAGES", 300),
		.kills = kills ? kills : 1,
		.mean_gap_ms = (unsigned)env_num("SOAK_GAP_MS", 400) * 4,
		.limit = 20, .per = 1, .cap = 3, .concurrency = 2,
		.supervised = 1,
	};

	soak(&o, "soak under weir run");
}

/* How many times the upstream's record holds what. */
static size_t
record_count(const char *what)
{
	FILE *f = fopen(t.record, "r");
	char line[8192];
	size_t n = 0;

	while (f && fgets(line, sizeof line, f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

struct held {
	size_t want;
};

static int
dots_held(struct rt *rt, void *arg)
{
	(void)rt;
	return record_count("\"delaying\"") >= ((struct held *)arg)->want;
}

Test(soak, weir_send_killed_while_dots_are_held)
{
	unsigned long long seed = env_num("SOAK_SEED", (unsigned long)time(NULL) ^
	    (unsigned long)getpid());
	size_t m = env_num("SOAK_DOT_MESSAGES", 60), kills = env_num("SOAK_DOT_KILLS", 10), i, k;
	char **to, **flags;
	struct held h;
	struct rt_rec r;
	double t0 = rt_now();

	cr_assert(kills <= m / 3, "more kills than held dots");
	rt_say("soak: dots held: seed %llu (replay with SOAK_SEED=%llu), %zu messages, %zu "
	    "kills of weir-send", seed, seed, m, kills);
	srandom((unsigned)seed);
	rt_setup(&t, 2);
	live = 1;
	to = rt_addrs("d", "dest.example", 1, m);
	flags = xcalloc(2 * m + 1, sizeof *flags);
	for (i = 0, k = 0; i < m; i += 3) {
		flags[k++] = (char *)"--dataend-delay";
		flags[k++] = xasprintf("%s=2", to[i]);
	}
	rt_upstream_start(&t, "good", (const char *const *)flags, 0);
	rt_conf_upstream(&t, "  timeout_data_end = \"30s\"\n");
	rt_policy(&t, "upstream \"isp\" { rate = {\"5 per 2s\"} }\n");
	rt_gate_start(&t, NULL);	/* the default grace */
	rt_send_start(&t);
	for (i = 0; i < m; i++) {
		const char *rc[] = { to[i] };

		rt_sendmail(&t, RT_SOAK_SENDER, rc, 1, "Subject: dot\n\nhello\n");
	}
	for (k = 0; k < kills; k++) {
		/* The next held dot, then a moment of its hold (a random
		 * instant in it, not a wait for an event). */
		h.want = k + 1;
		cr_assert(rt_wait(dots_held, &t, &h, 60000), "kill %zu: no held dot", k + 1);
		usleep((useconds_t)(random() % 1800) * 1000);
		rt_send_kill9(&t);
		rt_send_start(&t);
	}
	cr_assert(rt_wait(rt_drained, &t, NULL, 180000), "not drained 3 min after the start:\n"
	    "...%s", rt_send_logs_tail(&t, 4000));
	rt_rec_load(&t, &r);
	for (i = 0; i < m; i++)
		cr_assert_eq(rt_rec_count(&r, RT_SOAK_SENDER, to[i]), 1, "seed %llu: <%s> "
		    "delivered %zu times", seed, to[i], rt_rec_count(&r, RT_SOAK_SENDER, to[i]));
	rt_assert_no_bounce(&t, &r);
	rt_assert_window(&r, 5, 2.0);
	rt_assert_queue_sound(&t);
	rt_say("soak: dots held: %zu kills of weir-send; a restarted weir-send waited %zu times "
	    "for a deliverer that outlived the last one; %zu messages exactly once in %.1f s",
	    kills, rt_log_count(&t, "waiting for its outcome"), m, rt_now() - t0);
	rt_rec_free(&r);
	for (i = 1; i < 2 * m && flags[i]; i += 2)
		free(flags[i]);
	free(flags);
	rt_addrs_free(to, m);
	teardown();
}
