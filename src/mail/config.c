/*
 * config.c: weir.conf.  Every key is declared once, in keys[] (top level)
 * or upkeys[] (the upstream "NAME" { } section) below, with its type,
 * default and range (mail/conftab.h); the libconfuse option lists are
 * built from those tables, and after parsing the values are copied into
 * struct weir_config and struct weir_upstream.  No other file calls cfg_get*().
 * The listen { } section (weir-smtpd) has its table, lkeys[]; its list
 * defaults (addresses, networks) are computed in listen_defaults().
 * The metrics { } section (weir-metrics) has its table, mkeys[] (its
 * allow default, in metrics_defaults()); the oauth { } section inside an
 * upstream's, okeys[], with the defaults each provider implies in
 * provider_defaults[].
 *
 * Errors name the file and line: libconfuse's own (syntax, unknown key,
 * bad integer) and ours (ranges, durations, choices, from the validate
 * callbacks, which run while the parser still knows the line) are all
 * collected by confparse(), which also refuses a file that is not a
 * regular file; the checks across keys of one section come after.
 *
 * Trusts: the file's owner (root, or the user running a test queue).
 */
#include <confuse.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/netaddr.h"
#include "lib/timefmt.h"
#include "mail/address.h"
#include "mail/conftab.h"
#include "mail/confparse.h"
#include "mail/config.h"
#include "mail/policy.h"
#include "mail/queue.h"
#include "mail/replyclass.h"
#include "mail/rewrite.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc/weir"
#endif
#ifndef DATADIR
#define DATADIR "/usr/share/weir"
#endif

static const char *const log_level_choices[] = { "normal", "verbose", NULL };

#define QUEUE_DIR_DEFAULT	"/var/spool/weir"
#define SHOWQ_DIR		"/run/weir-showq/"	/* showq_default() */

