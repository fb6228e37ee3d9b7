/*
 * shared.c: an upstream's windows in Redis, shared by several weir-gates
 * (see shared.h for the keys and weir-gate(8) for what it promises).
 * Every decision is one Lua script run atomically by Redis at Redis's
 * own clock (the .lua files of src/gate, each with its keys, arguments
 * and answer, made into C strings at build time by scripts/lua2c.sh);
 * this file only builds the arguments and reads the answers.
 *
 * Trusts: Redis's replies (shape checked); the secret file only after
 * secretfile_check.  Config keys: shared, shared_secret_file.
 */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gate/lua.h"		/* generated from src/gate/NAME.lua */
#include "gate/shared.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/secretfile.h"

enum { S_GRANT, S_REPORT, S_RESTORE, S_CHECK, S_RENEW, S_VIEW, S_COUNT };

static const char *const scripts[S_COUNT] = { lua_grant, lua_report, lua_restore, lua_check,
	lua_renew, lua_count };

struct sconn {
	char *up, *spec, *secret;
	redisContext *c;
	char sha[S_COUNT][41];
	int down;		/* logged as unreachable */
	char why[200];
	int64_t next_try;	/* while c == NULL: not before */
	int64_t next_check;	/* shared_tick: not before */
	int64_t next_renew;	/* the leases: renew then (0: at once) */
	int adopted;		/* an earlier run's grants taken over */
	struct sconn *next;
};

struct shared {
	char *host;		/* stable: marks the write-back */
	char *run;		/* this run: in grant ids */
	uint64_t nrest;		/* write-back ids */
	int64_t lease_ms;	/* a grant's lease (shared.h) */
	struct sconn *conns;
};

/* Arguments of one command. */
struct args {
	char **v;
	size_t n, cap;
};

static void
arg_add(struct args *a, const char *fmt, ...) PRINTFLIKE(2, 3);

static void
arg_add(struct args *a, const char *fmt, ...)
{
	va_list ap;

	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 32;
		a->v = xrealloc(a->v, a->cap * sizeof *a->v);
	}
	va_start(ap, fmt);
	if (vasprintf(&a->v[a->n], fmt, ap) < 0)
		fatalx(111, "out of memory");
	va_end(ap);
	a->n++;
}

static void
args_free(struct args *a)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof *a);
}

struct shared *
shared_new(const char *host, const char *run, int64_t grace_ms)
{
	struct shared *sh = xcalloc(1, sizeof *sh);

	sh->host = xstrdup(host);
	sh->run = xstrdup(run);
	sh->lease_ms = grace_ms > SHARED_LEASE_MIN_MS ? grace_ms : SHARED_LEASE_MIN_MS;
	return sh;
}

int64_t
shared_lease_ms(const struct shared *sh)
{
	return sh->lease_ms;
}

/* How often the leases are renewed. */
static int64_t
renew_ms(const struct shared *sh)
{
	int64_t r = sh->lease_ms / 4;

	return r > SHARED_RENEW_MAX_MS ? SHARED_RENEW_MAX_MS : r;
}

