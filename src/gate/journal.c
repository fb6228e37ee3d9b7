/*
 * journal.c: see journal.h.  The file is read whole at start (it is kept
 * small by compaction), replayed, and replaced by a compacted copy; after
 * that it is only appended to.
 *
 * Trusts: nothing in the file that fails its CRC or the strict parse;
 * everything after the first such line is dropped, with a log line.
 * Config keys: none (the path comes from weir-gate's -j option).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gate/journal.h"
#include "lib/alloc.h"
#include "lib/bootid.h"
#include "lib/decimal.h"
#include "lib/log.h"
#include "lib/pidlock.h"

#define JOURNAL_MAX	(256u << 20)	/* refuse to read more than this */
#define COMPACT_MIN	(256 << 10)	/* never compact a file smaller than this */
#define FIELDS_MAX	9
#define RECORD_EST	96		/* bytes, an upper bound for L and G records */

uint32_t
journal_crc32(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint32_t c = 0xffffffffu;
	int k;

	while (n--) {
		c ^= *s++;
		for (k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return c ^ 0xffffffffu;
}

/* Append one record: the fields, a space, the CRC of the fields, "\n". */
static void
record(struct buf *b, const char *fmt, ...) PRINTFLIKE(2, 3);

static void
record(struct buf *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof line)
		panic("journal: record too long");
	buf_printf(b, "%s %08" PRIx32 "\n", line, journal_crc32(line, (size_t)n));
}

void
journal_grant(struct journal *j, const struct wg_req *r, int64_t mono, int64_t wall)
{
	record(&j->pending, "G %" PRIu64 " %s %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64 " %" PRId64,
	    r->id, r->up->name, r->w[UNIT_MESSAGES], r->w[UNIT_RECIPIENTS],
	    r->w[UNIT_CONNECTIONS], wall, mono);
}

void
journal_end(struct journal *j, uint64_t id, char type, int64_t mono, int64_t wall)
{
	record(&j->pending, "%c %" PRIu64 " %" PRId64 " %" PRId64, type, id, wall, mono);
}

static void
suspend_rec(struct buf *b, const struct wg_up *u, int auth, int64_t mono, int64_t wall)
{
	const char *why = auth ? u->auth_reason : u->susp_reason;
	int64_t until = auth ? u->auth_until : u->susp_until;
	char reason[200];
	size_t i;

	/* The reason came through the protocol: printable already. */
	snprintf(reason, sizeof reason, "%s", why && *why ? why : "-");
	for (i = 0; reason[i]; i++)
		if (reason[i] < 0x20 || reason[i] > 0x7e)
			reason[i] = '?';
	if (auth && u->auth_fp_known)
		record(b, "C %s %" PRId64 " %" PRId64 " %" PRId64 " %016" PRIx64 " %s", u->name,
		    until - mono + wall, until, u->auth_len, u->auth_fp, reason);
	else
		record(b, "%c %s %" PRId64 " %" PRId64 " %" PRId64 " %s", auth ? 'A' :
		    u->susp_quota ? 'Q' : 'U', u->name,
		    until - mono + wall, until, auth ? u->auth_len : u->susp_len, reason);
}

void
journal_suspend(struct journal *j, const struct wg_up *u, int auth, int64_t mono, int64_t wall)
{
	suspend_rec(&j->pending, u, auth, mono, wall);
}

void
journal_settle(struct journal *j, const struct wg_up *u, uint64_t id, const struct wg_done *d,
    int64_t mono, int64_t wall)
{
	int64_t t = d->logged ? d->t : mono;

	record(&j->pending, "Z %" PRIu64 " %s %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64
	    " %" PRId64, id, u->name, d->logged ? d->w[0] : 0, d->logged ? d->w[1] : 0,
	    d->logged ? d->w[2] : 0, t - mono + wall, t);
}

void
journal_lift(struct journal *j, const struct wg_up *u, int auth_only)
{
	record(&j->pending, "E %s %s", u->name, auth_only ? "auth" : "all");
}

/* Is j->fd still the file at j->path?  (Nothing else renames over it
 * while we hold the lock; this makes sure.) */
static int
still_at_path(struct journal *j)
{
	struct stat a, b;

	if (fstat(j->fd, &a) < 0 || stat(j->path, &b) < 0)
		return 0;
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		errno = ESTALE;
		return 0;
	}
	return 1;
}

int
journal_write(struct journal *j)
{
	if (j->pending.len > 0) {
		if (full_write(j->fd, j->pending.s, j->pending.len) < 0)
			return -1;
		j->size += (off_t)j->pending.len;
		buf_reset(&j->pending);
		j->dirty = 1;
	}
	return 0;
}

