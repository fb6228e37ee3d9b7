/*
 * sched.c: see sched.h.  State is the queue plus this process's memory:
 * every preprocessed message has a struct msg with its next attempt as a
 * timer; when a timer fires the message joins its upstream's FIFO, and
 * up to `concurrency` deliverers run per upstream.  A restart rebuilds
 * everything from info/ and todo/, and from weir's own sched/S/N, which
 * keeps what must outlive a run: the waiting credit and the delay
 * warning's mark (wait.c).
 *
 * Stage 1 of an attempt (sendint.h): this file keeps the messages,
 * their timing, preprocessing, the trigger, elimination and cleanup; a
 * message due goes to its FIFO and on to the gate (batch.c's
 * batch_pump).  Batches, grants, deliverers and their reports are the
 * later stages'.
 *
 * Trusts: the queue, and the deliverer's report only through
 * report_parse().  Config keys (through struct sched_opts and the
 * config): hostname, admin, concurrency, queue_lifetime, retry_skip,
 * delay_warning, upstream.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "send/cleanup.h"
#include "send/dsn.h"
#include "send/note.h"
#include "send/rcptfile.h"
#include "send/preproc.h"
#include "send/sendint.h"

#define TODO_RESCAN_MS	(25 * 60 * 1000)	/* qmail's SLEEP_TODO */
#define TODO_RETRY_MS	(30 * 1000)	/* after a preprocessing stopped by this host */
#define CLEANUP_MS	(60 * 60 * 1000)

long long
sched_next_retry(long long birth, long long now, unsigned skip)
{
	long long n = 0;

	if (now > birth)
		n = (long long)sqrt((double)(now - birth));
	n += skip;
	return birth + n * n;
}

/* ---- senders ---- */

/*
 * A sender's address is kept once, however many messages share it (a
 * list post's 100,000 messages have one): counted, and freed with the
 * last of them.  32 bytes or more a message before (issue 36).
 */
struct sender {
	struct sender *next;
	size_t refs;
	char addr[];
};

