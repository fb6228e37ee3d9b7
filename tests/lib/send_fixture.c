/*
 * send_fixture.c: see send_fixture.h.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "send_fixture.h"
#include "sendmail_helpers.h"

struct send_fixture sf;

void
sf_setup_with(const char *extra)
{
	struct buf conf = BUF_INIT, gc = BUF_INIT, pol = BUF_INIT;
	static const char *const ups[] = { "up1", "lists", "main" };
	char *src = tl_src_path("tests/upstream/deliver.py"), *deliverer, *pp;
	size_t k;

	buf_adds(&conf, "concurrency = 2\nlog_level = \"verbose\"\n");
	buf_adds(&conf, extra ? extra : SF_UP1);
	sh_setup(&sf.s, conf.s);
	memset(&sf.d1, 0, sizeof sf.d1);
	memset(&sf.d2, 0, sizeof sf.d2);
	memset(&sf.gate, 0, sizeof sf.gate);
	deliverer = realpath(src, NULL);
	cr_assert(deliverer, "%s: %s", src, strerror(errno));
	sf.calls = xasprintf("%s/calls.log", sf.s.qt.tmp);
	sf.qq = tl_bin("weir-queue");
	sf.env_remote = xasprintf("WEIR_REMOTE=%s", deliverer);
	sf.env_qq = xasprintf("QMAILQUEUE=%s", sf.qq);
	sf.env_conf = xasprintf("WEIR_CONFIG=%s", sf.s.qt.conf);
	qt_setenv(&sf.s.qt, sf.env_qq);	/* for sendmail */
	/* weir-gate, with room for everything, on a socket of this test. */
	sf.gsock = xasprintf("%s/gate.sock", sf.s.qt.tmp);
	pp = xasprintf("%s/policy.conf", sf.s.qt.tmp);
	buf_printf(&gc, "gate_socket = \"%s\"\npolicy_file = \"%s\"\n"
	    "gate_journal = \"%s/gate.journal\"\n", sf.gsock, pp, sf.s.qt.tmp);
	sh_conf_append(&sf.s, gc.s);
	for (k = 0; k < 3; k++)
		buf_printf(&pol, "upstream \"%s\" { rate = \"100000 per 1s\" "
		    "max_recipients = 1000 }\n", ups[k]);
	tl_write(pp, pol.s, pol.len);
	shd_start_gate(&sf.gate, &sf.s, sf.gsock);
	free(pp);
	free(src);
	free(deliverer);
	buf_free(&gc);
	buf_free(&pol);
	buf_free(&conf);
}

void
sf_setup(void)
{
	sf_setup_with(NULL);
}

void
sf_teardown(void)
{
	shd_stop(&sf.d1);
	shd_stop(&sf.d2);
	shd_stop(&sf.gate);
	sh_teardown(&sf.s);
	free(sf.gsock);
	free(sf.calls);
	free(sf.qq);
	free(sf.env_remote);
	free(sf.env_qq);
	free(sf.env_conf);
	sf.gsock = sf.calls = sf.qq = NULL;
	sf.env_remote = sf.env_qq = sf.env_conf = NULL;
}

/* ---- weir-send and its log ---- */

char *
sf_send_log(struct shd *d)
{
	struct buf b = BUF_INIT;

	if (d->log && access(d->log, F_OK) == 0)
		tl_read(d->log, &b);
	return xstrdup(buf_cstr(&b));
}

int
sf_log_has(void *arg)
{
	char *l = sf_send_log(&sf.d1);
	int r = strstr(l, arg) != NULL;

	free(l);
	return r;
}

int
sf_count_in_log(const char *what)
{
	char *l = sf_send_log(&sf.d1);
	const char *p;
	int n = 0;

	for (p = l; (p = strstr(p, what)) != NULL; p++)
		n++;
	free(l);
	return n;
}

void
sf_start_send(struct shd *d, int bare)
{
	const char *env[] = { sf.env_remote, sf.env_qq, bare ? NULL : sf.env_conf, NULL };

	shd_start(d, &sf.s, env);
	if (d == &sf.d1)
		cr_assert(sh_wait_for(sf_log_has, "started on", 5000), "weir-send did not start:\n%s",
		    sf_send_log(d));
}

struct idle_wait {
	const char *after, *state;
	size_t n;
};

static int
idle_after(void *arg)
{
	const struct idle_wait *w = arg;
	char *l = sf_send_log(&sf.d1);
	int r = tl_idle_after(l, w->after, w->n, w->state);

	free(l);
	return r;
}

