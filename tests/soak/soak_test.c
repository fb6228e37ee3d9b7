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
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

Test(soak, rounds)
{
	struct rt_soak o = {
		.seed = env_num("SOAK_SEED", (unsigned long)time(NULL) ^ (unsigned long)getpid()),
		.messages = env_num("SOAK_MESSAGES", 300),
		.kills = env_num("SOAK_KILLS", 24),
		.mean_gap_ms = (unsigned)env_num("SOAK_GAP_MS", 400),
		.limit = 20, .per = 1, .cap = 3, .concurrency = 2,
	};
	unsigned long rounds = env_num("SOAK_ROUNDS", 4), i;
	struct rt_soak_result res, sum = { 0 };

	rt_say("soak: seed %llu (replay with SOAK_SEED=%llu), %lu rounds of %zu messages "
	    "and %zu kills", o.seed, o.seed, rounds, o.messages, o.kills);
	for (i = 0; i < rounds; i++) {
		o.round = (unsigned)i;
		rt_setup(&t, o.concurrency);
		live = 1;
		rt_soak_round(&t, &o, &res);
		rt_say("soak: round %lu: %zu recipients in %zu transactions in %.1f s; kills: "
		    "%zu weir-send, %zu weir-remote (%zu found none running), %zu weir-gate, %zu "
		    "weir-queued (%zu sendmail runs again, %zu of their transactions repeated); %zu "
		    "in flight; %zu duplicate transactions (bound %zu), %zu extra copies; busiest "
		    "window %zu of %u; %zu S2 leftovers", i, res.recipients, res.transactions,
		    res.seconds, res.send_kills, res.remote_kills, res.remote_misses, res.gate_kills,
		    res.queued_kills, res.reinjected, res.reinjected_dups,
		    res.in_flight, res.duplicates, res.dup_bound, res.extra_copies, res.worst,
		    o.limit, res.s2);
		sum.recipients += res.recipients;
		sum.transactions += res.transactions;
		sum.send_kills += res.send_kills;
		sum.remote_kills += res.remote_kills;
		sum.gate_kills += res.gate_kills;
		sum.queued_kills += res.queued_kills;
		sum.duplicates += res.duplicates;
		sum.dup_bound += res.dup_bound;
		sum.seconds += res.seconds;
		teardown();
	}
	rt_say("soak: seed %llu: %lu rounds, %zu messages, %zu recipients, %zu "
	    "transactions, kills %zu weir-send + %zu weir-remote + %zu weir-gate + %zu "
	    "weir-queued, %zu duplicate transactions (bound %zu), %.1f s", o.seed, rounds,
	    rounds * o.messages, sum.recipients, sum.transactions, sum.send_kills,
	    sum.remote_kills, sum.gate_kills, sum.queued_kills, sum.duplicates, sum.dup_bound,
	    sum.seconds);
}
