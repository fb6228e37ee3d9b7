/*
 * shared.c: an upstream's windows in Redis, shared by several weir-gates
 * (see shared.h for the keys and weir-gate(8) for what it promises).
 * Every decision is one Lua script run atomically by Redis at Redis's
 * own clock; this file only builds the arguments and reads the answers.
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

#include "gate/shared.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/secretfile.h"

/* KEYS: log held heldw epoch hostmark hold susp.  ARGV: id m r c lease
 * maxconn poll holdms keep nwin, then per window: limit per unit(1..3)
 * calendar phase.  Returns {code, ms, now}: 1 granted; 0 wait ms; 2 write
 * this host's history back first; 3 suspended for ms. */
static const char grant_lua[] =
"local tm = redis.call('TIME')\n"
"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
"local keep = tonumber(ARGV[9])\n"
"local pat = '^(%-?%d+) (%d+) (%d+) (%d+)$'\n"
"if redis.call('EXISTS', KEYS[4]) == 0 then\n"
"  redis.call('SET', KEYS[4], now, 'PX', keep)\n"
"  redis.call('SET', KEYS[6], 1, 'PX', ARGV[8])\n"
"  return {2, 0, now}\n"
"end\n"
"if redis.call('EXISTS', KEYS[5]) == 0 then return {2, 0, now} end\n"
"local h = redis.call('PTTL', KEYS[6])\n"
"if h > 0 then return {0, h, now} end\n"
"local s = redis.call('PTTL', KEYS[7])\n"
"if s > 0 then return {3, s, now} end\n"
"local w = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])}\n"
"local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES')\n"
"for i = 1, #old, 2 do\n"
"  local v = redis.call('HGET', KEYS[3], old[i])\n"
"  if v then\n"
"    local g, a, b, c = string.match(v, pat)\n"
"    redis.call('ZADD', KEYS[1], old[i + 1], old[i] .. ' ' .. g .. ' ' .. a .. ' ' .. b .. ' ' .. c)\n"
"    redis.call('HDEL', KEYS[3], old[i])\n"
"  end\n"
"  redis.call('ZREM', KEYS[2], old[i])\n"
"end\n"
"local held = {0, 0, 0}\n"
"local ids = redis.call('ZRANGE', KEYS[2], 0, -1)\n"
"for _, id in ipairs(ids) do\n"
"  local v = redis.call('HGET', KEYS[3], id)\n"
"  if v then\n"
"    local g, a, b, c = string.match(v, pat)\n"
"    held[1] = held[1] + tonumber(a)\n"
"    held[2] = held[2] + tonumber(b)\n"
"    held[3] = held[3] + tonumber(c)\n"
"  end\n"
"end\n"
"local poll = tonumber(ARGV[7])\n"
"local maxc = tonumber(ARGV[6])\n"
"if maxc > 0 and w[3] > 0 and held[3] + w[3] > maxc then return {0, poll, now} end\n"
"local nwin = tonumber(ARGV[10])\n"
"local maxper = 0\n"
"for i = 0, nwin - 1 do\n"
"  local p = tonumber(ARGV[12 + 5 * i])\n"
"  if p > maxper then maxper = p end\n"
"end\n"
"redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - maxper)\n"
"local lg = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - maxper), '+inf', 'WITHSCORES')\n"
"local ent = {}\n"
"for i = 1, #lg, 2 do\n"
"  local id, f, a, b, c = string.match(lg[i], '^(%S+) (%-?%d+) (%d+) (%d+) (%d+)$')\n"
"  ent[#ent + 1] = {tonumber(lg[i + 1]), tonumber(a), tonumber(b), tonumber(c)}\n"
"end\n"
"local wait = 0\n"
"for i = 0, nwin - 1 do\n"
"  local lim = tonumber(ARGV[11 + 5 * i])\n"
"  local per = tonumber(ARGV[12 + 5 * i])\n"
"  local u = tonumber(ARGV[13 + 5 * i])\n"
"  local cal = tonumber(ARGV[14 + 5 * i])\n"
"  local ph = tonumber(ARGV[15 + 5 * i])\n"
"  if w[u] > 0 then\n"
"    local need = held[u] + w[u]\n"
"    if need > lim then return {0, poll, now} end\n"
"    local start = now - per + 1\n"
"    if cal == 1 then start = now - ((now - ph) % per) end\n"
"    local sum = 0\n"
"    for _, e in ipairs(ent) do\n"
"      if e[1] >= start then sum = sum + e[u + 1] end\n"
"    end\n"
"    local excess = sum + need - lim\n"
"    if excess > 0 then\n"
"      local acc = 0\n"
"      for _, e in ipairs(ent) do\n"
"        if e[1] >= start then\n"
"          acc = acc + e[u + 1]\n"
"          if acc >= excess then\n"
"            local at = e[1] + per\n"
"            if cal == 1 then at = e[1] - ((e[1] - ph) % per) + per end\n"
"            if at - now > wait then wait = at - now end\n"
"            break\n"
"          end\n"
"        end\n"
"      end\n"
"    end\n"
"  end\n"
"end\n"
"if wait > 0 then return {0, wait, now} end\n"
"redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])\n"
"redis.call('HSET', KEYS[3], ARGV[1], now .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])\n"
"for k = 1, 5 do redis.call('PEXPIRE', KEYS[k], keep) end\n"
"return {1, 0, now}\n";

