/*
 * evloop.h: a small event loop for single-process coordinators: file
 * events on poll(2), one-shot timers on the monotonic clock kept in a
 * binary heap, and signals delivered as callbacks (handlers only set a
 * flag; the loop runs the callback).  No threads, no busy waiting: the
 * loop sleeps in ppoll() until an fd is ready, the next timer is due, or a
 * watched signal arrives.
 */
#ifndef WEIR_EVLOOP_H
#define WEIR_EVLOOP_H

#include <stdint.h>

#define EV_READ  0x1
#define EV_WRITE 0x2

struct evloop;
struct evtimer;

typedef void ev_fd_cb(struct evloop *ev, int fd, int events, void *arg);
typedef void ev_timer_cb(struct evloop *ev, struct evtimer *t, void *arg);
typedef void ev_signal_cb(struct evloop *ev, int signo, void *arg);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t clock_mono_ms(void);

struct evloop *evloop_new(void);
void evloop_free(struct evloop *ev);

/* Watch fd for events (EV_READ|EV_WRITE); replaces an earlier watch. */
void evloop_watch(struct evloop *ev, int fd, int events, ev_fd_cb *cb, void *arg);
void evloop_unwatch(struct evloop *ev, int fd);

/* A one-shot timer at an absolute monotonic time; freed after it fires
 * or when cancelled. */
struct evtimer *evloop_timer_at(struct evloop *ev, uint64_t when_ms,
    ev_timer_cb *cb, void *arg);
void evloop_timer_cancel(struct evloop *ev, struct evtimer *t);
uint64_t evtimer_when(const struct evtimer *t);

/* Run cb in the loop when signo arrives.  The signal stays blocked
 * outside ppoll(), so it cannot be lost between checks. */
void evloop_signal(struct evloop *ev, int signo, ev_signal_cb *cb, void *arg);

/* One round: wait at most max_wait_ms (-1: until something happens),
 * then dispatch.  Returns the number of callbacks run, -1 on error. */
int evloop_once(struct evloop *ev, int max_wait_ms);
/* Loop until evloop_stop() or until nothing is left to wait for. */
int evloop_run(struct evloop *ev);
void evloop_stop(struct evloop *ev);

#endif
