/*
 * crashreplay.c: crash-consistency beyond kill -9.  A killed process
 * leaves the page cache behind; a power cut does not.  This harness runs
 * a representative workload (workload.c) with every file-changing call
 * of weir-queue, weir-queued, sendmail, weir-send and weir-gate recorded
 * (recorder.c; weir-smtpd writes through weir-queued, or weir-queue),
 * then, for every prefix of the log (every call boundary), rebuilds what
 * a power cut there could leave on disk, runs weir's recovery on it and
 * checks weir's promises.
 *
 * What survives a power cut (POSIX, nothing ext4-specific assumed):
 *   - a file's bytes (write, pwrite, ftruncate) once the file was
 *     fsync'ed or fdatasync'ed;
 *   - a name (create, link, unlink, rename, mkdir, mknod) once its
 *     folder was fsync'ed (both folders for a rename across folders);
 *   - of what was not made durable, any subset: each pending operation
 *     may or may not have reached the disk, in any combination (applied
 *     in log order);
 *   - a pending write may also have reached the disk in part, as ext4
 *     and XFS leave it: the file's new size with zeros where it grew
 *     ("zero-filled", the size went to the journal before the data) or
 *     its first 512-byte sectors only ("torn").
 * "Bounded" mode (make check) tries, per prefix, no pending operation,
 * all of them, each one alone and each one left out, all of them with
 * one write zero-filled or torn, and every name with every write
 * zero-filled; "exhaustive" mode
 * (make crashtest) also tries every subset while there are at most -b
 * (default 10) pending operations; beyond, every subset of the newest
 * -b ones with the older ones none, all or a random half, and -s (256)
 * random subsets of all.  States already checked under the same
 * promises are not checked again.
 *
 * Each state is written into a scratch folder (message ids renamed to
 * the new inode numbers, as a queue requires), then recovered as
 * weir-send starts: cleanup_pass() (with the clock 37 hours on, so that
 * every leftover is old enough to go), preprocess() of every todo/
 * entry; then qcheck_run(), which is `weir queue-check`; and weir-gate's
 * journal_open() replays the journal.  Checks:
 *   lost      a message whose injection exited 0 before the cut, and
 *             not every recipient of which the deliverer confirmed, is
 *             queued (preprocessed), its body and envelope intact;
 *   D-mark    no recipient is marked done that the deliverer had not
 *             confirmed (delivered, or refused for good) before the cut;
 *   bounce    a recipient refused for good before the cut is still to
 *             be tried, or its bounce is somewhere: a note in bounce/N,
 *             a queued bounce, or one the deliverer took;
 *   qcheck    queue-check finds no problem;
 *   journal   the replayed journal counts at least the messages and
 *             recipients of every grant weir-gate answered before the
 *             cut (less those refunded);
 *   corrupt   every message weir-send would deliver (todo/ entry, or a
 *             remote/ file with a recipient to do), acknowledged or not,
 *             has the mess/ file its writer wrote by the cut, byte for
 *             byte: an empty, torn or zero-filled message never becomes
 *             deliverable;
 *   deliver   (-d) the real weir-gate, weir-send and weir-remote,
 *             started on the state after `weir flush`, deliver to the
 *             stand-in upstream tests/upstream/upstream.py (aiosmtpd on a
 *             loopback port the kernel picks; "bad" recipients get 550,
 *             "slow" ones 451) every recipient of an acknowledged message
 *             not confirmed before the cut (but "bad" and "slow" ones)
 *             within 30 s; every message that arrives is a bounce (null
 *             sender) or has the body that was injected, byte for byte
 *             as the upstream stored it (CRLF, dot-stuffing undone; the
 *             header fields weir adds aside), and nothing of an injection
 *             killed halfway arrives; then, weir-send's cleanup run with
 *             the clock 37 hours on, `weir queue-check` is sound.
 *
 * The workload (workload.c) injects with weir-queue, sendmail and over
 * SMTP through the real weir-smtpd (messages of 115 and 120 KB among
 * them), kills a weir-queue halfway and hangs up an SMTP client in the
 * middle of DATA, and restarts weir-gate in the middle of the deliveries
 * and at the end (each start compacts its journal).  The recorded run
 * delivers through a scripted qmail-remote stand-in: its confirmations
 * ("Y" records) must be in the ordered log before weir-send hears them,
 * which a real upstream cannot write; -d uses the real weir-remote.
 *
 * Usage: crashreplay [-x] [-1] [-d states -U upstream.py] [-b bound] [-s samples] [-k] [-v]
 *                    [-r] [-S skip] -B bindir -R recorder.so
 *   -x  exhaustive;  -1  stop at the first failing state;  -d n  deliver
 *   n states (spread over the log, each passing the checks) with the real
 *   weir-gate, weir-send and weir-remote to the upstream script -U
 *   (check "deliver", above);  -k  keep the scratch folder;  -v  show
 *   every failing state (else the first 40);  -r  hold the first
 *   weir-queue between its todo/ link and its fsync of todo/ (the
 *   recorder's WEIR_REC_PAUSE) while weir-send starts and takes the
 *   entry (`make crash-race`);
 *   -S prog:path[:file|:dir[:after]]  WEIR_REC_SKIP (recorder.c: that
 *   program leaves out, or moves after its next fsync of the folder
 *   after..., its fsyncs of path...: a deliberately broken weir, to show
 *   that the checks can fail; `make crash-selftest` runs three such
 *   mutants and requires each to fail).  Exit 0 when every state
 *   passed, 1 on failures, 2 when the harness itself could not run.
 *
 * Trusts: the log and folders it made.  Test code only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gate/journal.h"
#include "gate/window.h"
#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "mail/qcheck.h"
#include "mail/queue.h"
#include "send/cleanup.h"
#include "send/preproc.h"
#include "crash.h"


/* ---- the log ---- */

struct rec {
	long pid;
	char kind;
	unsigned long long ino, off, len;
	int created, trunc;
	char *path, *path2;
	const char *data;	/* W: len bytes in the log buffer */
	/* promises */
	char *k, *sender, *rcpts, *code;
	uint64_t hash;
	uint64_t grant;
};

static struct rec *recs;
static size_t nrecs;
static struct buf logbuf;

static char *
field(char **p)
{
	char *s = *p, *e;

	if (s == NULL || *s == '\0')
		return NULL;
	e = strchr(s, ' ');
	if (e) {
		*e = '\0';
		*p = e + 1;
	} else {
		*p = s + strlen(s);
	}
	return s;
}

static void
parse_log(const char *path)
{
	size_t off = 0, cap = 0;

	if (read_file_at(AT_FDCWD, path, &logbuf, 1u << 30) != 0)
		cr_die("read %s: %s", path, strerror(errno));
	while (off < logbuf.len) {
		char *line = logbuf.s + off, *nl = memchr(line, '\n', logbuf.len - off), *p, *f;
		struct rec r;

		if (nl == NULL)
			cr_die("%s: torn record at byte %zu", path, off);
		*nl = '\0';
		off = (size_t)(nl + 1 - logbuf.s);
		memset(&r, 0, sizeof r);
		p = line;
		f = field(&p);
		r.pid = f ? strtol(f, NULL, 10) : 0;
		f = field(&p);
		if (f == NULL || strlen(f) != 1)
			cr_die("%s: bad record \"%s\"", path, line);
		r.kind = f[0];
		switch (r.kind) {
		case 'O':
			r.ino = strtoull(field(&p), NULL, 10);
			r.path = field(&p);
			r.created = atoi(field(&p));
			r.trunc = atoi(field(&p));
			break;
		case 'W':
			r.ino = strtoull(field(&p), NULL, 10);
			r.off = strtoull(field(&p), NULL, 10);
			r.len = strtoull(field(&p), NULL, 10);
			if (off + r.len + 1 > logbuf.len || logbuf.s[off + r.len] != '\n')
				cr_die("%s: short data record", path);
			r.data = logbuf.s + off;
			off += r.len + 1;
			break;
		case 'T':
			r.ino = strtoull(field(&p), NULL, 10);
			r.len = strtoull(field(&p), NULL, 10);
			break;
		case 'S': case 'C':
			r.ino = strtoull(field(&p), NULL, 10);
			break;
		case 'D': case 'U': case 'M': case 'F':
			r.path = field(&p);
			break;
		case 'L': case 'R':
			r.ino = strtoull(field(&p), NULL, 10);
			r.path = field(&p);
			r.path2 = field(&p);
			break;
		case 'G':
			r.grant = strtoull(field(&p), NULL, 10);
			break;
		case 'Q':	/* Q <k> <bodyhash> <sender> <rcpt,rcpt...> */
			r.k = field(&p);
			r.hash = strtoull(field(&p), NULL, 16);
			r.sender = field(&p);
			r.rcpts = field(&p);
			break;
		case 'Y':	/* Y <fullhash> <k> <rcpt> <r|h> */
			r.hash = strtoull(field(&p), NULL, 16);
			r.k = field(&p);
			r.rcpts = field(&p);
			r.code = field(&p);
			break;
		default:
			cr_die("%s: unknown record kind %c", path, r.kind);
		}
		if ((r.kind == 'O' || r.kind == 'D' || r.kind == 'U' || r.kind == 'M' || r.kind == 'F' ||
		    r.kind == 'L' || r.kind == 'R') && r.path == NULL)
			cr_die("%s: record %zu without a path", path, nrecs + 1);
		if ((r.kind == 'L' || r.kind == 'R') && r.path2 == NULL)
			cr_die("%s: record %zu without a second path", path, nrecs + 1);
		if ((r.kind == 'Q' && r.rcpts == NULL) || (r.kind == 'Y' && r.code == NULL))
			cr_die("%s: short promise record %zu", path, nrecs + 1);
		if (nrecs == cap) {
			cap = cap ? cap * 2 : 1024;
			recs = xrealloc(recs, cap * sizeof *recs);
		}
		recs[nrecs++] = r;
	}
}

