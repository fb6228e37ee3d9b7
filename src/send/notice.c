/*
 * notice.c: the admin's mail when an upstream needs an OAuth login, or
 * refuses authentication with a reply whose fix mail/authreply.h knows
 * (notice_auth: Exchange's SMTP AUTH turned off, Gmail's app password...).
 * Both kinds share the day: one notice per upstream a day.
 *
 * The deliverer (weir-remote) finds out: the provider refused the
 * refresh token (or there is none); it writes so in the token's status
 * file (mail/oauth.h, readable by anyone, no secret in it) and reports
 * the message "authfail", which suspends the upstream at the gate (or,
 * in the keep-alive with no message, tells the gate REFUSED:
 * keepalive.c).  weir-send, on that outcome and at each of the
 * keep-alive's hourly looks, reads the status file, and while it says
 * a login is needed mails the admin address once a day: from the
 * double-bounce sender (a notice that fails is dropped, never bounced
 * again) through weir-queue, as it queues bounces.  When it was last
 * sent is kept in sched/oauth.NAME, written durably before the notice
 * is queued: a crash in between loses one notice, none goes twice.
 * While the login is needed the keep-alive looks hourly (and, when mail
 * waits for the upstream, the gate's probe brings an authfail at least
 * hourly: weir-gate(8)), so the day is kept to the hour.
 *
 * The notice goes the way of all mail to the admin: through the
 * upstream its sender picks, which may be the very one that waits for
 * the login; it then arrives with the rest once the login is done,
 * and the log, weir status, weir check-config and the metric have said
 * it meanwhile.
 *
 * Trusts: the status file only as oauth_status_load() parses it.
 * Config keys: the upstream's oauth section, admin, hostname.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/authreply.h"
#include "mail/oauth.h"
#include "send/dsn.h"
#include "send/note.h"
#include "send/sendint.h"

#define NOTICE_EVERY_S (24 * 3600)

/* The notice: since when, what the upstream or its provider said, and
 * what fixes it (advice: a paragraph; NULL: the OAuth login). */
static void
build(const struct sched *s, const struct weir_upstream *u, long long since_t,
    const char *said, const struct authreply *a, long long now, struct buf *msg)
{
	char date[DATE_RFC5322_MAX], since[OAUTH_TIME_MAX];
	unsigned char rnd[8];

	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		memset(rnd, 0, sizeof rnd);
	date_rfc5322(date, (time_t)now);
	oauth_time(since, sizeof since, since_t);
	buf_printf(msg, "From: Mail Delivery System <MAILER-DAEMON@%s>\n", s->dsn.hostname);
	buf_printf(msg, "To: %s\n", s->dsn.admin);
	if (a)
		buf_printf(msg, "Subject: weir on %s: upstream %s refuses authentication (its "
		    "mail waits)\n", s->dsn.hostname, u->name);
	else
		buf_printf(msg, "Subject: weir on %s: upstream %s needs an OAuth login (its mail "
		    "waits)\n", s->dsn.hostname, u->name);
	buf_printf(msg, "Date: %s\n", date);
	buf_printf(msg, "Message-ID: <%lld.oauth.%02x%02x%02x%02x%02x%02x%02x%02x@%s>\n", now,
	    rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7], s->dsn.hostname);
	buf_adds(msg, "Auto-Submitted: auto-generated\nMIME-Version: 1.0\n"
	    "Content-Type: text/plain; charset=us-ascii\n\n");
	buf_printf(msg, "This is weir at %s.\n\n", s->dsn.hostname);
	buf_printf(msg, "Since %s I cannot send through upstream \"%s\" (account %s):\n\n"
	    "  %s\n\n", since, u->name, u->username ? u->username : "(none)", said);
	buf_adds(msg, "Mail through it waits in the queue; nothing bounces. ");
	if (a) {
		buf_printf(msg, "%s says this means: %s.\n\nWhat fixes it: %s.\n\n(From %s.)\n\n",
		    a->provider, a->means, a->fix, a->source);
		buf_adds(msg, "I send this once a day while it lasts.\n");
		return;
	}
	buf_adds(msg, "To sign in again, run on this host, as root:\n\n");
	buf_printf(msg, "  weir auth login %s\n\n", u->name);
	buf_adds(msg, "and follow what it says. The mail that waits goes as soon as the "
	    "login is done.\n\nI send this once a day while the login is needed.\n");
}

/* The notice about u, once a day (sched/oauth.NAME). */
static void
send_notice(struct sched *s, const struct weir_upstream *u, long long since, const char *said,
    const struct authreply *a)
{
	struct buf msg = BUF_INIT;
	char who[POLICY_NAME_MAX + 16];
	long long now = sched_wall(), last = 0;

	if (note_oauth_load(s->o->q, u->name, &last) == 0 && now - last < NOTICE_EVERY_S &&
	    now >= last)
		return;
	if (!s->notes_ok || note_oauth_save(s->o->q, u->name, now) < 0) {
		log_warnx("upstream %s: no notice to the admin: sched/ cannot keep when it "
		    "was sent (weir queue-check)", u->name);
		return;
	}
	build(s, u, since, said, a, now, &msg);
	snprintf(who, sizeof who, "upstream %s", u->name);
	(void)dsn_inject(&s->dsn, who, a ? "authentication notice" : "OAuth login notice",
	    DOUBLE_BOUNCE_SENDER, s->dsn.admin, &msg);
	buf_free(&msg);
}

void
notice_oauth(struct sched *s, size_t up)
{
	const struct weir_upstream *u = up < s->cfg->nupstreams ? &s->cfg->upstreams[up] : NULL;
	struct oauth_status st;
	struct buf why = BUF_INIT;
	int r;

	if (u == NULL || !u->oauth.present)
		return;
	r = oauth_status_load(&u->oauth, &st, &why);
	if (r < 0)
		log_warnx("upstream %s: %s: no notice to the admin", u->name, why.s);
	if (r == 1 && st.login_needed)
		send_notice(s, u, st.error_at, st.error, NULL);
	buf_free(&why);
}

void
notice_auth(struct sched *s, size_t up, const char *reply)
{
	const struct authreply *a = authreply_find(reply);

	if (a && up < s->cfg->nupstreams)
		send_notice(s, &s->cfg->upstreams[up], sched_wall(), reply, a);
}
