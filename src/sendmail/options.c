/*
 * options.c: sendmail's command line, parsed the way getopt() would for
 * "bFfiorqtv" with arguments for b, F, f, o, r (clustered flags, "-fx"
 * or "-f x", "--" ends options, the first non-option ends them too), but
 * without getopt's global state and own messages.
 *
 * Accepted and ignored: -v, -oem, -oee, -odb, -odi, -om, -bm.  Refused
 * with a message: -bs and -q (not supported yet), anything unknown.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

/* -o's argument: the old sendmail options scripts still pass. */
static int
opt_o(const char *v, struct sm_opts *o, struct buf *why)
{
	if (strcmp(v, "i") == 0) {
		o->dot_ends = 0;
		return 0;
	}
	if (strcmp(v, "em") == 0 || strcmp(v, "ee") == 0 || strcmp(v, "db") == 0 ||
	    strcmp(v, "di") == 0 || strcmp(v, "m") == 0)
		return 0;
	buf_adds(why, "unknown option -o");
	buf_adds(why, v);
	return EX_USAGE;
}

static int
opt_b(const char *v, struct sm_opts *o, struct buf *why)
{
	if (strcmp(v, "m") == 0) {
		o->mode = SM_DELIVER;
		return 0;
	}
	if (strcmp(v, "p") == 0) {
		o->mode = SM_LIST;
		return 0;
	}
	if (strcmp(v, "s") == 0) {
		buf_adds(why, "-bs (SMTP on standard input) is not supported yet");
		return EX_USAGE;
	}
	buf_adds(why, "unknown option -b");
	buf_adds(why, v);
	return EX_USAGE;
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
			case 'v': continue;
			case 'q':
				buf_printf(why, "-%s (queue processing) is not supported; "
				    "weir-send delivers the queue by itself", arg + j);
				return EX_USAGE;
			case 'b': case 'F': case 'f': case 'o': case 'r':
				break;
			default:
				return usage(why, "unknown option -", opt);
			}
			/* An option with a value: the rest of this word, or the next. */
			if (arg[j + 1])
				val = arg + j + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else {
				buf_printf(why, "option -%c needs a value", opt[0]);
				return EX_USAGE;
			}
			switch (opt[0]) {
			case 'b':
				if ((rc = opt_b(val, o, why)) != 0)
					return rc;
				break;
			case 'o':
				if ((rc = opt_o(val, o, why)) != 0)
					return rc;
				break;
			case 'F':
				o->fullname = val;
				break;
			default:	/* f, r */
				o->sender = val;
				break;
			}
			break;
		}
	}
	o->rcpt = argv + i;
	o->nrcpt = i < argc ? (size_t)(argc - i) : 0;
	if (o->mode == SM_LIST && o->nrcpt > 0)
		return usage(why, "listing the queue takes no addresses: ", o->rcpt[0]);
	return 0;
}
