/*
 * creds.c: see creds.h.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gate/creds.h"
#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "mail/credfp.h"

void
creds_free(struct creds *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		free(c->name[i]);
	free(c->name);
	free(c->fp);
	free(c->oauth);
	memset(c, 0, sizeof *c);
}

void
creds_note(struct creds *c, const struct weir_upstream *ups, size_t n)
{
	const char *why;
	size_t i;
	int err;

	creds_free(c);
	c->n = n;
	c->name = xcalloc(n + 1, sizeof *c->name);
	c->fp = xcalloc(n + 1, sizeof *c->fp);
	c->oauth = xcalloc(n + 1, sizeof *c->oauth);
	for (i = 0; i < n; i++) {
		c->name[i] = xstrdup(ups[i].name);
		c->oauth[i] = ups[i].oauth.present;
		c->fp[i] = credfp(&ups[i], &why, &err);
		if (why)
			log_warnx("upstream %s: cannot look at its %s (%s): a change of that file "
			    "will not lift an authentication suspension at a restart (a reload "
			    "or weir resume %s does)", ups[i].name, why, strerror(err),
			    ups[i].name);
	}
}

void
creds_reload(struct creds *c, const char *config_file)
{
	struct weir_config cfg;
	struct buf err = BUF_INIT;

	if (config_load(&cfg, config_file, &err) < 0) {
		log_warnx("credentials not noted again, %s does not load: %s",
		    config_file ? config_file : "weir.conf", strtok(err.s, "\n"));
		buf_free(&err);
		return;
	}
	creds_note(c, cfg.upstreams, cfg.nupstreams);
	config_free(&cfg);
	buf_free(&err);
}

/* name's index in c, or c->n. */
static size_t
find(const struct creds *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->n && strcmp(c->name[i], name) != 0; i++)
		;
	return i;
}

uint64_t
creds_of(const struct creds *c, const char *name)
{
	size_t i = find(c, name);

	return i < c->n ? c->fp[i] : credfp_none();
}

int
creds_oauth(const struct creds *c, const char *name)
{
	size_t i = find(c, name);

	return i < c->n && c->oauth[i];
}

void
creds_check(const struct creds *c, struct wgate *g, struct journal *j, int64_t now,
    int64_t wmm)
{
	struct wg_up *u;
	struct buf fix = BUF_INIT;
	char when[64];
	time_t t;
	struct tm tm;

	for (u = g->ups; u; u = u->next) {
		if (u->auth_until <= now)
			continue;
		if (u->auth_fp_known && u->auth_fp != creds_of(c, u->name)) {
			wg_lift(u, 1, now);
			journal_lift(j, u, 1);
			log_info("upstream %s: authentication suspension lifted: its credentials "
			    "changed since they failed", u->name);
			continue;
		}
		t = (time_t)((u->auth_until + wmm) / 1000);
		if (gmtime_r(&t, &tm) == NULL ||
		    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
			strcpy(when, "?");
		u->auth_oauth = creds_oauth(c, u->name);
		buf_reset(&fix);
		cred_fix(&fix, u->name, u->auth_oauth, u->auth_reason);
		log_warnx("upstream %s: authentication suspension kept until %s: %s; %s; weir "
		    "resume %s tries again now", u->name, when, u->auth_fp_known ?
		    "the same credentials as when they failed" :
		    "its credentials were not noted (a journal of an older weir-gate)", fix.s,
		    u->name);
	}
	buf_free(&fix);
}
