/*
 * keepalive.c: weir-send's OAuth keep-alive, beside the stages
 * (sendint.h).  A refresh token dies unused (90 days at Microsoft), and
 * one that died (revoked, a password changed, a Google app in testing 7
 * days after its login) is found only when it is used; the deliverer
 * uses it only to deliver.  So for each upstream with an oauth section,
 * once its refresh token has gone unused for the section's refresh_idle
 * (a day; unused: no refresh worked and no login came since, as its
 * token status file says), the deliverer runs in its keep-alive mode,
 * `weir-remote -K -u NAME` (deliver.c's argv, so with the settings in
 * force and with weir-remote's identity: weir-send never reads the
 * tokens), which refreshes it.  Mail or none, a token is used at least
 * every refresh_idle, and one found dead raises the alarm a delivery's
 * would: the status file says a login is needed (weir status, weir
 * check-config, the metric, the status page), weir-remote tells
 * weir-gate (REFUSED: the upstream suspended), and here the admin is
 * mailed (notice.c, once a day).
 *
 * One look per upstream at a time, at the instant it is due: its last
 * use plus refresh_idle; a run that did not refresh (the endpoint down)
 * is tried again after an hour (or refresh_idle, if shorter); while a
 * login is needed, or before the first one, nothing runs and the upstream
 * is looked at again hourly (the notice's day is kept to the hour).  A
 * run is killed after RUN_MAX_MS.  Every upstream is looked at again at
 * start and after a reload.  Only with weir-remote as the deliverer
 * (sched.h's sessions): another one would take -K for a host.
 *
 * Trusts: the token status file as mail/oauth.h reads it; the
 * deliverer's exit status.  Config keys: the upstreams' oauth sections
 * (refresh_idle, token_file).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/oauth.h"
#include "send/sendint.h"

#define RECHECK_S	3600			/* at most this long between looks */
#define RUN_MAX_MS	(15 * 60 * 1000)	/* two HTTPS exchanges' timeouts, and more */

/* One upstream's keep-alive, by name (a reload renumbers upstreams). */
struct ka {
	struct sched *s;
	char *name;
	pid_t pid;		/* its weir-remote -K running, or 0 */
	long long tried;	/* wall s of the last run's start; 0: none */
	long long next;		/* wall s of the next look; 0: now */
	int seen;		/* its upstream is in the settings in force */
	struct evtimer *overdue;
	struct ka *next_ka;
};

struct keepalive {
	struct ka *list;
	struct evtimer *timer;
};

static void pass(struct sched *s);

static void
on_timer(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct sched *s = arg;

	(void)ev; (void)t;
	s->ka->timer = NULL;
	pass(s);
}

static void
on_overdue(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct ka *k = arg;

	(void)ev; (void)t;
	k->overdue = NULL;
	log_warnx("upstream %s: OAuth keep-alive: weir-remote -K (pid %ld) ran too long; "
	    "killing it", k->name, (long)k->pid);
	kill(-k->pid, SIGKILL);	/* its own process group (deliver_fork) */
}

/* weir-remote -K for upstream up: 0 started, -1 not. */
static int
run(struct sched *s, size_t up, struct ka *k, long long now)
{
	const char *argv[16];
	int fd0 = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd0 < 0) {
		log_warn("upstream %s: OAuth keep-alive: /dev/null", k->name);
		return -1;
	}
	deliver_argv(s, up, argv, "-K", NULL);
	k->pid = deliver_fork(argv, fd0, -1, -1, SIGKILL);
	(void)close(fd0);
	if (k->pid < 0) {
		k->pid = 0;
		return -1;
	}
	k->tried = now;
	k->overdue = evloop_timer_at(s->ev, clock_mono_ms() + RUN_MAX_MS, on_overdue, k);
	return 0;
}

/* Look at upstream up now: run the keep-alive if it is due.  The wall
 * time of the next look, or 0 when a run started. */
