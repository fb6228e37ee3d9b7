/*
 * route.h: where a batch of a message's recipients goes (weir.conf's
 * recipient_domains, fallback and fallback_when; weir.conf(5), "Backup
 * relays and routing by recipient"), and the one rule that says when an
 * upstream of a route is passed over, used by weir-gate (which knows the
 * windows, suspensions and probes, and decides at its own clock) and by
 * `weir status` (which reads the same state from the gate's status to
 * say where each waiting message will go, and why).
 *
 * Conditions (fallback_when entries, "KIND [DURATION]"), each with its
 * threshold in seconds:
 *   unreachable D  the upstream's last reports say no connection, TLS
 *                  handshake, greeting or EHLO got through, since D or
 *                  more ago (default 10m)
 *   authentication D  it has been refusing our credentials (an AUTH
 *                  suspension, or the probe after one; an OAuth login
 *                  needed is reported as such) for D or more (default 0s)
 *   quota D        the upstream's quota leaves no room for this request
 *                  for more than D (default 1h): weir's own (a window is
 *                  full and its next free slot is more than D away) or
 *                  the provider's (it answered that the sender's or
 *                  account's quota is spent: that suspension's end is a
 *                  free slot no sooner, the gate's free_at says so)
 *   throttled D    a throttle suspension (a rate's or a quota's) has
 *                  more than D left (default 30m; off unless named: some
 *                  providers count spreading mail over accounts as
 *                  evasion)
 * Without fallback_when, a section with fallbacks has unreachable 10m,
 * authentication 0s and quota 1h.
 *
 * The verdict for a request that carries conditions (route_judge):
 *   GO     ask it here as ever
 *   PROBE  the upstream is unreachable, but a probe is due and none is
 *          out: this request goes, as the probe (one at a time)
 *   HOLD   unreachable for less than the threshold: wait here (for a
 *          probe to get through, or the threshold) rather than fail
 *   AVOID  pass it over: the request goes to the next upstream of its
 *          route; `until` is when asking here again makes sense
 * The unreachable probe goes at most every route_probe_ms(): the
 * threshold, at least 1 s and at most a minute.
 *
 * Recipient domains: "example.com" (that domain) or "*.example.com" (its
 * subdomains, not itself); case does not matter.
 *
 * Trusts: nothing; pure, no I/O.  Config keys: fallback_when,
 * recipient_domains (their values).
 */
#ifndef WEIR_ROUTE_H
#define WEIR_ROUTE_H

#include <stdint.h>

enum route_kind { RK_UNREACHABLE, RK_AUTH, RK_QUOTA, RK_THROTTLED, RK_COUNT };

#define RK_OFF		(-1LL)		/* a condition not given */
#define RK_MAX_S	(366LL * 86400)	/* the longest threshold */
#define ROUTE_PROBE_MAX_MS 60000	/* the unreachable probe: at most this apart */

struct route_when {
	long long s[RK_COUNT];	/* threshold in seconds; RK_OFF: not a reason */
};

/* "unreachable", "authentication", "quota", "throttled". */
const char *route_kind_name(enum route_kind k);
/* Its word on the gate's wire and in status JSON: "unreachable",
 * "auth", "quota", "throttled"; route_kind_from_word() the other way
 * (-1: not one). */
const char *route_kind_word(enum route_kind k);
int route_kind_from_word(const char *w);

void route_when_none(struct route_when *w);
void route_when_default(struct route_when *w);
int route_when_any(const struct route_when *w);
/* Add one fallback_when entry ("quota 1h", "authentication"): 0, or -1
 * with why (an unknown kind, a bad duration, a kind given twice: seen
 * says which were). */
int route_when_add(struct route_when *w, const char *entry, unsigned *seen, const char **why);

/* How far apart the unreachable probes go: ms. */
int64_t route_probe_ms(const struct route_when *w);

/* What the judge needs of an upstream, on the caller's clock (ms). */
struct route_state {
	int64_t down_since;	/* first unreachable report of a run of them; 0: none */
	int64_t probe_at;	/* the next unreachable probe may go then */
	int probe_out;		/* an unreachable probe is out */
	int64_t auth_since;	/* authentication trouble since; 0: none */
	int64_t auth_until;	/* its suspension's end (<= now: probing) */
	int auth_probe_out;	/* after it, the one probe allowed is out */
	int64_t susp_until;	/* a throttle suspension's end; 0: none */
	int64_t free_at;	/* the windows have room for this request then,
				 * and a quota's suspension is over;
				 * -1: only a held grant's report can tell */
};

enum route_verdict { RV_GO, RV_PROBE, RV_HOLD, RV_AVOID };

/* The verdict for a request carrying w (route_when_any) at an upstream in
 * state st, now; *why the condition (RV_PROBE, RV_HOLD, RV_AVOID) and
 * *until when to ask again (RV_HOLD: when it stops holding, -1 when only
 * the probe's report can tell; RV_AVOID: > now). */
enum route_verdict route_judge(const struct route_when *w, const struct route_state *st,
    int64_t now, enum route_kind *why, int64_t *until);

/* Recipient domains: NULL if pattern is one, else why not. */
const char *route_domain_problem(const char *pattern);
/* Does pattern take domain (case-insensitive)? */
int route_domain_match(const char *pattern, const char *domain);

#endif