static size_t
sender_slot(const struct sched *s, const char *a, size_t n)
{
	uint64_t h = 14695981039346656037ULL;	/* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)a[i]) * 1099511628211ULL;
	return (size_t)h & (s->senders_size - 1);
}

static const char *
sender_get(struct sched *s, const char *addr, size_t len)
{
	struct sender *e, **old = s->senders, *next;
	size_t i, oldsize = s->senders_size, k;

	if (s->senders_size > 0)
		for (e = s->senders[sender_slot(s, addr, len)]; e; e = e->next)
			if (strncmp(e->addr, addr, len) == 0 && e->addr[len] == '\0') {
				e->refs++;
				return e->addr;
			}
	if (s->nsenders + 1 > s->senders_size / 2) {
		s->senders_size = oldsize ? oldsize * 2 : 64;
		s->senders = xcalloc(s->senders_size, sizeof *s->senders);
		for (i = 0; i < oldsize; i++)
			for (e = old[i]; e; e = next) {
				next = e->next;
				k = sender_slot(s, e->addr, strlen(e->addr));
				e->next = s->senders[k];
				s->senders[k] = e;
			}
		free(old);
	}
	e = xmalloc(sizeof *e + len + 1);
	memcpy(e->addr, addr, len);
	e->addr[len] = '\0';
	e->refs = 1;
	k = sender_slot(s, addr, len);
	e->next = s->senders[k];
	s->senders[k] = e;
	s->nsenders++;
	return e->addr;
}

static void
sender_put(struct sched *s, const char *addr)
{
	struct sender **p;

	for (p = &s->senders[sender_slot(s, addr, strlen(addr))]; *p; p = &(*p)->next)
		if ((*p)->addr == addr) {
			struct sender *e = *p;

			if (--e->refs == 0) {
				*p = e->next;
				free(e);
				s->nsenders--;
			}
			return;
		}
	panic("sender_put: <%s> is not kept", addr);
}

/* ---- the message table ---- */

static size_t
slot(const struct sched *s, unsigned long id)
{
	return (size_t)(id * 2654435761UL) & (s->tabsize - 1);
}

struct msg *
msg_by_id(struct sched *s, unsigned long id)
{
	struct msg *m;

	for (m = s->tab[slot(s, id)]; m; m = m->hnext)
		if (m->id == id)
			return m;
	return NULL;
}

static void
msg_insert(struct sched *s, struct msg *m)
{
	size_t i, old = s->tabsize;
	struct msg **t = s->tab, *n;

	if (s->nmsg + 1 > s->tabsize) {
		s->tabsize *= 2;
		s->tab = xcalloc(s->tabsize, sizeof *s->tab);
		for (i = 0; i < old; i++)
			for (n = t[i]; n; ) {
				struct msg *next = n->hnext;

				n->hnext = s->tab[slot(s, n->id)];
				s->tab[slot(s, n->id)] = n;
				n = next;
			}
		free(t);
	}
	m->hnext = s->tab[slot(s, m->id)];
	s->tab[slot(s, m->id)] = m;
	s->nmsg++;
}

size_t
sched_upidx(const struct sched *s, const struct msg *m)
{
	return m->up == NO_UPSTREAM ? s->none : m->up;
}

void
sched_unlink(struct sched *s, struct msg *m)
{
	struct upq *u = &s->ups[sched_upidx(s, m)];
	struct msg **q, *prev = NULL;

	if (!m->queued)
		return;
	for (q = &u->head; *q; prev = *q, q = &(*q)->qnext)
		if (*q == m) {
			*q = m->qnext;
			if (u->tail == m)
				u->tail = prev;
			break;
		}
	m->queued = 0;
	m->qnext = NULL;
}

void
msg_forget(struct sched *s, struct msg *m)
{
	struct msg **p;

	for (p = &s->tab[slot(s, m->id)]; *p; p = &(*p)->hnext)
		if (*p == m) {
			*p = m->hnext;
			break;
		}
	sched_unlink(s, m);
	evloop_timer_cancel(s->ev, m->due);
	s->nmsg--;
	sender_put(s, m->sender);
	free(m->note);
	free(m);
}

/* The end of a pass over m's recipients: 1 if one was put off (the
 * message wants a retry). */
int
msg_pass_over(struct msg *m)
{
	int deferred = m->pass_deferred && !m->pass_again;

	m->pass_off = 0;
	m->pass_deferred = 0;
	m->pass_again = 0;
	m->pass_up = 0;
	if (m->via_up != NO_UPSTREAM) {
		/* The operator's upstream was for this pass: the next attempt
		 * routes as ever (reply/N says so again). */
		m->via_up = NO_UPSTREAM;
		m->replies_dirty = 1;
	}
	return deferred;
}

/* ---- timing ---- */

static void on_due(struct evloop *ev, struct evtimer *t, void *arg);

/* m's class priority, as weir-gate chooses the class (policy_class_for
 * on the sender and the not-done recipients), found once per run. */
static long long
msg_prio(struct sched *s, struct msg *m)
{
	const struct policy_class *c;
	struct rcptfile f;

	if (m->prio_known || s->pol == NULL || s->pol->ncls == 0)
		return m->prio;
	if (rcptfile_load(s->o->q, m->id, &f) != 0)
		return m->prio;		/* tried again at the next append */
	c = policy_class_for(s->pol, NULL, m->sender, (long long)(f.n - f.ndone));
	rcptfile_free(&f);
	m->prio = c ? c->priority : 0;
	m->prio_known = 1;
	return m->prio;
}

/* Into its upstream's FIFO: after every message of its class or a
 * higher one, so an interactive message passes a deep bulk backlog
 * (weir-gate then picks among the requests by class too). */
void
sched_fifo_append(struct sched *s, struct msg *m)
{
	struct upq *u = &s->ups[sched_upidx(s, m)];
	long long p = msg_prio(s, m);
	struct msg **q;

	m->queued = 1;
	m->qnext = NULL;
	if (u->tail == NULL || u->tail->prio >= p) {
		if (u->tail)
			u->tail->qnext = m;
		else
			u->head = m;
		u->tail = m;
		return;
	}
	for (q = &u->head; (*q)->prio >= p; q = &(*q)->qnext)
		;
	m->qnext = *q;
	*q = m;
}

void
sched_enqueue(struct sched *s, struct msg *m)
{
	if (m->job || m->queued || m->finishing || control_stops(s, m))
		return;
	wait_begin(m);
	sched_fifo_append(s, m);
	batch_pump(s, sched_upidx(s, m));
}

/* Attempt m at wall-clock time `when` (now or earlier: at once).  Until
 * then it waits (credited) only if held by a suspension. */
static void
sched_when(struct sched *s, struct msg *m, long long when, int held)
{
	long long now = sched_wall();

	if (m->finishing)
		return;		/* its files are going */
	evloop_timer_cancel(s->ev, m->due);
	m->due = NULL;
	control_next(s, m, when <= now ? 0 : when);
	if (control_stops(s, m))
		return;
	if (when <= now) {
		wait_begin(m);
		wait_note_sync(s, m);	/* before sched_enqueue, which may end m */
		sched_enqueue(s, m);
		return;
	}
	if (!held)
		wait_end(m);
	wait_note_sync(s, m);
	m->due = evloop_timer_at(s->ev, clock_mono_ms() + (uint64_t)(when - now) * 1000,
	    on_due, m);
}

void
sched_at(struct sched *s, struct msg *m, long long when)
{
	sched_when(s, m, when, 0);
}

void
sched_held(struct sched *s, struct msg *m, long long when)
{
	sched_when(s, m, when, 1);
}

static void
on_due(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct msg *m = arg;

	(void)ev; (void)t;
	m->due = NULL;	/* freed by the loop after this returns */
	sched_enqueue(m->s, m);
}

/* ---- loading messages ---- */

static int
id_cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* id was loaded by another way while the start's list is being loaded:
 * the list leaves it to that way. */
static void
load_taken(struct sched *s, unsigned long id)
{
	unsigned long *p;

	if (s->nload > 0 &&
	    (p = bsearch(&id, s->load, s->nload, sizeof *s->load, id_cmp)) != NULL)
		s->load_skip[p - s->load] = 1;
}

struct msg *
msg_load(struct sched *s, unsigned long id)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];
	struct buf b = BUF_INIT, why = BUF_INIT;
	const struct weir_upstream *u;
	struct qrec sender;
	struct stat st;
	struct msg *m;
	const char *w;

	if ((m = msg_by_id(s, id)) != NULL)
		return m;
	queue_path(path, s->o->q, Q_INFO, id);
	if (read_file_at(s->o->q->dfd, path, &b, 4096) != 0 ||
	    fstatat(s->o->q->dfd, path, &st, 0) < 0) {
		log_warn("msg %lu: read %s", id, path);
		buf_free(&b);
		return NULL;
	}
	queue_msgid(qid, id, &st.st_mtim);
	if (info_parse(b.s, b.len, &sender, &why) == 0 &&
	    (w = envelope_addr_problem(sender.addr, sender.len)) != NULL)
		buf_printf(&why, "sender: %s", w);	/* a stock qmail let it in */
	if (why.len > 0) {
		log_warnx("msg %s: %s is corrupt (%s); left for the admin", qid, path, why.s);
		buf_free(&b);
		buf_free(&why);
		return NULL;
	}
	m = xcalloc(1, sizeof *m);
	m->s = s;
	m->id = id;
	m->birth = (long long)st.st_mtime;
	memcpy(m->qid, qid, sizeof qid);
	m->sender = sender_get(s, sender.addr, sender.len);
	u = config_upstream_for(s->cfg, m->sender);
	m->up = u ? (size_t)(u - s->cfg->upstreams) : NO_UPSTREAM;
	m->wait_up = NO_UPSTREAM;
	m->via_up = NO_UPSTREAM;
	wait_note_restore(s, m);
	control_restore(s, m);
	msg_insert(s, m);
	load_taken(s, id);
	buf_free(&b);
	return m;
}