struct shared *
shared_new_for(const char *journal, int64_t wall_ms, int64_t grace_ms)
{
	char host[256], run[64], *id;
	struct shared *sh;
	uint32_t h = 2166136261u;
	const char *p;
	char *q;

	if (gethostname(host, sizeof host) < 0)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = '\0';
	for (q = host; *q; q++)
		if (*q == ' ' || *q == '.' || (unsigned char)*q < 0x21)
			*q = '_';
	for (p = journal; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	id = xasprintf("%s-%08x", host, h);
	snprintf(run, sizeof run, "%llx-%ld", (unsigned long long)wall_ms, (long)getpid());
	sh = shared_new(id, run, grace_ms);
	free(id);
	return sh;
}

static void
sconn_close(struct sconn *sc)
{
	if (sc->c)
		redisFree(sc->c);
	sc->c = NULL;
}

void
shared_free(struct shared *sh)
{
	struct sconn *sc, *n;

	if (sh == NULL)
		return;
	for (sc = sh->conns; sc; sc = n) {
		n = sc->next;
		sconn_close(sc);
		free(sc->up);
		free(sc->spec);
		free(sc->secret);
		free(sc);
	}
	free(sh->host);
	free(sh->run);
	free(sh);
}

static void
mark_down(struct sconn *sc, const char *why, int64_t now)
{
	sconn_close(sc);
	sc->next_try = now + SHARED_RETRY_MS;
	snprintf(sc->why, sizeof sc->why, "%s", why);
	if (!sc->down)
		log_warnx("upstream %s: shared store %s unreachable: %s; no grant until it answers",
		    sc->up, sc->spec, why);
	sc->down = 1;
}

/* The secret file's "password" or "user password", checked like the
 * upstream's. 0 ok; -1 with why. */
static int
read_secret(const char *path, char **user, char **pass, struct buf *why)
{
	char data[SECRET_MAX + 1], *sp;
	struct stat st;
	ssize_t n;
	int fd, rc = -1;

	*user = *pass = NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		buf_printf(why, "shared_secret_file %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		buf_printf(why, "shared_secret_file %s: %s", path, strerror(errno));
		goto out;
	}
	if (secretfile_check(&st, path, why) < 0)
		goto out;
	n = read(fd, data, SECRET_MAX);
	if (n < 0) {
		buf_printf(why, "shared_secret_file %s: %s", path, strerror(errno));
		goto out;
	}
	data[n] = '\0';
	while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r' || data[n - 1] == ' '))
		data[--n] = '\0';
	if (n == 0) {
		buf_printf(why, "shared_secret_file %s: empty", path);
		goto out;
	}
	sp = strchr(data, ' ');
	if (sp) {
		*sp = '\0';
		*user = xstrdup(data);
		*pass = xstrdup(sp + 1);
	} else {
		*pass = xstrdup(data);
	}
	rc = 0;
out:
	explicit_bzero(data, sizeof data);
	close(fd);
	return rc;
}

/* Connect, authenticate, select, load the scripts. 0 ok; -1 marked down. */
static int
conn_open(struct sconn *sc, int64_t now)
{
	struct timeval tv = { SHARED_TIMEOUT_MS / 1000, (SHARED_TIMEOUT_MS % 1000) * 1000 };
	struct policy_shared ps;
	struct buf why = BUF_INIT;
	char *user = NULL, *pass = NULL;
	redisReply *rep = NULL;
	const char *perr;
	int i, rc = -1;

	if (policy_shared_parse(sc->spec, &ps, &perr) < 0) {
		mark_down(sc, perr, now);
		return -1;
	}
	if (ps.unix_socket)
		sc->c = redisConnectUnixWithTimeout(ps.host, tv);
	else
		sc->c = redisConnectWithTimeout(ps.host, ps.port, tv);
	if (sc->c == NULL || sc->c->err) {
		buf_printf(&why, "connect: %s", sc->c ? sc->c->errstr : "out of memory");
		goto out;
	}
	if (redisSetTimeout(sc->c, tv) != REDIS_OK) {
		buf_printf(&why, "timeout: %s", sc->c->errstr);
		goto out;
	}
	if (sc->secret) {
		if (read_secret(sc->secret, &user, &pass, &why) < 0)
			goto out;
		rep = user ? redisCommand(sc->c, "AUTH %s %s", user, pass) :
		    redisCommand(sc->c, "AUTH %s", pass);
		if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
			buf_printf(&why, "AUTH: %s", rep ? rep->str : sc->c->errstr);
			goto out;
		}
		freeReplyObject(rep);
		rep = NULL;
	}
	if (ps.db) {
		rep = redisCommand(sc->c, "SELECT %d", ps.db);
		if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
			buf_printf(&why, "SELECT: %s", rep ? rep->str : sc->c->errstr);
			goto out;
		}
		freeReplyObject(rep);
		rep = NULL;
	}
	for (i = 0; i < S_COUNT; i++) {
		rep = redisCommand(sc->c, "SCRIPT LOAD %s", scripts[i]);
		if (rep == NULL || rep->type != REDIS_REPLY_STRING || rep->len != 40) {
			buf_printf(&why, "SCRIPT LOAD: %s",
			    rep ? (rep->str ? rep->str : "bad reply") : sc->c->errstr);
			goto out;
		}
		memcpy(sc->sha[i], rep->str, 41);
		freeReplyObject(rep);
		rep = NULL;
	}
	if (sc->down)
		log_info("upstream %s: shared store %s answers again", sc->up, sc->spec);
	sc->down = 0;
	sc->next_renew = 0;	/* the leases may have run on meanwhile */
	sc->why[0] = '\0';
	rc = 0;
