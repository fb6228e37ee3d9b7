/*
 * sendint.h: weir-send's internals, shared by sched.c (messages and
 * their timing), deliver.c (batches and deliverers) and gatelink.c (the
 * conversation with weir-gate).  Not for other programs.
 */
#ifndef WEIR_SENDINT_H
#define WEIR_SENDINT_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/buf.h"
#include "lib/evloop.h"
#include "mail/gateclient.h"
#include "send/dsn.h"
#include "send/preproc.h"
#include "send/sched.h"

#define SYSFAIL_S	300		/* retry after local trouble */
#define NO_UPSTREAM	((size_t)-1)
/* Requests weir-send keeps at the gate per upstream beyond those it can
 * run, so the gate can pick the most urgent class among them. */
#define LOOKAHEAD	16

struct job;
struct sched;

struct msg {
	struct sched *s;
	unsigned long id;
	long long birth;	/* info/ mtime: the queue time */
	long long waited;	/* seconds spent waiting for grants: not age */
	char *sender;
	size_t up;		/* index in cfg->upstreams, or NO_UPSTREAM */
	struct evtimer *due;	/* the next attempt */
	int queued;		/* waiting in its upstream's FIFO */
	struct job *job;	/* the attempt in flight */
	struct msg *hnext;	/* hash chain */
	struct msg *qnext;	/* FIFO */
};

enum jstate { J_ASKING, J_GRANTED, J_RUNNING };

struct job {
	struct msg *m;
	enum jstate state;
	uint32_t tag;		/* the gate's name for it; 0: not asked yet */
	uint64_t asked;		/* monotonic ms of the request */
	pid_t pid;
	int outfd, ocfd;	/* the report (fd 1) and the outcome (fd 3) */
	struct buf out, oc;
	int exited, status;
	size_t n;		/* recipients in this batch */
	int more;		/* not-done recipients beyond the batch */
	size_t *offs;		/* their T bytes in remote/S/N */
	char **addrs;
	struct evtimer *watchdog;
	struct job *next;	/* all jobs */
	struct job *gnext;	/* granted, waiting for a free run slot */
};

struct upq {
	struct msg *head, *tail;	/* messages waiting for a job */
	struct job *ghead, *gtail;	/* granted jobs waiting to run */
	unsigned jobs, running;
	size_t cap;			/* recipients per request the gate allows; 0: unknown */
	uint64_t hold_until;		/* monotonic ms: throttled, run nothing before */
	uint32_t throttle_tag;		/* the THROTTLED report awaiting its answer */
};

struct sched {
	const struct sched_opts *o;
	struct evloop *ev;
	struct msg **tab;
	size_t tabsize, nmsg;
	struct upq *ups;	/* one per upstream, plus one for "none" */
	size_t nups;
	struct job *jobs;
	int trigfd;
	unsigned long *todo;	/* todo/ names being preprocessed, a slice a turn */
	size_t ntodo, todo_cap, todo_pos;
	int todo_busy, todo_again;
	struct dsn_opts dsn;
	struct preproc_opts pre;
	/* the gate */
	struct gate_client gc;
	int gate_up;
	uint32_t next_tag;
	uint64_t gate_backoff;
	struct evtimer *gate_retry;
};

/* sched.c */
long long wall(void);
void schedule(struct sched *s, struct msg *m, long long when);
void enqueue(struct sched *s, struct msg *m);
void finish(struct sched *s, struct msg *m);

/* deliver.c */
void pump(struct sched *s, size_t up);
void job_granted(struct sched *s, struct job *j, uint32_t cap);
void job_refused(struct sched *s, struct job *j, enum gp_code code, const char *text);
void job_drop(struct sched *s, struct job *j);	/* back to the FIFO */
void on_child(struct evloop *ev, int signo, void *arg);

/* gatelink.c */
void gate_start(struct sched *s);
void gate_ask(struct sched *s, struct job *j);
void gate_tell(struct sched *s, struct job *j, enum gp_outcome how, uint32_t accepted,
    const char *reply);

#endif