/* ---- elimination: S5 to S1 ---- */

/*
 * The files of ended messages go in batches, one after each turn of the
 * event loop, in the order QUEUE.md says (remote/ and local/, then info/
 * (S2), then mess/ (S1)) and each step durable before the next: every
 * message's file of a step is unlinked, then each folder touched is
 * fsynced once.  A journaling file system commits the whole batch's step
 * at the first fsync, so a burst of N ended messages costs about three
 * commits, not 4N.  A file found gone costs no fsync, but after a failed
 * try (it may be gone and not yet durable).  A batch's message is
 * `finishing`: nothing schedules it, acts on it or writes its notes.
 */
static const enum qdir fin_steps[] = { Q_REMOTE, Q_LOCAL, Q_INFO, Q_MESS };

static void
on_finish_batch(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;
	struct queue *q = s->o->q;
	unsigned char *touched = xcalloc(q->split, 1);
	char path[QPATH_MAX], dir[QPATH_MAX];
	size_t i, k, n = s->nfin;
	struct msg **v = s->fin, *m;
	int *failed = xcalloc(n, sizeof *failed);
	unsigned d;

	(void)ev; (void)t;
	s->fin = NULL;
	s->nfin = s->fin_cap = 0;
	for (k = 0; k < sizeof fin_steps / sizeof fin_steps[0]; k++) {
		memset(touched, 0, q->split);
		for (i = 0; i < n; i++) {
			m = v[i];
			if (failed[i])
				continue;
			queue_path(path, q, fin_steps[k], m->id);
			if (unlinkat(q->dfd, path, 0) == 0 || (errno == ENOENT && m->finish_failed))
				touched[m->id % q->split] = 1;
			else if (errno != ENOENT) {
				log_warn("msg %s: unlink %s; will try again", m->qid, path);
				failed[i] = 1;
			}
		}
		for (d = 0; d < q->split; d++) {
			if (!touched[d])
				continue;
			snprintf(dir, sizeof dir, "%s/%u", qdir_name[fin_steps[k]], d);
			if (fsync_dir(q->dfd, dir) == 0)
				continue;
			log_warn("fsync folder %s; its messages' removal will be tried again", dir);
			for (i = 0; i < n; i++)
				failed[i] |= v[i]->id % q->split == d;
		}
	}
	for (i = 0; i < n; i++) {
		m = v[i];
		m->finishing = 0;
		if (failed[i]) {
			m->finish_failed = 1;
			sched_at(s, m, sched_wall() + SYSFAIL_S);
			continue;
		}
		log_info("msg %s: end", m->qid);
		control_forget(s, m);
		msg_forget(s, m);
	}
	free(failed);
	free(touched);
	free(v);
}

