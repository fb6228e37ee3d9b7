/* config_test.c: weir.conf loading, defaults, errors with file:line. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "mail/config.h"
#include "testlib.h"

static char *dir;

static void setup(void) { dir = tl_tmpdir(); unsetenv("WEIR_CONFIG"); unsetenv("WEIR_QUEUE"); }
static void teardown(void) { tl_rmtree(dir); free(dir); }

static char *
conf(const char *text)
{
	char *p = xasprintf("%s/weir.conf", dir);

	tl_write(p, text, strlen(text));
	return p;
}

TestSuite(config, .init = setup, .fini = teardown);

Test(config, values_and_defaults)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/q\"\nqueue_split = 7\ninject_timeout = \"1h30m\"\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.queue_dir, "/q");
	cr_assert_eq(c.queue_split, 7);
	cr_assert_eq(c.inject_timeout, 5400);
	cr_assert_str_eq(c.admin, "postmaster");
	cr_assert_not_null(c.hostname);
	cr_assert_str_eq(c.file, p);
	config_free(&c);
	free(p);
}

Test(config, env_file_and_queue_override)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/from-file\"\nhostname = mx.example.org\n");

	setenv("WEIR_CONFIG", p, 1);
	setenv("WEIR_QUEUE", "/from-env", 1);
	cr_assert_eq(config_load(&c, NULL, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.queue_dir, "/from-env");
	cr_assert_str_eq(c.hostname, "mx.example.org");
	config_free(&c);
	free(p);
}

Test(config, explicit_missing_file_is_an_error)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = xasprintf("%s/absent.conf", dir);

	cr_assert_eq(config_load(&c, p, &err), -1);
	cr_assert(strstr(err.s, "absent.conf"), "%s", err.s);
	free(p);
}

static void
bad(const char *text, const char *want)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf(text);

	cr_assert_eq(config_load(&c, p, &err), -1, "accepted: %s", text);
	cr_assert(strstr(err.s, want), "for %s got: %s", text, err.s);
	buf_free(&err);
	free(p);
}

Test(config, errors_name_file_line_and_problem)
{
	bad("queue_dir = \"/q\"\nno_such_key = 1\n", "weir.conf:2:");
	bad("queue_dir = \"/q\"\nno_such_key = 1\n", "no_such_key");
	bad("queue_split = 0\n", "queue_split = 0 is out of range");
	bad("queue_split = 1001\n", "out of range");
	bad("queue_split = many\n", "weir.conf:1:");
	bad("\n\ninject_timeout = \"soon\"\n", "weir.conf:3: inject_timeout");
	bad("inject_timeout = \"36h\"\n", "out of range");
	bad("queue_dir = \"\"\n", "must not be empty");
	bad("queue_dir = \"/q\n", "weir.conf:");
	bad("hostname = \"x\\nBcc: y\"\n", "a host name holds only letters");
	bad("admin = \"me@x <y>\"\n", "an address without spaces");
}

/* The read-only status socket: off unless set, never gate_socket. */
Test(config, gate_status_socket)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("gate_status_socket = \"/run/weir-status/gate.sock\"\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", buf_cstr(&err));
	cr_assert_str_eq(c.gate_status_socket, "/run/weir-status/gate.sock");
	config_free(&c);
	free(p);
	p = conf("queue_dir = \"/q\"\n");
	cr_assert_eq(config_load(&c, p, &err), 0, "%s", buf_cstr(&err));
	cr_assert_null(c.gate_status_socket);
	config_free(&c);
	free(p);
	bad("gate_socket = \"/run/x.sock\"\ngate_status_socket = \"/run/x.sock\"\n",
	    "gate_status_socket must differ from gate_socket");
	bad("gate_status_socket = \"\"\n", "gate_status_socket must not be empty");
	buf_free(&err);
}

Test(config, a_folder_is_refused_not_fatal)
{
	struct weir_config c;
	struct buf err = BUF_INIT;

	cr_assert_eq(config_load(&c, dir, &err), -1);
	cr_assert(strstr(err.s, "not a regular file"), "%s", err.s);
	buf_free(&err);
}

/* upstream "NAME" { } sections (weir-remote). */

