/*
 * statusdoc_fuzz.c: libFuzzer harness for what weir-metrics makes of a
 * JSON document: lib/jsonparse.c's strict reader, then the Prometheus
 * text of a gate document (src/metrics/collect.c) and the status page
 * of a status document (src/metrics/page.c, with page_mask).
 * Properties:
 *
 *   - a document that parses holds no NUL;
 *   - whatever document, the page is one HTML page, with no "<script"
 *     (everything from the document is escaped);
 *   - the text has "weir_gate_up 1" exactly when the document parsed
 *     with an upstreams array.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/statusdoc.
 */
#include <stdint.h>
#include <string.h>

#include "lib/jsonparse.h"
#include "mail/qsummary.h"
#include "metrics/metrics.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct buf why = BUF_INIT, page = BUF_INIT, text = BUF_INIT;
	struct qsummary q = { .messages = 3, .todo = 1, .oldest = 1000 };
	struct json_object *doc = json_parse_strict(s, size, 1 << 20, &why);
	int up;

	if (doc == NULL) {
		check(why.len > 0);
	} else {
		check(memchr(s, '\0', size) == NULL);
		page_mask(doc);
		page_render(&page, doc, "fuzz.example", 2000000);
		check(page.len > 0 && strncmp(page.s, "<!DOCTYPE html>", 15) == 0);
		check(strstr(page.s, "<script") == NULL);
		check(strstr(page.s, "</html>\n") == page.s + page.len - 8);
	}
	metrics_format(s, size, &q, 2000, &text);
	up = doc && json_object_is_type(jp_get(doc, "upstreams"), json_type_array);
	check((strstr(text.s, "\nweir_gate_up 1\n") != NULL) == up);
	json_object_put(doc);
	buf_free(&why);
	buf_free(&page);
	buf_free(&text);
	return 0;
}
