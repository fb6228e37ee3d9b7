/*
 * sendint.h: weir-send's internals, shared by its files.  Not for other
 * programs.
 *
 * A message's life, one stage after another:
 *
 *   1 schedule   sched.c     the message table, each message's timer,
 *                            the FIFO per upstream (class order), its
 *                            end (sched_finish: S5 to S1)
 *                  | sched_enqueue -> batch_pump
 *   2 ask        batch.c     a batch of the message's not-done
 *                            recipients: a job (job.c), asked of the
 *                            gate (batch_ask); what the gate's answer
 *                            means for it (batch_answer)
 *                via.c       where a batch goes: its recipients' group
 *                            (recipient_domains), the fallback conditions
 *                            it carries, the next upstream of its route
 *                            when the gate answers LATER, and back to its
 *                            primary once that takes mail (recalled)
 *                  | a grant -> deliver_granted
 *   3 deliver    deliver.c   run slots per upstream: a deliverer of the
 *                            job's own, or a kept session (session.c);
 *                            its report and outcome pipes read
 *                  | pipes read, deliverer done -> complete_job
 *                  | (or it could not run -> complete_unrun)
 *   4 complete   complete.c  the outcome to the gate (gatelink_tell), the
 *                            report applied (D marks, bounce notes, the
 *                            delay warning); the message's next step
 *
 * Under the stages, gatelink.c, the gate protocol's adapter: the only
 * file that talks to the gate (mail/gateclient.h), calling no other
 * file here.  Any stage writes through it (gatelink_ask by batch.c,
 * gatelink_cancel by via.c and session.c, gatelink_use by 3,
 * gatelink_tell by 2, 3, 4, flight.c and reload.c, the slots by
 * session.c, gatelink_counts by counts.c); the gate's answers come back
 * through the callbacks sched.c sets once (struct gatelink_ops): to
 * batch.c for a job's request, to session.c for a session's slot.
 *
 * A job (struct job: a batch on its way) is made and freed in job.c and
 * nowhere else: job_new (by batch.c; by flight.c for a delivery an
 * earlier weir-send left running), job_free and job_drop (freed, its
 * message back to its FIFO) by whichever file is done with it.
 *
 * The way back, and only through these entries:
 *   to 1: sched_at (the rest of the pass, a retry: a timer), sched_held
 *         (a suspension), sched_finish (no recipient left), and
 *         job_drop's sched_enqueue (a job undone: back to the FIFO);
 *         called by 2 and 4.
 *   to 2: batch_pump (a run slot is free: more may ask; by
 *         deliver_kick, and by deliver.c for the primary of a batch a
 *         fallback carried), batch_took (a deliverer took fewer recipients
 *         than the batch; by 4); via_recall (a request waiting at the
 *         gate cancelled, to be asked elsewhere; by via.c itself, and
 *         control.c for `requeue --via`).
 *   to 3: deliver_kick (a run slot is free; by session.c and reload.c),
 *         deliver_exited (a session's deliverer is done with its job;
 *         by session.c, and flight.c for an earlier run's),
 *         sess_job_done (a job's end frees its kept session; by
 *         job_free); what a batch said of its upstream (throttling, idle
 *         sessions closed) is complete_job's return value, acted on by
 *         deliver.c.
 * Stage 1's helpers call nothing onward (sched_next_retry,
 * msg_pass_over; sched_wall is this header's).  A deliverer's end
 * (SIGCHLD) reaches deliver.c (deliver_on_child) and, for a session's,
 * session.c (sess_reaped); a gate reply reaches gatelink.c (on_reply),
 * which hands it on (struct gatelink_ops).
 *
 * Beside the stages:
 *   session.c  kept sessions (weir-remote -S), stage 3's: their slots
 *              asked of the gate, jobs handed to them
 *   flight.c   a session's flight file (by session.c); at start (by
 *              1), an earlier run's deliveries completed through 3 and 4
 *   counts.c   the counters (by 1, 2, 4 and session.c), told to the
 *              gate through gatelink.c
 *   wait.c     the waiting credit and its note in sched/ (by 1, 3, 4
 *              and control.c)
 *   notice.c   the admin's notice of an OAuth login needed (by 4)
 *   control.c  `weir hold` and the others (by 1 and 4; calls 1,
 *              wait.c, and via.c for `requeue --via`: via_recall)
 *   reload.c   SIGHUP (by 1; calls 1, 2, 3, job.c, session.c,
 *              keepalive.c)
 *   keepalive.c  the OAuth keep-alive (weir-remote -K), no message:
 *              started by 1 and reload.c, reaped by 3, runs its
 *              deliverer with 3's helpers, mails with notice.c
 * and, calling none of these: rcptfile.c, preproc.c, dsn.c, note.c,
 * report.c, cleanup.c (their own headers).
 *
 * Who calls whom, file by file (scripts/calllinks.py build/src/send
 * prints it from the objects; leaving out the six files just named;
 * make check fails when the two differ).  The files that reach each
 * other through these calls (the circle: sched, batch, via, deliver,
 * session, flight, complete, job, counts, control, reload, keepalive)
 * have 48 links among them; scripts/sendcircle.sh fails make check
 * when there are more (or fewer, until this figure is lowered):
 *   sched.c     batch control counts deliver flight gatelink keepalive
 *               reload session wait
 *   batch.c     counts deliver gatelink job sched session via
 *   deliver.c   batch complete gatelink job keepalive session wait
 *   complete.c  batch control counts gatelink job notice sched via
 *               wait
 *   job.c       sched session
 *   session.c   counts deliver flight gatelink
 *   flight.c    deliver gatelink job sched via
 *   counts.c    gatelink session
 *   via.c       batch counts gatelink job sched
 *   control.c   sched via wait
 *   reload.c    deliver gatelink job keepalive sched session via
 *   keepalive.c deliver notice
 *   main.c      sched
 *   gatelink.c, wait.c, notice.c: none
 */
