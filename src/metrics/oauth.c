/*
 * oauth.c: weir-metrics' OAuth families, from each oauth upstream's
 * token status file (mail/oauth.h: readable by anyone, no secret in it;
 * read with oauthstatus.c, json-c alone).  What each one says is in
 * weir-metrics(8).
 *
 * Trusts: the status file only as it parses.  Config keys: the upstream
 * sections' oauth (token_file).
 */
#include <stdio.h>

#include "lib/log.h"
#include "mail/oauth.h"
#include "metrics/metrics.h"

static void
sample(struct buf *o, const char *name, const char *up, long long v)
{
	buf_printf(o, "%s{upstream=\"%s\"} %lld\n", name, up, v);
}

void
metrics_oauth(const struct weir_config *cfg, struct buf *o)
{
	struct oauth_status st[64];
	int have[64];
	struct buf why = BUF_INIT;
	size_t i, n = cfg ? cfg->nupstreams : 0, any = 0;

	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++)
		any += cfg->upstreams[i].oauth.present;
	if (any == 0)
		return;		/* no family without a sample to give */
	for (i = 0; i < n; i++) {
		have[i] = 0;
		if (!cfg->upstreams[i].oauth.present)
			continue;
		buf_reset(&why);
		have[i] = oauth_status_load(&cfg->upstreams[i].oauth, &st[i], &why);
		if (have[i] < 0)
			log_warnx("upstream %s: %s", cfg->upstreams[i].name, why.s);
	}
	buf_free(&why);
	/* Upstream names are policy names (A-Z a-z 0-9 . - _): no escaping. */
	buf_adds(o, "# HELP weir_oauth_login_needed 1 while the upstream's OAuth provider "
	    "refuses its refresh token, or there is none: run weir auth login UPSTREAM.\n"
	    "# TYPE weir_oauth_login_needed gauge\n");
	for (i = 0; i < n; i++)
		if (cfg->upstreams[i].oauth.present)
			sample(o, "weir_oauth_login_needed", cfg->upstreams[i].name,
			    have[i] != 1 || st[i].login_needed);
	buf_adds(o, "# HELP weir_oauth_access_token_expiry_timestamp_seconds When the "
	    "upstream's OAuth access token expires (refreshed before).\n"
	    "# TYPE weir_oauth_access_token_expiry_timestamp_seconds gauge\n");
	for (i = 0; i < n; i++)
		if (have[i] == 1)
			sample(o, "weir_oauth_access_token_expiry_timestamp_seconds",
			    cfg->upstreams[i].name, st[i].expires_at);
	buf_adds(o, "# HELP weir_oauth_refresh_token_issued_timestamp_seconds When the "
	    "upstream's OAuth refresh token in use was issued (at the login, or its last "
	    "rotation).\n# TYPE weir_oauth_refresh_token_issued_timestamp_seconds gauge\n");
	for (i = 0; i < n; i++)
		if (have[i] == 1)
			sample(o, "weir_oauth_refresh_token_issued_timestamp_seconds",
			    cfg->upstreams[i].name, st[i].refresh_since);
}