/* KEYS: log held heldw.  ARGV: id kind(S X N T R) delta grace keep m r c
 * age.  Logs the send the report says, at Redis time rounded up to the
 * millisecond (as the local gate does: a send reported at 1000.3 leaves a
 * window of T no sooner than 1000.3 + T, where grants look at the time
 * rounded down); returns the time rounded down. */
static const char report_lua[] =
"local tm = redis.call('TIME')\n"
"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
"local nowc = tonumber(tm[1]) * 1000 + math.ceil(tonumber(tm[2]) / 1000)\n"
"local v = redis.call('HGET', KEYS[3], ARGV[1])\n"
"redis.call('ZREM', KEYS[2], ARGV[1])\n"
"redis.call('HDEL', KEYS[3], ARGV[1])\n"
"local kind = ARGV[2]\n"
"if kind == 'R' then return now end\n"
"local g = now - tonumber(ARGV[9])\n"
"if v then g = tonumber(string.match(v, '^(%-?%d+)')) end\n"
"local m, r, c = ARGV[6], ARGV[7], ARGV[8]\n"
"local from, at = nowc, nowc\n"
"if kind == 'S' then\n"
"  at = nowc - tonumber(ARGV[3])\n"
"  if at < g then at = g end\n"
"  if at > nowc then at = nowc end\n"
"  from = at\n"
"elseif kind == 'X' then\n"
"  from = g\n"
"  at = nowc + tonumber(ARGV[4])\n"
"elseif kind == 'N' then\n"
"  m = '0'\n"
"  r = '0'\n"
"end\n"
"redis.call('ZADD', KEYS[1], at, ARGV[1] .. ' ' .. from .. ' ' .. m .. ' ' .. r .. ' ' .. c)\n"
"redis.call('PEXPIRE', KEYS[1], ARGV[5])\n"
"return now\n";

/* KEYS: log held heldw hostmark.  ARGV: keep lease nlog, then per entry:
 * id agefrom aget m r c; then nheld, per grant: id age m r c.  Writes this
 * host's history back (ages: ms before now, now rounded up as a report's)
 * and marks it done. */
static const char restore_lua[] =
"local tm = redis.call('TIME')\n"
"local now = tonumber(tm[1]) * 1000 + math.ceil(tonumber(tm[2]) / 1000)\n"
"local n = tonumber(ARGV[3])\n"
"local i = 4\n"
"for k = 1, n do\n"
"  redis.call('ZADD', KEYS[1], now - tonumber(ARGV[i + 2]), ARGV[i] .. ' ' ..\n"
"    (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4] .. ' ' .. ARGV[i + 5])\n"
"  i = i + 6\n"
"end\n"
"local nh = tonumber(ARGV[i])\n"
"i = i + 1\n"
"for k = 1, nh do\n"
"  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[i])\n"
"  redis.call('HSET', KEYS[3], ARGV[i], (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 2] ..\n"
"    ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4])\n"
"  i = i + 5\n"
"end\n"
"redis.call('SET', KEYS[4], 1, 'PX', ARGV[1])\n"
"for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ARGV[1]) end\n"
"return now\n";

/* KEYS: epoch hostmark hold.  ARGV: keep holdms.  1: this host must
 * write its history back (Redis came back empty: no grant to anyone for
 * holdms meanwhile); 0: nothing to do. */
