/*
 * reload.c: SIGHUP.  weir-send re-reads its config file and applies at
 * once what it can: the upstream sections (which exist, their order and
 * senders patterns, max_recipients), concurrency, queue_lifetime,
 * retry_skip, delay_warning, hostname and admin.  queue_dir, queue_split
 * and gate_socket are read at start only: a change to them is logged as
 * needing a restart and ignored.  A file with errors changes nothing;
 * each error is logged with its file and line.
 *
 * Deliveries in flight go on.  Their upstream's queue (struct upq) keeps
 * its counters across the reload, matched by name; an upstream that is
 * gone keeps a retired queue until its last running delivery ends.  A
 * message whose sender now maps to another upstream moves at once if it
 * waits in a FIFO or holds an unused grant (given back), and when its
 * grant comes if it is still asking weir-gate.  Messages waiting for a
 * retry keep their time (the new retry_skip applies from their next
 * attempt), except those no upstream took before: they go at once.
 *
 * What weir-send reads is a snapshot: the file's bytes copied into a
 * memfd at start and at each reload, parsed from there, and given to
 * each deliverer as `-c /proc/self/fd/N` (the descriptor is inherited).
 * So the deliverers use exactly the settings weir-send has in force: an
 * edit takes effect at the next SIGHUP, and a file with errors neither
 * changes weir-send nor breaks the deliveries.  Errors still name the
 * file itself.  Not so for a set-id weir-remote (the Debian package's):
 * it trusts only a file owned by root, so it is given the file itself
 * and reads it as it is when it starts.
 *
 * Trusts: the config file, through config_load().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "send/sendint.h"

#define SNAPSHOT_MAX	(1 << 20)
#define SNAPSHOT_FD_MIN	10	/* above 0, 1, 3 and the others a deliverer gets */

/* Copy the file at path into a memfd that children inherit; parse it
 * into n.  0 ok, with *fd and snap ("/proc/self/fd/N") set; -1 with the
 * errors in err, naming path. */
static int
load_snapshot(const char *path, struct weir_config *n, int *fd, char snap[32], struct buf *err)
{
	struct buf b = BUF_INIT, e = BUF_INIT;
	char *line, *save = NULL;
	int mfd, r;

	*fd = -1;
	r = read_file_at(AT_FDCWD, path, &b, SNAPSHOT_MAX);
	if (r != 0) {
		buf_printf(err, "%s: %s\n", path, r == -2 ? "larger than 1 MB" : strerror(errno));
		buf_free(&b);
		return -1;
	}
	mfd = memfd_create("weir.conf", MFD_CLOEXEC);
	if (mfd < 0 || full_write(mfd, b.s ? b.s : "", b.len) < 0 ||
	    (*fd = fcntl(mfd, F_DUPFD, SNAPSHOT_FD_MIN)) < 0) {	/* without FD_CLOEXEC */
		buf_printf(err, "%s: a snapshot for the deliverers: %s\n", path, strerror(errno));
		if (mfd >= 0)
			close(mfd);
		buf_free(&b);
		return -1;
	}
	close(mfd);
	buf_free(&b);
	snprintf(snap, 32, "/proc/self/fd/%d", *fd);
	if (config_load(n, snap, &e) == 0) {
		free(n->file);
		n->file = xstrdup(path);
		buf_free(&e);
		return 0;
	}
	/* The errors, naming the file rather than the snapshot. */
	for (line = strtok_r(e.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, snap, strlen(snap)) == 0)
			buf_printf(err, "%s%s\n", path, line + strlen(snap));
		else
			buf_printf(err, "%s\n", line);
	buf_free(&e);
	close(*fd);
	*fd = -1;
	return -1;
}

