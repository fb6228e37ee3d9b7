/*
 * shared.c: an upstream's windows in Redis, shared by several weir-gates
 * (see shared.h for the keys and weir-gate(8) for what it promises).
 * Every decision is one Lua script run atomically by Redis at Redis's
 * own clock (the .lua files of src/gate, each with its keys, arguments
 * and answer, made into C strings at build time by scripts/lua2c.sh);
 * this file finds the store (a Redis, or the master the sentinels name),
 * builds the arguments and reads the answers.
 *
 * The history a gate has written is proven to be in the store only while
 * it speaks to the same Redis (run id and replication id: its ident) over
 * which every write of its own was answered.  Any failed or unanswered
 * write, a new connection to another ident, and a gate's start make it
 * write its own history back (restore(): its journal's sends and its held
 * grants, in place of what the store holds of it) before it grants again;
 * a store that is not the one the window was made whole on holds every
 * host's grants until each wrote its own back (common.lua).
 *
 * Trusts: Redis's and the sentinels' replies (shape checked); the secret
 * files only after secretfile_check.  Config keys: shared,
 * shared_secret_file, shared_sentinel_secret_file.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate/lua.h"		/* generated from src/gate/NAME.lua */
#include "gate/shared.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/secretfile.h"

enum { S_GRANT, S_REPORT, S_RESTORE, S_CHECK, S_RENEW, S_VIEW, S_SUSPEND, S_COUNT };

/* Each script; every one begins with common.lua. */
static const char *const script_src[S_COUNT] = {
	[S_GRANT] = lua_grant, [S_REPORT] = lua_report, [S_RESTORE] = lua_restore,
	[S_CHECK] = lua_check, [S_RENEW] = lua_renew, [S_VIEW] = lua_count,
	[S_SUSPEND] = lua_suspend,
};

#define IDENT_MAX	96	/* "RUNID:REPLID" (40 + 1 + 40) */
#define ADDR_MAX	300	/* "host:port" */

struct sconn {
	struct shared *sh;
	char *up, *spec, *secret, *ssecret;
	struct policy_shared ps;	/* spec, read */
	const char *ps_err;		/* NULL: read; else why not */
	redisContext *c;
	char sha[S_COUNT][41];
	int down;		/* logged as gone: until a script answers */
	char why[512];
	int64_t next_try;	/* while c == NULL: not before */
	int64_t next_check;	/* shared_tick: not before */
	int64_t next_renew;	/* the leases: renew then (0: at once) */
	char ident[IDENT_MAX];	/* the Redis connected to */
	/* The ident of the store that holds every write of this gate's;
	 * "": none proven (a start, a write that failed, another store):
	 * write the history back before the next grant. */
	char wrote[IDENT_MAX];
	int lift;		/* a RESUME the store did not get */
	/* The lifts the store had counted (common.lua's lifts()) when this
	 * host's suspension was last stored in it, and that store's ident
	 * ("": not stored since it began or changed).  More lifts counted by
	 * the same store: a RESUME at another host lifted it. */
	long long lifts;
	char lifts_at[IDENT_MAX];
	int rebuilding;		/* a rebuild held the last grant or check */
	int64_t rebuilt_at;	/* this gate's last write-back (now axis; 0: none) */
	/* Where the store is: "host:port" or the socket; for sentinels, the
	 * master they named, and the changes seen. */
	char addr[ADDR_MAX];
	unsigned switches;
	int64_t switch_at;	/* the last change (now axis; 0: none) */
	/* Sentinels: the one that answered last (its index), and a
	 * subscription to its +switch-master (watched by the caller). */
	size_t sentinel;
	redisContext *sub;
	struct sconn *next;
};

struct shared {
	char *host;		/* stable: this gate's entries in the store */
	char *run;		/* this run: in grant ids */
	uint64_t nrest;		/* write-back ids */
	int64_t lease_ms;	/* a grant's lease (shared.h) */
	char *text[S_COUNT];	/* the scripts as Redis runs them */
	shared_watch_fn *watch;
	void *watch_arg;
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
	int i;

	sh->host = xstrdup(host);
	sh->run = xstrdup(run);
	sh->lease_ms = grace_ms > SHARED_LEASE_MIN_MS ? grace_ms : SHARED_LEASE_MIN_MS;
	for (i = 0; i < S_COUNT; i++)
		sh->text[i] = xasprintf("%s%s", lua_common, script_src[i]);
	return sh;
}

int64_t
shared_lease_ms(const struct shared *sh)
{
	return sh->lease_ms;
}

