/*
 * wait.c: the waiting credit and the delay warning, and their note in
 * weir's own file sched/S/N (mail/schedfile.h, QUEUE.md).
 *
 * A message's credit is the time it was due but had no deliverer
 * running (sendint.h); queue_lifetime and delay_warning count its age
 * without it.  Writing sched/S/N at every change would cost a file write
 * per second per waiting message, so it is written only when it is 30 s
 * or more behind (a closed wait, or an open wait never recorded), when
 * it says the message waits and it does not, and when the delay warning
 * is queued: a backlog that drains within 30 s writes nothing.  An open
 * wait is recorded once, as the wall time it began; sched/alive,
 * rewritten every 10 s, says until when weir-send ran, and a restart
 * credits a recorded open wait up to that time.  A sweep every 10 s
 * finds what is behind.  So a crash of weir-send (kill -9) loses at most
 * 40 s of a message's credit: under 30 s never written, found late by up
 * to 10 s; or up to 10 s since the last sched/alive.  The
 * credit notes are not fsynced (a rename over the old version, so a
 * reader sees one version or the other): a power cut may also lose what
 * the kernel had not yet written back (Linux writes dirty data back
 * after 30 s by default).  A lost update only ever makes the credit
 * smaller, never larger, except during a deliverer's run after an open
 * wait was recorded, which a crash may count as waiting (at most that
 * run's time).
 *
 * The delay warning's mark is durable (fsynced file and folder) before
 * the warning is queued: a crash between the two loses the warning, and
 * none is ever sent twice.
 *
 * Trusts: the queue.  Config keys: delay_warning, queue_lifetime.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "send/note.h"
#include "send/rcptfile.h"
#include "send/sendint.h"

#define SWEEP_MS	10000	/* sched/alive, and notes checked */
#define BEHIND_MS	30000	/* a note this far behind is rewritten */
#define SWEEP_WRITES	500	/* notes written per turn of the event loop */

void
wait_begin(struct msg *m)
{
	/* Never 0 (that means no wait); never ahead of the clock either,
	 * as "| 1" was: a wait ended within the same millisecond then took
	 * 1 ms off the credit (seen as a note saying 599 for 600). */
	if (m->wait_since == 0)
		m->wait_since = clock_mono_ms() ? clock_mono_ms() : 1;
}

void
wait_end(struct msg *m)
{
	if (m->wait_since == 0)
		return;
	m->waited_ms += (long long)(clock_mono_ms() - m->wait_since);
	m->wait_since = 0;
}

static long long
credit_ms(const struct msg *m, uint64_t mono)
{
	return m->waited_ms + (m->wait_since ? (long long)(mono - m->wait_since) : 0);
}

long long
wait_credit(const struct msg *m)
{
	return credit_ms(m, clock_mono_ms()) / 1000;
}

/* Save m's state as a note; durable for the delay warning's mark. */
static int
save(struct sched *s, struct msg *m, int durable)
{
	uint64_t mono = clock_mono_ms();
	long long now = sched_wall();
	struct schednote n;

	n.birth = m->birth;
	n.waited = m->waited_ms / 1000;
	n.since = m->wait_since ? now - (long long)((mono - m->wait_since) / 1000) : 0;
	n.warned = m->warned;
	if (note_save(s->o->q, m->id, &n, durable) < 0)
		return -1;
	m->note = n;
	m->has_note = 1;
	return 0;
}

int
wait_note_sync(struct sched *s, struct msg *m)
{
	uint64_t mono = clock_mono_ms();
	long long now = sched_wall(), ondisk = 0, since = 0;

	if (!s->notes_ok || m->finishing)
		return 0;
	if (m->wait_since)
		since = now - (long long)((mono - m->wait_since) / 1000);
	if (m->has_note) {
		ondisk = m->note.waited * 1000;
		if (m->note.since && now > m->note.since)
			ondisk += (now - m->note.since) * 1000;
		/* It says the message waits, and it does not (or not since
		 * then: another wait began). */
		if (m->note.since && (since == 0 || llabs(since - m->note.since) > 1))
			return save(s, m, 0) == 0 ? 1 : -1;
	}
	if (credit_ms(m, mono) - ondisk < BEHIND_MS)
		return 0;
	return save(s, m, 0) == 0 ? 1 : -1;
}