Test(config, upstream_sections_and_defaults)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	const struct weir_upstream *u;
	char *p = conf("hostname = h.example\n"
	    "upstream \"pobox\" {\n"
	    "  host = \"smtp.pobox.com\"\n  port = 587\n  tls = \"starttls\"\n"
	    "  verify = true\n  ca_file = \"/etc/ssl/certs/ca-certificates.crt\"\n"
	    "  username = \"me@example.org\"\n  secret_file = \"/etc/weir/secret.pobox\"\n"
	    "  mechanisms = {\"SCRAM-SHA-256\", \"PLAIN\"}\n"
	    "  senders = {\"*@lists.example.org\"}\n"
	    "  timeout_rcpt = \"2s\"\n  max_recipients = 7\n"
	    "}\n"
	    "upstream \"other\" {\n  host = o.example\n  tls = \"smtps\"\n  verify = false\n"
	    "  secret_command = \"oauth-helper token\"\n  username = u\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_eq(c.nupstreams, 2);
	u = config_upstream(&c, "pobox");
	cr_assert_not_null(u);
	cr_assert_str_eq(u->host, "smtp.pobox.com");
	cr_assert_eq(u->port, 587);
	cr_assert_eq(u->tls, UP_TLS_STARTTLS);
	cr_assert_eq(u->verify, 1);
	cr_assert_str_eq(u->secret_file, "/etc/weir/secret.pobox");
	cr_assert_eq(u->mechanisms.n, 2);
	cr_assert_str_eq(u->mechanisms.v[0], "SCRAM-SHA-256");
	cr_assert_str_eq(u->mechanisms.v[1], "PLAIN");
	cr_assert_eq(u->timeout_rcpt, 2);
	cr_assert_eq(u->timeout_data_end, 600);
	cr_assert_eq(u->timeout_data_init, 120);
	cr_assert_eq(u->timeout_banner, 300);
	cr_assert_eq(u->max_recipients, 7);
	cr_assert_eq(u->line, 14);	/* the closing brace */
	u = config_upstream(&c, "other");
	cr_assert_not_null(u);
	cr_assert_str_eq(u->host, "o.example");
	cr_assert_eq(u->port, 0);
	cr_assert_eq(u->tls, UP_TLS_SMTPS);
	cr_assert_eq(u->verify, 0);
	cr_assert_eq(u->max_recipients, 100);
	cr_assert_eq(u->senders.n, 0);
	cr_assert_null(config_upstream(&c, "absent"));
	/* Selection by sender: glob first, else the one without senders. */
	cr_assert_str_eq(config_upstream_for(&c, "x@Lists.Example.org")->name, "pobox");
	cr_assert_str_eq(config_upstream_for(&c, "x@example.org")->name, "other");
	config_free(&c);
	free(p);
}

Test(config, no_upstream_is_fine)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/q\"\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_eq(c.nupstreams, 0);
	cr_assert_null(config_upstream_for(&c, "a@b"));
	config_free(&c);
	free(p);
}

Test(config, upstream_errors_name_file_line_and_problem)
{
	bad("upstream \"a\" {\n  tls = \"ssl\"\n}\n", "weir.conf:2: tls = \"ssl\": must be one of starttls, smtps, none");
	bad("upstream \"a\" {\n\n  port = 70000\n}\n", "weir.conf:3: port = 70000 is out of range");
	bad("upstream \"a\" {\n  timeout_rcpt = \"soon\"\n}\n", "weir.conf:2: timeout_rcpt");
	bad("upstream \"a\" {\n  bogus = 1\n}\n", "bogus");
	bad("upstream \"a\" {\n  verify = perhaps\n}\n", "weir.conf:2:");
	bad("upstream \"a\" {\n  mechanisms = {\"PLAIN\", \"\"}\n}\n", "empty string");
	bad("upstream \"a\" { }\nupstream \"a\" { }\n", "weir.conf:2:");
	bad("upstream \"a\" {\n  username = u\n  secret_file = f\n  secret_command = c\n}\n",
	    "weir.conf:5: upstream \"a\": secret_file and secret_command exclude each other");
	bad("upstream \"a\" {\n  username = u\n}\n", "username needs secret_file, secret_command or an oauth section");
	bad("\nupstream \"b\" {\n  secret_file = f\n}\n", "weir.conf:4: upstream \"b\": a secret without a username");
	bad("upstream \"a\" {\n  fingerprint = \"abc\"\n}\n", "fingerprint must be 64 hex digits");
	bad("upstream \"a\" {\n  host = \"\"\n}\n", "must not be empty");
}

/* No default host: a caller of weir-remote must not choose where the
 * secret goes.  Failed before (accepted; weir-remote took its host
 * argument). */