#ifndef WEIR_SENDINT_H
#define WEIR_SENDINT_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "lib/bootid.h"
#include "lib/buf.h"
#include "lib/evloop.h"
#include "mail/gateclient.h"
#include "mail/outcome.h"
#include "mail/policy.h"
#include "mail/schedfile.h"
#include "send/dsn.h"
#include "send/preproc.h"
#include "send/report.h"
#include "send/sched.h"

#define SYSFAIL_S	300		/* retry after local trouble */
/* A grant that could not go to a deliverer because the connection to
 * weir-gate went (its START not written: the gate gives the grant back):
 * not local trouble; the message asks again once the gate is back. */
#define GRANT_LOST	(-2)
#define NO_UPSTREAM	((size_t)-1)
/* Requests weir-send keeps at the gate per upstream beyond those it can
 * run, so the gate can pick the most urgent class among them; a message
 * that outranks one of them may go to the gate up to LOOKAHEAD more. */
#define LOOKAHEAD	16

struct job;
struct sched;
struct sender;
struct dsess;
struct pending;
struct keepalive;
struct gatelink_ops;

/*
 * A message waits from the moment it is due (new, or its retry time has
 * come, or a throttle sent it back) until its deliverer starts: for
 * weir-gate, under a suspension, or for a run slot behind others that
 * do.  That time is credited: it is not age, for queue_lifetime and
 * delay_warning.  wait.c keeps the credit in sched/S/N and sched/waits
 * (see there for when each is written and what a crash may lose).
 */