/* ---- the model: inodes, names, operations ---- */

enum nkind { N_FILE, N_DIR, N_FIFO };

struct inode {
	unsigned long long real;	/* the inode number it had */
	struct buf dur;			/* its durable bytes */
};

struct ent {
	char *path;
	enum nkind kind;
	int ino;			/* N_FILE: index in inodes */
};

struct ns {
	struct ent *v;
	size_t n, cap;
};

enum opk { OP_W, OP_T, OP_ADD, OP_DEL, OP_REN };

struct op {
	enum opk k;
	size_t rec;		/* index in recs */
	int ino;		/* data ops */
	char *dir;		/* name ops: the folder whose fsync makes it durable */
	char *path, *path2;
	enum nkind nk;
	int nino;
};

static struct inode *inodes;
static size_t ninodes, capinodes;
static struct ns dur, vol;	/* durable names; names as the programs saw them */
static struct op *ops;
static size_t nops, capops;
static size_t *pend;		/* pending ops, in log order */
static size_t npend, cappend;

static int
new_inode(unsigned long long real)
{
	if (ninodes == capinodes) {
		capinodes = capinodes ? capinodes * 2 : 256;
		inodes = xrealloc(inodes, capinodes * sizeof *inodes);
	}
	memset(&inodes[ninodes], 0, sizeof inodes[ninodes]);
	inodes[ninodes].real = real;
	return (int)ninodes++;
}

/* The model inode a real inode number means now: the latest with it. */
static int
by_real(unsigned long long real)
{
	size_t i;

	for (i = ninodes; i > 0; i--)
		if (inodes[i - 1].real == real)
			return (int)(i - 1);
	return new_inode(real);
}

static struct ent *
ns_find(struct ns *s, const char *path)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i].path, path) == 0)
			return &s->v[i];
	return NULL;
}

static void
ns_set(struct ns *s, const char *path, enum nkind k, int ino)
{
	struct ent *e = ns_find(s, path);

	if (e == NULL) {
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 64;
			s->v = xrealloc(s->v, s->cap * sizeof *s->v);
		}
		e = &s->v[s->n++];
		e->path = (char *)path;
	}
	e->kind = k;
	e->ino = ino;
}

static void
ns_del(struct ns *s, const char *path)
{
	struct ent *e = ns_find(s, path);

	if (e)
		*e = s->v[--s->n];
}

static void
ns_copy(struct ns *to, const struct ns *from)
{
	if (to->cap < from->n) {
		to->cap = from->n + 16;
		to->v = xrealloc(to->v, to->cap * sizeof *to->v);
	}
	if (from->n)
		memcpy(to->v, from->v, from->n * sizeof *from->v);
	to->n = from->n;
}

static char *
parent_of(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? strndup(path, (size_t)(s - path)) : xstrdup("");
}

/* A name op applied to a namespace. */
static void
apply_name(struct ns *s, const struct op *o)
{
	struct ent *e;

	switch (o->k) {
	case OP_ADD:
		ns_set(s, o->path, o->nk, o->nino);
		break;
	case OP_DEL:
		ns_del(s, o->path);
		break;
	case OP_REN:
		if ((e = ns_find(s, o->path)) != NULL) {
			enum nkind k = e->kind;
			int ino = e->ino;

			ns_del(s, o->path);
			ns_set(s, o->path2, k, ino);
		}
		break;
	default:
		break;
	}
}

/* Grow b to len bytes, zero-filled (a file's size set beyond its end). */
static void
grow(struct buf *b, size_t len)
{
	if (len > b->len) {
		buf_reserve(b, len - b->len);
		memset(b->s + b->len, 0, len - b->len);
		b->len = len;
	}
}

/* How much of a pending write reaches the disk (sel values in build()). */
enum wmode { W_NONE, W_ALL, W_ZERO, W_TORN };

/* A data op in mode m: W_ALL all of a write's bytes; W_ZERO the file's
 * new size but zeros where it grew and the old bytes elsewhere (ext4's
 * and XFS's size-extended-but-zero-filled file after a crash); W_TORN
 * its first 512-byte sectors up to half of it, the rest as W_ZERO (a
 * torn write).  A truncation is all or nothing. */
static void
apply_write(struct buf *b, const struct op *o, int m)
{
	const struct rec *r = &recs[o->rec];

	if (m == W_NONE)
		return;
	if (o->k == OP_T) {
		if (r->len < b->len)
			b->len = r->len;
		grow(b, r->len);
		return;
	}
	grow(b, r->off + r->len);
	memcpy(b->s + r->off, r->data, m == W_ALL ? r->len : m == W_TORN ? r->len / 2 / 512 * 512 : 0);
}

static void
apply_data(struct buf *b, const struct op *o)
{
	apply_write(b, o, W_ALL);
}

static void
add_op(struct op o)
{
	if (nops == capops) {
		capops = capops ? capops * 2 : 1024;
		ops = xrealloc(ops, capops * sizeof *ops);
	}
	ops[nops] = o;
	if (o.k == OP_ADD || o.k == OP_DEL || o.k == OP_REN)
		apply_name(&vol, &o);
	if (npend == cappend) {
		cappend = cappend ? cappend * 2 : 256;
		pend = xrealloc(pend, cappend * sizeof *pend);
	}
	pend[npend++] = nops++;
}

/* Make durable every pending op for which keep() says so. */
static void
settle(int (*durable_now)(const struct op *, const struct rec *), const struct rec *r)
{
	size_t i, j = 0;

	for (i = 0; i < npend; i++) {
		struct op *o = &ops[pend[i]];

		if (durable_now(o, r)) {
			if (o->k == OP_W || o->k == OP_T)
				apply_data(&inodes[o->ino].dur, o);
			else
				apply_name(&dur, o);
		} else {
			pend[j++] = pend[i];
		}
	}
	npend = j;
}

static int cur_ino;

static int
synced_file(const struct op *o, const struct rec *r)
{
	(void)r;
	return (o->k == OP_W || o->k == OP_T) && o->ino == cur_ino;
}

static int
synced_dir(const struct op *o, const struct rec *r)
{
	return (o->k == OP_ADD || o->k == OP_DEL || o->k == OP_REN) && strcmp(o->dir, r->path) == 0;
}

static struct op
name_op(enum opk k, size_t rec, const char *path, const char *path2, enum nkind nk, int ino)
{
	struct op o;

	memset(&o, 0, sizeof o);
	o.k = k;
	o.rec = rec;
	o.path = (char *)path;
	o.path2 = (char *)path2;
	o.dir = parent_of(path);
	o.nk = nk;
	o.nino = ino;
	return o;
}

