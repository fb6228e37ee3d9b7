/*
 * showq.c: see showq.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/decimal.h"
#include "lib/evloop.h"
#include "lib/io.h"
#include "mail/showq.h"

/* s as it was sent, but for bytes outside printable ASCII: '?'. */
static void
add_printable(struct buf *b, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		buf_addc(b, (unsigned char)s[i] >= ' ' && (unsigned char)s[i] <= '~' ? s[i] : '?');
}

int
showq_parse_request(const char *s, size_t n, enum qlist_format *f, struct buf *why)
{
	const char *nl = memchr(s, '\n', n);
	size_t len;

	if (nl == NULL) {
		if (n >= SHOWQ_REQ_MAX)
			buf_printf(why, "request longer than %d bytes", SHOWQ_REQ_MAX);
		else
			buf_adds(why, "request without its newline (truncated)");
		return -1;
	}
	len = (size_t)(nl - s) + 1;
	if (len > SHOWQ_REQ_MAX) {
		buf_printf(why, "request longer than %d bytes", SHOWQ_REQ_MAX);
		return -1;
	}
	if (len != n) {
		buf_adds(why, "bytes after the request line");
		return -1;
	}
	if (len == 5 && memcmp(s, "list\n", 5) == 0)
		*f = QLIST_TEXT;
	else if (len == 5 && memcmp(s, "json\n", 5) == 0)
		*f = QLIST_JSON;
	else if (len == 8 && memcmp(s, "summary\n", 8) == 0)
		*f = QLIST_SUMMARY;
	else {
		buf_adds(why, "unknown request \"");
		add_printable(why, s, len - 1);
		buf_adds(why, "\" (want \"list\", \"json\" or \"summary\")");
		return -1;
	}
	return 0;
}

/* A LEN at s[0..n) (lib/decimal.h), 15 digits at most (below 2^53):
 * its digits, or 0. */
static size_t
parse_len(const char *s, size_t n, unsigned long long *len)
{
	uint64_t v;
	size_t used = dec_prefix(s, n, 999999999999999ULL, &v);

	if (used > 0)
		*len = v;
	return used;
}

/* The REASON at s[i..n): one line of printable bytes, not empty. */
static int
parse_reason(const char *s, size_t i, size_t n, struct showq_head *h)
{
	size_t j;

	if (i >= n || n - i > SHOWQ_REASON_MAX)
		return -1;
	for (j = i; j < n; j++)
		if ((unsigned char)s[j] < ' ' || (unsigned char)s[j] > '~')
			return -1;
	h->reason_off = i;
	h->reason_len = n - i;
	return 0;
}

int
showq_parse_head(const char *s, size_t n, struct showq_head *h, struct buf *why)
{
	size_t used;

	memset(h, 0, sizeof *h);
	if (n >= 6 && memcmp(s, "ok ", 3) == 0 && (s[3] == '0' || s[3] == '1') && s[4] == ' ') {
		h->kind = SHOWQ_OK;
		h->rc = s[3] - '0';
		if ((used = parse_len(s + 5, n - 5, &h->len)) > 0 && 5 + used == n)
			return 0;
	} else if (n >= 5 && memcmp(s, "fail ", 5) == 0) {
		h->kind = SHOWQ_FAIL;
		if ((used = parse_len(s + 5, n - 5, &h->len)) > 0 && 5 + used < n &&
		    s[5 + used] == ' ' && parse_reason(s, 5 + used + 1, n, h) == 0)
			return 0;
	} else if (n >= 6 && memcmp(s, "error ", 6) == 0) {
		h->kind = SHOWQ_ERROR;
		if (parse_reason(s, 6, n, h) == 0)
			return 0;
	}
	buf_adds(why, "malformed answer \"");
	add_printable(why, s, n > 80 ? 80 : n);
	buf_adds(why, n > 80 ? "...\"" : "\"");
	return -1;
}

