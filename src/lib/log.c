/*
 * log.c: one line per event on stderr, in log.h's fixed form.  Lines are
 * built in a fixed buffer and written with one write(2), so lines from
 * concurrent processes sharing a pipe do not interleave.  The text is
 * formatted first, then copied into the line with every control byte
 * escaped (log.h), so no caller can split a line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"

static const char *progname = "weir";
static enum log_level level_now = LOG_NORMAL;
static int tool;
static unsigned long nlines;	/* written so far (log_lines) */

void
log_init(const char *name)
{
	const char *slash = strrchr(name, '/');

	progname = slash ? slash + 1 : name;
	tool = 0;
}

void
log_init_tool(const char *name)
{
	log_init(name);
	tool = 1;
}

const char *
log_progname(void)
{
	return progname;
}

void
log_set_level(enum log_level level)
{
	level_now = level;
}

int
log_verbose(void)
{
	return level_now == LOG_VERBOSE;
}

unsigned long
log_lines(void)
{
	return nlines;
}

/* The stamp and a space into out (size n), or "" under the journal. */
static size_t
stamp(char *out, size_t n)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct timeval tv;
	struct tm tm;
	size_t k;
	int r;

	if ((js && *js) || gettimeofday(&tv, NULL) < 0 || localtime_r(&tv.tv_sec, &tm) == NULL)
		return 0;
	k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
	if (k == 0)
		return 0;
	r = snprintf(out + k, n - k, ".%03ld", (long)(tv.tv_usec / 1000));
	k += r < 0 ? 0 : (size_t)r;
	if (k < n)
		k += strftime(out + k, n - k, "%z ", &tm);
	return k < n ? k : 0;
}

/* Append src to line[*n..max), escaping control bytes and backslashes. */
static void
put_escaped(char *line, size_t *n, size_t max, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p;

	for (p = (const unsigned char *)src; *p && *n < max; p++) {
		char e[4];
		size_t k = 0, i;

		if (*p == '\\')
			e[k++] = '\\', e[k++] = '\\';
		else if (*p == '\n')
			e[k++] = '\\', e[k++] = 'n';
		else if (*p == '\r')
			e[k++] = '\\', e[k++] = 'r';
		else if (*p == '\t')
			e[k++] = '\\', e[k++] = 't';
		else if (*p < 0x20 || *p == 0x7f) {
			e[k++] = '\\';
			e[k++] = 'x';
			e[k++] = hex[*p >> 4];
			e[k++] = hex[*p & 15];
		} else
			e[k++] = (char)*p;
		if (*n + k > max)
			break;
		for (i = 0; i < k; i++)
			line[(*n)++] = e[i];
	}
}

static void
vlog(const char *level, int err, const char *fmt, va_list ap)
{
	char line[2048], text[2048];
	size_t n, k;
	int r;

	if (tool) {
		n = 0;
		r = snprintf(line, sizeof line, "%s: %s: ", progname, level);
	} else {
		n = stamp(line, 64);
		r = snprintf(line + n, sizeof line - n, "%s[%ld]: %s: ", progname,
		    (long)getpid(), level);
	}
	n += r < 0 ? 0 : (size_t)r;
	if (n > sizeof line - 1)
		n = sizeof line - 1;
	r = vsnprintf(text, sizeof text, fmt, ap);
	k = r < 0 ? 0 : (size_t)r < sizeof text ? (size_t)r : sizeof text - 1;
	while (k > 0 && text[k - 1] == '\n')
		k--;	/* the caller's own line end */
	text[k] = '\0';
	put_escaped(line, &n, sizeof line - 1, text);
	if (err) {
		r = snprintf(text, sizeof text, ": %s", strerror(err));
		if (r < 0)
			text[0] = '\0';
		put_escaped(line, &n, sizeof line - 1, text);
	}
	line[n++] = '\n';
	nlines++;
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
log_debug(const char *fmt, ...)
{
	if (level_now == LOG_VERBOSE)
		LOGF("debug", 0);
}

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