#define OFF(f) offsetof(struct weir_config, f), NULL
static const struct conftab_key keys[] = {
	{ "queue_dir",      K_STR,      QUEUE_DIR_DEFAULT, 0, 0, 0, OFF(queue_dir) },
	{ "queue_split",    K_INT,      NULL, QUEUE_SPLIT_DEFAULT, 1, QUEUE_SPLIT_MAX, OFF(queue_split) },
	{ "hostname",       K_STR,      NULL, 0, 0, 0, OFF(hostname) },	/* gethostname() */
	{ "admin",          K_STR,      "postmaster", 0, 0, 0, OFF(admin) },
	/* weir-send: local recipients go through it before admin. */
	{ "aliases_file",   K_STR,      "/etc/aliases", 0, 0, 0, OFF(aliases_file) },
	{ "policy_file",    K_STR,      SYSCONFDIR "/policy.conf", 0, 0, 0, OFF(policy_file) },
	{ "gate_socket",    K_STR,      "/run/weir/gate.sock", 0, 0, 0, OFF(gate_socket) },
	/* weir-gate's read-only socket (STATUS only, for anyone who can
	 * reach its folder: weir-metrics, weir-gate status); none: off. */
	{ "gate_status_socket", K_STR,  NULL, 0, 0, 0, OFF(gate_status_socket) },
	{ "gate_journal",   K_STR,      "/var/lib/weir/gate.journal", 0, 0, 0, OFF(gate_journal) },
	/* weir-showq: the queue listing for users who cannot read the
	 * queue (mailq); "" turns it off.  Not in the file: computed from
	 * queue_dir (showq_default()). */
	{ "showq_socket",   K_OPTSTR,   NULL, 0, 0, 0, OFF(showq_socket) },
	/* weir-queued, the long-lived queue writer weir-smtpd and sendmail
	 * hand messages to (mail/qwproto.h); unset: they run weir-queue. */
	{ "queue_socket",   K_STR,      NULL, 0, 0, 0, OFF(queue_socket) },
	/* weir-send: deliveries at once per upstream; how long a message may
	 * stay queued (time spent waiting on weir-gate does not count). */
	{ "concurrency",    K_INT,      NULL, 4, 1, 1000, OFF(concurrency) },
	{ "queue_lifetime", K_DURATION, "7d", 0, 3600, 365 * 86400LL, OFF(queue_lifetime) },
	/* weir-send: one RFC 3464 "delayed" DSN to the sender once a message
	 * has been refused temporarily this long (waits excluded); 0: off. */
	{ "delay_warning",  K_DURATION, "0s", 0, 0, 365 * 86400LL, OFF(delay_warning) },
	/* qmail's schedule: attempt at birth + (floor(sqrt(age)) + skip)^2 s */
	{ "retry_skip",     K_INT,      NULL, 20, 1, 10000, OFF(retry_skip) },
	/* Below the 36 hours after which weir-send removes S2/S3 leftovers
	 * (QUEUE.md), so an injector still running never loses its files. */
	{ "inject_timeout", K_DURATION, "24h", 0, 1, 35 * 3600, OFF(inject_timeout) },
	/* Privilege separation (lib/privdrop.h, QUEUE.md): the accounts the
	 * daemons become when started as root; "" keeps them as started.
	 * send_user and queue_group also own the queue (weir queue-init). */
	{ "gate_user",      K_ACCOUNT,  NULL, 0, 0, 0, OFF(gate_user) },
	{ "send_user",      K_ACCOUNT,  NULL, 0, 0, 0, OFF(send_user) },
	{ "smtpd_user",     K_ACCOUNT,  NULL, 0, 0, 0, OFF(smtpd_user) },
	{ "queue_group",    K_ACCOUNT,  NULL, 0, 0, 0, OFF(queue_group) },
	/* weir-queued becomes it: an account whose primary group is
	 * queue_group, so that its files are the queue group's. */
	{ "queued_user",    K_ACCOUNT,  NULL, 0, 0, 0, OFF(queued_user) },
	/* Every program: "verbose" adds the protocol transcripts and the
	 * step-by-step lines (lib/log.h's log_debug()). */
	{ "log_level",      K_CHOICE,   "normal", 0, 0, 0, offsetof(struct weir_config, log_level),
	  log_level_choices },
	/* The provider presets an upstream's preset names ("Presets"). */
	{ "preset_dir",     K_STR,      DATADIR "/providers", 0, 0, 0, OFF(preset_dir) },
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const char *const tls_choices[] = { "starttls", "smtps", "none", NULL };

#define UOFF(f) offsetof(struct weir_upstream, f)
static const struct conftab_key upkeys[] = {
	/* A provider preset (preset_dir/NAME.conf) under this section's keys. */
	{ "preset",         K_STR,      NULL, 0, 0, 0, UOFF(preset), NULL },
	{ "host",           K_STR,      NULL, 0, 0, 0, UOFF(host), NULL },
	{ "port",           K_INT,      NULL, 0, 1, 65535, UOFF(port), NULL },
	{ "tls",            K_CHOICE,   "starttls", 0, 0, 0, UOFF(tls), tls_choices },
	{ "verify",         K_BOOL,     NULL, 1, 0, 1, UOFF(verify), NULL },
	{ "ca_file",        K_STR,      NULL, 0, 0, 0, UOFF(ca_file), NULL },
	{ "fingerprint",    K_STR,      NULL, 0, 0, 0, UOFF(fingerprint), NULL },
	{ "username",       K_STR,      NULL, 0, 0, 0, UOFF(username), NULL },
	{ "secret_file",    K_STR,      NULL, 0, 0, 0, UOFF(secret_file), NULL },
	{ "secret_command", K_STR,      NULL, 0, 0, 0, UOFF(secret_command), NULL },
	{ "mechanisms",     K_LIST,     NULL, 0, 0, 0, UOFF(mechanisms), NULL },
	{ "senders",        K_LIST,     NULL, 0, 0, 0, UOFF(senders), NULL },
	{ "max_recipients", K_INT,      NULL, 100, 1, 100000, UOFF(max_recipients), NULL },
	/* Sender rewriting at delivery: the map, its default for senders
	 * outside the accepted domains, those domains (empty: the map's and
	 * the default's), and whether the From: address follows. */
	{ "rewrite_sender",      K_LIST, NULL, 0, 0, 0, UOFF(rewrite_sender), NULL },
	{ "rewrite_default",     K_STR,  NULL, 0, 0, 0, UOFF(rewrite_default), NULL },
	{ "rewrite_domains",     K_LIST, NULL, 0, 0, 0, UOFF(rewrite_domains), NULL },
	{ "rewrite_header_from", K_BOOL, NULL, 0, 0, 1, UOFF(rewrite_header_from), NULL },
	/* RFC 5321 4.5.3.2; the connect timeout is ours. */
	{ "timeout_connect",    K_DURATION, "1m",  0, 1, 3600, UOFF(timeout_connect), NULL },
	{ "timeout_banner",     K_DURATION, "5m",  0, 1, 3600, UOFF(timeout_banner), NULL },
	{ "timeout_command",    K_DURATION, "5m",  0, 1, 3600, UOFF(timeout_command), NULL },
	{ "timeout_mail",       K_DURATION, "5m",  0, 1, 3600, UOFF(timeout_mail), NULL },
	{ "timeout_rcpt",       K_DURATION, "5m",  0, 1, 3600, UOFF(timeout_rcpt), NULL },
	{ "timeout_data_init",  K_DURATION, "2m",  0, 1, 3600, UOFF(timeout_data_init), NULL },
	{ "timeout_data_block", K_DURATION, "3m",  0, 1, 3600, UOFF(timeout_data_block), NULL },
	{ "timeout_data_end",   K_DURATION, "10m", 0, 1, 3600, UOFF(timeout_data_end), NULL },
	/* weir-send: a session kept open for the next message ends after
	 * this long idle (0: a session per message); below the 5 minutes
	 * RFC 5321 4.5.3.2 gives a server to wait for our next command. */
	{ "session_idle",       K_DURATION, "30s", 0, 0, 3600, UOFF(session_idle), NULL },
	/* Routing (mail/route.h): recipients at these domains come here
	 * first; the backup relays, in order; what sends mail to them
	 * (route_when_default() when fallback is set without it). */
	{ "recipient_domains",  K_LIST,     NULL, 0, 0, 0, UOFF(recipient_domains), NULL },
	{ "fallback",           K_LIST,     NULL, 0, 0, 0, UOFF(fallback), NULL },
	{ "fallback_when",      K_LIST,     NULL, 0, 0, 0, UOFF(fallback_when), NULL },
	/* Replies this provider means otherwise than weir's table says
	 * (mail/replyclass.h): "CLASS: PATTERN", tried before the table. */
	{ "reply_rules",        K_LIST,     NULL, 0, 0, 0, UOFF(reply_rules), NULL },
};
#define NUPKEYS (sizeof upkeys / sizeof upkeys[0])
/* from_preset and from_file have a bit for each. */
_Static_assert(NUPKEYS <= 64, "more upstream keys than bits in from_preset");

#define LOFF(f) offsetof(struct weir_listen, f), NULL
static const struct conftab_key lkeys[] = {
	{ "address",         K_LIST,     NULL, 0, 0, 0, LOFF(address) },	/* listen_defaults() */
	{ "allow",           K_LIST,     NULL, 0, 0, 0, LOFF(allow) },	/* listen_defaults() */
	{ "max_size",        K_INT,      NULL, 25 * 1024 * 1024, 1024, 1024 * 1024 * 1024, LOFF(max_size) },
	{ "max_recipients",  K_INT,      NULL, 100, 1, 100000, LOFF(max_recipients) },
	{ "max_errors",      K_INT,      NULL, 10, 1, 1000, LOFF(max_errors) },
	{ "max_connections", K_INT,      NULL, 40, 1, 10000, LOFF(max_connections) },
	{ "max_per_client",  K_INT,      NULL, 10, 1, 10000, LOFF(max_per_client) },
	/* RFC 5321 4.5.3.2 asks at least 5 minutes of a server.  As
	 * Postfix's smtpd_timeout with smtpd_min_data_rate: a whole command
	 * line within timeout, DATA within timeout plus 1 s per
	 * min_data_rate bytes received. */
	{ "timeout",         K_DURATION, "5m", 0, 1, 3600, LOFF(timeout) },
	{ "min_data_rate",   K_INT,      NULL, 500, 1, 1000000000, LOFF(min_data_rate) },
	/* NOOP, RSET, HELP, VRFY and unknown commands per session. */
	{ "junk_command_limit", K_INT,   NULL, 100, 1, 100000, LOFF(junk_command_limit) },
	/* Wait before the greeting (non-loopback clients; loopback ones
	 * too with greet_pause_loopback): a client that speaks first is
	 * refused. */
	{ "greet_pause",     K_DURATION, "1s", 0, 0, 300, LOFF(greet_pause) },
	{ "greet_pause_loopback", K_BOOL, NULL, 0, 0, 1, LOFF(greet_pause_loopback) },
	{ "cert_file",       K_STR,      NULL, 0, 0, 0, LOFF(cert_file) },
	{ "key_file",        K_STR,      NULL, 0, 0, 0, LOFF(key_file) },
	{ "password_file",   K_STR,      NULL, 0, 0, 0, LOFF(password_file) },
};
#define NLKEYS (sizeof lkeys / sizeof lkeys[0])

#define MOFF(f) offsetof(struct weir_metrics, f), NULL
static const struct conftab_key mkeys[] = {
	{ "address",         K_STR,      NULL, 0, 0, 0, MOFF(address) },
	{ "textfile",        K_STR,      NULL, 0, 0, 0, MOFF(textfile) },
	{ "interval",        K_DURATION, "15s", 0, 1, 3600, MOFF(interval) },
	{ "user",            K_ACCOUNT,  NULL, 0, 0, 0, MOFF(user) },
	/* Who may connect (CIDR networks); metrics_defaults(). */
	{ "allow",           K_LIST,     NULL, 0, 0, 0, MOFF(allow) },
	/* HTTP basic authentication for every page: "user:$id$salt$hash"
	 * lines (lib/pwfile.h), mode 0600; unset: none. */
	{ "auth_file",       K_OPTSTR,   NULL, 0, 0, 0, MOFF(auth_file) },
};
#define NMKEYS (sizeof mkeys / sizeof mkeys[0])

/* oauth { } inside an upstream section (mail/oauth.h).  provider and
 * flow have no default here: the provider is required and the flow
 * follows it (oauth_resolve()); so do tenant, scope and the endpoints. */
static const char *const provider_choices[] = { "microsoft", "google", "generic", NULL };
static const char *const flow_choices[] = { "device", "code", "client_credentials",
    "service_account", NULL };

#define OOFF(f) offsetof(struct weir_oauth, f)
static const struct conftab_key okeys[] = {
	{ "provider",           K_CHOICE,   NULL, 0, 0, 0, OOFF(provider), provider_choices },
	{ "flow",               K_CHOICE,   NULL, 0, 0, 0, OOFF(flow), flow_choices },
	{ "tenant",             K_STR,      NULL, 0, 0, 0, OOFF(tenant), NULL },
	{ "client_id",          K_STR,      NULL, 0, 0, 0, OOFF(client_id), NULL },
	{ "client_secret_file", K_STR,      NULL, 0, 0, 0, OOFF(client_secret_file), NULL },
	{ "scope",              K_STR,      NULL, 0, 0, 0, OOFF(scope), NULL },
	{ "device_endpoint",    K_STR,      NULL, 0, 0, 0, OOFF(device_endpoint), NULL },
	{ "authorize_endpoint", K_STR,      NULL, 0, 0, 0, OOFF(authorize_endpoint), NULL },
	{ "token_endpoint",     K_STR,      NULL, 0, 0, 0, OOFF(token_endpoint), NULL },
	{ "ca_file",            K_STR,      NULL, 0, 0, 0, OOFF(ca_file), NULL },
	{ "token_file",         K_STR,      NULL, 0, 0, 0, OOFF(token_file), NULL },
	/* flow client_credentials: a client secret, or a certificate and its
	 * key (RFC 7523's signed client assertion); service_account: Google's
	 * JSON key. */
	{ "certificate_file",   K_STR,      NULL, 0, 0, 0, OOFF(certificate_file), NULL },
	{ "private_key_file",   K_STR,      NULL, 0, 0, 0, OOFF(private_key_file), NULL },
	{ "key_file",           K_STR,      NULL, 0, 0, 0, OOFF(key_file), NULL },
	/* An HTTP proxy (CONNECT) for the endpoints alone; none by default. */
	{ "proxy",              K_STR,      NULL, 0, 0, 0, OOFF(proxy), NULL },
	{ "proxy_auth_file",    K_STR,      NULL, 0, 0, 0, OOFF(proxy_auth_file), NULL },
	/* Refresh when less than the larger of this and a tenth of the
	 * token's lifetime is left: Exchange Online refuses a token in its
	 * last 10 minutes (501 5.5.127 and the like). */
	{ "refresh_margin",     K_DURATION, "10m", 0, 1, 86400, OOFF(refresh_margin), NULL },
	/* weir-send's keep-alive: a refresh token unused this long is used
	 * (refreshed), mail or none, so that one that died (90 days unused
	 * at Microsoft, 7 days for a Google app in testing, a revocation) is
	 * found within this time, not when mail comes.  At most 30 days:
	 * well within Microsoft's 90. */
	{ "refresh_idle",       K_DURATION, "1d", 0, 1, 30 * 86400, OOFF(refresh_idle), NULL },
	{ "timeout",            K_DURATION, "30s", 0, 1, 300, OOFF(timeout), NULL },
};
#define NOKEYS (sizeof okeys / sizeof okeys[0])

/* What each provider's section leaves unset ("{tenant}": the tenant). */
static const struct {
	const char *tenant, *scope, *device, *authorize, *token;
	int flow;
} provider_defaults[] = {
	[OAUTH_MICROSOFT] = { "organizations",
	    "https://outlook.office.com/SMTP.Send offline_access",
	    "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/devicecode",
	    "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
	    "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token", OAUTH_FLOW_DEVICE },
	/* Google's device grant refuses the mail scope: the code grant. */
	[OAUTH_GOOGLE] = { NULL, "https://mail.google.com/",
	    "https://oauth2.googleapis.com/device/code",
	    "https://accounts.google.com/o/oauth2/v2/auth",
	    "https://oauth2.googleapis.com/token", OAUTH_FLOW_CODE },
	[OAUTH_GENERIC] = { NULL, NULL, NULL, NULL, NULL, OAUTH_FLOW_DEVICE },
};

#define OAUTH_TOKEN_DIR "/var/lib/weir/oauth"
/* Exchange Online's SMTP for an application (the client credentials
 * grant): ".default", the rights the application was granted. */
#define MICROSOFT_APP_SCOPE "https://outlook.office365.com/.default"

static const char *const listen_address_default[] = { "127.0.0.1:25", "[::1]:25", NULL };
static const char *const listen_allow_default[] = { "127.0.0.0/8", "::1/128", NULL };
#define metrics_allow_default listen_allow_default

const char *
config_key_name(size_t i)
{
	if (i < NKEYS)
		return keys[i].name;
	i -= NKEYS;
	if (i < NUPKEYS)
		return upkeys[i].name;
	i -= NUPKEYS;
	if (i < NLKEYS)
		return lkeys[i].name;
	i -= NLKEYS;
	if (i < NMKEYS)
		return mkeys[i].name;
	i -= NMKEYS;
	return i < NOKEYS ? okeys[i].name : NULL;
}

int
config_untrusted_env(void)
{
	return getauxval(AT_SECURE) != 0;
}

/* Values that end up in headers and SMTP commands (Message-ID, From:,
 * EHLO, bounces): no byte that could start a new line or field. */
static const char *
str_problem(const char *name, const char *v)
{
	const char *p;

	if (strcmp(name, "hostname") == 0) {
		if (strlen(v) > 253)	/* RFC 1035; keeps Message-ID lines short */
			return "a host name is at most 253 characters";
		for (p = v; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
				return "a host name holds only letters, digits, '.' and '-'";
		return NULL;
	}
	if (strcmp(name, "admin") == 0) {
		for (p = v; *p; p++)
			if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '<' || *p == '>')
				return "an address without spaces, control characters or <>";
		return NULL;
	}
	for (p = v; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return "control characters are not allowed";
	return NULL;
}

/* An account name as useradd(8) takes it (and "" for none): letters,
 * digits, '_', '.', '-', not starting with '-', at most 32 bytes. */
static const char *
account_problem(const char *v)
{
	const char *p;

	if (strlen(v) > 32)
		return "an account name is at most 32 characters";
	if (v[0] == '-')
		return "an account name does not start with '-'";
	for (p = v; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			return "an account name holds only letters, digits, '_', '.' and '-'";
	return NULL;
}

/* weir.conf's rule for its strings (conftab.h). */
static const char *
str_rule(const struct conftab_key *k, const char *v, void *field)
{
	(void)field;
	return k->kind == K_ACCOUNT ? account_problem(v) : str_problem(k->name, v);
}

static int
validate_key(cfg_t *cfg, cfg_opt_t *opt, const struct conftab_key *k)
{
	return conftab_check(cfg, opt, k, str_rule);
}

/* The value of a duration key as set so far in cfg, else its default. */
static long long
duration_now(cfg_t *cfg, const char *name)
{
	const struct conftab_key *k = conftab_find(keys, NKEYS, name);
	const char *v = cfg_size(cfg, name) ? cfg_getstr(cfg, name) : NULL, *why;
	long long d;

	if (v == NULL || duration_parse(v, &d, &why) < 0)
		(void)duration_parse(k->def, &d, &why);
	return d;
}

static int
validate(cfg_t *cfg, cfg_opt_t *opt)
{
	long long dw, ql;

	if (validate_key(cfg, opt, conftab_find(keys, NKEYS, opt->name)) < 0)
		return -1;
	/* Checked where the second of the two is set, so the error names
	 * a line. */
	if (strcmp(opt->name, "delay_warning") == 0 || strcmp(opt->name, "queue_lifetime") == 0) {
		const char *why;

		if (strcmp(opt->name, "delay_warning") == 0) {
			(void)duration_parse(cfg_opt_getnstr(opt, 0), &dw, &why);
			ql = duration_now(cfg, "queue_lifetime");
		} else {
			(void)duration_parse(cfg_opt_getnstr(opt, 0), &ql, &why);
			dw = duration_now(cfg, "delay_warning");
		}
		if (dw != 0 && dw >= ql) {
			cfg_error(cfg, "delay_warning (%lld s) must be shorter than queue_lifetime "
			    "(%lld s), or 0s for none", dw, ql);
			return -1;
		}
	}
	return 0;
}

/* The rewrite keys' values (mail/rewrite.h), while the line is known. */
static int
validate_rewrite(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *why = NULL, *v = NULL;
	unsigned i;

	for (i = 0; i < cfg_opt_size(opt) && why == NULL; i++) {
		v = cfg_opt_getnstr(opt, i);
		if (strcmp(opt->name, "rewrite_sender") == 0)
			why = rewrite_entry_problem(v);
		else if (strcmp(opt->name, "rewrite_default") == 0)
			why = rewrite_address_problem(v, 0);
		else if (strcmp(opt->name, "rewrite_domains") == 0 &&
		    addr_domain_problem(v, strlen(v)) != NULL)
			why = "not a valid domain name";
	}
	if (why == NULL)
		return 0;
	cfg_error(cfg, "%s: \"%s\": %s", opt->name, v, why);
	return -1;
}

/* The routing keys' values (mail/route.h), while the line is known;
 * the names of fallback are checked against the sections later. */
static int
validate_route(cfg_t *cfg, cfg_opt_t *opt)
{
	struct route_when w;
	const char *why = NULL, *v = NULL;
	unsigned i, seen = 0;

	route_when_none(&w);
	for (i = 0; i < cfg_opt_size(opt) && why == NULL; i++) {
		v = cfg_opt_getnstr(opt, i);
		if (strcmp(opt->name, "recipient_domains") == 0)
			why = route_domain_problem(v);
		else if (strcmp(opt->name, "fallback_when") == 0)
			(void)route_when_add(&w, v, &seen, &why);
		else if (!policy_valid_name(v))
			why = "not an upstream section's name";
	}
	if (why == NULL)
		return 0;
	cfg_error(cfg, "%s: \"%s\": %s", opt->name, v, why);
	return -1;
}

/* reply_rules: each "CLASS: PATTERN" (mail/replyclass.h). */
static int
validate_reply_rules(cfg_t *cfg, cfg_opt_t *opt)
{
	enum reply_class cls;
	const char *why = NULL, *pat, *v = NULL;
	unsigned i;

	for (i = 0; i < cfg_opt_size(opt) && why == NULL; i++)
		(void)reply_rule_parse(v = cfg_opt_getnstr(opt, i), &cls, &pat, &why);
	if (why == NULL)
		return 0;
	cfg_error(cfg, "%s: \"%s\": %s", opt->name, v, why);
	return -1;
}

static int
validate_up(cfg_t *cfg, cfg_opt_t *opt)
{
	if (validate_key(cfg, opt, conftab_find(upkeys, NUPKEYS, opt->name)) < 0)
		return -1;
	if (strcmp(opt->name, "rewrite_sender") == 0 || strcmp(opt->name, "rewrite_default") == 0 ||
	    strcmp(opt->name, "rewrite_domains") == 0)
		return validate_rewrite(cfg, opt);
	if (strcmp(opt->name, "recipient_domains") == 0 || strcmp(opt->name, "fallback") == 0 ||
	    strcmp(opt->name, "fallback_when") == 0)
		return validate_route(cfg, opt);
	if (strcmp(opt->name, "reply_rules") == 0)
		return validate_reply_rules(cfg, opt);
	return 0;
}

/* oauth { }: the values that go into URLs and paths. */
static int
validate_oauth(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *v, *p;

	if (validate_key(cfg, opt, conftab_find(okeys, NOKEYS, opt->name)) < 0)
		return -1;
	if (opt->type != CFGT_STR || cfg_opt_size(opt) == 0)
		return 0;
	v = cfg_opt_getnstr(opt, 0);
	if (strstr(opt->name, "_endpoint") && strncmp(v, "https://", 8) != 0) {
		cfg_error(cfg, "%s = \"%s\": must be an https:// address", opt->name, v);
		return -1;
	}
	if (strstr(opt->name, "_endpoint") || strcmp(opt->name, "client_id") == 0)
		for (p = v; *p; p++)
			if (*p == ' ' || (unsigned char)*p > 0x7e) {
				cfg_error(cfg, "%s = \"%s\": no spaces or non-ASCII bytes",
				    opt->name, v);
				return -1;
			}
	if (strcmp(opt->name, "proxy") == 0 && (strncmp(v, "http://", 7) != 0 || v[7] == '\0' ||
	    strpbrk(v, " @") != NULL)) {
		cfg_error(cfg, "proxy = \"%s\": an http://host:port address (its credentials go "
		    "in proxy_auth_file)", v);
		return -1;
	}
	if (strcmp(opt->name, "tenant") == 0)
		for (p = v; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '.' || *p == '-')) {
				cfg_error(cfg, "tenant = \"%s\": a tenant is a domain, an id or "
				    "\"organizations\", \"common\", \"consumers\"", v);
				return -1;
			}
	if (strstr(opt->name, "_file") != NULL && v[0] != '/') {
		cfg_error(cfg, "%s = \"%s\": must be an absolute path", opt->name, v);
		return -1;
	}
	return 0;
}

static int
validate_listen(cfg_t *cfg, cfg_opt_t *opt)
{
	return validate_key(cfg, opt, conftab_find(lkeys, NLKEYS, opt->name));
}

static int
validate_metrics(cfg_t *cfg, cfg_opt_t *opt)
{
	return validate_key(cfg, opt, conftab_find(mkeys, NMKEYS, opt->name));
}

static void
list_default(struct strlist *l, const char *const *v)
{
	size_t i;

	if (l->n > 0)
		return;
	free(l->v);
	for (l->n = 0; v[l->n]; l->n++)
		;
	l->v = xcalloc(l->n + 1, sizeof *l->v);
	for (i = 0; i < l->n; i++)
		l->v[i] = xstrdup(v[i]);
}

/* The computed defaults of the listen section: lists the file left
 * unset (or empty). */
static void
listen_defaults(struct weir_listen *l)
{
	list_default(&l->address, listen_address_default);
	list_default(&l->allow, listen_allow_default);
}

/* The metrics section's: loopback only, unless allow says otherwise. */
static void
metrics_defaults(struct weir_metrics *m)
{
	list_default(&m->allow, metrics_allow_default);
}

static void
set_defaults(struct weir_config *c)
{
	char host[256];

	memset(c, 0, sizeof *c);
	conftab_defaults(keys, NKEYS, c, NULL);
	conftab_defaults(lkeys, NLKEYS, &c->listen, NULL);
	conftab_defaults(mkeys, NMKEYS, &c->metrics, NULL);
	if (gethostname(host, sizeof host) < 0 || host[0] == '\0')
		strcpy(host, "localhost");
	host[sizeof host - 1] = '\0';
	c->hostname = xstrdup(host);
}

void
config_upstream_defaults(struct weir_upstream *u)
{
	memset(u, 0, sizeof *u);
	conftab_defaults(upkeys, NUPKEYS, u, NULL);
	conftab_defaults(okeys, NOKEYS, &u->oauth, NULL);
	route_when_none(&u->when);
}

void
config_upstream_free(struct weir_upstream *u)
{
	if (u->preset_limits)
		free(u->preset_limits->win);
	free(u->preset_limits);
	u->preset_limits = NULL;
	free(u->preset_file);
	u->preset_file = NULL;
	conftab_free(upkeys, NUPKEYS, u);
	conftab_free(okeys, NOKEYS, &u->oauth);
	free(u->name);
	u->name = NULL;
}

/* Checks across the keys of one section, after parsing. */
static void
check_upstream(const struct weir_upstream *u, const char *file, struct buf *err)
{
	const char *f = file;

	/* No default: a caller must never choose where the secret goes. */
	if (u->host == NULL || u->host[0] == '\0')
		buf_printf(err, "%s:%d: upstream \"%s\": no host (the relay to connect "
		    "to must be named; there is no default)\n", f, u->line, u->name);
	if (u->secret_file && u->secret_command)
		buf_printf(err, "%s:%d: upstream \"%s\": secret_file and secret_command "
		    "exclude each other\n", f, u->line, u->name);
	if (u->username && !u->secret_file && !u->secret_command && !u->oauth.present)
		buf_printf(err, "%s:%d: upstream \"%s\": username needs secret_file, "
		    "secret_command or an oauth section\n", f, u->line, u->name);
	if (!u->username && (u->secret_file || u->secret_command))
		buf_printf(err, "%s:%d: upstream \"%s\": a secret without a username\n",
		    f, u->line, u->name);
	if (u->rewrite_sender.n > 0 || u->rewrite_default || u->rewrite_domains.n > 0) {
		struct rewrite rw;
		struct buf why = BUF_INIT;

		/* What one entry cannot show: a pattern given twice. */
		if (rewrite_init(&rw, (const char *const *)u->rewrite_sender.v,
		    u->rewrite_sender.n, u->rewrite_default,
		    (const char *const *)u->rewrite_domains.v, u->rewrite_domains.n, NULL,
		    &why) < 0)
			buf_printf(err, "%s:%d: upstream \"%s\": %s\n", f, u->line, u->name, why.s);
		rewrite_free(&rw);
		buf_free(&why);
	}
	if (u->fingerprint) {
		size_t i, hex = 0;

		for (i = 0; u->fingerprint[i]; i++)
			if (strchr("0123456789abcdefABCDEF", u->fingerprint[i]))
				hex++;
			else if (u->fingerprint[i] != ':')
				break;
		if (u->fingerprint[i] != '\0' || hex != 64)
			buf_printf(err, "%s:%d: upstream \"%s\": fingerprint must be 64 hex "
			    "digits (SHA-256), colons allowed\n", f, u->line, u->name);
	}
}

/* The bit of from_preset and from_file for the upstream key name. */
static unsigned long long
up_bit(const char *name)
{
	const struct conftab_key *k = conftab_find(upkeys, NUPKEYS, name);

	if (k == NULL)
		panic("up_bit: no upstream key %s", name);
	return 1ULL << (k - upkeys);
}

/* Which upstream keys cfg sets, as bits. */
static unsigned long long
up_set(cfg_t *cfg)
{
	unsigned long long m = 0;
	size_t i;

	for (i = 0; i < NUPKEYS; i++)
		if (cfg_size(cfg, upkeys[i].name) > 0)
			m |= 1ULL << i;
	return m;
}

/* A provider's endpoint, with "{tenant}" replaced; NULL: none. */
static char *
endpoint(const char *tmpl, const char *tenant)
{
	const char *t = tmpl ? strstr(tmpl, "{tenant}") : NULL;

	if (tmpl == NULL)
		return NULL;
	if (t == NULL)
		return xstrdup(tmpl);
	return xasprintf("%.*s%s%s", (int)(t - tmpl), tmpl, tenant ? tenant : "", t + 8);
}

/* The credentials each flow takes, and only those (mail/oauth.h). */
static void
app_credentials(const struct weir_upstream *u, const char *f, int line, struct buf *err)
{
	const struct weir_oauth *o = &u->oauth;
	int cert = o->certificate_file || o->private_key_file;

	if (cert && o->flow != OAUTH_FLOW_CLIENT)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: certificate_file and "
		    "private_key_file are for flow client_credentials\n", f, line, u->name);
	if (o->key_file && o->flow != OAUTH_FLOW_SERVICE)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: key_file is for flow "
		    "service_account\n", f, line, u->name);
	if (o->flow == OAUTH_FLOW_CLIENT && (cert ? !o->certificate_file || !o->private_key_file ||
	    o->client_secret_file : !o->client_secret_file))
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: flow client_credentials needs "
		    "client_secret_file, or certificate_file and private_key_file (not both "
		    "ways)\n", f, line, u->name);
	if (o->flow == OAUTH_FLOW_SERVICE && (!o->key_file || o->client_secret_file))
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: flow service_account needs "
		    "key_file (the service account's JSON key) and no client_secret_file\n", f,
		    line, u->name);
	if (o->proxy_auth_file && !o->proxy)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: proxy_auth_file without proxy\n",
		    f, line, u->name);
}

