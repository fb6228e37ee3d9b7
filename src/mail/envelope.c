/*
 * envelope.c: parsers for qmail's envelope formats; see envelope.h.
 * Every parser works on bytes with explicit lengths and rejects anything
 * that does not fit the format exactly, naming the byte offset.
 */
#include <stdio.h>
#include <string.h>

#include "mail/address.h"
#include "mail/envelope.h"

const char *
envelope_addr_problem(const char *addr, size_t len)
{
	size_t i;

	if (len > ADDR_MAX)
		return "address longer than 1002 bytes";
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)addr[i];

		if (c == '\0')
			return "NUL byte in address";
		if (c < 0x20 || c == 0x7f)
			return "control character in address";
	}
	return NULL;
}

/* Streaming parser states. */
enum { S_F, S_SENDER, S_NEXT, S_RCPT, S_DONE };

void
env_parser_init(struct env_parser *p)
{
	memset(p, 0, sizeof *p);
	p->state = S_F;
}

static enum env_status
env_fail(struct env_parser *p, enum env_status st, const char *what)
{
	snprintf(p->why, sizeof p->why, "envelope byte %zu: %s", p->pos, what);
	return st;
}

enum env_status
env_parser_feed(struct env_parser *p, const char *in, size_t n, size_t *used,
    struct buf *out)
{
	size_t i = 0, take, room;
	const char *nul, *why;

	while (i < n && p->state != S_DONE) {
		switch (p->state) {
		case S_F:
			if (in[i] != 'F') {
				*used = i;
				return env_fail(p, ENV_FORMAT, "expected 'F' (the sender record)");
			}
			buf_addc(out, 'F');
			p->addr_start = out->len;
			p->alen = 0;
			p->state = S_SENDER;
			i++, p->pos++;
			break;
		case S_NEXT:
			if (in[i] == '\0') {
				i++, p->pos++;
				if (p->nrcpt == 0) {
					*used = i;
					return env_fail(p, ENV_FORMAT, "no recipients");
				}
				p->state = S_DONE;
				break;
			}
			if (in[i] != 'T') {
				*used = i;
				return env_fail(p, ENV_FORMAT,
				    "expected 'T' (a recipient) or NUL (the end)");
			}
			buf_addc(out, 'T');
			p->addr_start = out->len;
			p->alen = 0;
			p->state = S_RCPT;
			i++, p->pos++;
			break;
		case S_SENDER:
		case S_RCPT:
			nul = memchr(in + i, '\0', n - i);
			take = nul ? (size_t)(nul - (in + i)) : n - i;
			/* The first defect by position decides, so that the
			 * outcome does not depend on how the input was split:
			 * a control byte among the first ADDR_MAX bytes is
			 * FORMAT, byte ADDR_MAX + 1 of the address TOOLONG. */
			room = ADDR_MAX - p->alen;
			why = envelope_addr_problem(in + i, take < room ? take : room);
			if (why) {
				*used = i;
				return env_fail(p, ENV_FORMAT, why);
			}
			if (take > room) {
				*used = i;
				return env_fail(p, ENV_TOOLONG, "address longer than 1002 bytes");
			}
			buf_add(out, in + i, take);
			memcpy(p->addr + p->alen, in + i, take);
			p->alen += take;
			i += take, p->pos += take;
			if (nul) {
				/* Whole now: one an SMTP client can write as a path. */
				why = addr_path_problem(p->addr, p->alen);
				if (why) {
					*used = i;
					return env_fail(p, ENV_FORMAT, why);
				}
				buf_addc(out, '\0');
				i++, p->pos++;
				if (p->state == S_RCPT)
					p->nrcpt++;
				p->state = S_NEXT;
			}
			break;
		}
	}
	*used = i;
	return p->state == S_DONE ? ENV_DONE : ENV_MORE;
}

