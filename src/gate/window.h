/*
 * window.h: weir-gate's rate engine, pure: no I/O, no clock of its own.
 * Every function that needs the time takes `now`, milliseconds on one
 * monotonic axis chosen by the caller (the daemon: CLOCK_MONOTONIC; the
 * tests: a simulated clock).
 *
 * Per upstream it keeps one log of completed sends (time, weight per
 * unit), the weight held by grants not yet reported, a queue of waiting
 * requests and a suspension.  A request of weight w is granted only when,
 * for every window (N, T, unit) of its upstream,
 *
 *     logged weight in (now - T, now]  +  held weight  +  w  <=  N
 *
 * (calendar windows: logged weight since the last boundary).  A grant
 * holds its weight until reported; a report logs the send at the time the
 * deliverer read the upstream's 250 (clamped into [grant, report]) or at
 * the report's time; a refund (nothing reached the upstream) logs
 * nothing; a session that never got to MAIL logs only its connection.  A
 * send whose outcome is unknown (reported so, or its client disappeared)
 * may have been accepted at any instant from its grant to report + grace:
 * it is logged as an interval [from, t] and counts in a sliding window
 * until t + T, in a calendar window in every period it overlaps.  The log
 * is kept ordered by t (the instant an entry stops being able to be
 * accepted); an interval never moves another entry.  Hence, as the
 * upstream sees it, for every window and every instant s the weight of
 * sends in [s, s + T) is at most N, whatever the network delay.
 *
 * Order: the head of an upstream's queue is the oldest request of the
 * highest priority, and nothing behind it is granted before it (no
 * starvation of big requests, no overtaking by lower classes).
 *
 * Fallbacks (mail/route.h): a request may carry conditions (`unless`)
 * under which it is not to wait here.  Before and after each round of
 * grants, every waiting request that carries them is judged on the
 * upstream's state (route_judge): AVOID refuses it (WG_LATER, with the
 * condition and when to ask again), HOLD keeps it waiting (the timer set
 * for when that ends), PROBE grants it as the upstream's one unreachable
 * probe.  The state: an unreachable spell (UNREACHED or NOGREETING
 * reports, from the first of a run until a report on a message of any
 * other outcome but REFUND and UNKNOWN, a resume or a reload; the next
 * probe one route_probe_ms() after the last failure, one at a time), the
 * authentication trouble (from its first suspension to the first good
 * report), the throttle suspension, and the windows' next free slot for
 * the request.  Not journalled: a restarted gate starts with no spell.
 *
 * Trusts: its caller to pass non-decreasing `now` (it clamps log times so
 * the log stays ordered even if not).  Config keys: those of policy.h,
 * through struct policy.
 */
#ifndef WEIR_GATE_WINDOW_H
#define WEIR_GATE_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "mail/policy.h"
#include "mail/route.h"

/* Why a request was refused or ended; the protocol's error words. */
enum wg_code {
	WG_OK = 0,
	WG_NOPOLICY,	/* no such upstream in the policy (no longer used
			 * for requests: they wait for a policy) */
	WG_NOCLASS,	/* no such class */
	WG_TOOBIG,	/* bigger than a window's limit or a cap: can never fit */
	WG_BADWEIGHT,	/* all weights zero */
	WG_LATER,	/* its unless holds: ask elsewhere (r->later_*) */
};

enum wg_outcome {
	WG_SENT,	/* accepted: log it at `at` (clamped), or now */
	WG_REFUND,	/* nothing reached the upstream: give the slot back */
	WG_THROTTLED,	/* the upstream said "slow down": log it and suspend */
	WG_UNKNOWN,	/* maybe accepted: log [grant, now + grace] */
	WG_NOMAIL,	/* no MAIL accepted: log only the connection */
	WG_AUTHFAIL,	/* authentication refused: as NOMAIL, and suspend */
	WG_UNREACHED,	/* no connection: as REFUND; the upstream is unreachable */
	WG_NOGREETING,	/* TLS, greeting or EHLO failed: as NOMAIL; unreachable */
	WG_QUOTA,	/* the sender's or account's quota is spent: as THROTTLED,
			 * the suspension a quota's (susp_quota) */
};

