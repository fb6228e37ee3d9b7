/*
 * sasl.c: the Cyrus SASL client, and the only file that includes
 * <sasl/sasl.h>; see sasl.h.  XOAUTH2 (Google, Microsoft) and
 * OAUTHBEARER (RFC 7628) are a single message each and are built in here
 * when no plugin provides them.
 *
 * The secret lives in one allocation owned by struct saslc, handed to
 * Cyrus through the SASL_CB_PASS callback, and wiped in saslc_free().
 *
 * Trusts: nothing the server sends (base64 strictly decoded by Cyrus).
 * Config keys: username, mechanisms (via the caller).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sasl/sasl.h>
#include <sasl/saslutil.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "remote/sasl.h"

const char *const saslc_default_order[] = {
	"SCRAM-SHA-256", "SCRAM-SHA-1", "CRAM-MD5", "DIGEST-MD5", "PLAIN", "LOGIN", NULL,
};

enum builtin { B_NONE, B_XOAUTH2, B_OAUTHBEARER };

struct saslc {
	sasl_conn_t *conn;
	sasl_callback_t cb[5];
	char *host;
	unsigned port;
	char *user;
	sasl_secret_t *secret;	/* len + bytes + NUL, wiped on free */
	size_t secretcap;
	enum builtin builtin;
	int state;		/* built-ins: 0 not started, 1 sent, 2 error answered */
	int last;		/* Cyrus: result of the last start or step */
	char mech[32];
};

static int initialised;

/* Cyrus's own messages go to our log, not to syslog; errors and
 * warnings only (the others are chatter). */
static int
cb_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	if (level <= SASL_LOG_WARN)
		log_warnx("sasl: %s", msg);
	return SASL_OK;
}

/* No options from Cyrus's config files: every option at its default. */
static int
cb_getopt(void *ctx, const char *plugin, const char *option, const char **result,
    unsigned *len)
{
	(void)ctx; (void)plugin; (void)option; (void)result; (void)len;
	return SASL_FAIL;
}

typedef int (*sasl_cb_fn)(void);

static sasl_callback_t global_cb[] = {
	{ SASL_CB_LOG, (sasl_cb_fn)(void (*)(void))cb_log, NULL },
	{ SASL_CB_GETOPT, (sasl_cb_fn)(void (*)(void))cb_getopt, NULL },
	{ SASL_CB_LIST_END, NULL, NULL },
};

int
saslc_init(struct buf *err)
{
	int r;

	if (initialised)
		return 0;
	r = sasl_client_init(global_cb);
	if (r != SASL_OK) {
		buf_printf(err, "sasl_client_init: %s", sasl_errstring(r, NULL, NULL));
		return -1;
	}
	initialised = 1;
	return 0;
}

static int
cyrus_has(const char *mech)
{
	const char **list = sasl_global_listmech();
	size_t i;

	for (i = 0; list && list[i]; i++)
		if (strcasecmp(list[i], mech) == 0)
			return 1;
	return 0;
}

static enum builtin
builtin_for(const char *mech)
{
	if (strcasecmp(mech, "XOAUTH2") == 0)
		return B_XOAUTH2;
	if (strcasecmp(mech, "OAUTHBEARER") == 0)
		return B_OAUTHBEARER;
	return B_NONE;
}

int
saslc_have(const char *mech)
{
	return cyrus_has(mech) || builtin_for(mech) != B_NONE;
}

static int
cb_simple(void *ctx, int id, const char **result, unsigned *len)
{
	struct saslc *s = ctx;

	switch (id) {
	case SASL_CB_AUTHNAME:
		*result = s->user;
		break;
	case SASL_CB_USER:
		*result = "";	/* no authorization identity: act as ourselves */
		break;
	default:
		return SASL_BADPARAM;
	}
	if (len)
		*len = (unsigned)strlen(*result);
	return SASL_OK;
}

static int
cb_pass(sasl_conn_t *conn, void *ctx, int id, sasl_secret_t **out)
{
	struct saslc *s = ctx;

	(void)conn;
	if (id != SASL_CB_PASS)
		return SASL_BADPARAM;
	*out = s->secret;
	return SASL_OK;
}

