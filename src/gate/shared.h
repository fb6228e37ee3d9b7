/*
 * shared.h: an upstream's windows kept in Redis for several weir-gates
 * (policy.conf's `shared`).  The local engine (window.c) still queues,
 * orders and times every request; before it grants the head of a shared
 * upstream it asks shared_admit(), which runs one Lua script on the
 * Redis server: the script reads Redis's own clock, counts every window
 * and max_connections over the log and the held grants of all hosts, and
 * records the grant (with a lease) in the same atomic step.  Reports go
 * to Redis too (shared_ended).  Failure is closed: no grant while Redis
 * cannot be reached.
 *
 * Keys, per upstream U (all expire after the longest window):
 *   weir:{U}:log     zset: "id from m r c" scored by t (ms, Redis time):
 *                    a send accepted at some instant in [from, t]
 *   weir:{U}:held    zset: grant id scored by its lease's end (renewed
 *                    by the holding gate while the grant is held)
 *   weir:{U}:heldw   hash: grant id -> "granted m r c"
 *   weir:{U}:epoch   present while Redis holds the history; missing:
 *                    Redis came back empty
 *   weir:{U}:hold    no grant to anyone while it lives (write-back time)
 *   weir:{U}:host:H  host H has written its own history back
 *   weir:{U}:susp    a suspension every host honours (PX = its length)
 *
 * The calls are synchronous hiredis calls with a short timeout
 * (SHARED_TIMEOUT_MS): a Redis that does not answer stalls the gate's
 * loop for at most that long, then counts as down for SHARED_RETRY_MS.
 *
 * Trusts: Redis's replies (shape checked).  Config keys: shared,
 * shared_secret_file (policy.conf).
 */
#ifndef WEIR_GATE_SHARED_H
#define WEIR_GATE_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "gate/window.h"
#include "lib/buf.h"
#include "mail/policy.h"

#define SHARED_TIMEOUT_MS	500		/* connect and each command */
#define SHARED_RETRY_MS		1000		/* while down: try again after */
#define SHARED_POLL_MS		200		/* waiting on other hosts' grants */
/* A grant's lease: the gate's grace (-g: how long after its last sign of
 * life a send may still be accepted), at least SHARED_LEASE_MIN_MS.  The
 * holding gate renews it every quarter of that (at most every
 * SHARED_RENEW_MAX_MS) while the grant is held, so a live host's slow
 * delivery keeps it; a dead host's grant ends one lease after the last
 * renewal and then counts as sent at any instant until then. */
#define SHARED_LEASE_MIN_MS	5000
#define SHARED_RENEW_MAX_MS	60000
#define SHARED_HOLD_MS		3000		/* write-back time after an empty restart */

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

/* Ask Redis for r (head of its upstream, fitting locally).  pu: its
 * policy section; wmm: wall ms minus `now` ms.  1: granted; 0: not now,
 * ask again at *retry.  held: this host's grants of the upstream still
 * held (for a write-back after Redis restarted empty). */
int shared_admit(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    struct wg_req *const *held, size_t nheld, int64_t now, int64_t wmm, int64_t grace,
    int64_t *retry);

/* Once a second per shared upstream u (section pu): is Redis there, and
 * does it still hold the history?  If it came back empty, write this
 * host's history (u's log, its held grants) back now, before any host
 * grants again.  Renews the leases of held (this host's grants of u
 * still held), at once after Redis answers again; the first time, also
 * extends the grants an earlier run of this host left held to a lease
 * from now (the journal counts them until now + grace too).  Returns
 * when to call again. */
int64_t shared_tick(struct shared *sh, const struct policy_upstream *pu, struct wg_up *u,
    struct wg_req *const *held, size_t nheld, int64_t now);

/* r (granted through shared_admit) ended with o; d: what the local engine
 * logged; at: the report's <at> or -1. */
void shared_ended(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    enum wg_outcome o, const struct wg_done *d, int64_t now, int64_t grace);

/* A suspension until `until` (now axis) seen here: every host honours it.
 * until == 0: lift it (RESUME). */
void shared_suspend(struct shared *sh, const struct policy_upstream *pu, int64_t until,
    int64_t now);

/* The store of an upstream: 0 answers; 1 unreachable (*why: the last
 * error); -1 never asked (not shared, or no grant asked yet). */
int shared_state(const struct shared *sh, const char *upstream, const char **why);

/* The store of an upstream as policy.conf names it, or NULL (not asked
 * yet). */
const char *shared_store(const struct shared *sh, const char *upstream);

/* u's windows as Redis counts them now, every host's sends and grants:
 * logged[i] and held[i] for u->win[i] (wmm: wall ms minus `now` ms, for
 * calendar boundaries).  0 ok; -1 the store does not answer or was
 * never asked (see shared_state). */
int shared_counts(struct shared *sh, const struct wg_up *u, int64_t wmm, int64_t now,
    int64_t *logged, int64_t *held);

#endif