/* S5 to S1, as QUEUE.md says: bounce first (here), then the batch. */
void
sched_finish(struct sched *s, struct msg *m)
{
	/* Recipients a stock qmail-send left in local/ are never dropped:
	 * they join remote/ and go first. */
	switch (local_takeover(s->o->q, m->id, &s->pre)) {
	case 1:
		sched_at(s, m, sched_wall());
		return;
	case -1:
		goto later;
	}
	s->dsn.now = (time_t)sched_wall();
	if (dsn_send(s->o->q, m->id, &s->dsn) < 0)
		goto later;
	/* sched/S/N first, but not durably: one left behind is harmless
	 * (its birth tells it from a later message's; the cleanup removes
	 * it once mess/S/N is gone). */
	if (m->has_note && note_remove(s->o->q, m->id) == 0)
		m->has_note = 0;
	evloop_timer_cancel(s->ev, m->due);
	m->due = NULL;
	m->finishing = 1;
	if (s->nfin == s->fin_cap) {
		s->fin_cap = s->fin_cap ? 2 * s->fin_cap : 64;
		s->fin = xrealloc(s->fin, s->fin_cap * sizeof *s->fin);
	}
	s->fin[s->nfin++] = m;
	if (s->nfin == 1)
		evloop_timer_at(s->ev, 0, on_finish_batch, s);	/* after what is pending */
	return;
later:
	sched_at(s, m, sched_wall() + SYSFAIL_S);
}

/* ---- todo/ and the trigger ---- */

/*
 * todo/ is read in one pass (names only), then preprocessed a slice at a
 * time, one slice per turn of the event loop, so that deliveries, gate
 * replies and the trigger are served while a large backlog is taken in
 * (qmail-send likewise takes one todo/ entry per pass of its loop).  A
 * slice is one preprocess_batch(): its messages share their fsyncs.
 */
#define TODO_SLICE 32

static void on_todo_slice(struct evloop *ev, struct evtimer *t, void *arg);
static void on_todo_retry(struct evloop *ev, struct evtimer *t, void *arg);

