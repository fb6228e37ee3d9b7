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

/* A timer that sets itself again for "now" (work done a slice at a time)
 * must not starve file events: each round runs it once, then polls. */
static int slices, readable = -1, wfd;

static void
on_slice(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)t; (void)arg;
	if (++slices == 2 && write(wfd, "x", 1) != 1)
		cr_assert_fail("write");
	if (slices < 1000)
		evloop_timer_at(ev, 0, on_slice, NULL);
}

static void
on_readable_fd(struct evloop *ev, int fd, int events, void *arg)
{
	char c;

	(void)events; (void)arg;
	if (read(fd, &c, 1) == 1)
		readable = slices;
	evloop_unwatch(ev, fd);
}

Test(evloop, self_rearming_timer_does_not_starve_fds)
{
	struct evloop *ev = evloop_new();
	int p[2], i;

	cr_assert(pipe(p) == 0);
	wfd = p[1];
	evloop_watch(ev, p[0], EV_READ, on_readable_fd, NULL);
	evloop_timer_at(ev, 0, on_slice, NULL);
	for (i = 0; i < 5; i++)
		cr_assert(evloop_once(ev, 100) >= 0);	/* bounded: never hangs */
	cr_assert_eq(slices, 5, "%d slices in 5 rounds", slices);
	/* Written by slice 2, read before slice 3 runs. */
	cr_assert_eq(readable, 2, "the fd was served after slice %d", readable);
	evloop_free(ev);
	close(p[0]);
	close(p[1]);
}

/* ... nor the other due timers behind it. */
static int other_fired;

static void
on_other(struct evloop *ev, struct evtimer *t, void *arg)
{
	(void)ev; (void)t; (void)arg;
	other_fired = slices;
}

Test(evloop, self_rearming_timer_does_not_starve_timers)
{
	struct evloop *ev = evloop_new();
	int p[2], i;

	cr_assert(pipe(p) == 0);
	wfd = p[1];
	slices = 0;
	other_fired = -1;
	evloop_timer_at(ev, 0, on_slice, NULL);
	evloop_timer_at(ev, clock_mono_ms(), on_other, NULL);
	for (i = 0; i < 5; i++)
		cr_assert(evloop_once(ev, 100) >= 0);
	cr_assert(other_fired >= 0 && other_fired <= 2, "the other timer ran after slice %d",
	    other_fired);
	evloop_free(ev);
	close(p[0]);
	close(p[1]);
}