void
reload_snapshot_start(struct sched *s)
{
	struct weir_config *n;
	struct buf err = BUF_INIT;
	char *line, *save = NULL;
	int fd;

	if (s->o->config_file == NULL)
		return;	/* defaults only: nothing to snapshot */
	n = xcalloc(1, sizeof *n);
	if (load_snapshot(s->o->config_file, n, &fd, s->snappath, &err) < 0) {
		/* Changed since main() read it: go on with main()'s, and let
		 * the deliverers read the file. */
		for (line = strtok_r(err.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			log_warnx("%s", line);
		log_warnx("deliverers read %s themselves", s->o->config_file);
		config_free(n);
		free(n);
		buf_free(&err);
		return;
	}
	buf_free(&err);
	s->snapfd = fd;
	s->cfg = s->loaded = n;
}

void
reload_classes(struct sched *s)
{
	struct policy *p = xcalloc(1, sizeof *p);
	struct buf err = BUF_INIT;
	const char *path = s->cfg->policy_file;

	if (s->pol) {
		policy_free(s->pol);
		free(s->pol);
		s->pol = NULL;
	}
	if (path == NULL || (access(path, F_OK) < 0 && errno == ENOENT) ||
	    policy_load(p, path, &err) < 0) {
		if (err.len)
			log_warnx("%s: %s; requests go in arrival order, without classes", path,
			    err.s);
		policy_free(p);
		free(p);
	} else {
		config_preset_limits(s->cfg->upstreams, s->cfg->nupstreams, p);
		s->pol = p;
	}
	buf_free(&err);
}

/* Keys weir-send uses only at start: keep the old value in n. */
static void
keep(const char *file, const char *key, char **newv, const char *oldv)
{
	if (strcmp(*newv, oldv) == 0)
		return;
	log_warnx("%s: %s = \"%s\" needs a restart of weir-send; \"%s\" stays in force until then",
	    file, key, *newv, oldv);
	free(*newv);
	*newv = xstrdup(oldv);
}

static void
keep_restart_only(const struct weir_config *old, struct weir_config *n)
{
	const char *f = n->file ? n->file : "weir.conf";

	keep(f, "queue_dir", &n->queue_dir, old->queue_dir);
	keep(f, "gate_socket", &n->gate_socket, old->gate_socket);
	if (n->queue_split != old->queue_split) {
		log_warnx("%s: queue_split = %u needs a restart of weir-send; %u stays in "
		    "force until then", f, n->queue_split, old->queue_split);
		n->queue_split = old->queue_split;
	}
}

/* Every message waiting in a FIFO, in FIFO order, taken out of it. */
static struct msg **
take_fifos(struct sched *s, size_t *np)
{
	struct msg **v = NULL, *m;
	size_t i, n = 0, cap = 0;

	for (i = 0; i < s->nups; i++) {
		while ((m = s->ups[i].head) != NULL) {
			s->ups[i].head = m->qnext;
			m->queued = 0;
			m->qnext = NULL;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				v = xrealloc(v, cap * sizeof *v);
			}
			v[n++] = m;
		}
		s->ups[i].tail = NULL;
	}
	*np = n;
	return v;
}

/* The new queues: one per upstream of n, matched to the old ones by name,
 * then "none", then the retired ones that still run deliveries. */
static void
rebuild_queues(struct sched *s, const struct weir_config *n)
{
	size_t i, k, nold = s->nups, ncfg = n->nupstreams, nretired = 0, total;
	size_t *map = xcalloc(nold, sizeof *map);
	struct upq *v;
	struct job *j;

	for (i = 0; i < nold; i++) {
		const struct weir_upstream *u;

		map[i] = SIZE_MAX;
		if (i == s->none)
			map[i] = ncfg;
		else if (i < s->none && (u = config_upstream(n, s->ups[i].name)) != NULL)
			map[i] = (size_t)(u - n->upstreams);
		else if (s->ups[i].jobs > 0) {
			map[i] = ncfg + 1 + nretired++;
			if (i < s->none)
				log_info("upstream %s is no longer configured; its %u deliveries "
				    "in flight go on", s->ups[i].name, s->ups[i].running);
		}
	}
	total = ncfg + 1 + nretired;
	v = xcalloc(total, sizeof *v);
	for (i = 0; i < nold; i++) {
		if (map[i] == SIZE_MAX) {
			free(s->ups[i].name);
			free(s->ups[i].via);
			continue;
		}
		v[map[i]] = s->ups[i];
		/* The caps may have changed: learn again. */
		v[map[i]].fit_lo = v[map[i]].fit_hi = 0;
	}
	for (k = 0; k < ncfg; k++)
		if (v[k].name == NULL)
			v[k].name = xstrdup(n->upstreams[k].name);
	for (j = s->jobs; j; j = j->next) {
		j->up = map[j->up];	/* its queue has jobs, so it is kept */
		j->primary = j->primary < nold && map[j->primary] != SIZE_MAX ?
		    map[j->primary] : j->up;
	}
	free(s->ups);
	free(map);
	s->ups = v;
	s->nups = total;
	s->none = ncfg;
}

/* A granted job not yet running whose message now maps elsewhere. */
static struct job *
misplaced_grant(struct sched *s)
{
	struct job *j;

	for (j = s->jobs; j; j = j->next)
		if (j->state == J_GRANTED && !via_placed(s, j))
			return j;
	return NULL;
}

/* Each message's upstream by n (s->cfg still the old config): returns
 * how many moved to another; *adopted: the ids of those no upstream
 * took before, waiting for a retry, that one takes now. */
static size_t
remap_messages(struct sched *s, const struct weir_config *n, unsigned long **adopted,
    size_t *nadopted)
{
	struct msg *m;
	size_t i, moved = 0, cap = 0;

	for (i = 0; i < s->tabsize; i++)
		for (m = s->tab[i]; m; m = m->hnext) {
			const struct weir_upstream *u = config_upstream_for(n, m->sender);
			size_t up = u ? (size_t)(u - n->upstreams) : NO_UPSTREAM;
			const char *was = m->up == NO_UPSTREAM ? NULL : s->cfg->upstreams[m->up].name;

			if ((was == NULL) != (u == NULL) || (u && strcmp(was, u->name) != 0))
				moved++;
			/* Mail no upstream took waits for a retry: it may go now. */
			if (was == NULL && u != NULL && m->due) {
				if (*nadopted == cap) {
					cap = cap ? cap * 2 : 64;
					*adopted = xrealloc(*adopted, cap * sizeof **adopted);
				}
				(*adopted)[(*nadopted)++] = m->id;
			}
			m->up = up;
			m->pass_up = 0;	/* the groups may be numbered anew (via.c) */
			m->wait_up = NO_UPSTREAM;	/* its retry time stands */
			m->via_up = NO_UPSTREAM;	/* the upstreams are numbered anew */
		}
	return moved;
}

/* n becomes the config in force; the one loaded before is freed. */
static void
settings_take(struct sched *s, struct weir_config *n)
{
	struct weir_config *old = s->loaded;

	s->cfg = n;
	s->loaded = n;
	reload_classes(s);
	s->concurrency = n->concurrency;
	s->lifetime = n->queue_lifetime;
	s->retry_skip = n->retry_skip;
	s->delay_warning = n->delay_warning;
	s->pre.hostname = s->dsn.hostname = n->hostname;
	s->pre.admin = s->dsn.admin = n->admin;
	if (old) {
		config_free(old);
		free(old);
	}
}

void
reload_sighup(struct sched *s)
{
	struct weir_config *n = xcalloc(1, sizeof *n);
	struct buf err = BUF_INIT;
	struct msg **fifo, *m;
	struct job *j;
	unsigned long *adopted = NULL;
	size_t i, nfifo, moved, nadopted = 0;
	char *line, *save = NULL, snap[32];
	int fd = -1, r;

	if (s->o->config_file)
		r = load_snapshot(s->o->config_file, n, &fd, snap, &err);
	else
		r = config_load(n, NULL, &err);	/* the default chain, no file so far */
	if (r < 0) {
		for (line = strtok_r(err.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			log_warnx("SIGHUP: %s", line);
		log_warnx("SIGHUP: the config has errors; the one loaded before stays in force");
		config_free(n);
		free(n);
		buf_free(&err);
		return;
	}
	buf_free(&err);
	if (s->snapfd >= 0 && close(s->snapfd) < 0)
		log_warn("close the old config snapshot");
	s->snapfd = fd;
	if (fd >= 0)
		memcpy(s->snappath, snap, sizeof snap);
	keep_restart_only(s->cfg, n);

	/* Sessions run with the old settings: idle ones end now, busy ones
	 * after their message. */
	sess_end_all(s, "the configuration was reloaded");
	fifo = take_fifos(s, &nfifo);
	rebuild_queues(s, n);
	sess_remap(s);
	moved = remap_messages(s, n, &adopted, &nadopted);

	settings_take(s, n);
	log_info("SIGHUP: %s reloaded: upstreams %zu, concurrency %u, queue_lifetime %lld s, "
	    "retry_skip %u, delay_warning %lld s; messages moved to another upstream: %zu",
	    n->file ? n->file : "the config", n->nupstreams, n->concurrency, n->queue_lifetime,
	    n->retry_skip, n->delay_warning, moved);

	for (i = 0; i < nfifo; i++)
		sched_fifo_append(s, fifo[i]);
	free(fifo);
	while ((j = misplaced_grant(s)) != NULL) {
		(void)gatelink_tell(s, j, GP_REFUND, 0, NULL);
		job_drop(s, j);
	}
	for (i = 0; i < s->nups; i++)
		deliver_kick(s, i);
	/* By id: starting one message may end (and free) another's turn. */
	for (i = 0; i < nadopted; i++)
		if ((m = msg_by_id(s, adopted[i])) != NULL && m->due)
			sched_at(s, m, sched_wall());
	free(adopted);
	keepalive_check(s);	/* refresh_idle, the upstreams: as now in force */
}
