/*
 * policy.h: policy.conf, weir-gate's rate limits, loaded into a typed
 * struct.  Each key is declared once, with its default and range, in the
 * tables in policy.c; no other file calls libconfuse for this file.
 *
 * Shape (see etc/policy.conf):
 *
 *   upstream "NAME" {
 *     window { limit = 8 per = "1m" unit = "messages" }       # sliding
 *     window { limit = 10000 unit = "recipients" reset = "daily at 00:00 UTC" }
 *     rate   = {"8 per 1m", "10000 recipients daily at 00:00 UTC"}  # one-line form
 *     max_recipients = 100  max_connections = 3  messages_per_connection = 1
 *     grace = "10m"
 *   }
 *   class "NAME" { priority = 10 senders = {"*-owner@*"} min_recipients = 0 max_recipients = 5 }
 *   throttle_reply { pattern = "421 *" suspend = "5m" max_suspend = "4h" }
 *   builtin_throttle_replies = true
 *
 * Trusts: the file's owner (the administrator).  Errors are collected as
 * "file:line: what" lines; a file with any error yields no policy.
 */
#ifndef WEIR_POLICY_H
#define WEIR_POLICY_H

#include <stddef.h>

#include "lib/buf.h"

enum policy_unit {
	UNIT_MESSAGES,
	UNIT_RECIPIENTS,
	UNIT_CONNECTIONS,
	UNIT_COUNT
};

/* Limits on values, shared with the protocol and the engine. */
#define POLICY_LIMIT_MAX	1000000000LL		/* per window */
#define POLICY_PERIOD_MAX	(366LL * 86400)		/* seconds */
#define POLICY_NAME_MAX		64
#define POLICY_GRACE_MAX	86400LL			/* seconds */
/* A suspension's first period and its longest, in seconds, where
 * policy.conf names none: a throttle_reply's defaults, most built-in
 * ones', and the gate's for a "slow down" report no pattern matches. */
#define POLICY_SUSPEND_DEFAULT		(5 * 60)
#define POLICY_MAX_SUSPEND_DEFAULT	(4 * 3600)
/* The same for a quota reply (mail/replyclass.h): two hours at first,
 * longer than fallback_when's default quota threshold (1h), up to a day. */
#define POLICY_QUOTA_SUSPEND_DEFAULT	(2 * 3600)
#define POLICY_QUOTA_MAX_SUSPEND_DEFAULT (24 * 3600)

struct policy_window {
	long long limit;	/* at most this much weight ... */
	long long per;		/* ... per this many seconds */
	enum policy_unit unit;
	int calendar;		/* 0: sliding; 1: resets at fixed boundaries */
	long long align;	/* calendar: boundaries fall at UTC epoch
				   seconds == align (mod per) */
	int line;
};

struct policy_upstream {
	char *name;
	struct policy_window *win;
	size_t nwin;
	long long max_recipients;	/* per transaction; 0: no cap */
	long long max_connections;	/* grants held at once; 0: no cap */
	long long messages_per_connection; /* 0: no cap */
	long long grace;	/* seconds a send of unknown outcome may still be
				 * accepted after its report or its client's
				 * end; 0: not set (weir-gate's -g) */
	char *shared;		/* Redis holding the windows for every host
				 * ("redis://host:port/db", "unix:/path",
				 * "/path"); NULL: this gate alone */
	char *shared_secret_file; /* "password" or "user password"; NULL: none */
	char *shared_sentinel_secret_file; /* the same for the sentinels */
	int line;
};

struct policy_class {
	char *name;
	long long priority;	/* higher first */
	char **senders;		/* fnmatch patterns, case-insensitive; none: any */
	size_t nsenders;
	long long min_recipients;
	long long max_recipients;	/* 0: no upper bound */
	int line;
};

struct policy_throttle {
	char *pattern;		/* fnmatch pattern on the whole reply, case-insensitive */
	long long suspend;	/* seconds, first time */
	long long max_suspend;	/* seconds, growth stops here */
	int builtin;
};

struct policy {
	char *file;
	struct policy_upstream *up;
	size_t nup;
	struct policy_class *cls;
	size_t ncls;
	struct policy_throttle *thr;	/* the file's, then the built-in ones */
	size_t nthr;
	int builtin_throttles;		/* builtin_throttle_replies (true) */
};

/* Load path into p.  0 ok; -1 with every error as "file:line: what\n" in
 * err and p left empty (policy_free is still safe). */
int policy_load(struct policy *p, const char *path, struct buf *err);
/* The i-th key name of every block, NULL past the last: for the check
 * that every key is documented. */
const char *policy_key_name(size_t i);
void policy_free(struct policy *p);

/* The one-line form: "8 per 1m", "10000 recipients per 1d",
 * "500 messages daily at 00:00 UTC", "100 connections hourly".  0 ok; -1
 * with a reason in *why. */
int policy_rate_parse(const char *s, struct policy_window *w, const char **why);

/* reset = "daily", "daily at HH:MM [ZONE]", "HH:MM [ZONE]", "hourly".
 * ZONE: UTC, GMT, Z, +HHMM, -HH:MM, UTC+H[:MM].  Sets per and align. */
int policy_reset_parse(const char *s, long long *per, long long *align, const char **why);

/* Upstream and class names: 1 to POLICY_NAME_MAX of A-Z a-z 0-9 . - _
 * (they travel in the gate protocol and the journal as words). */
int policy_valid_name(const char *s);

/* shared = "redis://HOST:PORT[/DB]", "unix:/PATH", "/PATH", or
 * "redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]": the sentinels
 * (at most POLICY_SENTINELS_MAX) that name the master MASTER (1 to
 * POLICY_NAME_MAX of A-Z a-z 0-9 . - _).  policy_shared_free frees it. */
#define POLICY_SENTINELS_MAX 16
struct policy_shared {
	char *host;		/* host name, or the socket's path; NULL: sentinels */
	int unix_socket;
	int port;
	int db;
	size_t nsent;		/* sentinels (then host is NULL) */
	char *sent_host[POLICY_SENTINELS_MAX];
	int sent_port[POLICY_SENTINELS_MAX];
	char *master;		/* the master's name at the sentinels */
};
int policy_shared_parse(const char *s, struct policy_shared *sh, const char **why);
void policy_shared_free(struct policy_shared *sh);

const char *policy_unit_name(enum policy_unit u);
int policy_unit_parse(const char *s, enum policy_unit *u);

/* The section of upstream name; else the section "*", whose limits each
 * other upstream gets for itself (windows of its own); else NULL. */
#define POLICY_ANY_UPSTREAM "*"
const struct policy_upstream *policy_upstream(const struct policy *p, const char *name);

/* The class for a request: the one named, if any; else the first class in
 * file order whose senders match sender (or that lists none) and whose
 * recipient range holds rcpts.  NULL: the default class (priority 0). */
const struct policy_class *policy_class_for(const struct policy *p, const char *name,
    const char *sender, long long rcpts);

/* The built-in throttle replies (the one list weir has: the gate's
 * suspensions and the deliverers' classifier both use it): their count,
 * the array in *out. */
size_t policy_builtin_throttles(const struct policy_throttle **out);

/* The first throttle_reply whose pattern matches the reply, or NULL. */
const struct policy_throttle *policy_throttle_match(const struct policy *p,
    const char *reply);

#endif