out:
	if (rep)
		freeReplyObject(rep);
	if (rc < 0)
		mark_down(sc, buf_cstr(&why), now);
	if (pass) {
		explicit_bzero(pass, strlen(pass));
		free(pass);
	}
	free(user);
	free(ps.host);
	buf_free(&why);
	return rc;
}

static struct sconn *
get_conn(struct shared *sh, const struct policy_upstream *pu, int64_t now)
{
	struct sconn *sc;

	for (sc = sh->conns; sc; sc = sc->next)
		if (strcmp(sc->up, pu->name) == 0)
			break;
	if (sc == NULL) {
		sc = xcalloc(1, sizeof *sc);
		sc->up = xstrdup(pu->name);
		sc->next = sh->conns;
		sh->conns = sc;
	}
	if (sc->spec == NULL || strcmp(sc->spec, pu->shared) != 0 ||
	    (sc->secret == NULL) != (pu->shared_secret_file == NULL) ||
	    (sc->secret && strcmp(sc->secret, pu->shared_secret_file) != 0)) {
		sconn_close(sc);
		free(sc->spec);
		free(sc->secret);
		sc->spec = xstrdup(pu->shared);
		sc->secret = pu->shared_secret_file ? xstrdup(pu->shared_secret_file) : NULL;
		sc->next_try = 0;
	}
	if (sc->c == NULL && (now < sc->next_try || conn_open(sc, now) < 0))
		return NULL;
	return sc;
}

/* Run script i with keys and args (keys first in a, nkeys of them).  The
 * reply, or NULL with the store marked down. */
static redisReply *
run(struct sconn *sc, int i, struct args *a, size_t nkeys, int64_t now)
{
	struct args cmd = { 0 };
	redisReply *rep;
	size_t k;
	int eval;

	for (eval = 0; eval < 2; eval++) {
		arg_add(&cmd, "%s", eval ? "EVAL" : "EVALSHA");
		arg_add(&cmd, "%s", eval ? scripts[i] : sc->sha[i]);
		arg_add(&cmd, "%zu", nkeys);
		for (k = 0; k < a->n; k++)
			arg_add(&cmd, "%s", a->v[k]);
		rep = redisCommandArgv(sc->c, (int)cmd.n, (const char **)cmd.v, NULL);
		args_free(&cmd);
		if (rep == NULL) {
			mark_down(sc, sc->c->errstr, now);
			return NULL;
		}
		if (rep->type != REDIS_REPLY_ERROR)
			return rep;
		if (eval || strncmp(rep->str, "NOSCRIPT", 8) != 0) {
			char why[160];

			snprintf(why, sizeof why, "script: %s", rep->str);
			freeReplyObject(rep);
			mark_down(sc, why, now);
			return NULL;
		}
		freeReplyObject(rep);
	}
	return NULL;
}

static void
add_keys(struct args *a, const char *up, const char *host, int n)
{
	static const char *const names[] = { "log", "held", "heldw", "epoch", NULL, "hold", "susp" };
	int i;

	for (i = 0; i < n; i++)
		if (names[i])
			arg_add(a, "weir:{%s}:%s", up, names[i]);
		else
			arg_add(a, "weir:{%s}:host:%s", up, host);
}

static int64_t
keep_ms(const struct shared *sh, const struct policy_upstream *pu)
{
	int64_t k = 0;
	size_t i;

	for (i = 0; i < pu->nwin; i++)
		if (pu->win[i].per * 1000 > k)
			k = pu->win[i].per * 1000;
	return k + sh->lease_ms;
}

