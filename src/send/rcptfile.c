/*
 * rcptfile.c: see rcptfile.h.  The only writes weir-send makes to a
 * preprocessed message before it is eliminated.
 *
 * Trusts: the queue's files, parsed strictly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "send/rcptfile.h"

#define RCPTFILE_MAX	((size_t)256 << 20)
#define PART_GUESS	64	/* bytes per record guessed for a part's first read */

/* f->data's first len bytes, read from byte base of path, into f:
 * strictly parsed.  0, or -1 logged (f freed). */
static int
fill(struct queue *q, unsigned long id, const char *path, size_t base, size_t len,
    struct rcptfile *f)
{
	char qid[QUEUE_ID_MAX];
	struct buf why = BUF_INIT;
	size_t todo, done, off = 0, start, i = 0;
	struct qrec r;
	const char *w;

	if (rcptfile_parse(f->data.s, len, &todo, &done, &why) < 0) {
		if (base)
			log_warnx("msg %s: %s is corrupt (in the part read from byte %zu: %s); "
			    "left for the admin", queue_msgid_of(q, id, qid), path, base, why.s);
		else
			log_warnx("msg %s: %s is corrupt (%s); left for the admin",
			    queue_msgid_of(q, id, qid), path, why.s);
		buf_free(&why);
		rcptfile_free(f);
		return -1;
	}
	f->n = todo + done;
	f->ndone = done;
	f->v = xcalloc(f->n + 1, sizeof *f->v);
	for (start = off; qrec_next(f->data.s, len, &off, &r, &w) == 1; start = off) {
		f->v[i].off = base + start;
		f->v[i].addr = r.addr;
		f->v[i].len = r.len;
		f->v[i].done = r.type == 'D';
		i++;
	}
	return 0;
}

int
rcptfile_load(struct queue *q, unsigned long id, struct rcptfile *f)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];

	memset(f, 0, sizeof *f);
	queue_path(path, q, Q_REMOTE, id);
	if (read_file_at(q->dfd, path, &f->data, RCPTFILE_MAX) != 0) {
		if (errno == ENOENT)
			return 1;
		log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), path);
		return -1;
	}
	return fill(q, id, path, 0, f->data.len, f);
}

int
rcptfile_load_part(struct queue *q, unsigned long id, size_t from, size_t want,
    struct rcptfile *f)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];
	size_t chunk = want * PART_GUESS + 1024, end = 0, ntodo = 0;
	const char *nul;
	ssize_t r = 1;
	int fd;

	memset(f, 0, sizeof *f);
	queue_path(path, q, Q_REMOTE, id);
	fd = openat(q->dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		log_warn("msg %s: open %s", queue_msgid_of(q, id, qid), path);
		return -1;
	}
	/* Read on, doubling each read, until the window holds want whole
	 * records not done, or the file ends. */
	while (ntodo < want && r > 0) {
		if (f->data.len + chunk > RCPTFILE_MAX)
			chunk = RCPTFILE_MAX - f->data.len;
		buf_reserve(&f->data, chunk);
		do
			r = pread(fd, f->data.s + f->data.len, chunk, (off_t)(from + f->data.len));
		while (r < 0 && errno == EINTR);
		if (r < 0 || (r == 0 && chunk == 0)) {
			if (r == 0)
				errno = EFBIG;
			log_warn("msg %s: read %s", queue_msgid_of(q, id, qid), path);
			close(fd);
			rcptfile_free(f);
			return -1;
		}
		f->data.len += (size_t)r;
		f->data.s[f->data.len] = '\0';
		while (ntodo < want &&
		    (nul = memchr(f->data.s + end, '\0', f->data.len - end)) != NULL) {
			ntodo += f->data.s[end] == 'T';
			end = (size_t)(nul - f->data.s) + 1;
		}
		chunk *= 2;
	}
	close(fd);
	/* The file's end cuts a record: what rcptfile_load calls corrupt. */
	return fill(q, id, path, from, ntodo < want ? f->data.len : end, f);
}

void
rcptfile_free(struct rcptfile *f)
{
	buf_free(&f->data);
	free(f->v);
	memset(f, 0, sizeof *f);
}

int
rcpt_mark_done(struct queue *q, unsigned long id, const size_t *offs, size_t n)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];
	size_t i;
	int fd;

	if (n == 0)
		return 0;
	queue_path(path, q, Q_REMOTE, id);
	fd = openat(q->dfd, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		log_warn("msg %s: open %s", queue_msgid_of(q, id, qid), path);
		return -1;
	}
	for (i = 0; i < n; i++) {
		ssize_t w;

		do
			w = pwrite(fd, "D", 1, (off_t)offs[i]);
		while (w < 0 && errno == EINTR);
		if (w != 1) {
			log_warn("msg %s: mark done in %s", queue_msgid_of(q, id, qid), path);
			close(fd);
			return -1;
		}
	}
	/* The marks overwrite bytes already there: the data is enough. */
	if (fdatasync(fd) < 0) {
		log_warn("msg %s: fdatasync %s (a recipient may be tried again)",
		    queue_msgid_of(q, id, qid), path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
bounce_note(struct queue *q, unsigned long id, const char *addr, const char *text)
{
	char path[QPATH_MAX], qid[QUEUE_ID_MAX];
	struct buf b = BUF_INIT;
	struct stat st;
	size_t i, start, tlen = strlen(text);
	int fd, created, rc = -1;

	/* qmail's format: "<addr>:\n", the text, "\n", then a blank line
	 * that ends the entry, so no blank line may stand inside one. */
	while (tlen > 0 && text[tlen - 1] == '\n')
		tlen--;
	if (tlen == 0) {
		text = "(no reason given)";
		tlen = strlen(text);
	}
	buf_addc(&b, '<');
	start = b.len;
	buf_adds(&b, addr);
	for (i = start; i < b.len; i++)
		if (b.s[i] == '\n')
			b.s[i] = '_';
	buf_adds(&b, ">:\n");
	start = b.len - 1;	/* the newline ending "<addr>:" */
	buf_add(&b, text, tlen);
	buf_addc(&b, '\n');
	for (i = start; i + 1 < b.len; i++)
		if (b.s[i] == '\n' && b.s[i + 1] == '\n')
			b.s[i + 1] = '/';
	buf_addc(&b, '\n');

	queue_path(path, q, Q_BOUNCE, id);
	created = fstatat(q->dfd, path, &st, 0) < 0;
	fd = openat(q->dfd, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_warn("msg %s: open %s", queue_msgid_of(q, id, qid), path);
		goto out;
	}
	if (full_write(fd, b.s, b.len) < 0 || fsync(fd) < 0) {
		log_warn("msg %s: write %s", queue_msgid_of(q, id, qid), path);
		close(fd);
		goto out;
	}
	close(fd);
	if (created && fsync_dir(q->dfd, "bounce") < 0) {
		log_warn("msg %s: fsync folder bounce", queue_msgid_of(q, id, qid));
		goto out;
	}
	rc = 0;
out:
	buf_free(&b);
	return rc;
}
