/*
 * report_fuzz.c: libFuzzer harness for qmail-remote(8)'s output as
 * weir-send reads it (src/send/report.c): the deliverer's reports, whose
 * texts carry the upstream's replies.  The first byte gives the number
 * of recipients (1 to 8); the rest is the output.  Properties:
 *
 *   - every recipient gets a status and a text, NUL-terminated within
 *     the output or the one "could not be understood" text, and so does
 *     the message;
 *   - output that is not understood makes every recipient temporary,
 *     none with a verdict of its own: weir never bounces for a deliverer
 *     it could not understand;
 *   - a recipient is delivered only under a K message report, and
 *     failed for good only by its own h or under a D message report;
 *   - understood output ends in a NUL.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/report.
 */
#include <stdint.h>
#include <string.h>

#include "send/report.h"
#include "fuzz.h"

#define NRCPT_MAX 8

/* t, a text of the output out[0..len), ends there with a NUL. */
static int
within(const char *t, const char *out, size_t len)
{
	return t >= out && t < out + len && memchr(t, '\0', (size_t)(out + len - t)) != NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rresult res[NRCPT_MAX];
	const char *out, *msgtext = NULL, *bad;
	size_t n, len, i;
	char mletter;

	if (size == 0)
		return 0;
	n = 1 + data[0] % NRCPT_MAX;
	out = (const char *)data + 1;
	len = size - 1;
	report_parse(out, len, n, res, &msgtext);
	check(msgtext != NULL);
	if (!within(msgtext, out, len)) {
		/* not understood: the one text, everyone temporary */
		bad = msgtext;
		for (i = 0; i < n; i++)
			check(res[i].st == RS_TEMP && res[i].own == 0 && res[i].text == bad);
		return 0;
	}
	check(len > 0 && out[len - 1] == '\0');
	mletter = msgtext[-1];
	check(mletter == 'K' || mletter == 'Z' || mletter == 'D');
	for (i = 0; i < n; i++) {
		check(res[i].text != NULL && within(res[i].text, out, len));
		check(res[i].st == RS_DELIVERED || res[i].st == RS_TEMP || res[i].st == RS_PERM);
		check(res[i].own == 0 || res[i].own == 1);
		if (res[i].st == RS_DELIVERED)
			check(mletter == 'K' && !res[i].own);
		if (res[i].st == RS_PERM)
			check(mletter == 'D' || (res[i].own && res[i].text[-1] == 'h'));
		if (res[i].own)
			check(res[i].text[-1] == 'h' || res[i].text[-1] == 's');
	}
	return 0;
}