void
shared_set_watch(struct shared *sh, shared_watch_fn *fn, void *arg)
{
	sh->watch = fn;
	sh->watch_arg = arg;
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
unsubscribe(struct sconn *sc)
{
	if (sc->sub == NULL)
		return;
	if (sc->sh->watch)
		sc->sh->watch(sc->sh->watch_arg, sc->sub->fd, 0);
	redisFree(sc->sub);
	sc->sub = NULL;
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
	int i;

	if (sh == NULL)
		return;
	for (sc = sh->conns; sc; sc = n) {
		n = sc->next;
		sconn_close(sc);
		unsubscribe(sc);
		free(sc->up);
		free(sc->spec);
		free(sc->secret);
		free(sc->ssecret);
		policy_shared_free(&sc->ps);
		free(sc);
	}
	for (i = 0; i < S_COUNT; i++)
		free(sh->text[i]);
	free(sh->host);
	free(sh->run);
	free(sh);
}

/* The store failed us: no grant until it answers, its history unproven.
 * why may point into the connection (its errstr): it is copied before
 * the connection is freed.  One log line when the store goes. */
static void
mark_down(struct sconn *sc, const char *why, int64_t now)
{
	snprintf(sc->why, sizeof sc->why, "%s", why);
	sconn_close(sc);
	sc->wrote[0] = '\0';
	sc->next_try = now + SHARED_RETRY_MS;
	if (!sc->down)
		log_warnx("upstream %s: shared store %s unreachable: %s; no grant until it answers",
		    sc->up, sc->spec, sc->why);
	sc->down = 1;
}

/* A script answered: one log line when the store comes back. */
static void
mark_up(struct sconn *sc)
{
	if (sc->down)
		log_info("upstream %s: shared store %s answers again (%s)", sc->up, sc->spec,
		    sc->addr);
	sc->down = 0;
	sc->why[0] = '\0';
}

/* The secret file at path (config key key): "password" or "user
 * password".  0 ok; -1 with why. */
static int
read_secret(const char *key, const char *path, char **user, char **pass, struct buf *why)
{
	struct buf b = BUF_INIT;
	char *sp;

	*user = *pass = NULL;
	if (secretfile_read(key, path, &b, why) < 0)
		return -1;
	while (b.len > 0 && (b.s[b.len - 1] == ' ' || b.s[b.len - 1] == '\r'))
		b.s[--b.len] = '\0';
	if (b.len == 0) {
		buf_printf(why, "%s %s: empty", key, path);
		secret_wipe(&b);
		return -1;
	}
	sp = memchr(b.s, ' ', b.len);
	if (sp) {
		*user = xstrndup(b.s, (size_t)(sp - b.s));
		*pass = xstrdup(sp + 1);
	} else {
		*pass = xstrdup(buf_cstr(&b));
	}
	secret_wipe(&b);
	return 0;
}

static void
pass_free(char *pass)
{
	if (pass) {
		explicit_bzero(pass, strlen(pass));
		free(pass);
	}
}

/* One command that must not fail (AUTH, SELECT...): its reply, or NULL
 * with "what: error" in why. */
static redisReply *
command(redisContext *c, struct buf *why, const char *what, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (rep == NULL) {
		buf_printf(why, "%s: %s", what, c->errstr);
		return NULL;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		buf_printf(why, "%s: %s", what, rep->str);
		freeReplyObject(rep);
		return NULL;
	}
	return rep;
}

/* Connect to host:port (port 0: the Unix socket host) within the
 * timeout and authenticate with the secret file (key, path; NULL: none).
 * The context, or NULL with why. */
static redisContext *
dial(const char *host, int port, const char *key, const char *path, struct buf *why)
{
	struct timeval tv = { SHARED_TIMEOUT_MS / 1000, (SHARED_TIMEOUT_MS % 1000) * 1000 };
	redisContext *c;
	redisReply *rep = NULL;
	char *user = NULL, *pass = NULL;

	c = port ? redisConnectWithTimeout(host, port, tv) : redisConnectUnixWithTimeout(host, tv);
	if (c == NULL || c->err) {
		buf_printf(why, "connect: %s", c ? c->errstr : "out of memory");
		goto fail;
	}
	if (redisSetTimeout(c, tv) != REDIS_OK) {
		buf_printf(why, "timeout: %s", c->errstr);
		goto fail;
	}
	if (path) {
		if (read_secret(key, path, &user, &pass, why) < 0)
			goto fail;
		rep = user ? command(c, why, "AUTH", "AUTH %s %s", user, pass) :
		    command(c, why, "AUTH", "AUTH %s", pass);
		if (rep == NULL)
			goto fail;
		freeReplyObject(rep);
	}
	free(user);
	pass_free(pass);
	return c;
fail:
	free(user);
	pass_free(pass);
	if (c)
		redisFree(c);
	return NULL;
}

/* The value of field f in a flat [field, value, ...] reply, or NULL. */
static const char *
field(const redisReply *rep, const char *f)
{
	size_t i;

	for (i = 0; i + 1 < rep->elements; i += 2)
		if (rep->element[i]->type == REDIS_REPLY_STRING &&
		    rep->element[i + 1]->type == REDIS_REPLY_STRING &&
		    strcmp(rep->element[i]->str, f) == 0)
			return rep->element[i + 1]->str;
	return NULL;
}

/* Ask every sentinel of ps for its master: the answer with the highest
 * config epoch (a sentinel that missed a failover names the old master
 * with an older epoch), unless the sentinel sees that master down or
 * being replaced (flags s_down, o_down, failover_in_progress: a frozen
 * master may still answer, as a master, to a gate that reaches it, and
 * take writes that its promoted replica never gets).  0 with *host
 * (malloc'ed) and *port; -1 with each sentinel's error in why. */
static int
ask_sentinels(struct sconn *sc, const struct policy_shared *ps, char **host, int *port,
    struct buf *why)
{
	long long best = -1, epoch;
	size_t i;

	*host = NULL;
	for (i = 0; i < ps->nsent; i++) {
		struct buf e = BUF_INIT;
		redisContext *c;
		redisReply *rep = NULL;
		const char *ip, *pt, *ep, *fl;
		char *end;
		long p;

		c = dial(ps->sent_host[i], ps->sent_port[i], "shared_sentinel_secret_file",
		    sc->ssecret, &e);
		if (c)
			rep = command(c, &e, "SENTINEL MASTER", "SENTINEL MASTER %s", ps->master);
		if (rep && rep->type != REDIS_REPLY_ARRAY)
			buf_adds(&e, "SENTINEL MASTER: not a list");
		else if (rep) {
			ip = field(rep, "ip");
			pt = field(rep, "port");
			ep = field(rep, "config-epoch");
			fl = field(rep, "flags");
			errno = 0;
			p = pt ? strtol(pt, &end, 10) : 0;
			if (ip == NULL || pt == NULL || ep == NULL || fl == NULL || errno || *end ||
			    p < 1 || p > 65535 || strlen(ip) >= ADDR_MAX - 8)
				buf_adds(&e, "SENTINEL MASTER: no ip, port, config-epoch and flags");
			else if (strstr(fl, "s_down") || strstr(fl, "o_down") ||
			    strstr(fl, "failover_in_progress"))
				buf_printf(&e, "master %s:%ld is down or being replaced (%s)", ip, p,
				    fl);
			else if ((epoch = strtoll(ep, NULL, 10)) > best) {
				best = epoch;
				free(*host);
				*host = xstrdup(ip);
				*port = (int)p;
				sc->sentinel = i;
			}
		}
		if (rep)
			freeReplyObject(rep);
		if (c)
			redisFree(c);
		if (e.len)
			buf_printf(why, "%ssentinel %s:%d: %s", why->len ? "; " : "",
			    ps->sent_host[i], ps->sent_port[i], buf_cstr(&e));
		buf_free(&e);
	}
	if (*host == NULL)
		return -1;
	buf_reset(why);
	return 0;
}

/* Subscribe to +switch-master at the sentinel that answered last; the
 * caller watches the descriptor.  Nothing happens when that fails: a
 * master that goes away or turns replica is seen anyway. */
static void
subscribe(struct sconn *sc)
{
	const struct policy_shared *ps = &sc->ps;
	struct buf why = BUF_INIT;
	redisReply *rep;
	size_t i = sc->sentinel;

	if (sc->sub || i >= ps->nsent)
		return;
	sc->sub = dial(ps->sent_host[i], ps->sent_port[i], "shared_sentinel_secret_file",
	    sc->ssecret, &why);
	if (sc->sub && (rep = command(sc->sub, &why, "SUBSCRIBE",
	    "SUBSCRIBE +switch-master")) != NULL)
		freeReplyObject(rep);
	else if (sc->sub) {
		redisFree(sc->sub);
		sc->sub = NULL;
	}
	if (sc->sub && sc->sh->watch)
		sc->sh->watch(sc->sh->watch_arg, sc->sub->fd, 1);
	if (sc->sub == NULL)
		log_info("upstream %s: no subscription to the sentinels' +switch-master (%s): a "
		    "failover is seen when the master goes", sc->up, buf_cstr(&why));
	buf_free(&why);
}

/* The line value of "key:" in INFO's text, into out (size n). */
static int
info_value(const char *text, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key), vl;
	const char *p;

	for (p = text; p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			p += kl + 1;
			vl = strcspn(p, "\r\n");
			if (vl == 0 || vl >= n)
				return -1;
			memcpy(out, p, vl);
			out[vl] = '\0';
			return 0;
		}
	}
	return -1;
}

