/*
 * options.c: sendmail's command line, parsed the way getopt() would for
 * Postfix's sendmail option set (clustered flags, "-fx" or "-f x", "--"
 * ends options, the first non-option ends them too, no reordering), but
 * without getopt's global state and own messages.  Every flag Postfix's
 * sendmail(1) takes is accepted; see sendmail(8) for what each does here.
 *
 * Options with a value: A B C F L N O R V X b e f h o p r.  -q takes the
 * rest of its word only (-q, -q1h, -qRsite), as sendmail's -q always did.
 * Refused with a message: -X (traffic log), -bd, and -b modes weir has
 * no use for; anything unknown.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sysexits.h>
#include <unistd.h>

#include "lib/log.h"
#include "sendmail/sendmail.h"

void
sm_say(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int n, m;

	n = snprintf(line, sizeof line, "%s: ", log_progname());
	if (n < 0)
		return;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;	/* nowhere else to say it */
}

int
sm_stdfds(void)
{
	int fd;

	for (fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		if (errno != EBADF)
			return -1;
		/* open() returns the lowest free fd: this one. */
		if (open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
			return -1;
	}
	return 0;
}

static int
usage(struct buf *why, const char *what, const char *arg)
{
	buf_printf(why, "%s%s", what, arg);
	return EX_USAGE;
}

/* -o's argument: the old sendmail options scripts still pass.  Only -oi
 * means something to weir; -od*, -oe*, -om, -o7, -o8, -oA... and the
 * rest are accepted and ignored, as Postfix does. */
static int
opt_o(const char *v, struct sm_opts *o)
{
	if (v[0] == 'i' && v[1] == '\0')
		o->dot_ends = 0;
	return 0;
}

static int
opt_b(const char *v, struct sm_opts *o, struct buf *why)
{
	static const struct { const char *v; enum sm_mode mode; } modes[] = {
		{ "m", SM_DELIVER }, { "p", SM_LIST }, { "s", SM_SMTP },
		{ "v", SM_VERIFY }, { "i", SM_NEWALIASES },
	};
	size_t i;

	for (i = 0; i < sizeof modes / sizeof modes[0]; i++)
		if (strcmp(v, modes[i].v) == 0) {
			o->mode = modes[i].mode;
			return 0;
		}
	if (strcmp(v, "d") == 0) {
		buf_adds(why, "-bd: weir's daemons are started by `weir run` "
		    "(systemctl start weir), not by sendmail");
		return EX_USAGE;
	}
	buf_printf(why, "-b%s is not supported (modes: -bm, -bp, -bs, -bv, -bi)", v);
	return EX_USAGE;
}

/* -N: "never", or a comma-separated list of success, failure, delay. */
static int
opt_n(const char *v, struct sm_opts *o, struct buf *why)
{
	const char *p = v, *e;
	size_t n;
	int never = 0, other = 0;

	for (;;) {
		e = strchr(p, ',');
		n = e ? (size_t)(e - p) : strlen(p);
		if (n == 5 && strncasecmp(p, "never", 5) == 0)
			never = 1;
		else if ((n == 7 && (strncasecmp(p, "success", 7) == 0 ||
		    strncasecmp(p, "failure", 7) == 0)) ||
		    (n == 5 && strncasecmp(p, "delay", 5) == 0))
			other = 1;
		else
			goto bad;
		if (e == NULL)
			break;
		p = e + 1;
	}
	if (never && other)
		goto bad;
	o->no_bounce = never;
	return 0;
bad:
	buf_printf(why, "-N %s: give never, or a list of success, failure, delay", v);
	return EX_USAGE;
}

static int
opt_b_type(const char *v, struct buf *why)
{
	if (strcasecmp(v, "7BIT") == 0 || strcasecmp(v, "8BITMIME") == 0)
		return 0;
	buf_printf(why, "-B %s: the body type is 7BIT or 8BITMIME", v);
	return EX_USAGE;
}

/* An option with a value: its value is known. */
static int
with_value(char opt, const char *val, struct sm_opts *o, struct buf *why)
{
	switch (opt) {
	case 'b': return opt_b(val, o, why);
	case 'o': return opt_o(val, o);
	case 'N': return opt_n(val, o, why);
	case 'B': return opt_b_type(val, why);
	case 'F': o->fullname = val; return 0;
	case 'C': o->config = val; return 0;
	case 'f': case 'r': o->sender = val; return 0;
	case 'X':
		buf_printf(why, "-X %s: weir keeps no traffic log; its programs log to "
		    "the journal", val);
		return EX_USAGE;
	default:	/* A L O R V e h p: accepted, no use here */
		return 0;
	}
}

int
sm_parse_args(int argc, char *const *argv, struct sm_opts *o, struct buf *why)
{
	const char *base, *arg, *val;
	char opt[2] = { 0, 0 };
	int i, rc;
	size_t j;

	memset(o, 0, sizeof *o);
	o->dot_ends = 1;
	o->mode = SM_DELIVER;
	base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
	base = base ? base + 1 : (argc > 0 && argv[0] ? argv[0] : "sendmail");
	if (strcmp(base, "mailq") == 0)
		o->mode = SM_LIST;
	else if (strcmp(base, "newaliases") == 0)
		o->mode = SM_NEWALIASES;

	for (i = 1; i < argc; i++) {
		arg = argv[i];
		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;
		for (j = 1; arg[j]; j++) {
			opt[0] = arg[j];
			switch (arg[j]) {
			case 't': o->extract = 1; continue;
			case 'i': o->dot_ends = 0; continue;
			case 'I': o->mode = SM_NEWALIASES; continue;
			case 'v': o->verbose = 1; continue;
			case 'G': case 'U': case 'c': case 'm': case 'n': case 'x':
				continue;	/* accepted, no use here */
			case 'q':
				/* -q, -q1h, -qRsite, -qIid...: all one flush. */
				o->mode = SM_FLUSH;
				break;
			case 'A': case 'B': case 'C': case 'F': case 'L': case 'N':
			case 'O': case 'R': case 'V': case 'X': case 'b': case 'e':
			case 'f': case 'h': case 'o': case 'p': case 'r':
				break;
			default:
				return usage(why, "unknown option -", opt);
			}
			if (opt[0] == 'q')
				break;	/* the rest of the word was -q's */
			/* An option with a value: the rest of this word, or the next. */
			if (arg[j + 1])
				val = arg + j + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else {
				buf_printf(why, "option -%c needs a value", opt[0]);
				return EX_USAGE;
			}
			if ((rc = with_value(opt[0], val, o, why)) != 0)
				return rc;
			break;
		}
	}
	o->rcpt = argv + i;
	o->nrcpt = i < argc ? (size_t)(argc - i) : 0;
	if (o->extract && o->mode != SM_DELIVER)
		return usage(why, "-t goes only with sending a message", " (not with -bp, -bs, -bv, -bi, -q)");
	if (o->nrcpt > 0 && o->mode != SM_DELIVER && o->mode != SM_VERIFY)
		return usage(why, o->mode == SM_LIST ? "listing the queue takes no addresses: " :
		    "this mode takes no addresses: ", o->rcpt[0]);
	if (o->nrcpt == 0 && o->mode == SM_VERIFY)
		return usage(why, "-bv needs the addresses to verify", "");
	return 0;
}
