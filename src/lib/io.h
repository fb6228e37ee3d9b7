/*
 * io.h: safe I/O.  full_write() loops over short writes and EINTR;
 * full_read() loops until n bytes or end of file; every result must be
 * checked.  fsync_dir() makes a directory's entries durable, which Linux
 * needs after link/rename/unlink and which qmail left out.
 */
#ifndef WEIR_IO_H
#define WEIR_IO_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/buf.h"

#define MUST_CHECK __attribute__((warn_unused_result))

/* 0 on success, -1 with errno set. */
int full_write(int fd, const void *p, size_t n) MUST_CHECK;
/* Bytes read (< n only at end of file), or -1 with errno set. */
ssize_t full_read(int fd, void *p, size_t n) MUST_CHECK;
/* One read(2), retried on EINTR. */
ssize_t read_retry(int fd, void *p, size_t n) MUST_CHECK;
/* Start writing fd's dirty pages to the disk, without waiting
 * (sync_file_range(2), SYNC_FILE_RANGE_WRITE): a hint, never a
 * guarantee; durability is still fsync's, and an error here is fsync's
 * to report.  Started for every file of a group before the first fsync,
 * the block allocations of all of them go into one journal commit on
 * ext4 instead of one commit each (BENCHMARKS.md, issue 26). */
void writeback_start(int fd);
/* fsync the directory at path (relative to dirfd, or AT_FDCWD). */
int fsync_dir(int dirfd, const char *path) MUST_CHECK;
/* Read a whole file (relative to dirfd) into b, at most max bytes:
 * 0 ok, -1 error (errno), -2 larger than max. */
int read_file_at(int dirfd, const char *path, struct buf *b, size_t max) MUST_CHECK;
/* The same from an open descriptor, to its end. */
int read_fd_all(int fd, struct buf *b, size_t max) MUST_CHECK;
/* Set or clear O_NONBLOCK / FD_CLOEXEC. */
int fd_nonblock(int fd, int on) MUST_CHECK;
int fd_cloexec(int fd, int on) MUST_CHECK;
/* One datagram of n bytes on a SOCK_SEQPACKET socket, carrying nfd
 * descriptors (SCM_RIGHTS, at most 8): 0, or -1 with errno. */
int fd_send(int sock, const void *p, size_t n, const int *fds, size_t nfd) MUST_CHECK;
/* One datagram into p[0..cap), with up to maxfd of the descriptors it
 * carries in fds[0..*nfd) (close-on-exec; any more are closed): its
 * length, 0 with *nfd == 0 at end of file, or -1 with errno.  *trunc:
 * the datagram was longer than cap, or descriptors were lost. */
ssize_t fd_recv(int sock, void *p, size_t cap, int *fds, size_t maxfd, size_t *nfd,
    int *trunc) MUST_CHECK;

#endif
