/*
 * status.h: weir-gate's status report (text for people, or JSON).
 * Trusts: the engine's state.  Config keys: none.
 */
#ifndef WEIR_GATE_STATUS_H
#define WEIR_GATE_STATUS_H

#include "gate/window.h"
#include "lib/buf.h"

/* STATUS JSON <seconds>: how far back (0: no history), and the grants of
 * an upstream held now (the server's to know: an array to free, *n
 * long; they give the deliveries in flight, also without a history). */
struct status_history {
	int64_t ms;
	struct wg_req **(*held)(void *arg, const struct wg_up *u, size_t *n);
	void *arg;
};

/* At most this many held grants and waiting requests in a history. */
#define STATUS_LIST_MAX 1000

/* Append the status of every upstream at `now` (monotonic ms); wall times
 * are now + wall_minus_mono.  journal_error: why the journal cannot be
 * made durable (nothing is granted), or NULL. */
struct shared;
/* sh: the shared stores (their state and counts per shared upstream, asked
 * of Redis now), or NULL.  hist: the held grants, and with json and
 * hist->ms, each upstream's "history" (status.c); NULL: neither (the
 * deliveries in flight are then not known). */
void gate_status(struct buf *b, struct wgate *g, int json, int64_t now,
    int64_t wall_minus_mono, const char *journal_error, struct shared *sh,
    const struct status_history *hist);

#endif