#define WG_AUTH_SUSPEND_MS	(5 * 60 * 1000)	/* first auth suspension */
#define WG_AUTH_SUSPEND_MAX_MS	(3600 * 1000)	/* doubling up to this */

/* One logged send: accepted at t (from == t), or at an unknown instant in
 * [from, t] (an unknown outcome: id is its grant's, for wg_settle). */
struct wg_send {
	int64_t from, t;
	uint64_t id;		/* from < t: the grant; else 0 */
	uint32_t w[UNIT_COUNT];
	int32_t ok;		/* a WG_SENT's recipients the upstream accepted (0: none,
				 * and any other outcome); -1: not known (an entry
				 * the journal gave back) */
};

/* What a report or a cancel did, for the caller's journal and log. */
struct wg_done {
	int logged;		/* an entry went into the log: */
	int64_t from, t;	/*   its interval (from == t: at t) */
	uint32_t w[UNIT_COUNT];	/*   and weight */
	int64_t until;		/* the suspension's end, when it suspended */
	int new_episode;	/* this report began a suspension episode */
	int down_began;		/* it began an unreachable spell */
	int down_ended;		/* it ended one (the spell's start in from) */
	int64_t down_from;
};

struct wg_win {
	int64_t limit;
	int64_t per;		/* ms */
	enum policy_unit unit;
	int calendar;
	int64_t phase;		/* calendar: boundaries at now == phase (mod per) */
	uint64_t first;		/* sequence number of the oldest entry counted */
	int64_t sum;		/* logged weight from first to the end */
};

struct wg_req;

/* While the policy does not name an upstream, its history is kept for at
 * least this long, and for the longest window it has had since the gate
 * started: a section removed from the policy and put back, or a policy
 * missing or broken at start, finds its sends still counted.  (While the
 * policy names it, what no window counts any more goes.) */
#define WG_HORIZON_MIN_MS	(24LL * 3600 * 1000)

#define WG_NCOUNTS 11	/* gateproto.h's GP_NCOUNTS */

/* The history status shows (weir-metrics' chart): every entry the log
 * took, as it took it, for WG_HISTORY_MS after its time whatever the
 * windows need, at most WG_HISTORY_MAX per upstream (the oldest go
 * first).  Memory only: after a restart it holds what the journal gave
 * back, the sends the windows still counted. */
#define WG_HISTORY_MS	(3600LL * 1000)
#define WG_HISTORY_MAX	4096

/* An upstream's backlog (status: where a drain's progress counts from):
 * a spell during which it has a request for a message waiting or a
 * message's grant held, gaps of at most WG_BUSY_GAP_MS (between one
 * batch's report and the next one's request) included. */
#define WG_BUSY_GAP_MS	(60 * 1000)

