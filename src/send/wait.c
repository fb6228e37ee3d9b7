/*
 * wait.c: the waiting credit and the delay warning, and their records in
 * weir's own files sched/S/N and sched/waits (mail/schedfile.h, QUEUE.md).
 *
 * A message's credit is the time it was due but had no deliverer
 * running (sendint.h); queue_lifetime and delay_warning count its age
 * without it.  Two records keep it across a restart, each the credit as
 * it was when written, so a restart takes the larger:
 *   - sched/waits, one file rewritten by the sweep every 10 s (when its
 *     bytes changed): every open wait, as its message's closed credit
 *     and the wall time the wait began.  A backlog of any size costs one
 *     file per sweep, not one note per waiting message.
 *   - the message's own note sched/S/N, written when both records are
 *     30 s or more behind (a closed wait: a message that left
 *     sched/waits without its credit), when the note says the message
 *     waits and it does not, and when the delay warning is queued: a
 *     wait that closes within 30 s, or whose message is then gone,
 *     writes nothing.
 * sched/alive, written right after sched/waits (never when that failed),
 * says until when weir-send ran; a restart credits a recorded open wait
 * up to it, and no record ever says more than was true at that time.  So
 * a crash of weir-send (kill -9) loses at most 10 s of an open wait's
 * credit (since the last sweep), and under 40 s of a closed one (under
 * 30 s never written, found late by up to 10 s).  The records are not
 * fsynced (a rename over the old version, so a reader sees one version
 * or the other): a power cut may also lose what the kernel had not yet
 * written back (Linux writes dirty data back after 30 s by default).  A
 * lost update only ever makes the credit smaller, never larger, except
 * during a deliverer's run after a note recorded an open wait, which a
 * crash may count as waiting (at most that run's time).
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

#define SWEEP_MS	10000	/* sched/waits and sched/alive, and notes checked */
#define BEHIND_MS	30000	/* a note this far behind is rewritten */
#define SWEEP_WRITES	500	/* notes written per turn of the event loop */
#define WAITS_UNKNOWN	2	/* waits_hash: sched/waits may hold anything */

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
	if (m->note == NULL)
		m->note = xmalloc(sizeof *m->note);
	*m->note = n;
	m->has_note = 1;
	return 0;
}

/* What a restart would credit for a record of waited seconds and an open
 * wait since (0: none), sched/alive saying `alive`. */
static long long
recorded(long long waited, long long since, long long alive)
{
	return waited + (since && alive > since ? alive - since : 0);
}

/* wait_note_sync at monotonic ms mono, wall time now (the sweep reads
 * the clocks once for all the messages it looks at). */
static int
note_sync_at(struct sched *s, struct msg *m, uint64_t mono, long long now)
{
	long long ondisk = 0, since = 0, w;

	if (!s->notes_ok || m->finishing)
		return 0;
	if (m->wait_since)
		since = now - (long long)((mono - m->wait_since) / 1000);
	if (m->has_note) {
		/* It says the message waits, and it does not (or not since
		 * then: another wait began). */
		if (m->note->since && (since == 0 || llabs(since - m->note->since) > 1))
			return save(s, m, 0) == 0 ? 1 : -1;
		ondisk = recorded(m->note->waited, m->note->since, now) * 1000;
	}
	if (m->in_waits && (w = recorded(m->waits_waited, m->waits_since, s->waits_at) * 1000) > ondisk)
		ondisk = w;
	if (credit_ms(m, mono) - ondisk < BEHIND_MS)
		return 0;
	return save(s, m, 0) == 0 ? 1 : -1;
}

int
wait_note_sync(struct sched *s, struct msg *m)
{
	return note_sync_at(s, m, clock_mono_ms(), sched_wall());
}

void
wait_note_restore(struct sched *s, struct msg *m)
{
	const struct schedwait *w;
	struct schednote n;
	long long credit = 0, now = sched_wall();
	int r;

	if (!s->notes_ok)
		return;
	r = note_load(s->o->q, m->id, m->birth, &n);
	if (r > 0) {
		m->has_note = 1;
		m->note = xmalloc(sizeof *m->note);
		*m->note = n;
		m->warned = n.warned;
		credit = recorded(n.waited, n.since, s->alive_before);
	}
	w = schedfile_find_wait(s->found, s->nfound, m->id);
	if (w && w->birth == m->birth) {
		/* Its line holds until the first sweep rewrites the file
		 * (s->waits_at is alive_before until then): a message that
		 * waits again at once writes no note for the credit it
		 * carries. */
		m->in_waits = 1;
		m->waits_waited = w->waited;
		m->waits_since = w->since;
		if (recorded(w->waited, w->since, s->alive_before) > credit)
			credit = recorded(w->waited, w->since, s->alive_before);
	}
	if (credit > now - m->birth)
		credit = now - m->birth > 0 ? now - m->birth : 0;
	m->waited_ms = credit * 1000;
	if (r < 0) {
		/* Unreadable: no warning (one may have gone); replaced by a
		 * sound note that says so. */
		m->warned = now;
		(void)save(s, m, 0);
	}
	/* At the start, one line per message at the verbose level only: a
	 * restart with a backlog of 100,000 wrote as many (issue 36); their
	 * total is logged when all is loaded (wait_sweep_start). */
	if (credit > 0 && !s->starting)
		log_info("msg %s: %lld s of waiting carried over", m->qid, credit);
	else if (credit > 0) {
		log_debug("msg %s: %lld s of waiting carried over", m->qid, credit);
		s->carried++;
		s->carried_s += credit;
	}
}

