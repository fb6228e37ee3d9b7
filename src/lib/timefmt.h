/*
 * timefmt.h: durations people can read ("30s", "5m", "1h30m", "7d", "2w")
 * and the date formats mail needs.
 */
#ifndef WEIR_TIMEFMT_H
#define WEIR_TIMEFMT_H

#include <stddef.h>
#include <time.h>

/* Parse a duration into seconds.  0 ok; -1 with a reason in *why. */
int duration_parse(const char *s, long long *seconds, const char **why);
/* The other way: "1d2h", "1m30s", "0s" (the units that are not zero). */
void duration_format(char *out, size_t max, long long s);

/* "21 Nov 2026 23:35:57 -0000" in UTC, as qmail's Received lines: no
 * newline.  buf must hold DATE_QMAIL_MAX bytes. */
#define DATE_QMAIL_MAX 40
void date_qmail(char *buf, time_t t);

/* RFC 5322 date in local time: "Sat, 21 Nov 2026 23:35:57 +0000". */
#define DATE_RFC5322_MAX 48
void date_rfc5322(char *buf, time_t t);

/* "2026-11-26T06:00:00Z" (UTC); and back, strictly: -1 if not one. */
void date_iso(char *out, size_t max, time_t t);
time_t date_iso_parse(const char *s);

#endif