/* n, then per held grant: id age m r c (restore and renew). */
static void
add_held(const struct shared *sh, struct args *a, struct wg_req *const *held, size_t nheld,
    int64_t now)
{
	size_t i;

	arg_add(a, "%zu", nheld);
	for (i = 0; i < nheld; i++) {
		arg_add(a, "%s.%s.%llu", sh->host, sh->run, (unsigned long long)held[i]->id);
		arg_add(a, "%lld", (long long)(now - held[i]->since));
		arg_add(a, "%u", held[i]->w[UNIT_MESSAGES]);
		arg_add(a, "%u", held[i]->w[UNIT_RECIPIENTS]);
		arg_add(a, "%u", held[i]->w[UNIT_CONNECTIONS]);
	}
}

static int
restore(struct shared *sh, struct sconn *sc, const struct policy_upstream *pu,
    struct wg_up *u, struct wg_req *const *held, size_t nheld, int64_t now, int64_t grace)
{
	struct args a = { 0 };
	redisReply *rep;
	uint64_t s;

	add_keys(&a, pu->name, sh->host, 3);
	arg_add(&a, "weir:{%s}:host:%s", pu->name, sh->host);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	arg_add(&a, "%lld", (long long)sh->lease_ms);
	arg_add(&a, "%zu", u->ln);
	for (s = u->lseq; s < u->lseq + u->ln; s++) {
		const struct wg_send *e = wg_log_at(u, s);

		arg_add(&a, "%s.%s.w%llu", sh->host, sh->run, (unsigned long long)++sh->nrest);
		arg_add(&a, "%lld", (long long)(now - e->from));
		arg_add(&a, "%lld", (long long)(now - e->t));
		arg_add(&a, "%u", e->w[UNIT_MESSAGES]);
		arg_add(&a, "%u", e->w[UNIT_RECIPIENTS]);
		arg_add(&a, "%u", e->w[UNIT_CONNECTIONS]);
	}
	add_held(sh, &a, held, nheld, now);
	(void)grace;
	rep = run(sc, S_RESTORE, &a, 4, now);
	args_free(&a);
	if (rep == NULL)
		return -1;
	freeReplyObject(rep);
	log_info("upstream %s: shared store %s had no history: wrote back %zu sends and %zu "
	    "grants of this host", pu->name, sc->spec, u->ln, nheld);
	return 0;
}

int
shared_admit(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    struct wg_req *const *held, size_t nheld, int64_t now, int64_t wmm, int64_t grace,
    int64_t *retry)
{
	struct sconn *sc = get_conn(sh, pu, now);
	struct args a = { 0 };
	redisReply *rep = NULL;
	long long code = 0, ms = 0;
	int tries, rc = 0;
	size_t i;

	*retry = now + SHARED_RETRY_MS;
	if (sc == NULL)
		return 0;
	add_keys(&a, pu->name, sh->host, 7);
	arg_add(&a, "%s.%s.%llu", sh->host, sh->run, (unsigned long long)r->id);
	arg_add(&a, "%u", r->w[UNIT_MESSAGES]);
	arg_add(&a, "%u", r->w[UNIT_RECIPIENTS]);
	arg_add(&a, "%u", r->w[UNIT_CONNECTIONS]);
	arg_add(&a, "%lld", (long long)sh->lease_ms);
	arg_add(&a, "%lld", pu->max_connections);
	arg_add(&a, "%d", SHARED_POLL_MS);
	arg_add(&a, "%d", SHARED_HOLD_MS);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	arg_add(&a, "%zu", pu->nwin);
	for (i = 0; i < pu->nwin; i++) {
		const struct policy_window *w = &pu->win[i];

		arg_add(&a, "%lld", w->limit);
		arg_add(&a, "%lld", w->per * 1000);
		arg_add(&a, "%d", (int)w->unit + 1);
		arg_add(&a, "%d", w->calendar);
		/* Boundaries at wall ms == align * 1000 (mod per): Redis's
		 * clock is a wall clock. */
		arg_add(&a, "%lld", w->calendar ? (w->align * 1000) % (w->per * 1000) : 0);
	}
	(void)wmm;
	for (tries = 0; tries < 2; tries++) {
		rep = run(sc, S_GRANT, &a, 7, now);
		if (rep == NULL)
			goto out;
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
		    rep->element[0]->type != REDIS_REPLY_INTEGER ||
		    rep->element[1]->type != REDIS_REPLY_INTEGER) {
			mark_down(sc, "script: unexpected reply", now);
			goto out;
		}
		code = rep->element[0]->integer;
		ms = rep->element[1]->integer;
		freeReplyObject(rep);
		rep = NULL;
		if (code != 2)
			break;
		if (restore(sh, sc, pu, r->up, held, nheld, now, grace) < 0)
			goto out;
	}
	switch (code) {
	case 1:
		rc = 1;
		break;
	case 0:
	case 3:
		*retry = now + (ms > 0 ? ms : 1);
		break;
	default:
		*retry = now + SHARED_POLL_MS;
		break;
	}
