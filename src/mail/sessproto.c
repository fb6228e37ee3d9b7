/*
 * sessproto.c: the kept-session datagrams; see sessproto.h for the
 * grammar.
 *
 * Trusts: nothing.  Config keys: none.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/envelope.h"
#include "mail/queue.h"
#include "mail/sessproto.h"

#define TLS_WORD	"tls"
#define READY_WORD	"ready"
#define CLOSING_WORD	"closing"

const char *
sp_kind_name(enum sp_kind k)
{
	switch (k) {
	case SP_TLS: return "tls";
	case SP_MESSAGE: return "message";
	case SP_READY: return READY_WORD;
	case SP_CLOSING: return CLOSING_WORD;
	}
	return "?";
}

void
sp_fmt_tls(struct buf *b, const void *der, size_t n)
{
	if (n == 0 || n > SESSION_TLS_MAX)
		panic("sessproto: a TLS session of %zu bytes", n);
	buf_add(b, TLS_WORD, sizeof TLS_WORD);	/* with its NUL */
	buf_add(b, der, n);
}

size_t
sp_message_len(const char *qid, const char *sender, const char *const *rcpts, size_t n)
{
	size_t i, len = strlen(qid) + 1 + strlen(sender) + 1;

	for (i = 0; i < n; i++)
		len += strlen(rcpts[i]) + 1;
	return len;
}

void
sp_fmt_message(struct buf *b, const char *qid, const char *sender, const char *const *rcpts,
    size_t n)
{
	size_t i;

	if (n == 0 || sp_message_len(qid, sender, rcpts, n) > SESSION_REQUEST_MAX)
		panic("sessproto: a message request of %zu recipients does not fit", n);
	buf_add(b, qid, strlen(qid) + 1);
	buf_add(b, sender, strlen(sender) + 1);
	for (i = 0; i < n; i++)
		buf_add(b, rcpts[i], strlen(rcpts[i]) + 1);
}

void
sp_fmt_word(struct buf *b, enum sp_kind kind, const void *der, size_t n)
{
	if (kind == SP_CLOSING) {
		buf_adds(b, CLOSING_WORD);
		return;
	}
	if (kind != SP_READY || (der && (n == 0 || n > SESSION_TLS_MAX)))
		panic("sessproto: no word %d with %zu bytes", (int)kind, n);
	buf_adds(b, READY_WORD);
	if (der) {
		buf_addc(b, '\0');
		buf_add(b, der, n);
	}
}

static int
bad(const char **why, const char *what)
{
	*why = what;
	return -1;
}

/* The message request p[0..n) into r (its pointers into p). */
static int
parse_message(const char *p, size_t n, struct sp_request *r, const char **why)
{
	struct timespec t;
	unsigned long inode;
	size_t i, k = 0, nfield = 0, len;

	if (n > SESSION_REQUEST_MAX)
		return bad(why, "a message request longer than SESSION_REQUEST_MAX");
	if (n == 0 || p[n - 1] != '\0')
		return bad(why, "a message request that does not end in NUL");
	for (i = 0; i < n; i++)
		nfield += p[i] == '\0';
	if (nfield < 3)
		return bad(why, "a message request without a recipient");
	r->qid = p;
	if (queue_parse_msgid(r->qid, &inode, &t) < 0)
		return bad(why, "a malformed message id");
	r->sender = r->qid + strlen(r->qid) + 1;
	if (envelope_addr_problem(r->sender, strlen(r->sender)) != NULL)
		return bad(why, "a sender that cannot stand in an envelope");
	r->rcpts = xcalloc(nfield - 2, sizeof *r->rcpts);
	for (i = (size_t)(r->sender - p) + strlen(r->sender) + 1; i < n; i += len + 1) {
		len = strlen(p + i);
		if (len == 0 || envelope_addr_problem(p + i, len) != NULL) {
			sp_request_free(r);
			return bad(why, len == 0 ? "an empty recipient" :
			    "a recipient that cannot stand in an envelope");
		}
		r->rcpts[k++] = p + i;
	}
	r->nrcpt = k;
	return 0;
}

int
sp_parse_request(const char *p, size_t n, size_t nfd, struct sp_request *r, const char **why)
{
	memset(r, 0, sizeof *r);
	if (nfd == 0 && n >= sizeof TLS_WORD && memcmp(p, TLS_WORD, sizeof TLS_WORD) == 0) {
		r->kind = SP_TLS;
		r->der = p + sizeof TLS_WORD;
		r->derlen = n - sizeof TLS_WORD;
		if (r->derlen == 0 || r->derlen > SESSION_TLS_MAX)
			return bad(why, r->derlen ? "a TLS session longer than SESSION_TLS_MAX" :
			    "an empty TLS session");
		return 0;
	}
	if (nfd != SP_NFD)
		return bad(why, "a message request without its three descriptors");
	r->kind = SP_MESSAGE;
	return parse_message(p, n, r, why);
}

void
sp_request_free(struct sp_request *r)
{
	free(r->rcpts);
	r->rcpts = NULL;
	r->nrcpt = 0;
}

int
sp_parse_word(const char *p, size_t n, struct sp_word *w, const char **why)
{
	size_t rl = strlen(READY_WORD);

	memset(w, 0, sizeof *w);
	if (n == strlen(CLOSING_WORD) && memcmp(p, CLOSING_WORD, n) == 0) {
		w->kind = SP_CLOSING;
		return 0;
	}
	if (n < rl || memcmp(p, READY_WORD, rl) != 0)
		return bad(why, "an unknown word");
	w->kind = SP_READY;
	if (n == rl)
		return 0;
	if (p[rl] != '\0' || n == rl + 1)
		return bad(why, "\"ready\" with trailing bytes but no TLS session");
	if (n - rl - 1 > SESSION_TLS_MAX)
		return bad(why, "a TLS session longer than SESSION_TLS_MAX");
	w->der = p + rl + 1;
	w->derlen = n - rl - 1;
	return 0;
}
