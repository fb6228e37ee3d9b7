/*
 * status.c: `weir [-c FILE] status [--json | --watch]`: what the relay is
 * doing, as mail/relaystatus.h gathers it (the gate's status, the queue
 * per state, the drain estimate per upstream, weir-send's kept
 * sessions, the OAuth tokens' state, where waiting messages go): for
 * people, the gate's text as it wrote it (its shared store, whether it
 * answers, both counts of each window) followed by the queue, the routes
 * (each upstream with fallbacks, passed over or not and why; the first
 * ROUTES_SHOWN waiting messages and the upstream each will go through),
 * the sessions, the tokens (auth.c) and the estimate; with --json, relay_status_json's document (also
 * weir-metrics' /status.json).
 *
 * --watch shows a short form of the same every second, on a timer (no
 * busy loop), until SIGINT or SIGTERM: each window as a bar of its use
 * of the limit, and the drain estimate.  On a terminal the screen is
 * cleared for each frame; otherwise the frames follow one another, each
 * starting with a blank line and "weir status at TIME".
 *
 * Exit 0; 1 when the gate did not answer or the queue could not be read
 * (everything else is printed all the same); 2 for bad usage.
 *
 * Trusts: what relaystatus.c trusts.  Config keys: those of
 * mail/relaystatus.h.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/timefmt.h"
#include "mail/relaystatus.h"
#include "weir/weir.h"

#define ROUTES_SHOWN	20	/* waiting messages whose route is printed */

