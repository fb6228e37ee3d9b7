/*
 * checkconfig.c: `weir [-c FILE] check-config`: load weir.conf and its
 * policy_file with the real parsers (mail/config.c, mail/policy.c) and
 * print every error, then check what neither parser can see alone:
 *
 *   - every upstream of weir.conf has a section in the policy (weir-gate
 *     refuses requests for one without), and its name can travel in the
 *     gate protocol; a policy section no upstream uses is a warning;
 *   - secret_file passes weir-remote's rule (mail/secretfile.h: the same
 *     function, not a copy), ca_file is a readable file;
 *   - an oauth section: client_secret_file passes the same rule and
 *     belongs to the deliverer; the token state (mail/oauth.h) is there
 *     (else: run weir auth login NAME), in a folder the deliverer owns,
 *     the deliverer's and 0600; its status does not say the provider
 *     refuses the refresh token or that the last refresh failed (a
 *     warning: an upstream that needs a login, no token yet included,
 *     needs attention, its configuration is not broken);
 *   - admin is a fully qualified address that is not local to this host
 *     (local recipients are rewritten to it), hostname is a sane domain
 *     name; the queue exists;
 *   - backup relays (mail/route.h; config.c refused loops, unknown and
 *     repeated names): each fallback has a section of its own in the
 *     policy (an error: "*" is no backup's limits), and each one's sender
 *     rewriting turns the senders its section's mail carries (the
 *     domains that section rewrites into, its account's, those its
 *     senders patterns name) into senders of its own accepted domains (a
 *     warning: the provider would refuse the others); fallback_when
 *     without fallback (a warning);
 *   - sender rewriting (warnings): a rewrite_sender or rewrite_default
 *     address local to this host, a local domain in rewrite_domains,
 *     rewrite_header_from or rewrite_domains that do nothing, and an
 *     upstream whose username is an address but that rewrites no sender;
 *   - the accounts of gate_user, send_user, smtpd_user and queue_group
 *     exist (a daemon told to become a missing user does not start);
 *   - what the programs need at run time: the deliverer's user (the
 *     owner of a set-user-id weir-remote, else send_user) owns each
 *     secret_file, or it could not read it (a chown hint); the folders
 *     of gate_socket and gate_journal have the owners and modes of
 *     mail/rundir.c (a missing one is fine if weir run can make it), and
 *     those of showq_socket and gate_status_socket are there or can be
 *     made (the showq one open to others' search: a warning); the
 *     queue's folders have the owners and modes of mail/queue.c's table
 *     (with send_user set); metrics.auth_file is a password file
 *     (lib/pwfile.h) of mode 0600 that metrics.user owns.
 *
 * With --reply "REPLY", what that reply of an upstream means, and why,
 * for each upstream (replycheck.c) instead of the checks.
 *
 * Every finding is one line on standard output, "FILE:LINE: what" for an
 * error and "FILE:LINE: warning: what" for a warning (without LINE when
 * the key is not in the file: a default), then a summary line.  Exit 0
 * when there is no error (warnings allowed: an upstream that needs
 * attention, a login, is one, and weir starts and serves the others), 1
 * when there is one (a broken configuration: do not start).
 *
 * libconfuse keeps no line for a key, only for a section's end: the line
 * of a key is found by looking for "key =" at the start of a line (at
 * the top level, or between "upstream "NAME"" and the section's end);
 * when that fails (a default, or several keys on one line) the section's
 * line, or the file alone, is given.
 *
 * Trusts: nothing in the files it checks.  Config keys: all of them.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/io.h"
#include "lib/log.h"
#include "lib/pwfile.h"
#include "lib/timefmt.h"
#include "mail/config.h"
#include "mail/confparse.h"
#include "mail/libexec.h"
#include "mail/oauth.h"
#include "mail/policy.h"
#include "mail/qcheck.h"
#include "mail/rewrite.h"
#include "mail/rundir.h"
#include "mail/secretfile.h"
#include "weir/weir.h"

struct check {
	const char *cfile;	/* weir.conf as named, or NULL: defaults only */
	int have_deliverer;	/* deliverer_uid is known */
	uid_t deliverer_uid;	/* the user weir-remote runs as */
	char deliverer[64];	/* its name, for the hint */
	struct buf text;	/* weir.conf's bytes, for key lines */
	int errors, warnings;
	struct buf *out;	/* NULL: findings on stdout; else the errors only,
				 * a line each (check_config_refusals) */
};

static void PRINTFLIKE(4, 5)
finding(struct check *k, int warn, const char *where, const char *fmt, ...)
{
	va_list ap;
	char what[2048];

	if (warn)
		k->warnings++;
	else
		k->errors++;
	if (k->out && warn)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (k->out)
		buf_printf(k->out, "%s: %s\n", where, what);
	else
		printf("%s: %s%s\n", where, warn ? "warning: " : "", what);
}