/* Connect, authenticate, select, check that it is a master, read its
 * ident, load the scripts.  0 ok; -1 marked down. */
static int
conn_open(struct sconn *sc, int64_t now)
{
	const struct policy_shared *ps = &sc->ps;
	struct buf why = BUF_INIT;
	redisReply *rep = NULL;
	char role[32], runid[48], replid[48], addr[ADDR_MAX], *host = NULL;
	int i, port = 0, rc = -1;

	if (sc->ps_err) {
		mark_down(sc, sc->ps_err, now);
		return -1;
	}
	if (ps->nsent) {
		if (ask_sentinels(sc, ps, &host, &port, &why) < 0)
			goto out;
		snprintf(addr, sizeof addr, "master %s %s:%d", ps->master, host, port);
	} else {
		host = xstrdup(ps->host);
		port = ps->unix_socket ? 0 : ps->port;
		snprintf(addr, sizeof addr, "%s%s%.0d", host, port ? ":" : "", port);
	}
	if ((sc->c = dial(host, port, "shared_secret_file", sc->secret, &why)) == NULL)
		goto out;
	if (ps->db) {
		if ((rep = command(sc->c, &why, "SELECT", "SELECT %d", ps->db)) == NULL)
			goto out;
		freeReplyObject(rep);
	}
	/* Never a replica: its writes would be lost, or refused (READONLY). */
	if ((rep = command(sc->c, &why, "INFO", "INFO server replication")) == NULL)
		goto out;
	if (rep->type != REDIS_REPLY_STRING || info_value(rep->str, "role", role, sizeof role) ||
	    info_value(rep->str, "run_id", runid, sizeof runid) ||
	    info_value(rep->str, "master_replid", replid, sizeof replid)) {
		buf_adds(&why, "INFO: no role, run_id and master_replid");
		goto out;
	}
	freeReplyObject(rep);
	rep = NULL;
	if (strcmp(role, "master") != 0) {
		buf_printf(&why, "%s is a replica (role %s), not the master", addr, role);
		goto out;
	}
	for (i = 0; i < S_COUNT; i++) {
		rep = command(sc->c, &why, "SCRIPT LOAD", "SCRIPT LOAD %s", sc->sh->text[i]);
		if (rep == NULL)
			goto out;
		if (rep->type != REDIS_REPLY_STRING || rep->len != 40) {
			buf_adds(&why, "SCRIPT LOAD: bad reply");
			goto out;
		}
		memcpy(sc->sha[i], rep->str, 41);
		freeReplyObject(rep);
		rep = NULL;
	}
	snprintf(sc->ident, sizeof sc->ident, "%s:%s", runid, replid);
	if (strcmp(sc->addr, addr) != 0) {
		if (sc->addr[0] && ps->nsent) {
			sc->switches++;
			sc->switch_at = now;
			log_info("upstream %s: shared store %s: %s (was %s)", sc->up, sc->spec, addr,
			    sc->addr);
		}
		snprintf(sc->addr, sizeof sc->addr, "%s", addr);
	}
	if (ps->nsent)
		subscribe(sc);
	sc->next_renew = 0;	/* the leases may have run on meanwhile */
	rc = 0;
out:
	if (rep)
		freeReplyObject(rep);
	if (rc < 0)
		mark_down(sc, why.len ? buf_cstr(&why) : "failed", now);
	free(host);
	buf_free(&why);
	return rc;
}