struct msg {
	struct sched *s;
	unsigned long id;
	long long birth;	/* info/ mtime: the queue time */
	char qid[QUEUE_ID_MAX];	/* its id in the log (mail/queue.h) */
	long long waited_ms;	/* closed waits, credited */
	uint64_t wait_since;	/* monotonic ms the open wait began; 0: none */
	long long warned;	/* wall time the delay warning was queued; 0: not */
	struct schednote *note;	/* sched/S/N as last written or read, when has_note
				 * (allocated then: few messages have one) */
	/* The last sched/waits' line, when in_waits: */
	long long waits_waited, waits_since;
	uint64_t waits_mono;	/* the wait_since that line is of */
	const char *sender;	/* kept once for all its messages (sched.c, sender_get) */
	size_t up;		/* index in cfg->upstreams, or NO_UPSTREAM */
	size_t via_up;		/* the upstream the operator sends its pass
				 * through (weir requeue --via), or NO_UPSTREAM */
	size_t wait_up;		/* the primary whose route's trouble its retry
				 * waits on (relay-level: not reached, refused
				 * us), or NO_UPSTREAM (via.c) */
	struct evtimer *due;	/* the next attempt */
	struct job *job;	/* the attempt in flight */
	/* An attempt is a pass over the not-done recipients, a batch at a
	 * time: the next batch starts at this offset in remote/S/N, and
	 * pass_deferred says an earlier batch of the pass had a recipient
	 * put off (so the pass ends with a retry, not the end). */
	size_t pass_off;
	size_t pass_up;		/* the pass's group (via.c): recipients whose
				 * primary comes before it are passed over */
	long long prio;		/* its class's priority (policy.conf), once known */
	long long held_since;	/* the wall time it was held */
	struct buf replies;	/* reply/N's "ADDR\0REPLY\n" lines */
	long long next_saved;	/* the next attempt reply/N says */
	struct msg *hnext;	/* hash chain */
	struct msg *qnext;	/* FIFO */
	/* One bit each: a queue of 100,000 has as many of these (issue 36). */
	unsigned has_note:1;	/* sched/S/N exists, holding `note` */
	unsigned in_waits:1;	/* the last sched/waits has its line (above) */
	unsigned queued:1;	/* waiting in its upstream's FIFO */
	unsigned pass_deferred:1;
	unsigned pass_bounced:1;	/* a batch wrote bounce notes not yet sent */
	unsigned pass_again:1;	/* a group of the pass went on past its upstream's
				 * suspension or spell: a new pass at once, not a
				 * retry (complete.c) */
	unsigned prio_known:1;
	unsigned held:1;		/* hold/N: no attempt (control.c) */
	unsigned del_pending:1;	/* `weir delete` waits for the attempt in flight */
	unsigned replies_dirty:1;	/* not yet in reply/N */
	unsigned finishing:1;	/* its files go in the next removal batch (sched.c) */
	unsigned counted_delivered:1, counted_bounced:1;	/* in the counters (counts.c) */
	unsigned finish_failed:1;	/* a removal failed: each is fsynced on the next try */
};

enum jstate { J_ASKING, J_GRANTED, J_RUNNING };

struct job {
	struct msg *m;
	size_t up;		/* its queue in s->ups, fixed for the job's life */
	enum jstate state;
	uint32_t tag;		/* the gate's name for it; 0: not asked yet */
	uint64_t asked;		/* monotonic ms of the request */
	pid_t pid;
	int outfd, ocfd;	/* the report (fd 1) and the outcome (fd 3) */
	struct buf out, oc;
	int exited, status;
	int64_t sent_at;	/* the deliverer's clock_mono_ms() of the 250; -1: unknown */
	size_t n;		/* recipients in this batch */
	int more;		/* not-done recipients after the batch */
	size_t *offs;		/* their T bytes in remote/S/N */
	char **addrs;
	struct evtimer *watchdog;
	int conn;		/* asked with a connection: a deliverer of its own */
	uint64_t grant;		/* weir-gate's id of its grant; 0: none (yet) */
	unsigned grace;		/* its grant's grace, seconds (GRANT) */
	struct dsess *sess;	/* the kept session it runs on (session.c) */
	int orphan;		/* its deliverer is an earlier weir-send's (flight.c) */
	struct job *next;	/* all jobs */
	struct job *gnext;	/* granted, waiting for a free run slot */
	/* Its route (via.c): the primary upstream of its recipients, and
	 * which of the primary's route up is (0: the primary itself). */
	size_t primary, hop;
	uint64_t ask_seq;	/* s->ask_seq when last asked of the gate */
	int recall;		/* asked at a fallback, to be asked of its primary
				 * again: a CANCEL is out for its tag (via.c) */
	int forced;		/* at its message's via_up, the operator's: no
				 * route, no conditions (via.c) */
};

/* Per upstream: s->ups[i] for cfg->upstreams[i], then one for messages
 * without an upstream (s->none), then any retired by a reload that still
 * have deliveries running. */
