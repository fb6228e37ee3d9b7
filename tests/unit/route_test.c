/* route_test.c: the conditions of fallback_when and the verdict that
 * passes an upstream over (mail/route.h), on a simulated clock. */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/route.h"

static struct route_when
when(const char *const *entries)
{
	struct route_when w;
	unsigned seen = 0;
	const char *why;
	size_t i;

	route_when_none(&w);
	for (i = 0; entries[i]; i++)
		cr_assert_eq(route_when_add(&w, entries[i], &seen, &why), 0, "%s: %s",
		    entries[i], why);
	return w;
}

static struct route_state
fine(void)
{
	struct route_state st;

	memset(&st, 0, sizeof st);
	st.free_at = 1000;
	return st;
}

Test(route, entries_and_defaults)
{
	const char *const e[] = { "throttled", "unreachable 2m", NULL };
	struct route_when w = when(e), d;
	unsigned seen = 0;
	const char *why;

	cr_assert_eq(w.s[RK_THROTTLED], 1800);
	cr_assert_eq(w.s[RK_UNREACHABLE], 120);
	cr_assert_eq(w.s[RK_AUTH], RK_OFF);
	cr_assert_eq(w.s[RK_QUOTA], RK_OFF);
	route_when_default(&d);
	cr_assert_eq(d.s[RK_UNREACHABLE], 600);
	cr_assert_eq(d.s[RK_AUTH], 0);
	cr_assert_eq(d.s[RK_QUOTA], 3600);
	cr_assert_eq(d.s[RK_THROTTLED], RK_OFF);
	cr_assert_eq(route_when_add(&d, "quota 367d", &seen, &why), -1);
	cr_assert_eq(route_when_add(&d, "quota 1h ", &seen, &why), -1);
	cr_assert_eq(route_when_add(&d, "Quota", &seen, &why), -1);
	cr_assert_eq(route_when_add(&d, "quota 0s", &seen, &why), 0);
	cr_assert_eq(d.s[RK_QUOTA], 0);
	cr_assert_eq(route_when_add(&d, "quota", &seen, &why), -1, "twice");
	cr_assert_eq(route_kind_from_word("auth"), RK_AUTH);
	cr_assert_eq(route_kind_from_word("authentication"), -1);
	cr_assert_str_eq(route_kind_word(RK_QUOTA), "quota");
}

Test(route, probes_go_a_threshold_apart_at_most_a_minute)
{
	const char *const a[] = { "unreachable 0s", NULL }, *const b[] = { "unreachable 10s", NULL },
	    *const c[] = { "unreachable 10m", NULL };
	struct route_when wa = when(a), wb = when(b), wc = when(c);

	cr_assert_eq(route_probe_ms(&wa), 1000);
	cr_assert_eq(route_probe_ms(&wb), 10000);
	cr_assert_eq(route_probe_ms(&wc), 60000);
}

Test(route, unreachable_holds_then_avoids_with_one_probe_at_a_time)
{
	const char *const e[] = { "unreachable 10s", NULL };
	struct route_when w = when(e);
	struct route_state st = fine();
	enum route_kind why;
	int64_t until;

	cr_assert_eq(route_judge(&w, &st, 5000, &why, &until), RV_GO);
	st.down_since = 5000;
	st.probe_at = 15000;	/* the failure sets the next probe */
	cr_assert_eq(route_judge(&w, &st, 6000, &why, &until), RV_HOLD);
	cr_assert_eq(why, RK_UNREACHABLE);
	cr_assert_eq(until, 15000);
	/* At the threshold it is passed over until the probe. */
	cr_assert_eq(route_judge(&w, &st, 14999, &why, &until), RV_HOLD);
	st.probe_at = 20000;
	cr_assert_eq(route_judge(&w, &st, 15000, &why, &until), RV_AVOID);
	cr_assert_eq(until, 20000);
	cr_assert_eq(route_judge(&w, &st, 20000, &why, &until), RV_PROBE);
	st.probe_out = 1;
	cr_assert_eq(route_judge(&w, &st, 20000, &why, &until), RV_AVOID);
	cr_assert_eq(until, 30000, "the probe out: ask again an interval later");
	/* Before the threshold, a probe out: hold until the threshold. */
	st.down_since = 18000;
	cr_assert_eq(route_judge(&w, &st, 20000, &why, &until), RV_HOLD);
	cr_assert_eq(until, 28000);
}

Test(route, authentication_avoids_while_suspended_and_while_the_probe_is_out)
{
	const char *const e[] = { "authentication", NULL }, *const l[] = { "authentication 1h", NULL };
	struct route_when w = when(e), wl = when(l);
	struct route_state st = fine();
	enum route_kind why;
	int64_t until;

	st.auth_since = 1000;
	st.auth_until = 301000;
	cr_assert_eq(route_judge(&w, &st, 1000, &why, &until), RV_AVOID);
	cr_assert_eq(why, RK_AUTH);
	cr_assert_eq(until, 301000);
	/* Not long enough yet for a threshold of an hour: wait there. */
	cr_assert_eq(route_judge(&wl, &st, 1000, &why, &until), RV_GO);
	/* The suspension over: the one probe goes; others pass over. */
	cr_assert_eq(route_judge(&w, &st, 301000, &why, &until), RV_GO);
	st.auth_probe_out = 1;
	cr_assert_eq(route_judge(&w, &st, 301000, &why, &until), RV_AVOID);
	cr_assert_eq(until, 301000 + ROUTE_PROBE_MAX_MS);
}

Test(route, quota_and_throttled_by_their_thresholds)
{
	const char *const e[] = { "quota 1h", "throttled 10m", NULL };
	struct route_when w = when(e), off;
	struct route_state st = fine();
	enum route_kind why;
	int64_t until;

	st.free_at = 1000 + 3600 * 1000;
	cr_assert_eq(route_judge(&w, &st, 1000, &why, &until), RV_GO, "exactly the threshold");
	st.free_at++;
	cr_assert_eq(route_judge(&w, &st, 1000, &why, &until), RV_AVOID);
	cr_assert_eq(why, RK_QUOTA);
	cr_assert_eq(until, st.free_at);
	st.free_at = -1;	/* held grants fill it: only a report tells */
	cr_assert_eq(route_judge(&w, &st, 1000, &why, &until), RV_GO);
	st.susp_until = 1000 + 600 * 1000 + 1;
	cr_assert_eq(route_judge(&w, &st, 1000, &why, &until), RV_AVOID);
	cr_assert_eq(why, RK_THROTTLED);
	cr_assert_eq(route_judge(&w, &st, 2000, &why, &until), RV_GO, "less left now");
	route_when_none(&off);
	off.s[RK_QUOTA] = 3600;
	cr_assert_eq(route_judge(&off, &st, 1000, &why, &until), RV_GO,
	    "throttled is not a reason unless named");
}

Test(route, domains)
{
	cr_assert_null(route_domain_problem("gmail.com"));
	cr_assert_null(route_domain_problem("*.example.com"));
	cr_assert_not_null(route_domain_problem("*"));
	cr_assert_not_null(route_domain_problem("*.*.example.com"));
	cr_assert_not_null(route_domain_problem("[127.0.0.1]"));
	cr_assert_not_null(route_domain_problem("a..b"));
	cr_assert(route_domain_match("gmail.com", "GMail.Com"));
	cr_assert(!route_domain_match("gmail.com", "x.gmail.com"));
	cr_assert(route_domain_match("*.example.com", "a.b.EXAMPLE.com"));
	cr_assert(!route_domain_match("*.example.com", "example.com"));
	cr_assert(!route_domain_match("*.example.com", "badexample.com"));
}