/* Advance the model over record i. */
static void
step(size_t i)
{
	const struct rec *r = &recs[i];
	struct op o;
	struct ent *e;
	int ino;

	memset(&o, 0, sizeof o);
	o.rec = i;
	switch (r->kind) {
	case 'O':
		if (r->created) {
			ino = new_inode(r->ino);
			add_op(name_op(OP_ADD, i, r->path, NULL, N_FILE, ino));
		} else if (r->trunc) {
			o.k = OP_T;	/* to recs[i].len, which is 0 */
			o.ino = by_real(r->ino);
			add_op(o);
		}
		break;
	case 'W':
	case 'T':
		o.k = r->kind == 'W' ? OP_W : OP_T;
		o.ino = by_real(r->ino);
		add_op(o);
		break;
	case 'S':
		cur_ino = by_real(r->ino);
		settle(synced_file, r);
		break;
	case 'D':
		settle(synced_dir, r);
		break;
	case 'L':
		e = ns_find(&vol, r->path);
		add_op(name_op(OP_ADD, i, r->path2, NULL, N_FILE, e ? e->ino : by_real(r->ino)));
		break;
	case 'R': {
		char *a = parent_of(r->path), *b = parent_of(r->path2);

		if (strcmp(a, b) == 0) {
			add_op(name_op(OP_REN, i, r->path, r->path2, N_FILE, 0));
		} else {
			e = ns_find(&vol, r->path);
			add_op(name_op(OP_ADD, i, r->path2, NULL, e ? e->kind : N_FILE,
			    e ? e->ino : by_real(r->ino)));
			add_op(name_op(OP_DEL, i, r->path, NULL, N_FILE, 0));
		}
		free(a);
		free(b);
		break;
	}
	case 'U':
		add_op(name_op(OP_DEL, i, r->path, NULL, N_FILE, 0));
		break;
	case 'M':
		add_op(name_op(OP_ADD, i, r->path, NULL, N_DIR, -1));
		break;
	case 'F':
		add_op(name_op(OP_ADD, i, r->path, NULL, N_FIFO, -1));
		break;
	default:
		break;	/* close and promises change nothing on disk */
	}
}

/* The folders under test as they were before recording: durable. */
static void
scan_base(const char *root, const char *rel)
{
	char *abs = xasprintf("%s/%s", root, rel);
	struct dirent *d;
	struct stat st;
	DIR *dir;

	if (lstat(abs, &st) < 0)
		cr_die("lstat %s: %s", abs, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		ns_set(&dur, xstrdup(rel), N_DIR, -1);
		if ((dir = opendir(abs)) == NULL)
			cr_die("opendir %s: %s", abs, strerror(errno));
		while ((d = readdir(dir)) != NULL) {
			char *sub;

			if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
				continue;
			sub = xasprintf("%s/%s", rel, d->d_name);
			scan_base(root, sub);
		}
		closedir(dir);
	} else if (S_ISFIFO(st.st_mode)) {
		ns_set(&dur, xstrdup(rel), N_FIFO, -1);
	} else if (S_ISREG(st.st_mode)) {
		int ino = new_inode(st.st_ino);

		if (read_file_at(AT_FDCWD, abs, &inodes[ino].dur, 1 << 24) != 0)
			cr_die("read %s: %s", abs, strerror(errno));
		ns_set(&dur, xstrdup(rel), N_FILE, ino);
	}
	free(abs);
}

/* ---- one crash state ---- */

struct state {
	struct ns ns;
	struct buf *content;	/* per inode: NULL = its durable bytes */
	size_t ncontent;
	int *touched;
	size_t ntouched;
};

static const struct buf *
content_of(const struct state *s, int ino)
{
	return s->content[ino].s ? &s->content[ino] : &inodes[ino].dur;
}

/* Durable state plus the pending ops chosen by sel[0..npend). */
static void
build(struct state *s, const unsigned char *sel)
{
	size_t i;

	ns_copy(&s->ns, &dur);
	if (s->ncontent < ninodes) {
		s->content = xrealloc(s->content, ninodes * sizeof *s->content);
		memset(s->content + s->ncontent, 0, (ninodes - s->ncontent) * sizeof *s->content);
		s->touched = xrealloc(s->touched, ninodes * sizeof *s->touched);
		s->ncontent = ninodes;
	}
	for (i = 0; i < s->ntouched; i++) {
		buf_free(&s->content[s->touched[i]]);
	}
	s->ntouched = 0;
	for (i = 0; i < npend; i++) {
		const struct op *o = &ops[pend[i]];

		if (!sel[i])
			continue;
		if (o->k == OP_W || o->k == OP_T) {
			struct buf *b = &s->content[o->ino];

			if (b->s == NULL) {
				buf_add(b, inodes[o->ino].dur.s, inodes[o->ino].dur.len);
				buf_reserve(b, 1);
				s->touched[s->ntouched++] = o->ino;
			}
			apply_write(b, o, sel[i]);
		} else {
			apply_name(&s->ns, o);
		}
	}
}

static int
cmp_ent(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->path, ((const struct ent *)b)->path);
}

/* A hash of what the state holds, for not checking it twice. */
static uint64_t
state_hash(struct state *s)
{
	uint64_t h = 0;
	size_t i;

	qsort(s->ns.v, s->ns.n, sizeof *s->ns.v, cmp_ent);
	for (i = 0; i < s->ns.n; i++) {
		const struct ent *e = &s->ns.v[i];
		uint64_t x = cr_hash(e->path, strlen(e->path)) ^ ((uint64_t)e->kind << 60);

		if (e->kind == N_FILE) {
			const struct buf *b = content_of(s, e->ino);

			x ^= cr_hash(b->s ? b->s : "", b->len) * 31 + (uint64_t)e->ino;
		}
		h = (h ^ x) * 0x100000001b3ULL + i;
	}
	return h;
}

/* Seen set: open addressing on 64-bit keys (0 = empty). */
static uint64_t *seen;
static size_t seencap, nseen;

static int
seen_add(uint64_t k)
{
	size_t i;

	if (k == 0)
		k = 1;
	if ((nseen + 1) * 2 > seencap) {
		uint64_t *old = seen;
		size_t oc = seencap;

		seencap = seencap ? seencap * 2 : 1 << 16;
		seen = xcalloc(seencap, sizeof *seen);
		nseen = 0;
		for (i = 0; i < oc; i++)
			if (old[i])
				(void)seen_add(old[i]);
		free(old);
	}
	for (i = (size_t)(k * 0x9e3779b97f4a7c15ULL) & (seencap - 1); seen[i]; i = (i + 1) & (seencap - 1))
		if (seen[i] == k)
			return 0;
	seen[i] = k;
	nseen++;
	return 1;
}

/* ---- materialising a state ---- */

static char *scratch;		/* the folder states are written into */

static void
rmtree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (d == NULL) {
		if (unlink(path) < 0 && errno != ENOENT)
			cr_die("unlink %s: %s", path, strerror(errno));
		return;
	}
	while ((e = readdir(d)) != NULL) {
		char *sub;
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		sub = xasprintf("%s/%s", path, e->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			rmtree(sub);
		else if (unlink(sub) < 0)
			cr_die("unlink %s: %s", sub, strerror(errno));
		free(sub);
	}
	closedir(d);
	if (rmdir(path) < 0)
		cr_die("rmdir %s: %s", path, strerror(errno));
}

static const char *const split_dirs[] = { "mess", "info", "local", "remote" };
static const char *const flat_dirs[] = { "intd", "todo", "bounce" };

/* A queue file named by a message id: its folder and id. */
static int
id_path(const char *path, const char **dir, unsigned long *id)
{
	char name[64];
	const char *p, *slash;
	size_t i;

	if (strncmp(path, "queue/", 6) != 0)
		return 0;
	p = path + 6;
	for (i = 0; i < 4; i++) {
		size_t n = strlen(split_dirs[i]);

		if (strncmp(p, split_dirs[i], n) == 0 && p[n] == '/' &&
		    (slash = strchr(p + n + 1, '/')) != NULL && strchr(slash + 1, '/') == NULL) {
			*dir = split_dirs[i];
			return queue_parse_id(slash + 1, id) == 0;
		}
	}
	for (i = 0; i < 3; i++) {
		size_t n = strlen(flat_dirs[i]);

		if (strncmp(p, flat_dirs[i], n) == 0 && p[n] == '/' && strchr(p + n + 1, '/') == NULL) {
			snprintf(name, sizeof name, "%s", p + n + 1);
			*dir = flat_dirs[i];
			return queue_parse_id(name, id) == 0;
		}
	}
	return 0;
}

struct idmap {
	unsigned long from, to;
};

/* The state's mess/ files: new id -> model inode (materialise). */
struct messino {
	unsigned long id;
	int ino;
};
static struct messino *messmap;
static size_t nmessmap;

