/*
 * fsyncall.c: see fsyncall.h.  A fixed pool of threads and one batch at
 * a time: the caller puts the batch up, takes jobs itself too, and waits
 * until the last one is done.  Jobs are taken by an index under the
 * mutex; the fsyncs run outside it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "lib/fsyncall.h"
#include "lib/log.h"

#define FSYNC_THREADS 7		/* and the caller: 8 at once */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static struct fsync_job *batch;
static size_t nbatch, next, left;
static int started;

/* One job, if one is left: 1 done, 0 none.  Called with mu held. */
static int
take_one(void)
{
	struct fsync_job *j;

	if (batch == NULL || next >= nbatch)
		return 0;
	j = &batch[next++];
	pthread_mutex_unlock(&mu);
	if (j->fd >= 0)
		j->err = fsync(j->fd) < 0 ? errno : 0;
	pthread_mutex_lock(&mu);
	if (--left == 0)
		pthread_cond_signal(&done);
	return 1;
}

static void *
worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		if (!take_one())
			pthread_cond_wait(&work, &mu);
	}
	return NULL;
}

static void
start(void)
{
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	int i, e;

	/* The threads take no signal: the caller's event loop gets them. */
	sigfillset(&all);
	if ((e = pthread_sigmask(SIG_BLOCK, &all, &old)) != 0 ||
	    (e = pthread_attr_init(&a)) != 0 ||
	    (e = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED)) != 0 ||
	    (e = pthread_attr_setstacksize(&a, 64 * 1024)) != 0)
		panic("fsync threads: set-up failed: error %d", e);
	for (i = 0; i < FSYNC_THREADS; i++)
		if ((e = pthread_create(&t, &a, worker, NULL)) != 0)
			break;	/* fewer threads: still correct, less at once */
	(void)pthread_attr_destroy(&a);
	if ((e = pthread_sigmask(SIG_SETMASK, &old, NULL)) != 0)
		panic("fsync threads: pthread_sigmask: error %d", e);
	started = 1;
}

size_t
fsync_all(struct fsync_job *jobs, size_t n)
{
	size_t i, bad = 0;

	if (n == 0)
		return 0;
	pthread_mutex_lock(&mu);
	if (!started)
		start();
	batch = jobs;
	nbatch = n;
	next = 0;
	left = n;
	pthread_mutex_unlock(&mu);
	/* As many threads as there are jobs beyond the caller's first,
	 * woken with the mutex free: a thread woken while we held it would
	 * only go to sleep again on it. */
	for (i = 1; i < n && i <= FSYNC_THREADS; i++)
		pthread_cond_signal(&work);
	pthread_mutex_lock(&mu);
	while (take_one())
		;
	while (left > 0)
		pthread_cond_wait(&done, &mu);
	batch = NULL;
	pthread_mutex_unlock(&mu);
	for (i = 0; i < n; i++)
		bad += jobs[i].err != 0;
	return bad;
}
