/*
 * hosts_helpers.h: several whole relays (struct rt, relay_helpers.h)
 * under one shared window, sending to ONE stand-in upstream (the first
 * host's): shared_relay_test (one Redis) and sentinel_test (Redis
 * Sentinel).  Host i's mail goes to h<i>-<k>@dst.example from
 * HS_SENDER.
 *
 * Trusts: the processes the test started.  Test code only (Criterion).
 */
#ifndef WEIR_HOSTS_HELPERS_H
#define WEIR_HOSTS_HELPERS_H

#include <stddef.h>

#include "relay_helpers.h"

#define HS_SENDER "list@src.example"

/* The upstream (in t[0]'s folder), and each of the n hosts' weir.conf,
 * policy (policy_text) and weir-gate (-g grace; NULL: as `weir run`
 * starts it). */
void hs_start(struct rt *t, size_t n, const char *policy_text, const char *grace);
/* weir-send of each host. */
void hs_start_sends(struct rt *t, size_t n);
/* per messages for each of the n hosts, each to its own recipient;
 * the recipients (n * per), freed by hs_free_rcpts. */
char **hs_queue_mail(struct rt *t, size_t n, size_t per);
void hs_free_rcpts(char **v, size_t n);
/* Wait until the upstream has at least n sends (asserts after ms). */
void hs_wait_ndata(struct rt *t, size_t n, int ms);
/* How many times host t's weir-gate log holds what. */
size_t hs_gate_log_count(struct rt *t, const char *what);
/* Every gate's log holds what at least times times, within ms. */
void hs_wait_gates_logged(struct rt *t, size_t n, const char *what, size_t times, int ms);
/* Every queue drained within ms; with flush, `weir flush` every 3 s (a
 * deliverer that crashed is retried on qmail's schedule otherwise). */
void hs_wait_all_drained(struct rt *t, size_t n, int ms, int flush);
/* Every address of rcpt[0..n) at least once (exactly once when exact);
 * repeats only of whole transactions; returns how many repeats. */
size_t hs_assert_delivered(const struct rt_rec *r, char **rcpt, size_t n, int exact);
/* No bounce and a sound, empty queue on each host. */
void hs_assert_sound(struct rt *t, size_t n, const struct rt_rec *r);
/* Kill every host's weir-send and weir-gate, then tear each down (the
 * other processes are the caller's). */
void hs_teardown(struct rt *t, size_t n);

#endif
