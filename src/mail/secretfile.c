/*
 * secretfile.c: see secretfile.h.
 * Trusts: the stat it is given; the file's owner.  Config keys:
 * secret_file, client_secret_file (the caller's).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lib/io.h"
#include "mail/secretfile.h"

int
secretfile_check_key(const struct stat *st, const char *key, const char *path,
    struct buf *err)
{
	if (!S_ISREG(st->st_mode)) {
		buf_printf(err, "%s %s: not a regular file", key, path);
		return -1;
	}
	if (st->st_mode & 077) {
		buf_printf(err, "%s %s: mode %04o lets group or others in; "
		    "refusing it (chmod 600 %s)", key, path, (unsigned)(st->st_mode & 07777), path);
		return -1;
	}
	if (st->st_size > SECRET_MAX) {
		buf_printf(err, "%s %s: over %d bytes", key, path, SECRET_MAX);
		return -1;
	}
	return 0;
}

int
secretfile_check(const struct stat *st, const char *path, struct buf *err)
{
	return secretfile_check_key(st, "secret_file", path, err);
}

void
secret_wipe(struct buf *b)
{
	if (b->s)
		explicit_bzero(b->s, b->cap);
	buf_free(b);
}

void
secret_chomp(struct buf *b)
{
	if (b->len > 0 && b->s[b->len - 1] == '\n')
		b->s[--b->len] = '\0';
	if (b->len > 0 && b->s[b->len - 1] == '\r')
		b->s[--b->len] = '\0';
}

int
secretfile_read(const char *key, const char *path, struct buf *out, struct buf *err)
{
	struct stat st;
	ssize_t r;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		buf_printf(err, "%s %s: %s", key, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		buf_printf(err, "%s %s: %s", key, path, strerror(errno));
		goto fail;
	}
	if (secretfile_check_key(&st, key, path, err) < 0)
		goto fail;
	buf_reserve(out, SECRET_MAX + 1);
	r = full_read(fd, out->s, SECRET_MAX + 1);
	if (r < 0) {
		buf_printf(err, "%s %s: %s", key, path, strerror(errno));
		goto fail;
	}
	if (r > SECRET_MAX) {
		buf_printf(err, "%s %s: over %d bytes", key, path, SECRET_MAX);
		goto fail;
	}
	out->len = (size_t)r;
	out->s[out->len] = '\0';
	if (close(fd) < 0) {
		buf_printf(err, "%s %s: close: %s", key, path, strerror(errno));
		secret_wipe(out);
		return -1;
	}
	secret_chomp(out);
	if (out->len == 0) {
		buf_printf(err, "%s %s: empty", key, path);
		secret_wipe(out);
		return -1;
	}
	return 0;
fail:
	(void)close(fd);	/* read-only: nothing to lose on the error path */
	secret_wipe(out);
	return -1;
}