void
wait_note_restore(struct sched *s, struct msg *m)
{
	struct schednote n;
	long long credit, now = sched_wall();
	int r;

	if (!s->notes_ok)
		return;
	r = note_load(s->o->q, m->id, m->birth, &n);
	if (r < 0) {
		/* Unreadable: no credit, and no warning (one may have gone);
		 * replaced by a sound note that says so. */
		m->warned = now;
		(void)save(s, m, 0);
		return;
	}
	if (r == 0)
		return;
	m->has_note = 1;
	m->note = n;
	m->warned = n.warned;
	credit = n.waited;
	if (n.since && s->alive_before > n.since)
		credit += s->alive_before - n.since;
	if (credit > now - m->birth)
		credit = now - m->birth > 0 ? now - m->birth : 0;
	m->waited_ms = credit * 1000;
	if (credit > 0)
		log_info("msg %s: %lld s of waiting carried over", m->qid, credit);
}

/* ---- the sweep: sched/alive, and open waits recorded ---- */

static void
on_sweep(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;
	unsigned writes = 0;
	struct msg *m;
	int r = 0;

	(void)t;
	if (s->sweep_pos == 0 && note_alive_save(s->o->q, sched_wall()) < 0)
		log_warnx("%s not written: a restart now credits open waits less", SCHED_ALIVE);
	for (; s->sweep_pos < s->tabsize && writes < SWEEP_WRITES && r >= 0; s->sweep_pos++)
		for (m = s->tab[s->sweep_pos]; m && r >= 0; m = m->hnext)
			if ((r = wait_note_sync(s, m)) > 0)
				writes++;
	/* A failed write (logged) ends this round: not one line per message. */
	if (r >= 0 && s->sweep_pos < s->tabsize) {
		evloop_timer_at(ev, 0, on_sweep, s);	/* the rest after what is pending */
		return;
	}
	s->sweep_pos = 0;
	evloop_timer_at(ev, clock_mono_ms() + SWEEP_MS, on_sweep, s);
}

void
wait_sweep_start(struct sched *s)
{
	if (!s->notes_ok)
		return;
	s->sweep_pos = 0;
	if (note_alive_save(s->o->q, sched_wall()) < 0)
		log_warnx("%s not written: a restart now credits open waits less", SCHED_ALIVE);
	evloop_timer_at(s->ev, clock_mono_ms() + SWEEP_MS, on_sweep, s);
}

/* ---- the delay warning ---- */

void
wait_warn(struct sched *s, struct msg *m, const struct job *j, const struct rresult *res)
{
	long long now = sched_wall(), waited = wait_credit(m);
	struct dsn_rcpt *v;
	struct rcptfile f;
	size_t i, k, n = 0;

	if (s->delay_warning == 0 || m->warned || !dsn_sender_wants_warning(m->sender) ||
	    now - m->birth - waited < s->delay_warning)
		return;
	if (!s->notes_ok) {
		log_warnx("msg %s: no delay warning: %s/ is missing, so it could be sent twice",
		    m->qid, SCHED_DIR);
		m->warned = now;	/* and do not say so again */
		return;
	}
	if (rcptfile_load(s->o->q, m->id, &f) != 0)
		return;		/* logged; at the next temporary failure */
	v = xcalloc(f.n + 1, sizeof *v);
	for (i = 0; i < f.n; i++) {
		if (f.v[i].done)
			continue;
		v[n].addr = f.v[i].addr;
		v[n].alen = f.v[i].len;
		for (k = 0; k < j->n; k++)
			if (j->offs[k] == f.v[i].off && res[k].st == RS_TEMP && res[k].text) {
				v[n].text = res[k].text;
				v[n].tlen = strlen(res[k].text);
				break;
			}
		n++;
	}
	/* The mark first, durably: at most one warning per message. */
	m->warned = now;
	if (n == 0 || save(s, m, 1) < 0) {
		if (n)
			log_warnx("msg %s: no delay warning now: its mark could not be kept", m->qid);
		m->warned = 0;
		goto out;
	}
	s->dsn.now = (time_t)now;
	if (dsn_send_delayed(s->o->q, m->id, &s->dsn, m->sender, v, n,
	    (time_t)(m->birth + waited + s->lifetime)) < 0) {
		/* Not queued: take the mark back, try at the next refusal. */
		m->warned = 0;
		(void)save(s, m, 0);
	}
out:
	free(v);
	rcptfile_free(&f);
}
