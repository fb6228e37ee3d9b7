/*
 * config.h: weir.conf, loaded once at start-up into a typed struct.  Each
 * key is declared once, with its default, in the table in config.c; no
 * other file calls libconfuse.
 *
 * Which file: -c FILE, else $WEIR_CONFIG, else SYSCONFDIR/weir.conf (which
 * may be absent: then every key has its default).  $WEIR_QUEUE overrides
 * queue_dir.  In a set-id process (AT_SECURE) the environment is ignored.
 *
 * Sections: upstream "NAME" { ... } (any number, unique names): where
 * weir-remote sends mail; see struct weir_upstream for the keys; inside
 * it, oauth { ... } (at most one): see struct weir_oauth.
 * listen { ... } (at most one): weir-smtpd's addresses, relay networks and
 * limits; see struct weir_listen.
 * metrics { ... } (at most one): weir-metrics; see struct weir_metrics.
 */
#ifndef WEIR_CONFIG_H
#define WEIR_CONFIG_H

#include <sys/types.h>

#include "lib/buf.h"
#include "mail/policy.h"
#include "mail/route.h"

struct strlist {
	char **v;
	size_t n;
};

enum upstream_tls {
	UP_TLS_STARTTLS,	/* "starttls": mandatory STARTTLS (default) */
	UP_TLS_SMTPS,		/* "smtps": implicit TLS */
	UP_TLS_NONE,		/* "none": plain text, loopback peers only */
};

/* upstream "NAME" { oauth { ... } }: the SASL token (XOAUTH2,
 * OAUTHBEARER) obtained and refreshed by weir itself (mail/oauth.h).
 * The defaults that depend on the provider and the upstream's name are
 * filled in by config_load(), so every field below is resolved. */
enum oauth_provider { OAUTH_MICROSOFT, OAUTH_GOOGLE, OAUTH_GENERIC };
enum oauth_flow { OAUTH_FLOW_DEVICE, OAUTH_FLOW_CODE, OAUTH_FLOW_CLIENT, OAUTH_FLOW_SERVICE };
/* The flows with no user and no refresh token: the application's own
 * credentials get each access token (mail/oauth.h). */
#define OAUTH_APP_ONLY(o) ((o)->flow == OAUTH_FLOW_CLIENT || (o)->flow == OAUTH_FLOW_SERVICE)

struct weir_oauth {
	int present;		/* the section is in the upstream's */
	int line;		/* where it ends */
	int provider;		/* provider: enum oauth_provider (required) */
	int flow;		/* flow: the grant (enum oauth_flow) */
	char *tenant;		/* tenant: Microsoft's ("organizations"); else NULL */
	char *client_id;	/* client_id (required) */
	char *client_secret_file; /* client_secret_file: 0600; NULL: a public client */
	char *certificate_file;	/* certificate_file: client_credentials' certificate (PEM) */
	char *private_key_file;	/* private_key_file: its private key (PEM, 0600) */
	char *key_file;		/* key_file: service_account's JSON key (0600) */
	char *proxy;		/* proxy: "http://host:port" for the endpoints; NULL: none */
	char *proxy_auth_file;	/* proxy_auth_file: "user:password" for it (0600) */
	char *scope;		/* scope: the provider's SMTP scope by default */
	char *device_endpoint;	/* device_endpoint: RFC 8628 (flow device) */
	char *authorize_endpoint; /* authorize_endpoint (flow code) */
	char *token_endpoint;	/* token_endpoint */
	char *ca_file;		/* ca_file: CAs for the endpoints; NULL: the system's */
	char *token_file;	/* token_file: /var/lib/weir/oauth/NAME by default */
	long long refresh_margin; /* refresh_margin: refresh with less left (10m) */
	long long refresh_idle;	/* refresh_idle: refresh a token unused this long (1d) */
	long long timeout;	/* timeout: one HTTPS exchange (30s) */
};