static void
put_file(const char *abs, const struct buf *b)
{
	int fd = open(abs, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0 || (b->len && write(fd, b->s, b->len) != (ssize_t)b->len) || close(fd) < 0)
		cr_die("write %s: %s", abs, strerror(errno));
}

static char *
final_path(const char *path, struct idmap *map, size_t nmap)
{
	const char *dir;
	unsigned long id;
	size_t i;

	if (!id_path(path, &dir, &id))
		return xasprintf("%s/state/%s", scratch, path);
	for (i = 0; i < nmap; i++)
		if (map[i].from == id)
			break;
	if (i == nmap)
		cr_die("no new id for %lu", id);
	if (strcmp(dir, "intd") == 0 || strcmp(dir, "todo") == 0 || strcmp(dir, "bounce") == 0)
		return xasprintf("%s/state/queue/%s/%lu", scratch, dir, map[i].to);
	return xasprintf("%s/state/queue/%s/%lu/%lu", scratch, dir, map[i].to % CR_SPLIT, map[i].to);
}

/* Write the state under scratch/state; message ids become the inode
 * numbers of the new mess/ files (a queue needs id == inode). */
static void
materialise(const struct state *s)
{
	char *st = xasprintf("%s/state", scratch), *res = xasprintf("%s/reserve", scratch);
	char **at = xcalloc(ninodes, sizeof *at);	/* where each inode was put */
	struct idmap *map = NULL;
	size_t i, j, nmap = 0;
	int pass;

	rmtree(st);
	rmtree(res);
	if (mkdir(st, 0700) < 0 || mkdir(res, 0700) < 0)
		cr_die("mkdir %s: %s", st, strerror(errno));
	/* Folders (sorted: parents first), FIFOs. */
	for (i = 0; i < s->ns.n; i++) {
		const struct ent *e = &s->ns.v[i];
		char *p;

		if (e->kind == N_FILE)
			continue;
		p = xasprintf("%s/%s", st, e->path);
		if (e->kind == N_DIR ? mkdir(p, 0700) : mkfifo(p, 0600))
			if (errno != ENOENT)	/* its folder is not there: unreachable */
				cr_die("mkdir %s: %s", p, strerror(errno));
		free(p);
	}
	/* New ids: the inode of mess/ files, or of a placeholder. */
	map = xcalloc(s->ns.n + 1, sizeof *map);
	nmessmap = 0;
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < s->ns.n; i++) {
			const struct ent *e = &s->ns.v[i];
			const char *dir;
			unsigned long id;
			struct stat sb;
			char *tmp;

			if (e->kind != N_FILE || !id_path(e->path, &dir, &id) ||
			    (pass == 0) != (strcmp(dir, "mess") == 0))
				continue;
			for (j = 0; j < nmap; j++)
				if (map[j].from == id)
					break;
			if (j < nmap)
				continue;
			tmp = xasprintf("%s/%lu", res, id);
			put_file(tmp, pass == 0 ? content_of(s, e->ino) : &(struct buf)BUF_INIT);
			if (stat(tmp, &sb) < 0)
				cr_die("stat %s: %s", tmp, strerror(errno));
			map[nmap].from = id;
			map[nmap++].to = (unsigned long)sb.st_ino;
			if (pass == 0) {
				at[e->ino] = tmp;	/* linked into place below */
				messmap = xrealloc(messmap, nmap * sizeof *messmap);
				messmap[nmessmap].id = (unsigned long)sb.st_ino;
				messmap[nmessmap++].ino = e->ino;
			}
			else
				free(tmp);
		}
	}
	/* Files: the first name of an inode gets the bytes, others link. */
	for (i = 0; i < s->ns.n; i++) {
		const struct ent *e = &s->ns.v[i];
		char *p;

		if (e->kind != N_FILE)
			continue;
		p = final_path(e->path, map, nmap);
		if (at[e->ino]) {
			if (link(at[e->ino], p) < 0 && errno != ENOENT)
				cr_die("link %s %s: %s", at[e->ino], p, strerror(errno));
			free(p);
			continue;
		}
		{
			int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			const struct buf *b = content_of(s, e->ino);

			if (fd < 0) {
				if (errno != ENOENT)
					cr_die("create %s: %s", p, strerror(errno));
				free(p);
				continue;	/* unreachable */
			}
			if ((b->len && write(fd, b->s, b->len) != (ssize_t)b->len) || close(fd) < 0)
				cr_die("write %s: %s", p, strerror(errno));
		}
		at[e->ino] = p;
	}
	/* The mess/ placeholders go: their names are in place. */
	for (i = 0; i < nmap; i++) {
		char *tmp = xasprintf("%s/%lu", res, map[i].from);
		struct stat sb;

		if (stat(tmp, &sb) == 0 && sb.st_nlink > 1 && unlink(tmp) < 0)
			cr_die("unlink %s: %s", tmp, strerror(errno));
		free(tmp);
	}
	for (i = 0; i < ninodes; i++)
		free(at[i]);
	free(at);
	free(map);
	free(st);
	free(res);
}

/* ---- recovery and checks ---- */

static const char *const check_names[] = { "lost", "D-mark", "bounce", "qcheck", "journal",
	"corrupt", "deliver" };
#define NCHECKS 7

struct verdict {
	struct buf why;
	int failed;
	unsigned which;		/* bit i: check_names[i] failed */
};

static void
fail(struct verdict *v, const char *check, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
fail(struct verdict *v, const char *check, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int i;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	buf_printf(&v->why, "    %s: %s\n", check, msg);
	v->failed++;
	for (i = 0; i < NCHECKS; i++)
		if (strcmp(check, check_names[i]) == 0)
			v->which |= 1u << i;
}

/* A recovered message: its files. */
struct rmsg {
	unsigned long id;
	struct buf mess, info, remote, bounce;
	int has_info, has_remote, has_todo;
};

static int
quiet_begin(void)
{
	int saved = dup(2), null = open("/dev/null", O_WRONLY);

	if (saved < 0 || null < 0 || dup2(null, 2) < 0)
		cr_die("redirect stderr: %s", strerror(errno));
	close(null);
	return saved;
}

static void
quiet_end(int saved)
{
	if (dup2(saved, 2) < 0)
		cr_die("restore stderr: %s", strerror(errno));
	close(saved);
}

/* weir-send's start-up: cleanup (37 hours on), preprocess todo/. */
static void
recover_queue(struct queue *q)
{
	const struct preproc_opts po = { CR_HOST, CR_ADMIN, NULL };
	struct dirent *e;
	unsigned long id;
	size_t n;
	int fd;
	DIR *d;

	(void)cleanup_pass(q, time(NULL) + 37 * 3600);
	fd = openat(q->dfd, "todo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (d = fdopendir(fd)) == NULL)
		return;		/* queue-check says what is wrong */
	while ((e = readdir(d)) != NULL)
		if (queue_parse_id(e->d_name, &id) == 0)
			(void)preprocess(q, id, &po, &n);
	closedir(d);
}

static void
load_msgs(struct queue *q, struct rmsg **out, size_t *nout)
{
	char path[QPATH_MAX], dir[16];
	struct dirent *e;
	unsigned long id;
	unsigned s;
	DIR *d;
	int fd;

	*out = NULL;
	*nout = 0;
	for (s = 0; s < CR_SPLIT; s++) {
		snprintf(dir, sizeof dir, "mess/%u", s);
		fd = openat(q->dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || (d = fdopendir(fd)) == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			struct rmsg *m;

			if (queue_parse_id(e->d_name, &id) < 0)
				continue;
			*out = xrealloc(*out, (*nout + 1) * sizeof **out);
			m = &(*out)[(*nout)++];
			memset(m, 0, sizeof *m);
			m->id = id;
			queue_path(path, q, Q_MESS, id);
			if (read_file_at(q->dfd, path, &m->mess, 1 << 24) != 0)
				buf_reset(&m->mess);
			queue_path(path, q, Q_INFO, id);
			m->has_info = read_file_at(q->dfd, path, &m->info, 1 << 20) == 0;
			queue_path(path, q, Q_REMOTE, id);
			m->has_remote = read_file_at(q->dfd, path, &m->remote, 1 << 20) == 0;
			queue_path(path, q, Q_TODO, id);
			m->has_todo = faccessat(q->dfd, path, F_OK, 0) == 0;
			queue_path(path, q, Q_BOUNCE, id);
			if (read_file_at(q->dfd, path, &m->bounce, 1 << 20) != 0)
				buf_reset(&m->bounce);
		}
		closedir(d);
	}
}

static void
free_msgs(struct rmsg *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		buf_free(&v[i].mess);
		buf_free(&v[i].info);
		buf_free(&v[i].remote);
		buf_free(&v[i].bounce);
	}
	free(v);
}

/* The X-Crash-Id of a message's own header block (after Received), or NULL. */
static int
has_crash_id(const struct buf *m, const char *k)
{
	size_t blen;
	const char *body = cr_body(m->s ? m->s : "", m->len, &blen);
	const char *p = m->s, *end = body;
	size_t kl = strlen(k);

	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (nl == NULL)
			break;
		if ((size_t)(nl - p) == 12 + kl && memcmp(p, "X-Crash-Id: ", 12) == 0 &&
		    memcmp(p + 12, k, kl) == 0)
			return 1;
		p = nl + 1;
	}
	return 0;
}

