/*
 * job.c: a job's life in memory (struct job, sendint.h): one batch of a
 * message's recipients on its way through the stages.  It is made here
 * (job_new: by batch.c for a batch to ask of the gate, by flight.c for
 * a delivery an earlier weir-send left running), and ended here
 * (job_free; job_drop, which sends its message back to its FIFO), by
 * whichever stage is done with it.  While it lives it holds its
 * message (m->job: no other attempt starts) and counts in its
 * upstream's jobs (and, running, in its run slots).
 *
 * Trusts: nothing from outside.  Config keys: none.
 */
#include <stdlib.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send/sendint.h"

struct job *
job_new(struct sched *s, struct msg *m, size_t up, size_t cap)
{
	struct job *j = xcalloc(1, sizeof *j);

	j->m = m;
	j->up = up;
	j->primary = up;	/* via.c says otherwise for a fallback's */
	j->state = J_ASKING;
	j->outfd = j->ocfd = -1;
	j->sent_at = -1;
	j->offs = xcalloc(cap, sizeof *j->offs);
	j->addrs = xcalloc(cap, sizeof *j->addrs);
	m->job = j;
	j->next = s->jobs;
	s->jobs = j;
	s->ups[up].jobs++;
	return j;
}

void
job_free(struct sched *s, struct job *j)
{
	struct upq *u = &s->ups[j->up];
	struct job **p;
	size_t i;

	for (p = &s->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	for (p = &u->ghead; *p; p = &(*p)->gnext)
		if (*p == j) {
			*p = j->gnext;
			break;
		}
	u->gtail = NULL;
	for (p = &u->ghead; *p; p = &(*p)->gnext)
		u->gtail = *p;
	if (j->outfd >= 0) {
		evloop_unwatch(s->ev, j->outfd);
		close(j->outfd);
	}
	if (j->ocfd >= 0) {
		evloop_unwatch(s->ev, j->ocfd);
		close(j->ocfd);
	}
	evloop_timer_cancel(s->ev, j->watchdog);
	if (j->state == J_RUNNING)
		u->running--;
	u->jobs--;
	j->m->job = NULL;
	sess_job_done(s, j);
	for (i = 0; i < j->n; i++)
		free(j->addrs[i]);
	free(j->addrs);
	free(j->offs);
	buf_free(&j->out);
	buf_free(&j->oc);
	free(j);
}

void
job_drop(struct sched *s, struct job *j)
{
	struct msg *m = j->m;

	job_free(s, j);
	sched_enqueue(s, m);
}
