/*
 * crash.h: the parts of the crash-replay harness (tests/durability/):
 * workload.c runs weir under the recorder (recorder.c) and leaves the
 * log; crashreplay.c rebuilds and checks every state a power cut could
 * leave.  See crashreplay.c for the whole story.
 *
 * Trusts: the files it made itself.  Test code only.
 */
#ifndef WEIR_CRASH_H
#define WEIR_CRASH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CR_SPLIT 3		/* queue_split of the scratch queue */
#define CR_HOST "test.example"
#define CR_ADMIN "postmaster@admin.example"

struct workload {
	char *root;		/* canonical scratch folder */
	char *bindir;		/* the built programs */
	char *recorder;		/* recorder.so */
	char *log;		/* root/rec.log */
	char *conf;
	const char *skip;	/* WEIR_REC_SKIP ("prog:path"), or NULL */
	const char *upstream;	/* tests/upstream/upstream.py (for wl_deliver) */
	int race;		/* -r: weir-send takes a todo/ entry not yet durable */
	pid_t gate_pid[4];	/* weir-gate's runs: their records are the journal's */
	size_t ngate;
	unsigned injected, refused;
};

/* FNV-1a, 64 bits: the deliverer (a python script) computes the same. */
uint64_t cr_hash(const void *p, size_t n);
/* The body of a message: the bytes after the first empty line. */
const char *cr_body(const char *m, size_t n, size_t *blen);

/* Make root, the config, the queue and the deliverer.  Dies on error. */
void wl_setup(struct workload *w);
/* Run the workload (gate, injections, weir-send, deliveries); returns
 * 0 when it reached its expected end, -1 (with a message) if not. */
int wl_run(struct workload *w);
/* Run the real weir-gate, weir-send and weir-remote on the queue and
 * journal under root/state (after `weir flush`), delivering to the
 * stand-in upstream (w->upstream) which records to root/upstream.jsonl
 * (each message's content in root/upstream.jsonl.N), until
 * ready(that record) or ms pass; then stop them.  1 if ready.  Dies on
 * set-up errors. */
int wl_deliver(struct workload *w, const char *root, int (*ready)(const char *record), int ms);
/* Stop whatever wl_run left running (idempotent). */
void wl_stop(struct workload *w);

void cr_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), __noreturn__));

#endif
