/*
 * keepalive.c: weir-remote -K -u UPSTREAM, the OAuth keep-alive (see
 * remote.h): the upstream's refresh token used by a refresh when nothing
 * has used it for its oauth section's refresh_idle (mail/oauth.h,
 * oauth_keepalive), as the deliverer, the only user that may read the
 * tokens.  No SMTP, no grant.
 *
 * When the provider refuses the refresh token (or there is none), the
 * status file says a login is needed (oauth.c wrote it) and weir-gate is
 * told REFUSED (mail/gateproto.h), which suspends the upstream as a
 * refused AUTH would: the same alarm as a delivery's, without one.
 * weir-send, which runs this, mails the admin (send/keepalive.c).
 *
 * Trusts: weir.conf; the provider through mail/oauth.c.  Config keys:
 * gate_socket, the upstream's oauth section.
 */
#include <errno.h>
#include <string.h>

#include "lib/log.h"
#include "mail/config.h"
#include "mail/gateclient.h"
#include "mail/oauth.h"
#include "remote/remoteint.h"

/* weir-gate told that up's credentials are refused (why): as a REPORT
 * AUTHFAIL would, without a grant.  No gate here: nothing to tell. */
static void
tell_gate(const struct weir_config *cfg, const struct weir_upstream *up, const char *why)
{
	struct gate_client gc;
	struct gp_reply r;
	struct oauth_status st;
	struct buf b = BUF_INIT, err = BUF_INIT;
	const char *perr = NULL;
	int k;

	/* A login since (it waited for the lock this refresh held) has
	 * lifted the suspension already: none to begin. */
	if (oauth_status_load(&up->oauth, &st, &err) == 1 && !st.login_needed) {
		log_info("upstream %s: a login came meanwhile: weir-gate not told", up->name);
		goto out;
	}
	memset(&gc, 0, sizeof gc);
	if (gc_connect(&gc, cfg->gate_socket) < 0) {
		if (errno == ENOENT)
			log_info("no weir-gate at %s: none to suspend the upstream", cfg->gate_socket);
		else
			log_warn("weir-gate at %s", cfg->gate_socket);
		goto out;
	}
	buf_printf(&b, "keep-alive: %s", why);
	if (gc_refused(&gc, up->name, b.s) < 0)
		log_warn("weir-gate: sending REFUSED");
	else if ((k = gc_wait_reply(&gc, &r, &perr)) <= 0)
		log_warnx("weir-gate: %s", k == 0 ? "closed the connection" :
		    perr ? perr : strerror(errno));
	else if (r.verb == GP_R_ERR)
		log_warnx("weir-gate refused REFUSED: %s %s", gp_code_name(r.code), r.text);
	gc_close(&gc);
out:
	buf_free(&b);
	buf_free(&err);
}

int
remote_keepalive(const char *cfile, const char *upname)
{
	struct weir_config cfg;
	const struct weir_upstream *up;
	struct buf err = BUF_INIT, how = BUF_INIT;
	int rc = OAUTH_KA_TEMP;

	if (config_load(&cfg, cfile, &err) < 0) {
		log_warnx("%s", strtok(err.s, "\n"));
		buf_free(&err);
		return OAUTH_KA_TEMP;
	}
	up = config_upstream(&cfg, upname);
	if (up == NULL || !up->oauth.present) {
		log_warnx("no upstream \"%s\" with an oauth section in %s", upname,
		    cfg.file ? cfg.file : "the configuration");
		rc = OAUTH_KA_USAGE;
		goto out;
	}
	switch (oauth_keepalive(up, &how, &err)) {
	case OAUTH_OK:	/* a refresh has its own line (oauth.c) */
		log_debug("upstream %s: OAuth keep-alive: %s", up->name, how.s);
		rc = OAUTH_KA_OK;
		break;
	case OAUTH_TEMP:
		log_warnx("upstream %s: OAuth keep-alive: %s", up->name, err.s);
		break;
	case OAUTH_REFUSED:
		log_warnx("upstream %s: OAuth keep-alive: %s", up->name, err.s);
		tell_gate(&cfg, up, err.s);
		rc = OAUTH_KA_REFUSED;
		break;
	}
out:
	buf_free(&err);
	buf_free(&how);
	config_free(&cfg);
	return rc;
}
