/*
 * textfile.c: the scrape as a node_exporter textfile: written whole to
 * PATH.tmp, fsynced, renamed over PATH and the folder fsynced, so the
 * collector never reads half a file (it skips names not ending in .prom,
 * such as the .tmp).
 *
 * Trusts: its caller for the path.  Config keys: metrics.textfile
 * (passed in).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "metrics/metrics.h"

int
metrics_textfile(const char *path, const struct buf *text)
{
	char *tmp = xasprintf("%s.tmp", path), *copy = xstrdup(path);
	int fd, rc = -1, e;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		goto out;
	if (full_write(fd, text->s ? text->s : "", text->len) < 0 || fsync(fd) < 0) {
		e = errno;
		close(fd);
		unlink(tmp);
		errno = e;
		goto out;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		e = errno;
		unlink(tmp);
		errno = e;
		goto out;
	}
	if (fsync_dir(AT_FDCWD, dirname(copy)) < 0)
		goto out;
	rc = 0;
out:
	free(tmp);
	free(copy);
	return rc;
}