static int
cb_realm(void *ctx, int id, const char **avail, const char **result)
{
	(void)ctx;
	if (id != SASL_CB_GETREALM)
		return SASL_BADPARAM;
	*result = avail && avail[0] ? avail[0] : "";
	return SASL_OK;
}

struct saslc *
saslc_new(const char *host, unsigned port, const char *user, const char *secret,
    size_t secretlen, struct buf *err)
{
	struct saslc *s = xcalloc(1, sizeof *s);

	(void)err;
	s->host = xstrdup(host);
	s->port = port;
	s->user = xstrdup(user);
	s->secretcap = sizeof(sasl_secret_t) + secretlen + 1;
	s->secret = xcalloc(1, s->secretcap);
	s->secret->len = secretlen;
	memcpy(s->secret->data, secret, secretlen);
	s->cb[0] = (sasl_callback_t){ SASL_CB_AUTHNAME, (sasl_cb_fn)(void (*)(void))cb_simple, s };
	s->cb[1] = (sasl_callback_t){ SASL_CB_USER, (sasl_cb_fn)(void (*)(void))cb_simple, s };
	s->cb[2] = (sasl_callback_t){ SASL_CB_PASS, (sasl_cb_fn)(void (*)(void))cb_pass, s };
	s->cb[3] = (sasl_callback_t){ SASL_CB_GETREALM, (sasl_cb_fn)(void (*)(void))cb_realm, s };
	s->cb[4] = (sasl_callback_t){ SASL_CB_LIST_END, NULL, NULL };
	return s;
}

void
saslc_free(struct saslc *s)
{
	if (s == NULL)
		return;
	if (s->conn)
		sasl_dispose(&s->conn);
	explicit_bzero(s->secret, s->secretcap);
	free(s->secret);
	free(s->host);
	free(s->user);
	explicit_bzero(s, sizeof *s);
	free(s);
}

static int
offered(const char *server_mechs, const char *mech)
{
	size_t n = strlen(mech);
	const char *p = server_mechs;

	while (*p) {
		size_t w;

		while (*p == ' ')
			p++;
		w = strcspn(p, " ");
		if (w == n && strncasecmp(p, mech, n) == 0)
			return 1;
		p += w;
	}
	return 0;
}

static int
b64_encode(const char *in, size_t n, struct buf *out, struct buf *err)
{
	unsigned outlen = 0;
	size_t cap = (n + 2) / 3 * 4 + 1;
	int r;

	buf_reset(out);
	buf_reserve(out, cap);
	r = sasl_encode64(in, (unsigned)n, out->s, (unsigned)cap, &outlen);
	if (r != SASL_OK) {
		buf_printf(err, "base64: %s", sasl_errstring(r, NULL, NULL));
		return -1;
	}
	out->len = outlen;
	out->s[outlen] = '\0';
	return 0;
}

/* user=U^Aauth=Bearer T^A^A, or RFC 7628's gs2 header form. */
static void
builtin_initial(struct saslc *s, struct buf *raw)
{
	const char *u;

	if (s->builtin == B_XOAUTH2) {
		buf_printf(raw, "user=%s\001auth=Bearer ", s->user);
	} else {
		buf_adds(raw, "n,a=");
		for (u = s->user; *u; u++)	/* saslname: '=' and ',' escaped */
			if (*u == '=')
				buf_adds(raw, "=3D");
			else if (*u == ',')
				buf_adds(raw, "=2C");
			else
				buf_addc(raw, *u);
		buf_printf(raw, ",\001host=%s\001port=%u\001auth=Bearer ", s->host, s->port);
	}
	buf_add(raw, s->secret->data, s->secret->len);
	buf_add(raw, "\001\001", 2);
}

static int
start_cyrus(struct saslc *s, const char *mech, int *has_initial, struct buf *initial,
    struct buf *err)
{
	sasl_security_properties_t sp;
	sasl_interact_t *interact = NULL;
	const char *out = NULL, *chosen = NULL;
	unsigned outlen = 0;
	int r;