Test(config, upstream_without_host_is_an_error)
{
	bad("upstream \"a\" {\n  port = 587\n}\n", "weir.conf:3: upstream \"a\": no host");
	bad("upstream \"smtp.example.net\" {\n  username = u\n  secret_file = f\n}\n",
	    "upstream \"smtp.example.net\": no host");
}

Test(config, upstream_fingerprint_with_colons)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("upstream \"a\" {\n  host = a.example\n  fingerprint = \"AB:cd:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:"
	    "ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd\"\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_not_null(c.upstreams[0].fingerprint);
	config_free(&c);
	free(p);
}

/* libconfuse 3.3 miscounts lines after comments; confparse blanks them. */
Test(config, line_numbers_after_comments)
{
	bad("# one\n# two\nqueue_split = 0\n", "weir.conf:3:");
	bad("// one\n// two\nqueue_split = 0\n", "weir.conf:3:");
	bad("/* one\n two */\nqueue_split = 0\n", "weir.conf:3:");
	bad("admin = \"a#b@x.org\" # x\n\nqueue_split = 0\n", "weir.conf:3:");
	bad("queue_dir = \"/q // not a comment\"\n# c\nqueue_split = 0\n", "weir.conf:3:");
}

Test(config, comments_are_not_values)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("queue_dir = \"/a#b//c\" # the queue\n"
	    "admin = post@x.org // who\n/* block\n comment */ queue_split = 7\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.queue_dir, "/a#b//c");
	cr_assert_str_eq(c.admin, "post@x.org");
	cr_assert_eq(c.queue_split, 7);
	config_free(&c);
	free(p);
}

Test(config, account_keys_default_to_unset)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("gate_user = \"weir-gate\"\nsmtpd_user = \"\"\n"
	    "send_user = \"weir-send\"\nqueue_group = \"weir-queue\"\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.gate_user, "weir-gate");
	cr_assert_null(c.smtpd_user, "\"\" means unset");
	cr_assert_str_eq(c.send_user, "weir-send");
	cr_assert_str_eq(c.queue_group, "weir-queue");
	config_free(&c);
	free(p);
	p = conf("queue_dir = \"/q\"\n");
	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_null(c.gate_user);
	cr_assert_null(c.send_user);
	cr_assert_null(c.smtpd_user);
	cr_assert_null(c.queue_group);
	config_free(&c);
	free(p);
}

Test(config, account_key_errors)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "gate_user = \"weir gate\"\n", "weir.conf:1: gate_user = \"weir gate\": an account "
		    "name holds only letters, digits, '_', '.' and '-'" },
		{ "\nsmtpd_user = \"-x\"\n", "weir.conf:2: smtpd_user = \"-x\": an account name "
		    "does not start with '-'" },
		{ "gate_user = \"abcdefghijabcdefghijabcdefghijabc\"\n", "at most 32 characters" },
		{ "send_user = \"weir-send\"\n", "send_user and queue_group go together" },
		{ "queue_group = \"weir-queue\"\n", "send_user and queue_group go together" },
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct weir_config c;
		struct buf err = BUF_INIT;
		char *p = conf(cases[i].text);

		cr_assert_eq(config_load(&c, p, &err), -1, "%s", cases[i].text);
		cr_assert(strstr(err.s, cases[i].want) != NULL, "%s: %s", cases[i].text, err.s);
		config_free(&c);
		buf_free(&err);
		free(p);
	}
}

/* config_load_inject(): what a broken file still gives the injectors. */
static int
inject_load(const char *text, struct weir_config *c, struct buf *warn, struct buf *err)
{
	char *p = conf(text);
	int rc = config_load_inject(c, p, warn, err);

	free(p);
	return rc;
}