/* The oauth { } section of u, if any: its keys, the defaults that
 * follow from the provider and the upstream's name, and the checks
 * across keys (mail/oauth.h). */
static void
copy_oauth(struct weir_upstream *u, cfg_t *sec, cfg_t *preset, const char *f, struct buf *err)
{
	struct weir_oauth *o = &u->oauth;
	size_t n = cfg_size(sec, "oauth"), i;
	cfg_t *os;
	int line;

	if (n == 0)
		return;
	os = cfg_getnsec(sec, "oauth", 0);
	o->present = 1;
	o->line = line = os->line;
	if (n > 1)
		buf_printf(err, "%s:%d: upstream \"%s\": only one oauth section is allowed\n",
		    f, cfg_getnsec(sec, "oauth", 1)->line, u->name);
	if (preset)		/* the preset's oauth keys, under the section's */
		conftab_copy(okeys, NOKEYS, o, preset, NULL);
	conftab_copy(okeys, NOKEYS, o, os, NULL);
	/* Mechanisms a preset names are for a password: with oauth, the
	 * token's own (below) unless the section names some. */
	if ((u->from_preset & ~u->from_file) & up_bit("mechanisms")) {
		conftab_free(conftab_find(upkeys, NUPKEYS, "mechanisms"), 1, u);
		u->from_preset &= ~up_bit("mechanisms");
	}
	if (o->provider < 0) {
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: no provider (microsoft, "
		    "google or generic)\n", f, line, u->name);
		return;
	}
	if (o->tenant && o->provider != OAUTH_MICROSOFT)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: tenant is for provider "
		    "microsoft only\n", f, line, u->name);
	if (!o->tenant && provider_defaults[o->provider].tenant)
		o->tenant = xstrdup(provider_defaults[o->provider].tenant);
	if (o->flow < 0)
		o->flow = provider_defaults[o->provider].flow;
	if (!o->scope && o->provider == OAUTH_MICROSOFT && o->flow == OAUTH_FLOW_CLIENT)
		o->scope = xstrdup(MICROSOFT_APP_SCOPE);
	if (!o->scope && provider_defaults[o->provider].scope)
		o->scope = xstrdup(provider_defaults[o->provider].scope);
	if (!o->device_endpoint)
		o->device_endpoint = endpoint(provider_defaults[o->provider].device, o->tenant);
	if (!o->authorize_endpoint)
		o->authorize_endpoint = endpoint(provider_defaults[o->provider].authorize,
		    o->tenant);
	if (!o->token_endpoint)
		o->token_endpoint = endpoint(provider_defaults[o->provider].token, o->tenant);
	if (!o->token_file)
		o->token_file = xasprintf("%s/%s", OAUTH_TOKEN_DIR, u->name);
	if (!o->client_id && o->flow != OAUTH_FLOW_SERVICE)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: no client_id (the application "
		    "registered with the provider)\n", f, line, u->name);
	app_credentials(u, f, line, err);
	if (!o->scope)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: provider generic needs scope\n",
		    f, line, u->name);
	if (!o->token_endpoint)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: provider generic needs "
		    "token_endpoint\n", f, line, u->name);
	if (o->flow == OAUTH_FLOW_DEVICE && !o->device_endpoint)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: flow device needs "
		    "device_endpoint\n", f, line, u->name);
	if (o->flow == OAUTH_FLOW_CODE && !o->authorize_endpoint)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: flow code needs "
		    "authorize_endpoint\n", f, line, u->name);
	if (o->provider == OAUTH_GOOGLE && !o->client_secret_file && !OAUTH_APP_ONLY(o))
		buf_printf(err, "%s:%d: upstream \"%s\": oauth: Google's token endpoint "
		    "wants the client's secret: client_secret_file\n", f, line, u->name);
	if (!u->username)
		buf_printf(err, "%s:%d: upstream \"%s\": oauth needs username (the mailbox, "
		    "as XOAUTH2 names it)\n", f, u->line, u->name);
	if (u->secret_file || u->secret_command)
		buf_printf(err, "%s:%d: upstream \"%s\": an oauth section excludes "
		    "secret_file and secret_command\n", f, u->line, u->name);
	/* The token goes only to the mechanisms made for it, never as a
	 * password. */
	for (i = 0; i < u->mechanisms.n; i++)
		if (strcasecmp(u->mechanisms.v[i], "XOAUTH2") != 0 &&
		    strcasecmp(u->mechanisms.v[i], "OAUTHBEARER") != 0)
			buf_printf(err, "%s:%d: upstream \"%s\": with oauth, mechanisms may "
			    "name only XOAUTH2 and OAUTHBEARER, not %s\n", f, u->line, u->name,
			    u->mechanisms.v[i]);
	if (u->mechanisms.n == 0) {
		static const char *const oauth_mechs[] = { "XOAUTH2", "OAUTHBEARER", NULL };

		list_default(&u->mechanisms, oauth_mechs);
	}
}

