/*
 * outcome_fuzz.c: libFuzzer harness for the outcome line a deliverer
 * writes and weir-send reads (src/mail/outcome.c).  Properties:
 *
 *   - a line that parses is one line of printable ASCII ending in "\n",
 *     with a known word;
 *   - formatting what was parsed gives the same bytes back (the grammar
 *     has one spelling per outcome), and that parses to the same fields.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/outcome.
 */
#include <stdint.h>
#include <string.h>

#include "mail/outcome.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *why = NULL;
	struct outcome o, again;
	struct buf b = BUF_INIT;
	size_t i;

	if (outcome_parse(s, size, &o, &why) < 0) {
		check(why != NULL);
		return 0;
	}
	check(size > 0 && size <= OUTCOME_MAX && s[size - 1] == '\n');
	for (i = 0; i + 1 < size; i++)
		check(s[i] >= 0x20 && s[i] < 0x7f);
	check(strcmp(outcome_name(o.kind), "?") != 0);
	outcome_format(&o, &b);
	check(b.len == size && memcmp(b.s, s, size) == 0);
	check(outcome_parse(b.s, b.len, &again, &why) == 0);
	check(again.kind == o.kind && again.accepted == o.accepted && again.at == o.at &&
	    again.undone == o.undone && strcmp(again.text, o.text) == 0);
	buf_free(&b);
	return 0;
}
