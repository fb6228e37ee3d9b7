/*
 * policy_test.c: policy.conf parsing (src/mail/policy.c).  Golden files in
 * tests/data/policy/: every good-*.conf loads and dumps to its .out; every
 * bad-*.conf fails with the "# expect:" text (file:line: what) it
 * carries.  Plus the one-line rate and reset forms, class choice, reply
 * patterns and the sample etc/policy.conf.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "mail/policy.h"
#include "testlib.h"

#define DATA "tests/data/policy"

static void
dump(const struct policy *p, struct buf *b)
{
	size_t i, j;

	for (i = 0; i < p->nup; i++) {
		const struct policy_upstream *u = &p->up[i];

		buf_printf(b, "upstream %s caps rcpt=%lld conn=%lld msgs=%lld", u->name,
		    u->max_recipients, u->max_connections, u->messages_per_connection);
		if (u->grace)
			buf_printf(b, " grace=%lld", u->grace);
		buf_addc(b, '\n');
		for (j = 0; j < u->nwin; j++) {
			const struct policy_window *w = &u->win[j];

			buf_printf(b, "  window %lld %s per %llds ", w->limit,
			    policy_unit_name(w->unit), w->per);
			if (w->calendar)
				buf_printf(b, "calendar align=%lld\n", w->align);
			else
				buf_adds(b, "sliding\n");
		}
	}
	for (i = 0; i < p->ncls; i++)
		buf_printf(b, "class %s priority=%lld rcpt=%lld..%lld senders=%zu\n",
		    p->cls[i].name, p->cls[i].priority, p->cls[i].min_recipients,
		    p->cls[i].max_recipients, p->cls[i].nsenders);
	for (i = 0; i < p->nthr; i++)
		if (!p->thr[i].builtin)
			buf_printf(b, "throttle %s suspend=%lld max=%lld\n", p->thr[i].pattern,
			    p->thr[i].suspend, p->thr[i].max_suspend);
}

Test(policy, golden_files)
{
	DIR *d = opendir(DATA);
	struct dirent *de;
	int ngood = 0, nbad = 0;

	cr_assert(d != NULL, "run from the top of the tree");
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		char *path, *want;
		struct policy p;
		struct buf err = BUF_INIT, text = BUF_INIT, out = BUF_INIT;
		int r;

		if (n < 6 || strcmp(de->d_name + n - 5, ".conf") != 0)
			continue;
		path = xasprintf(DATA "/%s", de->d_name);
		r = policy_load(&p, path, &err);
		if (strncmp(de->d_name, "good-", 5) == 0) {
			cr_assert_eq(r, 0, "%s: %s", path, err.s);
			want = xasprintf(DATA "/%.*s.out", (int)(n - 5), de->d_name);
			tl_read(want, &out);
			dump(&p, &text);
			cr_assert_str_eq(text.s, out.s, "%s", path);
			free(want);
			ngood++;
		} else {
			const char *e;
			char *expect;

			cr_assert_eq(r, -1, "%s loaded", path);
			cr_assert_eq(p.nup, 0);
			tl_read(path, &text);
			e = strstr(text.s, "# expect: ");
			cr_assert(e != NULL, "%s: no # expect: line", path);
			e += 10;
			expect = xstrndup(e, strcspn(e, "\n"));
			cr_assert(strstr(err.s, expect) != NULL, "%s: want \"%s\", got \"%s\"",
			    path, expect, err.s);
			free(expect);
			nbad++;
		}
		policy_free(&p);
		buf_free(&err);
		buf_free(&text);
		buf_free(&out);
		free(path);
	}
	closedir(d);
	cr_assert(ngood >= 1 && nbad >= 15, "good %d bad %d", ngood, nbad);
}

Test(policy, sample_file)
{
	struct policy p;
	struct buf err = BUF_INIT;
	const struct policy_upstream *u;

	cr_assert_eq(policy_load(&p, "etc/policy.conf", &err), 0, "%s", err.s);
	/* Its section "*" serves whatever upstream weir.conf names. */
	u = policy_upstream(&p, "pobox");
	cr_assert(u != NULL);
	cr_assert_eq(policy_upstream(&p, "isp"), u);
	cr_assert_str_eq(u->name, POLICY_ANY_UPSTREAM);
	cr_assert_eq(u->nwin, 2);
	cr_assert_eq(u->win[0].limit, 8);
	cr_assert_eq(u->win[0].per, 60);
	cr_assert_eq(u->win[1].calendar, 1);
	cr_assert_eq(u->win[1].unit, UNIT_RECIPIENTS);
	cr_assert_eq(u->max_connections, 3);
	cr_assert_eq(policy_class_for(&p, NULL, "list-owner@example.org", 300)->priority, 1);
	cr_assert_eq(policy_class_for(&p, NULL, "me@example.org", 2)->priority, 10);
	cr_assert_null(policy_class_for(&p, NULL, "me@example.org", 6));
	cr_assert_null(policy_class_for(&p, "nosuch", NULL, 1));
	cr_assert_str_eq(policy_class_for(&p, "bulk", NULL, 1)->name, "bulk");
	cr_assert_eq(policy_throttle_match(&p, "550 5.4.5 Daily sending quota exceeded")->suspend,
	    3600);
	policy_free(&p);
}