static long long
look(struct sched *s, size_t up, struct ka *k, long long now)
{
	const struct weir_upstream *u = &s->cfg->upstreams[up];
	long long retry = u->oauth.refresh_idle < RECHECK_S ? u->oauth.refresh_idle : RECHECK_S;
	long long due, last;
	struct oauth_status st;
	struct buf why = BUF_INIT;
	char ago[64], when[OAUTH_TIME_MAX];
	int r = oauth_status_load(&u->oauth, &st, &why);

	buf_free(&why);		/* unreadable: weir-remote -K will say why */
	if (r == 0)
		return now + retry;	/* no login yet: no token to keep */
	if (r == 1 && st.login_needed) {
		oauth_time(when, sizeof when, st.error_at);
		log_warnx("upstream %s: OAuth: a login is needed since %s: no keep-alive until "
		    "weir auth login %s", u->name, when, u->name);
		notice_oauth(s, up);
		return now + retry;
	}
	last = r == 1 ? oauth_last_use(&st) : 0;
	due = last + u->oauth.refresh_idle;
	if (k->tried && due < k->tried + retry)
		due = k->tried + retry;	/* the last run did not refresh */
	if (due > now)
		return due;
	if (run(s, up, k, now) < 0)
		return now + retry;
	duration_format(ago, sizeof ago, now - last);
	log_info("upstream %s: OAuth keep-alive: its refresh token unused %s%s: weir-remote -K, "
	    "pid %ld", u->name, last ? "for " : "(its status unreadable)", last ? ago : "",
	    (long)k->pid);
	return 0;
}

static struct ka *
entry(struct sched *s, const char *name)
{
	struct ka *k;

	for (k = s->ka->list; k; k = k->next_ka)
		if (strcmp(k->name, name) == 0)
			return k;
	k = xcalloc(1, sizeof *k);
	k->s = s;
	k->name = xstrdup(name);
	k->next_ka = s->ka->list;
	s->ka->list = k;
	return k;
}

/* Each upstream whose look is due; entries of upstreams gone (and not
 * running) dropped; the timer set for the next look. */
static void
pass(struct sched *s)
{
	long long now = sched_wall(), first = 0;
	struct ka *k, **kp;
	size_t i;

	for (k = s->ka->list; k; k = k->next_ka)
		k->seen = 0;
	for (i = 0; i < s->cfg->nupstreams; i++) {
		if (!s->cfg->upstreams[i].oauth.present ||
		    OAUTH_APP_ONLY(&s->cfg->upstreams[i].oauth))
			continue;	/* no refresh token to keep */
		k = entry(s, s->cfg->upstreams[i].name);
		k->seen = 1;
		if (!k->pid && k->next <= now)
			k->next = look(s, i, k, now);
	}
	for (kp = &s->ka->list; (k = *kp) != NULL;) {
		if (!k->seen && !k->pid) {
			*kp = k->next_ka;
			free(k->name);
			free(k);
			continue;
		}
		if (!k->pid && (first == 0 || k->next < first))
			first = k->next;
		kp = &k->next_ka;
	}
	if (s->ka->timer)
		evloop_timer_cancel(s->ev, s->ka->timer);
	s->ka->timer = NULL;
	if (first)
		s->ka->timer = evloop_timer_at(s->ev, clock_mono_ms() +
		    (uint64_t)(first > now ? first - now : 0) * 1000, on_timer, s);
}

void
keepalive_check(struct sched *s)
{
	struct ka *k;
	size_t i;

	if (!s->o->sessions) {
		for (i = 0; i < s->cfg->nupstreams; i++)
			if (s->cfg->upstreams[i].oauth.present) {
				log_warnx("upstream %s: no OAuth keep-alive: the deliverer is not "
				    "weir-remote", s->cfg->upstreams[i].name);
				break;
			}
		return;
	}
	if (s->ka == NULL)
		s->ka = xcalloc(1, sizeof *s->ka);
	for (k = s->ka->list; k; k = k->next_ka)
		if (!k->pid)
			k->next = 0;
	pass(s);
}

int
keepalive_reaped(struct sched *s, pid_t pid, int status)
{
	struct ka *k;

	for (k = s->ka ? s->ka->list : NULL; k && k->pid != pid; k = k->next_ka)
		;
	if (k == NULL)
		return 0;
	k->pid = 0;
	k->next = 0;
	if (k->overdue)
		evloop_timer_cancel(s->ev, k->overdue);
	k->overdue = NULL;
	if (WIFSIGNALED(status))
		log_warnx("upstream %s: OAuth keep-alive: weir-remote -K killed by signal %d",
		    k->name, WTERMSIG(status));
	else if (WEXITSTATUS(status) == OAUTH_KA_REFUSED)
		log_warnx("upstream %s: OAuth keep-alive: the provider refuses the refresh token "
		    "(or there is none): a login is needed", k->name);
	else if (WEXITSTATUS(status) != OAUTH_KA_OK)
		log_warnx("upstream %s: OAuth keep-alive: weir-remote -K exited %d", k->name,
		    WEXITSTATUS(status));
	pass(s);
	return 1;
}