/* Did the deliverer confirm rcpt of message k (by k) or hash (by hash)
 * in records [0, upto)? */
static int
confirmed(size_t upto, const char *k, uint64_t hash, const char *rcpt, size_t rlen)
{
	size_t i;

	for (i = 0; i < upto; i++) {
		const struct rec *r = &recs[i];

		if (r->kind != 'Y' || strlen(r->rcpts) != rlen || memcmp(r->rcpts, rcpt, rlen) != 0)
			continue;
		if (k ? strcmp(r->k, k) == 0 : r->hash == hash)
			return 1;
	}
	return 0;
}

static void
check_promised(size_t upto, struct rmsg *m, size_t nm, struct verdict *v)
{
	size_t i, j;

	for (i = 0; i < upto; i++) {
		const struct rec *r = &recs[i];
		char *rc = NULL, *tok, *save = NULL;
		int all = 1, found = 0;
		struct buf want = BUF_INIT;

		if (r->kind != 'Q')
			continue;
		rc = xstrdup(r->rcpts);
		for (tok = strtok_r(rc, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			all &= confirmed(upto, r->k, 0, tok, strlen(tok));
			buf_printf(&want, "%s%c", tok, 0);
		}
		free(rc);
		if (all) {
			buf_free(&want);
			continue;	/* may be gone: every recipient is done */
		}
		for (j = 0; j < nm && !found; j++) {
			size_t blen, off = 0, k = 0;
			const char *body, *w;
			struct buf got = BUF_INIT;
			struct qrec q;

			if (!has_crash_id(&m[j].mess, r->k))
				continue;
			found = 1;
			body = cr_body(m[j].mess.s, m[j].mess.len, &blen);
			if (cr_hash(body, blen) != r->hash) {
				fail(v, "lost", "message %s (injected at #%zu): its body is not what was "
				    "queued (%zu bytes)", r->k, i + 1, blen);
				break;
			}
			if (!m[j].has_info || m[j].info.len != strlen(r->sender) + 2 ||
			    m[j].info.s[0] != 'F' || memcmp(m[j].info.s + 1, r->sender, strlen(r->sender)) != 0) {
				fail(v, "lost", "message %s (injected at #%zu): info/ missing or not "
				    "F<%s>", r->k, i + 1, r->sender);
				break;
			}
			if (!m[j].has_remote) {
				fail(v, "lost", "message %s (injected at #%zu): remote/ missing", r->k, i + 1);
				break;
			}
			while (qrec_next(m[j].remote.s, m[j].remote.len, &off, &q, &w) == 1) {
				buf_add(&got, q.addr, q.len);
				buf_addc(&got, '\0');
				k++;
			}
			if (got.len != want.len || memcmp(got.s, want.s, want.len) != 0)
				fail(v, "lost", "message %s (injected at #%zu): remote/ lists other "
				    "recipients than were queued", r->k, i + 1);
			buf_free(&got);
		}
		if (!found)
			fail(v, "lost", "message %s, injected with exit 0 at #%zu, is not in the queue",
			    r->k, i + 1);
		buf_free(&want);
	}
}

static void
check_dmarks(size_t upto, struct rmsg *m, size_t nm, struct verdict *v)
{
	size_t j;

	for (j = 0; j < nm; j++) {
		size_t off = 0;
		uint64_t h = cr_hash(m[j].mess.s ? m[j].mess.s : "", m[j].mess.len);
		const char *w;
		struct qrec q;

		if (!m[j].has_remote)
			continue;
		while (qrec_next(m[j].remote.s, m[j].remote.len, &off, &q, &w) == 1)
			if (q.type == 'D' && !confirmed(upto, NULL, h, q.addr, q.len))
				fail(v, "D-mark", "<%.*s> of message %lu is marked done, but the "
				    "deliverer had not confirmed it", (int)q.len, q.addr, m[j].id);
	}
}

/* What the programs had written to model inode ino by the cut: its
 * durable bytes with every pending write applied. */
static void
written_by_cut(int ino, struct buf *out)
{
	size_t i;

	buf_reset(out);
	buf_add(out, inodes[ino].dur.s ? inodes[ino].dur.s : "", inodes[ino].dur.len);
	for (i = 0; i < npend; i++) {
		const struct op *o = &ops[pend[i]];

		if ((o->k == OP_W || o->k == OP_T) && o->ino == ino)
			apply_data(out, o);
	}
}

/* Every message weir-send would deliver (a todo/ entry, or a remote/
 * file with a recipient to do), whether its injection was acknowledged
 * or not, must have the mess/ file it was written with, byte for byte:
 * a corrupt message must never become deliverable.  (Messages the
 * recovery itself made, bounces, have no model inode and are skipped.) */
static void
check_deliverable(struct rmsg *m, size_t nm, struct verdict *v)
{
	struct buf want = BUF_INIT;
	size_t j, k, z;

	for (j = 0; j < nm; j++) {
		size_t off = 0;
		int todo = m[j].has_todo;
		const char *w;
		struct qrec q;

		while (!todo && m[j].has_remote &&
		    qrec_next(m[j].remote.s, m[j].remote.len, &off, &q, &w) == 1)
			todo = q.type == 'T';
		if (!todo)
			continue;
		for (k = 0; k < nmessmap && messmap[k].id != m[j].id; k++)
			;
		if (k == nmessmap)
			continue;
		written_by_cut(messmap[k].ino, &want);
		if (want.len == m[j].mess.len && memcmp(want.s, m[j].mess.s, want.len) == 0)
			continue;
		for (z = 0; z < m[j].mess.len && m[j].mess.s[z] != '\0'; z++)
			;
		fail(v, "corrupt", "message %lu can be delivered (%s) but its mess/ file is not "
		    "what was written: %zu bytes%s, %zu written", m[j].id,
		    m[j].has_todo ? "todo/" : "remote/", m[j].mess.len,
		    z < m[j].mess.len ? ", zero-filled" : "", want.len);
	}
	buf_free(&want);
}

static char *delivered_dir;	/* the deliverer keeps a copy of each message there */

static int
holds(const struct buf *b, const char *s)
{
	return b->len && memmem(b->s, b->len, s, strlen(s)) != NULL;
}

/* A recipient refused for good (h) before the cut must still be pending
 * (T) or have its bounce somewhere: a note in bounce/N, a queued bounce
 * (sender <>) naming it, or a bounce the deliverer took before the cut. */
static void
check_bounces(size_t upto, struct rmsg *m, size_t nm, struct verdict *v)
{
	size_t i, j, t;

	for (i = 0; i < upto; i++) {
		const struct rec *r = &recs[i];
		char *want = NULL;
		int pending = 0, ok = 0;

		if (r->kind != 'Y' || strcmp(r->code, "h") != 0)
			continue;
		for (j = 0; j < nm; j++) {
			size_t off = 0;
			const char *w;
			struct qrec q;

			if (!has_crash_id(&m[j].mess, r->k) || !m[j].has_remote)
				continue;
			while (qrec_next(m[j].remote.s, m[j].remote.len, &off, &q, &w) == 1)
				if (q.type == 'T' && q.len == strlen(r->rcpts) &&
				    memcmp(q.addr, r->rcpts, q.len) == 0)
					pending = 1;
		}
		if (pending)
			continue;
		want = xasprintf("<%s>", r->rcpts);
		for (j = 0; j < nm && !ok; j++)
			ok = (has_crash_id(&m[j].mess, r->k) && holds(&m[j].bounce, want)) ||
			    (m[j].has_info && m[j].info.len == 2 && holds(&m[j].mess, want));
		for (t = 0; t < upto && !ok; t++) {
			struct buf got = BUF_INIT;
			char *p;

			if (recs[t].kind != 'Y' || strcmp(recs[t].k, "-") != 0)
				continue;
			p = xasprintf("%s/%016" PRIx64, delivered_dir, recs[t].hash);
			if (read_file_at(AT_FDCWD, p, &got, 1 << 24) == 0)
				ok = holds(&got, want);
			buf_free(&got);
			free(p);
		}
		if (!ok)
			fail(v, "bounce", "<%s> of message %s was refused for good at #%zu and is "
			    "done, but no bounce names it", r->rcpts, r->k, i + 1);
		free(want);
	}
}

static void
no_grant(void *arg, struct wg_req *r)
{
	(void)arg; (void)r;
}

static void
no_refuse(void *arg, struct wg_req *r, enum wg_code c)
{
	(void)arg; (void)r; (void)c;
}

static const struct workload *gates;	/* its gate_pid[] wrote the journal */

static int
by_gate(long pid)
{
	size_t i;

	for (i = 0; i < gates->ngate; i++)
		if (gates->gate_pid[i] == pid)
			return 1;
	return 0;
}

/* Weights of the grant id in the gate's journal writes, and whether it
 * was refunded, in records [0, upto). */
static int
grant_weights(size_t upto, uint64_t id, uint64_t *msgs, uint64_t *rcpts, int *refunded)
{
	size_t i;
	int found = 0;

	*refunded = 0;
	for (i = 0; i < upto; i++) {
		const struct rec *r = &recs[i];
		const char *p, *end;

		if (r->kind != 'W' || !by_gate(r->pid))
			continue;
		for (p = r->data, end = r->data + r->len; p < end; ) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			char line[256];
			unsigned long long gid, m, rc;
			size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

			snprintf(line, sizeof line, "%.*s", (int)(n < 255 ? n : 255), p);
			if (sscanf(line, "G %llu %*s %llu %llu", &gid, &m, &rc) == 3 && gid == id) {
				*msgs = m;
				*rcpts = rc;
				found = 1;
			} else if (sscanf(line, "R %llu ", &gid) == 1 && gid == id) {
				*refunded = 1;
			}
			p += n + 1;
		}
	}
	return found;
}

