/* io.c: see io.h.  Short reads and writes are normal; only errors stop. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/io.h"

int
full_write(int fd, const void *p, size_t n)
{
	const char *s = p;
	ssize_t r;

	while (n > 0) {
		r = write(fd, s, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		s += r;
		n -= (size_t)r;
	}
	return 0;
}

ssize_t
read_retry(int fd, void *p, size_t n)
{
	ssize_t r;

	do
		r = read(fd, p, n);
	while (r < 0 && errno == EINTR);
	return r;
}

ssize_t
full_read(int fd, void *p, size_t n)
{
	char *s = p;
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read_retry(fd, s + got, n - got);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

void
writeback_start(int fd)
{
	(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

int
fsync_dir(int dirfd, const char *path)
{
	int fd, r, saved;

	fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = fsync(fd);
	saved = errno;
	/* Closing a read-only descriptor cannot lose data: fsync's result is
	 * the answer, and a close error must not turn it into a failure. */
	(void)close(fd);
	errno = saved;
	return r;
}

int
read_fd_all(int fd, struct buf *b, size_t max)
{
	char chunk[65536];
	ssize_t r;

	buf_reset(b);
	for (;;) {
		r = read_retry(fd, chunk, sizeof chunk);
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;
		if (b->len + (size_t)r > max)
			return -2;
		buf_add(b, chunk, (size_t)r);
	}
}

int
read_file_at(int dirfd, const char *path, struct buf *b, size_t max)
{
	int fd, r, saved;

	buf_reset(b);
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	r = read_fd_all(fd, b, max);
	if (r != 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return r;
	}
	if (close(fd) < 0)
		return -1;
	return 0;
}

static int
fd_flag(int fd, int get, int set, int flag, int on)
{
	int fl = fcntl(fd, get);

	if (fl < 0)
		return -1;
	fl = on ? fl | flag : fl & ~flag;
	return fcntl(fd, set, fl) < 0 ? -1 : 0;
}

int fd_nonblock(int fd, int on) { return fd_flag(fd, F_GETFL, F_SETFL, O_NONBLOCK, on); }
int fd_cloexec(int fd, int on) { return fd_flag(fd, F_GETFD, F_SETFD, FD_CLOEXEC, on); }

int
fd_send(int sock, const void *p, size_t n, const int *fds, size_t nfd)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	ssize_t r;

	if (nfd > 8) {
		errno = EINVAL;
		return -1;
	}
	if (nfd > 0) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
	}
	do
		r = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if ((size_t)r != n) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

ssize_t
fd_recv(int sock, void *p, size_t cap, int *fds, size_t maxfd, size_t *nfd, int *trunc)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = p, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
	    .msg_controllen = sizeof u.buf };
	struct cmsghdr *c;
	ssize_t r;
	size_t k, i;
	int fd;

	*nfd = 0;
	*trunc = 0;
	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (*nfd < maxfd) {
				fds[(*nfd)++] = fd;
			} else {
				(void)close(fd);	/* not ours to keep */
				*trunc = 1;
			}
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		*trunc = 1;
	return r;
}
