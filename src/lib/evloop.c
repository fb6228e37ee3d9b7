/*
 * evloop.c: see evloop.h.  Sizes: fds in a flat array searched linearly
 * (coordinators have tens to hundreds of clients), timers in a binary
 * min-heap with each timer knowing its heap slot so cancel is O(log n).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/log.h"

struct watch {
	int fd;
	int events;
	ev_fd_cb *cb;
	void *arg;
};

struct evtimer {
	uint64_t when;
	uint64_t round;		/* the loop round it was set in */
	size_t slot;
	ev_timer_cb *cb;
	void *arg;
};

struct sigwatch {
	ev_signal_cb *cb;
	void *arg;
};

struct evloop {
	struct watch *w;
	size_t nw, capw;
	struct pollfd *pfd;
	struct evtimer **heap;
	size_t nheap, capheap;
	struct sigwatch sig[NSIG];
	sigset_t watched;
	int stop;
	uint64_t round;		/* counts run_timers() calls */
};

static volatile sig_atomic_t sig_pending[NSIG];
static volatile sig_atomic_t any_pending;

uint64_t
clock_mono_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		panic("clock_gettime(CLOCK_MONOTONIC) failed");
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct evloop *
evloop_new(void)
{
	struct evloop *ev = xcalloc(1, sizeof *ev);

	sigemptyset(&ev->watched);
	return ev;
}

void
evloop_free(struct evloop *ev)
{
	size_t i;

	if (ev == NULL)
		return;
	for (i = 0; i < ev->nheap; i++)
		free(ev->heap[i]);
	free(ev->heap);
	free(ev->w);
	free(ev->pfd);
	free(ev);
}

void
evloop_watch(struct evloop *ev, int fd, int events, ev_fd_cb *cb, void *arg)
{
	size_t i;

	for (i = 0; i < ev->nw; i++)
		if (ev->w[i].fd == fd)
			break;
	if (i == ev->nw) {
		if (ev->nw == ev->capw) {
			ev->capw = ev->capw ? ev->capw * 2 : 16;
			ev->w = xrealloc(ev->w, ev->capw * sizeof *ev->w);
			ev->pfd = xrealloc(ev->pfd, ev->capw * sizeof *ev->pfd);
		}
		ev->nw++;
	}
	ev->w[i] = (struct watch){ fd, events, cb, arg };
}

void
evloop_unwatch(struct evloop *ev, int fd)
{
	size_t i;

	for (i = 0; i < ev->nw; i++)
		if (ev->w[i].fd == fd) {
			ev->w[i] = ev->w[--ev->nw];
			return;
		}
}

/* Heap helpers: parent (i-1)/2, children 2i+1, 2i+2.  A timer out of the
 * heap (firing) has slot SLOT_NONE. */
#define SLOT_NONE ((size_t)-1)

static void
heap_set(struct evloop *ev, size_t i, struct evtimer *t)
{
	ev->heap[i] = t;
	t->slot = i;
}

static void
heap_up(struct evloop *ev, size_t i)
{
	struct evtimer *t = ev->heap[i];

	while (i > 0 && ev->heap[(i - 1) / 2]->when > t->when) {
		heap_set(ev, i, ev->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(ev, i, t);
}

static void
heap_down(struct evloop *ev, size_t i)
{
	struct evtimer *t = ev->heap[i];
	size_t c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= ev->nheap)
			break;
		if (c + 1 < ev->nheap && ev->heap[c + 1]->when < ev->heap[c]->when)
			c++;
		if (ev->heap[c]->when >= t->when)
			break;
		heap_set(ev, i, ev->heap[c]);
		i = c;
	}
	heap_set(ev, i, t);
}

static void
heap_remove(struct evloop *ev, struct evtimer *t)
{
	size_t i = t->slot;
	struct evtimer *last;

	if (i >= ev->nheap || ev->heap[i] != t)
		panic("evloop: timer not in heap");
	last = ev->heap[--ev->nheap];
	if (last != t) {
		heap_set(ev, i, last);
		heap_up(ev, i);
		heap_down(ev, last->slot);
	}
	t->slot = SLOT_NONE;
}

static void
heap_push(struct evloop *ev, struct evtimer *t)
{
	if (ev->nheap == ev->capheap) {
		ev->capheap = ev->capheap ? ev->capheap * 2 : 16;
		ev->heap = xrealloc(ev->heap, ev->capheap * sizeof *ev->heap);
	}
	heap_set(ev, ev->nheap++, t);
	heap_up(ev, t->slot);
}

struct evtimer *
evloop_timer_at(struct evloop *ev, uint64_t when_ms, ev_timer_cb *cb, void *arg)
{
	struct evtimer *t = xmalloc(sizeof *t);

	t->when = when_ms;
	t->round = ev->round;
	t->cb = cb;
	t->arg = arg;
	heap_push(ev, t);
	return t;
}

void
evloop_timer_cancel(struct evloop *ev, struct evtimer *t)
{
	if (t == NULL)
		return;
	/* Out of the heap: its callback is running, and the loop frees it
	 * when the callback returns. */
	if (t->slot == SLOT_NONE)
		return;
	heap_remove(ev, t);
	free(t);
}