/* u->when: fallback_when parsed (each entry was checked with its line),
 * or the defaults for a section with fallbacks, or nothing. */
static void
when_of(struct weir_upstream *u)
{
	unsigned seen = 0;
	const char *why;
	size_t i;

	route_when_none(&u->when);
	for (i = 0; i < u->fallback_when.n; i++)
		(void)route_when_add(&u->when, u->fallback_when.v[i], &seen, &why);
	if (u->fallback_when.n == 0 && u->fallback.n > 0)
		route_when_default(&u->when);
}

/* Does a walk of fallbacks from u come back to start?  The path so far
 * in path[0..depth) (depth is at most the number of sections). */
static int
fallback_loop(const struct weir_config *c, const struct weir_upstream *start,
    const struct weir_upstream *u, const struct weir_upstream **path, size_t depth)
{
	const struct weir_upstream *f;
	size_t i, k;

	path[depth++] = u;
	for (i = 0; i < u->fallback.n; i++) {
		if ((f = config_upstream(c, u->fallback.v[i])) == NULL)
			continue;	/* said elsewhere */
		if (f == start) {
			path[depth] = f;
			return (int)depth + 1;
		}
		for (k = 0; k < depth; k++)
			if (path[k] == f)
				break;
		if (k == depth && depth < c->nupstreams) {
			int n = fallback_loop(c, start, f, path, depth);

			if (n)
				return n;
		}
	}
	return 0;
}