struct upq {
	char *name;			/* the upstream's; NULL for s->none */
	/* Messages waiting for a job: highest class priority first, FIFO
	 * within a class (sched.c, sched_fifo_append). */
	struct msg *head, *tail;
	struct job *ghead, *gtail;	/* granted jobs waiting to run */
	unsigned jobs, running;
	size_t cap;			/* recipients per request the gate allows; 0: unknown */
	/* Batch sizes learnt, kept until a reload whatever the gate's cap
	 * says (batch.c): fit_hi, the smallest found too big (the gate's
	 * TOOBIG for a recipient window or a cap; a deliverer that took
	 * fewer, for the upstream's RCPTMAX or a set-id weir-remote's own
	 * max_recipients); fit_lo, the largest that went.  0: nothing
	 * learnt. */
	size_t fit_lo, fit_hi;
	uint64_t hold_until;		/* monotonic ms: throttled, run nothing before */
	/* The latest TLS session a kept session's deliverer gave (DER),
	 * handed to the next ones to resume (session.c); cleared on a
	 * reload, which may change what verification asks. */
	struct buf tls;
	uint32_t throttle_tag;		/* the THROTTLED report awaiting its answer */
	/* Counters since weir-send started (gateproto.h's enum gp_count;
	 * GP_C_SESSIONS is filled in when told), told to the gate in a
	 * COUNTS line at most once a second after one changes (counts.c);
	 * told[]: the last line the gate took on this connection, told_ok
	 * 0: none yet. */
	uint64_t counts[GP_NCOUNTS], told[GP_NCOUNTS];
	int told_ok;
	/* As a primary (via.c): the fallback its mail goes through now
	 * (NULL: itself), since the request numbered via_seq; when to ask
	 * it again for one of its batches at a fallback (monotonic ms; 0:
	 * no need), when the gate said asking it again makes sense. */
	char *via;
	uint64_t via_seq;
	uint64_t scout_at;
	int waited_on;			/* messages' retries wait on its route (wait_up) */
};

struct sched {
	const struct sched_opts *o;
	/* The settings in force: o's at start, a reload's after SIGHUP. */
	const struct weir_config *cfg;
	struct weir_config *loaded;	/* a reload's, freed by the next one */
	struct policy *pol;		/* policy_file's classes; NULL: none readable */
	int snapfd;			/* the bytes of cfg's file, for deliverers; -1: none */
	char snappath[32];		/* "/proc/self/fd/N": their -c */
	unsigned concurrency;
	long long lifetime, delay_warning;
	unsigned retry_skip;
	struct evloop *ev;
	/* The loop's last "idle" line (sched.c, say_idle): its numbers, and
	 * log_lines() after it. */
	size_t idle_said[4];
	unsigned long idle_lines;
	struct msg **tab;
	size_t tabsize, nmsg;
	struct sender **senders;	/* each sender once (sched.c, sender_get) */
	size_t nsenders, senders_size;
	struct upq *ups;	/* see struct upq */
	size_t nups, none;
	struct job *jobs;
	int trigfd;
	unsigned long *todo;	/* todo/ names being preprocessed, a slice a turn */
	size_t ntodo, todo_cap, todo_pos;
	int todo_busy, todo_again;
	int todo_retry;		/* a retry of todo/ is armed (TODO_RETRY_MS) */
	/* info/ as found at start, loaded a slice a turn (sched.c): sorted
	 * ids, and which were loaded meanwhile by another way; nload 0 once
	 * all are in. */
	unsigned long *load;
	unsigned char *load_skip;
	size_t nload, load_pos;
	struct msg **fin;	/* messages whose files go in the next removal batch */
	size_t nfin, fin_cap;
	struct dsn_opts dsn;
	struct preproc_opts pre;
	/* wait.c */
	int notes_ok;		/* sched/ is there */
	long long alive_before;	/* sched/alive as this run found it; 0: none */
	struct schedwait *found; /* sched/waits as this run found it, until all is loaded */
	size_t nfound;
	int starting;		/* until all is loaded (wait_sweep_start): */
	size_t carried;		/* messages loaded with credit carried over */
	long long carried_s;	/* and their credit, seconds */
	long long waits_at;	/* sched/alive's last value: sched/waits' lines count up to it */
	uint64_t waits_hash;	/* of its bytes then (0: not there) */
	size_t sweep_pos;	/* next bucket of tab to sweep */
	/* the gate (gatelink.c) */
	const struct gatelink_ops *gate_ops;
	struct gate_client gc;
	int gate_up;
	uint32_t next_tag;
	uint64_t ask_seq;	/* requests asked so far (via.c) */
	struct evtimer *scout;	/* the earliest upq's scout_at is due (via.c) */
	uint64_t gate_backoff;
	struct evtimer *gate_retry;
	struct evtimer *counts_timer;	/* COUNTS lines are due */
	struct evtimer *gate_lost;	/* gate_down is due (a report not written) */
	/* control.c */
	int ctl_again;		/* a request waits for an attempt's end or preprocessing */
	/* keepalive.c */
	struct keepalive *ka;
	/* session.c */
	struct dsess *sessions;
	struct evtimer *sess_note_timer;	/* sched/sessions is due */
	/* flight.c */
	int flight_ok;			/* flight/ is there */
	char boot[BOOT_ID_MAX];		/* this boot's id (lib/bootid.h) */
	struct pending *flight_pending;	/* an earlier run's, their deliverers at work */
	int flight_ifd;			/* inotify on flight/ while any; -1: none */
};

