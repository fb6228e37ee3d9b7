/*
 * relaystatus.h: what the relay is doing, gathered once for `weir
 * status` (text, --json, --watch) and weir-metrics' status page and
 * /status.json, so that they cannot disagree:
 *
 *   1. weir-gate's status through mail/gateclient.h: its JSON document
 *      (its members: mail/gatestatus.h), for JSON with each upstream's
 *      last hour (STATUS JSON 3600: sends, held grants and waiting
 *      requests with their times), embedded as "gate"; the numbers of
 *      steps 3 and 5 are read from it.  With RS_GATE_TEXT also its text
 *      for people, which `weir status` prints as it came and nothing
 *      reads.
 *   2. The queue, through qlist_scan (the scan mailq and `weir queue`
 *      use), or, when this process may not read the queue (showq_needed:
 *      an account of its own, as weir-metrics'), through weir-showq's
 *      JSON listing (at most RS_SHOWQ_MAX bytes, read with json-c):
 *      messages, not yet preprocessed, recipients not done, the oldest,
 *      and per state: waiting for the window (preprocessed, neither held
 *      nor put off), deferred (a retry time ahead, with the upstream's
 *      replies, addresses in them replaced by "<address>", the
 *      RS_REASONS_MAX most frequent), held (`weir hold`).
 *   3. An estimate of the time to drain the backlog at the current
 *      policy, per upstream (the upstream of a message is the one weir-
 *      send picks: config_upstream_for its sender):
 *        sends      = sum over messages of ceil(not-done recipients /
 *                     recipients per transaction), each one message and
 *                     one connection for the gate (as weir-remote asks);
 *        for each window (N per T, U already used): weight B of the
 *                     backlog in its unit; sliding: time =
 *                     floor((B + U - 1) / N) * T; calendar (it resets at
 *                     fixed boundaries): 0 if B fits in N - U, else the
 *                     time to the next boundary + floor((B - (N - U) - 1)
 *                     / N) * T;
 *        estimate   = the largest of those, plus what is left of a
 *                     suspension.
 *      It is a lower bound: it assumes every attempt succeeds and counts
 *      no time for the deliveries themselves.  The windows and their use
 *      come from the gate (what it enforces now, every host's use of a
 *      shared window when that is higher; a calendar window's boundaries
 *      from its period_start_ms); for an upstream the gate does not list
 *      yet, from policy_file with nothing used.  "unknown" when there is nothing to go by: no policy for the
 *      upstream (the gate would refuse it), or weir-gate not answering
 *      (nothing is sent until it does: the policy's figure is then
 *      given as what it will take at least once the gate is back).
 *   4. weir-send's kept sessions (sched/sessions).
 *   5. Where each waiting message goes (with fallback or
 *      recipient_domains in weir.conf; mail/route.h): each recipient not
 *      done has its primary (config_upstream_route) and its route
 *      (config_route); the upstream it will go through is the first of
 *      the route whose state, as the gate's JSON status has it ("route",
 *      the suspensions), the primary's fallback_when does not pass over
 *      (route_judge, the gate's own rule: AVOID passes over, and PROBE
 *      too, but for the one request that goes as the probe; GO and HOLD
 *      stay), the last one in any case; and why (the condition
 *      that passed the primary over).  Per message, grouped by upstream,
 *      at most RS_ROUTES_MAX messages; each upstream's state in words.
 *      The drain estimate counts each recipient at that upstream.
 *   6. For each upstream with an oauth section, its token's state from
 *      the token status file (mail/oauth.h; no secret in it): when the
 *      access token expires, the refresh token's age, the last refresh
 *      error, whether a login is needed ("oauth" in the JSON; `weir
 *      status` prints it for people through src/weir/auth.c).
 *
 * A window of the gate's document that does not read (a member missing
 * or of another kind) is left out of the estimate, never guessed.
 *
 * The JSON document (relay_status_json) is `weir status --json`'s; see
 * weir(8).  It holds no message content and no address: counts, the
 * upstreams' replies with addresses masked, the gate's status (names,
 * numbers, suspension reasons: the upstream's reply as it came).
 *
 * Trusts: the gate's replies as far as gateproto.c parses them, weir-
 * showq's listing as far as lib/jsonparse.c does, nothing in the queue.
 * Config keys: gate_socket, gate_status_socket (asked when gate_socket
 * cannot be reached), showq_socket, policy_file, queue_dir, queue_split,
 * upstream sections (names, senders, max_recipients, oauth).
 */
#ifndef WEIR_RELAYSTATUS_H
#define WEIR_RELAYSTATUS_H

#include <stddef.h>
#include <time.h>

#include "lib/buf.h"
#include "mail/config.h"
#include "mail/policy.h"
#include "mail/qsummary.h"
#include "mail/queue.h"
#include "mail/route.h"

#define RS_GATE_TIMEOUT_MS 5000	/* `weir status`: for the gate's connect and each answer */
#define RS_HISTORY_S	3600		/* the gate's history asked for JSON */
#define RS_REASONS_MAX	10		/* deferral reasons listed */
#define RS_SHOWQ_MAX	(16 << 20)	/* bytes of weir-showq's listing read */
#define RS_SHOWQ_TIMEOUT_MS 10000	/* for all of it (weir-metrics waits meanwhile) */
#define RS_ROUTES_MAX	1000		/* waiting messages whose route is listed */

struct rs_win {
	long long limit, per, used;
	enum policy_unit unit;
	int calendar;
	long long align;	/* calendar: boundaries at align (mod per), UTC */
};

