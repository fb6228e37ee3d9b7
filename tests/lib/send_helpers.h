/*
 * send_helpers.h: helpers for the tests of weir-send and its parts
 * (src/send/): a scratch queue opened as a struct queue, messages put
 * into it by hand in any state (as a stock qmail-queue would leave
 * them, with the mess/ inode as the id), exact byte comparisons, file
 * mtimes, running weir-send and weir-gate in the background (each in
 * its own process group, dying with the test), appending to the config.
 *
 * Trusts: the queue the test made.  Test code only (Criterion asserts).
 */
#ifndef WEIR_SEND_HELPERS_H
#define WEIR_SEND_HELPERS_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "lib/buf.h"
#include "mail/queue.h"
#include "queue_helpers.h"

#define SH_HOST "test.example"
#define SH_ADMIN "postmaster@admin.example"

/* A scratch queue (split 23, hostname SH_HOST, admin SH_ADMIN, no
 * aliases_file unless extra names one, plus extra config lines) opened
 * in qq. */
struct sht {
	struct qt qt;
	struct queue q;
};
void sh_setup(struct sht *s, const char *extra_conf);
void sh_teardown(struct sht *s);

/* Put a message in S4 by hand: a pid/ file gives the inode N, linked as
 * mess/S/N with mess bytes; intd/N gets todo bytes, then todo/N is
 * linked to it (unless with_intd is 0: then todo/N only).  Returns N. */
unsigned long sh_put_s4(struct sht *s, const char *mess, size_t mlen, const char *todo,
    size_t tlen, int with_intd);
/* Only mess/S/N (S2) with these bytes; returns N. */
unsigned long sh_put_mess(struct sht *s, const char *mess, size_t mlen);

/* "<qdir>/<folder>/<id % split>/<id>" or "<qdir>/<folder>/<id>" for the
 * flat ones, malloc'ed. */
char *sh_qpath(struct sht *s, enum qdir d, unsigned long id);
/* Does the file exist? */
int sh_exists(struct sht *s, enum qdir d, unsigned long id);
/* Write (create or replace) a queue file. */
void sh_write(struct sht *s, enum qdir d, unsigned long id, const char *data, size_t len);
/* Assert the queue file holds exactly these bytes. */
void sh_assert_file(struct sht *s, enum qdir d, unsigned long id, const char *want,
    size_t wlen);
/* Set a path's mtime (and atime). */
void sh_set_mtime(const char *path, time_t t);
time_t sh_mtime(const char *path);

/* Assert got is exactly want[0..wlen), showing both escaped on failure. */
void sh_assert_bytes(const char *got, size_t glen, const char *want, size_t wlen,
    const char *what);
/* Printable rendering of bytes (NUL as \0, newline as \n), malloc'ed. */
char *sh_escape(const char *s, size_t n);

/* ---- weir-send in the background ---- */

struct shd {
	pid_t pid;		/* weir-send, or 0 */
	char *log;		/* its stderr: tmp/weir-send.log */
	/* A command line run with weir-send's after it (strace ...; NULL-
	 * ended), or NULL: pid is then that command's. */
	const char *const *wrap;
};

/* Start build/bin/weir-send -c conf (after d->wrap) with env (NULL-ended
 * "NAME=value" entries added to the environment).  Returns at once. */
void shd_start(struct shd *d, struct sht *s, const char *const *env);
/* SIGTERM, wait up to 5 s, then SIGKILL; asserts nothing. */
void shd_stop(struct shd *d);
/* SIGKILL and reap. */
void shd_kill9(struct shd *d);
/* Has it exited? (reaps it; *status gets the wait status) */
int shd_exited(struct shd *d, int *status);

/* Append lines to the queue's config file. */
void sh_conf_append(struct sht *s, const char *text);

/* Start build/bin/weir-gate -c conf (its gate_socket, policy_file and
 * gate_journal come from the config) in its own process group, logging
 * to tmp/gate.log; wait until its socket answers. */
void shd_start_gate(struct shd *g, struct sht *s, const char *sock);
/* What it does: weir-gate -c conf [-g grace] with stdout and stderr
 * appended to log, in its own process group, dying with the test; waits
 * until sock answers (fails the test, showing the log, if the gate exits
 * or does not answer within 5 s).  Returns its pid. */
pid_t sh_gate_spawn(const char *conf, const char *grace, const char *log, const char *sock);

/* Poll (every 10 ms) until cond(arg) is true or ms elapse; 1 if true. */
int sh_wait_for(int (*cond)(void *), void *arg, int ms);

/* The files in the queue but lock/ (the first 50: "./PATH SIZE" lines),
 * malloc'ed: for failure messages. */
char *sh_listing(struct sht *s);
/* Run weir queue-check on the queue; returns its exit code, output in out. */
int sh_queue_check(struct sht *s, struct buf *out);
/* Run `weir -c CONF cmd`; its exit code, stdout then stderr in out. */
int sh_weir(struct sht *s, const char *cmd, struct buf *out);

#endif