/* The wall clock in seconds, for every stage (queue times, retries,
 * notes): not the scheduler's own. */
static inline long long
sched_wall(void)
{
	return (long long)time(NULL);
}

/* 1 sched.c */
void sched_at(struct sched *s, struct msg *m, long long when);
/* Like sched_at(), for a message held back by a suspension: still
 * waiting (credited) until then. */
void sched_held(struct sched *s, struct msg *m, long long when);
void sched_enqueue(struct sched *s, struct msg *m);
void sched_fifo_append(struct sched *s, struct msg *m);	/* sched_enqueue, but start nothing */
void sched_finish(struct sched *s, struct msg *m);
size_t sched_upidx(const struct sched *s, const struct msg *m);
struct msg *msg_by_id(struct sched *s, unsigned long id);
void sched_unlink(struct sched *s, struct msg *m);	/* out of its FIFO */
void msg_forget(struct sched *s, struct msg *m);	/* out of memory, freed */
struct msg *msg_load(struct sched *s, unsigned long id);	/* from info/ */
/* The end of a pass over m's recipients: 1 if one was put off (the
 * message wants a retry). */
int msg_pass_over(struct msg *m);

/* job.c */
/* A job for m on up's queue with room for cap recipients (none yet), in
 * state J_ASKING; it holds m (m->job) and counts in up's jobs. */
struct job *job_new(struct sched *s, struct msg *m, size_t up, size_t cap);
void job_free(struct sched *s, struct job *j);	/* out of every list, its pipes closed */
void job_drop(struct sched *s, struct job *j);	/* freed; its message back to the FIFO */

/* 2 batch.c */
/* Messages from up's FIFO to jobs, asked of the gate. */
void batch_pump(struct sched *s, size_t up);
/* What was learnt of up's batch size (struct upq): the upstream took
 * only `tried` recipients of a batch in one transaction: 1 if that is
 * news. */
int batch_took(struct upq *u, size_t tried);
/* Ask the gate for j (again): whether a kept session will carry it,
 * and its route's conditions (via.c). */
void batch_ask(struct sched *s, struct job *j);
/* The gate's answers (gatelink.c's callbacks, struct gatelink_ops):
 * all that an answer to j's request means for the batch and its message
 * (a grant to deliver.c, LATER to via.c, TOOBIG asked again smaller,
 * another refusal a retry); SUSPENDED, the end of a throttle's hold;
 * the connection made (what waits is asked) or lost (granted jobs go
 * back to their FIFO, recalled ones to their primary). */
int batch_answer(struct sched *s, struct job *j, const struct gp_reply *r);
void batch_suspended(struct sched *s, uint32_t tag, uint64_t secs);
void batch_gate_up(struct sched *s);
void batch_gate_lost(struct sched *s);

/* The batch's size for its upstream now (a fallback's cap may be
 * smaller): recipients beyond it are left for the next batch. */
void batch_fit(struct sched *s, struct job *j);

/* 2 via.c: where a batch goes (recipient_domains, fallbacks) */
struct rcptfile;
/* weir.conf routes by recipient domain. */
int via_split(const struct sched *s);
/* The group of m's next batch in its pass (via.c), into *group (a config
 * index or NO_UPSTREAM; m's pass moves on to it), and each recipient's
 * primary (f's order; the caller frees it); NULL: none left in the
 * pass. */
size_t *via_groups(const struct sched *s, struct msg *m, const struct rcptfile *f,
    size_t *group);
/* The conditions j's request carries (the primary's fallback_when while
 * an upstream of its route is left), or NULL. */
const struct route_when *via_unless(const struct sched *s, const struct job *j);
/* j, an earlier run's delivery (flight.c), placed in its message's
 * route. */
