/*
 * presets.c: `weir [-c FILE] presets [NAME...]`: the provider presets in
 * preset_dir (weir.conf(5), "Presets"), each with its relay, the cap per
 * message and the windows it gives weir-gate, and the documents its
 * figures come from; with names, those alone.  A preset that does not
 * load is said, with its errors, and makes the exit 1.
 *
 * Exit 0; 1 when a preset did not load or preset_dir cannot be read; 2
 * for bad usage.
 *
 * Trusts: the preset files (the package's).  Config keys: preset_dir.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/config.h"
#include "weir/weir.h"

static const char *const tls_names[] = { "starttls", "smtps", "none" };

/* One preset, as lines, into o; 0 loaded, -1 not (its errors said). */
static int
one(struct buf *o, const char *dir, const char *name)
{
	struct weir_preset p;
	struct buf err = BUF_INIT;
	char per[64];
	size_t i;

	if (config_preset_load(dir, name, &p, &err) < 0) {
		buf_printf(o, "%s: does not load:\n%s", name, err.s ? err.s : "");
		buf_free(&err);
		config_preset_free(&p);
		return -1;
	}
	buf_printf(o, "%s: %s\n", name, p.title);
	buf_printf(o, "  relay: %s port %u, %s", p.up.host ? p.up.host : "(set host)",
	    p.up.port, tls_names[p.up.tls]);
	if (p.up.mechanisms.n) {
		buf_adds(o, ", mechanisms");
		for (i = 0; i < p.up.mechanisms.n; i++)
			buf_printf(o, " %s", p.up.mechanisms.v[i]);
	}
	if (p.up.oauth.present)
		buf_printf(o, ", or OAuth (provider %s)", p.up.oauth.provider == OAUTH_MICROSOFT ?
		    "microsoft" : p.up.oauth.provider == OAUTH_GOOGLE ? "google" : "generic");
	buf_printf(o, "\n  recipients per message: %u\n", p.up.max_recipients);
	buf_adds(o, "  limits:");
	if (p.limits.nwin == 0)
		buf_adds(o, " none published (policy.conf's \"*\" section applies)");
	for (i = 0; i < p.limits.nwin; i++) {
		duration_format(per, sizeof per, p.limits.win[i].per);
		buf_printf(o, "%s %lld %s per %s", i ? "," : "", p.limits.win[i].limit,
		    policy_unit_name(p.limits.win[i].unit), per);
	}
	if (p.limits_set & PRESET_SET_MAX_CONNECTIONS)
		buf_printf(o, "; %lld connections at once", p.limits.max_connections);
	if (p.limits_set & PRESET_SET_MESSAGES_PER_CONNECTION)
		buf_printf(o, "; %lld messages per connection", p.limits.messages_per_connection);
	buf_addc(o, '\n');
	for (i = 0; i < p.source.n; i++)
		buf_printf(o, "  source: %s\n", p.source.v[i]);
	config_preset_free(&p);
	return 0;
}

int
cmd_presets(int argc, char **argv, struct weir_config *cfg)
{
	struct buf o = BUF_INIT;
	char **names = NULL;
	ssize_t n = 0, i;
	int rc = 0;

	if (argc > 1 && argv[1][0] == '-') {
		log_warnx("usage: weir [-c FILE] presets [NAME...]");
		return 2;
	}
	if (argc == 1) {
		if ((n = config_preset_names(cfg->preset_dir, &names)) < 0) {
			log_warnx("presets: %s: %s", cfg->preset_dir, strerror(errno));
			return 1;
		}
		buf_printf(&o, "%zd presets in %s (upstream \"NAME\" { preset = \"...\" }; "
		    "every key the section sets wins):\n", n, cfg->preset_dir);
	}
	for (i = 0; i < (argc == 1 ? n : argc - 1); i++) {
		if (one(&o, cfg->preset_dir, argc == 1 ? names[i] : argv[i + 1]) < 0)
			rc = 1;
		if (argc == 1)
			free(names[i]);
	}
	free(names);
	fputs(o.s ? o.s : "", stdout);
	buf_free(&o);
	if (fflush(stdout) != 0)
		return 1;
	return rc;
}
