/*
 * qcheck.c: see qcheck.h.  Reads each folder once, keeps the ids of each
 * in a sorted array, then checks every message against the state table
 * of QUEUE.md:
 *
 *   S2  +mess -intd -todo -info -local -remote -bounce   note (leftover)
 *   S3  +mess +intd -todo ...                             note (leftover)
 *   S4  +mess ?intd +todo ?info ?local ?remote -bounce   todo parsed
 *   S5  +mess -intd -todo +info ?local ?remote ?bounce   all parsed
 *
 * Anything else, and any file whose bytes do not parse, is a problem.
 * A sender with a control byte is a problem (weir-send leaves the message
 * alone); a recipient with one is a note (weir-send bounces it), and so
 * is a recipient qmail-send left pending in local/ (weir-send takes it
 * over), until weir-send has done so.
 * weir's own sched/ (mail/schedfile.h) holds hints, written without an
 * fsync: a note that does not parse (a power cut can leave one empty),
 * or whose message is gone or has another birth, is something weir-send
 * replaces or removes (a note, not a problem).  hold/N (mail/qctl.h) is
 * written durably: one that does not parse is a problem; one whose
 * message is gone or has another birth is a leftover (a note).  A request
 * in ctl/ is a note: weir-send acts on it when it runs.  reply/N is a
 * hint like sched/: malformed or stale, a note.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/envelope.h"
#include "mail/policy.h"
#include "mail/qcheck.h"
#include "mail/qctl.h"
#include "mail/schedfile.h"

struct idset {
	unsigned long *v;
	size_t n, cap;
};

struct ctx {
	struct queue *q;
	const struct queue_owners *own;	/* NULL: owners not configured */
	FILE *out;
	struct qcheck_result *res;
	struct idset ids[Q_NDIRS];
};

static void
report(struct ctx *c, int problem, const char *fmt, ...)
{
	va_list ap;

	fputs(problem ? "problem: " : "note: ", c->out);
	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
	if (problem)
		c->res->problems++;
	else
		c->res->notes++;
}

static void
idset_add(struct idset *s, unsigned long id)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = xrealloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n++] = id;
}

static int
cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

static int
idset_has(const struct idset *s, unsigned long id)
{
	return s->n && bsearch(&id, s->v, s->n, sizeof id, cmp_ul) != NULL;
}

static DIR *
open_dir(struct ctx *c, const char *path)
{
	int fd = openat(c->q->dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0) {
		report(c, 1, "%s: %s", path, strerror(errno));
		return NULL;
	}
	d = fdopendir(fd);
	if (d == NULL) {
		report(c, 1, "%s: %s", path, strerror(errno));
		close(fd);
	}
	return d;
}

/* Read one flat folder (or one split subfolder) into ids[d]. */
static void
scan_folder(struct ctx *c, enum qdir d, const char *path, long split_slot)
{
	struct dirent *e;
	struct stat st;
	unsigned long id;
	DIR *dir = open_dir(c, path);

	if (dir == NULL)
		return;
	while ((errno = 0, e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (queue_parse_id(e->d_name, &id) < 0) {
			report(c, 1, "%s/%s: not a message number", path, e->d_name);
			continue;
		}
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			/* ENOENT: removed since listed (a live queue), as if
			 * not listed. */
			if (errno != ENOENT)
				report(c, 1, "%s/%s: %s", path, e->d_name, strerror(errno));
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			report(c, 1, "%s/%s: not a regular file", path, e->d_name);
			continue;
		}
		if (split_slot >= 0 && id % c->q->split != (unsigned long)split_slot) {
			report(c, 1, "%s/%s: in the wrong split folder (expected %s/%lu)",
			    path, e->d_name, qdir_name[d], id % c->q->split);
			continue;
		}
		if (d == Q_MESS && st.st_ino != id) {
			report(c, 1, "%s/%s: inode %lu does not match its name", path,
			    e->d_name, (unsigned long)st.st_ino);
			continue;
		}
		idset_add(&c->ids[d], id);
	}
	if (errno)
		report(c, 1, "%s: readdir: %s", path, strerror(errno));
	closedir(dir);
}

