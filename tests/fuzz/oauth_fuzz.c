/*
 * oauth_fuzz.c: libFuzzer harness for what weir-remote reads from an
 * OAuth provider over HTTPS (src/mail/oauth.c, oauth_answer_read; the
 * JSON through lib/jsonparse.c).  The first byte picks the HTTP status
 * (200, 400, 401 or 503), the rest is the body.  Properties:
 *
 *   - a token answer comes only from a 200, with an access token of 1 to
 *     OAUTH_TOKEN_MAX printable ASCII bytes, a refresh token empty or
 *     the same, and expires_in above 0;
 *   - an error answer comes only from a 400 or 401, its code and
 *     description printable, NUL-terminated;
 *   - a 503 is never either;
 *   - the device endpoint's way (the object handed over) agrees with
 *     the token way on whether a 200 is JSON at all.
 *
 * Build and run: make fuzz; make check runs tests/fuzz/corpus/oauth.
 */
#include <json-c/json.h>

#include "mail/oauth.h"
#include "fuzz.h"

static int
printable(const char *s, size_t n, int space)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < (space ? 0x20 : 0x21) || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long statuses[] = { 200, 400, 401, 503 };
	struct oauth_grant g;
	struct buf why = BUF_INIT;
	struct json_object *j = NULL;
	enum oauth_answer a, d;
	long status;

	if (size == 0)
		return 0;
	status = statuses[data[0] % 4];
	a = oauth_answer_read("u", status, (const char *)data + 1, size - 1, &g, NULL, &why);
	if (a == OAUTH_A_TOKENS) {
		check(status == 200);
		check(g.access.len >= 1 && g.access.len <= OAUTH_TOKEN_MAX &&
		    printable(g.access.s, g.access.len, 0));
		check(g.refresh.len <= OAUTH_TOKEN_MAX &&
		    printable(g.refresh.s ? g.refresh.s : "", g.refresh.len, 0));
		check(g.expires_in > 0);
	} else if (a == OAUTH_A_ERROR) {
		check(status == 400 || status == 401);
		check(g.error[0] != '\0' && printable(g.error, strlen(g.error), 1) &&
		    printable(g.desc, strlen(g.desc), 1));
	} else {
		check(why.len > 0);
	}
	oauth_grant_wipe(&g);
	buf_reset(&why);
	d = oauth_answer_read("u", status, (const char *)data + 1, size - 1, &g, &j, &why);
	if (status == 200)
		check((d == OAUTH_A_TOKENS) == (j != NULL) && (a != OAUTH_A_TOKENS || j != NULL));
	json_object_put(j);
	oauth_grant_wipe(&g);
	buf_free(&why);
	return 0;
}