Test(config, inject_load_reads_the_queue_from_a_broken_file)
{
	struct weir_config c;
	struct buf warn = BUF_INIT, err = BUF_INIT;
	char host[256];

	/* A sound file: 0, nothing to say. */
	cr_assert_eq(inject_load("queue_dir = \"/q\"\n", &c, &warn, &err), 0);
	cr_assert_eq(warn.len, 0);
	config_free(&c);
	/* Broken: the top-level keys still readable, each on its line, the
	 * last of two winning, comments and bare values allowed; a bad
	 * hostname keeps the default; a section's value that mentions
	 * queue_dir is not a queue_dir line. */
	cr_assert_eq(inject_load("queue_dir = \"/first\"\nqueue_split = 7   # seven\n"
	    "queue_dir = /q2\nhostname = \"bad host\"\nadmin = ops@example.org\n"
	    "upstream \"u\" {\n  host = \"queue_dir.example\"\n  nonsense = 1\n}\n"
	    "smtpd_user = \"weir-smtpd\"\n", &c, &warn, &err), 1, "%s", buf_cstr(&err));
	cr_assert(strstr(buf_cstr(&warn), ":4: hostname = \"bad host\""), "%s", warn.s);
	cr_assert_str_eq(c.queue_dir, "/q2");
	cr_assert_eq(c.queue_split, 7);
	cr_assert_str_eq(c.admin, "ops@example.org");
	cr_assert_str_eq(c.smtpd_user, "weir-smtpd");
	cr_assert_eq(c.nupstreams, 0u);
	cr_assert(gethostname(host, sizeof host) == 0);
	cr_assert_str_eq(c.hostname, host);
	config_free(&c);
	/* $WEIR_QUEUE still wins. */
	setenv("WEIR_QUEUE", "/env", 1);
	buf_reset(&warn);
	cr_assert_eq(inject_load("queue_dir = \"/q\"\nx = 1\n", &c, &warn, &err), 1);
	cr_assert_str_eq(c.queue_dir, "/env");
	config_free(&c);
	unsetenv("WEIR_QUEUE");
	/* The one line the summary makes. */
	buf_reset(&err);
	config_inject_warning(&warn, &err);
	cr_assert(strstr(err.s, ":2: no such option 'x'; mail is still queued"), "%s", err.s);
	buf_free(&warn);
	buf_free(&err);
}

Test(config, inject_load_refuses_an_unknown_queue_place)
{
	static const char *const cases[][2] = {
		{ "queue_dir = \"/q\" \"/r\"\n", ":1: a queue_dir line that cannot be read" },
		{ "queue_dir = \"/q\"; x = 1\n", ":1: a queue_dir line that cannot be read" },
		{ "x = 1\nlisten {\nqueue_dir = \"/q\"\n}\n", ":3: queue_dir inside braces" },
		{ "queue_split = 100000\nx = 1\n", ":1: queue_split = \"100000\" is not a valid" },
		{ "queue_dir = \"\"\nx = 1\n", ":1: queue_dir = \"\" is not a valid value" },
	};
	struct weir_config c;
	struct buf warn = BUF_INIT, err = BUF_INIT;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		buf_reset(&err);
		cr_assert_eq(inject_load(cases[i][0], &c, &warn, &err), -1, "%s", cases[i][0]);
		cr_assert(strstr(buf_cstr(&err), cases[i][1]), "%s: %s", cases[i][0], err.s);
	}
	buf_free(&warn);
	buf_free(&err);
}

/* The showq_socket of weir.conf at path, or "(off)"; the config freed. */
static char *
showq_of(const char *path, int lenient)
{
	struct weir_config c;
	struct buf err = BUF_INIT, warn = BUF_INIT;
	char *s;

	if (lenient)
		cr_assert(config_load_inject(&c, path, &warn, &err) >= 0, "%s", buf_cstr(&err));
	else
		cr_assert_eq(config_load(&c, path, &err), 0, "%s", buf_cstr(&err));
	s = xstrdup(c.showq_socket ? c.showq_socket : "(off)");
	config_free(&c);
	buf_free(&err);
	buf_free(&warn);
	return s;
}

/* Issue 22 item 4: two weirs on one host (a second queue, a test beside
 * the production relay) shared the default showq_socket: the second
 * weir-showq exited 111 at every start.  Not set, it is the queue's own:
 * the classic path for the default queue, one named after the queue
 * otherwise, the same whichever way the file is read (an injector reads
 * a broken file leniently); set, it is as set ("" is off). */