/* Each line of a parser's error text ("file:line: what\n" ...). */
static void
parser_errors(struct check *k, const struct buf *err)
{
	const char *p = err->s, *nl;

	while (p && *p) {
		nl = strchr(p, '\n');
		printf("%.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
		k->errors++;
		p = nl ? nl + 1 : NULL;
	}
}

/* The line of key in weir.conf (mail/confparse.h); 0 when not found. */
static int
find_line(const struct check *k, const char *section, const char *key, int last)
{
	return confparse_key_line(k->text.s, section, key, NULL, last);
}

/* "weir.conf:12" for a top-level key set in the file, else "weir.conf". */
static void
key_where(struct check *k, const char *key, char *out, size_t max)
{
	const char *file = k->cfile ? k->cfile : "(defaults)";
	int line = find_line(k, NULL, key, 0);

	if (line)
		snprintf(out, max, "%s:%d", file, line);
	else
		snprintf(out, max, "%s", file);
}

/* "weir.conf:12" for key (NULL: the section itself) in upstream u; the
 * section's closing line if not found. */
static void
up_where(struct check *k, const struct weir_upstream *u, const char *key, char *out,
    size_t max)
{
	int line = find_line(k, u->name, key, u->line);

	snprintf(out, max, "%s:%d", k->cfile, line ? line : u->line);
}

/* RFC 1035 host name: labels of letters, digits and hyphens, 1 to 63
 * bytes, not starting or ending with a hyphen; at most 253 bytes.  NULL
 * when sane, else why not. */
static const char *
hostname_problem(const char *h)
{
	size_t n = strlen(h), lab = 0, i;

	if (n == 0 || n > 253)
		return "must be 1 to 253 bytes";
	for (i = 0; i <= n; i++) {
		char c = h[i];

		if (c == '.' || c == '\0') {
			if (lab == 0)
				return "has an empty label";
			if (h[i - 1] == '-')
				return "has a label ending in '-'";
			lab = 0;
			continue;
		}
		if (!isalnum((unsigned char)c) && c != '-')
			return "may hold only letters, digits, '-' and '.'";
		if (lab == 0 && c == '-')
			return "has a label starting with '-'";
		if (++lab > 63)
			return "has a label over 63 bytes";
	}
	return NULL;
}

static void
check_hostname(struct check *k, const struct weir_config *c)
{
	char where[512];
	const char *why;

	key_where(k, "hostname", where, sizeof where);
	if ((why = hostname_problem(c->hostname)) != NULL)
		finding(k, 0, where, "hostname \"%s\" %s", c->hostname, why);
	else if (strchr(c->hostname, '.') == NULL)
		finding(k, 1, where, "hostname \"%s\" is not fully qualified (mail.example.org): "
		    "it names this host in EHLO and makes bare addresses user@%s",
		    c->hostname, c->hostname);
}

/* Local to this host, as weir-send decides: no domain, localhost or
 * our host name. */
static int
domain_is_local(const char *d, const struct weir_config *c)
{
	return strcasecmp(d, "localhost") == 0 || strcasecmp(d, c->hostname) == 0;
}

static void
check_admin(struct check *k, const struct weir_config *c)
{
	const char *at = strrchr(c->admin, '@');
	char where[512];

	key_where(k, "admin", where, sizeof where);
	if (at == NULL || at == c->admin || at[1] == '\0' || strchr(at + 1, '.') == NULL ||
	    hostname_problem(at + 1) != NULL)
		finding(k, 1, where, "admin = \"%s\" is not a fully qualified address "
		    "(postmaster@example.org): local recipients and failed bounces are "
		    "rewritten to it and sent to the upstream", c->admin);
	else if (domain_is_local(at + 1, c))
		finding(k, 1, where, "admin = \"%s\" is local to this host (hostname \"%s\"): "
		    "local recipients are rewritten to it, so it must be an address "
		    "elsewhere", c->admin, c->hostname);
}

static void
check_queue(struct check *k, const struct weir_config *c)
{
	char where[512], *trig;
	struct stat st;

	key_where(k, "queue_dir", where, sizeof where);
	if (stat(c->queue_dir, &st) < 0) {
		finding(k, 1, where, "queue_dir %s: %s (weir queue-init makes it)", c->queue_dir,
		    strerror(errno));
		return;
	}
	/* A caller that may not look in lock/ (root without
	 * CAP_DAC_OVERRIDE, under weir.service) learns nothing here: weir
	 * queue-check looks as the queue's owner. */
	trig = xasprintf("%s/lock/trigger", c->queue_dir);
	if (stat(trig, &st) < 0 ? errno == ENOENT : !S_ISFIFO(st.st_mode))
		finding(k, 1, where, "queue_dir %s: no lock/trigger FIFO: not a queue yet "
		    "(weir queue-init makes it)", c->queue_dir);
	free(trig);
}

/* The accounts the daemons become: a missing one stops its daemon. */
static void
check_accounts(struct check *k, const struct weir_config *c)
{
	const struct {
		const char *key, *name, *who;
	} users[] = {
		{ "gate_user", c->gate_user, "weir-gate" },
		{ "send_user", c->send_user, "weir-send" },
		{ "smtpd_user", c->smtpd_user, "weir-smtpd" },
	};
	char where[512];
	size_t i;

	for (i = 0; i < sizeof users / sizeof users[0]; i++) {
		if (users[i].name == NULL)
			continue;
		errno = 0;
		if (getpwnam(users[i].name) == NULL) {
			key_where(k, users[i].key, where, sizeof where);
			finding(k, 0, where, "%s = \"%s\": %s: %s would not start", users[i].key,
			    users[i].name, errno && errno != ENOENT ? strerror(errno) :
			    "no such user on this system", users[i].who);
		}
	}
	errno = 0;
	if (c->queue_group && getgrnam(c->queue_group) == NULL) {
		key_where(k, "queue_group", where, sizeof where);
		finding(k, 0, where, "queue_group = \"%s\": %s: weir queue-init would refuse "
		    "it", c->queue_group, errno && errno != ENOENT ? strerror(errno) :
		    "no such group on this system");
	}
}

/* Who the deliverer runs as (mail/libexec.h). */
static void
find_deliverer(struct check *k, const struct weir_config *c)
{
	gid_t gid;

	k->have_deliverer = libexec_deliverer(c, &k->deliverer_uid, &gid, k->deliverer,
	    sizeof k->deliverer);
}

/* The folder of key's file into dir, its stat into *st: 0 when it is a
 * folder; -1 when not, with a finding unless it is missing and weir run
 * can make it (its parent is there). */
static int
folder_of(struct check *k, const char *where, const char *key, const char *file,
    char *dir, size_t max, struct stat *st)
{
	char parent[PATH_MAX];

	rundir_of(file, dir, max);
	if (stat(dir, st) < 0) {
		rundir_of(dir, parent, sizeof parent);
		if (errno != ENOENT || stat(parent, st) < 0)
			finding(k, 0, where, "%s: the folder of %s: %s (weir run makes only "
			    "the last folder of the path)", dir, key, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st->st_mode)) {
		finding(k, 0, where, "%s: the folder of %s is not a folder", dir, key);
		return -1;
	}
	return 0;
}

/* The folders of gate_socket and gate_journal (mail/rundir.h). */
static void
check_rundirs(struct check *k, const struct weir_config *c)
{
	const char *files[RD_COUNT] = { c->gate_socket, c->gate_journal };
	char where[512], dir[PATH_MAX];
	struct buf why = BUF_INIT;
	struct stat st;
	uid_t uid;
	gid_t gid;
	int i, r;

	for (i = 0; i < RD_COUNT; i++) {
		const struct rundir_spec *sp = &rundir_table[i];

		key_where(k, sp->key, where, sizeof where);
		if (folder_of(k, where, sp->key, files[i], dir, sizeof dir, &st) < 0)
			continue;
		buf_reset(&why);
		r = rundir_owner((enum rundir_id)i, c, &uid, &gid, &why);
		if (r < 0)
			continue;	/* check_accounts said so */
		if (r == 0 && (st.st_uid != uid || st.st_gid != gid)) {
			struct group *g = getgrgid(gid);

			finding(k, 0, where, "%s: the folder of %s belongs to %lu:%lu, not %s:%s: "
			    "weir-gate could not use it (chown %s:%s %s)", dir, sp->key,
			    (unsigned long)st.st_uid, (unsigned long)st.st_gid, c->gate_user,
			    g ? g->gr_name : "?", c->gate_user, g ? g->gr_name : "?", dir);
		}
		if ((st.st_mode & 07777) != sp->mode)
			finding(k, 1, where, "%s: the folder of %s has mode %04o, not %04o "
			    "(chmod %04o %s)", dir, sp->key, (unsigned)(st.st_mode & 07777),
			    (unsigned)sp->mode, (unsigned)sp->mode, dir);
	}
	buf_free(&why);
}

/* The folders of the sockets anyone may ask, showq_socket and
 * gate_status_socket: there, or makeable.  Their modes are the admin's
 * to choose (a group may be all who should ask), but a showq folder that
 * others cannot search defeats its purpose: a warning. */
static void
check_public_sockets(struct check *k, const struct weir_config *c)
{
	const char *key[2] = { "showq_socket", "gate_status_socket" };
	const char *file[2] = { c->showq_socket, c->gate_status_socket };
	char where[512], dir[PATH_MAX];
	struct stat st;
	int i;

	for (i = 0; i < 2; i++) {
		if (file[i] == NULL)
			continue;
		key_where(k, key[i], where, sizeof where);
		if (folder_of(k, where, key[i], file[i], dir, sizeof dir, &st) < 0)
			continue;
		if (i == 0 && (st.st_mode & S_IXOTH) == 0)
			finding(k, 1, where, "%s: the folder of showq_socket has mode %04o: "
			    "users outside its group cannot reach weir-showq (chmod o+x %s)", dir,
			    (unsigned)(st.st_mode & 07777), dir);
	}
}

/* metrics.auth_file: what weir-metrics reads at each request, as
 * metrics.user when that is set: a regular file, mode 0600 or stricter,
 * that user's, every line "user:$id$salt$hash" (lib/pwfile.h's own
 * check: a file it refuses serves no page). */
static void
check_metrics(struct check *k, const struct weir_config *c)
{
	const char *path = c->metrics.auth_file;
	const struct passwd *pw = NULL;
	struct buf why = BUF_INIT;
	char where[512];
	struct stat st;

	if (!c->metrics.present || path == NULL)
		return;
	snprintf(where, sizeof where, "%s:%d", k->cfile, c->metrics.line);
	if (c->metrics.user)
		pw = getpwnam(c->metrics.user);
	if (stat(path, &st) < 0)
		finding(k, 0, where, "metrics: auth_file %s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode) || (st.st_mode & 077))
		finding(k, 0, where, "metrics: auth_file %s: %s; weir-metrics would serve no "
		    "page (chmod 600 %s)", path, S_ISREG(st.st_mode) ? "group or others may "
		    "read or write it" : "not a regular file", path);
	else if (pw && st.st_uid != pw->pw_uid)
		finding(k, 0, where, "metrics: auth_file %s belongs to uid %lu; weir-metrics "
		    "reads it as %s (chown %s %s)", path, (unsigned long)st.st_uid,
		    c->metrics.user, c->metrics.user, path);
	else if (pw_check(path, "", "", &why) == PW_TROUBLE)
		finding(k, 0, where, "metrics: auth_file %s", why.s);
	buf_free(&why);
}

/* With send_user and queue_group set: the queue's folders have the
 * owners and modes of the layout table (queue-check's own check). */
static void
check_queue_owners(struct check *k, const struct weir_config *c)
{
	struct queue_owners own;
	struct qcheck_result res;
	struct buf why = BUF_INIT;
	struct queue q;
	char where[512], *mem = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *f;

	if (c->send_user == NULL || c->queue_group == NULL ||
	    queue_owners_lookup(c->send_user, c->queue_group, &own, &why) < 0 ||
	    queue_open(&q, c->queue_dir, c->queue_split) < 0) {
		buf_free(&why);
		return;		/* check_accounts or check_queue said why */
	}
	key_where(k, "queue_dir", where, sizeof where);
	if ((f = open_memstream(&mem, &len)) == NULL)
		fatal(2, "open_memstream");
	qcheck_layout(&q, &own, f, &res);
	fclose(f);
	for (line = strtok_r(mem, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, "problem: ", 9) == 0)
			finding(k, 0, where, "queue %s: %s", c->queue_dir, line + 9);
	free(mem);
	queue_close(&q);
	buf_free(&why);
}

/* Sender rewriting (mail/rewrite.h; config.c checked each value): what
 * would still reach the provider as a local address, and settings that
 * do nothing. */
static void
check_rewrite(struct check *k, const struct weir_config *c, const struct weir_upstream *u)
{
	const char *at;
	char where[512];
	size_t i;

	for (i = 0; i < u->rewrite_sender.n; i++) {
		at = strrchr(u->rewrite_sender.v[i], '@');	/* the address's domain */
		if (at && domain_is_local(at + 1, c)) {
			up_where(k, u, "rewrite_sender", where, sizeof where);
			finding(k, 1, where, "upstream \"%s\": rewrite_sender \"%s\" rewrites to "
			    "an address local to this host (hostname \"%s\"): the provider "
			    "sees it as it is", u->name, u->rewrite_sender.v[i], c->hostname);
		}
	}
	if (u->rewrite_default && domain_is_local(strrchr(u->rewrite_default, '@') + 1, c)) {
		up_where(k, u, "rewrite_default", where, sizeof where);
		finding(k, 1, where, "upstream \"%s\": rewrite_default \"%s\" is local to this "
		    "host (hostname \"%s\"): give an address of the account's domain",
		    u->name, u->rewrite_default, c->hostname);
	}
	for (i = 0; i < u->rewrite_domains.n; i++)
		if (domain_is_local(u->rewrite_domains.v[i], c)) {
			up_where(k, u, "rewrite_domains", where, sizeof where);
			finding(k, 1, where, "upstream \"%s\": rewrite_domains names \"%s\", "
			    "local to this host: its senders never get rewrite_default", u->name,
			    u->rewrite_domains.v[i]);
		}
	if (u->rewrite_header_from && u->rewrite_sender.n == 0 && !u->rewrite_default) {
		up_where(k, u, "rewrite_header_from", where, sizeof where);
		finding(k, 1, where, "upstream \"%s\": rewrite_header_from without "
		    "rewrite_sender or rewrite_default rewrites nothing", u->name);
	}
	if (u->rewrite_domains.n > 0 && !u->rewrite_default) {
		up_where(k, u, "rewrite_domains", where, sizeof where);
		finding(k, 1, where, "upstream \"%s\": rewrite_domains without rewrite_default "
		    "changes nothing", u->name);
	}
	/* An account named by an address: its provider most likely refuses
	 * other senders, and local ones would go out as they are. */
	at = u->username ? strrchr(u->username, '@') : NULL;
	if (at && at[1] && !domain_is_local(at + 1, c) && u->rewrite_sender.n == 0 &&
	    !u->rewrite_default) {
		up_where(k, u, NULL, where, sizeof where);
		finding(k, 1, where, "upstream \"%s\": no sender rewriting: mail from local "
		    "users and daemons (root@%s, cron) reaches the provider with that sender, "
		    "which providers refuse outside the account's domain; set rewrite_default "
		    "(e.g. \"%s\") or rewrite_sender", u->name, c->hostname, u->username);
	}
}

/* Add domain d (its n bytes) to the list v[0..*n) unless it is there. */
static void
domain_add(char ***v, size_t *nv, const char *d, size_t n)
{
	size_t i;

	for (i = 0; i < *nv; i++)
		if (strlen((*v)[i]) == n && strncasecmp((*v)[i], d, n) == 0)
			return;
	*v = xrealloc(*v, (*nv + 1) * sizeof **v);
	(*v)[(*nv)++] = xstrndup(d, n);
}

/* u's rewriting built (hostname for local parts): 0, or -1 (config.c
 * said why). */
static int
rewrite_of(const struct weir_config *c, const struct weir_upstream *u, struct rewrite *rw)
{
	struct buf why = BUF_INIT;
	int rc = rewrite_init(rw, (const char *const *)u->rewrite_sender.v, u->rewrite_sender.n,
	    u->rewrite_default, (const char *const *)u->rewrite_domains.v, u->rewrite_domains.n,
	    c->hostname, &why);

	buf_free(&why);
	return rc;
}

/* The sender domains mail routed to u carries, as far as weir.conf
 * tells: the domains u rewrites senders into, its account's, and those
 * its senders patterns name ("*@lists.example.org"). */
static void
sender_domains(const struct weir_config *c, const struct weir_upstream *u, char ***v,
    size_t *n)
{
	struct rewrite rw;
	const char *at;
	size_t i;

	if (rewrite_of(c, u, &rw) == 0)
		for (i = 0; i < rw.ndomains; i++)
			domain_add(v, n, rw.domains[i], strlen(rw.domains[i]));
	rewrite_free(&rw);
	if (u->username && (at = strrchr(u->username, '@')) != NULL && at[1])
		domain_add(v, n, at + 1, strlen(at + 1));
	for (i = 0; i < u->senders.n; i++)
		if (strncmp(u->senders.v[i], "*@", 2) == 0 &&
		    strpbrk(u->senders.v[i] + 2, "*?[") == NULL && u->senders.v[i][2])
			domain_add(v, n, u->senders.v[i] + 2, strlen(u->senders.v[i] + 2));
}

/* Backup relays (their policy sections: policy_findings): each one's
 * sender rewriting leaves none of the senders u's mail carries outside
 * the domains it takes. */
static void
check_fallbacks(struct check *k, const struct weir_config *c, const struct weir_upstream *u)
{
	const struct weir_upstream *f;
	struct buf out = BUF_INIT;
	struct rewrite rw;
	char where[512], **dom = NULL, **acc = NULL, *probe;
	size_t i, j, a, nd = 0, na = 0;

	if (u->fallback_when.n > 0 && u->fallback.n == 0) {
		up_where(k, u, "fallback_when", where, sizeof where);
		finding(k, 1, where, "upstream \"%s\": fallback_when without fallback does "
		    "nothing", u->name);
	}
	if (u->fallback.n > 0)
		sender_domains(c, u, &dom, &nd);
	for (i = 0; i < u->fallback.n; i++) {
		if ((f = config_upstream(c, u->fallback.v[i])) == NULL)
			continue;	/* config.c said so */
		up_where(k, u, "fallback", where, sizeof where);
		if (rewrite_of(c, f, &rw) < 0) {
			rewrite_free(&rw);
			continue;
		}
		/* What f takes: its rewriting's domains, else its account's. */
		for (a = 0; a < na; a++)
			free(acc[a]);
		na = 0;
		for (a = 0; a < rw.ndomains; a++)
			domain_add(&acc, &na, rw.domains[a], strlen(rw.domains[a]));
		if (na == 0 && f->username && strrchr(f->username, '@') &&
		    strrchr(f->username, '@')[1])
			domain_add(&acc, &na, strrchr(f->username, '@') + 1,
			    strlen(strrchr(f->username, '@') + 1));
		for (j = 0; na > 0 && j < nd; j++) {
			const char *got, *at;

			probe = xasprintf("postmaster@%s", dom[j]);
			got = rewrite_address(&rw, probe, &out) ? buf_cstr(&out) : probe;
			at = strrchr(got, '@');
			for (a = 0; a < na && strcasecmp(acc[a], at + 1) != 0; a++)
				;
			if (a == na)
				finding(k, 1, where, "upstream \"%s\": mail from senders at %s goes "
				    "through its fallback \"%s\" as it is (its sender rewriting leaves "
				    "them), and \"%s\" takes senders at %s%s only: a provider refuses "
				    "the others; give upstream \"%s\" rewrite_default or rewrite_sender "
				    "\"@%s ...\"", u->name, dom[j], f->name, f->name, acc[0],
				    na > 1 ? " and its other domains" : "", f->name, dom[j]);
			free(probe);
		}
		rewrite_free(&rw);
	}
	for (a = 0; a < na; a++)
		free(acc[a]);
	free(acc);
	for (j = 0; j < nd; j++)
		free(dom[j]);
	free(dom);
	buf_free(&out);
}

/* A file the deliverer must own, closed to group and others: its stat
 * checked; 0 fine, -1 said. */
static int
check_private(struct check *k, const char *where, const struct weir_upstream *u,
    const char *key, const char *path, const struct stat *st)
{
	struct buf why = BUF_INIT;
	int rc = -1;

	if (secretfile_check_key(st, key, path, &why) < 0)
		finding(k, 0, where, "upstream \"%s\": %s", u->name, why.s);
	else if (k->have_deliverer && st->st_uid != k->deliverer_uid)
		finding(k, 0, where, "upstream \"%s\": %s %s belongs to uid %lu, but weir-remote "
		    "runs as %s and cannot read it (chown %s %s)", u->name, key, path,
		    (unsigned long)st->st_uid, k->deliverer, k->deliverer, path);
	else
		rc = 0;
	buf_free(&why);
	return rc;
}

/* The oauth section (config.c checked its keys): the client secret, the
 * CAs, and the token state: there, the deliverer's, 0600, and alive. */
#define NEEDS_LOGIN " (the other upstreams are served)"
static void
check_oauth(struct check *k, const struct weir_upstream *u)
{
	const struct weir_oauth *o = &u->oauth;
	struct oauth_status st;
	struct buf why = BUF_INIT;
	char where[512], dir[PATH_MAX], when[OAUTH_TIME_MAX];
	struct stat sb;

	const char *const secrets[][2] = { { "client_secret_file", o->client_secret_file },
	    { "private_key_file", o->private_key_file }, { "key_file", o->key_file },
	    { "proxy_auth_file", o->proxy_auth_file }, { "certificate_file",
	    o->certificate_file } };
	size_t i;

	for (i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
		if (secrets[i][1] == NULL)
			continue;
		up_where(k, u, secrets[i][0], where, sizeof where);
		if (stat(secrets[i][1], &sb) < 0)
			finding(k, 0, where, "upstream \"%s\": %s %s: %s", u->name, secrets[i][0],
			    secrets[i][1], strerror(errno));
		else if (strcmp(secrets[i][0], "certificate_file") != 0)	/* public */
			(void)check_private(k, where, u, secrets[i][0], secrets[i][1], &sb);
	}
	if (o->ca_file) {
		up_where(k, u, "ca_file", where, sizeof where);
		if (stat(o->ca_file, &sb) < 0 || !S_ISREG(sb.st_mode))
			finding(k, 0, where, "upstream \"%s\": oauth ca_file %s: %s", u->name,
			    o->ca_file, errno && !S_ISREG(sb.st_mode) ? strerror(errno) :
			    "not a regular file");
	}
	up_where(k, u, "token_file", where, sizeof where);
	rundir_of(o->token_file, dir, sizeof dir);
	/* A login needed is the upstream's trouble, not a broken
	 * configuration: a warning, and weir starts for the others. */
	if (stat(dir, &sb) < 0) {
		finding(k, errno == ENOENT, where, "upstream \"%s\": no token yet (%s, the folder of "
		    "token_file: %s): mail through it waits%s; run weir auth login %s (it makes the "
		    "folder)", u->name, dir, strerror(errno), errno == ENOENT ? NEEDS_LOGIN : "",
		    u->name);
		return;
	}
	if (k->have_deliverer && sb.st_uid != k->deliverer_uid)
		finding(k, 0, where, "upstream \"%s\": %s, the folder of token_file, belongs to "
		    "uid %lu, but weir-remote runs as %s and must write in it (chown %s %s)",
		    u->name, dir, (unsigned long)sb.st_uid, k->deliverer, k->deliverer, dir);
	if (stat(o->token_file, &sb) < 0 && errno == ENOENT && OAUTH_APP_ONLY(o)) {
		finding(k, 1, where, "upstream \"%s\": no token fetched yet (the first delivery "
		    "gets one); weir auth test %s tests the credentials now", u->name, u->name);
		return;
	}
	if (stat(o->token_file, &sb) < 0) {
		finding(k, errno == ENOENT, where, "upstream \"%s\": token_file %s: %s: mail through "
		    "it waits%s; run weir auth login %s", u->name, o->token_file, errno == ENOENT ?
		    "no token yet" : strerror(errno), errno == ENOENT ? NEEDS_LOGIN : "", u->name);
		return;
	}
	if (check_private(k, where, u, "token_file", o->token_file, &sb) < 0)
		return;
	if (oauth_status_load(o, &st, &why) < 0)
		finding(k, 1, where, "upstream \"%s\": %s", u->name, why.s);
	else if (st.login_needed) {
		oauth_time(when, sizeof when, st.error_at);
		finding(k, 1, where, "upstream \"%s\": %s (since %s): %s: mail through it waits%s; "
		    "%s %s", u->name, OAUTH_APP_ONLY(o) ? "the provider refuses the application's "
		    "credentials, or a token could not be saved" : st.refused ? "the provider refuses "
		    "the refresh token" : "a login is needed", when, st.error, NEEDS_LOGIN,
		    OAUTH_APP_ONLY(o) ? "weir auth test" : "run weir auth login", u->name);
	} else if (st.error_at) {
		oauth_time(when, sizeof when, st.error_at);
		finding(k, 1, where, "upstream \"%s\": the last token refresh failed (%s): %s",
		    u->name, when, st.error);
	}
	buf_free(&why);
}

/* What weir.conf's upstream u and the policy say together (weir run
 * refuses these too: check_config_refusals): a name the gate protocol
 * carries, a section of the policy (or "*"), and for each fallback a
 * section of its own. */
static void
policy_findings(struct check *k, const struct weir_config *c, const struct weir_upstream *u,
    const struct policy *pol, int have_policy)
{
	const struct weir_upstream *f;
	char where[512];
	size_t i, j;

	up_where(k, u, NULL, where, sizeof where);
	if (!policy_valid_name(u->name))
		finding(k, 0, where, "upstream \"%s\": a name is 1 to %d of A-Z a-z 0-9 . - _ "
		    "(it travels in weir-gate's protocol)", u->name, POLICY_NAME_MAX);
	else if (have_policy && policy_upstream(pol, u->name) == NULL)
		finding(k, 0, where, "upstream \"%s\" has no upstream \"%s\" section in %s: "
		    "weir-gate refuses to grant sends through it", u->name, u->name, pol->file);
	up_where(k, u, "fallback", where, sizeof where);
	for (i = 0; have_policy && i < u->fallback.n; i++) {
		if ((f = config_upstream(c, u->fallback.v[i])) == NULL)
			continue;	/* config.c said so */
		for (j = 0; j < pol->nup; j++)
			if (strcmp(pol->up[j].name, f->name) == 0)
				break;
		if (j == pol->nup)
			finding(k, 0, where, "upstream \"%s\": its fallback \"%s\" has no upstream "
			    "\"%s\" section of its own in %s: a backup relay needs its provider's "
			    "limits (the \"*\" section is not enough)", u->name, f->name, f->name,
			    pol->file);
	}
}

int
check_config_refusals(const struct weir_config *c, struct buf *out)
{
	struct check k;
	struct policy pol;
	struct buf err = BUF_INIT;
	size_t i;
	int n;

	memset(&k, 0, sizeof k);
	memset(&pol, 0, sizeof pol);
	k.cfile = c->file;
	k.out = out;
	if (c->file && read_file_at(AT_FDCWD, c->file, &k.text, 1 << 24) != 0)
		buf_reset(&k.text);
	if (policy_load(&pol, c->policy_file, &err) < 0) {
		buf_add(out, err.s ? err.s : "", err.len);
		k.errors++;
	} else {
		/* The presets' limits, as weir-gate and cmd_check_config take them. */
		config_preset_limits(c->upstreams, c->nupstreams, &pol);
		for (i = 0; i < c->nupstreams; i++)
			policy_findings(&k, c, &c->upstreams[i], &pol, 1);
	}
	n = k.errors;
	policy_free(&pol);
	buf_free(&err);
	buf_free(&k.text);
	return n;
}

static void
check_upstream(struct check *k, const struct weir_config *c, const struct weir_upstream *u,
    const struct policy *pol, int have_policy)
{
	char where[512];
	struct buf why = BUF_INIT;
	struct stat st;

	policy_findings(k, c, u, pol, have_policy);
	if (u->secret_file) {
		up_where(k, u, "secret_file", where, sizeof where);
		if (stat(u->secret_file, &st) < 0)
			finding(k, 0, where, "upstream \"%s\": secret_file %s: %s", u->name,
			    u->secret_file, strerror(errno));
		else if (check_private(k, where, u, "secret_file", u->secret_file, &st) < 0)
			;	/* said */
		else if (st.st_size == 0)
			finding(k, 0, where, "upstream \"%s\": secret_file %s: empty", u->name,
			    u->secret_file);
		buf_free(&why);
	}
	if (u->ca_file) {
		up_where(k, u, "ca_file", where, sizeof where);
		if (stat(u->ca_file, &st) < 0)
			finding(k, 0, where, "upstream \"%s\": ca_file %s: %s", u->name, u->ca_file,
			    strerror(errno));
		else if (!S_ISREG(st.st_mode))
			finding(k, 0, where, "upstream \"%s\": ca_file %s: not a regular file",
			    u->name, u->ca_file);
		else if (access(u->ca_file, R_OK) < 0)
			finding(k, 1, where, "upstream \"%s\": ca_file %s: %s (as this user)",
			    u->name, u->ca_file, strerror(errno));
	}
	if (u->oauth.present)
		check_oauth(k, u);
	check_rewrite(k, c, u);
	check_fallbacks(k, c, u);
	up_where(k, u, "verify", where, sizeof where);
	if (u->tls != UP_TLS_NONE && !u->verify && !u->fingerprint)
		finding(k, 1, where, "upstream \"%s\": verify = false and no fingerprint: "
		    "anyone on the path can read the secret and the mail", u->name);
}

static void
check_cross(struct check *k, const struct weir_config *c, const struct policy *pol,
    int have_policy)
{
	char where[512];
	size_t i;

	if (c->nupstreams == 0) {
		finding(k, 1, k->cfile ? k->cfile : "(defaults)", "no upstream section: "
		    "weir-remote would send to the host it is given, unauthenticated and "
		    "ungoverned");
	}
	for (i = 0; i < c->nupstreams; i++)
		check_upstream(k, c, &c->upstreams[i], pol, have_policy);
	if (!have_policy)
		return;
	for (i = 0; i < pol->nup; i++)
		if (strcmp(pol->up[i].name, POLICY_ANY_UPSTREAM) != 0 &&
		    config_upstream(c, pol->up[i].name) == NULL) {
			snprintf(where, sizeof where, "%s:%d", pol->file, pol->up[i].line);
			finding(k, 1, where, "upstream \"%s\" is not an upstream of %s: its limits "
			    "are never used", pol->up[i].name, k->cfile ? k->cfile : "weir.conf");
		}
}

/* One window as policy.conf's rate writes it. */
static void
window_text(struct buf *o, const struct policy_window *w)
{
	char d[64];

	duration_format(d, sizeof d, w->per);
	buf_printf(o, "%lld %s %s %s", w->limit, policy_unit_name(w->unit),
	    w->calendar ? "calendar, every" : "per", d);
}

/*
 * The effective values of an upstream with a preset: each key the
 * section or the preset set, and from where ("weir.conf:LINE", "preset
 * NAME"); its oauth keys likewise; the limits weir-gate uses and their
 * source: the preset's (added to the policy after its nfile sections),
 * or policy.conf's own section, or its "*" section.
 */
static void
show_effective(struct check *k, const struct weir_upstream *u, const struct policy *pol,
    int have_policy, size_t nfile)
{
	const struct policy_upstream *pu = have_policy ? policy_upstream(pol, u->name) : NULL;
	struct buf v = BUF_INIT;
	char where[512];
	size_t i;

	printf("upstream \"%s\": effective values (preset %s, %s):\n", u->name, u->preset,
	    u->preset_file ? u->preset_file : "not loaded");
	for (i = 0; config_upstream_key(i); i++) {
		unsigned long long b = 1ULL << i;

		if (!((u->from_preset | u->from_file) & b))
			continue;
		buf_reset(&v);
		config_upstream_value(u, i, &v);
		if (u->from_file & b)
			up_where(k, u, config_upstream_key(i), where, sizeof where);
		else
			snprintf(where, sizeof where, "preset %s", u->preset);
		printf("  %-16s = %-36s %s\n", config_upstream_key(i), v.s, where);
	}
	if (u->oauth.present)
		printf("  oauth: provider, flow, scope and endpoints the preset's unless the "
		    "oauth section sets them; mechanisms the token's\n");
	if (pu == NULL) {
		printf("  limits: none (no policy section for it: weir-gate refuses it)\n");
		buf_free(&v);
		return;
	}
	buf_reset(&v);
	for (i = 0; i < pu->nwin; i++) {
		buf_adds(&v, i ? ", " : "");
		window_text(&v, &pu->win[i]);
	}
	printf("  limits: %s; max_recipients %lld, max_connections %lld, "
	    "messages_per_connection %lld\n", v.len ? v.s : "no window", pu->max_recipients,
	    pu->max_connections, pu->messages_per_connection);
	if ((size_t)(pu - pol->up) >= nfile)
		printf("  limits from: preset %s (windows and caps it sets), policy %s "
		    "section \"*\" (the rest)\n", u->preset, pol->file);
	else
		printf("  limits from: %s:%d, section \"%s\"%s\n", pol->file, pu->line, pu->name,
		    strcmp(pu->name, u->name) == 0 ? " (policy.conf's own: the preset's are not "
		    "used)" : " (the preset publishes none)");
	buf_free(&v);
}

int
cmd_check_config(int argc, char **argv, const char *cfile)
{
	struct weir_config c;
	struct policy pol;
	struct buf err = BUF_INIT;
	struct check k;
	int cfg_ok, have_policy = 0;
	size_t i, nfile = 0;
	const char *reply = argc == 3 && strcmp(argv[1], "--reply") == 0 ? argv[2] : NULL;

	memset(&k, 0, sizeof k);
	memset(&pol, 0, sizeof pol);
	if (argc != 1 && reply == NULL) {
		log_warnx("usage: weir [-c FILE] check-config [--reply \"REPLY\"]");
		return 2;
	}
	cfg_ok = config_load(&c, cfile, &err) == 0;
	parser_errors(&k, &err);
	buf_reset(&err);
	k.cfile = c.file;
	if (c.file == NULL && !cfg_ok)
		goto summary;	/* it did not parse: the policy file it names is unknown */
	if (c.file && read_file_at(AT_FDCWD, c.file, &k.text, 1 << 24) != 0)
		buf_reset(&k.text);	/* no lines, then */
	if (policy_load(&pol, c.policy_file, &err) == 0) {
		have_policy = 1;
		nfile = pol.nup;
		config_preset_limits(c.upstreams, c.nupstreams, &pol);
	}
	else
		parser_errors(&k, &err);
	if (reply && cfg_ok) {
		/* What a reply means (replycheck.c), instead of the checks. */
		int rc = check_reply(&c, have_policy ? &pol : NULL, k.text.s, reply);

		policy_free(&pol);
		config_free(&c);
		buf_free(&k.text);
		buf_free(&err);
		return rc;
	}
	check_hostname(&k, &c);
	check_admin(&k, &c);
	check_queue(&k, &c);
	check_accounts(&k, &c);
	find_deliverer(&k, &c);
	check_cross(&k, &c, &pol, have_policy);
	check_rundirs(&k, &c);
	check_public_sockets(&k, &c);
	check_metrics(&k, &c);
	check_queue_owners(&k, &c);
	for (i = 0; i < c.nupstreams; i++)
		if (c.upstreams[i].preset)
			show_effective(&k, &c.upstreams[i], &pol, have_policy, nfile);
summary:
	printf("check-config: %d error%s, %d warning%s", k.errors, k.errors == 1 ? "" : "s",
	    k.warnings, k.warnings == 1 ? "" : "s");
	if (c.file == NULL && !cfg_ok)
		printf(" (the policy file was not checked)\n");
	else
		printf(" in %s and %s\n", c.file ? c.file : "the defaults (no weir.conf)",
		    c.policy_file);
	policy_free(&pol);
	config_free(&c);
	buf_free(&err);
	buf_free(&k.text);
	if (fflush(stdout) != 0)
		return 2;
	return k.errors ? 1 : 0;
}