static void
scan_todo(struct sched *s)
{
	struct queue *q = s->o->q;
	struct dirent *e;
	unsigned long id;
	int fd;
	DIR *d;

	if (s->todo_busy) {
		s->todo_again = 1;	/* after the list in hand */
		return;
	}
	fd = openat(q->dfd, "todo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		log_warn("open todo");
		if (fd >= 0)
			close(fd);
		return;
	}
	s->ntodo = s->todo_pos = 0;
	while ((e = readdir(d)) != NULL) {
		if (queue_parse_id(e->d_name, &id) < 0)
			continue;
		if (s->ntodo == s->todo_cap) {
			s->todo_cap = s->todo_cap ? s->todo_cap * 2 : 256;
			s->todo = xrealloc(s->todo, s->todo_cap * sizeof *s->todo);
		}
		s->todo[s->ntodo++] = id;
	}
	/* An entry may be one whose link weir-queue has not made durable
	 * yet (it fsyncs todo/ after the link): make it so before taking
	 * it, else a power cut could leave intd/ and info/ without todo/
	 * (QUEUE.md; found by the crash replay, crashreplay -r). */
	if (s->ntodo > 0 && fsync(dirfd(d)) < 0) {
		log_warn("fsync todo; preprocessing again in %d s", TODO_RETRY_MS / 1000);
		s->ntodo = 0;
		if (!s->todo_retry) {
			s->todo_retry = 1;
			evloop_timer_at(s->ev, clock_mono_ms() + TODO_RETRY_MS, on_todo_retry, s);
		}
	}
	closedir(d);
	if (s->ntodo == 0)
		return;
	s->todo_busy = 1;
	evloop_timer_at(s->ev, 0, on_todo_slice, s);
}

static void
on_todo_retry(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)ev; (void)t;
	s->todo_retry = 0;
	scan_todo(s);
}

static void
on_todo_slice(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;
	size_t i, n = s->ntodo - s->todo_pos;
	struct preproc_msg *v;
	struct msg *m;

	(void)t;
	if (n > TODO_SLICE)
		n = TODO_SLICE;
	v = xcalloc(n, sizeof *v);
	for (i = 0; i < n; i++)
		v[i].id = s->todo[s->todo_pos + i];
	s->todo_pos += n;
	preprocess_batch(s->o->q, &s->pre, v, n);
	for (i = 0; i < n; i++) {
		if (v[i].rc < 0) {
			/* A full disk, say: the message is in no timer's
			 * hands, and no new mail may come to pull the trigger. */
			if (v[i].rc == -2 && !s->todo_retry) {
				s->todo_retry = 1;
				evloop_timer_at(ev, clock_mono_ms() + TODO_RETRY_MS, on_todo_retry, s);
			}
			continue;
		}
		if ((m = msg_load(s, v[i].id)) != NULL) {
			counts_queued(s, m, v[i].nrcpt);
			sched_at(s, m, sched_wall());	/* may end m */
		}
	}
	free(v);
	if (s->todo_pos < s->ntodo) {
		evloop_timer_at(ev, 0, on_todo_slice, s);	/* after what is pending */
		return;
	}
	s->todo_busy = 0;
	if (s->ctl_again)
		control_scan(s);
	if (s->todo_again) {
		s->todo_again = 0;
		scan_todo(s);
	}
}

/*
 * At start, every preprocessed message of info/ is taken in: first its
 * id, in one pass over the folders (none in todo/: scan_todo
 * preprocesses those), then the messages themselves, LOAD_SLICE per
 * turn of the event loop, each due at once.  The first are on their way
 * to weir-gate while the others load, so a queue of 100,000 does not
 * hold back the first send for the time it takes to read them all
 * (issue 36: 2 s; Postfix's qmgr likewise delivers while it fills its
 * active queue).  Until the last slice, the sweep (wait.c) does not
 * start, since it would drop the sched/waits lines of the messages not
 * loaded yet, and the "started on" line waits.  A message loaded by
 * another way meanwhile (preprocessing, a control request) is left to
 * it (load_taken); one a delivery of an earlier run holds
 * (flight_recover) waits for it.
 */
#define LOAD_SLICE 256

static void start_done(struct sched *s);

/* The ids of a folder's message files, appended to *v. */
static void
list_ids(struct sched *s, const char *dir, unsigned long **v, size_t *n, size_t *cap)
{
	if (queue_dir_ids(s->o->q->dfd, dir, v, n, cap) < 0)
		log_warn("read %s", dir);
}

