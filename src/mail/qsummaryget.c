/*
 * qsummaryget.c: see qsummary.h: weir-showq's summary read back, and the
 * summary had the way this process may have it (the reading side, with
 * json-c; weir-showq links only qsummary.c).
 * Trusts: weir-showq's answer as far as qsummary_parse takes it.
 * Config keys: queue_dir, queue_split, showq_socket.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/jsonparse.h"
#include "lib/timefmt.h"
#include "mail/qsummary.h"
#include "mail/showq.h"

/* A count of the answer: 0 to 2^53. */
static int
count(struct json_object *o, const char *key, long long *v)
{
	return jp_u53(jp_get(o, key), v);
}

int
qsummary_parse(const char *text, size_t len, struct qsummary *s, struct buf *why)
{
	static const char *const keys[] = { "messages", "not_yet_preprocessed",
		"oldest_queue_time", "sessions", NULL };
	static const char *const skeys[] = { "upstream", "pid", "since", "messages", NULL };
	struct json_object *doc, *ses, *e;
	struct schedsession ss;
	const char *t, *up;
	long long m, todo, since;
	size_t i;
	int rc = -1;

	memset(s, 0, sizeof *s);
	if ((doc = json_parse_object(text, len, QSUMMARY_MAX, why)) == NULL)
		return -1;
	t = jp_str(jp_get(doc, "oldest_queue_time"));
	ses = jp_get(doc, "sessions");
	if (!jp_only_keys(doc, keys) || !json_object_object_get_ex(doc, "sessions", NULL) ||
	    !json_object_object_get_ex(doc, "oldest_queue_time", NULL) ||
	    count(doc, "messages", &m) < 0 ||
	    count(doc, "not_yet_preprocessed", &todo) < 0 || todo > m ||
	    (jp_get(doc, "oldest_queue_time") && (t == NULL || date_iso_parse(t) <= 0)) ||
	    (ses && !json_object_is_type(ses, json_type_array))) {
		buf_adds(why, "not a queue summary");
		goto out;
	}
	s->messages = (unsigned long long)m;
	s->todo = (unsigned long long)todo;
	s->oldest = t ? date_iso_parse(t) : 0;
	s->have_sessions = ses != NULL;
	for (i = 0; i < jp_len(ses); i++) {
		e = jp_at(ses, i);
		up = jp_str(jp_get(e, "upstream"));
		t = jp_str(jp_get(e, "since"));
		if (!jp_only_keys(e, skeys) || up == NULL || !policy_valid_name(up) ||
		    count(e, "pid", &ss.pid) < 0 || ss.pid == 0 || t == NULL ||
		    (since = date_iso_parse(t)) < 0 || count(e, "messages", &ss.messages) < 0) {
			buf_printf(why, "session %zu is not one", i);
			goto out;
		}
		snprintf(ss.upstream, sizeof ss.upstream, "%s", up);
		ss.since = since;
		qsummary_add_session(s, &ss);
	}
	rc = 0;
out:
	if (rc < 0)
		qsummary_free(s);
	json_object_put(doc);
	return rc;
}

/* Asked of weir-showq. */
static int
by_showq(const char *sock, int timeout_ms, struct qsummary *s, struct buf *why)
{
	struct buf text = BUF_INIT, w = BUF_INIT;
	int fd, k, rc = -1;

	if ((fd = memfd_create("weir-showq", MFD_CLOEXEC)) < 0) {
		buf_printf(why, "memfd_create: %s", strerror(errno));
		return -1;
	}
	if ((k = showq_ask(sock, QLIST_SUMMARY, fd, timeout_ms, &w)) < 0)
		buf_add(why, w.s, w.len);
	else if (lseek(fd, 0, SEEK_SET) < 0 || (k = read_fd_all(fd, &text, QSUMMARY_MAX)) != 0)
		buf_printf(why, "weir-showq's summary: %s", k == -2 ? "too long" : strerror(errno));
	else if (qsummary_parse(text.s ? text.s : "", text.len, s, &w) < 0)
		buf_printf(why, "weir-showq's summary: %s", buf_cstr(&w));
	else
		rc = 0;
	close(fd);
	buf_free(&text);
	buf_free(&w);
	return rc;
}

int
qsummary_get(const struct weir_config *cfg, int timeout_ms, struct qsummary *s,
    const char **from, struct buf *why)
{
	struct queue q;
	int rc;

	memset(s, 0, sizeof *s);
	if (cfg->showq_socket && showq_needed(cfg->queue_dir) == 1) {
		*from = cfg->showq_socket;
		return by_showq(cfg->showq_socket, timeout_ms, s, why);
	}
	*from = cfg->queue_dir;
	if (queue_open(&q, cfg->queue_dir, cfg->queue_split) < 0) {
		buf_printf(why, "%s: %s", cfg->queue_dir, strerror(errno));
		return -1;
	}
	rc = qsummary_read(&q, s, why);
	queue_close(&q);
	return rc;
}