int
journal_sync(struct journal *j)
{
	if (!still_at_path(j))
		return -1;
	if (journal_write(j) < 0)
		return -1;
	if (j->dirty) {
		if (fdatasync(j->fd) < 0)
			return -1;
		j->dirty = 0;
	}
	return 0;
}

int
journal_wants_compaction(const struct journal *j, size_t live_records)
{
	/* A compacted record is under RECORD_EST bytes. */
	return j->size > COMPACT_MIN && (uint64_t)j->size > 4 * RECORD_EST * (uint64_t)live_records;
}

/* ---- replay ---- */

struct open_grant {
	uint64_t id;
	int64_t at;		/* granted at, placed */
	char up[POLICY_NAME_MAX + 1];
	uint32_t w[UNIT_COUNT];
};

struct replay {
	struct wgate *g;
	int64_t now_mono, now_wall;
	const char *boot;
	int same_boot;
	struct open_grant *open;
	size_t nopen, capopen;
	uint64_t max_id;
	size_t records;
	const struct policy *pol;	/* each upstream's grace (wg_grace) */
	int64_t grace;
};

/* A signed number: lib/decimal.h's rules, after an optional '-' (no
 * "-0", no '+', no blank, which strtoll would take). */
static int
num64(const char *s, int64_t *out)
{
	int neg = *s == '-';
	uint64_t v;

	if (dec_parse(s + neg, strlen(s + neg), (uint64_t)INT64_MAX + (uint64_t)neg, &v) < 0 ||
	    (neg && v == 0))
		return -1;
	*out = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;
	return 0;
}

/* Exactly 16 lowercase hex digits (a credentials fingerprint). */
static int
hex64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < 16; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			v = v << 4 | (uint64_t)(s[i] - '0');
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = v << 4 | (uint64_t)(s[i] - 'a' + 10);
		else
			return -1;
	}
	if (s[16] != '\0')
		return -1;
	*out = v;
	return 0;
}