void
sf_wait_idle(const char *after, size_t n, const char *state, int ms)
{
	struct idle_wait w = { after, state, n };

	cr_assert(sh_wait_for(idle_after, &w, ms), "no \"idle: %s\" after \"%s\" (%zu) within "
	    "%d ms; weir-send said:\n%s", state, after, n, ms, sf_send_log(&sf.d1));
}

/* ---- the deliverer's calls ---- */

size_t
sf_ncalls(void)
{
	struct buf b = BUF_INIT;
	size_t i, n = 0;

	if (access(sf.calls, F_OK) != 0)
		return 0;
	tl_read(sf.calls, &b);
	for (i = 0; i < b.len; i++)
		n += b.s[i] == '\n';
	buf_free(&b);
	return n;
}

static int
calls_at_least(void *arg)
{
	return sf_ncalls() >= *(size_t *)arg;
}

void
sf_wait_calls(size_t n, int ms)
{
	cr_assert(sh_wait_for(calls_at_least, &n, ms), "%zu deliverer calls after %d ms, expected "
	    "%zu; weir-send said:\n%s", sf_ncalls(), ms, n, sf_send_log(&sf.d1));
}

char *
sf_call(size_t i)
{
	struct buf b = BUF_INIT;
	const char *p, *e;
	size_t k;

	tl_read(sf.calls, &b);
	p = buf_cstr(&b);
	for (k = 0; k < i && p; k++)
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	cr_assert(p && *p, "no call %zu", i);
	e = strchr(p, '\n');
	p = xstrndup(p, (size_t)(e - p));
	buf_free(&b);
	return (char *)p;
}

char *
sf_call_env(size_t i)
{
	char *c = sf_call(i), *p = c, *r;
	int k;

	for (k = 0; k < 3; k++) {
		p = strchr(p, '\t');
		cr_assert(p);
		p++;
	}
	r = xstrdup(p);
	free(c);
	return r;
}

void
sf_assert_all_delivered(size_t n)
{
	struct buf b = BUF_INIT;
	char name[48];
	size_t i;

	tl_read(sf.calls, &b);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		cr_assert(strstr(buf_cstr(&b), name), "%s never delivered; calls:\n%s", name,
		    buf_cstr(&b));
	}
	buf_free(&b);
}

int
sf_max_at_once(struct buf *b)
{
	const char *p;
	int cur = 0, max = 0;

	for (p = buf_cstr(b); *p; p = strchr(p, '\n') + 1) {
		cur += *p == 'B' ? 1 : -1;
		if (cur > max)
			max = cur;
	}
	return max;
}

/* ---- putting mail in ---- */

void
sf_inject(const char *sender, const char *const *rcpts, const char *msg)
{
	const char *args[32];
	struct tl_result r;
	size_t n = 0, i;

	args[n++] = "-f";
	args[n++] = sender;
	for (i = 0; rcpts[i]; i++) {
		cr_assert(n < 31);
		args[n++] = rcpts[i];
	}
	args[n] = NULL;
	smt_run(&sf.s.qt, "sendmail", args, msg, strlen(msg), NULL, &r);
	cr_assert_eq(r.status, 0, "sendmail exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
}

void
sf_inject_raw(const char *env, size_t envlen, const char *msg)
{
	struct tl_result r;

	qt_inject(&sf.s.qt, msg, strlen(msg), env, envlen, NULL, &r);
	cr_assert_eq(r.status, 0, "weir-queue exit %d: %s", r.status, buf_cstr(&r.err));
	tl_result_free(&r);
}

void
sf_inject_numbered(size_t n)
{
	char name[48];
	const char *rcpts[] = { name, NULL };
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof name, "m%zu@example.net", i);
		sf_inject("alice@example.org", rcpts, SF_MSG1);
	}
}

unsigned long
sf_aged_s5(const char *sender, const char *rcpts, size_t rlen, long long age)
{
	static const char mess[] = "Received: (weir 1 invoked by uid 0); x\nSubject: aged\n\naged\n";
	unsigned long id = sh_put_mess(&sf.s, S(mess));
	struct buf info = BUF_INIT;
	char *ip;

	buf_printf(&info, "F%s", sender);
	buf_addc(&info, '\0');
	sh_write(&sf.s, Q_INFO, id, info.s, info.len);
	sh_write(&sf.s, Q_REMOTE, id, rcpts, rlen);
	ip = sh_qpath(&sf.s, Q_INFO, id);
	sh_set_mtime(ip, time(NULL) - age);
	free(ip);
	buf_free(&info);
	return id;
}