/* The line of u's key in text (mail/confparse.h), or the section's end. */
static int
key_line(const char *text, const struct weir_upstream *u, const char *key)
{
	int line = text ? confparse_key_line(text, u->name, key, NULL, u->line) : 0;

	return line ? line : u->line;
}

/* Across sections: each fallback names another section, once; no
 * section is its own fallback, directly or through others.  Each error
 * names the fallback key's line. */
static void
check_fallbacks(struct weir_config *c, const char *f, const char *text, struct buf *err)
{
	const struct weir_upstream **path = xcalloc(c->nupstreams + 1, sizeof *path);
	struct weir_upstream *u, *fb;
	size_t i, j, k;
	int n, line;

	for (i = 0; i < c->nupstreams; i++) {
		u = &c->upstreams[i];
		line = key_line(text, u, "fallback");
		for (j = 0; j < u->fallback.n; j++) {
			for (k = 0; k < j; k++)
				if (strcmp(u->fallback.v[k], u->fallback.v[j]) == 0)
					break;
			if (k < j)
				buf_printf(err, "%s:%d: upstream \"%s\": fallback names \"%s\" "
				    "twice\n", f, line, u->name, u->fallback.v[j]);
			else if (strcmp(u->fallback.v[j], u->name) == 0)
				buf_printf(err, "%s:%d: upstream \"%s\": fallback names the "
				    "section itself\n", f, line, u->name);
			else if ((fb = (struct weir_upstream *)config_upstream(c,
			    u->fallback.v[j])) == NULL)
				buf_printf(err, "%s:%d: upstream \"%s\": fallback \"%s\" is no "
				    "upstream section\n", f, line, u->name, u->fallback.v[j]);
			else
				fb->is_fallback = 1;
		}
	}
	for (i = 0; i < c->nupstreams; i++) {
		u = &c->upstreams[i];
		if ((n = fallback_loop(c, u, u, path, 0)) == 0)
			continue;
		buf_printf(err, "%s:%d: upstream \"%s\": fallback loop: ", f,
		    key_line(text, u, "fallback"), u->name);
		for (k = 0; k < (size_t)n; k++)
			buf_printf(err, "%s%s", k ? " -> " : "", path[k]->name);
		buf_adds(err, " (a backup relay may not fall back, directly or through others, "
		    "to the section it backs up)\n");
	}
	free(path);
}

/*
 * ---- Provider presets (config.h) ----
 *
 * A preset file has the upstream keys a provider decides (never the
 * account's: username, secrets, senders, rewriting, routing, the CA or
 * fingerprint, which are the administrator's), an oauth section with
 * the provider's keys (never the client's), its limits and its source.
 * It is parsed with the same tables and checks as weir.conf, so a key
 * unknown to weir.conf is an error with the file's line.
 */
static const struct conftab_key pkeys[] = {
	{ "title",   K_STR,   NULL, 0, 0, 0, CONFTAB_NOFF, NULL },
	{ "source",  K_LIST,  NULL, 0, 0, 0, CONFTAB_NOFF, NULL },
	/* weir-gate's windows, as policy.conf's rate (policy_rate_parse). */
	{ "rate",    K_WORDS, NULL, 0, 0, 0, CONFTAB_NOFF, NULL },
	{ "max_connections",         K_LONG, NULL, 0, 0, 10000, CONFTAB_NOFF, NULL },
	{ "messages_per_connection", K_LONG, NULL, 0, 0, 1000000, CONFTAB_NOFF, NULL },
};
#define NPKEYS (sizeof pkeys / sizeof pkeys[0])

static const char *
preset_rule(const struct conftab_key *k, const char *v, void *field)
{
	struct policy_window w;
	const char *why = NULL;

	if (strcmp(k->name, "rate") == 0) {
		(void)policy_rate_parse(v, &w, &why);
		return why;
	}
	return str_rule(k, v, field);
}

static int
validate_preset(cfg_t *cfg, cfg_opt_t *opt)
{
	return conftab_check(cfg, opt, conftab_find(pkeys, NPKEYS, opt->name), preset_rule);
}

/* The upstream and oauth keys a preset may set: the provider's. */
static int
preset_may_set(const char *name)
{
	static const char *const ok[] = {
		"host", "port", "tls", "mechanisms", "max_recipients", "session_idle",
		/* oauth { } */
		"provider", "flow", "tenant", "scope", "device_endpoint",
		"authorize_endpoint", "token_endpoint", NULL
	};
	size_t i;

	for (i = 0; ok[i]; i++)
		if (strcmp(ok[i], name) == 0)
			return 1;
	return strncmp(name, "timeout_", 8) == 0;
}

struct preset_text {		/* one preset file, parsed */
	cfg_t *cfg;
	cfg_opt_t *opts, *oopts;
	char *path;
};

static void
preset_text_free(struct preset_text *t)
{
	if (t->cfg)
		cfg_free(t->cfg);
	free(t->opts);
	free(t->oopts);
	free(t->path);
	memset(t, 0, sizeof *t);
}

/* Keys of tab set in cfg that a preset may not set, as errors. */
static void
preset_refused(const struct preset_text *t, cfg_t *cfg, const struct conftab_key *tab,
    size_t n, const char *in, struct buf *err)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (cfg_size(cfg, tab[i].name) > 0 && !preset_may_set(tab[i].name))
			buf_printf(err, "%s: %s%s: the administrator's, not the provider's: "
			    "set it in the upstream section, not in a preset\n", t->path, in,
			    tab[i].name);
}

/* dir/name.conf parsed into t (preset_text_free() in any case).  0 ok;
 * -1 with the errors in err. */
static int
preset_parse(const char *dir, const char *name, struct preset_text *t, struct buf *err)
{
	size_t i, errlen0 = err->len;
	struct stat st;
	char key[64];

	memset(t, 0, sizeof *t);
	if (!policy_valid_name(name) || name[0] == '.') {
		buf_printf(err, "preset \"%s\": a preset's name is 1 to %d of A-Z a-z 0-9 . - _, "
		    "not starting with '.'\n", name, POLICY_NAME_MAX);
		return -1;
	}
	t->path = xasprintf("%s/%s.conf", dir, name);
	if (stat(t->path, &st) < 0) {
		buf_printf(err, "preset \"%s\": %s: %s (weir presets lists the presets there "
		    "are)\n", name, t->path, strerror(errno));
		return -1;
	}
	t->oopts = xcalloc(NOKEYS + 1, sizeof *t->oopts);
	conftab_opts(okeys, NOKEYS, t->oopts);
	t->opts = xcalloc(NUPKEYS + NPKEYS + 2, sizeof *t->opts);
	conftab_opts(upkeys, NUPKEYS, t->opts);
	conftab_opts(pkeys, NPKEYS, t->opts + NUPKEYS);
	t->opts[NUPKEYS + NPKEYS] = (cfg_opt_t)CFG_SEC("oauth", t->oopts, CFGF_MULTI);
	t->opts[NUPKEYS + NPKEYS + 1] = (cfg_opt_t)CFG_END();
	if ((t->cfg = cfg_init(t->opts, CFGF_NONE)) == NULL) {
		buf_printf(err, "%s: cannot initialise the config parser\n", t->path);
		return -1;
	}
	for (i = 0; i < NUPKEYS; i++)
		cfg_set_validate_func(t->cfg, upkeys[i].name, validate_up);
	for (i = 0; i < NPKEYS; i++)
		cfg_set_validate_func(t->cfg, pkeys[i].name, validate_preset);
	for (i = 0; i < NOKEYS; i++) {
		snprintf(key, sizeof key, "oauth|%s", okeys[i].name);
		cfg_set_validate_func(t->cfg, key, validate_oauth);
	}
	if (confparse(t->cfg, t->path, err) < 0)
		return -1;
	preset_refused(t, t->cfg, upkeys, NUPKEYS, "", err);
	if (cfg_size(t->cfg, "oauth") > 1)
		buf_printf(err, "%s: only one oauth section is allowed\n", t->path);
	else if (cfg_size(t->cfg, "oauth") == 1)
		preset_refused(t, cfg_getnsec(t->cfg, "oauth", 0), okeys, NOKEYS, "oauth: ", err);
	if (cfg_size(t->cfg, "title") == 0)
		buf_printf(err, "%s: no title (the provider and its relay, for people)\n",
		    t->path);
	if (cfg_size(t->cfg, "source") == 0)
		buf_printf(err, "%s: no source (the documents its figures come from, with "
		    "their dates)\n", t->path);
	return err->len > errlen0 ? -1 : 0;
}