Test(config, showq_socket_default_is_the_queues)
{
	char *a, *b, *d, *p;

	p = conf("hostname = a.example\n");
	cr_assert_str_eq(d = showq_of(p, 0), "/run/weir-showq/showq.sock");
	free(d);
	free(p);
	p = conf("queue_dir = \"/var/spool/weir-test\"\n");
	a = showq_of(p, 0);
	cr_assert(strncmp(a, "/run/weir-showq/showq.", 22) == 0 && strcmp(a,
	    "/run/weir-showq/showq.sock") != 0, "%s", a);
	cr_assert_str_eq(d = showq_of(p, 1), a, "read leniently");
	free(d);
	free(p);
	p = conf("queue_dir = \"/var/spool/weir-test\"\nbogus_key = 1\n");
	cr_assert_str_eq(d = showq_of(p, 1), a, "salvaged from a broken file");
	free(d);
	free(p);
	p = conf("queue_dir = \"/var/spool/weir-other\"\n");
	b = showq_of(p, 0);
	cr_assert_str_neq(a, b, "two queues, one socket");
	free(p);
	p = conf("queue_dir = \"/var/spool/weir-test\"\n"
	    "showq_socket = \"/run/weir-showq/showq.sock\"\n");
	cr_assert_str_eq(d = showq_of(p, 0), "/run/weir-showq/showq.sock", "set: kept");
	free(d);
	free(p);
	p = conf("queue_dir = \"/var/spool/weir-test\"\nshowq_socket = \"\"\nbogus_key = 1\n");
	cr_assert_str_eq(d = showq_of(p, 1), "(off)", "\"\" salvaged: off");
	free(d);
	free(p);
	free(a);
	free(b);
}

/* oauth { }: each provider's defaults, resolved at load time; the
 * mechanisms default to the token's own. */
Test(config, oauth_provider_defaults)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	const struct weir_oauth *m, *g;
	char *p = conf("upstream \"m365\" {\n  host = smtp.office365.com\n  username = me@x.org\n"
	    "  oauth {\n    provider = microsoft\n    tenant = contoso.onmicrosoft.com\n"
	    "    client_id = \"1111-2222\"\n  }\n}\n"
	    "upstream \"gmail\" {\n  host = smtp.gmail.com\n  username = me@gmail.com\n"
	    "  oauth {\n    provider = google\n    client_id = c.apps.googleusercontent.com\n"
	    "    client_secret_file = /etc/weir/google.secret\n    refresh_margin = 5m\n"
	    "    refresh_idle = 6h\n  }\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	m = &c.upstreams[0].oauth;
	g = &c.upstreams[1].oauth;
	cr_assert(m->present && g->present);
	cr_assert_eq(m->provider, OAUTH_MICROSOFT);
	cr_assert_eq(m->flow, OAUTH_FLOW_DEVICE);
	cr_assert_str_eq(m->scope, "https://outlook.office.com/SMTP.Send offline_access");
	cr_assert_str_eq(m->device_endpoint,
	    "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/devicecode");
	cr_assert_str_eq(m->token_endpoint,
	    "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token");
	cr_assert_str_eq(m->token_file, "/var/lib/weir/oauth/m365");
	cr_assert_eq(m->refresh_margin, 600);
	cr_assert_eq(m->refresh_idle, 86400, "the keep-alive: a day by default");
	cr_assert_eq(m->timeout, 30);
	cr_assert_null(m->client_secret_file);
	cr_assert_eq(c.upstreams[0].mechanisms.n, 2);
	cr_assert_str_eq(c.upstreams[0].mechanisms.v[0], "XOAUTH2");
	cr_assert_eq(g->provider, OAUTH_GOOGLE);
	cr_assert_eq(g->flow, OAUTH_FLOW_CODE);
	cr_assert_null(g->tenant);
	cr_assert_str_eq(g->scope, "https://mail.google.com/");
	cr_assert_str_eq(g->token_endpoint, "https://oauth2.googleapis.com/token");
	cr_assert_str_eq(g->authorize_endpoint, "https://accounts.google.com/o/oauth2/v2/auth");
	cr_assert_eq(g->refresh_margin, 300);
	cr_assert_eq(g->refresh_idle, 6 * 3600);
	cr_assert_not(c.upstreams[2].oauth.present, "the terminator has none");
	config_free(&c);
	free(p);
	p = conf("upstream \"a\" {\n  host = a.example\n  username = u\n  oauth {\n"
	    "    provider = microsoft\n    client_id = x\n  }\n}\n");
	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_str_eq(c.upstreams[0].oauth.tenant, "organizations");
	config_free(&c);
	free(p);
}

