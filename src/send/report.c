/*
 * report.c: see report.h.  The deliverer's output is trusted only as far
 * as its shape: records must be letter+text+NUL, recipient letters first,
 * exactly one message letter last.
 *
 * Trusts: nothing; weir-remote's output is parsed strictly.
 */
#include <string.h>

#include "send/report.h"

static const char bad_output[] = "the deliverer's output could not be understood";

void
report_parse(const char *out, size_t len, size_t nrcpt, struct rresult *res,
    const char **msgtext)
{
	const char *p = out, *end = out + len, *nul, *mtext = NULL;
	char mletter = 0;
	size_t i, nrep = 0;
	enum rstatus mst;

	/* Pass 1: check the shape, find the message report. */
	while (p < end) {
		nul = memchr(p, '\0', (size_t)(end - p));
		if (nul == NULL)
			goto malformed;
		if (*p == 'r' || *p == 'h' || *p == 's') {
			if (mletter || nrep == nrcpt)
				goto malformed;
			nrep++;
		} else if (*p == 'K' || *p == 'Z' || *p == 'D') {
			if (mletter)
				goto malformed;
			mletter = *p;
			mtext = p + 1;
		} else {
			goto malformed;
		}
		p = nul + 1;
	}
	if (!mletter)
		goto malformed;
	mst = mletter == 'K' ? RS_DELIVERED : mletter == 'Z' ? RS_TEMP : RS_PERM;
	*msgtext = mtext;

	/* Pass 2: each recipient's fate. */
	p = out;
	for (i = 0; i < nrcpt; i++) {
		if (i < nrep) {
			res[i].text = p + 1;
			res[i].own = *p != 'r';
			if (*p == 'h')
				res[i].st = RS_PERM;
			else if (*p == 's')
				res[i].st = RS_TEMP;
			else
				res[i].st = mst;
			if (*p == 'r')
				res[i].text = mtext;	/* the verdict on the data */
			p += strlen(p) + 1;
		} else {
			res[i].st = mst == RS_DELIVERED ? RS_TEMP : mst;
			res[i].text = mtext;
			res[i].own = 0;
		}
	}
	return;
malformed:
	for (i = 0; i < nrcpt; i++) {
		res[i].st = RS_TEMP;
		res[i].text = bad_output;
		res[i].own = 0;
	}
	*msgtext = bad_output;
}
