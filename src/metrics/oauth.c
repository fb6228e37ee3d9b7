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
#include <stdlib.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/oauth.h"
#include "metrics/metrics.h"

void
metrics_oauth(const struct weir_config *cfg, struct buf *o)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
		{ "weir_oauth_login_needed", "1 while the upstream's OAuth provider refuses its "
		    "refresh token or the application's credentials, there is none, or a new one "
		    "could not be saved: run weir auth login UPSTREAM." },
		{ "weir_oauth_access_token_expiry_timestamp_seconds", "When the upstream's OAuth "
		    "access token expires (refreshed before)." },
		{ "weir_oauth_refresh_token_issued_timestamp_seconds", "When the upstream's OAuth "
		    "refresh token in use was issued (at the login, or its last rotation)." },
	};
	size_t i, f, n = cfg ? cfg->nupstreams : 0, any = 0;
	struct oauth_status *st = xcalloc(n + 1, sizeof *st);
	int *have = xcalloc(n + 1, sizeof *have);
	struct buf why = BUF_INIT;
	long long v;

	for (i = 0; i < n; i++) {
		if (!cfg->upstreams[i].oauth.present)
			continue;
		any++;
		buf_reset(&why);
		have[i] = oauth_status_load(&cfg->upstreams[i].oauth, &st[i], &why);
		if (have[i] < 0)
			log_warnx("upstream %s: %s", cfg->upstreams[i].name, why.s);
	}
	/* No family without a sample to give.  Upstream names are policy
	 * names (A-Z a-z 0-9 . - _): no escaping. */
	for (f = 0; any && f < sizeof fam / sizeof fam[0]; f++) {
		buf_printf(o, "# HELP %s %s\n# TYPE %s gauge\n", fam[f].name, fam[f].help,
		    fam[f].name);
		for (i = 0; i < n; i++) {
			if (!cfg->upstreams[i].oauth.present || (f > 0 && have[i] != 1))
				continue;
			v = f == 0 ? (have[i] != 1 || st[i].login_needed) :
			    f == 1 ? st[i].expires_at : st[i].refresh_since;
			buf_printf(o, "%s{upstream=\"%s\"} %lld\n", fam[f].name,
			    cfg->upstreams[i].name, v);
		}
	}
	buf_free(&why);
	free(st);
	free(have);
}
