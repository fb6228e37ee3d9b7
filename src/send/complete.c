/*
 * complete.c: the last stage of an attempt (sendint.h): a deliverer is
 * done with a batch.  Tell weir-gate what its outcome line says, apply
 * its report (D marks, bounce notes, the delay warning), and send the
 * message on: the rest of its pass, a retry, or its end.
 *
 * Trusts: the deliverer's output only through report_parse() and
 * outcome_parse().  Config keys: queue_lifetime, retry_skip,
 * delay_warning (through struct sched).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "mail/authreply.h"
#include "mail/outcome.h"
#include "send/rcptfile.h"
#include "send/report.h"
#include "send/sendint.h"

#define THROTTLE_GUARD_MS 5000	/* a throttle holds grants this long at least */

static enum upstream_word apply(struct sched *s, struct job *j, enum outcome_kind how,
    size_t undone);

/* Nothing reached the upstream: give the grant back, try later. */
void
complete_unrun(struct sched *s, struct job *j, int lost)
{
	struct msg *m = j->m;

	if (lost == GRANT_LOST) {
		log_info("msg %s: its grant went with the connection to weir-gate; it asks "
		    "again once the gate is back", m->qid);
		job_drop(s, j);
		return;
	}
	wait_end(m);
	(void)gatelink_tell(s, j, GP_REFUND, 0, NULL);
	job_free(s, j);
	sched_at(s, m, sched_wall() + SYSFAIL_S);
}

/* ---- a deliverer's report ---- */

/* Tell the gate what the deliverer's outcome line (mail/outcome.h)
 * says happened, and return it; *undone: how many of the batch's last
 * recipients it did not attempt.  No line: refund if the deliverer
 * stopped on its own (before connecting: config, secret), unknown if it
 * crashed (maybe after the final dot); a malformed line: unknown. */
static enum outcome_kind
tell_gate(struct sched *s, struct job *j, size_t *undone)
{
	struct outcome o;
	const char *why = NULL;
	int crashed = WIFSIGNALED(j->status);
	int oauth = j->up < s->cfg->nupstreams && s->cfg->upstreams[j->up].oauth.present;
	const struct authreply *known;
	uint32_t tag;

	*undone = 0;
	memset(&o, 0, sizeof o);
	if (j->oc.len == 0)
		o.kind = crashed ? OUTCOME_UNKNOWN : OUTCOME_REFUND;
	else if (outcome_parse(j->oc.s, j->oc.len, &o, &why) < 0) {
		log_warnx("msg %s: the deliverer's outcome line is malformed: %s", j->m->qid, why);
		o.kind = OUTCOME_UNKNOWN;
	}
	if (o.kind == OUTCOME_THROTTLED)
		log_warnx("msg %s: the upstream is throttling us: %s", j->m->qid, o.text);
	else if (o.kind == OUTCOME_QUOTA)
		log_warnx("msg %s: upstream %s says the sender's or account's quota is spent: %s",
		    j->m->qid, s->ups[j->up].name, o.text);
	if (o.kind == OUTCOME_AUTHFAIL && (known = authreply_find(o.text)) != NULL) {
		log_warnx("msg %s: upstream %s refused authentication: %s; %s says %s: %s",
		    j->m->qid, s->ups[j->up].name, o.text, known->provider, known->means,
		    known->fix);
		notice_auth(s, j->up, o.text);
	} else if (o.kind == OUTCOME_AUTHFAIL && oauth) {
		log_warnx("msg %s: upstream %s refused our OAuth token, or its provider our "
		    "refresh token: %s", j->m->qid, s->ups[j->up].name, o.text);
		notice_oauth(s, j->up);
	} else if (oauth) {
		notice_oauth(s, j->up);	/* an alarm without a refusal (oauth.h) */
	} else if (o.kind == OUTCOME_AUTHFAIL) {
		log_warnx("msg %s: the upstream refused our credentials or certificate: %s; "
		    "check username, secret_file (or secret_command), verify and ca_file of "
		    "upstream %s", j->m->qid, o.text, s->ups[j->up].name);
	}
	if (o.kind == OUTCOME_SENT || o.kind == OUTCOME_RELAY) {
		/* Only the last ones of the batch can be undone, never all. */
		if (o.undone < j->n && (o.kind == OUTCOME_SENT || o.undone == 0))
			*undone = o.undone;
		j->sent_at = o.at;
	}
	tag = gatelink_tell(s, j, outcome_gate(o.kind), o.accepted > j->n ? (uint32_t)j->n :
	    (uint32_t)o.accepted, o.text);
	/* A throttle holds the upstream's grants (apply) until the gate
	 * answers this report with its suspension (batch_suspended).  An
	 * AUTHFAIL holds nothing: the gate's suspension paces the tries, and
	 * its RESUME or a reload lifts it at once. */
	if (tag != 0 && (o.kind == OUTCOME_THROTTLED || o.kind == OUTCOME_QUOTA))
		s->ups[j->up].throttle_tag = tag;
	return o.kind;
}