int
qrec_next(const char *s, size_t n, size_t *off, struct qrec *r, const char **why)
{
	const char *nul;
	size_t o = *off;

	if (o >= n)
		return 0;
	nul = memchr(s + o, '\0', n - o);
	if (nul == NULL) {
		*why = "last record has no NUL terminator (truncated file)";
		return -1;
	}
	r->type = s[o];
	r->addr = s + o + 1;
	r->len = (size_t)(nul - r->addr);
	if (r->type == '\0') {
		*why = "empty record";
		return -1;
	}
	if (r->len > ADDR_MAX) {
		*why = "address longer than 1002 bytes";
		return -1;
	}
	*off = (size_t)(nul - s) + 1;
	return 1;
}

/* A decimal number of the whole record, as qmail writes uids and pids. */
static int
rec_number(const struct qrec *r, unsigned long *v)
{
	size_t i;

	if (r->len == 0 || r->len > 19)
		return -1;
	*v = 0;
	for (i = 0; i < r->len; i++) {
		if (r->addr[i] < '0' || r->addr[i] > '9')
			return -1;
		*v = *v * 10 + (unsigned long)(r->addr[i] - '0');
	}
	return 0;
}

#define BAD(...) do { buf_printf(why, __VA_ARGS__); return -1; } while (0)

int
todo_parse(const char *s, size_t n, struct todo_env *e, struct buf *why)
{
	struct qrec r;
	const char *w;
	size_t off = 0, start;
	int got;

	memset(e, 0, sizeof *e);
	if (qrec_next(s, n, &off, &r, &w) != 1 || r.type != 'u' || rec_number(&r, &e->uid) < 0)
		BAD("byte 0: expected u<uid>");
	start = off;
	if (qrec_next(s, n, &off, &r, &w) != 1 || r.type != 'p' || rec_number(&r, &e->pid) < 0)
		BAD("byte %zu: expected p<pid>", start);
	start = off;
	if (qrec_next(s, n, &off, &r, &w) != 1 || r.type != 'F')
		BAD("byte %zu: expected F<sender>", start);
	e->sender = r;
	e->rcpt_off = off;
	for (;;) {
		start = off;
		got = qrec_next(s, n, &off, &r, &w);
		if (got == 0)
			break;
		if (got < 0)
			BAD("byte %zu: %s", start, w);
		if (r.type != 'T')
			BAD("byte %zu: expected T<recipient>, got type 0x%02x", start,
			    (unsigned char)r.type);
		e->nrcpt++;
	}
	return 0;
}

int
todo_check_addrs(const char *s, size_t n, const struct todo_env *e, struct buf *why)
{
	struct qrec r;
	const char *w;
	size_t off = e->rcpt_off, start = off;

	if ((w = envelope_addr_problem(e->sender.addr, e->sender.len)) != NULL)
		BAD("sender: %s", w);
	while (qrec_next(s, n, &off, &r, &w) == 1) {
		if ((w = envelope_addr_problem(r.addr, r.len)) != NULL)
			BAD("byte %zu: recipient: %s", start, w);
		start = off;
	}
	return 0;
}

int
info_parse(const char *s, size_t n, struct qrec *sender, struct buf *why)
{
	size_t off = 0;
	const char *w = "empty file";

	if (qrec_next(s, n, &off, sender, &w) != 1)
		BAD("byte 0: %s", w);
	if (sender->type != 'F')
		BAD("byte 0: expected F<sender>");
	if (off != n)
		BAD("byte %zu: data after the sender record", off);
	return 0;
}

int
rcptfile_parse(const char *s, size_t n, size_t *todo, size_t *done, struct buf *why)
{
	struct qrec r;
	const char *w;
	size_t off = 0, start;
	int got;

	*todo = *done = 0;
	for (;;) {
		start = off;
		got = qrec_next(s, n, &off, &r, &w);
		if (got == 0)
			break;
		if (got < 0)
			BAD("byte %zu: %s", start, w);
		if (r.type == 'T')
			(*todo)++;
		else if (r.type == 'D')
			(*done)++;
		else
			BAD("byte %zu: expected T or D, got 0x%02x", start, (unsigned char)r.type);
	}
	return 0;
}