struct wg_up {
	char *name;
	int in_policy;		/* 0: not (or no longer) in the policy: its
				 * history is kept, its requests wait */
	int64_t horizon;	/* ms of history kept (WG_HORIZON_MIN_MS or more) */
	int64_t max_rcpt, max_conn, msgs_per_conn;	/* 0: no cap */
	int64_t grace;		/* ms: its section's grace, else the gate's (wg_grace) */
	struct wg_win *win;
	size_t nwin;
	/* Log of sends: a ring; entry with sequence s is at
	 * log[(lhead + (s - lseq)) % lcap]. */
	struct wg_send *log;
	size_t lcap, lhead, ln;
	uint64_t lseq;
	/* The history (WG_HISTORY_MS, WG_HISTORY_MAX): a ring in the order
	 * the entries came, read with wg_history_at. */
	struct wg_send *hist;
	size_t hhead, hn;
	int64_t hdropped;	/* t of the newest entry the full ring dropped;
				 * INT64_MIN: none */
	int64_t held[UNIT_COUNT];
	size_t nheld;
	struct wg_req *wait_head, *wait_tail;
	size_t nwait;
	/* Suspension. */
	int64_t susp_until;
	int64_t susp_len;	/* last period applied; 0 after a success */
	int64_t susp_start;	/* when it was applied: sends granted before
				 * are of the same episode */
	char *susp_reason;
	int susp_quota;		/* it is for a quota reply (WG_QUOTA): fallback_when's
				 * quota counts it (wg_route_state) */
	/* The suspension another host stored in the shared store (shared.c),
	 * as this gate last read it (once a second, and at each grant it
	 * asks): until (now axis; 0: none), a quota's, the reply and the
	 * host.  Not journalled: the store keeps it, and the host that
	 * wrote it writes it back.  wg_suspension() merges it with u's own. */
	int64_t ssusp_until;
	int ssusp_quota;
	char *ssusp_reason, *ssusp_host;
	/* Authentication suspension (AUTHFAIL): lifted by a reload or a
	 * resume, or at a start whose credentials differ from auth_fp (the
	 * caller's fingerprint of those that failed, mail/credfp.h;
	 * auth_fp_known 0: a journal from before fingerprints, kept); after
	 * it, one grant at a time (probe) until a report other than AUTHFAIL
	 * or THROTTLED. */
	int64_t auth_until, auth_len, auth_start;
	/* When it was last lifted: a failure reported of a send granted
	 * before then was made with the credentials of before the lift
	 * (the deliverer read them at its start), which may be fixed now:
	 * it starts no new suspension. */
	int64_t auth_lift;
	char *auth_reason;
	uint64_t auth_fp;
	int auth_fp_known;
	int auth_oauth;		/* the caller's: an oauth section (mail/credfp.h's cred_fix) */
	int probe;
	int64_t auth_since;	/* the authentication trouble began (its first
				 * suspension); 0: none (route.h) */
	/* The unreachable spell (route.h): since its first UNREACHED or
	 * NOGREETING (0: none), what failed, when the next probe may go,
	 * and the grant that is the probe out (0: none). */
	int64_t down_since;
	char *down_reason;
	int64_t probe_at;
	uint64_t probe_id;
	size_t nwait_unless;	/* waiting requests that carry unless */
	/* Shared store (policy's `shared`): every grant also needs the
	 * caller's admit(); until shared_retry (ms on the now axis; 0: none)
	 * the head waits for the store. */
	int shared;
	int64_t shared_retry;
	/* Its backlog (WG_BUSY_GAP_MS): when the spell began (0: none yet),
	 * and when it last had nothing for a message (0: busy now). */
	int64_t busy_since, idle_since;
	/* Counters for status.  n_sent: SENT reports with a recipient
	 * accepted (a send); n_sent_none: those with none. */
	uint64_t n_granted, n_sent, n_sent_none, n_refunded, n_throttled, n_unknown, n_nomail,
	    n_authfail;
	uint64_t n_unreached;	/* UNREACHED and NOGREETING reports */
	uint64_t n_later;	/* requests answered LATER */
	uint64_t n_rcpt_accepted;	/* recipients the SENT reports say were accepted */
	uint64_t n_settled;	/* unknown outcomes settled later (wg_settle) */
	/* weir-send's latest COUNTS line (server.c; gateproto.h's enum
	 * gp_count order), shown by status.c; not journalled. */
	int has_counts;
	uint64_t counts[WG_NCOUNTS];
	struct wg_up *next;
};

struct wg_req {
	uint64_t id;
	struct wg_up *up;
	long long prio;
	char cls[POLICY_NAME_MAX + 1];	/* "" for the default class */
	uint32_t w[UNIT_COUNT];
	int granted;
	int started;			/* in use (handed to a deliverer): 1 unless the
					 * caller says otherwise (a client's STARTS) */
	uint32_t accepted;		/* the caller's, before a WG_SENT report: the
					 * recipients the upstream accepted */
	int64_t since;			/* queued at; granted at once granted */
	struct route_when unless;	/* not to wait here when one holds (route.h) */
	int has_unless;
	enum route_kind later_why;	/* WG_LATER: the condition that held */
	int64_t later_until;		/* and when to ask again (> now) */
	void *owner;			/* the caller's */
	struct wg_req *prev, *next;	/* in the wait queue while waiting */
};

/* Called by wg_pump() for each request it grants (in grant order), and
 * by wg_set_policy() for each waiting request a new policy refuses (the
 * request is freed right after the call). */