void via_adopt(const struct sched *s, struct job *j);
/* Is j where its message and route say (not after a reload)? */
int via_placed(const struct sched *s, const struct job *j);
/* The gate answered LATER for j: on to the next upstream of its route. */
void via_later(struct sched *s, struct job *j, enum route_kind why, uint64_t secs);
/* Jobs of primary up at its fallbacks now (they count in its
 * LOOKAHEAD, and their end lets more of its FIFO go: deliver.c). */
unsigned via_away(const struct sched *s, size_t up);
/* After outcome how of j: ask again at once (the gate judges its
 * primary unreachable and passes it over in time)? */
int via_again(const struct sched *s, const struct job *j, enum outcome_kind how);
/* j's outcome how: a return to its primary, logged and counted; then
 * its batches waiting at fallbacks are asked of it again. */
void via_done(struct sched *s, const struct job *j, enum outcome_kind how);
/* j, waiting at a fallback, is wanted at its primary (or at the
 * operator's upstream): its request CANCELled, and via_recalled() once
 * the gate's OK says it is gone (at once if nothing is asked), unless a
 * grant or a LATER for it crossed the CANCEL (batch.c decides). */
void via_recall(struct sched *s, struct job *j);
/* The gate dropped j, recalled from a fallback (via_recall): asked of
 * its primary again. */
void via_recalled(struct sched *s, struct job *j);
/* j, a new batch of m: at the upstream the operator named (m->via_up),
 * if any. */
void via_force(struct sched *s, struct job *j);
/* j (m's batch) ended with outcome how and ntemp recipients put off:
 * whether m's retry now waits on its primary's route (relay-level
 * trouble), which a probe tries and a success wakes. */
void via_waits(struct sched *s, struct msg *m, const struct job *j, enum outcome_kind how,
    size_t ntemp);

/* 2 gatelink.c: the gate protocol's adapter; it decides nothing and calls
 * no other file of weir-send: the answers go to these callbacks, set
 * once by the scheduler (sched.c), as weir-gate's engine reports through
 * struct wg_ops (gate/window.h). */
struct gatelink_ops {
	/* The gate's answer r (GRANT, LATER, ERR, or OK to a CANCEL) to j's
	 * request: 1 taken, 0 if j waits for no such answer (logged then as
	 * one for an unknown request).  batch.c. */
	int (*answer)(struct sched *s, struct job *j, const struct gp_reply *r);
	/* The same for a tag no job has: 1 if it is a session's slot
	 * request.  session.c. */
	int (*slot)(struct sched *s, const struct gp_reply *r);
	/* SUSPENDED: the gate's answer to the report tag.  batch.c. */
	void (*suspended)(struct sched *s, uint32_t tag, uint64_t secs);
	/* The connection is made (again): what waits may be asked.  batch.c. */
	void (*connected)(struct sched *s);
	/* It is lost, with every tag (each job's is 0 now): the sessions'
	 * slots (session.c), then the jobs' requests and grants (batch.c). */
	void (*slots_lost)(struct sched *s);
	void (*lost)(struct sched *s);
};
/* Connect (again and again, backing off, until the gate answers);
 * answers go to ops from then on. */
void gatelink_open(struct sched *s, const struct gatelink_ops *ops);
/* Ask the gate for j's grant (ACQUIRE, with j->conn, and the route's
 * conditions unless, or NULL): j->tag names it, 0 if the gate is not
 * there (ops->connected says when to ask again). */
void gatelink_ask(struct sched *s, struct job *j, const struct route_when *unless);
/* CANCEL the request tag: 0 sent (its answer: OK, or what crossed it),
 * -1 nothing is asked under tag (0, or the gate is not there). */
int gatelink_cancel(struct sched *s, uint32_t tag);
/* The grant *tag goes to a deliverer now (START: weir-gate counts it as
 * in use from here): 0, or -1 when the gate cannot be told (then *tag is
 * 0, the grant lost: nothing of it may go out). */
int gatelink_use(struct sched *s, uint32_t *tag);
/* What became of j's grant (REPORT; SETTLE for a grant whose connection
 * is gone): the tag whose answer (SUSPENDED, for a throttle) will come,
 * or 0 if none will. */
uint32_t gatelink_tell(struct sched *s, struct job *j, enum gp_outcome how, uint32_t accepted,
    const char *reply);
