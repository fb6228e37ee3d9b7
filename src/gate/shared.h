/*
 * shared.h: an upstream's windows kept in Redis for several weir-gates
 * (policy.conf's `shared`).  The local engine (window.c) still queues,
 * orders and times every request; before it grants the head of a shared
 * upstream it asks shared_admit(), which runs one Lua script on the
 * Redis server: the script reads Redis's own clock, counts every window
 * and max_connections over the log and the held grants of all hosts, and
 * records the grant (with a lease) in the same atomic step.  Reports go
 * to Redis too (shared_ended).  Failure is closed: no grant while Redis
 * cannot be reached, nor while the store's history is not proven whole.
 *
 * The store is one Redis (redis://, unix:), or the master that Redis
 * Sentinel names (redis-sentinel://): the sentinels are asked at each
 * connect (the answer with the highest config epoch), their
 * +switch-master is followed (a subscription whose descriptor the caller
 * watches: shared_set_watch, shared_readable), and a Redis that says it
 * is a replica is never written to.
 *
 * A gate's history is proven in the store while it speaks to the Redis
 * (ident: "RUNID:REPLID", its run id and replication id, read at
 * connect) that answered every write of its own; otherwise (its start,
 * a write that failed or got no answer, another Redis: restarted,
 * promoted, from an older snapshot) it writes its own history back from
 * its journal (its log and held grants) before it grants again.  A store
 * whose ident is not the one the window was made whole on begins a
 * rebuild: no grant to any host for SHARED_HOLD_MS, and until every host
 * that was alive when the store's history ends wrote its own back, at
 * most SHARED_REBUILD_MAX_MS (common.lua).
 *
 * Keys, per upstream U (all expire after the longest window + lease):
 *   weir:{U}:log     zset: "id from m r c" scored by t (ms, Redis time):
 *                    a send accepted at some instant in [from, t]
 *   weir:{U}:held    zset: grant id scored by its lease's end (renewed
 *                    by the holding gate while the grant is held)
 *   weir:{U}:heldw   hash: grant id -> "granted m r c"
 *   weir:{U}:gen     the ident of the Redis the history was made whole on
 *   weir:{U}:built   hash: the hosts that wrote their history back on it
 *   weir:{U}:hosts   zset: each host by its last call (Redis ms)
 *   weir:{U}:rebuild while a rebuild holds every grant: its start
 *   weir:{U}:waitfor set: the hosts the rebuild still waits for
 *   weir:{U}:susp    a suspension every host honours (PX = its length):
 *                    "HOST KIND REPLY", the host that met it, its kind
 *                    (quota, throttle or auth) and the upstream's reply
 *                    (at most SHARED_REASON_MAX bytes); "HOST" alone (the
 *                    value of a weir that stored no kind) reads as a
 *                    throttle.  Every
 *                    other host keeps a copy (window.h's ssusp_*) for
 *                    fallback_when and status, as the host that met it
 *                    has its own suspension.  Of two, the one that ends
 *                    later is kept (common.lua's suspend()).
 *   weir:{U}:lift    "N T HOST": the store's Nth RESUME, the last, at
 *                    Redis ms T, by HOST (PX: at least the longest window
 *                    plus lease, and what was left of the suspension).
 *                    The host that met a suspension notes N when it
 *                    stores it; a larger N in the same store (ident)
 *                    lifts its own suspension too (shared_tick).  A key
 *                    susp that went with no larger N was lost, not
 *                    lifted: its host writes it back.
 * Ids (grants, log entries) begin with "HOST.": a host's own entries.
 *
 * The calls are synchronous hiredis calls with a short timeout
 * (SHARED_TIMEOUT_MS): a Redis or a sentinel that does not answer stalls
 * the gate's loop for at most that long, then counts as down for
 * SHARED_RETRY_MS.
 *
 * Trusts: Redis's and the sentinels' replies (shape checked).  Config
 * keys: shared, shared_secret_file, shared_sentinel_secret_file
 * (policy.conf).
 */
#ifndef WEIR_GATE_SHARED_H
#define WEIR_GATE_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "gate/window.h"
#include "lib/buf.h"
#include "mail/policy.h"

#define SHARED_TIMEOUT_MS	500		/* connect and each command */
#define SHARED_RETRY_MS		1000		/* while down: try again after;
						 * while up: check once per */
#define SHARED_POLL_MS		200		/* waiting on other hosts' grants */
/* A grant's lease: the gate's grace (-g: how long after its last sign of
 * life a send may still be accepted), at least SHARED_LEASE_MIN_MS.  The
 * holding gate renews it every quarter of that (at most every
 * SHARED_RENEW_MAX_MS) while the grant is held, so a live host's slow
 * delivery keeps it; a dead host's grant ends one lease after the last
 * renewal and then counts as sent at any instant until then. */
