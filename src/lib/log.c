/*
 * log.c: one line per event on stderr, "prog: level: text[: errno text]".
 * Messages are built in a fixed buffer and written with one write(2), so
 * lines from concurrent processes sharing a pipe do not interleave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"

static const char *progname = "weir";

void
log_init(const char *name)
{
	const char *slash = strrchr(name, '/');

	progname = slash ? slash + 1 : name;
}

const char *
log_progname(void)
{
	return progname;
}

static void
vlog(const char *level, int err, const char *fmt, va_list ap)
{
	char line[2048];
	size_t n;
	int r;

	r = snprintf(line, sizeof line, "%s: %s: ", progname, level);
	n = r < 0 ? 0 : (size_t)r;
	if (n < sizeof line) {
		r = vsnprintf(line + n, sizeof line - n, fmt, ap);
		n += r < 0 ? 0 : (size_t)r;
	}
	if (err && n < sizeof line) {
		r = snprintf(line + n, sizeof line - n, ": %s", strerror(err));
		n += r < 0 ? 0 : (size_t)r;
	}
	if (n > sizeof line - 2)
		n = sizeof line - 2;	/* truncated: keep it one line */
	line[n++] = '\n';
	/* Nothing sensible to do if stderr is gone. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

#define LOGF(level, err) do { va_list ap; va_start(ap, fmt); \
	vlog(level, err, fmt, ap); va_end(ap); } while (0)

void log_info(const char *fmt, ...) { LOGF("info", 0); }
void log_line(const char *level, int err, const char *fmt, ...) { LOGF(level, err); }
void log_warnx(const char *fmt, ...) { LOGF("warning", 0); }

void
log_warn(const char *fmt, ...)
{
	int err = errno;

	LOGF("warning", err);
	errno = err;
}

void
fatal(int status, const char *fmt, ...)
{
	int err = errno;

	LOGF("fatal", err);
	_exit(status);
}

void
fatalx(int status, const char *fmt, ...)
{
	LOGF("fatal", 0);
	_exit(status);
}

void
panic(const char *fmt, ...)
{
	LOGF("panic", 0);
	abort();
}
