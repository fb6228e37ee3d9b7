/*
 * route.c: see route.h.
 *
 * Trusts: nothing.  Config keys: none read here.
 */
#include <string.h>
#include <strings.h>

#include "lib/timefmt.h"
#include "mail/address.h"
#include "mail/route.h"

static const struct {
	const char *name, *word;
	long long dflt;		/* the threshold when the entry gives none */
} kinds[RK_COUNT] = {
	[RK_UNREACHABLE] = { "unreachable", "unreachable", 600 },
	[RK_AUTH] = { "authentication", "auth", 0 },
	[RK_QUOTA] = { "quota", "quota", 3600 },
	[RK_THROTTLED] = { "throttled", "throttled", 1800 },
};

const char *
route_kind_name(enum route_kind k)
{
	return (unsigned)k < RK_COUNT ? kinds[k].name : "?";
}

const char *
route_kind_word(enum route_kind k)
{
	return (unsigned)k < RK_COUNT ? kinds[k].word : "?";
}

int
route_kind_from_word(const char *w)
{
	int k;

	for (k = 0; k < RK_COUNT; k++)
		if (strcmp(kinds[k].word, w) == 0)
			return k;
	return -1;
}

void
route_when_none(struct route_when *w)
{
	int k;

	for (k = 0; k < RK_COUNT; k++)
		w->s[k] = RK_OFF;
}

void
route_when_default(struct route_when *w)
{
	route_when_none(w);
	w->s[RK_UNREACHABLE] = kinds[RK_UNREACHABLE].dflt;
	w->s[RK_AUTH] = kinds[RK_AUTH].dflt;
	w->s[RK_QUOTA] = kinds[RK_QUOTA].dflt;
}

int
route_when_any(const struct route_when *w)
{
	int k;

	for (k = 0; k < RK_COUNT; k++)
		if (w->s[k] != RK_OFF)
			return 1;
	return 0;
}

int
route_when_add(struct route_when *w, const char *entry, unsigned *seen, const char **why)
{
	const char *sp = strchr(entry, ' ');
	size_t n = sp ? (size_t)(sp - entry) : strlen(entry);
	long long secs;
	int k;

	for (k = 0; k < RK_COUNT; k++)
		if (strlen(kinds[k].name) == n && strncmp(kinds[k].name, entry, n) == 0)
			break;
	if (k == RK_COUNT) {
		*why = "not a condition: unreachable, authentication, quota or throttled, "
		    "each with an optional duration (\"quota 1h\")";
		return -1;
	}
	if (*seen & (1u << k)) {
		*why = "a condition given twice";
		return -1;
	}
	secs = kinds[k].dflt;
	if (sp) {
		if (sp[1] == '\0' || strchr(sp + 1, ' ')) {
			*why = "one blank, then one duration (\"10m\")";
			return -1;
		}
		if (duration_parse(sp + 1, &secs, why) < 0)
			return -1;
		if (secs > RK_MAX_S) {
			*why = "a threshold is at most 366d";
			return -1;
		}
	}
	*seen |= 1u << k;
	w->s[k] = secs;
	return 0;
}

int64_t
route_probe_ms(const struct route_when *w)
{
	int64_t ms = w->s[RK_UNREACHABLE] == RK_OFF ? ROUTE_PROBE_MAX_MS :
	    (int64_t)w->s[RK_UNREACHABLE] * 1000;

	if (ms < 1000)
		ms = 1000;
	return ms > ROUTE_PROBE_MAX_MS ? ROUTE_PROBE_MAX_MS : ms;
}

/* Is the condition k on, and has its trouble of since lasted long enough? */
static int
lasted(const struct route_when *w, enum route_kind k, int64_t since, int64_t now)
{
	return w->s[k] != RK_OFF && since > 0 && now - since >= (int64_t)w->s[k] * 1000;
}

enum route_verdict
route_judge(const struct route_when *w, const struct route_state *st, int64_t now,
    enum route_kind *why, int64_t *until)
{
	int64_t next;

	*until = now;
	if (w->s[RK_UNREACHABLE] != RK_OFF && st->down_since > 0) {
		*why = RK_UNREACHABLE;
		if (!st->probe_out && st->probe_at <= now)
			return RV_PROBE;
		/* When a probe may go next: its time, or after the one out. */
		next = st->probe_out ? now + route_probe_ms(w) : st->probe_at;
		if (lasted(w, RK_UNREACHABLE, st->down_since, now)) {
			*until = next;
			return RV_AVOID;
		}
		/* Not yet long enough: wait for the threshold, or the probe. */
		*until = st->down_since + (int64_t)w->s[RK_UNREACHABLE] * 1000;
		if (!st->probe_out && st->probe_at < *until)
			*until = st->probe_at;
		return RV_HOLD;
	}
	if (lasted(w, RK_AUTH, st->auth_since, now)) {
		*why = RK_AUTH;
		if (st->auth_until > now) {
			*until = st->auth_until;
			return RV_AVOID;
		}
		if (st->auth_probe_out) {
			*until = now + ROUTE_PROBE_MAX_MS;
			return RV_AVOID;
		}
		/* The probe after a suspension: the gate's rule lets one go. */
	}
	if (w->s[RK_THROTTLED] != RK_OFF &&
	    st->susp_until - now > (int64_t)w->s[RK_THROTTLED] * 1000) {
		*why = RK_THROTTLED;
		*until = st->susp_until;
		return RV_AVOID;
	}
	if (w->s[RK_QUOTA] != RK_OFF && st->free_at >= 0 &&
	    st->free_at - now > (int64_t)w->s[RK_QUOTA] * 1000) {
		*why = RK_QUOTA;
		*until = st->free_at;
		return RV_AVOID;
	}
	return RV_GO;
}

const char *
route_domain_problem(const char *pattern)
{
	const char *d = strncmp(pattern, "*.", 2) == 0 ? pattern + 2 : pattern;

	if (*d == '\0' || *d == '[' || addr_domain_problem(d, strlen(d)) != NULL)
		return "not a domain (\"gmail.com\") or its subdomains (\"*.example.com\")";
	return NULL;
}

int
route_domain_match(const char *pattern, const char *domain)
{
	size_t pl, dl = strlen(domain);

	if (strncmp(pattern, "*.", 2) != 0)
		return strcasecmp(pattern, domain) == 0;
	pl = strlen(pattern + 1);	/* ".example.com" */
	return dl > pl && strcasecmp(domain + dl - pl, pattern + 1) == 0;
}
