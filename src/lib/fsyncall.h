/*
 * fsyncall.h: fsync many files and folders at once.  One fsync after
 * another costs a device flush each; issued together from several
 * threads, the block layer and the file system's journal merge them
 * (measured in scripts/bench/BENCHMARKS.md, "group commit").  For a
 * single-process writer that must make a group of files durable before
 * it goes on (weir-queued's group commit): it returns when every one of
 * them is done, each with its own result.
 *
 * The threads do nothing but fsync(2) on the descriptors they are given;
 * they are made at the first call and live as long as the process.
 *
 * Trusts: its caller's descriptors.  Config keys: none.
 */
#ifndef WEIR_FSYNCALL_H
#define WEIR_FSYNCALL_H

#include <stddef.h>

struct fsync_job {
	int fd;
	int err;	/* after fsync_all(): 0, or fsync's errno */
};

/* fsync every job's fd, several at once (a job whose fd is negative is
 * left as it is); returns the number of jobs whose err is not 0. */
size_t fsync_all(struct fsync_job *jobs, size_t n);

#endif