/* The preset's limits for weir-gate, into pu (zeroed) and *set. */
static void
preset_limits(cfg_t *cfg, struct policy_upstream *pu, unsigned *set)
{
	struct policy_window w;
	const char *why;
	unsigned i;

	memset(pu, 0, sizeof *pu);
	*set = 0;
	for (i = 0; i < cfg_size(cfg, "rate"); i++) {
		if (policy_rate_parse(cfg_getnstr(cfg, "rate", i), &w, &why) < 0)
			panic("preset: rate: bad value after validation");
		pu->win = xrealloc(pu->win, (pu->nwin + 1) * sizeof *pu->win);
		pu->win[pu->nwin++] = w;
	}
	if (cfg_size(cfg, "max_connections")) {
		pu->max_connections = cfg_getint(cfg, "max_connections");
		*set |= PRESET_SET_MAX_CONNECTIONS;
	}
	if (cfg_size(cfg, "messages_per_connection")) {
		pu->messages_per_connection = cfg_getint(cfg, "messages_per_connection");
		*set |= PRESET_SET_MESSAGES_PER_CONNECTION;
	}
}

/* The preset's oauth section, or NULL. */
static cfg_t *
preset_oauth(const struct preset_text *t)
{
	return cfg_size(t->cfg, "oauth") ? cfg_getnsec(t->cfg, "oauth", 0) : NULL;
}

int
config_preset_load(const char *dir, const char *name, struct weir_preset *p, struct buf *err)
{
	struct preset_text t;
	size_t i;

	memset(p, 0, sizeof *p);
	config_upstream_defaults(&p->up);
	if (preset_parse(dir, name, &t, err) < 0) {
		preset_text_free(&t);
		return -1;
	}
	p->name = xstrdup(name);
	p->file = xstrdup(t.path);
	p->title = xstrdup(cfg_getstr(t.cfg, "title"));
	p->source.n = cfg_size(t.cfg, "source");
	p->source.v = xcalloc(p->source.n + 1, sizeof *p->source.v);
	for (i = 0; i < p->source.n; i++)
		p->source.v[i] = xstrdup(cfg_getnstr(t.cfg, "source", (unsigned)i));
	conftab_copy(upkeys, NUPKEYS, &p->up, t.cfg, NULL);
	p->set = up_set(t.cfg);
	if (preset_oauth(&t)) {
		conftab_copy(okeys, NOKEYS, &p->up.oauth, preset_oauth(&t), NULL);
		p->up.oauth.present = 1;
	}
	preset_limits(t.cfg, &p->limits, &p->limits_set);
	preset_text_free(&t);
	return 0;
}

static void preset_apply(struct weir_upstream *u, const struct preset_text *t);

/* The preset named for u, applied (t keeps its text for the oauth
 * section); its errors after u's place in err. */