static const char check_lua[] =
"if redis.call('EXISTS', KEYS[1]) == 0 then\n"
"  local tm = redis.call('TIME')\n"
"  redis.call('SET', KEYS[1], tm[1], 'PX', ARGV[1])\n"
"  redis.call('SET', KEYS[3], 1, 'PX', ARGV[2])\n"
"  return 1\n"
"end\n"
"if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end\n"
"redis.call('PEXPIRE', KEYS[1], ARGV[1])\n"
"return 0\n";

/* KEYS: held heldw.  ARGV: lease keep hostprefix runprefix adopt n, then
 * per grant: id age m r c.  Renews this run's held grants (put back if
 * their lease ended meanwhile: counted twice, never less); with adopt,
 * an earlier run's grants of this host get a lease from now. */
static const char renew_lua[] =
"local tm = redis.call('TIME')\n"
"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
"local lease = tonumber(ARGV[1])\n"
"if ARGV[5] == '1' then\n"
"  local hp, rp = ARGV[3], ARGV[4]\n"
"  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do\n"
"    if id:sub(1, #hp) == hp and id:sub(1, #rp) ~= rp then\n"
"      redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, id)\n"
"    end\n"
"  end\n"
"end\n"
"local i = 7\n"
"for k = 1, tonumber(ARGV[6]) do\n"
"  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])\n"
"  redis.call('HSET', KEYS[2], ARGV[i], (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 2] ..\n"
"    ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4])\n"
"  i = i + 5\n"
"end\n"
"for k = 1, 2 do redis.call('PEXPIRE', KEYS[k], ARGV[2]) end\n"
"return now\n";

/* KEYS: log held heldw.  ARGV: nwin, then per window: per unit(1..3)
 * calendar phase.  Returns per window {logged, held} as the grant script
 * counts them now (a held grant whose lease ended: logged at its end). */
static const char count_lua[] =
"local tm = redis.call('TIME')\n"
"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
"local pat = '^(%-?%d+) (%d+) (%d+) (%d+)$'\n"
"local held = {0, 0, 0}\n"
"local ent = {}\n"
"local hs = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')\n"
"for i = 1, #hs, 2 do\n"
"  local v = redis.call('HGET', KEYS[3], hs[i])\n"
"  if v then\n"
"    local g, a, b, c = string.match(v, pat)\n"
"    local w = {tonumber(a), tonumber(b), tonumber(c)}\n"
"    if tonumber(hs[i + 1]) > now then\n"
"      for k = 1, 3 do held[k] = held[k] + w[k] end\n"
"    else\n"
"      ent[#ent + 1] = {tonumber(hs[i + 1]), w[1], w[2], w[3]}\n"
"    end\n"
"  end\n"
"end\n"
"local lg = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')\n"
"for i = 1, #lg, 2 do\n"
"  local id, f, a, b, c = string.match(lg[i], '^(%S+) (%-?%d+) (%d+) (%d+) (%d+)$')\n"
"  if a then ent[#ent + 1] = {tonumber(lg[i + 1]), tonumber(a), tonumber(b), tonumber(c)} end\n"
"end\n"
"local out = {}\n"
"for i = 0, tonumber(ARGV[1]) - 1 do\n"
"  local per = tonumber(ARGV[2 + 4 * i])\n"
"  local u = tonumber(ARGV[3 + 4 * i])\n"
"  local start = now - per + 1\n"
"  if tonumber(ARGV[4 + 4 * i]) == 1 then\n"
"    start = now - ((now - tonumber(ARGV[5 + 4 * i])) % per)\n"
"  end\n"
"  local sum = 0\n"
"  for _, e in ipairs(ent) do\n"
"    if e[1] >= start then sum = sum + e[u + 1] end\n"
"  end\n"
"  out[#out + 1] = sum\n"
"  out[#out + 1] = held[u]\n"
"end\n"
"return out\n";

enum { S_GRANT, S_REPORT, S_RESTORE, S_CHECK, S_RENEW, S_VIEW, S_COUNT };

static const char *const scripts[S_COUNT] = { grant_lua, report_lua, restore_lua, check_lua,
	renew_lua, count_lua };

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
conn_close(struct sconn *sc)
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
		conn_close(sc);
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
	conn_close(sc);
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
		conn_close(sc);
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
		kind = "N";
		break;
	case WG_THROTTLED:
		kind = "T";
		break;
	case WG_REFUND:
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