#define SHARED_LEASE_MIN_MS	5000
#define SHARED_RENEW_MAX_MS	60000
/* A rebuild holds every grant at least SHARED_HOLD_MS (every live gate
 * checks once per SHARED_RETRY_MS: time for each to write its history
 * back), then until the hosts whose last call came within
 * SHARED_ALIVE_MS of the store's last one have, at most
 * SHARED_REBUILD_MAX_MS (a host that died meanwhile never will). */
#define SHARED_HOLD_MS		3000
#define SHARED_ALIVE_MS		5000
#define SHARED_REBUILD_MAX_MS	10000
#define SHARED_REASON_MAX	512	/* of the reply stored with a suspension */

struct shared;

/* host: this gate's name in Redis (unique per gate, stable across its
 * runs: no spaces, no dots); run: unique per run (grant ids); grace_ms:
 * the gate's grace, which sets the lease (above). */
struct shared *shared_new(const char *host, const char *run, int64_t grace_ms);
/* The same, named by this host's name and the journal's path (two gates
 * of one machine are two hosts) and by the time and pid for the run. */
struct shared *shared_new_for(const char *journal, int64_t wall_ms, int64_t grace_ms);
/* The lease of this gate's grants, ms. */
int64_t shared_lease_ms(const struct shared *sh);
void shared_free(struct shared *sh);

/* The descriptors to watch for reading (a sentinel's +switch-master):
 * fn(arg, fd, 1) when one opens, fn(arg, fd, 0) before it is closed; the
 * caller then calls shared_readable(sh, fd, now) when fd is readable,
 * and shared_tick soon after. */
typedef void shared_watch_fn(void *arg, int fd, int on);
void shared_set_watch(struct shared *sh, shared_watch_fn *fn, void *arg);
void shared_readable(struct shared *sh, int fd, int64_t now);

/* Ask Redis for r (head of its upstream, fitting locally).  pu: its
 * policy section.  1: granted; 0: not now, ask again at *retry.  held:
 * this host's grants of the upstream still held (for a write-back). */
int shared_admit(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    struct wg_req *const *held, size_t nheld, int64_t now, int64_t *retry);

/* Once a second per shared upstream u (section pu): is the store there,
 * and does it hold this host's history?  If not proven, write it back
 * now (u's log, its held grants).  Renews the leases of held (this
 * host's grants of u still held).  Reads the store's suspension into
 * u's copy (as shared_admit does).  *lifted: 1 when a RESUME at another
 * host lifted u's own suspension (lifted here, wg_lift, and logged: the
 * caller journals it).  Returns when to call again. */
int64_t shared_tick(struct shared *sh, const struct policy_upstream *pu, struct wg_up *u,
    struct wg_req *const *held, size_t nheld, int64_t now, int *lifted);

/* r (granted through shared_admit) ended with o; d: what the local engine
 * logged. */
void shared_ended(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    enum wg_outcome o, const struct wg_done *d, int64_t now, int64_t grace);

/* This gate's history of upstream changed in a way no script says (a
 * SETTLE): written back at the next shared_tick. */
void shared_rewrite(struct shared *sh, const char *upstream);

/* A suspension of u until `until` (now axis) seen here: every host
 * honours it, and sees its kind and reply (u's suspension that ends
 * last).  until == 0: lift it (RESUME). */
void shared_suspend(struct shared *sh, const struct policy_upstream *pu, const struct wg_up *u,
    int64_t until, int64_t now);

/* The store of an upstream, for status. */
struct shared_info {
	const char *store;	/* as policy.conf names it */
	int down;		/* it does not answer: */
	const char *why;	/*   the last error */
	const char *addr;	/* where it was found: "HOST:PORT", the socket, or
				 * "master NAME HOST:PORT" (sentinels); NULL:
				 * never */
	unsigned switches;	/* sentinels: changes of master seen */
	int64_t switch_at;	/*   the last (now axis; 0: none) */
	int written;		/* this gate's history is proven in it */
	int rebuilding;		/* a rebuild held the last grant or check */
	int64_t rebuilt_at;	/* this gate's last write-back (now axis; 0: none) */
};
/* 0 with *si; -1: not asked yet (not shared, or no grant asked yet). */
int shared_info(const struct shared *sh, const char *upstream, struct shared_info *si);

/* u's windows as Redis counts them now, every host's sends and grants:
 * logged[i] and held[i] for u->win[i] (wmm: wall ms minus `now` ms, for
 * calendar boundaries).  0 ok; -1 the store does not answer or was
 * never asked. */
int shared_counts(struct shared *sh, const struct wg_up *u, int64_t wmm, int64_t now,
    int64_t *logged, int64_t *held);

#endif