	if (s->conn)
		sasl_dispose(&s->conn);
	r = sasl_client_new("smtp", s->host, NULL, NULL, s->cb, 0, &s->conn);
	if (r != SASL_OK) {
		buf_printf(err, "sasl_client_new: %s", sasl_errstring(r, NULL, NULL));
		return -1;
	}
	memset(&sp, 0, sizeof sp);
	sp.min_ssf = 0;
	sp.max_ssf = 0;		/* no security layer: TLS protects the session */
	sp.maxbufsize = 0;
	sp.security_flags = 0;	/* plain-text mechanisms are fine inside TLS */
	r = sasl_setprop(s->conn, SASL_SEC_PROPS, &sp);
	if (r != SASL_OK) {
		buf_printf(err, "sasl_setprop: %s", sasl_errdetail(s->conn));
		return -1;
	}
	r = sasl_client_start(s->conn, mech, &interact, &out, &outlen, &chosen);
	s->last = r;
	if (r != SASL_OK && r != SASL_CONTINUE) {
		buf_printf(err, "%s: %s", mech, sasl_errdetail(s->conn));
		return -1;
	}
	*has_initial = out != NULL;
	if (out != NULL)
		return b64_encode(out, outlen, initial, err);
	return 0;
}

int
saslc_start(struct saslc *s, const char *server_mechs, const struct strlist *prefs,
    const char **mech, int *has_initial, struct buf *initial, struct buf *err)
{
	const char *const *order = prefs && prefs->n ? (const char *const *)prefs->v :
	    saslc_default_order;
	size_t i;

	*has_initial = 0;
	buf_reset(initial);
	for (i = 0; order[i]; i++) {
		const char *m = order[i];

		if (!offered(server_mechs, m))
			continue;
		if (cyrus_has(m)) {
			snprintf(s->mech, sizeof s->mech, "%s", m);
			*mech = s->mech;
			s->builtin = B_NONE;
			return start_cyrus(s, m, has_initial, initial, err);
		}
		if (builtin_for(m) != B_NONE) {
			struct buf raw = BUF_INIT;
			int r;

			snprintf(s->mech, sizeof s->mech, "%s", m);
			*mech = s->mech;
			s->builtin = builtin_for(m);
			builtin_initial(s, &raw);
			r = b64_encode(raw.s, raw.len, initial, err);
			explicit_bzero(raw.s, raw.cap);
			buf_free(&raw);
			*has_initial = 1;
			s->state = 1;
			return r;
		}
	}
	buf_printf(err, "no SASL mechanism in common (server offers: %s; we would use:",
	    server_mechs);
	for (i = 0; order[i]; i++)
		buf_printf(err, " %s%s", order[i], saslc_have(order[i]) ? "" : "(not installed)");
	buf_adds(err, ")");
	return -1;
}

int
saslc_step(struct saslc *s, const char *challenge, size_t len, struct buf *response,
    struct buf *err)
{
	char *raw;
	unsigned rawlen = 0;
	const char *out = NULL;
	unsigned outlen = 0;
	sasl_interact_t *interact = NULL;
	int r;

	raw = xmalloc(len + 1);
	r = sasl_decode64(challenge, (unsigned)len, raw, (unsigned)len + 1, &rawlen);
	if (r != SASL_OK) {
		free(raw);
		buf_printf(err, "malformed base64 in the server's challenge");
		return -1;
	}
	if (s->builtin != B_NONE) {
		free(raw);
		/* The only challenge is an error report (JSON); the answer
		 * that ends the exchange is empty (XOAUTH2) or ^A (RFC 7628). */
		if (s->state != 1) {
			buf_printf(err, "%s: unexpected second challenge", s->mech);
			return -1;
		}
		s->state = 2;
		return b64_encode("\001", s->builtin == B_OAUTHBEARER ? 1 : 0, response, err);
	}
	if (s->conn == NULL) {
		free(raw);
		buf_printf(err, "SASL step before start");
		return -1;
	}
	r = sasl_client_step(s->conn, raw, rawlen, &interact, &out, &outlen);
	free(raw);
	s->last = r;
	if (r != SASL_OK && r != SASL_CONTINUE) {
		buf_printf(err, "%s: %s: %s", s->mech, sasl_errstring(r, NULL, NULL),
		    sasl_errdetail(s->conn));
		return -1;
	}
	return b64_encode(out ? out : "", out ? outlen : 0, response, err);
}

int
saslc_complete(const struct saslc *s)
{
	if (s->builtin != B_NONE)
		return s->state == 1;
	return s->last == SASL_OK;
}