/* A deliverer is done with j: tell the gate, then act on its report. */
enum upstream_word
complete_job(struct sched *s, struct job *j)
{
	size_t undone;
	enum outcome_kind how = tell_gate(s, j, &undone);
	struct msg *m = j->m;

	if (how != OUTCOME_STALE || WIFSIGNALED(j->status))
		return apply(s, j, how, undone);
	/* The kept session had been closed by the upstream while idle:
	 * nothing of the message was sent.  Again at once, on a new
	 * session; the upstream's other idle ones are likely closed too. */
	log_info("msg %s: not sent: the upstream had closed the session while it was "
	    "idle; again on a new one", m->qid);
	job_free(s, j);
	sched_at(s, m, sched_wall());
	return UP_CLOSES_IDLE;
}

/* What a batch came to, recipient by recipient. */
struct tally {
	size_t *done;		/* their T bytes in remote/S/N, to mark D */
	size_t ndone, ntemp, nperm;
};

/* res[] for each of j's recipients: the report's, or all put off if
 * the deliverer crashed or could not run. */
static void
read_results(struct job *j, struct rresult *res)
{
	const char *mtext = "", *why = NULL;
	size_t i;

	if (WIFSIGNALED(j->status))
		why = "the deliverer crashed";
	else if (WEXITSTATUS(j->status) != 0)
		why = "the deliverer could not run";
	if (why) {
		for (i = 0; i < j->n; i++)
			res[i] = (struct rresult){ RS_TEMP, why, 0 };
	} else {
		buf_add(&j->out, "", 0);
		report_parse(j->out.s ? j->out.s : "", j->out.len, j->n, res, &mtext);
	}
}

/* The last `undone` recipients were not attempted (one transaction per
 * grant): not a failure, they go in the next batch; and batches of
 * this upstream are no bigger than what it took from now on.  Returns
 * how many were tried. */
static size_t
learn_undone(struct sched *s, struct job *j, size_t undone)
{
	size_t tried = j->n - undone;

	if (undone > 0) {
		struct upq *u = &s->ups[j->up];

		if (batch_took(u, tried))
			log_info("msg %s: %s takes %zu recipients per transaction; batches of "
			    "%zu from now on", j->m->qid, u->name, tried, tried);
	}
	return tried;
}

/* Recipient i of j: log its result r, and add it to t (a bounce note,
 * durable before its D mark).  how is the outcome line's; expired: the
 * message is past queue_lifetime. */
static void
settle(struct sched *s, struct job *j, size_t i, struct rresult *r, enum outcome_kind how,
    int expired, struct tally *t)
{
	struct msg *m = j->m;
	const char *text = r->text ? r->text : "";
	struct buf note = BUF_INIT, shown = BUF_INIT;

	/* Trouble with the relay (connect, TLS, AUTH, MAIL FROM, a
	 * throttle) never turns into a bounce, whatever the report says;
	 * and only a recipient's own temporary failure, in a "sent"
	 * session, can expire it. */
	if (r->st == RS_PERM && (how == OUTCOME_RELAY || how == OUTCOME_REFUND ||
	    how == OUTCOME_NOMAIL || how == OUTCOME_THROTTLED || how == OUTCOME_QUOTA ||
	    how == OUTCOME_AUTHFAIL ||
	    how == OUTCOME_UNREACHED || how == OUTCOME_NOGREETING))
		r->st = RS_TEMP;
	if (r->st == RS_TEMP && r->own && how == OUTCOME_SENT && expired) {
		buf_printf(&note, "%s\nI'm not going to try again; this message has been "
		    "in the queue too long.", text);
		r->st = RS_PERM;
		text = note.s;
	}
	buf_add_oneline(&shown, text, strlen(text));
	switch (r->st) {
	case RS_DELIVERED:
		log_info("msg %s: delivered to <%s>: %s", m->qid, j->addrs[i],
		    shown.s);
		t->done[t->ndone++] = j->offs[i];
		break;
	case RS_PERM:
		log_info("msg %s: bounced <%s>: %s", m->qid, j->addrs[i], shown.s);
		/* The note must be durable before the D mark. */
		if (bounce_note(s->o->q, m->id, j->addrs[i], text) == 0) {
			t->done[t->ndone++] = j->offs[i];
			t->nperm++;
		} else {
			t->ntemp++;
		}
		break;
	case RS_TEMP:
		log_info("msg %s: deferred <%s>: %s", m->qid, j->addrs[i], shown.s);
		t->ntemp++;
		break;
	}
	buf_free(&note);
	buf_free(&shown);
}

/* m waits for a retry: the bounce notes of its pass go to the sender
 * now, not when its last recipient is done (whichever batch of the pass
 * bounced or put off a recipient). */