out:
	if (rep)
		freeReplyObject(rep);
	args_free(&a);
	return rc;
}

/* Renew the leases of held (this host's grants of pu); the first time,
 * adopt an earlier run's.  0 done; -1 the store is down. */
static int
renew(struct shared *sh, struct sconn *sc, const struct policy_upstream *pu,
    struct wg_req *const *held, size_t nheld, int64_t now)
{
	struct args a = { 0 };
	redisReply *rep;

	if (nheld == 0 && sc->adopted)
		return 0;
	arg_add(&a, "weir:{%s}:held", pu->name);
	arg_add(&a, "weir:{%s}:heldw", pu->name);
	arg_add(&a, "%lld", (long long)sh->lease_ms);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	arg_add(&a, "%s.", sh->host);
	arg_add(&a, "%s.%s.", sh->host, sh->run);
	arg_add(&a, "%d", !sc->adopted);
	add_held(sh, &a, held, nheld, now);
	rep = run(sc, S_RENEW, &a, 2, now);
	args_free(&a);
	if (rep == NULL)
		return -1;
	freeReplyObject(rep);
	sc->adopted = 1;
	return 0;
}

int64_t
shared_tick(struct shared *sh, const struct policy_upstream *pu, struct wg_up *u,
    struct wg_req *const *held, size_t nheld, int64_t now)
{
	struct sconn *sc;
	struct args a = { 0 };
	redisReply *rep;

	for (sc = sh->conns; sc; sc = sc->next)
		if (strcmp(sc->up, pu->name) == 0)
			break;
	if (sc && now < sc->next_check)
		return sc->next_check;
	sc = get_conn(sh, pu, now);
	if (sc == NULL) {
		for (sc = sh->conns; strcmp(sc->up, pu->name) != 0; sc = sc->next)
			;
		return sc->next_try;
	}
	sc->next_check = now + SHARED_RETRY_MS;
	arg_add(&a, "weir:{%s}:epoch", pu->name);
	arg_add(&a, "weir:{%s}:host:%s", pu->name, sh->host);
	arg_add(&a, "weir:{%s}:hold", pu->name);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	arg_add(&a, "%d", SHARED_HOLD_MS);
	rep = run(sc, S_CHECK, &a, 3, now);
	args_free(&a);
	if (rep == NULL)
		return now + SHARED_RETRY_MS;
	if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 1)
		(void)restore(sh, sc, pu, u, held, nheld, now, 0);
	freeReplyObject(rep);
	if (sc->c && now >= sc->next_renew && renew(sh, sc, pu, held, nheld, now) == 0)
		sc->next_renew = now + renew_ms(sh);
	return sc->next_check;
}

