/*
 * relaystatus.h: what the relay is doing, gathered once for `weir
 * status` (text, --json, --watch) and weir-metrics' status page and
 * /status.json, so that they cannot disagree:
 *
 *   1. weir-gate's status through mail/gateclient.h: its text (read for
 *      the numbers of step 3) and, for JSON, its document with each
 *      upstream's last hour (STATUS JSON 3600: sends, held grants and
 *      waiting requests with their times), embedded as "gate".
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
 *      come from the gate (what it enforces now; a calendar window's
 *      boundaries from policy_file, else UTC midnight's phase); for an
 *      upstream the gate does not list yet, from policy_file with nothing
 *      used.  "unknown" when there is nothing to go by: no policy for the
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
 * The gate's text status is read for the numbers of step 3 (lines
 * "upstream NAME: ..." and "  window N UNIT per Ts...: ... = U of N", as
 * src/gate/status.c writes them, and for an upstream whose windows are
 * shared through Redis the line below each, "    all hosts: ... = U of
 * N", every host's use, which counts when it is higher); a line that
 * does not parse leaves that window out of the estimate, it is never
 * guessed.
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
#include "mail/queue.h"
#include "mail/route.h"

#define RS_GATE_TIMEOUT_S 5		/* for each of the gate's answers */
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
	RS_JSON = 1,			/* ask the gate's JSON document too */
};

struct relay_status {
	const struct weir_config *cfg;
	time_t now;
	const char *gsock;		/* the gate socket asked (that answered) */
	int gate_ok;
	struct buf gtext, gjson, gwhy;	/* the gate's text, JSON; why it did not answer */
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
};

/* Gather it all now.  Returns 1 when the gate answered and the queue was
 * read (what could not be had is said in rs all the same). */
int relay_status_get(struct relay_status *rs, const struct weir_config *cfg, int flags);
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