static void
use_preset(struct weir_upstream *u, const char *dir, const char *name, struct preset_text *t,
    const char *file, struct buf *err)
{
	struct buf perr = BUF_INIT;
	char *line, *save = NULL;

	if (preset_parse(dir, name, t, &perr) == 0) {
		preset_apply(u, t);
		return;
	}
	for (line = strtok_r(perr.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		buf_printf(err, "%s:%d: upstream \"%s\": %s\n", file, u->line, u->name, line);
	buf_free(&perr);
	preset_text_free(t);
}

void
config_preset_free(struct weir_preset *p)
{
	size_t i;

	config_upstream_free(&p->up);
	for (i = 0; i < p->source.n; i++)
		free(p->source.v[i]);
	free(p->source.v);
	free(p->limits.win);
	free(p->name);
	free(p->file);
	free(p->title);
	memset(p, 0, sizeof *p);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

ssize_t
config_preset_names(const char *dir, char ***names)
{
	struct dirent *de;
	size_t n = 0, len;
	DIR *d;

	*names = NULL;
	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		char *name;

		len = strlen(de->d_name);
		if (len <= 5 || strcmp(de->d_name + len - 5, ".conf") != 0)
			continue;
		name = xstrndup(de->d_name, len - 5);
		if (!policy_valid_name(name) || name[0] == '.') {
			free(name);
			continue;
		}
		*names = xrealloc(*names, (n + 1) * sizeof **names);
		(*names)[n++] = name;
	}
	closedir(d);
	if (n)
		qsort(*names, n, sizeof **names, name_cmp);
	return (ssize_t)n;
}

/* u's preset applied: its keys into u (the section's come after), the
 * bits of what it set, its limits. */
static void
preset_apply(struct weir_upstream *u, const struct preset_text *t)
{
	conftab_copy(upkeys, NUPKEYS, u, t->cfg, NULL);
	u->from_preset = up_set(t->cfg);
	u->preset_file = xstrdup(t->path);
	u->preset_limits = xcalloc(1, sizeof *u->preset_limits);
	preset_limits(t->cfg, u->preset_limits, &u->preset_limits_set);
}

/* pu's strings and windows copied into a new section of p, named name. */
static struct policy_upstream *
policy_section_add(struct policy *p, const char *name, const struct policy_upstream *from)
{
	struct policy_upstream *nu;

	p->up = xrealloc(p->up, (p->nup + 2) * sizeof *p->up);
	nu = &p->up[p->nup++];
	memset(&p->up[p->nup], 0, sizeof p->up[p->nup]);
	memset(nu, 0, sizeof *nu);
	if (from) {
		*nu = *from;
		nu->shared = from->shared ? xstrdup(from->shared) : NULL;
		nu->shared_secret_file = from->shared_secret_file ?
		    xstrdup(from->shared_secret_file) : NULL;
		nu->win = xcalloc(from->nwin + 1, sizeof *nu->win);
		if (from->nwin)
			memcpy(nu->win, from->win, from->nwin * sizeof *nu->win);
	} else
		nu->max_recipients = 100;	/* policy.conf's default */
	nu->name = xstrdup(name);
	return nu;
}

void
config_preset_limits(const struct weir_upstream *ups, size_t n, struct policy *p)
{
	const struct policy_upstream *pl;
	struct policy_upstream *nu, any;
	size_t i, j;
	int own, have_any;

	for (i = 0; i < n; i++) {
		pl = ups[i].preset_limits;
		if (pl == NULL || (pl->nwin == 0 && ups[i].preset_limits_set == 0))
			continue;	/* the "*" section's, as without a preset */
		own = have_any = 0;
		for (j = 0; j < p->nup; j++) {
			own |= strcmp(p->up[j].name, ups[i].name) == 0;
			if (strcmp(p->up[j].name, POLICY_ANY_UPSTREAM) == 0) {
				any = p->up[j];	/* p->up moves below */
				have_any = 1;
			}
		}
		if (own)
			continue;	/* policy.conf's own section for it */
		nu = policy_section_add(p, ups[i].name, have_any ? &any : NULL);
		if (pl->nwin) {
			free(nu->win);
			nu->win = xcalloc(pl->nwin + 1, sizeof *nu->win);
			memcpy(nu->win, pl->win, pl->nwin * sizeof *nu->win);
			nu->nwin = pl->nwin;
		}
		if (ups[i].preset_limits_set & PRESET_SET_MAX_CONNECTIONS)
			nu->max_connections = pl->max_connections;
		if (ups[i].preset_limits_set & PRESET_SET_MESSAGES_PER_CONNECTION)
			nu->messages_per_connection = pl->messages_per_connection;
		if ((ups[i].from_preset | ups[i].from_file) & up_bit("max_recipients"))
			nu->max_recipients = ups[i].max_recipients;
	}
}

const char *
config_upstream_key(size_t i)
{
	return i < NUPKEYS ? upkeys[i].name : NULL;
}

void
config_upstream_value(const struct weir_upstream *u, size_t i, struct buf *out)
{
	if (i < NUPKEYS)
		conftab_format(&upkeys[i], u, out);
}

static void
copy_upstreams(struct weir_config *c, cfg_t *cfg, const char *file, const char *text,
    struct buf *err)
{
	size_t i, n = cfg_size(cfg, "upstream");

	c->upstreams = xcalloc(n + 1, sizeof *c->upstreams);
	for (i = 0; i < n; i++) {
		cfg_t *sec = cfg_getnsec(cfg, "upstream", (unsigned)i);
		struct weir_upstream *u = &c->upstreams[i];

		struct preset_text pt;

		memset(&pt, 0, sizeof pt);
		config_upstream_defaults(u);
		u->name = xstrdup(cfg_title(sec));
		u->line = sec->line;
		if (cfg_size(sec, "preset") && cfg_getstr(sec, "preset"))
			use_preset(u, c->preset_dir, cfg_getstr(sec, "preset"), &pt, file, err);
		conftab_copy(upkeys, NUPKEYS, u, sec, NULL);
		u->from_file = up_set(sec);
		c->nupstreams++;
		copy_oauth(u, sec, pt.cfg ? preset_oauth(&pt) : NULL, file, err);
		preset_text_free(&pt);
		when_of(u);
		check_upstream(u, file, err);
	}
	check_fallbacks(c, file, text, err);
}

static void
copy_listen(struct weir_config *c, cfg_t *cfg, const char *file, struct buf *err)
{
	size_t i, n = cfg_size(cfg, "listen");
	struct buf why = BUF_INIT;
	cfg_t *sec;

	if (n == 0)
		return;
	sec = cfg_getnsec(cfg, "listen", 0);
	c->listen.present = 1;
	c->listen.line = sec->line;
	if (n > 1)
		buf_printf(err, "%s:%d: only one listen section is allowed\n", file,
		    cfg_getnsec(cfg, "listen", 1)->line);
	conftab_copy(lkeys, NLKEYS, &c->listen, sec, NULL);
	for (i = 0; i < c->listen.allow.n; i++) {
		struct cidr net;

		if (cidr_parse(c->listen.allow.v[i], &net, &why) < 0) {
			buf_printf(err, "%s:%d: listen: allow: %s\n", file, c->listen.line, why.s);
			buf_reset(&why);
		}
	}
	for (i = 0; i < c->listen.address.n; i++) {
		struct sockaddr_storage ss;
		socklen_t len;

		if (hostport_parse(c->listen.address.v[i], &ss, &len, &why) < 0) {
			buf_printf(err, "%s:%d: listen: address: %s\n", file, c->listen.line, why.s);
			buf_reset(&why);
		}
	}
	buf_free(&why);
	if ((c->listen.cert_file == NULL) != (c->listen.key_file == NULL))
		buf_printf(err, "%s:%d: listen: cert_file and key_file go together\n",
		    file, c->listen.line);
}

static void
copy_metrics(struct weir_config *c, cfg_t *cfg, const char *file, struct buf *err)
{
	struct weir_metrics *m = &c->metrics;
	struct buf why = BUF_INIT;
	struct sockaddr_storage ss;
	socklen_t len;
	size_t i, n = cfg_size(cfg, "metrics");
	cfg_t *sec;

	if (n == 0)
		return;
	sec = cfg_getnsec(cfg, "metrics", 0);
	m->present = 1;
	m->line = sec->line;
	if (n > 1)
		buf_printf(err, "%s:%d: only one metrics section is allowed\n", file,
		    cfg_getnsec(cfg, "metrics", 1)->line);
	conftab_copy(mkeys, NMKEYS, m, sec, NULL);
	if (m->address && hostport_parse(m->address, &ss, &len, &why) < 0)
		buf_printf(err, "%s:%d: metrics: address: %s\n", file, m->line, why.s);
	if (m->textfile && m->textfile[0] != '/')
		buf_printf(err, "%s:%d: metrics: textfile must be an absolute path\n", file,
		    m->line);
	if (!m->address && !m->textfile)
		buf_printf(err, "%s:%d: metrics: needs address, textfile or both\n", file,
		    m->line);
	if (m->auth_file && m->auth_file[0] != '/')
		buf_printf(err, "%s:%d: metrics: auth_file must be an absolute path\n", file,
		    m->line);
	for (i = 0; i < m->allow.n; i++) {
		struct cidr net;

		if (cidr_parse(m->allow.v[i], &net, &why) < 0) {
			buf_printf(err, "%s:%d: metrics: allow: %s\n", file, m->line, why.s);
			buf_reset(&why);
		}
	}
	buf_free(&why);
}

const struct weir_upstream *
config_upstream(const struct weir_config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nupstreams; i++)
		if (strcmp(c->upstreams[i].name, name) == 0)
			return &c->upstreams[i];
	return NULL;
}

/* Does u's senders list take sender (an empty list takes none)? */
static int
takes_sender(const struct weir_upstream *u, const char *sender)
{
	size_t j;

	for (j = 0; j < u->senders.n; j++)
		if (fnmatch(u->senders.v[j], sender, FNM_CASEFOLD) == 0)
			return 1;
	return 0;
}

const struct weir_upstream *
config_upstream_for(const struct weir_config *c, const char *sender)
{
	const struct weir_upstream *u, *any = NULL;
	size_t i;

	for (i = 0; i < c->nupstreams; i++)
		if (c->upstreams[i].recipient_domains.n == 0 &&
		    takes_sender(&c->upstreams[i], sender))
			return &c->upstreams[i];
	/* The default: not a backup relay, unless only backups are left. */
	for (i = 0; i < c->nupstreams; i++) {
		u = &c->upstreams[i];
		if (u->senders.n > 0 || u->recipient_domains.n > 0)
			continue;
		if (!u->is_fallback)
			return u;
		if (any == NULL)
			any = u;
	}
	return any;
}

const struct weir_upstream *
config_upstream_route(const struct weir_config *c, const char *sender, const char *rcpt)
{
	const char *at = rcpt ? strrchr(rcpt, '@') : NULL;
	const struct weir_upstream *u;
	size_t i, j;

	for (i = 0; at && i < c->nupstreams; i++) {
		u = &c->upstreams[i];
		if (u->senders.n > 0 && !takes_sender(u, sender))
			continue;
		for (j = 0; j < u->recipient_domains.n; j++)
			if (route_domain_match(u->recipient_domains.v[j], at + 1))
				return u;
	}
	return config_upstream_for(c, sender);
}

/* route's walk from u: append u's fallbacks not yet in out[0..*n). */
static void
route_walk(const struct weir_config *c, const struct weir_upstream *u,
    const struct weir_upstream **out, size_t max, size_t *n)
{
	const struct weir_upstream *f;
	size_t i, k;

	for (i = 0; i < u->fallback.n && *n < max; i++) {
		if ((f = config_upstream(c, u->fallback.v[i])) == NULL)
			continue;
		for (k = 0; k < *n && out[k] != f; k++)
			;
		if (k < *n)
			continue;
		out[(*n)++] = f;
		route_walk(c, f, out, max, n);
	}
}

size_t
config_route(const struct weir_config *c, const struct weir_upstream *primary,
    const struct weir_upstream **out, size_t max)
{
	size_t n = 0;

	if (max == 0 || primary == NULL)
		return 0;
	out[n++] = primary;
	route_walk(c, primary, out, max, &n);
	return n;
}

/* Which file: -c's, else $WEIR_CONFIG (trusted environment only), else
 * the default, which alone may be missing (*explicit 0). */
static const char *
config_path(const char *cfile, int *explicit)
{
	const char *env;

	*explicit = 1;
	if (cfile)
		return cfile;
	if (!config_untrusted_env() && (env = getenv("WEIR_CONFIG")) && *env)
		return env;
	*explicit = 0;
	return SYSCONFDIR "/weir.conf";
}

/*
 * showq_socket when the file does not set it: one socket per queue, so
 * that two weirs on one host (a second queue, a test beside the
 * production relay) never share one (the second weir-showq would find it
 * taken).  The default queue has SHOWQ_DIR "showq.sock"; any other
 * SHOWQ_DIR "showq.HASH.sock", HASH the 64-bit FNV-1a of the queue_dir
 * string in hex: what mailq computes from the same file and queue.
 */
static char *
showq_default(const char *queue_dir)
{
	uint64_t h = 14695981039346656037ULL;
	const unsigned char *p;

	if (strcmp(queue_dir, QUEUE_DIR_DEFAULT) == 0)
		return xstrdup(SHOWQ_DIR "showq.sock");
	for (p = (const unsigned char *)queue_dir; *p; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	return xasprintf(SHOWQ_DIR "showq.%016llx.sock", (unsigned long long)h);
}

/* After the file: the listen and metrics lists it left unset,
 * $WEIR_QUEUE, and showq_socket unless the file set it (showq_set). */
static void
computed_defaults(struct weir_config *c, int showq_set)
{
	const char *env;

	listen_defaults(&c->listen);
	metrics_defaults(&c->metrics);
	if (!config_untrusted_env() && (env = getenv("WEIR_QUEUE")) && *env) {
		free(c->queue_dir);
		c->queue_dir = xstrdup(env);
	}
	if (!showq_set) {
		free(c->showq_socket);
		c->showq_socket = showq_default(c->queue_dir);
	}
}

/* config_load(), on the file's text when the caller read it already
 * (text), else reading it. */
static int
load(struct weir_config *c, const char *cfile, const struct buf *text, struct buf *err)
{
	cfg_opt_t opts[NKEYS + 4], upopts[NUPKEYS + 2], lopts[NLKEYS + 1], mopts[NMKEYS + 1];
	cfg_opt_t oopts[NOKEYS + 1];
	const char *path;
	int explicit, rc = -1, showq_set = 0;
	size_t i, errlen0 = err->len;
	cfg_t *cfg = NULL;
	struct stat st;
	struct buf own = BUF_INIT;	/* the file's text, for keys' lines */

	set_defaults(c);
	path = config_path(cfile, &explicit);
	conftab_opts(okeys, NOKEYS, oopts);
	conftab_opts(upkeys, NUPKEYS, upopts);
	upopts[NUPKEYS] = (cfg_opt_t)CFG_SEC("oauth", oopts, CFGF_MULTI);
	upopts[NUPKEYS + 1] = (cfg_opt_t)CFG_END();
	conftab_opts(keys, NKEYS, opts);
	opts[NKEYS] = (cfg_opt_t)CFG_SEC("upstream", upopts,
	    CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES);
	conftab_opts(lkeys, NLKEYS, lopts);
	opts[NKEYS + 1] = (cfg_opt_t)CFG_SEC("listen", lopts, CFGF_MULTI);
	conftab_opts(mkeys, NMKEYS, mopts);
	opts[NKEYS + 2] = (cfg_opt_t)CFG_SEC("metrics", mopts, CFGF_MULTI);
	opts[NKEYS + 3] = (cfg_opt_t)CFG_END();

	if (stat(path, &st) < 0 && errno == ENOENT && !explicit)
		goto env_override;	/* no file: every default */
	cfg = cfg_init(opts, CFGF_NONE);
	if (cfg == NULL) {
		buf_printf(err, "%s: cannot initialise the config parser\n", path);
		return -1;
	}
	for (i = 0; i < NKEYS; i++)
		cfg_set_validate_func(cfg, keys[i].name, validate);
	for (i = 0; i < NUPKEYS; i++) {
		char name[64];

		snprintf(name, sizeof name, "upstream|%s", upkeys[i].name);
		cfg_set_validate_func(cfg, name, validate_up);
	}
	for (i = 0; i < NOKEYS; i++) {
		char name[64];

		snprintf(name, sizeof name, "upstream|oauth|%s", okeys[i].name);
		cfg_set_validate_func(cfg, name, validate_oauth);
	}
	for (i = 0; i < NLKEYS; i++) {
		char name[64];

		snprintf(name, sizeof name, "listen|%s", lkeys[i].name);
		cfg_set_validate_func(cfg, name, validate_listen);
	}
	for (i = 0; i < NMKEYS; i++) {
		char name[64];

		snprintf(name, sizeof name, "metrics|%s", mkeys[i].name);
		cfg_set_validate_func(cfg, name, validate_metrics);
	}
	if (text == NULL) {
		if (confparse_read(path, &own, err) < 0)
			goto out;
		text = &own;
	}
	if (confparse_text(cfg, path, text, err) < 0)
		goto out;
	conftab_copy(keys, NKEYS, c, cfg, NULL);
	showq_set = cfg_size(cfg, "showq_socket") > 0 && cfg_getstr(cfg, "showq_socket") != NULL;
	if ((c->send_user == NULL) != (c->queue_group == NULL))
		buf_printf(err, "%s: send_user and queue_group go together (the queue's "
		    "owner and the queue writer's group): set both or neither\n", path);
	if (c->gate_status_socket && strcmp(c->gate_status_socket, c->gate_socket) == 0)
		buf_printf(err, "%s: gate_status_socket must differ from gate_socket (it "
		    "answers anyone, and only STATUS)\n", path);
	copy_upstreams(c, cfg, path, text->s, err);
	copy_listen(c, cfg, path, err);
	copy_metrics(c, cfg, path, err);
	c->file = xstrdup(path);
	if (err->len > errlen0)
		goto out;
env_override:
	computed_defaults(c, showq_set);
	log_set_level(c->log_level == 1 ? LOG_VERBOSE : LOG_NORMAL);
	rc = 0;
out:
	if (cfg)
		cfg_free(cfg);
	buf_free(&own);
	return rc;
}

/*
 * The injectors' load (config.h).  When the file does not load as a
 * whole, each top-level key is looked for on a line of its own,
 * `key = "value"` or `key = value`, comments already blanked, and read
 * strictly by its table entry.  The keys that say where the queue is
 * (queue_dir, queue_split) must then be readable: a line for one of them
 * that does not read, or one inside braces (a section, or after a brace
 * left open), refuses, since the queue could be elsewhere.  Every other
 * key keeps its default when its line does not read; sections are left
 * out (no upstream, listen at its defaults).
 */
static int
where_queue_is(const char *name)
{
	return strcmp(name, "queue_dir") == 0 || strcmp(name, "queue_split") == 0;
}

/* One line: "key = value" with nothing after.  0 and the key and value
 * (unquoted) in k and v; -1 the line has no such shape. */
static int
salvage_line(const char *s, size_t n, struct buf *k, struct buf *v)
{
	size_t i = 0;

	buf_reset(k);
	buf_reset(v);
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
		buf_addc(k, s[i++]);
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (k->len == 0 || i == n || s[i++] != '=')
		return -1;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i < n && s[i] == '"') {
		for (i++; i < n && s[i] != '"'; i++) {
			if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\'))
				i++;
			else if (s[i] == '\\')
				return -1;	/* other escapes: not read here */
			buf_addc(v, s[i]);
		}
		if (i == n)
			return -1;
		i++;
	} else {
		while (i < n && !strchr(" \t\r{}=,\"'", s[i]))
			buf_addc(v, s[i++]);
		if (v->len == 0)
			return -1;
	}
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	return i == n ? 0 : -1;
}

/* *showq_set: a showq_socket line was read. */
static int
salvage(struct weir_config *c, const char *path, const struct buf *t, struct buf *err,
    int *showq_set)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	const struct conftab_key *key;
	const char *text = t->s ? t->s : "";
	size_t pos = 0, end, i;
	int line = 0, depth = 0, rc = 0, quote = 0, shaped;

	while (pos < t->len && rc == 0) {
		end = pos;
		while (end < t->len && text[end] != '\n')
			end++;
		line++;
		shaped = salvage_line(text + pos, end - pos, &k, &v) == 0;
		key = shaped ? conftab_find(keys, NKEYS, buf_cstr(&k)) : NULL;
		if (key) {
			if (where_queue_is(key->name) && depth != 0) {
				buf_printf(err, "%s:%d: %s inside braces, in a file that does "
				    "not load: where the queue is is unclear\n", path, line, key->name);
				rc = -1;
			} else if (depth == 0 && conftab_set(key, buf_cstr(&v), c, str_rule) < 0) {
				if (where_queue_is(key->name)) {
					buf_printf(err, "%s:%d: %s = \"%s\" is not a valid value: "
					    "where the queue is is unknown\n", path, line, key->name,
					    buf_cstr(&v));
					rc = -1;
				}
			} else if (depth == 0 && strcmp(key->name, "showq_socket") == 0)
				*showq_set = 1;
		} else if (!shaped) {
			/* Not one key on its line: a queue key in it cannot be read. */
			for (i = 0; i < NKEYS && rc == 0; i++)
				if (where_queue_is(keys[i].name) &&
				    memmem(text + pos, end - pos, keys[i].name,
				    strlen(keys[i].name)) != NULL) {
					buf_printf(err, "%s:%d: a %s line that cannot be read: where "
					    "the queue is is unknown\n", path, line, keys[i].name);
					rc = -1;
				}
		}
		for (i = pos; i < end; i++) {
			if (text[i] == '"' && (i == pos || text[i - 1] != '\\'))
				quote = !quote;
			else if (!quote && text[i] == '{')
				depth++;
			else if (!quote && text[i] == '}' && depth > 0)
				depth--;
		}
		pos = end + 1;
	}
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int
config_load_inject(struct weir_config *c, const char *cfile, struct buf *warn,
    struct buf *err)
{
	struct buf text = BUF_INIT;
	const char *path;
	struct stat st;
	int explicit, rc = 1, showq_set = 0;

	/* One read of the file, for both tries: what is salvaged is what
	 * did not load, and a file that cannot be read is refused. */
	path = config_path(cfile, &explicit);
	if (!explicit && stat(path, &st) < 0 && errno == ENOENT)
		return config_load(c, cfile, err) == 0 ? 0 : -1;	/* defaults */
	if (confparse_read(path, &text, err) < 0) {
		set_defaults(c);
		config_free(c);
		return -1;
	}
	if (load(c, cfile, &text, warn) == 0) {
		rc = 0;
		goto out;
	}
	config_free(c);
	set_defaults(c);
	if (salvage(c, path, &text, err, &showq_set) < 0) {
		config_free(c);
		rc = -1;
		goto out;
	}
	c->file = xstrdup(path);
	computed_defaults(c, showq_set);
out:
	buf_free(&text);
	return rc;
}

void
config_inject_warning(const struct buf *warn, struct buf *line)
{
	const char *s = warn->s ? warn->s : "", *nl = strchr(s, '\n');
	size_t more = 0, i;

	for (i = 0; i < warn->len; i++)
		more += warn->s[i] == '\n';
	if (more > 0)
		more--;		/* the first line is said */
	buf_printf(line, "%.*s", (int)(nl ? (size_t)(nl - s) : strlen(s)), s);
	if (more)
		buf_printf(line, " (and %zu more error%s)", more, more > 1 ? "s" : "");
	buf_adds(line, "; mail is still queued (only the queue's place is needed), "
	    "but fix the file: weir run refuses it");
}

int
config_load(struct weir_config *c, const char *cfile, struct buf *err)
{
	return load(c, cfile, NULL, err);
}

void
config_free(struct weir_config *c)
{
	size_t i;

	conftab_free(keys, NKEYS, c);
	conftab_free(lkeys, NLKEYS, &c->listen);
	conftab_free(mkeys, NMKEYS, &c->metrics);
	for (i = 0; i < c->nupstreams; i++)
		config_upstream_free(&c->upstreams[i]);
	free(c->upstreams);
	c->upstreams = NULL;
	c->nupstreams = 0;
	free(c->file);
	c->file = NULL;
}