static void
check_journal(size_t upto, const char *path, struct verdict *v)
{
	uint64_t need_m = 0, need_r = 0, have_m = 0, have_r = 0, m, rc;
	const struct wg_ops ops_ = { no_grant, no_refuse, NULL, NULL, NULL };
	struct journal j;
	struct wgate g;
	struct wg_up *u;
	size_t i, ngrants = 0;
	int refunded;

	for (i = 0; i < upto; i++) {
		if (recs[i].kind != 'G')
			continue;
		if (!grant_weights(upto, recs[i].grant, &m, &rc, &refunded)) {
			fail(v, "journal", "grant %" PRIu64 " was answered at #%zu without a G record "
			    "written before", recs[i].grant, i + 1);
			continue;
		}
		if (refunded)
			continue;
		need_m += m;
		need_r += rc;
		ngrants++;
	}
	if (ngrants == 0)
		return;
	wg_init(&g, &ops_);
	if (journal_open(&j, path, &g, NULL, (int64_t)clock_mono_ms(), (int64_t)time(NULL) * 1000,
	    600 * 1000) < 0) {
		fail(v, "journal", "weir-gate cannot open the journal %s", path);
		wg_free(&g);
		return;
	}
	for (u = g.ups; u; u = u->next) {
		uint64_t s;

		for (s = u->lseq; s < u->lseq + u->ln; s++) {
			const struct wg_send *e = wg_log_at(u, s);

			have_m += e->w[UNIT_MESSAGES];
			have_r += e->w[UNIT_RECIPIENTS];
		}
	}
	journal_close(&j);
	wg_free(&g);
	if (have_m < need_m || have_r < need_r)
		fail(v, "journal", "replay counts %" PRIu64 " messages, %" PRIu64 " recipients; "
		    "the %zu grants answered before the cut need %" PRIu64 ", %" PRIu64, have_m, have_r,
		    ngrants, need_m, need_r);
}

/* Recover the materialised state and check it against the promises made
 * in records [0, upto). */
static void
check_state(size_t upto, struct verdict *v)
{
	char *qdir = xasprintf("%s/state/queue", scratch), *jpath = xasprintf("%s/state/gate/gate.journal", scratch);
	struct qcheck_result res;
	struct queue q;
	struct rmsg *m;
	size_t nm;
	char *out = NULL;
	size_t outlen = 0;
	FILE *f;
	int saved = quiet_begin();

	if (queue_open(&q, qdir, CR_SPLIT) < 0) {
		quiet_end(saved);
		fail(v, "qcheck", "cannot open the queue: %s", strerror(errno));
		free(qdir);
		free(jpath);
		return;
	}
	recover_queue(&q);
	if ((f = open_memstream(&out, &outlen)) == NULL)
		cr_die("open_memstream: %s", strerror(errno));
	memset(&res, 0, sizeof res);
	qcheck_run(&q, NULL, f, &res);
	fclose(f);
	load_msgs(&q, &m, &nm);
	queue_close(&q);
	{
		char *gdir = xasprintf("%s/state/gate", scratch);
		struct stat st;

		if (stat(gdir, &st) == 0)
			check_journal(upto, jpath, v);
		free(gdir);
	}
	quiet_end(saved);
	if (res.problems) {
		char *line, *save = NULL;

		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strncmp(line, "problem:", 8) == 0)
				fail(v, "qcheck", "%s", line);
	}
	check_promised(upto, m, nm, v);
	check_dmarks(upto, m, nm, v);
	check_bounces(upto, m, nm, v);
	check_deliverable(m, nm, v);
	free_msgs(m, nm);
	free(out);
	free(qdir);
	free(jpath);
}

/* ---- delivering a recovered state: the real weir-send and weir-remote
 * to the stand-in upstream ---- */

static struct workload *wl;
static struct buf expect;	/* "k rcpt\n" lines that must arrive */

/* A message the upstream accepted. */
struct arrival {
	long n;			/* its content is in record.n */
	char k[32];		/* its own X-Crash-Id, "-" if none */
	char *sender;		/* "<>" (aiosmtpd's) for the null sender */
	char *rcpts;		/* ",a,b," */
	struct buf msg;		/* as the upstream stored it (CRLF, unstuffed) */
};

/* The string after key in a JSON line, up to the next quote (the
 * workload's addresses hold no quote or backslash), or NULL. */
static char *
json_str(const char *line, const char *key)
{
	const char *p = strstr(line, key), *e;

	if (p == NULL)
		return NULL;
	p += strlen(key);
	if ((e = strchr(p, '"')) == NULL)
		return NULL;
	return xstrndup(p, (size_t)(e - p));
}

/* The X-Crash-Id of m's own header block (CRLF lines), into k. */
static void
crlf_crash_id(const struct buf *m, char *k, size_t ksz)
{
	const char *p = m->s, *end = m->s + m->len, *nl;

	snprintf(k, ksz, "-");
	for (; p && p < end && (nl = memmem(p, (size_t)(end - p), "\r\n", 2)) != NULL; p = nl + 2) {
		if (nl == p)
			return;		/* the end of the header */
		if ((size_t)(nl - p) > 12 && memcmp(p, "X-Crash-Id: ", 12) == 0) {
			snprintf(k, ksz, "%.*s", (int)(nl - p - 12), p + 12);
			return;
		}
	}
}

/* Every message in the upstream's record (upstream.py: one JSON object
 * a line, {"event": "data", "sender": "...", "rcpts": ["...", ...],
 * "n": N, ...} for each message accepted, whose content is record.N). */