/* upstream "NAME" { ... }: one relay weir-remote may send through. */
struct weir_upstream {
	char *name;		/* the section's title */
	int line;		/* where the section ends (its closing brace) */
	char *host;		/* host: name or address; NULL: the caller's host */
	unsigned port;		/* port; 0: 587, 465 or 25 by tls */
	int tls;		/* tls: enum upstream_tls */
	int verify;		/* verify: check chain and host name (true) */
	char *ca_file;		/* ca_file; NULL: the system store */
	char *fingerprint;	/* fingerprint: SHA-256 of the certificate, hex */
	char *username;		/* username; NULL: no AUTH */
	char *secret_file;	/* secret_file: mode 0600 or stricter */
	char *secret_command;	/* secret_command: stdout is the secret */
	struct strlist mechanisms; /* mechanisms: SASL preference order */
	struct strlist senders;	/* senders: globs; empty: the default upstream */
	unsigned max_recipients; /* max_recipients per transaction (100) */
	/* Sender rewriting at delivery (mail/rewrite.h). */
	struct strlist rewrite_sender;	/* rewrite_sender: "PATTERN ADDRESS" entries */
	char *rewrite_default;		/* rewrite_default; NULL: none */
	struct strlist rewrite_domains;	/* rewrite_domains: accepted as they are */
	int rewrite_header_from;	/* rewrite_header_from: the From: address too (false) */
	/* Timeouts, seconds (RFC 5321 4.5.3.2 defaults). */
	long long timeout_connect;	/* timeout_connect (1m) */
	long long timeout_banner;	/* timeout_banner (5m) */
	long long timeout_command;	/* timeout_command: EHLO, STARTTLS, TLS, AUTH, QUIT (5m) */
	long long timeout_mail;		/* timeout_mail (5m) */
	long long timeout_rcpt;		/* timeout_rcpt (5m) */
	long long timeout_data_init;	/* timeout_data_init (2m) */
	long long timeout_data_block;	/* timeout_data_block (3m) */
	long long timeout_data_end;	/* timeout_data_end (10m) */
	long long session_idle;		/* session_idle: kept session's idle end (30s); 0: none */
	struct weir_oauth oauth;	/* oauth { }: the token instead of a secret */
	/* Routing (mail/route.h): the recipient domains it takes, its
	 * backup relays in order, and what sends mail to them. */
	struct strlist recipient_domains; /* recipient_domains: "gmail.com", "*.example.com" */
	struct strlist fallback;	/* fallback: other sections' names, in order */
	struct strlist fallback_when;	/* fallback_when: the conditions as written */
	struct route_when when;		/* those parsed; the defaults with fallback; none without */
	struct strlist reply_rules;	/* reply_rules: "CLASS: PATTERN" (mail/replyclass.h) */
	int is_fallback;		/* some section's fallback names it */
	/* Provider presets (mail/config.c, "Presets"): the preset named
	 * (preset), its file, which keys it set and which this section set
	 * (bit i: config_upstream_key(i)), and its limits for weir-gate
	 * (NULL: none, or no preset). */
	char *preset;			/* preset: a file's name in preset_dir */
	char *preset_file;		/* that file */
	unsigned long long from_preset, from_file;
	struct policy_upstream *preset_limits;
	unsigned preset_limits_set;	/* PRESET_SET_* of preset_limits */
};

/* Which limits a preset sets beside its windows. */
#define PRESET_SET_MAX_CONNECTIONS	1u
#define PRESET_SET_MESSAGES_PER_CONNECTION 2u

/* listen { ... }: weir-smtpd.  Without the section every key has its
 * default and present is 0 (then `weir run` does not start weir-smtpd). */
struct weir_listen {
	int present;		/* the section is in the file */
	int line;		/* where the section ends */
	struct strlist address;	/* address: "IPv4:port" or "[IPv6]:port" */
	struct strlist allow;	/* allow: CIDR networks that may relay */
	unsigned max_size;	/* max_size: bytes of message (25 MB) */
	unsigned max_recipients; /* max_recipients per message (100) */
	unsigned max_errors;	/* max_errors per session (10) */
	unsigned max_connections; /* max_connections at once, listener mode (40) */
	unsigned max_per_client; /* max_per_client: connections per address (10) */
	long long timeout;	/* timeout: a whole command line, and DATA (5m) */
	unsigned min_data_rate;	/* min_data_rate: bytes/s that extend DATA's time (500) */
	unsigned junk_command_limit; /* junk_command_limit per session (100) */
	long long greet_pause;	/* greet_pause before the greeting (1s) */
	int greet_pause_loopback; /* greet_pause_loopback: pause for loopback too (false) */
	char *cert_file;	/* cert_file: PEM chain for STARTTLS; NULL: no TLS */
	char *key_file;		/* key_file: its private key */
	char *password_file;	/* password_file: AUTH users; NULL: no AUTH */
};