void
shared_ended(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    enum wg_outcome o, const struct wg_done *d, int64_t now, int64_t grace)
{
	struct sconn *sc = get_conn(sh, pu, now);
	struct args a = { 0 };
	redisReply *rep;
	const char *kind = "R";

	/* A report Redis does not get leaves the grant held there until its
	 * lease ends, then logged as maybe sent until then: more, never less. */
	if (sc == NULL)
		return;
	switch (o) {
	case WG_SENT:
		kind = "S";
		break;
	case WG_UNKNOWN:
		kind = "X";
		break;
	case WG_NOMAIL:
	case WG_AUTHFAIL:
	case WG_NOGREETING:
		kind = "N";
		break;
	case WG_THROTTLED:
	case WG_QUOTA:
		kind = "T";
		break;
	case WG_REFUND:
	case WG_UNREACHED:
		kind = "R";
		break;
	}
	add_keys(&a, pu->name, sh->host, 3);
	arg_add(&a, "%s.%s.%llu", sh->host, sh->run, (unsigned long long)r->id);
	arg_add(&a, "%s", kind);
	arg_add(&a, "%lld", (long long)(o == WG_SENT && d->logged ? now - d->t : 0));
	arg_add(&a, "%lld", (long long)grace);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	arg_add(&a, "%u", r->w[UNIT_MESSAGES]);
	arg_add(&a, "%u", r->w[UNIT_RECIPIENTS]);
	arg_add(&a, "%u", r->w[UNIT_CONNECTIONS]);
	arg_add(&a, "%lld", (long long)(now - r->since));
	rep = run(sc, S_REPORT, &a, 3, now);
	if (rep)
		freeReplyObject(rep);
	args_free(&a);
}

void
shared_suspend(struct shared *sh, const struct policy_upstream *pu, int64_t until, int64_t now)
{
	struct sconn *sc = get_conn(sh, pu, now);
	redisReply *rep;
	char *key;

	if (sc == NULL)
		return;
	key = xasprintf("weir:{%s}:susp", pu->name);
	if (until > now)
		rep = redisCommand(sc->c, "SET %s %s PX %lld", key, sh->host,
		    (long long)(until - now));
	else
		rep = redisCommand(sc->c, "DEL %s", key);
	free(key);
	if (rep == NULL)
		mark_down(sc, sc->c->errstr, now);
	else
		freeReplyObject(rep);
}

int
shared_state(const struct shared *sh, const char *upstream, const char **why)
{
	const struct sconn *sc;

	*why = NULL;
	if (sh == NULL)
		return -1;
	for (sc = sh->conns; sc; sc = sc->next)
		if (strcmp(sc->up, upstream) == 0) {
			*why = sc->why;
			return sc->down;
		}
	return -1;
}

const char *
shared_store(const struct shared *sh, const char *upstream)
{
	const struct sconn *sc;

	for (sc = sh ? sh->conns : NULL; sc; sc = sc->next)
		if (strcmp(sc->up, upstream) == 0)
			return sc->spec;
	return NULL;
}

int
shared_counts(struct shared *sh, const struct wg_up *u, int64_t wmm, int64_t now,
    int64_t *logged, int64_t *held)
{
	struct sconn *sc;
	struct args a = { 0 };
	redisReply *rep;
	size_t i;
	int rc = -1;

	for (sc = sh ? sh->conns : NULL; sc; sc = sc->next)
		if (strcmp(sc->up, u->name) == 0)
			break;
	if (sc == NULL || sc->c == NULL)
		return -1;
	arg_add(&a, "weir:{%s}:log", u->name);
	arg_add(&a, "weir:{%s}:held", u->name);
	arg_add(&a, "weir:{%s}:heldw", u->name);
	arg_add(&a, "%zu", u->nwin);
	for (i = 0; i < u->nwin; i++) {
		const struct wg_win *w = &u->win[i];

		arg_add(&a, "%lld", (long long)w->per);
		arg_add(&a, "%d", (int)w->unit + 1);
		arg_add(&a, "%d", w->calendar);
		/* The boundaries on the wall clock, Redis's. */
		arg_add(&a, "%lld", w->calendar && w->per > 0 ?
		    (long long)(((w->phase + wmm) % w->per + w->per) % w->per) : 0LL);
	}
	rep = run(sc, S_VIEW, &a, 3, now);
	args_free(&a);
	if (rep == NULL)
		return -1;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 * u->nwin) {
		for (i = 0; i < 2 * u->nwin; i++)
			if (rep->element[i]->type != REDIS_REPLY_INTEGER)
				break;
		if (i == 2 * u->nwin) {
			for (i = 0; i < u->nwin; i++) {
				logged[i] = rep->element[2 * i]->integer;
				held[i] = rep->element[2 * i + 1]->integer;
			}
			rc = 0;
		}
	}
	freeReplyObject(rep);
	return rc;
}