static void
load_slice(struct sched *s)
{
	size_t end = s->load_pos + LOAD_SLICE;
	unsigned long id;
	struct msg *m;

	if (end > s->nload)
		end = s->nload;
	for (; s->load_pos < end; s->load_pos++) {
		if (s->load_skip[s->load_pos])
			continue;
		id = s->load[s->load_pos];
		if ((m = msg_load(s, id)) != NULL && m->job == NULL)
			sched_at(s, m, sched_wall());
	}
	if (s->load_pos < s->nload)
		return;
	free(s->load);
	free(s->load_skip);
	s->load = NULL;
	s->load_skip = NULL;
	s->nload = s->load_pos = 0;
}

static void
on_load_slice(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)t;
	load_slice(s);
	if (s->nload > 0)
		evloop_timer_at(ev, 0, on_load_slice, s);	/* after what is pending */
	else
		start_done(s);
}

static void
scan_info(struct sched *s)
{
	char path[QPATH_MAX];
	unsigned long *todo = NULL;
	size_t ntodo = 0, todo_cap = 0, cap = 0, i, k;
	unsigned d;

	for (d = 0; d < s->o->q->split; d++) {
		snprintf(path, sizeof path, "info/%u", d);
		list_ids(s, path, &s->load, &s->nload, &cap);
	}
	list_ids(s, "todo", &todo, &ntodo, &todo_cap);
	if (s->nload > 0)
		qsort(s->load, s->nload, sizeof *s->load, id_cmp);
	if (ntodo > 0)
		qsort(todo, ntodo, sizeof *todo, id_cmp);
	/* Those in todo/ too are S4: scan_todo preprocesses them. */
	for (i = k = 0; i < s->nload; i++)
		if (ntodo == 0 || !bsearch(&s->load[i], todo, ntodo, sizeof *todo, id_cmp))
			s->load[k++] = s->load[i];
	s->nload = k;
	s->load_skip = xcalloc(k + 1, 1);
	free(todo);
	load_slice(s);
	if (s->nload > 0)
		evloop_timer_at(s->ev, 0, on_load_slice, s);
}

static int
open_trigger(struct sched *s)
{
	/* Read and write (Linux's FIFO semantics): with a writer of its
	 * own, the FIFO never reads as ended when an injector closes it,
	 * so only the injectors' bytes wake the loop, once each burst.  A
	 * read-only end woke it a second time for the injector's close
	 * (POLLHUP), which rescanned todo/ at once: a message whose
	 * preprocessing had just failed (a full disk) was tried again at
	 * once instead of on its timer. */
	s->trigfd = openat(s->o->q->dfd, "lock/trigger", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (s->trigfd < 0) {
		log_warn("open lock/trigger");
		return -1;
	}
	return 0;
}

static void on_trigger(struct evloop *ev, int fd, int events, void *arg);

static void
rearm_trigger(struct sched *s)
{
	if (open_trigger(s) == 0)
		evloop_watch(s->ev, s->trigfd, EV_READ, on_trigger, s);
}

/* `weir flush` leaves lock/flush and pulls the trigger: every message
 * waiting for a retry is tried now (still through the gate). */
static void
flush_if_asked(struct sched *s)
{
	unsigned long *ids = NULL;
	struct msg *m;
	size_t i, n = 0;

	if (unlinkat(s->o->q->dfd, "lock/flush", 0) < 0) {
		if (errno != ENOENT)
			log_warn("unlink lock/flush");
		return;
	}
	/* Ids first: starting one message may end (and free) it. */
	ids = xcalloc(s->nmsg + 1, sizeof *ids);
	for (i = 0; i < s->tabsize; i++)
		for (m = s->tab[i]; m; m = m->hnext)
			if (m->due)
				ids[n++] = m->id;
	for (i = 0; i < n; i++)
		if ((m = msg_by_id(s, ids[i])) != NULL && m->due) {
			evloop_timer_cancel(s->ev, m->due);
			m->due = NULL;
			sched_enqueue(s, m);
		}
	free(ids);
	log_info("flush: %zu deferred messages to be tried now", n);
}

static void
on_trigger(struct evloop *ev, int fd, int events, void *arg)
{
	struct sched *s = arg;
	char junk[256];
	ssize_t n;

	(void)events;
	while ((n = read(fd, junk, sizeof junk)) > 0)
		;
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		/* Not expected with our own writer: start again with it. */
		if (n < 0)
			log_warn("read lock/trigger");
		evloop_unwatch(ev, fd);
		close(fd);
		rearm_trigger(s);
	}
	scan_todo(s);
	flush_if_asked(s);
	control_scan(s);
}

