/*
 * gateclient.c: see gateclient.h.
 *
 * Trusts: the gate's replies only after gp_parse_reply.  Config keys:
 * none (the caller passes gate_socket).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/gateclient.h"

/* gc_connect, every wait on the socket (its connect too: a gate that
 * does not accept) at most timeout_ms when it is > 0; a non-blocking
 * socket when it is < 0. */
static int
connect_by(struct gate_client *gc, const char *path, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct sockaddr_un sa;
	int fd, saved;

	memset(gc, 0, sizeof *gc);
	gc->fd = -1;
	if (strlen(path) >= sizeof sa.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (timeout_ms < 0 ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
	/* An AF_UNIX connect waits for room in the listen backlog as long
	 * as SO_SNDTIMEO says. */
	if (timeout_ms > 0 && (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0))
		goto fail;
	while (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		if (errno != EINTR)
			goto fail;
	gc->fd = fd;
	return 0;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int
gc_connect(struct gate_client *gc, const char *path)
{
	return connect_by(gc, path, 0);
}

const char *
gc_connect_status(struct gate_client *gc, const char *sock, const char *rsock, int timeout_ms)
{
	int e;

	if (connect_by(gc, sock, timeout_ms) == 0)
		return sock;
	e = errno;
	if (rsock != NULL && connect_by(gc, rsock, timeout_ms) == 0)
		return rsock;
	errno = e;
	return NULL;
}

void
gc_close(struct gate_client *gc)
{
	if (gc->fd >= 0)
		close(gc->fd);	/* nothing to do about an error here */
	gc->fd = -1;
	buf_free(&gc->in);
	buf_free(&gc->status);
	gc->off = 0;
}

static int
send_req(struct gate_client *gc, const struct gp_req *r)
{
	struct buf b = BUF_INIT;
	int rc;

	gp_fmt_request(&b, r);
	rc = full_write(gc->fd, b.s, b.len);
	buf_free(&b);
	return rc;
}

int
gc_acquire(struct gate_client *gc, uint32_t tag, const char *upstream, const char *cls,
    const char *sender, uint32_t messages, uint32_t recipients, uint32_t connections)
{
	return gc_acquire_unless(gc, tag, upstream, cls, sender, messages, recipients,
	    connections, NULL);
}

int
gc_acquire_unless(struct gate_client *gc, uint32_t tag, const char *upstream, const char *cls,
    const char *sender, uint32_t messages, uint32_t recipients, uint32_t connections,
    const struct route_when *unless)
{
	struct gp_req r;
	int k;

	memset(&r, 0, sizeof r);
	route_when_none(&r.unless);
	for (k = 0; unless && k < RK_COUNT; k++) {
		if (unless->s[k] != RK_OFF && (unless->s[k] < 0 || unless->s[k] > RK_MAX_S)) {
			errno = EINVAL;
			return -1;
		}
		r.unless.s[k] = unless->s[k];
	}
	r.verb = GP_ACQUIRE;
	r.tag = tag;
	if (!gp_valid_name(upstream) || (cls && *cls && !gp_valid_name(cls)) ||
	    (sender && *sender && !gp_valid_word(sender, GP_SENDER_MAX)) || tag == 0) {
		errno = EINVAL;
		return -1;
	}
	strcpy(r.upstream, upstream);
	if (cls)
		strcpy(r.cls, cls);
	if (sender)
		strcpy(r.sender, sender);
	r.w[UNIT_MESSAGES] = messages;
	r.w[UNIT_RECIPIENTS] = recipients;
	r.w[UNIT_CONNECTIONS] = connections;
	return send_req(gc, &r);
}

/* A reply text as it may travel into out (GP_TEXT_MAX + 1 bytes): bytes
 * that cannot, '?'; cut to GP_TEXT_MAX; "?" for none. */
static void
text_copy(char *out, const char *text)
{
	size_t i;

	for (i = 0; text && text[i] && i < GP_TEXT_MAX; i++)
		out[i] = (text[i] < 0x20 || text[i] > 0x7e) ? '?' : text[i];
	if (i == 0)
		out[i++] = '?';
	out[i] = '\0';
}

/* A REPORT's or SETTLE's outcome into r: -1 (EINVAL) if at is out of range. */
static int
outcome_fill(struct gp_req *r, enum gp_outcome o, uint32_t accepted, int64_t at,
    const char *text)
{
	if (at < -1 || at > (int64_t)GP_AT_MAX) {
		errno = EINVAL;
		return -1;
	}
	r->outcome = o;
	r->accepted = accepted;
	r->at = at;
	if (o == GP_THROTTLED || o == GP_QUOTA || o == GP_AUTHFAIL || o == GP_UNREACHED ||
	    o == GP_NOGREETING)
		text_copy(r->text, text);
	return 0;
}

int
gc_report(struct gate_client *gc, uint32_t tag, enum gp_outcome o, uint32_t accepted,
    int64_t at, const char *text)
{
	struct gp_req r;

	memset(&r, 0, sizeof r);
	if (tag == 0 || outcome_fill(&r, o, accepted, at, text) < 0) {
		errno = EINVAL;
		return -1;
	}
	r.verb = GP_REPORT;
	r.tag = tag;
	return send_req(gc, &r);
}

int
gc_settle(struct gate_client *gc, const char *upstream, uint64_t grant, enum gp_outcome o,
    uint32_t accepted, int64_t at, const char *text)
{
	struct gp_req r;

	memset(&r, 0, sizeof r);
	if (grant == 0 || o == GP_UNKNOWN || !gp_valid_name(upstream) ||
	    outcome_fill(&r, o, accepted, at, text) < 0) {
		errno = EINVAL;
		return -1;
	}
	r.verb = GP_SETTLE;
	snprintf(r.upstream, sizeof r.upstream, "%s", upstream);
	r.grant = grant;
	return send_req(gc, &r);
}

int gc_report_sent(struct gate_client *gc, uint32_t tag, uint32_t accepted, int64_t at_mono_ms)
{ return gc_report(gc, tag, GP_SENT, accepted, at_mono_ms, NULL); }
int gc_report_refund(struct gate_client *gc, uint32_t tag)
{ return gc_report(gc, tag, GP_REFUND, 0, -1, NULL); }
int gc_report_unknown(struct gate_client *gc, uint32_t tag)
{ return gc_report(gc, tag, GP_UNKNOWN, 0, -1, NULL); }
int gc_report_nomail(struct gate_client *gc, uint32_t tag)
{ return gc_report(gc, tag, GP_NOMAIL, 0, -1, NULL); }
int gc_report_throttled(struct gate_client *gc, uint32_t tag, const char *reply)
{ return gc_report(gc, tag, GP_THROTTLED, 0, -1, reply); }
int gc_report_authfail(struct gate_client *gc, uint32_t tag, const char *reply)
{ return gc_report(gc, tag, GP_AUTHFAIL, 0, -1, reply); }

/* A request of a tag alone (CANCEL, START), or none (STARTS). */
static int
tag_req(struct gate_client *gc, enum gp_verb verb, uint32_t tag)
{
	struct gp_req r;

	if (tag == 0 && verb != GP_STARTS) {
		errno = EINVAL;
		return -1;
	}
	memset(&r, 0, sizeof r);
	r.verb = verb;
	r.tag = tag;
	return send_req(gc, &r);
}

int gc_cancel(struct gate_client *gc, uint32_t tag) { return tag_req(gc, GP_CANCEL, tag); }
int gc_start(struct gate_client *gc, uint32_t tag) { return tag_req(gc, GP_START, tag); }
int gc_starts(struct gate_client *gc) { return tag_req(gc, GP_STARTS, 0); }

int
gc_status(struct gate_client *gc, int json)
{
	struct gp_req r;

	memset(&r, 0, sizeof r);
	r.verb = GP_STATUS;
	r.json = json;
	return send_req(gc, &r);
}

int
gc_status_history(struct gate_client *gc, unsigned secs)
{
	struct gp_req r;

	if (secs == 0 || secs > GP_HISTORY_MAX_S) {
		errno = EINVAL;
		return -1;
	}
	memset(&r, 0, sizeof r);
	r.verb = GP_STATUS;
	r.json = 1;
	r.history_s = secs;
	return send_req(gc, &r);
}

int
gc_refused(struct gate_client *gc, const char *upstream, const char *why)
{
	struct gp_req r;

	if (!gp_valid_name(upstream)) {
		errno = EINVAL;
		return -1;
	}
	memset(&r, 0, sizeof r);
	r.verb = GP_REFUSED;
	strcpy(r.upstream, upstream);
	text_copy(r.text, why);
	return send_req(gc, &r);
}

int
gc_resume(struct gate_client *gc, const char *upstream)
{
	struct gp_req r;

	if (!gp_valid_name(upstream)) {
		errno = EINVAL;
		return -1;
	}
	memset(&r, 0, sizeof r);
	r.verb = GP_RESUME;
	strcpy(r.upstream, upstream);
	return send_req(gc, &r);
}

int
gc_counts(struct gate_client *gc, const char *upstream, const uint64_t counts[GP_NCOUNTS])
{
	struct gp_req r;
	size_t i;

	if (!gp_valid_name(upstream)) {
		errno = EINVAL;
		return -1;
	}
	memset(&r, 0, sizeof r);
	r.verb = GP_COUNTS;
	strcpy(r.upstream, upstream);
	for (i = 0; i < GP_NCOUNTS; i++) {
		if (counts[i] > GP_COUNT_MAX) {
			errno = EINVAL;
			return -1;
		}
		r.counts[i] = counts[i];
	}
	return send_req(gc, &r);
}

int
gc_fill(struct gate_client *gc)
{
	ssize_t n;

	/* Drop what has been parsed before growing. */
	if (gc->off > 0) {
		memmove(gc->in.s, gc->in.s + gc->off, gc->in.len - gc->off);
		gc->in.len -= gc->off;
		gc->off = 0;
	}
	buf_reserve(&gc->in, 4096);
	n = read_retry(gc->fd, gc->in.s + gc->in.len, 4096);
	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	gc->in.len += (size_t)n;
	gc->in.s[gc->in.len] = '\0';
	return 1;
}

int
gc_next_reply(struct gate_client *gc, struct gp_reply *r, const char **why)
{
	const char *p = gc->in.s + gc->off;
	size_t avail = gc->in.len - gc->off, ll;
	int f;

	if (avail == 0)
		return 0;
	f = gp_frame(p, avail, &ll);
	if (f == 0)
		return 0;
	if (f < 0) {
		*why = "reply line too long";
		return -1;
	}
	if (gp_parse_reply(p, ll - 1, r, why) != GP_OK)
		return -1;
	if (r->verb == GP_R_STATUS) {
		if (avail - ll < r->length)
			return 0;	/* the whole body first */
		buf_reset(&gc->status);
		buf_add(&gc->status, p + ll, r->length);
		ll += r->length;
	}
	gc->off += ll;
	return 1;
}

int
gc_wait_reply(struct gate_client *gc, struct gp_reply *r, const char **why)
{
	int n;

	for (;;) {
		n = gc_next_reply(gc, r, why);
		if (n != 0)
			return n;
		n = gc_fill(gc);
		if (n < 0) {
			*why = strerror(errno);
			return -1;
		}
		if (n == 0)
			return 0;
	}
}
