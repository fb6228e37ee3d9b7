/*
 * envelope_fuzz.c: libFuzzer harness for the envelope parser that the
 * set-group-id weir-queue runs on its caller's fd 1 (src/mail/envelope.c,
 * env_parser_feed).  Properties:
 *
 *   - the status, the bytes consumed and the records written do not
 *     depend on how the input is split into reads (the first bytes of the
 *     input pick the cut points);
 *   - at ENV_DONE what was written is a valid todo/ tail: it parses with
 *     todo_parse and passes todo_check_addrs, with as many recipients as
 *     the parser counted, and nothing past the terminator was consumed.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/envelope.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mail/envelope.h"
#include "fuzz.h"

static enum env_status
feed(const char *s, size_t n, const uint8_t *cuts, size_t ncuts, struct buf *out,
    size_t *used, struct env_parser *p)
{
	enum env_status st = ENV_MORE;
	size_t off = 0, u, i = 0;

	env_parser_init(p);
	while (off < n && st == ENV_MORE) {
		size_t k = ncuts ? (size_t)cuts[i++ % ncuts] * 7 % 1100 + 1 : n - off;

		if (k > n - off)
			k = n - off;
		st = env_parser_feed(p, s + off, k, &u, out);
		check(u <= k);
		check(st != ENV_MORE || u == k);
		off += u;
	}
	*used = off;
	return st;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf a = BUF_INIT, b = BUF_INIT, todo = BUF_INIT, why = BUF_INIT;
	struct env_parser pa, pb;
	struct todo_env e;
	size_t ua, ub, ncuts = size > 6 ? 6 : size;
	const char *s = (const char *)data;
	enum env_status sa = feed(s, size, NULL, 0, &a, &ua, &pa);
	enum env_status sb = feed(s, size, data, ncuts, &b, &ub, &pb);

	check(sa == sb);
	if (sa == ENV_DONE) {
		check(ua == ub && a.len == b.len && memcmp(a.s, b.s, a.len) == 0);
		check(pa.nrcpt == pb.nrcpt && pa.nrcpt > 0);
		check(ua >= 1 && s[ua - 1] == '\0');
		buf_add(&todo, "u1\0p2\0", 6);
		buf_add(&todo, a.s, a.len);
		check(todo_parse(todo.s, todo.len, &e, &why) == 0);
		check(todo_check_addrs(todo.s, todo.len, &e, &why) == 0);
		check(e.nrcpt == pa.nrcpt);
	}
	buf_free(&a);
	buf_free(&b);
	buf_free(&todo);
	buf_free(&why);
	return 0;
}