static void
on_rescan(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)t;
	scan_todo(s);
	evloop_timer_at(ev, clock_mono_ms() + TODO_RESCAN_MS, on_rescan, s);
}

static void
on_cleanup(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)t;
	cleanup_pass(s->o->q, (time_t)sched_wall());
	evloop_timer_at(ev, clock_mono_ms() + CLEANUP_MS, on_cleanup, s);
}

static void
on_term(struct evloop *ev, int signo, void *arg)
{
	struct sched *s = arg;
	size_t i;

	(void)ev;
	/* Crash-only: the queue is consistent at every instant.  But grants
	 * no deliverer has used go back to the gate, which would otherwise
	 * count each as maybe sent for its grace (10 minutes: a slot each
	 * across a restart, or the death of weir run). */
	log_info("signal %d: exiting", signo);
	for (i = 0; i < s->nups; i++)
		deliver_refund_unstarted(s, i);
	_exit(0);
}

static void
on_lock_timeout(int signo)
{
	(void)signo;	/* only to interrupt flock() */
}

/*
 * One weir-send per queue.  Right after a weir-send was killed, a child
 * of it that had not yet reached exec may still hold the lock for a
 * moment: wait for it (blocked in flock, not polling) up to LOCK_WAIT_S
 * seconds, then give up.
 */
#define LOCK_WAIT_S 3

static void
take_lock(int fd, const char *queue)
{
	struct sigaction sa, old;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return;
	if (errno != EWOULDBLOCK)
		fatal(111, "lock lock/sendmutex");
	log_info("lock/sendmutex is taken; waiting up to %d s", LOCK_WAIT_S);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_lock_timeout;	/* no SA_RESTART: flock returns EINTR */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, &old) < 0)
		fatal(111, "sigaction");
	alarm(LOCK_WAIT_S);
	if (flock(fd, LOCK_EX) < 0)
		fatal(111, "lock/sendmutex: another weir-send (or qmail-send) runs on %s", queue);
	alarm(0);
	if (sigaction(SIGALRM, &old, NULL) < 0)
		fatal(111, "sigaction");
}

static void
on_hup(struct evloop *ev, int signo, void *arg)
{
	(void)ev; (void)signo;
	reload_sighup(arg);
}

/* Every message of info/ is loaded: the start is over. */
static void
start_done(struct sched *s)
{
	log_info("started on %s: %zu messages queued", s->o->q->path, s->nmsg);
	wait_sweep_start(s);
}

/* ---- the loop ---- */

/*
 * At the verbose level, the loop says what it waits for whenever it has
 * nothing left to do and something happened since it last said so (a
 * line was logged, or these numbers changed): deliveries running,
 * batches granted and waiting for a run slot, batches asking weir-gate
 * (or waiting for it to answer again), messages held.  Tests wait for
 * this line instead of sleeping: after it, nothing more happens until a
 * deliverer, weir-gate, a timer or new mail wakes weir-send.
 */
static void
say_idle(struct sched *s)
{
	size_t n[4] = { 0, 0, 0, 0 };
	const struct job *j;

	for (j = s->jobs; j; j = j->next)
		n[j->state == J_RUNNING ? 0 : j->state == J_GRANTED ? 1 : 2]++;
	n[3] = s->nmsg;
	if (log_lines() == s->idle_lines && memcmp(n, s->idle_said, sizeof n) == 0)
		return;
	log_debug("idle: %zu running, %zu granted, %zu asking weir-gate, %zu queued", n[0], n[1],
	    n[2], n[3]);
	memcpy(s->idle_said, n, sizeof n);
	s->idle_lines = log_lines();
}

/* evloop_run(), but at the verbose level, whatever is ready is done
 * first (the loop does not wait) and say_idle() has its say before the
 * loop sleeps. */
