/*
 * probe.c: weir-remote -T -u UPSTREAM, the probe for weir test-relay
 * (remote.h): connect, banner, EHLO, STARTTLS, EHLO, AUTH and QUIT
 * through the same state machine as a delivery (smtp_probe), one line
 * per step on fd 1; no message, no MAIL, no grant.
 *
 * Trusts: weir.conf.  Config keys: hostname, the upstream's section
 * (which must name its host), policy_file.
 */
#include <string.h>
#include <unistd.h>

#include "lib/io.h"
#include "lib/log.h"
#include "mail/config.h"
#include "mail/trouble.h"
#include "remote/remoteint.h"
#include "remote/secret.h"
#include "remote/smtp.h"
#include "remote/tls.h"

/* weir-remote -T -u NAME: the probe (see remote.h).  Exit 0 when every
 * step worked, 1 when one failed (its line says which and why), 2 for
 * bad usage. */
int
remote_probe(const char *cfile, const char *upname)
{
	struct weir_config cfg;
	const struct weir_upstream *up;
	struct buf err = BUF_INIT, secret = BUF_INIT, out = BUF_INIT, how = BUF_INIT;
	struct smtp_params p;
	struct smtp_result res;
	struct trouble_rules *rules = NULL;
	struct tokenok tok = { 0, -1 };
	int rc = 1, have_cfg = 0, k;
	size_t i;

	memset(&p, 0, sizeof p);
	memset(&res, 0, sizeof res);
	if (config_load(&cfg, cfile, &err) < 0) {
		for (i = 0; i < err.len; i++)	/* "file:line: what" lines, on one */
			if (err.s[i] == '\n')
				err.s[i] = i + 1 < err.len ? ' ' : '\0';
		buf_printf(&out, "config failed: %s\n", err.s);
		goto out;
	}
	have_cfg = 1;
	if ((up = config_upstream(&cfg, upname)) == NULL) {
		buf_printf(&out, "config failed: no upstream \"%s\" in %s\n", upname,
		    cfg.file ? cfg.file : "the configuration");
		goto out;
	}
	if (up->host == NULL) {
		/* A delivery takes the caller's host; the probe has none. */
		buf_printf(&out, "config failed: upstream \"%s\" has no host to connect to\n",
		    upname);
		goto out;
	}
	p.up = up;
	p.host = up->host;
	p.port = up->port ? up->port : remote_default_port(up->tls);
	p.helo = cfg.hostname;
	k = remote_prepare(up, &p, &secret, &tok, &how, &err);
	if (up->oauth.present)	/* the token step, before the SMTP ones */
		buf_printf(&out, "token %s: %s\n", p.secret ? "ok" : "failed",
		    p.secret ? how.s : err.s);
	if (k < 0) {
		if (!up->oauth.present || p.secret)
			buf_printf(&out, "%s failed: %s\n", !p.secret ? "secret" : "tls", err.s);
		goto out;
	}
	rules = remote_rules(&cfg, up);
	p.rules = rules;
	log_info("probing upstream %s at %s:%u: no mail, no grant", up->name, p.host, p.port);
	smtp_probe(&p, &res);
	tokenok_done(&tok, res.auth_ok);
	secret_wipe(&secret);
	buf_add(&out, res.steps.s ? res.steps.s : "", res.steps.len);
	rc = res.probe_failed ? 1 : 0;
out:
	if (full_write(STDOUT_FILENO, out.s ? out.s : "", out.len) < 0) {
		log_warn("writing the probe's lines");
		rc = 1;
	}
	tokenok_done(&tok, 0);
	smtp_result_free(&res);
	secret_wipe(&secret);
	trouble_free(rules);
	tls_client_free(p.tls);
	buf_free(&err);
	buf_free(&out);
	buf_free(&how);
	if (have_cfg)
		config_free(&cfg);
	return rc;
}