char *
sf_failing_qq(char **flag)
{
	char *wrap = xasprintf("%s/qq.sh", sf.s.qt.tmp), *script, *e;

	*flag = xasprintf("%s/qqfail", sf.s.qt.tmp);
	script = xasprintf("#!/bin/sh\n[ -e '%s' ] && exit 71\nexec '%s'\n", *flag, sf.qq);
	tl_write(wrap, script, strlen(script));
	cr_assert(chmod(wrap, 0755) == 0);
	tl_write(*flag, "", 0);
	e = xasprintf("QMAILQUEUE=%s", wrap);
	free(script);
	free(wrap);
	return e;
}

/* ---- the queue ---- */

int
sf_settled(void *arg)
{
	static const char *const dirs[] = { "todo", "info", "local", "remote", "bounce" };
	size_t i;
	int n = 0;

	(void)arg;
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		char *p = xasprintf("%s/%s", sf.s.qt.qdir, dirs[i]);

		n += tl_count_files(p);
		free(p);
	}
	return n == 0;
}

int
sf_queue_empty(void *arg)
{
	(void)arg;
	return qt_leftovers(&sf.s.qt) == 0;
}

int
sf_todo_empty(void *arg)
{
	unsigned long *ids;
	size_t n = qt_list(&sf.s.qt, "todo", &ids);

	(void)arg;
	free(ids);
	return n == 0;
}

void
sf_wait_settled(int ms)
{
	cr_assert(sh_wait_for(sf_settled, NULL, ms), "messages still queued after %d ms:\n%s"
	    "weir-send said:\n%s", ms, sh_listing(&sf.s), sf_send_log(&sf.d1));
}

void
sf_wait_empty(int ms)
{
	cr_assert(sh_wait_for(sf_queue_empty, NULL, ms), "the queue is not empty after %d ms:\n%s"
	    "weir-send said:\n%s", ms, sh_listing(&sf.s), sf_send_log(&sf.d1));
}

unsigned long
sf_only_info(void)
{
	unsigned long id = 0;
	unsigned k, found = 0;

	for (k = 0; k < 23; k++) {
		char *dir = xasprintf("%s/info/%u", sf.s.qt.qdir, k);
		DIR *dp = opendir(dir);
		struct dirent *e;

		cr_assert(dp, "opendir %s", dir);
		while ((e = readdir(dp)) != NULL)
			if (e->d_name[0] != '.') {
				id = strtoul(e->d_name, NULL, 10);
				found++;
			}
		closedir(dp);
		free(dir);
	}
	cr_assert_eq(found, 1, "%u messages in info/, expected 1", found);
	return id;
}

void
sf_assert_queue_sound(void)
{
	struct buf out = BUF_INIT;
	int code = sh_queue_check(&sf.s, &out);

	cr_assert_eq(code, 0, "queue-check exit %d:\n%s", code, buf_cstr(&out));
	cr_assert(strstr(buf_cstr(&out), " 0 problems"), "queue-check:\n%s", buf_cstr(&out));
	buf_free(&out);
}

/* ---- weir-gate and weir ---- */

/* How often weir-gate loaded a changed policy file. */
static int
gate_loads(void)
{
	struct buf b = BUF_INIT;
	const char *p;
	int n = 0;

	tl_read(sf.gate.log, &b);
	for (p = buf_cstr(&b); (p = strstr(p, " loaded (file changed)")) != NULL; p++)
		n++;
	buf_free(&b);
	return n;
}

static int
gate_loaded_more(void *arg)
{
	return gate_loads() > *(int *)arg;
}

void
sf_policy(const char *text)
{
	char *pp = xasprintf("%s/policy.conf", sf.s.qt.tmp), *tmp = xasprintf("%s.tmp", pp);
	int before = gate_loads();

	tl_write(tmp, text, strlen(text));
	cr_assert(rename(tmp, pp) == 0);
	cr_assert(sh_wait_for(gate_loaded_more, &before, 5000), "weir-gate did not load the new "
	    "policy; it said:\n%s", sf_send_log(&sf.gate));
	free(pp);
	free(tmp);
}

void
sf_run_flush(void)
{
	struct buf out = BUF_INIT;
	int code = sh_weir(&sf.s, "flush", &out);

	cr_assert_eq(code, 0, "weir flush: exit %d: %s", code, buf_cstr(&out));
	buf_free(&out);
}