/* ---- the sweep: sched/waits and sched/alive, notes behind ---- */

/* FNV-1a, to see whether sched/waits would change: 0 for no bytes, else
 * odd (never WAITS_UNKNOWN). */
static uint64_t
hash(const struct buf *b)
{
	uint64_t h = 14695981039346656037ULL;
	size_t i;

	for (i = 0; i < b->len; i++)
		h = (h ^ (unsigned char)b->s[i]) * 1099511628211ULL;
	return b->len ? h | 1 : 0;
}

/* sched/waits (when its bytes change), then sched/alive. */
static void
save_waits(struct sched *s)
{
	uint64_t mono = clock_mono_ms(), h;
	long long now = sched_wall();
	struct buf b = BUF_INIT;
	struct schedwait w;
	struct msg *m;
	size_t i;
	int ok;

	for (i = 0; i < s->tabsize; i++)
		for (m = s->tab[i]; m; m = m->hnext) {
			if (m->wait_since == 0 || m->finishing) {
				m->in_waits = 0;
				continue;
			}
			/* A wait already listed keeps its line as it was (its
			 * wall time, computed again, could move by a second). */
			if (!m->in_waits || m->waits_mono != m->wait_since) {
				m->waits_mono = m->wait_since;
				m->waits_waited = m->waited_ms / 1000;
				m->waits_since = now - (long long)((mono - m->wait_since) / 1000);
			}
			m->in_waits = 1;
			w.id = m->id;
			w.birth = m->birth;
			w.waited = m->waits_waited;
			w.since = m->waits_since;
			schedfile_format_wait(&w, &b);
		}
	h = hash(&b);
	ok = h == s->waits_hash || note_waits_save(s->o->q, &b) == 0;
	buf_free(&b);
	if (!ok) {
		/* The old file may or may not be there: trust neither it nor
		 * sched/alive's next value (not written, so a restart does
		 * not credit the old lines past this time). */
		for (i = 0; i < s->tabsize; i++)
			for (m = s->tab[i]; m; m = m->hnext)
				m->in_waits = 0;
		s->waits_hash = WAITS_UNKNOWN;	/* rewritten next time */
		log_warnx("%s not written: %s not either; a restart now credits open waits less",
		    SCHED_WAITS, SCHED_ALIVE);
		return;
	}
	s->waits_hash = h;
	if (note_alive_save(s->o->q, now) < 0)
		log_warnx("%s not written: a restart now credits open waits less", SCHED_ALIVE);
	else
		s->waits_at = now;	/* the lines, written or not, count up to it */
}

static void
on_sweep(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;
	unsigned writes = 0;
	struct msg *m;
	uint64_t mono;
	long long now;
	int r = 0;

	(void)t;
	if (s->sweep_pos == 0)
		save_waits(s);
	mono = clock_mono_ms();
	now = sched_wall();
	for (; s->sweep_pos < s->tabsize && writes < SWEEP_WRITES && r >= 0; s->sweep_pos++)
		for (m = s->tab[s->sweep_pos]; m && r >= 0; m = m->hnext)
			if ((r = note_sync_at(s, m, mono, now)) > 0)
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
	if (s->carried > 0)
		log_info("%zu message%s carried over %lld s of waiting in all (sched/)", s->carried,
		    s->carried == 1 ? "" : "s", s->carried_s);
	s->starting = 0;
	free(s->found);		/* every message of the last run is loaded */
	s->found = NULL;
	s->nfound = 0;
	if (!s->notes_ok)
		return;
	s->sweep_pos = 0;
	s->waits_hash = WAITS_UNKNOWN;
	/* At once: the file as found is replaced, and a message whose line
	 * gave it credit but that no longer waits gets a note now. */
	evloop_timer_at(s->ev, 0, on_sweep, s);
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
