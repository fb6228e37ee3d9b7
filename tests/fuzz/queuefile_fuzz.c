/*
 * queuefile_fuzz.c: libFuzzer harness for the queue files weir-send and
 * `weir queue-check` read (src/mail/envelope.c's todo/info/rcpt parsers,
 * src/mail/schedfile.c).  A stock qmail, an admin or a crash may leave
 * anything there.  The first byte picks the kind:
 *
 *   0  todo/ and intd/: a parse gives uid, pid, the sender and nrcpt
 *      records, all inside the input; the checked addresses are clean;
 *   1  info/: the one record spans the whole input;
 *   2  local/ and remote/: T + D records; each counted record starts with
 *      its type byte (what rcptfile_load indexes and weir-send overwrites
 *      with one pwrite);
 *   3  sched/S/N: format(parse(x)) == x;  sched/alive: parses a number;
 *      sched/waits: its lines formatted again (sorted by id) have x's
 *      length, and each is found by its id.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/queuefile.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mail/envelope.h"
#include "mail/schedfile.h"
#include "fuzz.h"

static void
fuzz_todo(const char *s, size_t n)
{
	struct buf why = BUF_INIT;
	struct todo_env e;
	struct qrec r;
	const char *w;
	size_t off, k = 0;

	if (todo_parse(s, n, &e, &why) == 0) {
		check(e.sender.type == 'F' && e.sender.addr > s && e.sender.addr + e.sender.len < s + n);
		check(e.rcpt_off <= n);
		for (off = e.rcpt_off; qrec_next(s, n, &off, &r, &w) == 1; k++)
			check(r.type == 'T' && r.len <= ADDR_MAX);
		check(off == n && k == e.nrcpt);
		if (todo_check_addrs(s, n, &e, &why) == 0)
			check(envelope_addr_problem(e.sender.addr, e.sender.len) == NULL);
	} else {
		check(why.len > 0);
	}
	buf_free(&why);
}

static void
fuzz_info(const char *s, size_t n)
{
	struct buf why = BUF_INIT;
	struct qrec r;

	if (info_parse(s, n, &r, &why) == 0)
		check(r.type == 'F' && r.addr == s + 1 && r.len + 2 == n);
	buf_free(&why);
}

static void
fuzz_rcpt(const char *s, size_t n)
{
	struct buf why = BUF_INIT;
	struct qrec r;
	const char *w;
	size_t todo, done, off = 0, start = 0, t = 0, d = 0;

	if (rcptfile_parse(s, n, &todo, &done, &why) == 0) {
		for (; qrec_next(s, n, &off, &r, &w) == 1; start = off) {
			check(s[start] == r.type && (r.type == 'T' || r.type == 'D'));
			t += r.type == 'T';
			d += r.type == 'D';
		}
		check(off == n && t == todo && d == done);
	}
	buf_free(&why);
}

static void
fuzz_sched(const char *s, size_t n)
{
	struct buf why = BUF_INIT, back = BUF_INIT;
	struct schednote note;
	struct schedwait *w;
	long long t;
	size_t k, i;

	if (schedfile_parse(s, n, &note, &why) == 0) {
		check(n <= SCHEDFILE_MAX);
		check(note.birth >= 0 && note.waited >= 0 && note.since >= 0 && note.warned >= 0);
		schedfile_format(&note, &back);
		check(back.len == n && memcmp(back.s, s, n) == 0);
	}
	if (schedfile_parse_alive(s, n, &t) == 0)
		check(t >= 0 && n >= 2 && s[n - 1] == '\n');
	buf_reset(&back);
	if (schedfile_parse_waits(s, n, &w, &k, &why) == 0) {
		for (i = 0; i < k; i++) {
			check(w[i].birth >= 0 && w[i].waited >= 0 && w[i].since >= 0);
			check(i == 0 || w[i - 1].id <= w[i].id);
			check(schedfile_find_wait(w, k, w[i].id)->id == w[i].id);
			schedfile_format_wait(&w[i], &back);
		}
		check(back.len == n);
		free(w);
	}
	buf_free(&why);
	buf_free(&back);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;

	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0: fuzz_todo(s, size - 1); break;
	case 1: fuzz_info(s, size - 1); break;
	case 2: fuzz_rcpt(s, size - 1); break;
	case 3: fuzz_sched(s, size - 1); break;
	}
	return 0;
}