Test(config, oauth_errors)
{
	const char *head = "upstream \"a\" {\n  host = a.example\n  username = u\n  oauth {\n";

#define OB(body, want) do { \
	char *t = xasprintf("%s%s  }\n}\n", head, body); \
	bad(t, want); \
	free(t); \
} while (0)
	OB("    client_id = x\n", "oauth: no provider");
	OB("    provider = yahoo\n    client_id = x\n", "provider = \"yahoo\": must be one of");
	OB("    provider = microsoft\n", "oauth: no client_id");
	OB("    provider = generic\n    client_id = x\n    scope = s\n", "generic needs token_endpoint");
	OB("    provider = generic\n    client_id = x\n    token_endpoint = \"https://t/\"\n",
	    "generic needs scope");
	OB("    provider = generic\n    client_id = x\n    scope = s\n"
	    "    token_endpoint = \"https://t/\"\n", "flow device needs device_endpoint");
	OB("    provider = microsoft\n    client_id = x\n    token_endpoint = \"http://t/\"\n",
	    "weir.conf:7: token_endpoint = \"http://t/\": must be an https:// address");
	OB("    provider = microsoft\n    client_id = x\n    tenant = \"a/b\"\n", "tenant = \"a/b\"");
	OB("    provider = google\n    client_id = x\n", "client_secret_file");
	OB("    provider = google\n    client_id = x\n    tenant = t\n"
	    "    client_secret_file = /s\n", "tenant is for provider microsoft only");
	OB("    provider = microsoft\n    client_id = x\n    token_file = rel/path\n",
	    "must be an absolute path");
	OB("    provider = microsoft\n    client_id = x\n    refresh_margin = 0s\n",
	    "refresh_margin = 0 is out of range");
	OB("    provider = microsoft\n    client_id = x\n    refresh_idle = 31d\n",
	    "refresh_idle = 2678400 is out of range");
	OB("    provider = microsoft\n    client_id = x\n  }\n  oauth {\n"
	    "    provider = microsoft\n    client_id = y\n", "only one oauth section");
	/* The app-only flows: their credentials, and only theirs. */
	OB("    provider = microsoft\n    client_id = x\n    flow = client_credentials\n",
	    "flow client_credentials needs client_secret_file, or certificate_file and "
	    "private_key_file");
	OB("    provider = microsoft\n    client_id = x\n    flow = client_credentials\n"
	    "    certificate_file = /c\n", "flow client_credentials needs");
	OB("    provider = microsoft\n    client_id = x\n    flow = client_credentials\n"
	    "    certificate_file = /c\n    private_key_file = /k\n    client_secret_file = /s\n",
	    "(not both ways)");
	OB("    provider = google\n    flow = service_account\n", "flow service_account needs "
	    "key_file");
	OB("    provider = microsoft\n    client_id = x\n    key_file = /k\n",
	    "key_file is for flow service_account");
	OB("    provider = microsoft\n    client_id = x\n    private_key_file = /k\n",
	    "certificate_file and private_key_file are for flow client_credentials");
	OB("    provider = microsoft\n    client_id = x\n    proxy = \"https://p:3128\"\n",
	    "proxy = \"https://p:3128\": an http://host:port address");
	OB("    provider = microsoft\n    client_id = x\n    proxy = \"http://u:pw@p:3128\"\n",
	    "its credentials go in proxy_auth_file");
	OB("    provider = microsoft\n    client_id = x\n    proxy_auth_file = /a\n",
	    "proxy_auth_file without proxy");
	OB("    provider = microsoft\n    client_id = x\n    key_file = k\n",
	    "key_file = \"k\": must be an absolute path");
#undef OB
	/* Microsoft's application scope by default; Google's service
	 * account needs no client_id. */
	{
		struct weir_config c;
		char *p = conf("upstream \"a\" {\n  host = a.example\n  username = u\n  oauth {\n"
		    "    provider = microsoft\n    client_id = x\n    flow = client_credentials\n"
		    "    client_secret_file = /s\n    proxy = \"http://proxy.example:3128\"\n"
		    "  }\n}\nupstream \"b\" {\n  host = b.example\n  username = u\n  oauth {\n"
		    "    provider = google\n    flow = service_account\n    key_file = /k.json\n"
		    "  }\n}\n");
		struct buf err = BUF_INIT;

		cr_assert_eq(config_load(&c, p, &err), 0, "%s", buf_cstr(&err));
		cr_assert_str_eq(c.upstreams[0].oauth.scope, "https://outlook.office365.com/.default");
		cr_assert_str_eq(c.upstreams[0].oauth.proxy, "http://proxy.example:3128");
		cr_assert_str_eq(c.upstreams[1].oauth.scope, "https://mail.google.com/");
		cr_assert_str_eq(c.upstreams[1].oauth.token_endpoint,
		    "https://oauth2.googleapis.com/token");
		config_free(&c);
		buf_free(&err);
		free(p);
	}
	bad("upstream \"a\" {\n  host = a.example\n  oauth {\n    provider = microsoft\n"
	    "    client_id = x\n  }\n}\n", "oauth needs username");
	bad("upstream \"a\" {\n  host = a.example\n  username = u\n  secret_file = /s\n"
	    "  oauth {\n    provider = microsoft\n    client_id = x\n  }\n}\n",
	    "excludes secret_file and secret_command");
	/* A token must never go as a password. */
	bad("upstream \"a\" {\n  host = a.example\n  username = u\n"
	    "  mechanisms = {\"XOAUTH2\", \"PLAIN\"}\n"
	    "  oauth {\n    provider = microsoft\n    client_id = x\n  }\n}\n",
	    "mechanisms may name only XOAUTH2 and OAUTHBEARER, not PLAIN");
}