Test(policy, missing_file)
{
	struct policy p;
	struct buf err = BUF_INIT;

	cr_assert_eq(policy_load(&p, DATA "/nosuch", &err), -1);
	cr_assert(strstr(err.s, "nosuch: No such file") != NULL, "%s", err.s);
	buf_free(&err);
}

/* libconfuse's scanner would exit the process (the gate) on a folder. */
Test(policy, a_folder_is_refused_not_fatal)
{
	struct policy p;
	struct buf err = BUF_INIT;

	cr_assert_eq(policy_load(&p, DATA, &err), -1);
	cr_assert(strstr(err.s, "not a regular file") != NULL, "%s", err.s);
	buf_free(&err);
}

Test(policy, builtin_throttle_replies)
{
	struct policy p;
	struct buf err = BUF_INIT;
	static const char *const yes[] = {
		"421 4.7.0 Try again later",
		"451 4.7.1 Please slow down",
		"450-4.7.28 unusual rate of unsolicited mail",
		"550 5.4.5 Daily user sending quota exceeded.",
		"454 Throttling failure: Maximum sending rate exceeded.",
		"452 Too many messages from your IP",
		"450 Rate limit exceeded",
	};
	static const char *const no[] = {
		"550 5.1.1 No such user",
		"452 4.2.2 Mailbox full",
		"554 5.7.1 Relay access denied",
		"451 4.7.1 greylisted, try again later",	/* one message, not us */
	};
	size_t i;

	cr_assert_eq(policy_load(&p, "etc/policy.conf", &err), 0, "%s", err.s);
	for (i = 0; i < sizeof yes / sizeof yes[0]; i++)
		cr_assert_not_null(policy_throttle_match(&p, yes[i]), "%s", yes[i]);
	for (i = 0; i < sizeof no / sizeof no[0]; i++)
		cr_assert_null(policy_throttle_match(&p, no[i]), "%s", no[i]);
	policy_free(&p);
}