/* metrics { ... }: weir-metrics (Prometheus).  Without the section,
 * present is 0 and `weir run` does not start weir-metrics. */
struct weir_metrics {
	int present;		/* the section is in the file */
	int line;		/* where the section ends */
	char *address;		/* address: "IPv4:port" or "[IPv6]:port"; NULL: no HTTP */
	char *textfile;		/* textfile: node_exporter file to rewrite; NULL: none */
	long long interval;	/* interval: seconds between textfile writes (15s) */
	char *user;		/* user: weir-metrics becomes it (root only); NULL: stay */
	struct strlist allow;	/* allow: CIDR networks that may connect (loopback) */
	char *auth_file;	/* auth_file: basic authentication users; NULL: none */
};

struct weir_config {
	char *file;		/* the file read, or NULL: defaults only */
	char *queue_dir;	/* queue_dir */
	unsigned queue_split;	/* queue_split: qmail's conf-split */
	char *hostname;		/* hostname: default host for bare names */
	char *admin;		/* admin: local recipients, double bounces */
	char *aliases_file;	/* aliases_file: local recipients first */
	char *policy_file;	/* policy_file: weir-gate's windows and caps */
	char *gate_socket;	/* gate_socket: weir-gate's local socket */
	char *gate_status_socket; /* gate_status_socket: its read-only one; NULL: none */
	char *gate_journal;	/* gate_journal: weir-gate's send history */
	char *showq_socket;	/* showq_socket: weir-showq's public socket; NULL: off */
	char *queue_socket;	/* queue_socket: weir-queued's socket; NULL: none */
	long long inject_timeout; /* inject_timeout, seconds */
	unsigned concurrency;	/* concurrency: deliveries at once per upstream */
	long long queue_lifetime; /* queue_lifetime, seconds */
	long long delay_warning; /* delay_warning, seconds; 0: none */
	unsigned retry_skip;	/* retry_skip: qmail's chanskip */
	/* Accounts (NULL: unset, stay as started; see lib/privdrop.h). */
	char *gate_user;	/* gate_user: weir-gate becomes it */
	char *send_user;	/* send_user: weir-send becomes it; owns the queue */
	char *smtpd_user;	/* smtpd_user: weir-smtpd becomes it */
	char *queue_group;	/* queue_group: weir-queue's set-group-id group */
	char *queued_user;	/* queued_user: weir-queued becomes it */
	char *preset_dir;	/* preset_dir: the provider presets (DATADIR/providers) */
	int log_level;		/* log_level: 0 normal, 1 verbose (lib/log.h) */
	struct weir_upstream *upstreams; /* upstream sections, in file order */
	size_t nupstreams;
	struct weir_listen listen; /* listen section */
	struct weir_metrics metrics; /* metrics section */
};

/* The i-th key name (top level, upstream, listen, metrics, then an
 * upstream's oauth), NULL past the last: for the check that every key is
 * documented. */
const char *config_key_name(size_t i);

/* Is this a set-id process whose environment must not be trusted? */
int config_untrusted_env(void);

/* Load the config.  cfile is -c's argument or NULL.  0 ok; -1 with every
 * error, "file:line: what", in err. */
int config_load(struct weir_config *c, const char *cfile, struct buf *err);
void config_free(struct weir_config *c);

/* For the injectors (sendmail, mailq, weir-queue, weir-smtpd), which need
 * only where the queue is: config_load(), and when the file does not
 * load, the top-level keys still readable on lines of their own (config.c
 * says how), every other key at its default, no upstream, listen at its
 * defaults.  0 loaded whole; 1 loaded so, with the file's errors in warn
 * (say them once and go on); -1 the queue's place is unknown (the file
 * cannot be read, or queue_dir or queue_split cannot), the reason in err. */
