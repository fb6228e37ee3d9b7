/*
 * journal_fuzz.c: libFuzzer harness for weir-gate's journal replay
 * (src/gate/journal.c): the journal is the gate's own file, but a crash
 * may leave any torn or corrupt tail in it, and the replay must turn
 * whatever it finds into windows that never undercount.  The input is
 * written to a journal file (journal_open reads a path); when the first
 * byte is odd, each line of the rest gets its correct CRC appended, so
 * that the fuzzer reaches the record parser.  Properties:
 *
 *   - journal_open never fails on the file's contents;
 *   - replay is idempotent: the compacted journal it leaves, replayed
 *     again at the same clocks, gives the same sends (count and weights)
 *     and suspensions per upstream, an authentication suspension with the
 *     fingerprint of its credentials (one with neither may be forgotten).
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/journal.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate/journal.h"
#include "gate/window.h"
#include "lib/log.h"
#include "fuzz.h"

static void no_grant(void *arg, struct wg_req *r) { (void)arg; (void)r; }
static void no_refuse(void *arg, struct wg_req *r, enum wg_code c) { (void)arg; (void)r; (void)c; }

static char path[4096];

/* Sum of what g holds, in a form to compare. */
static void
summary(struct wgate *g, struct buf *b, int64_t mono)
{
	struct wg_up *u;
	uint64_t s;

	for (u = g->ups; u; u = u->next) {
		uint64_t m = 0, r = 0, c = 0;

		if (u->ln == 0 && u->susp_until <= mono && u->auth_until <= mono)
			continue;	/* known by name only: compaction drops it */

		for (s = u->lseq; s < u->lseq + u->ln; s++) {
			const struct wg_send *e = wg_log_at(u, s);

			m += e->w[UNIT_MESSAGES];
			r += e->w[UNIT_RECIPIENTS];
			c += e->w[UNIT_CONNECTIONS];
		}
		buf_printf(b, "%s %zu %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %d", u->name, (size_t)u->ln,
		    m, r, c, u->susp_until > mono, u->auth_until > mono);
		/* An authentication suspension keeps its credentials' fingerprint. */
		if (u->auth_until > mono)
			buf_printf(b, " %d %016" PRIx64, u->auth_fp_known, u->auth_fp);
		buf_addc(b, ';');
	}
}

static void
replay_once(struct buf *sum, int64_t mono, int64_t wall)
{
	const struct wg_ops ops = { .granted = no_grant, .refused = no_refuse };
	struct journal j;
	struct wgate g;

	wg_init(&g, &ops);
	check(journal_open(&j, path, &g, NULL, mono, wall, 600 * 1000) == 0);
	summary(&g, sum, mono);
	journal_close(&j);
	wg_free(&g);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf in = BUF_INIT, a = BUF_INIT, b = BUF_INIT;
	const char *s = (const char *)data + 1, *end, *nl;
	int64_t mono = 5000000, wall = 1700000000000;
	int fd;

	if (size == 0)
		return 0;
	if (path[0] == '\0') {
		log_init("journal_fuzz");
		const char *tmp = getenv("TMPDIR");

		snprintf(path, sizeof path, "%s/weir-journal-fuzz.%ld",
		    access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && *tmp ? tmp : "/tmp",
		    (long)getpid());
	}
	end = s + size - 1;
	if (data[0] & 1) {
		for (; s < end; s = nl + 1) {
			nl = memchr(s, '\n', (size_t)(end - s));
			if (nl == NULL)
				nl = end;
			buf_add(&in, s, (size_t)(nl - s));
			buf_printf(&in, " %08" PRIx32 "\n", journal_crc32(s, (size_t)(nl - s)));
		}
	} else {
		buf_add(&in, s, size - 1);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	check(fd >= 0 && (in.len == 0 || write(fd, in.s, in.len) == (ssize_t)in.len) && close(fd) == 0);
	replay_once(&a, mono, wall);
	replay_once(&b, mono, wall);
	if (getenv("JF_DEBUG"))
		fprintf(stderr, "first: %s\nsecond: %s\n", buf_cstr(&a), buf_cstr(&b));
	check(a.len == b.len && (a.len == 0 || memcmp(a.s, b.s, a.len) == 0));
	unlink(path);
	buf_free(&in);
	buf_free(&a);
	buf_free(&b);
	return 0;
}
