/* timefmt.c: see timefmt.h. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/timefmt.h"

static const char *const months[12] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};
static const char *const days[7] = {
	"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat",
};

int
duration_parse(const char *s, long long *seconds, const char **why)
{
	long long total = 0, n, unit;
	int any = 0;

	if (s == NULL || *s == '\0') {
		*why = "empty duration";
		return -1;
	}
	while (*s) {
		if (*s < '0' || *s > '9') {
			*why = "expected a number (durations look like 30s, 5m, 1h30m, 7d)";
			return -1;
		}
		n = 0;
		while (*s >= '0' && *s <= '9') {
			if (n > (LLONG_MAX - 9) / 10) {
				*why = "duration too large";
				return -1;
			}
			n = n * 10 + (*s++ - '0');
		}
		switch (*s) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		case 'w': unit = 7 * 86400; break;
		case '\0':
			*why = "missing unit (s, m, h, d or w)";
			return -1;
		default:
			*why = "unknown unit (use s, m, h, d or w)";
			return -1;
		}
		s++;
		if (n > (LLONG_MAX / 2) / unit || total > LLONG_MAX / 2 - n * unit) {
			*why = "duration too large";
			return -1;
		}
		total += n * unit;
		any = 1;
	}
	if (!any) {
		*why = "empty duration";
		return -1;
	}
	*seconds = total;
	return 0;
}

void
duration_format(char *out, size_t max, long long s)
{
	static const struct { long long secs; char unit; } parts[] = {
		{ 86400, 'd' }, { 3600, 'h' }, { 60, 'm' }, { 1, 's' },
	};
	size_t i, n = 0;
	int k;

	out[0] = '\0';
	if (s <= 0) {
		snprintf(out, max, "0s");
		return;
	}
	for (i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		long long v = s / parts[i].secs;

		s %= parts[i].secs;
		if (v == 0)
			continue;
		k = snprintf(out + n, max - n, "%lld%c", v, parts[i].unit);
		if (k < 0 || (size_t)k >= max - n)
			return;
		n += (size_t)k;
	}
}

void
date_qmail(char *buf, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, DATE_QMAIL_MAX, "%d %s %d %02d:%02d:%02d -0000",
	    tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
	    tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void
date_rfc5322(char *buf, time_t t)
{
	struct tm tm;
	long off;
	char sign = '+';

	localtime_r(&t, &tm);
	off = tm.tm_gmtoff / 60;
	if (off < 0) {
		sign = '-';
		off = -off;
	}
	snprintf(buf, DATE_RFC5322_MAX, "%s, %d %s %d %02d:%02d:%02d %c%02ld%02ld",
	    days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
	    tm.tm_hour, tm.tm_min, tm.tm_sec, sign, off / 60, off % 60);
}

void
date_iso(char *out, size_t max, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, max, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

time_t
date_iso_parse(const char *s)
{
	struct tm tm;
	const char *e;

	if (s == NULL || strlen(s) != 20)
		return -1;
	memset(&tm, 0, sizeof tm);
	e = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (e == NULL || *e != '\0')
		return -1;
	return timegm(&tm);
}