/* A session's connection slot: asked (its tag, 0 if the gate is not
 * there), given back (used: a connection was made); gatelink_cancel()
 * when no longer wanted. */
uint32_t gatelink_ask_slot(struct sched *s, size_t up);
void gatelink_release(struct sched *s, uint32_t tag, int used);
/* up's counters in a COUNTS line: 0, or -1 (the gate is not there, or
 * lost now). */
int gatelink_counts(struct sched *s, const char *up, const uint64_t *counts);

/* 3 deliver.c */
void deliver_kick(struct sched *s, size_t up);	/* granted jobs to free slots, then batch_pump */
/* weir-send stops: the grants of up's jobs that no deliverer has started
 * go back to the gate unused (REFUND); nothing asks again. */
void deliver_refund_unstarted(struct sched *s, size_t up);
/* A granted job: run it if a run slot is free, else when one is. */
void deliver_granted(struct sched *s, struct job *j);
void deliver_on_child(struct evloop *ev, int signo, void *arg);
/* The deliverer's arguments up to the host: mode "-n" (its own, with
 * -r 3), "-S" (a kept session) or "-Sf" (one with its flight file on 3,
 * -S -f 3); or all of them for "-K" (the OAuth keep-alive: no host);
 * argv has room for 12. */
void deliver_argv(struct sched *s, size_t up, const char **argv, const char *mode,
    const char *qid);
/* Fork and exec argv with fd0 on 0, fd1 on 1 and fd3 on 3 (-1: as
 * they are), in its own process group, sent deathsig if weir-send dies
 * (SIGKILL; a kept session with a flight file, SIGTERM: it finishes the
 * message it holds). */
pid_t deliver_fork(const char *const *argv, int fd0, int fd1, int fd3, int deathsig);
/* j's message (*mfd, read-only) and its two pipes: the write ends in
 * wr[] (report, outcome), the read ends watched, the watchdog set. */
int deliver_open(struct sched *s, struct job *j, int *mfd, int wr[2]);
void deliver_unopen(struct sched *s, struct job *j);	/* undo deliver_open */
void deliver_running(struct sched *s, struct job *j);	/* it runs: counted, logged */
/* Its deliverer is done (status as from waitpid): complete it once its
 * pipes are read. */
void deliver_exited(struct sched *s, struct job *j, int status);

/* 3 session.c: kept sessions (weir-remote -S) */
int sess_wanted(const struct sched *s, size_t up);	/* up's messages go on sessions */
int sess_fits(const struct job *j);	/* small enough for one request */
/* j to an idle session of its upstream: 1 done, 0 none idle, -1 failed,
 * GRANT_LOST (the session ended too if its slot went with the gate). */
int sess_run(struct sched *s, struct job *j);
void sess_open(struct sched *s, size_t up, unsigned waiting);	/* slots for waiting jobs */
/* The gate's answer to a slot request (GRANT or ERR; gatelink.c's
 * callback): 1 if r->tag is a session's. */
int sess_answer(struct sched *s, const struct gp_reply *r);
void sess_idle(struct sched *s, struct dsess *d);
void sess_job_done(struct sched *s, struct job *j);	/* j is being freed */
int sess_reaped(struct sched *s, pid_t pid, int status);	/* 1: a session's deliverer */
void sess_end_idle(struct sched *s, size_t up, const char *why);	/* up's idle ones */
void sess_end_all(struct sched *s, const char *why);	/* a reload: all end */
void sess_forget_slots(struct sched *s);	/* the gate connection is gone */
void sess_remap(struct sched *s);	/* after a reload renumbered the queues */
void sess_note(struct sched *s);	/* sched/sessions for weir status (session.c) */
unsigned sess_count_open(const struct sched *s, size_t up);	/* deliverers running */

/* flight.c: a session's message outlives weir-send (mail/sessproto.h) */
/* The session's flight file, made and locked, its name in name: the fd,
 * or -1 (logged: the session runs without one). */
int flight_open(struct sched *s, char *name, size_t max);
void flight_close(struct sched *s, int fd, const char *name);	/* removed */
int flight_hand(struct sched *s, int fd, const struct job *j);	/* j's record: 0, -1 */
void flight_clear(struct sched *s, int fd);	/* j complete: emptied */
/* At start, before info/ is read: an earlier run's flight files, each
 * message's outcome applied once its deliverer is done. */