/* Backup relays and routing by recipient domain (mail/route.h). */
Test(config, routes_by_recipient_then_sender_then_default)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	const struct weir_upstream *r[8];
	size_t n;
	char *p = conf(
	    "upstream \"gmail\" {\n  host = g.example\n}\n"
	    "upstream \"isp\" {\n  host = i.example\n  fallback = {\"gmail\", \"ses\"}\n}\n"
	    "upstream \"corp\" {\n  host = c.example\n"
	    "  recipient_domains = {\"*.Example.com\", \"gmail.com\"}\n}\n"
	    "upstream \"lists\" {\n  host = l.example\n  senders = {\"*@lists.example.org\"}\n"
	    "  recipient_domains = {\"partner.example\"}\n}\n"
	    "upstream \"ses\" {\n  host = s.example\n  fallback = {\"relay2\"}\n"
	    "  fallback_when = {\"throttled 5m\", \"quota\"}\n}\n"
	    "upstream \"relay2\" {\n  host = r.example\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	/* gmail comes first but is a backup relay: isp is the default. */
	cr_assert_str_eq(config_upstream_for(&c, "me@example.org")->name, "isp");
	cr_assert_str_eq(config_upstream_route(&c, "me@example.org", "a@b.example.net")->name,
	    "isp");
	cr_assert_str_eq(config_upstream_route(&c, "me@example.org", "a@x.EXAMPLE.com")->name,
	    "corp");
	/* "*.example.com" is its subdomains, not itself. */
	cr_assert_str_eq(config_upstream_route(&c, "me@example.org", "a@example.com")->name,
	    "isp");
	cr_assert_str_eq(config_upstream_route(&c, "me@example.org", "a@GMAIL.com")->name,
	    "corp");
	/* A section with senders takes its domains only from its senders. */
	cr_assert_str_eq(config_upstream_route(&c, "me@example.org", "a@partner.example")->name,
	    "isp");
	cr_assert_str_eq(config_upstream_route(&c, "x@lists.example.org",
	    "a@partner.example")->name, "lists");
	/* ... and no other recipients of theirs. */
	cr_assert_str_eq(config_upstream_route(&c, "x@lists.example.org", "a@b.example")->name,
	    "isp");
	/* The route: depth first, each once. */
	n = config_route(&c, config_upstream(&c, "isp"), r, 8);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(r[0]->name, "isp");
	cr_assert_str_eq(r[1]->name, "gmail");
	cr_assert_str_eq(r[2]->name, "ses");
	cr_assert_str_eq(r[3]->name, "relay2");
	cr_assert_eq(config_route(&c, config_upstream(&c, "gmail"), r, 8), 1);
	/* The conditions: the defaults, or as written, throttled off
	 * unless named. */
	cr_assert_eq(config_upstream(&c, "isp")->when.s[RK_UNREACHABLE], 600);
	cr_assert_eq(config_upstream(&c, "isp")->when.s[RK_AUTH], 0);
	cr_assert_eq(config_upstream(&c, "isp")->when.s[RK_QUOTA], 3600);
	cr_assert_eq(config_upstream(&c, "isp")->when.s[RK_THROTTLED], RK_OFF);
	cr_assert_eq(config_upstream(&c, "ses")->when.s[RK_UNREACHABLE], RK_OFF);
	cr_assert_eq(config_upstream(&c, "ses")->when.s[RK_THROTTLED], 300);
	cr_assert_eq(config_upstream(&c, "ses")->when.s[RK_QUOTA], 3600);
	cr_assert_eq(route_when_any(&config_upstream(&c, "gmail")->when), 0);
	config_free(&c);
	free(p);
}