int
showq_needed(const char *queue_dir)
{
	int dfd, r;

	dfd = open(queue_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == EACCES;
	r = faccessat(dfd, "info", R_OK | X_OK, AT_EACCESS) < 0 && errno == EACCES;
	(void)close(dfd);
	return r;
}

/* Wait until fd is readable, or the deadline: 0, or -1 (errno ETIMEDOUT). */
static int
wait_readable(int fd, uint64_t deadline)
{
	struct pollfd p = { fd, POLLIN, 0 };
	uint64_t now;
	int r;

	for (;;) {
		now = clock_mono_ms();
		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		r = poll(&p, 1, (int)(deadline - now));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* One read with the deadline: bytes, 0 at the end, -1 (errno). */
static ssize_t
read_by(int fd, char *p, size_t n, uint64_t deadline)
{
	if (wait_readable(fd, deadline) < 0)
		return -1;
	return read_retry(fd, p, n);
}

int
showq_ask(const char *path, enum qlist_format f, int outfd, int timeout_ms, struct buf *why)
{
	uint64_t deadline = clock_mono_ms() + (uint64_t)timeout_ms;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct sockaddr_un sa;
	struct showq_head h;
	struct buf reason = BUF_INIT;
	char in[SHOWQ_HEAD_MAX + 4096];
	unsigned long long got = 0;
	size_t have = 0, nl, start;
	const char *req = f == QLIST_JSON ? "json\n" : f == QLIST_SUMMARY ? "summary\n" : "list\n";
	ssize_t r;
	int fd, rc = -1;

	if (strlen(path) >= sizeof sa.sun_path) {
		buf_printf(why, "weir-showq: socket path too long: %s", path);
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		buf_printf(why, "weir-showq: socket: %s", strerror(errno));
		return -1;
	}
	/* A connect waits for room in weir-showq's backlog as long as
	 * SO_SNDTIMEO says (AF_UNIX); so does the request's write. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
		buf_printf(why, "weir-showq: setsockopt: %s", strerror(errno));
		goto out;
	}
	while (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == ENOENT || errno == ECONNREFUSED)
			buf_printf(why, "weir is not running (weir-showq: connect %s: %s)", path,
			    strerror(errno));
		else
			buf_printf(why, "weir-showq: connect %s: %s", path, strerror(errno));
		goto out;
	}
	if (full_write(fd, req, strlen(req)) < 0) {
		buf_printf(why, "weir-showq: send the request: %s", strerror(errno));
		goto out;
	}
	/* The header line. */
	for (;;) {
		char *e = memchr(in, '\n', have);

		if (e) {
			nl = (size_t)(e - in);
			break;
		}
		if (have > SHOWQ_HEAD_MAX) {
			buf_printf(why, "weir-showq: answer header longer than %d bytes",
			    SHOWQ_HEAD_MAX);
			goto out;
		}
		r = read_by(fd, in + have, sizeof in - have, deadline);
		if (r < 0) {
			buf_printf(why, "weir-showq: read the answer: %s", strerror(errno));
			goto out;
		}
		if (r == 0) {
			buf_adds(why, "weir-showq closed the connection without an answer");
			goto out;
		}
		have += (size_t)r;
	}
	if (showq_parse_head(in, nl, &h, &reason) < 0) {
		buf_adds(why, "weir-showq: ");
		buf_add(why, reason.s, reason.len);
		goto out;
	}
	buf_reset(&reason);
	buf_add(&reason, in + h.reason_off, h.reason_len);
	if (h.kind == SHOWQ_ERROR) {
		buf_adds(why, "weir-showq refused the request: ");
		buf_add(why, reason.s, reason.len);
		goto out;
	}
	/* The listing: what came with the header, then the rest. */
	start = nl + 1;
	for (;;) {
		size_t n = have - start;

		if (got + n > h.len) {
			buf_printf(why, "weir-showq sent more than the %llu bytes it announced", h.len);
			goto out;
		}
		if (n > 0 && full_write(outfd, in + start, n) < 0) {
			buf_printf(why, "write: %s", strerror(errno));
			goto out;
		}
		got += n;
		start = have = 0;
		r = read_by(fd, in, sizeof in, deadline);
		if (r < 0) {
			buf_printf(why, "weir-showq: read the listing: %s", strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		have = (size_t)r;
	}
	if (got != h.len) {
		buf_printf(why, "weir-showq's listing was cut short (%llu of %llu bytes)", got, h.len);
		goto out;
	}
	if (h.kind == SHOWQ_FAIL) {
		buf_add(why, reason.s, reason.len);
		rc = -2;
	} else
		rc = h.rc;
out:
	(void)close(fd);
	buf_free(&reason);
	return rc;
}