static noreturn void
loop(struct sched *s)
{
	int n;

	for (;;) {
		if (log_verbose()) {
			while ((n = evloop_once(s->ev, 0)) > 0)
				;
			if (n < 0)
				break;
			say_idle(s);
		}
		if (evloop_once(s->ev, -1) < 0)
			break;
	}
	fatal(111, "event loop");
}

/* Where weir-gate's answers go (gatelink.c decides nothing): what one
 * means for a batch, batch.c says; for a session's slot, session.c. */
static const struct gatelink_ops gate_ops = {
	.answer = batch_answer,
	.slot = sess_answer,
	.suspended = batch_suspended,
	.connected = batch_gate_up,
	.slots_lost = sess_forget_slots,
	.lost = batch_gate_lost,
};

int
sched_run(const struct sched_opts *o)
{
	struct sched s;
	struct aliases aliases;
	int lockfd;

	memset(&s, 0, sizeof s);
	s.o = o;
	s.cfg = o->cfg;
	s.snapfd = -1;
	lockfd = openat(o->q->dfd, "lock/sendmutex", O_WRONLY | O_CLOEXEC);
	if (lockfd < 0)
		fatal(111, "open lock/sendmutex");
	take_lock(lockfd, o->q->path);

	/* From here on the settings are s.cfg's (o's, or the same file's
	 * as snapshot for the deliverers): see reload.c. */
	reload_snapshot_start(&s);
	reload_classes(&s);
	s.concurrency = s.cfg == o->cfg ? o->concurrency : s.cfg->concurrency;
	s.lifetime = s.cfg == o->cfg ? o->lifetime : s.cfg->queue_lifetime;
	s.retry_skip = s.cfg == o->cfg ? o->retry_skip : s.cfg->retry_skip;
	s.delay_warning = s.cfg == o->cfg ? o->delay_warning : s.cfg->delay_warning;
	s.pre.hostname = s.dsn.hostname = s.cfg->hostname;
	s.pre.admin = s.dsn.admin = s.cfg->admin;
	/* Read at the first local recipient, again when it changes (its
	 * path is the one in force at start). */
	aliases_init(&aliases, s.cfg->aliases_file);
	s.pre.aliases = &aliases;
	s.dsn.qq_program = o->qq_program;

	s.tabsize = 1024;
	s.tab = xcalloc(s.tabsize, sizeof *s.tab);
	s.nups = s.cfg->nupstreams + 1;
	s.none = s.cfg->nupstreams;
	s.ups = xcalloc(s.nups, sizeof *s.ups);
	{
		size_t i;

		for (i = 0; i < s.cfg->nupstreams; i++)
			s.ups[i].name = xstrdup(s.cfg->upstreams[i].name);
	}
	s.ev = evloop_new();
	evloop_signal(s.ev, SIGCHLD, deliver_on_child, &s);
	evloop_signal(s.ev, SIGTERM, on_term, &s);
	evloop_signal(s.ev, SIGINT, on_term, &s);
	evloop_signal(s.ev, SIGHUP, on_hup, &s);
	signal(SIGPIPE, SIG_IGN);
	if (s.cfg->nupstreams == 0)
		log_warnx("no upstream is configured: mail stays queued");

	s.starting = 1;
	s.notes_ok = note_init(o->q) == 0;
	sess_note(&s);		/* none open yet: an earlier run's list goes */
	if (s.notes_ok && note_alive_load(o->q, &s.alive_before) < 0)
		s.alive_before = 0;
	if (s.notes_ok)
		(void)note_waits_load(o->q, &s.found, &s.nfound);	/* until wait_sweep_start */
	s.waits_at = s.alive_before;	/* what its lines are worth, until then */
	gatelink_open(&s, &gate_ops);
	keepalive_check(&s);
	rearm_trigger(&s);
	cleanup_pass(o->q, (time_t)sched_wall());
	flight_recover(&s);
	scan_info(&s);
	scan_todo(&s);
	flush_if_asked(&s);	/* everything is due now anyway: just clear it */
	control_scan(&s);
	evloop_timer_at(s.ev, clock_mono_ms() + TODO_RESCAN_MS, on_rescan, &s);
	evloop_timer_at(s.ev, clock_mono_ms() + CLEANUP_MS, on_cleanup, &s);
	if (s.nload == 0)
		start_done(&s);		/* else after the last slice of info/ */
	loop(&s);
}