static struct sconn *
find_conn(const struct shared *sh, const char *up)
{
	struct sconn *sc;

	for (sc = sh ? sh->conns : NULL; sc; sc = sc->next)
		if (strcmp(sc->up, up) == 0)
			return sc;
	return NULL;
}

static int
differs(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* u's connection, made when the store's name or secrets changed, opened
 * when it is not (and may be tried now); NULL: none now. */
static struct sconn *
get_conn(struct shared *sh, const struct policy_upstream *pu, int64_t now)
{
	struct sconn *sc = find_conn(sh, pu->name);

	if (sc == NULL) {
		sc = xcalloc(1, sizeof *sc);
		sc->sh = sh;
		sc->up = xstrdup(pu->name);
		sc->next = sh->conns;
		sh->conns = sc;
	}
	if (differs(sc->spec, pu->shared) || differs(sc->secret, pu->shared_secret_file) ||
	    differs(sc->ssecret, pu->shared_sentinel_secret_file)) {
		sconn_close(sc);
		unsubscribe(sc);
		free(sc->spec);
		free(sc->secret);
		free(sc->ssecret);
		sc->spec = xstrdup(pu->shared);
		policy_shared_free(&sc->ps);
		sc->ps_err = NULL;
		if (policy_shared_parse(sc->spec, &sc->ps, &sc->ps_err) < 0)
			memset(&sc->ps, 0, sizeof sc->ps);
		sc->secret = pu->shared_secret_file ? xstrdup(pu->shared_secret_file) : NULL;
		sc->ssecret = pu->shared_sentinel_secret_file ?
		    xstrdup(pu->shared_sentinel_secret_file) : NULL;
		sc->wrote[0] = '\0';
		sc->addr[0] = '\0';
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
		arg_add(&cmd, "%s", eval ? sc->sh->text[i] : sc->sha[i]);
		arg_add(&cmd, "%zu", nkeys);
		for (k = 0; k < a->n; k++)
			arg_add(&cmd, "%s", a->v[k]);
		rep = redisCommandArgv(sc->c, (int)cmd.n, (const char **)cmd.v, NULL);
		args_free(&cmd);
		if (rep == NULL) {
			mark_down(sc, sc->c->errstr, now);
			return NULL;
		}
		if (rep->type != REDIS_REPLY_ERROR) {
			mark_up(sc);
			return rep;
		}
		if (eval || strncmp(rep->str, "NOSCRIPT", 8) != 0) {
			char why[300];

			snprintf(why, sizeof why, "script: %s", rep->str);
			freeReplyObject(rep);
			mark_down(sc, why, now);
			return NULL;
		}
		freeReplyObject(rep);
	}
	return NULL;
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

/* The keys and arguments of common.lua's whole(), first in the scripts
 * that call it (see there). */
static void
add_whole(const struct shared *sh, const struct sconn *sc, const struct policy_upstream *pu,
    struct args *k, struct args *v)
{
	static const char *const names[] = { "gen", "built", "hosts", "rebuild", "waitfor" };
	size_t i;

	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		arg_add(k, "weir:{%s}:%s", pu->name, names[i]);
	arg_add(v, "%s", sc->ident);
	arg_add(v, "%s", sh->host);
	arg_add(v, "%lld", (long long)keep_ms(sh, pu));
	arg_add(v, "%d", SHARED_REBUILD_MAX_MS);
	arg_add(v, "%d", SHARED_ALIVE_MS);
}

/* The keys log held heldw susp, for grant and restore. */
static void
add_window_keys(struct args *k, const char *up)
{
	arg_add(k, "weir:{%s}:log", up);
	arg_add(k, "weir:{%s}:held", up);
	arg_add(k, "weir:{%s}:heldw", up);
	arg_add(k, "weir:{%s}:susp", up);
}

/* Keys k, then the arguments v, as one list; frees both. */
static void
join(struct args *k, struct args *v, struct args *out)
{
	size_t i;

	*out = *k;
	for (i = 0; i < v->n; i++)
		arg_add(out, "%s", v->v[i]);
	args_free(v);
	memset(k, 0, sizeof *k);
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

/* u's own suspension, if it runs: when it ends (0: none). */
static int64_t
own_until(const struct wg_up *u, int64_t now)
{
	int64_t until = u->susp_until > u->auth_until ? u->susp_until : u->auth_until;

	return until > now ? until : 0;
}

/* The suspension this gate knows of for u, for a write-back: ms left, or
 * -1 for a RESUME the store missed, or 0. */
static int64_t
susp_left(const struct sconn *sc, const struct wg_up *u, int64_t now)
{
	int64_t until = own_until(u, now);

	if (until)
		return until - now;
	return sc->lift ? -1 : 0;
}

/* The value of weir:{U}:susp for this gate's suspension of u that ends
 * at until (shared.h): "HOST KIND REPLY", malloc'ed. */
static char *
susp_value(const struct shared *sh, const struct wg_up *u, int64_t until)
{
	int auth = until == u->auth_until && until != u->susp_until;
	const char *why = auth ? u->auth_reason : u->susp_reason;

	return xasprintf("%s %s %.*s", sh->host, auth ? "auth" : u->susp_quota ? "quota" :
	    "throttle", SHARED_REASON_MAX, why ? why : "");
}

/* This host's suspension is in the store (sc->ident) now, which had
 * counted n lifts. */
static void
stored_at(struct sconn *sc, long long n)
{
	sc->lifts = n;
	snprintf(sc->lifts_at, sizeof sc->lifts_at, "%s", sc->ident);
}

/* Store u's suspension until `until` (<= now: lift it, a RESUME here)
 * through suspend.lua.  0 done; -1 the store is down. */
static int
store_susp(struct shared *sh, struct sconn *sc, const struct policy_upstream *pu,
    const struct wg_up *u, int64_t until, int64_t now)
{
	struct args a = { 0 };
	redisReply *rep;
	char *val = until > now ? susp_value(sh, u, until) : xstrdup("");

	arg_add(&a, "weir:{%s}:susp", pu->name);
	arg_add(&a, "weir:{%s}:lift", pu->name);
	arg_add(&a, "%lld", (long long)(until > now ? until - now : 0));
	arg_add(&a, "%s", val);
	arg_add(&a, "%s", sh->host);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	free(val);
	rep = run(sc, S_SUSPEND, &a, 2, now);
	args_free(&a);
	if (rep == NULL)
		return -1;
	if (rep->type != REDIS_REPLY_INTEGER) {
		freeReplyObject(rep);
		mark_down(sc, "script: unexpected reply", now);
		return -1;
	}
	if (until > now)
		stored_at(sc, rep->integer);
	freeReplyObject(rep);
	return 0;
}

/* What the store holds of u's suspension: ms left (<= 0: none) and the
 * key's value v (a string, or anything else when none).  Another host's
 * becomes u's copy of it (window.h: ssusp_*), this host's own is left to
 * u's own suspension; one log line when another host's begins, one when
 * it is lifted (its end: the head asks the store again at once). */
static void
copy_susp(const struct shared *sh, struct sconn *sc, struct wg_up *u, long long ms,
    const redisReply *v, int64_t now)
{
	char host[256], kind[16], reason[SHARED_REASON_MAX + 1], *p;
	const char *s = v && v->type == REDIS_REPLY_STRING ? v->str : "";
	int n = 0, was = u->ssusp_until > now, quota;

	host[0] = kind[0] = reason[0] = '\0';
	if (ms > 0 && sscanf(s, "%255[^ ] %15[^ ] %n", host, kind, &n) < 1)
		ms = 0;		/* no host: not a value any weir wrote */
	/* "HOST" alone: an older weir's, a throttle. */
	if (n > 0)
		snprintf(reason, sizeof reason, "%s", s + n);
	for (p = reason; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (strcmp(host, sh->host) == 0)
		ms = 0;		/* this host's: u's own suspension says it */
	quota = strcmp(kind, "quota") == 0;
	if (ms > 0 && !was)
		log_warnx("upstream %s suspended for %lld s%s by %s, through the shared store %s%s%s",
		    u->name, (ms + 999) / 1000, quota ? " (its quota)" : "", host, sc->spec,
		    reason[0] ? ": " : "", reason);
	if (wg_shared_suspension(u, ms, quota, host, reason, now)) {
		log_info("upstream %s: the suspension in the shared store %s was lifted", u->name,
		    sc->spec);
		u->shared_retry = 0;
	}
}

/* Write this host's history of u back in place of what the store holds
 * of it: the sends of its log, its held grants, its suspension.  why:
 * for the log line.  0 done; -1 the store is down. */
static int
restore(struct shared *sh, struct sconn *sc, const struct policy_upstream *pu,
    struct wg_up *u, struct wg_req *const *held, size_t nheld, int64_t now, const char *why)
{
	struct args k = { 0 }, v = { 0 }, a;
	redisReply *rep;
	char *val;
	uint64_t s;

	add_whole(sh, sc, pu, &k, &v);
	add_window_keys(&k, pu->name);
	arg_add(&k, "weir:{%s}:lift", pu->name);
	arg_add(&v, "%lld", (long long)sh->lease_ms);
	arg_add(&v, "%lld", (long long)susp_left(sc, u, now));
	val = susp_value(sh, u, u->susp_until > u->auth_until ? u->susp_until : u->auth_until);
	arg_add(&v, "%s", val);
	free(val);
	arg_add(&v, "%zu", u->ln);
	for (s = u->lseq; s < u->lseq + u->ln; s++) {
		const struct wg_send *e = wg_log_at(u, s);

		arg_add(&v, "%s.%s.w%llu", sh->host, sh->run, (unsigned long long)++sh->nrest);
		arg_add(&v, "%lld", (long long)(now - e->from));
		arg_add(&v, "%lld", (long long)(now - e->t));
		arg_add(&v, "%u", e->w[UNIT_MESSAGES]);
		arg_add(&v, "%u", e->w[UNIT_RECIPIENTS]);
		arg_add(&v, "%u", e->w[UNIT_CONNECTIONS]);
	}
	add_held(sh, &v, held, nheld, now);
	join(&k, &v, &a);
	rep = run(sc, S_RESTORE, &a, 10, now);
	args_free(&a);
	if (rep == NULL)
		return -1;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[1]->type != REDIS_REPLY_INTEGER) {
		freeReplyObject(rep);
		mark_down(sc, "script: unexpected reply", now);
		return -1;
	}
	stored_at(sc, rep->element[1]->integer);
	freeReplyObject(rep);
	snprintf(sc->wrote, sizeof sc->wrote, "%s", sc->ident);
	sc->lift = 0;
	sc->rebuilt_at = now;
	sc->next_renew = now + renew_ms(sh);
	log_info("upstream %s: shared store %s: wrote back this host's %zu sends and %zu grants "
	    "(%s)", pu->name, sc->spec, u->ln, nheld, why);
	return 0;
}

/* Before any grant: this gate's history proven in the store, or written
 * back now.  0 ok; -1 the store is down. */
static int
ensure_written(struct shared *sh, struct sconn *sc, const struct policy_upstream *pu,
    struct wg_up *u, struct wg_req *const *held, size_t nheld, int64_t now)
{
	if (strcmp(sc->wrote, sc->ident) == 0)
		return 0;
	return restore(sh, sc, pu, u, held, nheld, now, sc->rebuilt_at ?
	    "a store this gate's last writes are not proven to be in" :
	    "this gate's start");
}

int
shared_admit(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    struct wg_req *const *held, size_t nheld, int64_t now, int64_t *retry)
{
	struct sconn *sc = get_conn(sh, pu, now);
	struct args k = { 0 }, v = { 0 }, a = { 0 };
	redisReply *rep = NULL;
	long long code = 0, ms = 0;
	int tries, rc = 0;
	size_t i;

	*retry = now + SHARED_RETRY_MS;
	if (sc == NULL || ensure_written(sh, sc, pu, r->up, held, nheld, now) < 0)
		return 0;
	add_whole(sh, sc, pu, &k, &v);
	add_window_keys(&k, pu->name);
	arg_add(&v, "%s.%s.%llu", sh->host, sh->run, (unsigned long long)r->id);
	arg_add(&v, "%u", r->w[UNIT_MESSAGES]);
	arg_add(&v, "%u", r->w[UNIT_RECIPIENTS]);
	arg_add(&v, "%u", r->w[UNIT_CONNECTIONS]);
	arg_add(&v, "%lld", (long long)sh->lease_ms);
	arg_add(&v, "%lld", pu->max_connections);
	arg_add(&v, "%d", SHARED_POLL_MS);
	arg_add(&v, "%d", SHARED_HOLD_MS);
	arg_add(&v, "%d", SHARED_RETRY_MS);
	arg_add(&v, "%zu", pu->nwin);
	for (i = 0; i < pu->nwin; i++) {
		const struct policy_window *w = &pu->win[i];

		arg_add(&v, "%lld", w->limit);
		arg_add(&v, "%lld", w->per * 1000);
		arg_add(&v, "%d", (int)w->unit + 1);
		arg_add(&v, "%d", w->calendar);
		/* Boundaries at wall ms == align * 1000 (mod per): Redis's
		 * clock is a wall clock. */
		arg_add(&v, "%lld", w->calendar ? (w->align * 1000) % (w->per * 1000) : 0);
	}
	join(&k, &v, &a);
	for (tries = 0; tries < 2; tries++) {
		rep = run(sc, S_GRANT, &a, 9, now);
		if (rep == NULL)
			goto out;
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
		    rep->element[0]->type != REDIS_REPLY_INTEGER ||
		    rep->element[1]->type != REDIS_REPLY_INTEGER ||
		    rep->elements != (rep->element[0]->integer == 3 ? 4u : 3u)) {
			mark_down(sc, "script: unexpected reply", now);
			goto out;
		}
		code = rep->element[0]->integer;
		ms = rep->element[1]->integer;
		/* Suspended: by whom, why; granted or waiting on the windows:
		 * no suspension (the script looked). */
		if (code == 3 || code == 0 || code == 1)
			copy_susp(sh, sc, r->up, code == 3 ? ms : 0,
			    code == 3 ? rep->element[3] : NULL, now);
		freeReplyObject(rep);
		rep = NULL;
		if (code != 2)
			break;
		if (restore(sh, sc, pu, r->up, held, nheld, now,
		    "the store began a rebuild") < 0)
			goto out;
	}
	sc->rebuilding = code == 4 || code == 2;
	switch (code) {
	case 1:
		rc = 1;
		break;
	case 0:
	case 3:
	case 4:
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

/* Renew the leases of held (this host's grants of pu).  0 done; -1 the
 * store is down. */
static int
renew(struct shared *sh, struct sconn *sc, const struct policy_upstream *pu,
    struct wg_req *const *held, size_t nheld, int64_t now)
{
	struct args a = { 0 };
	redisReply *rep;

	if (nheld == 0)
		return 0;
	arg_add(&a, "weir:{%s}:held", pu->name);
	arg_add(&a, "weir:{%s}:heldw", pu->name);
	arg_add(&a, "%lld", (long long)sh->lease_ms);
	arg_add(&a, "%lld", (long long)keep_ms(sh, pu));
	add_held(sh, &a, held, nheld, now);
	rep = run(sc, S_RENEW, &a, 2, now);
	args_free(&a);
	if (rep == NULL)
		return -1;
	freeReplyObject(rep);
	return 0;
}

/* The store counted n lifts, the last by host `by`: more than when this
 * host's running suspension was stored in the same store (ident) mean a
 * RESUME somewhere lifted it, and it is lifted here (as RESUME does:
 * window.c's wg_lift).  A store that lost the key, or another store
 * (restarted, emptied, a replica promoted), never counts as one. */
static int
lifted_there(struct sconn *sc, struct wg_up *u, long long n, const char *by, int64_t now)
{
	if (own_until(u, now) == 0 || sc->lifts_at[0] == '\0' ||
	    strcmp(sc->lifts_at, sc->ident) != 0 || n <= sc->lifts)
		return 0;
	log_info("upstream %s: suspensions lifted%s (resume at %s, through the shared store %s)",
	    u->name, wg_lift(u, 0, now) ? ", and its unreachable spell ended" : "", by, sc->spec);
	sc->lifts_at[0] = '\0';
	u->shared_retry = 0;
	return 1;
}

int64_t
shared_tick(struct shared *sh, const struct policy_upstream *pu, struct wg_up *u,
    struct wg_req *const *held, size_t nheld, int64_t now, int *lifted)
{
	struct sconn *sc = find_conn(sh, pu->name);
	struct args k = { 0 }, v = { 0 }, a;
	redisReply *rep;
	long long left;
	int was_proven, whole;
	int64_t own;

	*lifted = 0;
	if (sc && now < sc->next_check)
		return sc->next_check;
	if ((sc = get_conn(sh, pu, now)) == NULL)
		return find_conn(sh, pu->name)->next_try;
	sc->next_check = now + SHARED_RETRY_MS;
	was_proven = strcmp(sc->wrote, sc->ident) == 0;
	add_whole(sh, sc, pu, &k, &v);
	arg_add(&k, "weir:{%s}:susp", pu->name);
	arg_add(&k, "weir:{%s}:lift", pu->name);
	arg_add(&v, "%d", SHARED_HOLD_MS);
	arg_add(&v, "%d", SHARED_POLL_MS);
	join(&k, &v, &a);
	rep = run(sc, S_CHECK, &a, 7, now);
	args_free(&a);
	if (rep == NULL)
		return now + SHARED_RETRY_MS;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 6 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER ||
	    rep->element[1]->type != REDIS_REPLY_INTEGER ||
	    rep->element[2]->type != REDIS_REPLY_INTEGER ||
	    rep->element[4]->type != REDIS_REPLY_INTEGER ||
	    rep->element[5]->type != REDIS_REPLY_STRING) {
		freeReplyObject(rep);
		mark_down(sc, "script: unexpected reply", now);
		return now + SHARED_RETRY_MS;
	}
	whole = rep->element[0]->integer == 0;
	if (!whole)
		sc->wrote[0] = '\0';
	sc->rebuilding = rep->element[1]->integer > 0;
	left = rep->element[2]->integer;
	/* A RESUME elsewhere first: it lifts this host's copy too. */
	*lifted = lifted_there(sc, u, rep->element[4]->integer, rep->element[5]->str, now);
	copy_susp(sh, sc, u, left, rep->element[3], now);
	freeReplyObject(rep);
	if (ensure_written(sh, sc, pu, u, held, nheld, now) < 0)
		return now + SHARED_RETRY_MS;
	/* Written back just now: the head may ask at once. */
	if (!was_proven)
		u->shared_retry = 0;
	/* The key went, or ends sooner, with no RESUME counted, in a store
	 * that holds this host's history (evicted, deleted by hand): this
	 * host's suspension is put back. */
	own = own_until(u, now);
	if (was_proven && whole && own && left < own - now - SHARED_RETRY_MS &&
	    store_susp(sh, sc, pu, u, own, now) == 0)
		log_info("upstream %s: shared store %s lost this host's suspension (no RESUME "
		    "counted there): written back", pu->name, sc->spec);
	if (sc->c && now >= sc->next_renew && renew(sh, sc, pu, held, nheld, now) == 0)
		sc->next_renew = now + renew_ms(sh);
	if (sc->c && sc->sub == NULL && sc->ps.nsent)
		subscribe(sc);
	return sc->next_check;
}

/* The subscription of sc ended: one line, and unwatched. */
static void
sub_ended(struct sconn *sc)
{
	log_info("upstream %s: the sentinels' +switch-master subscription ended: %s", sc->up,
	    sc->sub->errstr);
	unsubscribe(sc);
}

/* Is sc connected where the +switch-master message t says the master
 * now is ("... NEWIP NEWPORT"; the gate may have found it first)? */
static int
at_new_master(const struct sconn *sc, const char *t)
{
	const char *port = strrchr(t, ' '), *ip;
	char addr[ADDR_MAX];
	size_t al = strlen(sc->addr), l;

	if (port == NULL || port == t)
		return 0;
	for (ip = port - 1; ip > t && ip[-1] != ' '; ip--)
		;
	snprintf(addr, sizeof addr, " %.*s:%s", (int)(port - ip), ip, port + 1);
	l = strlen(addr);
	return al >= l && strcmp(sc->addr + al - l, addr) == 0;
}

void
shared_readable(struct shared *sh, int fd, int64_t now)
{
	struct sconn *sc;
	redisReply *m;
	void *reply;

	for (sc = sh->conns; sc; sc = sc->next)
		if (sc->sub && sc->sub->fd == fd)
			break;
	if (sc == NULL)
		return;
	if (redisBufferRead(sc->sub) != REDIS_OK) {
		sub_ended(sc);
		return;
	}
	for (;;) {
		size_t nl = strlen(sc->ps.master);
		const char *t;

		if (redisGetReplyFromReader(sc->sub, &reply) != REDIS_OK) {
			sub_ended(sc);
			return;
		}
		if ((m = reply) == NULL)
			return;	/* the rest when it comes */
		/* ["message", "+switch-master", "NAME OLDIP OLDPORT NEWIP NEWPORT"] */
		t = m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
		    m->element[2]->type == REDIS_REPLY_STRING ? m->element[2]->str : "";
		if (strncmp(t, sc->ps.master, nl) == 0 && t[nl] == ' ' &&
		    !(sc->c && at_new_master(sc, t))) {
			log_info("upstream %s: shared store %s: the sentinels switched the master "
			    "(%s)", sc->up, sc->spec, t);
			/* Found again at once, through the sentinels. */
			sconn_close(sc);
			sc->wrote[0] = '\0';
			sc->next_try = now;
			sc->next_check = now;
		}
		freeReplyObject(m);
	}
}

void
shared_ended(struct shared *sh, const struct policy_upstream *pu, struct wg_req *r,
    enum wg_outcome o, const struct wg_done *d, int64_t now, int64_t grace)
{
	struct sconn *sc = find_conn(sh, pu->name);
	struct args a = { 0 };
	redisReply *rep;
	const char *kind = "R";

	/* A report the store does not get now is written back with this
	 * gate's history when it answers again (its log has it). */
	if (sc == NULL)
		return;
	if (sc->c == NULL || strcmp(sc->wrote, sc->ident) != 0) {
		sc->wrote[0] = '\0';
		return;
	}
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
	arg_add(&a, "weir:{%s}:log", pu->name);
	arg_add(&a, "weir:{%s}:held", pu->name);
	arg_add(&a, "weir:{%s}:heldw", pu->name);
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
shared_rewrite(struct shared *sh, const char *upstream)
{
	struct sconn *sc = find_conn(sh, upstream);

	if (sc) {
		sc->wrote[0] = '\0';
		sc->next_check = 0;
	}
}

void
shared_suspend(struct shared *sh, const struct policy_upstream *pu, const struct wg_up *u,
    int64_t until, int64_t now)
{
	struct sconn *sc = find_conn(sh, pu->name);

	if (sc == NULL) {
		(void)get_conn(sh, pu, now);
		sc = find_conn(sh, pu->name);
	}
	sc->lift = until <= now;
	sc->lifts_at[0] = '\0';	/* until stored */
	if (sc->c == NULL) {
		/* Written back with the history (susp_left). */
		sc->wrote[0] = '\0';
		return;
	}
	if (store_susp(sh, sc, pu, u, until, now) == 0)
		sc->lift = 0;
}

int
shared_info(const struct shared *sh, const char *upstream, struct shared_info *si)
{
	const struct sconn *sc = find_conn(sh, upstream);

	memset(si, 0, sizeof *si);
	if (sc == NULL)
		return -1;
	si->store = sc->spec;
	si->down = sc->down;
	si->why = sc->why;
	si->addr = sc->addr[0] ? sc->addr : NULL;
	si->switches = sc->switches;
	si->switch_at = sc->switch_at;
	si->written = !sc->down && sc->c && strcmp(sc->wrote, sc->ident) == 0;
	si->rebuilding = sc->rebuilding;
	si->rebuilt_at = sc->rebuilt_at;
	return 0;
}

int
shared_counts(struct shared *sh, const struct wg_up *u, int64_t wmm, int64_t now,
    int64_t *logged, int64_t *held)
{
	struct sconn *sc = find_conn(sh, u->name);
	struct args a = { 0 };
	redisReply *rep;
	size_t i;
	int rc = -1;

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
