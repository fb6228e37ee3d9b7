/*
 * gatestatus.c: the members of weir-gate's status document (see
 * gatestatus.h), with their kinds.
 * Trusts: nothing.  Config keys: none.
 */
#include "mail/gatestatus.h"

#define I	GS_K_INT
#define B	GS_K_BOOL
#define S	GS_K_STR
#define O	GS_K_OBJ
#define A	GS_K_ARR
#define N	GS_K_NULL
#define OPT	GS_K_OPT
#define U	"upstreams[]."
#define R	"upstreams[].route."
#define W	"upstreams[].windows[]."
#define SND	"upstreams[].send."
#define H	"upstreams[].history."

const struct gs_member gs_members[] = {
	{ GS_NOW_MS, I },
	{ GS_JOURNAL_DURABLE, B },
	{ GS_JOURNAL_ERROR, S | OPT },
	{ GS_UPSTREAMS, A },
	{ U GS_NAME, S },
	{ U GS_IN_POLICY, B },
	{ U GS_SUSPENDED, B },
	{ U GS_SUSPENDED_UNTIL_MS, I | OPT },
	{ U GS_SUSPEND_REASON, S | OPT },
	{ U GS_SUSPEND_QUOTA, B | OPT },
	{ U GS_SUSPENDED_BY, S | OPT },
	{ U GS_AUTH_SUSPENDED, B },
	{ U GS_AUTH_UNTIL_MS, I | OPT },
	{ U GS_AUTH_REASON, S | OPT },
	{ U GS_PROBE, B },
	{ U GS_ROUTE, O },
	{ R GS_R_UNREACHABLE_SINCE_MS, I | N },
	{ R GS_R_UNREACHABLE_REASON, S | N },
	{ R GS_R_PROBE_AT_MS, I | N },
	{ R GS_R_PROBE_OUT, B },
	{ R GS_R_AUTH_SINCE_MS, I | N },
	{ R GS_R_AUTH_PROBE_OUT, B },
	{ R GS_R_FREE_AT_MS, I | N },
	{ R GS_R_PASSED_OVER, I },
	{ R GS_R_UNREACHABLE_REPORTS, I },
	{ U GS_SHARED, S | OPT },
	{ U GS_SHARED_STORE, S | OPT },
	{ U GS_SHARED_ERROR, S | OPT },
	{ U GS_SHARED_MASTER, S | N | OPT },
	{ U GS_SHARED_SWITCHES, I | OPT },
	{ U GS_SHARED_LAST_SWITCH_MS, I | N | OPT },
	{ U GS_SHARED_WINDOW, S | OPT },
	{ U GS_SHARED_WRITTEN_BACK_MS, I | N | OPT },
	{ U GS_WINDOWS, A },
	{ W GS_W_LIMIT, I },
	{ W GS_W_PER_S, I },
	{ W GS_W_UNIT, S },
	{ W GS_W_CALENDAR, B },
	{ W GS_W_LOGGED, I },
	{ W GS_W_HELD, I },
	{ W GS_W_USED, I },
	{ W GS_W_FREE_AT_MS, I | N },
	{ W GS_W_PERIOD_START_MS, I | OPT },
	{ W GS_W_ALL_HOSTS, O | N | OPT },
	{ W GS_W_ALL_HOSTS "." GS_W_LOGGED, I | OPT },
	{ W GS_W_ALL_HOSTS "." GS_W_HELD, I | OPT },
	{ W GS_W_ALL_HOSTS "." GS_W_USED, I | OPT },
	{ U GS_GRACE_S, I },
	{ U GS_UNKNOWN_SENDS, A },
	{ U GS_UNKNOWN_SENDS "[]." GS_U_GRANTED_MS, I },
	{ U GS_UNKNOWN_SENDS "[]." GS_U_UNTIL_MS, I },
	{ U GS_HELD, I },
	{ U GS_IN_FLIGHT, I | N },
	{ U GS_MAX_CONNECTIONS, I },
	{ U GS_WAITING, I },
	{ U GS_WAITING_BY_CLASS, GS_K_INTS },
	{ U GS_NEXT_GRANT_MS, I | N },
	{ U GS_NEXT_SLOT_MS, I | N },
	{ U GS_BACKLOG_SINCE_MS, I | N },
	{ U GS_GRANTED, I },
	{ U GS_SENT, I },
	{ U GS_SENT_NONE, I },
	{ U GS_REFUNDED, I },
	{ U GS_THROTTLED, I },
	{ U GS_UNKNOWN, I },
	{ U GS_NOMAIL, I },
	{ U GS_AUTHFAIL, I },
	{ U GS_SETTLED, I },
	{ U GS_RCPT_ACCEPTED, I },
	{ U GS_SEND, O | OPT },
	{ SND GS_S_MESSAGES, O | OPT },
	{ SND GS_S_MESSAGES "." GS_S_QUEUED, I | OPT },
	{ SND GS_S_MESSAGES "." GS_S_DELIVERED, I | OPT },
	{ SND GS_S_MESSAGES "." GS_S_DEFERRED, I | OPT },
	{ SND GS_S_MESSAGES "." GS_S_BOUNCED, I | OPT },
	{ SND GS_S_RECIPIENTS, O | OPT },
	{ SND GS_S_RECIPIENTS "." GS_S_QUEUED, I | OPT },
	{ SND GS_S_RECIPIENTS "." GS_S_DELIVERED, I | OPT },
	{ SND GS_S_RECIPIENTS "." GS_S_DEFERRED, I | OPT },
	{ SND GS_S_RECIPIENTS "." GS_S_BOUNCED, I | OPT },
	{ SND GS_S_SESSIONS_OPEN, I | OPT },
	{ SND GS_S_FALLBACK, O | OPT },
	{ SND GS_S_FALLBACK "." GS_S_SWITCHES, I | OPT },
	{ SND GS_S_FALLBACK "." GS_S_RETURNS, I | OPT },
	{ U GS_HISTORY, O | OPT },
	{ H GS_H_SINCE_MS, I | OPT },
	{ H GS_H_COMPLETE_SINCE_MS, I | OPT },
	{ H GS_H_SENDS, A | OPT },
	{ H GS_H_HELD, A | OPT },
	{ H GS_H_WAITING, A | OPT },
};

const size_t gs_nmembers = sizeof gs_members / sizeof gs_members[0];