static void
text_out(struct buf *o, const struct relay_status *s)
{
	const char *sock = s->gsock, *p, *nl;
	const struct buf *gtext = &s->gtext;
	time_t now = s->now;
	char d[64], when[32];
	size_t i;

	buf_printf(o, "weir: %s\n", s->line.s);
	for (i = 0; s->nproblems > 1 && i < s->nproblems; i++)
		buf_printf(o, "  %s%s%s%s%s%s\n", s->problems[i].upstream ? "upstream " : "",
		    s->problems[i].upstream ? s->problems[i].upstream : "",
		    s->problems[i].upstream ? ": " : "", s->problems[i].what,
		    s->problems[i].todo ? "; " : "", s->problems[i].todo ? s->problems[i].todo : "");
	if (s->gate_ok) {
		buf_printf(o, "weir-gate (%s):\n", sock);
		for (p = gtext->s; p && *p; p = nl ? nl + 1 : NULL) {
			nl = strchr(p, '\n');
			buf_printf(o, "  %.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
		}
	} else
		buf_printf(o, "weir-gate (%s): not answering: %s\n", sock, s->gwhy.s);
	buf_printf(o, "queue %s:\n", s->cfg->queue_dir);
	if (!s->q_ok)
		buf_printf(o, "  cannot be read: %s\n", s->qwhy.s);
	buf_printf(o, "  messages: %llu (not yet preprocessed: %llu)\n", s->messages, s->todo);
	buf_printf(o, "  recipients not done: %llu\n", s->rcpt_left);
	buf_printf(o, "  messages (recipients) waiting for the window: %llu (%llu); deferred: "
	    "%llu (%llu); held: %llu (%llu)\n", s->waiting.messages, s->waiting.recipients,
	    s->deferred.messages, s->deferred.recipients, s->held.messages, s->held.recipients);
	for (i = 0; i < s->nreasons; i++)
		buf_printf(o, "    deferred by \"%s\": %llu recipient%s\n", s->reasons[i].reply,
		    s->reasons[i].recipients, s->reasons[i].recipients == 1 ? "" : "s");
	if (s->reasons_other)
		buf_printf(o, "    deferred by other replies: %llu recipient%s\n", s->reasons_other,
		    s->reasons_other == 1 ? "" : "s");
	if (s->trouble)
		buf_printf(o, "  messages with trouble: %llu (see weir queue)\n", s->trouble);
	if (s->have_oldest) {
		duration_format(d, sizeof d, now > s->oldest ? (long long)(now - s->oldest) : 0);
		date_iso(when, sizeof when, s->oldest);
		buf_printf(o, "  oldest message: %s old (queued %s)\n", d, when);
	} else
		buf_adds(o, "  oldest message: none\n");
	relay_status_routes_text(s, o, ROUTES_SHOWN);
	relay_status_sessions(s, o, 0);
	auth_status_out(o, s->cfg, 0, now);
	if (s->cfg->nupstreams == 0)
		buf_printf(o, "no upstream is configured in %s: mail is queued and nothing is "
		    "sent until one is (dpkg-reconfigure weir, or an upstream section; "
		    "weir presets)\n", s->cfg->file ? s->cfg->file : "weir.conf");
	buf_printf(o, "drain estimate (a lower bound: every attempt succeeding, windows from "
	    "%s):\n", s->winsrc);
	for (i = 0; i < s->nup; i++) {
		const struct rs_up *u = &s->up[i];

		buf_printf(o, "  upstream %s%s%s%s: %llu message%s, %llu recipient%s, %llu send%s: ",
		    u->name, s->cfg->upstreams[i].preset ? " (preset " : "",
		    s->cfg->upstreams[i].preset ? s->cfg->upstreams[i].preset : "",
		    s->cfg->upstreams[i].preset ? ")" : "", u->messages, u->messages == 1 ? "" : "s", u->recipients,
		    u->recipients == 1 ? "" : "s", u->sends, u->sends == 1 ? "" : "s");
		if (u->estimate < 0 && u->at_least < 0) {
			buf_adds(o, "unknown (no policy for it: weir-gate refuses it)\n");
			continue;
		}
		duration_format(d, sizeof d, u->estimate < 0 ? u->at_least : u->estimate);
		if (u->estimate < 0)
			buf_printf(o, "unknown (weir-gate is not answering; once it does, at least %s",
			    d);
		else
			buf_printf(o, "about %s", d);
		if (u->bottleneck) {
			char per[32];

			duration_format(per, sizeof per, u->bottleneck->per);
			buf_printf(o, " (window %lld %s per %s, %lld used)", u->bottleneck->limit,
			    policy_unit_name(u->bottleneck->unit), per, u->bottleneck->used);
		}
		if (u->suspended > 0) {
			duration_format(d, sizeof d, u->suspended);
			buf_printf(o, ", of which %s suspended", d);
		}
		if (u->deferred > 0 && u->retry_last > (long long)now) {
			duration_format(d, sizeof d, u->retry_last - (long long)now);
			buf_printf(o, "; %llu deferred, the last retry in %s%s", u->deferred, d,
			    u->retry_bound ? " (which sets it)" : "");
		}
		if (u->estimate < 0)
			buf_addc(o, ')');
		if (u->sent_since >= 0) {
			date_iso(when, sizeof when, (time_t)(u->progress_from / 1000));
			buf_printf(o, "; %lld sent since %s (%s)", u->sent_since, when,
			    u->progress_from == u->backlog_since ? "the backlog began" :
			    "the gate's history begins");
		}
		buf_addc(o, '\n');
	}
	if (s->other.messages)
		buf_printf(o, "  no upstream section: %llu message%s, %llu recipient%s: not "
		    "paced by the gate\n", s->other.messages, s->other.messages == 1 ? "" : "s",
		    s->other.recipients, s->other.recipients == 1 ? "" : "s");
}

/* ---- --watch: one frame a second ---- */

#define BAR_WIDTH 20

static void
watch_out(struct buf *o, const struct relay_status *s)
{
	time_t now = s->now;
	char d[64], when[32];
	size_t i, j, k, fill;

	date_iso(when, sizeof when, now);
	buf_printf(o, "weir status at %s (every second; interrupt to stop)\n", when);
	if (!s->gate_ok)
		buf_printf(o, "weir-gate (%s): not answering: %s\n", s->gsock, s->gwhy.s);
	for (i = 0; i < s->nup; i++) {
		const struct rs_up *u = &s->up[i];

		buf_printf(o, "upstream %s: ", u->name);
		if (u->suspended > 0) {
			duration_format(d, sizeof d, u->suspended);
			buf_printf(o, "suspended for %s\n", d);
		} else
			buf_adds(o, u->known ? "active\n" : "no windows known\n");
		for (j = 0; j < u->nwin; j++) {
			const struct rs_win *w = &u->win[j];
			char label[96];

			duration_format(d, sizeof d, w->per);
			snprintf(label, sizeof label, "%s per %s", policy_unit_name(w->unit), d);
			fill = w->used <= 0 ? 0 : w->used >= w->limit ? BAR_WIDTH :
			    (size_t)((w->used * BAR_WIDTH + w->limit - 1) / w->limit);
			buf_printf(o, "  %-22s [", label);
			for (k = 0; k < BAR_WIDTH; k++)
				buf_addc(o, k < fill ? '#' : '.');
			buf_printf(o, "] %lld of %lld\n", w->used, w->limit);
		}
		buf_printf(o, "  drain: %llu message%s, %llu recipient%s: ", u->messages,
		    u->messages == 1 ? "" : "s", u->recipients, u->recipients == 1 ? "" : "s");
		if (u->estimate < 0)
			buf_adds(o, "unknown (no windows for it)\n");
		else {
			duration_format(d, sizeof d, u->estimate);
			buf_printf(o, "about %s\n", d);
		}
	}
	buf_printf(o, "queue: %llu message%s (%llu not preprocessed), %llu recipient%s not done",
	    s->messages, s->messages == 1 ? "" : "s", s->todo, s->rcpt_left,
	    s->rcpt_left == 1 ? "" : "s");
	if (s->have_oldest) {
		duration_format(d, sizeof d, now > s->oldest ? (long long)(now - s->oldest) : 0);
		buf_printf(o, ", oldest %s old", d);
	}
	buf_addc(o, '\n');
	if (!s->q_ok)
		buf_printf(o, "queue cannot be read: %s\n", s->qwhy.s);
	buf_printf(o, "(windows from %s; the drain is a lower bound, see weir(8))\n", s->winsrc);
}

enum status_mode { ST_TEXT, ST_JSON, ST_WATCH };

/* One status, into out.  1 when the gate answered and the queue was read. */
static int
status_once(struct weir_config *cfg, enum status_mode mode, struct buf *out)
{
	struct relay_status rs;
	int ok = relay_status_get(&rs, cfg, mode == ST_JSON ? RS_JSON : mode == ST_TEXT ?
	    RS_JSON | RS_GATE_TEXT : 0, RS_GATE_TIMEOUT_MS);

	if (mode == ST_JSON)
		relay_status_json(&rs, out);
	else if (mode == ST_WATCH)
		watch_out(out, &rs);
	else
		text_out(out, &rs);
	relay_status_free(&rs);
	return ok;
}

struct watch {
	struct weir_config *cfg;
	uint64_t next;		/* the next frame, monotonic ms */
	int tty;
	int rc;
};

static void
on_frame(struct evloop *ev, struct evtimer *t, void *arg)
{
	struct watch *w = arg;
	struct buf out = BUF_INIT;

	(void)t;
	/* A terminal is cleared (cursor home, erase); a pipe or file gets
	 * the frames one after the other, a blank line between them. */
	buf_adds(&out, w->tty ? "\033[H\033[2J" : "\n");
	status_once(w->cfg, ST_WATCH, &out);
	if (full_write(STDOUT_FILENO, out.s, out.len) < 0) {
		log_warn("write");
		w->rc = 1;
		evloop_stop(ev);
	} else {
		w->next += 1000;
		if (w->next < clock_mono_ms())	/* a slow frame: no catching up */
			w->next = clock_mono_ms() + 1000;
		evloop_timer_at(ev, w->next, on_frame, w);
	}
	buf_free(&out);
}

static void
on_interrupt(struct evloop *ev, int signo, void *arg)
{
	(void)signo; (void)arg;
	evloop_stop(ev);
}

/* Until SIGINT or SIGTERM (exit 0) or stdout fails (exit 1). */
static int
watch(struct weir_config *cfg)
{
	struct watch w;
	struct evloop *ev = evloop_new();

	memset(&w, 0, sizeof w);
	w.cfg = cfg;
	w.tty = isatty(STDOUT_FILENO);
	w.next = clock_mono_ms();
	evloop_signal(ev, SIGINT, on_interrupt, &w);
	evloop_signal(ev, SIGTERM, on_interrupt, &w);
	evloop_timer_at(ev, w.next, on_frame, &w);
	if (evloop_run(ev) < 0) {
		log_warn("event loop");
		w.rc = 1;
	}
	evloop_free(ev);
	return w.rc;
}

int
cmd_status(int argc, char **argv, struct weir_config *cfg)
{
	struct buf out = BUF_INIT;
	int json = 0, ok;

	if (argc == 2 && strcmp(argv[1], "--watch") == 0)
		return watch(cfg);
	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		log_warnx("usage: weir status [--json | --watch]");
		return 2;
	}
	ok = status_once(cfg, json ? ST_JSON : ST_TEXT, &out);
	if (fwrite(out.s, 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
		log_warn("write");
		ok = 0;
	}
	buf_free(&out);
	return ok ? 0 : 1;
}