Test(config, a_default_that_is_only_a_backup_is_still_the_default)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("upstream \"lists\" {\n  host = l.example\n  senders = {\"*@l.example\"}\n"
	    "  fallback = {\"main\"}\n}\nupstream \"main\" {\n  host = m.example\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_str_eq(config_upstream_for(&c, "a@example.org")->name, "main");
	config_free(&c);
	free(p);
}

Test(config, fallback_errors)
{
	bad("upstream \"a\" {\n  host = a\n  fallback = {\"b\"}\n}\n"
	    "upstream \"b\" {\n  host = b\n  fallback = {\"c\"}\n}\n"
	    "upstream \"c\" {\n  host = c\n  fallback = {\"a\"}\n}\n",
	    "weir.conf:3: upstream \"a\": fallback loop: a -> b -> c -> a");
	/* The fallback key's own line, not the section's closing brace
	 * (issue 31, item 9). */
	bad("upstream \"a\" {\n  host = a\n  fallback = {\"a\"}\n\n}\n",
	    "weir.conf:3: upstream \"a\": fallback names the section itself");
	bad("upstream \"a\" {\n  fallback = {\"nope\"}\n  host = a\n}\n",
	    "weir.conf:2: upstream \"a\": fallback \"nope\" is no upstream section");
	bad("upstream \"a\" {\n  host = a\n  fallback = {\"b\", \"b\"}\n}\n"
	    "upstream \"b\" {\n  host = b\n}\n", "fallback names \"b\" twice");
	bad("upstream \"a\" {\n  host = a\n  fallback = {\"nope\"}\n}\n",
	    "fallback \"nope\" is no upstream section");
	bad("upstream \"a\" {\n  host = a\n\n  fallback_when = {\"quota 1h\", \"often\"}\n}\n",
	    "weir.conf:4: fallback_when: \"often\": not a condition");
	bad("upstream \"a\" {\n  host = a\n  fallback_when = {\"quota 1h\", \"quota 2h\"}\n}\n",
	    "a condition given twice");
	bad("upstream \"a\" {\n  host = a\n  fallback_when = {\"quota soon\"}\n}\n",
	    "fallback_when: \"quota soon\"");
	bad("upstream \"a\" {\n  host = a\n  fallback_when = {\"quota  1h\"}\n}\n",
	    "one blank, then one duration");
	bad("upstream \"a\" {\n  host = a\n  recipient_domains = {\"*.\"}\n}\n",
	    "recipient_domains: \"*.\": not a domain");
	bad("upstream \"a\" {\n  host = a\n  recipient_domains = {\"a b\"}\n}\n",
	    "recipient_domains: \"a b\"");
}

/* reply_rules (issue 31): "CLASS: PATTERN", checked with the line. */
Test(config, reply_rules)
{
	struct weir_config c;
	struct buf err = BUF_INIT;
	char *p = conf("upstream \"a\" {\n  host = a.example\n"
	    "  reply_rules = {\"quota: 554 5.2.0 *STOREDRV*\", \"temporary: 550 5.7.1 *\"}\n}\n");

	cr_assert_eq(config_load(&c, p, &err), 0, "%s", err.s);
	cr_assert_eq(c.upstreams[0].reply_rules.n, 2);
	cr_assert_str_eq(c.upstreams[0].reply_rules.v[1], "temporary: 550 5.7.1 *");
	config_free(&c);
	free(p);
	bad("upstream \"a\" {\n  host = a\n\n  reply_rules = {\"quota: 5*\", \"often: 4*\"}\n}\n",
	    "weir.conf:4: reply_rules: \"often: 4*\": not \"CLASS: PATTERN\"");
	bad("upstream \"a\" {\n  host = a\n  reply_rules = {\"quota:554 *\"}\n}\n",
	    "one blank after the class");
	bad("upstream \"a\" {\n  host = a\n  reply_rules = {\"quota 554 *\"}\n}\n",
	    "not \"CLASS: PATTERN\"");
	bad("upstream \"a\" {\n  host = a\n  reply_rules = {\"none: 554 *\"}\n}\n",
	    "not \"CLASS: PATTERN\"");
}