static size_t
arrivals(const char *record, struct arrival **out)
{
	struct buf b = BUF_INIT;
	struct arrival *v = NULL;
	size_t n = 0, cap = 0;
	char *line, *save = NULL;

	*out = NULL;
	if (read_file_at(AT_FDCWD, record, &b, 1 << 24) != 0 || b.len == 0) {
		buf_free(&b);
		return 0;
	}
	for (line = strtok_r(b.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct arrival a;
		const char *r, *e, *np;
		struct buf rc = BUF_INIT;
		char *path;

		if (strstr(line, "\"event\": \"data\"") == NULL)
			continue;
		if ((r = strstr(line, "\"rcpts\": [")) == NULL || (e = strchr(r, ']')) == NULL ||
		    (np = strstr(line, "\"n\": ")) == NULL)
			cr_die("%s: a data event without rcpts or n: %s", record, line);
		memset(&a, 0, sizeof a);
		a.n = strtol(np + 5, NULL, 10);
		a.sender = json_str(line, "\"sender\": \"");
		if (a.sender == NULL)
			a.sender = xstrdup("");
		buf_addc(&rc, ',');
		for (r += 10; r < e; r++)
			if (*r != '"' && *r != ' ')
				buf_addc(&rc, *r);
		buf_addc(&rc, ',');
		a.rcpts = xstrdup(buf_cstr(&rc));
		buf_free(&rc);
		path = xasprintf("%s.%ld", record, a.n);
		if (read_file_at(AT_FDCWD, path, &a.msg, 1 << 26) != 0)
			cr_die("read %s: %s", path, strerror(errno));
		free(path);
		crlf_crash_id(&a.msg, a.k, sizeof a.k);
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			v = xrealloc(v, cap * sizeof *v);
		}
		v[n++] = a;
	}
	buf_free(&b);
	*out = v;
	return n;
}

static void
free_arrivals(struct arrival *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].sender);
		free(v[i].rcpts);
		buf_free(&v[i].msg);
	}
	free(v);
}

/* Has every expected "k rcpt" arrived? */
static int
all_delivered(const char *record)
{
	struct arrival *a;
	size_t na = arrivals(record, &a), i;
	const char *p, *nl, *sp;
	int ok = 1;

	for (p = expect.s; ok && p && p < expect.s + expect.len; p = nl + 1) {
		char *rc;

		nl = memchr(p, '\n', (size_t)(expect.s + expect.len - p));
		sp = memchr(p, ' ', (size_t)(nl - p));
		rc = xasprintf(",%.*s,", (int)(nl - sp - 1), sp + 1);
		ok = 0;
		for (i = 0; i < na && !ok; i++)
			ok = strlen(a[i].k) == (size_t)(sp - p) && memcmp(a[i].k, p, (size_t)(sp - p)) == 0 &&
			    strstr(a[i].rcpts, rc) != NULL;
		free(rc);
	}
	free_arrivals(a, na);
	return ok;
}

/* The body of a CRLF message: the bytes after the first empty line. */
static const char *
crlf_body(const struct buf *m, size_t *blen)
{
	const char *e = m->len ? memmem(m->s, m->len, "\r\n\r\n", 4) : NULL;

	if (e == NULL) {
		*blen = 0;
		return "";
	}
	*blen = m->len - (size_t)(e + 4 - m->s);
	return e + 4;
}

/* After the delivery: weir-send's cleanup with the clock 37 hours on
 * (as in check_state(): the leftovers of injections in flight at the cut
 * go once 36 hours old), then queue-check (qcheck_run(), the code of
 * `weir queue-check`) finds no problem. */
static void
after_delivery(struct verdict *v)
{
	char *qdir = xasprintf("%s/state/queue", scratch), *out = NULL, *line, *save = NULL;
	struct qcheck_result res;
	struct queue q;
	size_t outlen = 0;
	FILE *f;
	int saved = quiet_begin();

	if (queue_open(&q, qdir, CR_SPLIT) < 0) {
		quiet_end(saved);
		fail(v, "deliver", "cannot open the queue after the delivery: %s", strerror(errno));
		free(qdir);
		return;
	}
	(void)cleanup_pass(&q, time(NULL) + 37 * 3600);
	if ((f = open_memstream(&out, &outlen)) == NULL)
		cr_die("open_memstream: %s", strerror(errno));
	memset(&res, 0, sizeof res);
	qcheck_run(&q, NULL, f, &res);
	fclose(f);
	queue_close(&q);
	quiet_end(saved);
	if (res.problems)
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strncmp(line, "problem", 7) == 0)
				fail(v, "deliver", "after the delivery, queue-check: %s", line);
	free(out);
	free(qdir);
}

/* Start the real weir-gate, weir-send and weir-remote on the state
 * (materialised again: the checks changed it) after `weir flush`, to the
 * stand-in upstream: every recipient of an acknowledged message that the
 * deliverer had not confirmed before the cut, and that is not refused or
 * deferred by design, arrives within 30 s; every message that arrives
 * bears the body that was injected, byte for byte (as the upstream
 * stored it: CRLF line ends; the header fields weir adds aside), or is a
 * bounce (null sender): a weir-queue killed halfway or an SMTP client
 * gone in the middle of DATA never wrote one, and nothing of theirs must
 * arrive; and `weir queue-check` is sound afterwards. */