struct wg_ops {
	void (*granted)(void *arg, struct wg_req *r);
	void (*refused)(void *arg, struct wg_req *r, enum wg_code code);
	/* Upstreams with a shared store: called for the head when it fits
	 * here; 1: grant it; 0: not now, *retry (> now) is when to ask
	 * again.  And called for each granted request that ends, before it
	 * is freed, with what the report logged. */
	int (*admit)(void *arg, struct wg_req *r, int64_t now, int64_t *retry);
	void (*ended)(void *arg, struct wg_req *r, enum wg_outcome o, const struct wg_done *d,
	    int64_t now);
	void *arg;
};

struct wgate {
	struct wg_up *ups;
	const struct policy *pol;
	int64_t wall_minus_mono;	/* ms; places calendar boundaries */
	int64_t grace;			/* ms: how long after its report or its
					 * client's death an unknown outcome may
					 * still be an acceptance (weir-gate -g),
					 * for an upstream whose section sets none */
	uint64_t next_id;
	struct wg_ops ops;
};

void wg_init(struct wgate *g, const struct wg_ops *ops);
/* Frees the upstreams and the waiting requests; a granted request belongs
 * to the caller until wg_report or wg_cancel. */
void wg_free(struct wgate *g);

/* Install a policy (the caller keeps it alive until the next call).
 * History is kept per upstream name and re-counted against the new
 * windows at once; waiting requests that can no longer ever fit are
 * refused through ops; those of an upstream the policy does not name
 * wait for one that does.  wall_minus_mono: wall-clock
 * ms minus `now` ms, for calendar boundaries. */
void wg_set_policy(struct wgate *g, const struct policy *pol, int64_t wall_minus_mono,
    int64_t now);

/* A new request.  WG_OK: *out is queued (call wg_pump to grant it; for
 * an upstream no policy names yet, it waits for a policy that does);
 * otherwise refused and nothing is kept.  cls: a class name or NULL (then
 * chosen by sender and the recipient weight).  unless: NULL, or its
 * conditions (route.h; all RK_OFF: none): the request is refused through
 * ops with WG_LATER, at the next wg_pump, while they hold. */
enum wg_code wg_acquire(struct wgate *g, const char *upstream, const char *cls,
    const char *sender, const uint32_t w[UNIT_COUNT], const struct route_when *unless,
    void *owner, int64_t now, struct wg_req **out);

/* Grant, in order, every request that fits now. Returns how many. */
size_t wg_pump(struct wgate *g, int64_t now);

/* The earliest time (> now) at which some waiting request could be
 * granted if nothing else happens, or -1 when only a report (or a
 * reload) can let one through. */
int64_t wg_next_wake(struct wgate *g, int64_t now);

/* End a granted request.  For WG_THROTTLED and WG_AUTHFAIL, reply is the
 * upstream's reply (matched against throttle_reply).  at: for WG_SENT the
 * instant of acceptance, clamped into [grant, now], or -1 for now; else
 * ignored.  WG_SENT counts as a send (n_sent) when r->accepted > 0.
 * Fills *d if not NULL.  Returns the suspension end (ms on the `now`
 * axis) when the report suspended the upstream, else 0.  Frees r. */
int64_t wg_report_at(struct wgate *g, struct wg_req *r, enum wg_outcome o,
    const char *reply, int64_t at, int64_t now, struct wg_done *d);
/* A send of unknown outcome in u's log, grant id's, whose outcome o is
 * known after all (its client is gone: the caller checks): taken out of
 * its interval and logged as a report of o at now would log it (WG_SENT
 * at `at`, clamped into the interval's start and now, with accepted
 * recipients), suspending as it would.  Fills *d.  1 done; 0 when the log
 * holds no such send (already settled, expired, never unknown) or o is
 * WG_UNKNOWN: nothing changes. */
int wg_settle(struct wgate *g, struct wg_up *u, uint64_t id, enum wg_outcome o,
    const char *reply, int64_t at, uint32_t accepted, int64_t now, struct wg_done *d);
/* The same with at = -1 and no *d. */
int64_t wg_report(struct wgate *g, struct wg_req *r, enum wg_outcome o,
    const char *reply, int64_t now);

/* Forget a request: a waiting one is dropped; a granted one (its client
 * went away) is logged as WG_UNKNOWN, or refunded if it was never started
 * (never handed to a deliverer).  Fills *d if not NULL.  Frees r. */