/* Per upstream: the backlog, and the windows that pace it. */
struct rs_up {
	char *name;
	unsigned long long messages, recipients, sends;
	unsigned cap;			/* recipients per transaction */
	struct rs_win *win;
	size_t nwin;
	int known;			/* windows known (gate or policy) */
	long long suspended;		/* seconds left, from the gate */
	long long estimate;		/* seconds, or -1: unknown */
	long long at_least;		/* the gate down: the policy's figure, or -1 */
	int listed;			/* the gate listed it */
	const struct rs_win *bottleneck;
	/* Its state for route.h's judge, from the gate's JSON (wall ms). */
	struct route_state st;
	char *down_reason;		/* the unreachable spell's; NULL: none */
	/* Deferred messages (a retry time ahead), the last retry time (wall
	 * s), and whether that bounds the estimate. */
	unsigned long long deferred;
	long long retry_last;
	int retry_bound;
	/* The drain's progress (wall ms): its backlog's start, counted from
	 * (the backlog's start, or the history's if later), sends since
	 * (-1: not known). */
	long long backlog_since, progress_from, sent_since;
};

/* Something that keeps mail from flowing, for the summary (item 0). */
struct rs_problem {
	const char *upstream;		/* the config's name; NULL: the relay's */
	char *what;			/* the upstream's words as they came */
	char *todo;			/* what mends or lifts it; NULL: nothing to do */
};

/* One message's recipients that go through one upstream (item 5). */
#define RS_WHY_OPERATOR	(-2)
struct rs_route {
	char qid[QUEUE_ID_MAX];
	const char *via, *primary;	/* upstream names (the config's) */
	int why;			/* the condition that passed primary over;
					 * -1: via is the primary; RS_WHY_OPERATOR:
					 * weir requeue --via sent it there */
	int holding;			/* the primary holds it (unreachable, not long enough) */
	unsigned long long recipients;
};

/* Messages and recipients (not done) in one state. */
struct rs_count {
	unsigned long long messages, recipients;
};

struct rs_reason {
	char *reply;			/* addresses masked */
	unsigned long long recipients;
};

enum rs_flags {
	RS_JSON = 1,			/* the gate's document with its history */
	RS_GATE_TEXT = 2,		/* the gate's text too (to print it) */
};

struct relay_status {
	const struct weir_config *cfg;
	time_t now;
	const char *gsock;		/* the gate socket asked (that answered) */
	int gate_ok;
	struct buf gtext, gjson, gwhy;	/* the gate's text (RS_GATE_TEXT), JSON; why it
					 * did not answer */
	const char *winsrc;		/* where the windows came from */
	int q_ok;
	struct buf qwhy;		/* why the queue could not be read */
	const char *qsrc;		/* queue_dir, or weir-showq's socket */
	struct rs_up *up;		/* per upstream section */
	size_t nup;
	struct rs_up other;		/* no upstream section for the sender */
	unsigned long long messages, todo, rcpt_left, trouble;
	struct rs_count waiting, deferred, held, not_preprocessed;
	struct rs_reason *reasons;	/* of deferred recipients, most first */
	size_t nreasons;
	unsigned long long reasons_other;	/* recipients with another reason */
	time_t oldest;
	int have_oldest;
	struct policy pol;
	int have_pol;
	int routing;			/* weir.conf has fallback or recipient_domains */
	long long gnow_ms;		/* the gate's wall clock when it answered; 0: none */
	struct rs_route *routes;	/* item 5, in queue order */
	size_t nroutes;
	unsigned long long routes_left_out;	/* messages beyond RS_ROUTES_MAX */
	struct json_object *gdoc;	/* the gate's document, parsed; NULL: none */
	struct qsummary qs;		/* weir-send's sessions (item 4) */
	int have_qs;
	const char *qs_from;
	struct buf qs_why;
	struct rs_problem *problems;	/* item 0 */
	size_t nproblems;
	struct buf line;		/* the summary line */
};

/* Gather it all now, waiting at most gate_ms for the gate's connect and
 * each of its answers.  Returns 1 when the gate answered and the queue
 * was read (what could not be had is said in rs all the same). */
int relay_status_get(struct relay_status *rs, const struct weir_config *cfg, int flags,
    int gate_ms);
/* The same with the gate's part had already (weir-metrics asks it in its
 * own loop): gjson[0..glen) its document from gsock (with its history,
 * for a JSON status), or NULL when it did not answer (gwhy: why); the
 * queue within showq_ms. */
int relay_status_from(struct relay_status *rs, const struct weir_config *cfg, const char *gsock,
    const char *gjson, size_t glen, const char *gwhy, int showq_ms);
void relay_status_free(struct relay_status *rs);

/* `weir status --json`'s document (with RS_JSON). */
void relay_status_json(const struct relay_status *rs, struct buf *out);

/* The OAuth tokens' state of cfg's upstreams with an oauth section, from
 * their status files (mail/oauth.h; no secret in them), as the items of
 * a JSON array: upstream, token, login_needed, access_expires,
 * refresh_token_age_s, error. */
void relay_status_oauth_json(const struct weir_config *cfg, time_t now, struct buf *o);

/* Item 5 for people: each upstream's state, then each waiting message's
 * route (at most max lines of them); nothing without routing. */
void relay_status_routes_text(const struct relay_status *rs, struct buf *out, size_t max);

/* weir-send's kept sessions (sched/sessions), as text or a JSON array. */
void relay_status_sessions(const struct relay_status *rs, struct buf *out, int json);

/* s[0..n) as one line (buf_add_oneline), each word (between spaces)
 * holding an '@' replaced by "<address>"; malloc'ed. */
char *rs_mask_addresses(const char *s, size_t n);


#endif