static size_t
deliver_state(const struct state *s, size_t upto, struct verdict *v)
{
	char *record = xasprintf("%s/upstream.jsonl", scratch), *tok, *save = NULL, *rc;
	struct arrival *a;
	size_t i, na, n = 0;

	buf_reset(&expect);
	for (i = 0; i < upto; i++) {
		if (recs[i].kind != 'Q')
			continue;
		rc = xstrdup(recs[i].rcpts);
		for (tok = strtok_r(rc, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (!strstr(tok, "bad") && !strstr(tok, "slow") &&
			    !confirmed(upto, recs[i].k, 0, tok, strlen(tok)))
				buf_printf(&expect, "%s %s\n", recs[i].k, tok), n++;
		free(rc);
	}
	materialise(s);
	if (!wl_deliver(wl, scratch, all_delivered, 30000))
		fail(v, "deliver", "not everything arrived at the upstream within 30 s: %s",
		    buf_cstr(&expect));
	after_delivery(v);
	na = arrivals(record, &a);
	for (i = 0; i < na; i++) {
		struct buf want = BUF_INIT, crlf = BUF_INIT;
		size_t gl, wlen, j;
		const char *gb, *wb;
		char *path;

		if (strcmp(a[i].k, "-") == 0) {
			if (a[i].sender[0] != '\0' && strcmp(a[i].sender, "<>") != 0)
				fail(v, "deliver", "a message from <%s> arrived (upstream #%ld) that is "
				    "neither one injected nor a bounce", a[i].sender, a[i].n);
			continue;	/* a bounce: weir's own message */
		}
		path = xasprintf("%s/etc/%s.msg", wl->root, a[i].k);
		gb = crlf_body(&a[i].msg, &gl);
		if (read_file_at(AT_FDCWD, path, &want, 1 << 26) != 0) {
			fail(v, "deliver", "message %s arrived but was never wholly injected", a[i].k);
		} else {
			wb = cr_body(want.s, want.len, &wlen);
			for (j = 0; j < wlen; j++) {
				if (wb[j] == '\n')
					buf_addc(&crlf, '\r');
				buf_addc(&crlf, wb[j]);
			}
			if (gl != crlf.len || memcmp(gb, crlf.s, gl) != 0)
				fail(v, "deliver", "message %s arrived with another body (%zu bytes, "
				    "%zu injected; upstream #%ld)", a[i].k, gl, crlf.len, a[i].n);
		}
		free(path);
		buf_free(&want);
		buf_free(&crlf);
	}
	/* The next delivered state starts a new record. */
	if (unlink(record) < 0 && errno != ENOENT)
		cr_die("unlink %s: %s", record, strerror(errno));
	for (i = 1;; i++) {
		char *p = xasprintf("%s.%zu", record, i);
		int r = unlink(p);

		free(p);
		if (r < 0 && errno == ENOENT)
			break;
		if (r < 0)
			cr_die("unlink %s.%zu: %s", record, i, strerror(errno));
	}
	free_arrivals(a, na);
	free(record);
	return n;
}

/* ---- driving ---- */

struct run {
	int exhaustive, first;
	size_t deliver, delivered, drcpts;	/* -d: states to deliver, done, recipients */
	unsigned bound, samples;
	size_t prefixes, states, distinct, failures, shown, maxshown;
	size_t by_check[NCHECKS];
	size_t maxpend;
	unsigned long long rng;
};

static unsigned long long
rnd(struct run *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

static void
describe(struct buf *b, size_t i)
{
	const struct rec *r = &recs[i];

	buf_printf(b, "#%zu pid %ld %c", i + 1, r->pid, r->kind);
	if (r->path)
		buf_printf(b, " %s", r->path);
	if (r->path2)
		buf_printf(b, " -> %s", r->path2);
	if (r->kind == 'W' || r->kind == 'T' || r->kind == 'S')
		buf_printf(b, " ino %llu", r->ino);
	if (r->kind == 'W')
		buf_printf(b, " off %llu len %llu", r->off, r->len);
}

static void
try_state(struct run *run, size_t prefix, const unsigned char *sel, uint64_t promises)
{
	static struct state s;
	struct verdict v = { BUF_INIT, 0, 0 };
	size_t i;

	if (run->first && run->failures)
		return;		/* -1: the first failure is enough */
	run->states++;
	build(&s, sel);
	if (!seen_add(state_hash(&s) ^ (promises * 0x9e3779b97f4a7c15ULL)))
		return;
	run->distinct++;
	materialise(&s);
	check_state(prefix + 1, &v);
	/* -d: the middle of each of run->deliver equal stretches of the log. */
	if (!v.failed && run->deliver &&
	    (2 * run->delivered + 1) * nrecs <= 2 * run->deliver * (prefix + 1)) {
		run->delivered++;
		run->drcpts += deliver_state(&s, prefix + 1, &v);	/* evenly over the log */
	}
	if (v.failed) {
		run->failures++;
		for (i = 0; i < NCHECKS; i++)
			run->by_check[i] += (v.which >> i) & 1;
		if (run->shown++ < run->maxshown) {
			struct buf b = BUF_INIT;

			buf_adds(&b, "FAIL after ");
			describe(&b, prefix);
			buf_printf(&b, "; %zu pending, applied {", npend);
			for (i = 0; i < npend; i++)
				if (sel[i]) {
					buf_printf(&b, " ");
					describe(&b, ops[pend[i]].rec);
					if (ops[pend[i]].k == OP_DEL)
						buf_adds(&b, "(del)");
					if (sel[i] == W_ZERO || sel[i] == W_TORN)
						buf_adds(&b, sel[i] == W_ZERO ? "(zero-filled)" : "(torn)");
				}
			buf_adds(&b, " }\n");
			printf("%s%s", buf_cstr(&b), buf_cstr(&v.why));
			buf_free(&b);
		}

	}
	buf_free(&v.why);
}

static void
states_at(struct run *run, size_t prefix, uint64_t promises)
{
	unsigned char *sel = xcalloc(npend + 1, 1);
	size_t i, k;

	try_state(run, prefix, sel, promises);		/* nothing pending reached the disk */
	memset(sel, 1, npend);
	try_state(run, prefix, sel, promises);		/* all of it */
	for (i = 0; i < npend; i++) {
		memset(sel, 0, npend);
		sel[i] = 1;
		try_state(run, prefix, sel, promises);	/* only this one */
		memset(sel, 1, npend);
		sel[i] = 0;
		try_state(run, prefix, sel, promises);	/* all but this one */
		if (ops[pend[i]].k != OP_W)
			continue;
		sel[i] = W_ZERO;
		try_state(run, prefix, sel, promises);	/* all, this one zero-filled */
		sel[i] = W_TORN;
		try_state(run, prefix, sel, promises);	/* all, this one torn */
	}
	for (i = 0; i < npend; i++)	/* every name, every write zero-filled */
		sel[i] = ops[pend[i]].k == OP_W ? W_ZERO : 1;
	try_state(run, prefix, sel, promises);
	if (run->exhaustive && npend > 1) {
		if (npend <= run->bound) {
			unsigned long long m, all = 1ULL << npend;

			for (m = 0; m < all; m++) {
				for (i = 0; i < npend; i++)
					sel[i] = (m >> i) & 1;
				try_state(run, prefix, sel, promises);
			}
		} else {
			/* Every subset of the newest `bound` ops, with the older
			 * ones (long-lived: the pid/ names nobody fsyncs) none,
			 * all, or a random half; then random subsets of all. */
			size_t lo = npend - run->bound;
			unsigned long long m, all = 1ULL << run->bound;
			int mode;

			for (m = 0; m < all; m++)
				for (mode = 0; mode < 3; mode++) {
					for (i = 0; i < lo; i++)
						sel[i] = (unsigned char)(mode == 2 ? (int)(rnd(run) & 1) : mode);
					for (i = lo; i < npend; i++)
						sel[i] = (m >> (i - lo)) & 1;
					try_state(run, prefix, sel, promises);
				}
			for (k = 0; k < run->samples; k++) {
				for (i = 0; i < npend; i++)
					sel[i] = rnd(run) & 1;
				try_state(run, prefix, sel, promises);
			}
		}
	}
	free(sel);
}

static void
usage(void)
{
	fprintf(stderr, "usage: crashreplay [-x] [-1] [-d states -U upstream.py] [-b bound] [-s samples] "
	    "[-k] [-v] [-r] [-S skip] -B bindir -R recorder.so\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct workload w;
	struct run run;
	struct timespec t0, t1;
	uint64_t promises = 0;
	const char *shm;
	size_t i;
	int ch, keep = 0;

	memset(&w, 0, sizeof w);
	memset(&run, 0, sizeof run);
	run.bound = 10;
	run.samples = 256;
	run.maxshown = 40;
	run.rng = 0x2545f4914f6cdd1dULL;
	log_init("crashreplay");
	while ((ch = getopt(argc, argv, "x1d:b:s:kS:U:B:R:rv")) != -1) {
		switch (ch) {
		case 'x': run.exhaustive = 1; break;
		case '1': run.first = 1; run.maxshown = 1; break;
		case 'd': run.deliver = (size_t)atoi(optarg); break;
		case 'b': run.bound = (unsigned)atoi(optarg); break;
		case 's': run.samples = (unsigned)atoi(optarg); break;
		case 'k': keep = 1; break;
		case 'v': run.maxshown = (size_t)-1; break;
		case 'S': w.skip = optarg; break;
		case 'U': w.upstream = optarg; break;
		case 'r': w.race = 1; break;
		case 'B': w.bindir = optarg; break;
		case 'R': w.recorder = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || w.bindir == NULL || w.recorder == NULL || run.bound > 20 ||
	    (run.deliver && w.upstream == NULL))
		usage();
	{
		char real[PATH_MAX];

		if (realpath(w.bindir, real) == NULL)
			cr_die("%s: %s", w.bindir, strerror(errno));
		w.bindir = xstrdup(real);
		if (realpath(w.recorder, real) == NULL)
			cr_die("%s: %s", w.recorder, strerror(errno));
		w.recorder = xstrdup(real);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl = &w;
	wl_setup(&w);
	scan_base(w.root, "queue");
	scan_base(w.root, "gate");
	ns_copy(&vol, &dur);
	if (wl_run(&w) < 0) {
		fprintf(stderr, "crashreplay: scratch folder kept: %s\n", w.root);
		return 2;
	}
	gates = &w;
	delivered_dir = xasprintf("%s/etc/delivered", w.root);
	parse_log(w.log);

	/* States go to tmpfs when there is one: thousands of small trees. */
	shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : w.root;
	scratch = xasprintf("%s/weir-crash-states.%ld", shm, (long)getpid());
	if (mkdir(scratch, 0700) < 0)
		cr_die("mkdir %s: %s", scratch, strerror(errno));

	for (i = 0; i < nrecs; i++) {
		char k = recs[i].kind;

		step(i);
		run.prefixes++;
		if (npend > run.maxpend)
			run.maxpend = npend;
		if (k == 'Q' || k == 'Y' || k == 'G')
			promises++;
		else if (k == 'C')
			continue;	/* same states as the prefix before */
		states_at(&run, i, promises);
		if (run.first && run.failures)
			break;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("crashreplay: %s: %zu records (%u messages queued), %zu prefixes, %zu states, "
	    "%zu distinct checked, %zu failed (lost %zu, D-mark %zu, bounce %zu, qcheck %zu, "
	    "journal %zu, corrupt %zu, deliver %zu; %zu states delivered, %zu recipients), max %zu pending, %.1f s\n", run.exhaustive ? "exhaustive" : "bounded",
	    nrecs, w.injected, run.prefixes, run.states, run.distinct, run.failures,
	    run.by_check[0], run.by_check[1], run.by_check[2], run.by_check[3], run.by_check[4],
	    run.by_check[5], run.by_check[6], run.delivered, run.drcpts,
	    run.maxpend,
	    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	rmtree(scratch);
	if (keep || (run.failures && !run.first))
		printf("crashreplay: log and scratch queue kept in %s\n", w.root);
	else
		rmtree(w.root);
	return run.failures ? 1 : 0;
}
