/*
 * evloop_test.c: the event loop (src/lib/evloop.c): timers fire in time
 * order and never early, cancel works (also from a callback, also on the
 * timer being run), fd events, unwatch from a callback, signals delivered
 * as callbacks without loss, evloop_run ends when nothing is left.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/evloop.h"

static uint64_t fired[256];
static size_t nfired;

static void
rec_timer(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)ev;
	cr_assert_leq(evtimer_when(t), clock_mono_ms(), "timer fired early");
	fired[nfired++] = (uint64_t)(uintptr_t)arg;
}

Test(evloop, timers_fire_in_order_never_early)
{
	struct evloop *ev = evloop_new();
	uint64_t base = clock_mono_ms() + 5, when[64];
	size_t i;
	unsigned seed = 42;

	nfired = 0;
	for (i = 0; i < 64; i++) {
		when[i] = base + (uint64_t)(rand_r(&seed) % 60);
		evloop_timer_at(ev, when[i], rec_timer, (void *)(uintptr_t)when[i]);
	}
	cr_assert_eq(evloop_run(ev), 0);
	cr_assert_eq(nfired, 64);
	for (i = 1; i < 64; i++)
		cr_assert_leq(fired[i - 1], fired[i]);
	evloop_free(ev);
}

static struct evtimer *victim;

static void
cancel_other(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)t; (void)arg;
	evloop_timer_cancel(ev, victim);
	fired[nfired++] = 1;
}

static void
cancel_self(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)arg;
	/* A callback cancelling the timer being run must be harmless. */
	evloop_timer_cancel(ev, t);
	fired[nfired++] = 3;
}

Test(evloop, cancel)
{
	struct evloop *ev = evloop_new();
	uint64_t now = clock_mono_ms();
	struct evtimer *a, *b;

	nfired = 0;
	a = evloop_timer_at(ev, now + 1000, rec_timer, (void *)1000);
	b = evloop_timer_at(ev, now + 2, rec_timer, (void *)2);
	evloop_timer_cancel(ev, a);
	victim = evloop_timer_at(ev, now + 30, rec_timer, (void *)30);
	evloop_timer_at(ev, now + 10, cancel_other, NULL);
	evloop_timer_at(ev, now + 15, cancel_self, NULL);
	(void)b;
	cr_assert_eq(evloop_run(ev), 0);
	cr_assert_eq(nfired, 3);
	cr_assert_eq(fired[0], 2);
	cr_assert_eq(fired[1], 1);
	cr_assert_eq(fired[2], 3);
	evloop_free(ev);
}

static int pipefd[2];
static char got[64];
static size_t ngot;

static void
on_read(struct evloop *ev, int fd, int events, void *arg)
{
	ssize_t n;

	(void)arg;
	cr_assert(events & EV_READ);
	n = read(fd, got + ngot, sizeof got - ngot);
	cr_assert_geq(n, 0);
	ngot += (size_t)n;
	if (n == 0 || ngot >= 5)
		evloop_unwatch(ev, fd);
}

static void
write_later(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)ev; (void)t; (void)arg;
	cr_assert_eq(write(pipefd[1], "hello", 5), 5);
}

Test(evloop, fd_events_and_unwatch_from_callback)
{
	struct evloop *ev = evloop_new();

	ngot = 0;
	cr_assert_eq(pipe(pipefd), 0);
	evloop_watch(ev, pipefd[0], EV_READ, on_read, NULL);
	evloop_timer_at(ev, clock_mono_ms() + 20, write_later, NULL);
	/* Ends once the fd is unwatched and no timer is left. */
	cr_assert_eq(evloop_run(ev), 0);
	cr_assert_eq(ngot, 5);
	cr_assert_eq(memcmp(got, "hello", 5), 0);
	close(pipefd[0]);
	close(pipefd[1]);
	evloop_free(ev);
}

static void
on_write(struct evloop *ev, int fd, int events, void *arg)
{
	(void)arg;
	cr_assert(events & EV_WRITE);
	evloop_unwatch(ev, fd);
	fired[nfired++] = 7;
}

Test(evloop, write_readiness_and_replace_watch)
{
	struct evloop *ev = evloop_new();

	nfired = 0;
	cr_assert_eq(pipe(pipefd), 0);
	evloop_watch(ev, pipefd[1], EV_READ, on_read, NULL);
	evloop_watch(ev, pipefd[1], EV_WRITE, on_write, NULL);	/* replaces */
	cr_assert_eq(evloop_run(ev), 0);
	cr_assert_eq(nfired, 1);
	close(pipefd[0]);
	close(pipefd[1]);
	evloop_free(ev);
}

static int nsig;

static void
on_sig(struct evloop *ev, int signo, void *arg)
{
	(void)arg;
	cr_assert_eq(signo, SIGUSR1);
	nsig++;
	evloop_stop(ev);
}

Test(evloop, signal_as_callback_not_lost)
{
	struct evloop *ev = evloop_new();
	uint64_t t0;

	nsig = 0;
	evloop_signal(ev, SIGUSR1, on_sig, NULL);
	/* Sent while the loop is not waiting: it is blocked, so it waits
	 * for the next ppoll instead of being lost. */
	cr_assert_eq(kill(getpid(), SIGUSR1), 0);
	t0 = clock_mono_ms();
	evloop_timer_at(ev, t0 + 5000, rec_timer, NULL);	/* must not be needed */
	cr_assert_eq(evloop_run(ev), 0);
	cr_assert_eq(nsig, 1);
	cr_assert_lt(clock_mono_ms() - t0, 2000);
	evloop_free(ev);
}

Test(evloop, once_times_out)
{
	struct evloop *ev = evloop_new();
	uint64_t t0 = clock_mono_ms();

	cr_assert_eq(evloop_once(ev, 30), 0);
	cr_assert_geq(clock_mono_ms() - t0, 29);
	evloop_free(ev);
}