static void
scan_split(struct ctx *c, enum qdir d)
{
	struct dirent *e;
	unsigned long slot;
	char sub[QPATH_MAX];
	unsigned s;
	DIR *dir = open_dir(c, qdir_name[d]);

	if (dir == NULL)
		return;
	while ((e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (queue_parse_id(e->d_name, &slot) < 0 || slot >= c->q->split)
			report(c, 1, "%s/%s: unexpected entry (queue_split is %u)",
			    qdir_name[d], e->d_name, c->q->split);
	}
	closedir(dir);
	for (s = 0; s < c->q->split; s++) {
		snprintf(sub, sizeof sub, "%s/%u", qdir_name[d], s);
		scan_folder(c, d, sub, s);
	}
}

/* One node of the layout: its type is a problem; its mode a note, or a
 * problem (with its owner) when the queue's owners are configured.  A
 * missing split subfolder is left to scan_split(), which reports it. */
static void
check_node(struct ctx *c, const char *path, enum qkind kind, mode_t mode, enum qrole group,
    int subfolder)
{
	struct stat st;
	uid_t uid;
	gid_t gid;
	int ok, own = c->own != NULL;

	if (fstatat(c->q->dfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (!subfolder || errno != ENOENT)
			report(c, 1, "%s: %s", path, strerror(errno));
		return;
	}
	ok = kind == QK_FILE ? S_ISREG(st.st_mode) :
	     kind == QK_FIFO ? S_ISFIFO(st.st_mode) : S_ISDIR(st.st_mode);
	if (!ok) {
		report(c, 1, "%s: wrong file type", path);
		return;
	}
	if ((st.st_mode & 07777) != mode)
		report(c, own, "%s: mode %04o, expected %04o", path,
		    (unsigned)(st.st_mode & 07777), (unsigned)mode);
	if (own) {
		struct qnode n = { path, kind, mode, 0, group };

		queue_node_ids(&n, c->own, &uid, &gid);
		if (st.st_uid != uid || st.st_gid != gid)
			report(c, 1, "%s: owner %lu:%lu, expected %lu:%lu (weir queue-init "
			    "as root sets it)", path, (unsigned long)st.st_uid,
			    (unsigned long)st.st_gid, (unsigned long)uid, (unsigned long)gid);
	}
}

static void
check_layout(struct ctx *c)
{
	char sub[QPATH_MAX];
	size_t i;
	unsigned s;

	for (i = 0; i < queue_layout_len; i++) {
		const struct qnode *n = &queue_layout[i];

		check_node(c, n->path, n->kind, n->mode, n->group, 0);
		for (s = 0; n->kind == QK_SPLITDIR && s < c->q->split; s++) {
			snprintf(sub, sizeof sub, "%s/%u", n->path, s);
			check_node(c, sub, QK_DIR, n->submode, n->group, 1);
		}
	}
}

/* A recipient not yet done whose address holds a control byte (a stock
 * qmail-queue lets it in): weir-send bounces it. */
static void
note_bad_rcpts(struct ctx *c, const char *path, const struct buf *b, size_t off)
{
	struct qrec r;
	const char *w, *bad;
	size_t i = 0;

	for (; qrec_next(b->s, b->len, &off, &r, &w) == 1; i++)
		if (r.type == 'T' && (bad = envelope_addr_problem(r.addr, r.len)) != NULL)
			report(c, 0, "%s: recipient %zu: %s (weir-send bounces it)", path, i, bad);
}

/* Parse one message file with the given parser kind; 0 ok. */
static int
check_file(struct ctx *c, enum qdir d, unsigned long id, struct buf *b)
{
	char path[QPATH_MAX];
	struct buf why = BUF_INIT;
	struct todo_env te;
	struct qrec sender;
	const char *w;
	size_t t, done;
	int r = 0;

	queue_path(path, c->q, d, id);
	r = read_file_at(c->q->dfd, path, b, 1 << 30);
	if (r == -1 && errno == ENOENT) {
		/* Listed, then gone: on a live queue, weir-send preprocessed or
		 * finished the message since its folder was read. */
		report(c, 0, "%s: removed while the queue was checked (weir-send at work)", path);
		return -1;
	}
	if (r != 0) {
		report(c, 1, "%s: %s", path, r == -2 ? "larger than 1 GB" : strerror(errno));
		return -1;
	}
	switch (d) {
	case Q_TODO:
		r = todo_parse(b->s, b->len, &te, &why);
		if (r == 0 && (w = envelope_addr_problem(te.sender.addr, te.sender.len)) != NULL) {
			buf_printf(&why, "sender: %s", w);
			r = -1;
		}
		if (r == 0)
			note_bad_rcpts(c, path, b, te.rcpt_off);
		break;
	case Q_INFO:
		r = info_parse(b->s, b->len, &sender, &why);
		if (r == 0 && (w = envelope_addr_problem(sender.addr, sender.len)) != NULL) {
			buf_printf(&why, "sender: %s", w);
			r = -1;
		}
		break;
	case Q_LOCAL:
	case Q_REMOTE:
		r = rcptfile_parse(b->s, b->len, &t, &done, &why);
		if (r == 0 && t + done == 0) {
			buf_adds(&why, "no recipients");
			r = -1;
		}
		if (r == 0 && d == Q_LOCAL && t > 0)
			report(c, 0, "%s: %zu recipient%s left pending by qmail-send (weir-send "
			    "hands them to its local rule: the admin address)", path, t,
			    t == 1 ? "" : "s");
		if (r == 0)
			note_bad_rcpts(c, path, b, 0);
		break;
	default:
		break;
	}
	if (r < 0)
		report(c, 1, "%s: %s", path, why.s);
	buf_free(&why);
	return r;
}

#define HAS(have, d)	(((have) >> (d)) & 1u)

/* The folders whose listing held a file of message id (bit d). */
static unsigned
listed(const struct ctx *c, unsigned long id)
{
	unsigned have = 0;
	enum qdir d;

	for (d = 0; d < Q_NDIRS; d++)
		if (d != Q_PID && idset_has(&c->ids[d], id))
			have |= 1u << d;
	return have;
}

/* The folders that hold a file of message id now. */
static unsigned
look(const struct ctx *c, unsigned long id)
{
	char path[QPATH_MAX];
	unsigned have = 0;
	struct stat st;
	enum qdir d;

	for (d = 0; d < Q_NDIRS; d++) {
		if (d == Q_PID)
			continue;
		queue_path(path, c->q, d, id);
		if (fstatat(c->q->dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
			have |= 1u << d;
	}
	return have;
}

/*
 * A live queue's folders are listed one after another, not at one
 * instant: a message injected, preprocessed or removed meanwhile can look
 * like a state it was never in (remote/ listed after its preprocessing,
 * info/ before it).  So a message whose listed files make a problem is
 * looked at again, in a few microseconds rather than a whole scan, until
 * two looks agree (at most 4): the problem is what that look shows.
 * Files that keep changing are a message at work: UINT_MAX.
 */
static unsigned
look_again(const struct ctx *c, unsigned long id)
{
	unsigned prev = look(c, id), now;
	int i;

	for (i = 0; i < 3; i++, prev = now)
		if ((now = look(c, id)) == prev)
			return now;
	return UINT_MAX;
}

/* What is wrong with a message that has the files have (mess/ among
 * them), or NULL. */
static const char *
state_problem(unsigned have)
{
	if (HAS(have, Q_TODO))
		return HAS(have, Q_BOUNCE) ? "bounce/ exists before preprocessing" : NULL;
	if (HAS(have, Q_INTD) && HAS(have, Q_INFO))
		return "intd/ and info/ without todo/";
	if (!HAS(have, Q_INTD) && !HAS(have, Q_INFO) &&
	    (HAS(have, Q_LOCAL) || HAS(have, Q_REMOTE) || HAS(have, Q_BOUNCE)))
		return "local/, remote/ or bounce/ without info/";
	return NULL;
}

static void
check_message(struct ctx *c, unsigned long id, struct buf *b)
{
	unsigned have = listed(c, id) | 1u << Q_MESS;
	const char *problem = state_problem(have);

	if (problem != NULL) {
		have = look_again(c, id);
		if (have == UINT_MAX || !HAS(have, Q_MESS)) {
			report(c, 0, "message %lu: changed while the queue was checked "
			    "(weir-send at work)", id);
			return;
		}
		problem = state_problem(have);
	}
	if (problem != NULL) {
		report(c, 1, "message %lu: %s", id, problem);
		return;
	}
	if (HAS(have, Q_TODO)) {
		/* S4: preprocessing may have written info/local/remote partly. */
		check_file(c, Q_TODO, id, b);
		return;
	}
	if (HAS(have, Q_INTD)) {
		report(c, 0, "message %lu: state S3 (being injected, or a leftover "
		    "weir-send removes after 36 hours)", id);
		return;
	}
	if (!HAS(have, Q_INFO)) {
		report(c, 0, "message %lu: state S2 (being injected or eliminated, "
		    "or a leftover)", id);
		return;
	}
	/* S5 */
	check_file(c, Q_INFO, id, b);
	if (HAS(have, Q_LOCAL))
		check_file(c, Q_LOCAL, id, b);
	if (HAS(have, Q_REMOTE))
		check_file(c, Q_REMOTE, id, b);
}

/* Files of other folders whose message has no mess/ file: in the
 * listing, and still when looked at again (a message injected after
 * mess/ was listed, or removed after its other folders were, is not). */
static void
check_orphans(struct ctx *c)
{
	unsigned have;
	enum qdir d;
	size_t i;

	for (d = Q_INFO; d < Q_NDIRS; d++) {
		if (d == Q_PID)
			continue;
		for (i = 0; i < c->ids[d].n; i++) {
			if (idset_has(&c->ids[Q_MESS], c->ids[d].v[i]))
				continue;
			have = look_again(c, c->ids[d].v[i]);
			if (have != UINT_MAX && !HAS(have, Q_MESS) && HAS(have, d))
				report(c, 1, "%s: message %lu has no mess/ file",
				    qdir_name[d], c->ids[d].v[i]);
		}
	}
}

static void
check_pid(struct ctx *c)
{
	struct dirent *e;
	DIR *dir = open_dir(c, "pid");

	if (dir == NULL)
		return;
	while ((e = readdir(dir)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			report(c, 0, "pid/%s: injection in progress, or a leftover "
			    "weir-send removes after 36 hours", e->d_name);
	closedir(dir);
}

/* One note of sched/S: parses, and belongs to a live message. */
static void
check_note(struct ctx *c, const char *path, unsigned long id, struct buf *b)
{
	char info[QPATH_MAX];
	struct buf why = BUF_INIT;
	struct schednote n;
	struct stat st;
	int r;

	buf_reset(b);
	r = read_file_at(c->q->dfd, path, b, SCHEDFILE_MAX);
	if (r == -1 && errno == ENOENT)
		return;		/* removed since listed: the message ended */
	if (r != 0) {
		report(c, 1, "%s: %s", path, r == -2 ? "too long to be weir's" : strerror(errno));
		return;
	}
	if (schedfile_parse(b->s, b->len, &n, &why) < 0) {
		report(c, 0, "%s: %s (weir-send replaces it)", path, why.s);
		buf_free(&why);
		return;
	}
	buf_free(&why);
	queue_path(info, c->q, Q_INFO, id);
	if (!idset_has(&c->ids[Q_MESS], id) || !idset_has(&c->ids[Q_INFO], id) ||
	    fstatat(c->q->dfd, info, &st, 0) < 0 || (long long)st.st_mtime != n.birth)
		report(c, 0, "%s: left by a message that is gone (weir-send removes it)", path);
}

static void
check_sched(struct ctx *c, struct buf *b)
{
	char sub[QPATH_MAX], path[QPATH_MAX + 256];
	struct dirent *e;
	unsigned long v;
	long long t;
	struct stat st;
	unsigned s;
	DIR *dir;

	if (fstatat(c->q->dfd, SCHED_DIR, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		return;	/* check_layout said so */
	if ((dir = open_dir(c, SCHED_DIR)) == NULL)
		return;
	while ((e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    strcmp(e->d_name, "tmp") == 0 || strcmp(e->d_name, "sessions") == 0 ||
		    strcmp(e->d_name, "sessions.tmp") == 0)
			continue;	/* sessions: a hint for weir status (schedfile.h) */
		if (strcmp(e->d_name, "waits") == 0) {
			struct schedwait *w;
			size_t n;
			struct buf why = BUF_INIT;

			buf_reset(b);
			if (read_file_at(c->q->dfd, SCHED_WAITS, b, SCHEDWAITS_MAX) != 0 ||
			    schedfile_parse_waits(b->s, b->len, &w, &n, &why) < 0)
				report(c, 0, "%s: %s (weir-send rewrites it; a restart credits "
				    "open waits from the notes only)", SCHED_WAITS,
				    why.len ? why.s : "unreadable or too long");
			else
				free(w);
			buf_free(&why);
			continue;
		}
		if (strcmp(e->d_name, "alive") == 0 || (strncmp(e->d_name, "oauth.", 6) == 0 &&
		    policy_valid_name(e->d_name + 6))) {
			snprintf(path, sizeof path, "%s/%s", SCHED_DIR, e->d_name);
			buf_reset(b);
			if (read_file_at(c->q->dfd, path, b, 32) != 0 ||
			    schedfile_parse_alive(b->s, b->len, &t) < 0)
				report(c, 0, "%s: not one number and a newline (weir-send "
				    "rewrites it)", path);
			continue;
		}
		if (queue_parse_id(e->d_name, &v) < 0 || v >= c->q->split)
			report(c, 1, "%s/%s: unexpected entry (queue_split is %u)", SCHED_DIR,
			    e->d_name, c->q->split);
	}
	closedir(dir);
	for (s = 0; s < c->q->split; s++) {
		snprintf(sub, sizeof sub, SCHED_DIR "/%u", s);
		if ((dir = open_dir(c, sub)) == NULL)
			continue;
		while ((e = readdir(dir)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
			if (queue_parse_id(e->d_name, &v) < 0 || v % c->q->split != s) {
				report(c, 1, "%s: not a message number of this folder", path);
				continue;
			}
			if (fstatat(c->q->dfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno != ENOENT)	/* else removed since listed */
					report(c, 1, "%s: %s", path, strerror(errno));
				continue;
			}
			if (!S_ISREG(st.st_mode)) {
				report(c, 1, "%s: not a regular file", path);
				continue;
			}
			check_note(c, path, v, b);
		}
		closedir(dir);
	}
}

static void
ctx_init(struct ctx *c, struct queue *q, const struct queue_owners *own, FILE *out,
    struct qcheck_result *res)
{
	memset(c, 0, sizeof *c);
	memset(res, 0, sizeof *res);
	c->q = q;
	c->own = own;
	c->out = out;
	c->res = res;
}

void
qcheck_layout(struct queue *q, const struct queue_owners *own, FILE *out,
    struct qcheck_result *res)
{
	struct ctx c;

	ctx_init(&c, q, own, out, res);
	check_layout(&c);
}

/* hold/N: parses, and belongs to a live message; ctl/: requests. */
static void
check_control(struct ctx *c, struct buf *b)
{
	char path[sizeof QCTL_REPLY_DIR + 256];
	struct dirent *e;
	enum qctl_state st;
	long long birth, hb, since;
	unsigned long id;
	struct stat sb;
	DIR *dir;
	int r;

	/* A queue from before these folders: check_layout said so. */
	if (fstatat(c->q->dfd, QCTL_HOLD_DIR, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fstatat(c->q->dfd, QCTL_DIR, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if ((dir = open_dir(c, QCTL_HOLD_DIR)) != NULL) {
		while ((e = readdir(dir)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof path, QCTL_HOLD_DIR "/%s", e->d_name);
			if (queue_parse_id(e->d_name, &id) < 0) {
				report(c, 1, "%s: not a message number", path);
				continue;
			}
			buf_reset(b);
			r = read_file_at(c->q->dfd, path, b, QCTL_FILE_MAX);
			if (r == -1 && errno == ENOENT)
				continue;	/* released since listed */
			if (r != 0 || qctl_hold_parse(b->s, b->len, &hb, &since) < 0) {
				report(c, 1, "%s: %s", path, r == -1 ? strerror(errno) :
				    "not \"birth B\\nsince T\\n\" (weir-send takes it as held)");
				continue;
			}
			if (qctl_state(c->q, id, &st, &birth) < 0 || st == QS_NONE || birth != hb)
				report(c, 0, "%s: left by a message that is gone (harmless: "
				    "its birth tells it)", path);
		}
		closedir(dir);
	}
	if (fstatat(c->q->dfd, QCTL_REPLY_DIR, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (dir = open_dir(c, QCTL_REPLY_DIR)) != NULL) {
		while ((e = readdir(dir)) != NULL) {
			const char *body, *via;
			size_t blen, vialen;

			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
			    strcmp(e->d_name, "tmp") == 0)
				continue;
			snprintf(path, sizeof path, QCTL_REPLY_DIR "/%s", e->d_name);
			buf_reset(b);
			if (queue_parse_id(e->d_name, &id) < 0) {
				report(c, 1, "%s: not a message number", path);
				continue;
			}
			if (read_file_at(c->q->dfd, path, b, QCTL_REPLY_MAX) != 0 ||
			    qctl_reply_parse(b->s, b->len, &hb, &since, &via, &vialen, &body,
			    &blen) < 0) {
				report(c, 0, "%s: malformed (weir-send rewrites it)", path);
				continue;
			}
			if (qctl_state(c->q, id, &st, &birth) < 0 || st != QS_INFO || birth != hb)
				report(c, 0, "%s: left by a message that is gone (harmless: "
				    "its birth tells it)", path);
		}
		closedir(dir);
	}
	if ((dir = open_dir(c, QCTL_DIR)) != NULL) {
		while ((e = readdir(dir)) != NULL)
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				report(c, 0, QCTL_DIR "/%s: a request weir-send has not done yet",
				    e->d_name);
		closedir(dir);
	}
}

void
qcheck_run(struct queue *q, const struct queue_owners *own, FILE *out,
    struct qcheck_result *res)
{
	struct ctx c;
	struct buf b = BUF_INIT;
	enum qdir d;
	size_t i;

	ctx_init(&c, q, own, out, res);
	check_layout(&c);
	for (d = 0; d < Q_NDIRS; d++) {
		if (d == Q_PID)
			continue;
		if (qdir_is_split(d))
			scan_split(&c, d);
		else
			scan_folder(&c, d, qdir_name[d], -1);
		qsort(c.ids[d].v, c.ids[d].n, sizeof *c.ids[d].v, cmp_ul);
	}
	check_pid(&c);
	check_orphans(&c);
	for (i = 0; i < c.ids[Q_MESS].n; i++)
		check_message(&c, c.ids[Q_MESS].v[i], &b);
	check_sched(&c, &b);
	check_control(&c, &b);
	res->messages = c.ids[Q_MESS].n;
	buf_free(&b);
	for (d = 0; d < Q_NDIRS; d++)
		free(c.ids[d].v);
}