uint64_t
evtimer_when(const struct evtimer *t)
{
	return t->when;
}

static void
on_signal(int signo)
{
	sig_pending[signo] = 1;
	any_pending = 1;
}

void
evloop_signal(struct evloop *ev, int signo, ev_signal_cb *cb, void *arg)
{
	struct sigaction sa;
	sigset_t one;

	if (signo <= 0 || signo >= NSIG)
		panic("evloop_signal: bad signal %d", signo);
	ev->sig[signo] = (struct sigwatch){ cb, arg };
	sigemptyset(&one);
	sigaddset(&one, signo);
	if (sigprocmask(SIG_BLOCK, &one, NULL) < 0)
		fatal(111, "sigprocmask");
	sigaddset(&ev->watched, signo);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigfillset(&sa.sa_mask);
	if (sigaction(signo, &sa, NULL) < 0)
		fatal(111, "sigaction(%d)", signo);
}

static int
run_signals(struct evloop *ev)
{
	int n = 0, s;

	if (!any_pending)
		return 0;
	any_pending = 0;
	for (s = 1; s < NSIG; s++)
		if (sig_pending[s]) {
			sig_pending[s] = 0;
			if (ev->sig[s].cb) {
				ev->sig[s].cb(ev, s, ev->sig[s].arg);
				n++;
			}
		}
	return n;
}

static int
run_timers(struct evloop *ev)
{
	uint64_t now = clock_mono_ms();
	struct evtimer *t, **later = NULL;
	size_t nlater = 0, i;
	int n = 0;

	/* Only timers set before this round run in it: one that a callback
	 * sets for "now" (work done a slice at a time) waits for the next
	 * round, so that file events are served in between; it is set aside
	 * so that the due timers behind it still run. */
	ev->round++;
	while (ev->nheap > 0 && ev->heap[0]->when <= now) {
		t = ev->heap[0];
		heap_remove(ev, t);
		if (t->round == ev->round) {
			later = xrealloc(later, (nlater + 1) * sizeof *later);
			later[nlater++] = t;
			continue;
		}
		t->cb(ev, t, t->arg);
		free(t);
		n++;
	}
	for (i = 0; i < nlater; i++)
		heap_push(ev, later[i]);
	free(later);
	return n;
}

int
evloop_once(struct evloop *ev, int max_wait_ms)
{
	struct timespec ts, *tsp = NULL;
	sigset_t unblocked;
	uint64_t now, wait = (uint64_t)-1;
	size_t i, nfds;
	int n, r, done = 0;

	if (max_wait_ms >= 0)
		wait = (uint64_t)max_wait_ms;
	if (ev->nheap > 0) {
		now = clock_mono_ms();
		if (ev->heap[0]->when <= now)
			wait = 0;
		else if (ev->heap[0]->when - now < wait)
			wait = ev->heap[0]->when - now;
	}
	if (wait != (uint64_t)-1) {
		ts.tv_sec = (time_t)(wait / 1000);
		ts.tv_nsec = (long)(wait % 1000) * 1000000;
		tsp = &ts;
	}
	nfds = ev->nw;
	for (i = 0; i < nfds; i++) {
		ev->pfd[i].fd = ev->w[i].fd;
		ev->pfd[i].events = (short)(((ev->w[i].events & EV_READ) ? POLLIN : 0) |
		    ((ev->w[i].events & EV_WRITE) ? POLLOUT : 0));
		ev->pfd[i].revents = 0;
	}
	if (sigprocmask(SIG_BLOCK, NULL, &unblocked) < 0)
		return -1;
	for (n = 1; n < NSIG; n++)
		if (sigismember(&ev->watched, n) == 1)
			sigdelset(&unblocked, n);
	r = ppoll(ev->pfd, nfds, tsp, &unblocked);
	if (r < 0 && errno != EINTR)
		return -1;
	done += run_signals(ev);
	for (i = 0; r > 0 && i < nfds; i++) {
		int fd = ev->pfd[i].fd, got = 0;
		size_t j;

		if (ev->pfd[i].revents == 0)
			continue;
		if (ev->pfd[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
			got |= EV_READ;
		if (ev->pfd[i].revents & (POLLOUT | POLLERR))
			got |= EV_WRITE;
		/* A callback may have removed or replaced this watch. */
		for (j = 0; j < ev->nw; j++)
			if (ev->w[j].fd == fd)
				break;
		if (j == ev->nw || (ev->w[j].events & got) == 0)
			continue;
		ev->w[j].cb(ev, fd, got & (ev->w[j].events | EV_READ), ev->w[j].arg);
		done++;
	}
	done += run_timers(ev);
	return done;
}

int
evloop_run(struct evloop *ev)
{
	ev->stop = 0;
	while (!ev->stop) {
		if (ev->nw == 0 && ev->nheap == 0 && sigisemptyset(&ev->watched))
			return 0;
		if (evloop_once(ev, -1) < 0)
			return -1;
	}
	return 0;
}

void
evloop_stop(struct evloop *ev)
{
	ev->stop = 1;
}
