/*
 * gatestatus.h: weir-gate's status document, the answer to STATUS JSON
 * [<seconds>] (mail/gateproto.h): the members a client may rely on, each
 * named once here, for the gate that writes them (src/gate/status.c) and
 * every program that reads them (mail/relaystatus.c, which embeds the
 * document as "gate" in `weir status --json` and /status.json;
 * src/metrics/collect.c and page.c).  The gate's STATUS TEXT is for
 * people: it is printed as it came (`weir-gate status`, `weir status`),
 * never read back for a number.
 *
 * One JSON object.  Times ending in _ms are wall-clock milliseconds
 * since the epoch; null where the text says "null".  Members not listed
 * here are not part of the interface.
 *
 *   now_ms             the gate's clock when it answered
 *   journal_durable    false: it grants nothing (journal_error says why)
 *   upstreams          one object per upstream the gate knows:
 *
 *   name               the upstream (policy.conf's and weir.conf's name)
 *   in_policy          false: no policy names it, nothing is granted
 *   suspended          a throttle suspension runs: suspended_until_ms,
 *                      suspend_reason (the upstream's reply),
 *                      suspend_quota (true: the provider's quota reply),
 *                      and suspended_by (only for another host's, shared
 *                      through the store: that host) with it
 *   auth_suspended     an authentication suspension runs:
 *                      auth_suspended_until_ms, auth_reason with it
 *   probe              one grant at a time until a report gets through
 *   route              what fallbacks are judged on (mail/route.h):
 *                      unreachable_since_ms, unreachable_reason,
 *                      probe_at_ms (null unless unreachable), probe_out,
 *                      auth_trouble_since_ms, auth_probe_out,
 *                      free_at_ms (the windows' room for one message),
 *                      passed_over, unreachable_reports (counters)
 *   shared             with a shared store only: "ok", "down" or
 *                      "unknown"; shared_store (its address),
 *                      shared_error (when down); shared_master (where
 *                      the gate found it: an address, or "master NAME
 *                      HOST:PORT" as Redis Sentinel names it; null: not
 *                      yet), shared_switches (changes of master
 *                      followed), shared_last_switch_ms, shared_window
 *                      ("whole": this gate's history is in the store
 *                      and no rebuild holds the grants; "rebuilding";
 *                      "unknown": the store does not answer),
 *                      shared_written_back_ms (this gate's last
 *                      write-back of its history)
 *   windows            each: limit, per_s, unit ("messages",
 *                      "recipients", "connections"), calendar, logged,
 *                      held, used (= logged + held), free_at_ms (when it
 *                      next has room for one more of its unit; null:
 *                      only a report frees it), period_start_ms
 *                      (calendar only), all_hosts {logged, held, used}
 *                      (shared only; null when the store does not
 *                      answer)
 *   grace_s            how long an unknown outcome may still be accepted
 *   unknown_sends      each {granted_ms, until_ms}: a send of unknown
 *                      outcome a window still counts
 *   held               grants held: what the windows count as under way
 *   in_flight          deliveries in flight: grants held for a message
 *                      (weight in messages > 0) that were handed to a
 *                      deliverer; a kept session's own grant (its
 *                      connection, weights 0/0/1) is not one; null when
 *                      not known
 *   max_connections    0: no cap
 *   waiting            requests waiting; waiting_by_class {class: n}
 *   next_grant_ms      when the head request could be granted; null:
 *                      nothing waits, or only a report lets it through
 *   next_slot_ms       when one message could next be granted: the
 *                      latest of every window's room and the end of any
 *                      suspension; null: only a report frees it, or not
 *                      in the policy
 *   backlog_since_ms   when its backlog began: the spell during which a
 *                      request for a message waits or a message's grant
 *                      is held (gaps up to a minute included); null:
 *                      none now
 *   granted            counters since the gate started: grants given;
 *   sent               sends: transactions the upstream accepted at
 *                      least one recipient of (a SENT report, or a SETTLE,
 *                      with <accepted> > 0);
 *   sent_none          SENT reports with no recipient accepted;
 *   refunded, throttled, unknown, nomail, authfail, settled: reports of
 *                      each outcome (settled: unknown outcomes settled);
 *   rcpt_accepted      recipients accepted, summed over the sends
 *   send               weir-send's last COUNTS, when it sent one:
 *                      messages and recipients {queued, delivered,
 *                      deferred, bounced}, sessions_open (its kept
 *                      sessions), fallback {switches, returns}
 *   history            only for STATUS JSON <seconds>: since_ms,
 *                      complete_since_ms, sends (each [t, from, messages,
 *                      recipients, connections, accepted]: what the
 *                      windows logged, at t, or at any instant in [from,
 *                      t] for an unknown outcome; accepted: the
 *                      recipients the upstream accepted, 0 for an entry
 *                      that is not a send, null when not known: a send
 *                      the journal gave back after a restart), held
 *                      (each [granted, messages, recipients,
 *                      connections]), waiting (each [queued, messages,
 *                      recipients, connections, class])
 *
 * gs_members[] lists every member with its kind, so that a test can hold
 * the gate's real document to this page (tests/unit/gatestatus_test.c).
 *
 * Trusts: nothing (names only).  Config keys: none.
 */
#ifndef WEIR_GATESTATUS_H
#define WEIR_GATESTATUS_H

#include <stddef.h>