Test(policy, rate_one_line_forms)
{
	struct policy_window w;
	const char *why;

	cr_assert_eq(policy_rate_parse("8 per 1m", &w, &why), 0);
	cr_assert(w.limit == 8 && w.per == 60 && w.unit == UNIT_MESSAGES && !w.calendar);
	cr_assert_eq(policy_rate_parse("  10000   recipients per 1d ", &w, &why), 0);
	cr_assert(w.limit == 10000 && w.per == 86400 && w.unit == UNIT_RECIPIENTS);
	cr_assert_eq(policy_rate_parse("1 connection per 2h30m", &w, &why), 0);
	cr_assert(w.per == 9000 && w.unit == UNIT_CONNECTIONS);
	cr_assert_eq(policy_rate_parse("5 daily", &w, &why), 0);
	cr_assert(w.calendar && w.per == 86400 && w.align == 0);
	cr_assert_eq(policy_rate_parse("5 messages daily at 00:00 +0530", &w, &why), 0);
	cr_assert_eq(w.align, 86400 - 19800);
	cr_assert_eq(policy_rate_parse("5 hourly", &w, &why), 0);
	cr_assert(w.calendar && w.per == 3600);
	static const char *const bad[] = {
		"", "per 1m", "8", "8 per", "8 per 1m extra", "-8 per 1m", "0 per 1m",
		"8 per 0s", "8 per 400d", "8 bytes per 1m", "1000000001 per 1s",
		"99999999999999999999 per 1s", "8 per 1x", "5 daily at", "5 daily at 12",
		"5 daily at 12:60", "5 hourly UTC", "5 daily at 00:00 UTC+15", "8 per -1m",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(policy_rate_parse(bad[i], &w, &why), -1, "\"%s\" accepted", bad[i]);
}

Test(policy, reset_forms_and_zones)
{
	long long per, align;
	const char *why;

	cr_assert_eq(policy_reset_parse("00:00 UTC", &per, &align, &why), 0);
	cr_assert(per == 86400 && align == 0);
	cr_assert_eq(policy_reset_parse("daily at 01:00 UTC+1", &per, &align, &why), 0);
	cr_assert_eq(align, 0);
	cr_assert_eq(policy_reset_parse("daily at 9:15 -05:00", &per, &align, &why), 0);
	cr_assert_eq(align, 9 * 3600 + 15 * 60 + 5 * 3600);
	cr_assert_eq(policy_reset_parse("daily at 00:00 Z", &per, &align, &why), 0);
	cr_assert_eq(policy_reset_parse("daily at 00:00 GMT-14", &per, &align, &why), 0);
	cr_assert_eq(policy_reset_parse("hourly", &per, &align, &why), 0);
	cr_assert(per == 3600 && align == 0);
	cr_assert_eq(policy_reset_parse("weekly", &per, &align, &why), -1);
	cr_assert_eq(policy_reset_parse("daily at 00:00 CET", &per, &align, &why), -1);
	cr_assert_eq(policy_reset_parse("daily at 00:00 +2400", &per, &align, &why), -1);
	cr_assert_eq(policy_reset_parse("daily 00:00", &per, &align, &why), -1);
	cr_assert_eq(policy_reset_parse("00:00 UTC UTC", &per, &align, &why), -1);
}

Test(policy, shared_store_forms)
{
	struct policy_shared sh;
	const char *why;

	cr_assert_eq(policy_shared_parse("redis://127.0.0.1:6379/2", &sh, &why), 0);
	cr_assert_str_eq(sh.host, "127.0.0.1");
	cr_assert_eq(sh.port, 6379);
	cr_assert_eq(sh.db, 2);
	cr_assert_eq(sh.unix_socket, 0);
	free(sh.host);
	cr_assert_eq(policy_shared_parse("redis://db.example:6380", &sh, &why), 0);
	cr_assert_eq(sh.db, 0);
	free(sh.host);
	cr_assert_eq(policy_shared_parse("unix:/run/redis/redis.sock", &sh, &why), 0);
	cr_assert_str_eq(sh.host, "/run/redis/redis.sock");
	cr_assert_eq(sh.unix_socket, 1);
	free(sh.host);
	cr_assert_eq(policy_shared_parse("/run/r.sock", &sh, &why), 0);
	free(sh.host);
	cr_assert_eq(policy_shared_parse("http://x:1", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis://x", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis://x:0", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis://x:6379/db", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("relative.sock", &sh, &why), -1);
}

Test(policy, shared_sentinel_forms)
{
	struct policy_shared sh;
	const char *why;

	cr_assert_eq(policy_shared_parse("redis-sentinel://10.0.0.1:26379,s2.example:26380,"
	    "10.0.0.3:26379/mymaster", &sh, &why), 0, "%s", why);
	cr_assert_null(sh.host);
	cr_assert_eq(sh.nsent, 3);
	cr_assert_str_eq(sh.sent_host[1], "s2.example");
	cr_assert_eq(sh.sent_port[1], 26380);
	cr_assert_str_eq(sh.sent_host[2], "10.0.0.3");
	cr_assert_str_eq(sh.master, "mymaster");
	cr_assert_eq(sh.db, 0);
	policy_shared_free(&sh);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1/m.1/3", &sh, &why), 0, "%s", why);
	cr_assert_eq(sh.nsent, 1);
	cr_assert_eq(sh.db, 3);
	policy_shared_free(&sh);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1/", &sh, &why), -1);
	cr_assert_str_eq(why, "the master's name is 1 to 64 of A-Z a-z 0-9 . - _");
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1,/m", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1,h:70000/m", &sh, &why), -1);
	cr_assert_str_eq(why, "the port is 1 to 65535");
	cr_assert_eq(policy_shared_parse("redis-sentinel://h/m", &sh, &why), -1);
	/* Ports and databases are digits, nothing else (strtol took "+1", " 1"). */
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:+1/m", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis://h: 6379", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis://h:6379/+2", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1/m x", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1/m/x", &sh, &why), -1);
	cr_assert_eq(policy_shared_parse("redis-sentinel://h:1,h:2,h:3,h:4,h:5,h:6,h:7,h:8,h:9,"
	    "h:10,h:11,h:12,h:13,h:14,h:15,h:16,h:17/m", &sh, &why), -1);
	cr_assert_str_eq(why, "at most 16 sentinels");
}