int config_load_inject(struct weir_config *c, const char *cfile, struct buf *warn,
    struct buf *err);
/* The one warning line to say for config_load_inject()'s 1, into line.
 * A program that said it sets $WEIR_CONFIG_WARNED=1 for the weir-queue it
 * runs, which then says nothing more. */
void config_inject_warning(const struct buf *warn, struct buf *line);

/* The upstream called name, or NULL. */
const struct weir_upstream *config_upstream(const struct weir_config *c, const char *name);
/* The upstream for this envelope sender: of the sections without
 * recipient_domains, the first whose senders glob matches
 * (case-insensitive), else the first without senders that is no
 * section's fallback, else the first without senders; NULL: none. */
const struct weir_upstream *config_upstream_for(const struct weir_config *c,
    const char *sender);
/* The upstream of one recipient (its primary): the first section whose
 * recipient_domains take the recipient's domain (and whose senders, if it
 * has any, match the sender), else config_upstream_for(sender). */
const struct weir_upstream *config_upstream_route(const struct weir_config *c,
    const char *sender, const char *rcpt);
/* The route of primary: it, then its fallbacks in order, each followed by
 * its own (depth first, each once), into out[0..max): how many.  max
 * c->nupstreams is always enough. */
size_t config_route(const struct weir_config *c, const struct weir_upstream *primary,
    const struct weir_upstream **out, size_t max);
/*
 * Provider presets: one file per provider in preset_dir, NAME.conf,
 * with the upstream keys of its relay (host, port, tls, mechanisms,
 * max_recipients, timeouts), an oauth section naming the provider weir
 * knows (provider, flow, tenant, scope), the provider's limits for
 * weir-gate (rate, in policy.conf's one-line form, max_connections,
 * messages_per_connection) and what they come from (title, source).
 * An upstream section with preset = "NAME" takes them; every key the
 * section sets itself wins.  The preset's oauth keys apply only when the
 * section has an oauth section of its own (then its mechanisms, meant
 * for a password, do not).
 */
struct weir_preset {
	char *name;		/* NAME */
	char *file;		/* preset_dir/NAME.conf */
	char *title;		/* title: the provider and the relay, for people */
	struct strlist source;	/* source: each document, with its date */
	struct weir_upstream up; /* its upstream keys over the defaults; up.oauth.provider
				    its provider (-1 none) */
	unsigned long long set;	/* which upstream keys it sets (config_upstream_key) */
	struct policy_upstream limits; /* rate, max_connections, messages_per_connection */
	unsigned limits_set;	/* PRESET_SET_* */
};
/* Load preset_dir/name.conf into p.  0 ok; -1 with every error in err
 * ("file:line: what", or the name's problem). */
int config_preset_load(const char *dir, const char *name, struct weir_preset *p,
    struct buf *err);
void config_preset_free(struct weir_preset *p);
/* The presets' names in dir, sorted, into *names (free each and the
 * array): how many; -1 the folder cannot be read (errno). */
ssize_t config_preset_names(const char *dir, char ***names);
/* The limits the presets of c's upstreams give weir-gate, into p (just
 * loaded from policy_file): for each upstream with a preset whose limits
 * say something and without a section of its own name in p, a section
 * of that name: the "*" section's keys, with the preset's windows (when
 * it has any), max_connections, messages_per_connection and the
 * upstream's max_recipients in their place. */
void config_preset_limits(const struct weir_upstream *ups, size_t n, struct policy *p);

/* The upstream section's keys, for the effective values (weir
 * check-config): the i-th key's name (NULL past the last), and its value
 * in u as the file would write it, into out. */
const char *config_upstream_key(size_t i);
void config_upstream_value(const struct weir_upstream *u, size_t i, struct buf *out);

/* Default values for an upstream with no section (weir-remote without
 * config): every key at its default. */
void config_upstream_defaults(struct weir_upstream *u);
void config_upstream_free(struct weir_upstream *u);

#endif