void flight_recover(struct sched *s);

/* 4 complete.c */
/* What a batch said of its upstream, for deliver.c to act on. */
enum upstream_word {
	UP_OK,
	UP_THROTTLES,		/* "slow down", or our credentials refused */
	UP_CLOSES_IDLE		/* it had closed a kept session while idle */
};
/* j's deliverer is done and its pipes read: tell the gate, apply the
 * report, send the message on; j is freed. */
enum upstream_word complete_job(struct sched *s, struct job *j);
/* j's deliverer did not run: nothing reached the upstream; the grant
 * goes back, the message is tried later; j is freed.  lost (GRANT_LOST):
 * the grant went with the gate's connection: the message goes back in
 * line and asks again when the gate is back. */
void complete_unrun(struct sched *s, struct job *j, int lost);

/* counts.c */
/* The counters (struct upq): m was preprocessed with nrcpt recipients;
 * a batch of m's for up came to so many recipients delivered, deferred
 * and bounced (m counts delivered and bounced once in its life,
 * deferred at each batch that put one off); the sessions open changed
 * (counts_due); a new connection to the gate.  Called where it happens,
 * never waiting: the gate is told within a second. */
void counts_queued(struct sched *s, const struct msg *m, size_t nrcpt);
void counts_outcome(struct sched *s, struct msg *m, size_t up, size_t delivered,
    size_t deferred, size_t bounced);
void counts_due(struct sched *s);
void counts_connected(struct sched *s);

/* notice.c: after each outcome of an upstream with an oauth section,
 * and at the keep-alive's looks: the admin's mail, once a day, while its
 * OAuth token status says a login is needed (a refusal, or a token that
 * could not be saved). */
void notice_oauth(struct sched *s, size_t up);
/* The admin's notice for an AUTH refusal whose fix mail/authreply.h
 * knows (reply: the upstream's), once a day (notice.c). */
void notice_auth(struct sched *s, size_t up, const char *reply);

/* keepalive.c: the OAuth keep-alive (weir-remote -K).  Every upstream
 * looked at again now (at start, after a reload); and its deliverer's
 * end (1: pid was one). */
void keepalive_check(struct sched *s);
int keepalive_reaped(struct sched *s, pid_t pid, int status);

/* wait.c */
void wait_begin(struct msg *m);
void wait_end(struct msg *m);
long long wait_credit(const struct msg *m);	/* credit so far, seconds */
/* Write sched/S/N if it and sched/waits are both off by 30 s or more,
 * or the note says the message waits when it does not.  1 written, 0 not
 * needed, -1 failed (logged). */
int wait_note_sync(struct sched *s, struct msg *m);
/* The credit and mark that m's note and line of sched/waits carry into
 * this run, into m (s->found holds sched/waits as found). */
void wait_note_restore(struct sched *s, struct msg *m);
void wait_sweep_start(struct sched *s);
/* The delay warning, if one is due: j's results res[] are the latest
 * replies.  Called after the marks of a batch with temporary failures. */
void wait_warn(struct sched *s, struct msg *m, const struct job *j,
    const struct rresult *res);

/* control.c: `weir hold`, release, delete, requeue (QUEUE.md) */
void control_restore(struct sched *s, struct msg *m);	/* held? at load */
/* 1: m must not be attempted now (held, or its deletion waits); its
 * timer is cancelled and it is out of its FIFO. */
int control_stops(struct sched *s, struct msg *m);
/* The next attempt is at wall time when (0: now): reply/N follows. */
void control_next(struct sched *s, struct msg *m, long long when);
/* A batch's results: the last reply of each recipient put off. */
void control_replies(struct sched *s, struct msg *m, const struct job *j,
    const struct rresult *res);
void control_scan(struct sched *s);	/* act on ctl/ */
void control_forget(struct sched *s, struct msg *m);	/* m ends */

/* reload.c */
void reload_sighup(struct sched *s);
/* s->pol from s->cfg's policy_file (at start and on SIGHUP): the
 * classes that order each upstream's FIFO, as weir-gate chooses them. */
void reload_classes(struct sched *s);
/* At start: the config in force becomes the one parsed from a snapshot
 * of its file (as after a reload). */
void reload_snapshot_start(struct sched *s);

#endif