void wg_cancel(struct wgate *g, struct wg_req *r, int64_t now, struct wg_done *d);

/* Lift suspensions of u now: the authentication one (auth_only), or every
 * one (RESUME).  The probe rule stays until a good report.  Either ends
 * an unreachable spell (1: there was one). */
int wg_lift(struct wg_up *u, int auth_only, int64_t now);
/* End u's unreachable spell, if any (1: there was one). */
int wg_reach_reset(struct wg_up *u);
/* u's state for route_judge, for a request of weights w (NULL: one
 * message, one recipient, no connection). */
void wg_route_state(struct wg_up *u, const uint32_t *w, int64_t now, struct route_state *st);
/* u's throttle suspension as status and route_judge see it: its own, or
 * the one another host shared through the store (ssusp_*) when that
 * ends later.  until 0: none running. */
struct wg_susp {
	int64_t until;
	int quota;		/* a quota's (WG_QUOTA) */
	const char *reason;	/* the upstream's reply */
	const char *host;	/* NULL: this gate's own; else the host that stored it */
};
void wg_suspension(const struct wg_up *u, int64_t now, struct wg_susp *s);
/* What the shared store holds for u now (shared.c): a suspension for ms
 * more (0: none) of host's, a quota's or not, with reason.  Returns 1
 * when that ends the one u had from it (its head may ask the store
 * again at once). */
int wg_shared_suspension(struct wg_up *u, int64_t ms, int quota, const char *host,
    const char *reason, int64_t now);
/* When u's backlog began (WG_BUSY_GAP_MS; ms on the now axis), 0: none. */
int64_t wg_backlog_since(const struct wg_up *u, int64_t now);
/* u's credentials were refused without a grant (REFUSED: weir-send's
 * OAuth keep-alive found its refresh token dead): suspended as by a
 * WG_AUTHFAIL, nothing logged in a window.  1 if that began a
 * suspension; 0 if one runs already (kept as it is). */
int wg_auth_refused(struct wg_up *u, const char *reply, int64_t now);

/* Journal replay: a send of weights w that may have been accepted at any
 * instant in [from, t] (from == t: at t) on upstream (created if unknown,
 * kept out of policy until a policy names it).  t may lie in the future (a
 * send that may still be in flight): it then counts until t + T.  id: an
 * interval's grant (0: none). */
void wg_replay_send(struct wgate *g, const char *upstream, int64_t from, int64_t t,
    const uint32_t w[UNIT_COUNT], uint64_t id);
/* Journal replay: grant id's unknown outcome on upstream was settled as
 * a send of weights w at t (all 0: nothing logged). */
void wg_replay_settle(struct wgate *g, const char *upstream, uint64_t id, int64_t t,
    const uint32_t w[UNIT_COUNT]);
/* Journal replay: a suspension until `until`: a throttle one (quota: a
 * quota's), or (auth) an authentication one, of the credentials *fp
 * (NULL: not recorded). */
void wg_replay_suspend(struct wgate *g, const char *upstream, int auth, int quota,
    int64_t until, int64_t len, const char *reason, const uint64_t *fp);

/* The grace of upstream name, ms: policy's `grace` for it (its section,
 * or the section "*") if set, else dflt (the gate's -g). */
int64_t wg_grace(const struct policy *pol, const char *name, int64_t dflt);

struct wg_up *wg_find(struct wgate *g, const char *name);
/* Drop log entries no window needs any more; called by wg_pump. */
void wg_expire(struct wg_up *u, int64_t now);
/* Weight counted now in window i: logged since first, plus held. */
int64_t wg_win_used(const struct wg_up *u, size_t i);
/* When the head of u's queue could be granted: now if at once, > now if
 * by time alone, -1 if only a report can help, -2 if nothing waits. */
int64_t wg_head_fit(struct wg_up *u, int64_t now);
/* Entry with sequence number s (lseq <= s < lseq + ln). */
const struct wg_send *wg_log_at(const struct wg_up *u, uint64_t s);
/* History entry i (0 <= i < hn), in the order they came (by t only
 * roughly: an interval ends late); wg_expire drops those older than
 * WG_HISTORY_MS. */
const struct wg_send *wg_history_at(const struct wg_up *u, size_t i);

#endif