static int
u32(const char *s, uint32_t *out)
{
	int64_t v;

	if (num64(s, &v) < 0 || v < 0 || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* A journal time on today's monotonic axis (see journal.h). */
static int64_t
place(const struct replay *rp, int64_t wall, int64_t mono)
{
	int64_t age;

	if (rp->same_boot)
		return mono;	/* later than now: a send that may be in flight */
	age = rp->now_wall - wall;
	if (age < 0)
		age = 0;
	if (age > rp->now_mono)
		age = rp->now_mono;	/* all this boot can prove */
	return rp->now_mono - age;
}

static struct open_grant *
find_open(struct replay *rp, uint64_t id)
{
	size_t i;

	for (i = rp->nopen; i > 0; i--)
		if (rp->open[i - 1].id == id)
			return &rp->open[i - 1];
	return NULL;
}

static void
close_open(struct replay *rp, struct open_grant *o)
{
	*o = rp->open[--rp->nopen];
}

/* Grants of an earlier run never reported: their clients may have gone
 * on sending for up to the grace period after that run ended, which was
 * at the latest `at`; each may have been accepted at any instant from its
 * grant until then. */
static void
flush_open(struct replay *rp, int64_t at)
{
	size_t i;

	for (i = 0; i < rp->nopen; i++)
		wg_replay_send(rp->g, rp->open[i].up, rp->open[i].at,
		    at + wg_grace(rp->pol, rp->open[i].up, rp->grace), rp->open[i].w,
		    rp->open[i].id);
	rp->nopen = 0;
}

/* One record without its CRC.  0 ok, -1 malformed. */
static int
replay_record(struct replay *rp, char *line)
{
	char *f[FIELDS_MAX + 1], *save = NULL, *reason = NULL;
	size_t n = 0;
	int64_t a, b, c, d, e;
	uint64_t fp;
	uint32_t w[UNIT_COUNT];
	struct open_grant *o;
	struct wg_up *u;

	if (line[0] == 'U' || line[0] == 'Q' || line[0] == 'A' || line[0] == 'C') {
		/* The reason, last, may hold spaces: cut it off first. */
		char *p = line;
		int k;

		for (k = 0; k < (line[0] == 'C' ? 6 : 5) && p; k++)
			p = strchr(p + 1, ' ');
		if (p == NULL)
			return -1;
		*p = '\0';
		reason = p + 1;
	}
	for (f[n] = strtok_r(line, " ", &save); f[n]; f[n] = strtok_r(NULL, " ", &save))
		if (++n > FIELDS_MAX)
			return -1;
	if (n == 0 || strlen(f[0]) != 1)
		return -1;
	switch (f[0][0]) {
	case 'B':
		if (n != 4 || num64(f[2], &a) < 0 || num64(f[3], &b) < 0)
			return -1;
		/* The previous run ended before this one began. */
		flush_open(rp, place(rp, a, b));
		rp->same_boot = strcmp(f[1], rp->boot) == 0 && strcmp(f[1], "unknown") != 0;
		return 0;
	case 'G':
		if (n != 8 || num64(f[1], &a) < 0 || a <= 0 || !policy_valid_name(f[2]) ||
		    u32(f[3], &w[0]) < 0 || u32(f[4], &w[1]) < 0 || u32(f[5], &w[2]) < 0 ||
		    num64(f[6], &b) < 0 || num64(f[7], &c) < 0)
			return -1;
		if (rp->nopen == rp->capopen) {
			rp->capopen = rp->capopen ? rp->capopen * 2 : 64;
			rp->open = xrealloc(rp->open, rp->capopen * sizeof *rp->open);
		}
		o = &rp->open[rp->nopen++];
		o->id = (uint64_t)a;
		o->at = place(rp, b, c);
		snprintf(o->up, sizeof o->up, "%s", f[2]);
		memcpy(o->w, w, sizeof w);
		if ((uint64_t)a > rp->max_id)
			rp->max_id = (uint64_t)a;
		return 0;
	case 'S':
	case 'R':
	case 'X':
	case 'N':
		if (n != 4 || num64(f[1], &a) < 0 || num64(f[2], &b) < 0 || num64(f[3], &c) < 0)
			return -1;
		o = find_open(rp, (uint64_t)a);
		if (o == NULL)
			return 0;	/* its grant was compacted away: harmless */
		b = place(rp, b, c);
		if (f[0][0] == 'S')
			wg_replay_send(rp->g, o->up, b, b, o->w, 0);
		else if (f[0][0] == 'X')
			wg_replay_send(rp->g, o->up, o->at, b, o->w, o->id);
		else if (f[0][0] == 'N' && o->w[UNIT_CONNECTIONS] > 0) {
			memset(w, 0, sizeof w);
			w[UNIT_CONNECTIONS] = o->w[UNIT_CONNECTIONS];
			wg_replay_send(rp->g, o->up, b, b, w, 0);
		}
		close_open(rp, o);
		return 0;
	case 'L':
		if (n != 7 || !policy_valid_name(f[1]) || u32(f[2], &w[0]) < 0 || u32(f[3], &w[1]) < 0 ||
		    u32(f[4], &w[2]) < 0 || num64(f[5], &b) < 0 || num64(f[6], &c) < 0)
			return -1;
		b = place(rp, b, c);
		wg_replay_send(rp->g, f[1], b, b, w, 0);
		return 0;
	case 'P':
		if (n != 9 || !policy_valid_name(f[1]) || u32(f[2], &w[0]) < 0 || u32(f[3], &w[1]) < 0 ||
		    u32(f[4], &w[2]) < 0 || num64(f[5], &b) < 0 || num64(f[6], &c) < 0 ||
		    num64(f[7], &d) < 0 || num64(f[8], &e) < 0)
			return -1;
		wg_replay_send(rp->g, f[1], place(rp, b, c), place(rp, d, e), w, 0);
		return 0;
	case 'Z':
		if (n != 8 || num64(f[1], &a) < 0 || a <= 0 || !policy_valid_name(f[2]) ||
		    u32(f[3], &w[0]) < 0 || u32(f[4], &w[1]) < 0 || u32(f[5], &w[2]) < 0 ||
		    num64(f[6], &b) < 0 || num64(f[7], &c) < 0)
			return -1;
		wg_replay_settle(rp->g, f[2], (uint64_t)a, place(rp, b, c), w);
		return 0;
	case 'I':
		if (n != 2 || num64(f[1], &a) < 0 || a <= 0)
			return -1;
		if ((uint64_t)a - 1 > rp->max_id)
			rp->max_id = (uint64_t)a - 1;
		return 0;
	case 'U':
	case 'Q':
	case 'A':
		if (n != 5 || !policy_valid_name(f[1]) || num64(f[2], &a) < 0 || num64(f[3], &b) < 0 ||
		    num64(f[4], &c) < 0 || c < 0 || !reason || *reason == '\0')
			return -1;
		if (rp->same_boot)
			wg_replay_suspend(rp->g, f[1], f[0][0] == 'A', f[0][0] == 'Q', b, c,
			    reason, NULL);
		else	/* another boot: what the wall clock says is left */
			wg_replay_suspend(rp->g, f[1], f[0][0] == 'A', f[0][0] == 'Q',
			    rp->now_mono + (a - rp->now_wall), c, reason, NULL);
		return 0;
	case 'C':
		if (n != 6 || !policy_valid_name(f[1]) || num64(f[2], &a) < 0 || num64(f[3], &b) < 0 ||
		    num64(f[4], &c) < 0 || c < 0 || hex64(f[5], &fp) < 0 || !reason || *reason == '\0')
			return -1;
		wg_replay_suspend(rp->g, f[1], 1, 0, rp->same_boot ? b : rp->now_mono + (a - rp->now_wall),
		    c, reason, &fp);
		return 0;
	case 'E':
		if (n != 3 || !policy_valid_name(f[1]) ||
		    (strcmp(f[2], "auth") != 0 && strcmp(f[2], "all") != 0))
			return -1;
		if ((u = wg_find(rp->g, f[1])) != NULL)
			wg_lift(u, strcmp(f[2], "auth") == 0, rp->now_mono);
		return 0;
	}
	return -1;
}

/* Replay the bytes; returns how many were good. */
static size_t
replay(struct replay *rp, struct buf *data)
{
	size_t off = 0;

	while (off < data->len) {
		char *line = data->s + off, *nl = memchr(line, '\n', data->len - off), *sp;
		size_t len;
		uint32_t crc;
		char want[9];

		if (nl == NULL)
			break;	/* torn: no newline */
		len = (size_t)(nl - line);
		*nl = '\0';
		if (memchr(line, '\0', len) != NULL)
			break;
		sp = strrchr(line, ' ');
		if (sp == NULL || strlen(sp + 1) != 8)
			break;
		crc = journal_crc32(line, (size_t)(sp - line));
		snprintf(want, sizeof want, "%08" PRIx32, crc);
		if (strcmp(want, sp + 1) != 0)
			break;
		*sp = '\0';
		if (replay_record(rp, line) < 0)
			break;
		rp->records++;
		off += len + 1;
	}
	return off;
}

/* Write content to path.tmp, make it durable, rename it over the
 * journal and sync the folder.  0 done; -1 failed before the rename (the
 * old file is still the journal, and still ours); -2 renamed but the
 * folder sync failed: the new file is the journal (we append only to
 * it from now on) but its name may not be durable. */
static int
write_new(struct journal *j, const struct buf *content)
{
	char *tmp = xasprintf("%s.tmp", j->path), *dcopy = xstrdup(j->path);
	int fd, rc = -1, saved;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0600);
	if (fd < 0)
		goto out;
	if (full_write(fd, content->s, content->len) < 0 || fsync(fd) < 0 ||
	    rename(tmp, j->path) < 0) {
		saved = errno;
		close(fd);
		unlink(tmp);
		errno = saved;
		goto out;
	}
	/* From here the file at the path is the new one: never append to
	 * the old descriptor again. */
	if (j->fd >= 0 && close(j->fd) < 0)
		log_warn("journal: close %s", j->path);
	j->fd = fd;
	j->size = (off_t)content->len;
	j->dirty = 0;
	rc = fsync_dir(AT_FDCWD, dirname(dcopy)) < 0 ? -2 : 0;
out:
	free(tmp);
	free(dcopy);
	return rc;
}

int
journal_compact_begin(struct journal *j, struct wgate *g, int64_t mono, int64_t wall)
{
	struct wg_up *u;
	uint64_t s;

	buf_reset(&j->compact);
	record(&j->compact, "B %s %" PRId64 " %" PRId64, j->boot, wall, mono);
	/* Grant ids are never given twice, even once no record names them. */
	record(&j->compact, "I %" PRIu64, g->next_id);
	for (u = g->ups; u; u = u->next) {
		for (s = u->lseq; s < u->lseq + u->ln; s++) {
			const struct wg_send *e = wg_log_at(u, s);

			if (e->id != 0) {
				/* An unknown outcome that may yet be settled: its
				 * grant and its end, as they came. */
				record(&j->compact, "G %" PRIu64 " %s %" PRIu32 " %" PRIu32 " %" PRIu32
				    " %" PRId64 " %" PRId64, e->id, u->name, e->w[0], e->w[1], e->w[2],
				    e->from - mono + wall, e->from);
				record(&j->compact, "X %" PRIu64 " %" PRId64 " %" PRId64, e->id,
				    e->t - mono + wall, e->t);
			} else if (e->from == e->t)
				record(&j->compact, "L %s %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64
				    " %" PRId64, u->name, e->w[0], e->w[1], e->w[2],
				    e->t - mono + wall, e->t);
			else
				record(&j->compact, "P %s %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64
				    " %" PRId64 " %" PRId64 " %" PRId64, u->name, e->w[0], e->w[1],
				    e->w[2], e->from - mono + wall, e->from, e->t - mono + wall, e->t);
		}
		if (u->susp_until > mono)
			suspend_rec(&j->compact, u, 0, mono, wall);
		if (u->auth_until > mono)
			suspend_rec(&j->compact, u, 1, mono, wall);
	}
	return 0;
}

void
journal_compact_grant(struct journal *j, const struct wg_req *r, int64_t mono, int64_t wall)
{
	record(&j->compact, "G %" PRIu64 " %s %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64
	    " %" PRId64, r->id, r->up->name, r->w[UNIT_MESSAGES], r->w[UNIT_RECIPIENTS],
	    r->w[UNIT_CONNECTIONS], r->since - mono + wall, r->since);
}

int
journal_compact_commit(struct journal *j)
{
	int rc = write_new(j, &j->compact);

	if (rc == -1)
		return -1;
	/* Renamed: what was pending is part of the new file already. */
	buf_reset(&j->pending);
	buf_free(&j->compact);
	return rc < 0 ? -1 : 0;
}

int
journal_open(struct journal *j, const char *path, struct wgate *g, const struct policy *pol,
    int64_t now_mono, int64_t now_wall, int64_t grace_ms)
{
	struct buf data = BUF_INIT;
	struct replay rp;
	size_t good;
	char *lock;
	long holder;
	int r;

	memset(j, 0, sizeof *j);
	j->fd = -1;
	j->path = xstrdup(path);
	lock = xasprintf("%s.lock", path);
	j->lockfd = pidlock_take(lock, 0, &holder);
	if (j->lockfd < 0) {
		if (errno == EWOULDBLOCK && holder > 0)
			log_warnx("journal %s is in use by another weir-gate (pid %ld): not starting",
			    path, holder);
		else if (errno == EWOULDBLOCK)
			log_warnx("journal %s is in use by another weir-gate: not starting", path);
		else
			log_warn("journal %s: lock %s", path, lock);
		free(lock);
		goto fail_nodata;
	}
	free(lock);
	boot_id(j->boot, sizeof j->boot);
	memset(&rp, 0, sizeof rp);
	rp.g = g;
	rp.now_mono = now_mono;
	rp.now_wall = now_wall;
	rp.boot = j->boot;
	rp.pol = pol;
	rp.grace = grace_ms;
	r = read_file_at(AT_FDCWD, path, &data, JOURNAL_MAX);
	if (r == -2) {
		log_warnx("journal %s: larger than %u bytes", path, JOURNAL_MAX);
		goto fail;
	}
	if (r < 0 && errno != ENOENT) {
		log_warn("journal %s", path);
		goto fail;
	}
	good = replay(&rp, &data);
	if (good < data.len)
		log_warnx("journal %s: dropped %zu bytes of torn or corrupt records at offset %zu "
		    "(after %zu good records)", path, data.len - good, good, rp.records);
	/* What never got a report: sent by now plus the grace period. */
	flush_open(&rp, now_mono);
	if (rp.max_id >= g->next_id)
		g->next_id = rp.max_id + 1;
	free(rp.open);
	buf_free(&data);
	if (rp.records)
		log_info("journal %s: replayed %zu records", path, rp.records);
	if (journal_compact_begin(j, g, now_mono, now_wall) < 0 || journal_compact_commit(j) < 0) {
		log_warn("journal %s: cannot write", path);
		goto fail_nodata;
	}
	return 0;
fail:
	buf_free(&data);
fail_nodata:
	if (j->lockfd >= 0 && close(j->lockfd) < 0)
		log_warn("journal: close lock");
	j->lockfd = -1;
	free(j->path);
	j->path = NULL;
	return -1;
}

void
journal_close(struct journal *j)
{
	if (j->fd >= 0 && close(j->fd) < 0)
		log_warn("journal: close");
	j->fd = -1;
	if (j->lockfd >= 0 && close(j->lockfd) < 0)
		log_warn("journal: close lock");
	j->lockfd = -1;
	free(j->path);
	j->path = NULL;
	buf_free(&j->pending);
	buf_free(&j->compact);
}