/* The document. */
#define GS_NOW_MS		"now_ms"
#define GS_JOURNAL_DURABLE	"journal_durable"
#define GS_JOURNAL_ERROR	"journal_error"
#define GS_UPSTREAMS		"upstreams"
/* An upstream. */
#define GS_NAME			"name"
#define GS_IN_POLICY		"in_policy"
#define GS_SUSPENDED		"suspended"
#define GS_SUSPENDED_UNTIL_MS	"suspended_until_ms"
#define GS_SUSPEND_REASON	"suspend_reason"
#define GS_SUSPEND_QUOTA	"suspend_quota"
#define GS_SUSPENDED_BY		"suspended_by"
#define GS_AUTH_SUSPENDED	"auth_suspended"
#define GS_AUTH_UNTIL_MS	"auth_suspended_until_ms"
#define GS_AUTH_REASON		"auth_reason"
#define GS_PROBE		"probe"
#define GS_ROUTE		"route"
#define GS_SHARED		"shared"
#define GS_SHARED_STORE		"shared_store"
#define GS_SHARED_ERROR		"shared_error"
#define GS_SHARED_MASTER	"shared_master"
#define GS_SHARED_SWITCHES	"shared_switches"
#define GS_SHARED_LAST_SWITCH_MS "shared_last_switch_ms"
#define GS_SHARED_WINDOW	"shared_window"
#define GS_SHARED_WRITTEN_BACK_MS "shared_written_back_ms"
#define GS_WINDOWS		"windows"
#define GS_GRACE_S		"grace_s"
#define GS_UNKNOWN_SENDS	"unknown_sends"
#define GS_HELD			"held"
#define GS_IN_FLIGHT		"in_flight"
#define GS_MAX_CONNECTIONS	"max_connections"
#define GS_WAITING		"waiting"
#define GS_WAITING_BY_CLASS	"waiting_by_class"
#define GS_NEXT_GRANT_MS	"next_grant_ms"
#define GS_NEXT_SLOT_MS		"next_slot_ms"
#define GS_BACKLOG_SINCE_MS	"backlog_since_ms"
#define GS_GRANTED		"granted"
#define GS_SENT			"sent"
#define GS_SENT_NONE		"sent_none"
#define GS_REFUNDED		"refunded"
#define GS_THROTTLED		"throttled"
#define GS_UNKNOWN		"unknown"
#define GS_NOMAIL		"nomail"
#define GS_AUTHFAIL		"authfail"
#define GS_SETTLED		"settled"
#define GS_RCPT_ACCEPTED	"rcpt_accepted"
#define GS_SEND			"send"
#define GS_HISTORY		"history"
/* route */
#define GS_R_UNREACHABLE_SINCE_MS "unreachable_since_ms"
#define GS_R_UNREACHABLE_REASON	"unreachable_reason"
#define GS_R_PROBE_AT_MS	"probe_at_ms"
#define GS_R_PROBE_OUT		"probe_out"
#define GS_R_AUTH_SINCE_MS	"auth_trouble_since_ms"
#define GS_R_AUTH_PROBE_OUT	"auth_probe_out"
#define GS_R_FREE_AT_MS		"free_at_ms"
#define GS_R_PASSED_OVER	"passed_over"
#define GS_R_UNREACHABLE_REPORTS "unreachable_reports"
/* a window */
#define GS_W_LIMIT		"limit"
#define GS_W_PER_S		"per_s"
#define GS_W_UNIT		"unit"
#define GS_W_CALENDAR		"calendar"
#define GS_W_LOGGED		"logged"
#define GS_W_HELD		"held"
#define GS_W_USED		"used"
#define GS_W_FREE_AT_MS		"free_at_ms"
#define GS_W_PERIOD_START_MS	"period_start_ms"
#define GS_W_ALL_HOSTS		"all_hosts"
/* an unknown send */
#define GS_U_GRANTED_MS		"granted_ms"
#define GS_U_UNTIL_MS		"until_ms"
/* send (weir-send's COUNTS) */
#define GS_S_MESSAGES		"messages"
#define GS_S_RECIPIENTS		"recipients"
#define GS_S_QUEUED		"queued"
#define GS_S_DELIVERED		"delivered"
#define GS_S_DEFERRED		"deferred"
#define GS_S_BOUNCED		"bounced"
#define GS_S_SESSIONS_OPEN	"sessions_open"
#define GS_S_FALLBACK		"fallback"
#define GS_S_SWITCHES		"switches"
#define GS_S_RETURNS		"returns"
/* history */
#define GS_H_SINCE_MS		"since_ms"
#define GS_H_COMPLETE_SINCE_MS	"complete_since_ms"
#define GS_H_SENDS		"sends"
#define GS_H_HELD		"held"
#define GS_H_WAITING		"waiting"

/* Positions in a history entry. */
enum gs_send_pos { GS_SEND_T, GS_SEND_FROM, GS_SEND_M, GS_SEND_R, GS_SEND_C, GS_SEND_ACCEPTED,
	GS_SEND_LEN };
enum gs_held_pos { GS_HELD_SINCE, GS_HELD_M, GS_HELD_R, GS_HELD_C, GS_HELD_LEN };
enum gs_wait_pos { GS_WAIT_SINCE, GS_WAIT_M, GS_WAIT_R, GS_WAIT_C, GS_WAIT_CLASS, GS_WAIT_LEN };

/* The kinds of gs_members[]. */
enum gs_kind {
	GS_K_INT = 1,		/* an integer */
	GS_K_BOOL = 2,
	GS_K_STR = 4,
	GS_K_OBJ = 8,
	GS_K_ARR = 16,
	GS_K_NULL = 32,		/* also null */
	GS_K_OPT = 64,		/* not always there */
	GS_K_INTS = 128,	/* an object of integers (waiting_by_class) */
};

/* A member's path: its names from the document down, "[]" for each
 * element of an array ("upstreams[].windows[].limit"). */
struct gs_member {
	const char *path;
	unsigned kind;
};

extern const struct gs_member gs_members[];
extern const size_t gs_nmembers;

#endif