static void
retry_later(struct sched *s, struct msg *m, long long now)
{
	if (m->pass_bounced) {
		m->pass_bounced = 0;
		s->dsn.now = (time_t)now;
		(void)dsn_send(s->o->q, m->id, &s->dsn);	/* kept for later on failure */
	}
	sched_at(s, m, sched_next_retry(m->birth, now, s->retry_skip));
}

/* m's next step after a batch (its job freed): the same batch after a
 * suspension, the rest of the pass, a retry, or its end.  more: not-done
 * recipients after the batch, from next_off in remote/S/N; ntemp:
 * recipients put off; again: the same batch at once (its primary
 * unreachable, a fallback left: via.c); group: the batch's primary, when
 * weir.conf routes by recipient domain (else NO_UPSTREAM). */
static void
next_step(struct sched *s, struct msg *m, enum outcome_kind how, int more, size_t next_off,
    size_t ntemp, int again, size_t group, long long now)
{
	int waits_at_gate = how == OUTCOME_THROTTLED || how == OUTCOME_QUOTA ||
	    how == OUTCOME_AUTHFAIL || again;

	if (waits_at_gate && more && group != NO_UPSTREAM) {
		/* This group's upstream is suspended or unreachable: the pass
		 * goes on with the next group now, and comes back to this one
		 * at once when it is over (batch.c), to wait at the gate then
		 * without holding the other groups back. */
		m->pass_up = group + 1;
		m->pass_off = 0;
		m->pass_deferred = 1;
		m->pass_again = 1;
		sched_at(s, m, now);
	} else if (waits_at_gate) {
		/* The same batch, after the suspension at the gate, or where
		 * the gate sends it (the primary's probe, or a fallback). */
		sched_at(s, m, now);
	} else if (ntemp && how != OUTCOME_SENT && more && group != NO_UPSTREAM) {
		/* Trouble with this group's relay: the pass goes on with the
		 * next group (via.c); this one's at the next attempt. */
		m->pass_up = group + 1;
		m->pass_off = 0;
		m->pass_deferred = 1;
		sched_at(s, m, now);
	} else if (ntemp && how != OUTCOME_SENT) {
		/* Trouble with the relay: the pass goes on from this batch
		 * at the next attempt. */
		retry_later(s, m, now);
	} else if (more) {
		/* The rest of the pass first: recipients put off here must
		 * not keep the later ones from ever being tried. */
		m->pass_off = next_off;
		m->pass_deferred |= ntemp != 0;
		sched_at(s, m, now);
	} else if (msg_pass_over(m) || ntemp) {
		retry_later(s, m, now);
	} else if (group != NO_UPSTREAM) {
		sched_at(s, m, now);	/* its other groups' are in remote/S/N: batch.c sees */
	} else {
		sched_finish(s, m);		/* needs no job slot */
	}
}

/* Apply a finished deliverer's report: D marks, bounce notes, retry. */
static enum upstream_word
apply(struct sched *s, struct job *j, enum outcome_kind how, size_t undone)
{
	struct msg *m = j->m;
	struct rresult *res = xcalloc(j->n, sizeof *res);
	struct tally t = { xcalloc(j->n, sizeof *t.done), 0, 0, 0 };
	size_t i, up = j->up, tried, next_off;
	size_t group = via_split(s) ? j->primary : NO_UPSTREAM;
	long long now = sched_wall();
	/* The upstream said slow down, or refused our credentials: the
	 * gate suspends it; the message waits there, no attempt counted. */
	int throttled = how == OUTCOME_THROTTLED || how == OUTCOME_QUOTA ||
	    how == OUTCOME_AUTHFAIL;
	int expired = now - m->birth - wait_credit(m) > s->lifetime;
	int again = via_again(s, j, how);
	int more;

	read_results(j, res);
	tried = learn_undone(s, j, undone);
	for (i = 0; i < tried; i++)
		settle(s, j, i, &res[i], how, expired, &t);
	counts_outcome(s, m, up, t.ndone - t.nperm, t.ntemp, t.nperm);
	control_replies(s, m, j, res);
	if (rcpt_mark_done(s->o->q, m->id, t.done, t.ndone) < 0)
		t.ntemp++;
	m->pass_bounced |= t.nperm != 0;
	if (t.ntemp && !throttled)
		wait_warn(s, m, j, res);
	via_waits(s, m, j, how, t.ntemp);
	via_done(s, j, how);
	free(res);
	free(t.done);
	more = j->more || undone > 0;
	/* Where the next record starts (rcptfile_load_part reads from it). */
	next_off = undone > 0 ? j->offs[tried] : j->offs[j->n - 1] + strlen(j->addrs[j->n - 1]) + 2;
	job_free(s, j);
	next_step(s, m, how, more, next_off, t.ntemp, again, group, now);
	if (!throttled)
		return UP_OK;
	/* Until the gate answers the report with the suspension. */
	s->ups[up].hold_until = clock_mono_ms() + THROTTLE_GUARD_MS;
	return UP_THROTTLES;
}
