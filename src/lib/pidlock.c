/*
 * pidlock.c: see pidlock.h.
 *
 * Trusts: nothing in the file but a decimal number.  Config keys: none.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "lib/pidlock.h"

static long
read_holder(int fd)
{
	char b[32];
	ssize_t n;
	char *end;
	long v;

	n = pread(fd, b, sizeof b - 1, 0);
	if (n <= 0)
		return 0;
	b[n] = '\0';
	v = strtol(b, &end, 10);
	return (end != b && (*end == '\n' || *end == '\0') && v > 0) ? v : 0;
}

int
pidlock_take(const char *path, int inherit, long *holder)
{
	char b[32];
	int fd, n, saved;
	ssize_t w;

	*holder = 0;
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | (inherit ? 0 : O_CLOEXEC), 0600);
	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		saved = errno;
		if (saved == EWOULDBLOCK)
			*holder = read_holder(fd);
		close(fd);
		errno = saved;
		return -1;
	}
	n = snprintf(b, sizeof b, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0)
		goto fail;
	w = pwrite(fd, b, (size_t)n, 0);
	if (w != n) {
		if (w >= 0)
			errno = EIO;
		goto fail;
	}
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}
