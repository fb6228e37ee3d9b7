/*
 * log.h: the one logging module.  One line per event on stderr (the
 * supervisor or the journal captures it), in one fixed form:
 *
 *   [TIME ]PROG[PID]: LEVEL: TEXT
 *
 * TIME is the local time, "2026-11-25T14:45:53.123+0000", left out
 * under systemd's journal ($JOURNAL_STREAM set: the journal stamps each
 * line itself).  LEVEL is info, warning, fatal, panic or debug.  TEXT
 * never holds a newline or another control byte: each is written as
 * "\n", "\r", "\t" or "\xHH" (and a backslash as "\\"), so a reply
 * quoted in a line stays on that line.  A message's line starts its
 * TEXT with "msg ID: ", ID being INODE.SEC.NSEC (mail/queue.h).
 *
 * fatal() appends strerror(errno); fatalx() does not; panic() is for
 * broken invariants.  log_debug() lines (protocol transcripts, step by
 * step) are written only at the verbose level (weir.conf's log_level).
 * Trusts: its callers.  Config keys: none (config.c sets the level).
 */
#ifndef WEIR_LOG_H
#define WEIR_LOG_H

#include <stdarg.h>
#include <stdnoreturn.h>

#define PRINTFLIKE(a, b) __attribute__((format(printf, a, b)))

enum log_level { LOG_NORMAL, LOG_VERBOSE };

void log_init(const char *progname);
/* For the commands a person or a caller reads (sendmail, mailq,
 * weir-queue): "PROG: LEVEL: TEXT", without pid nor time, escaped the
 * same way. */
void log_init_tool(const char *progname);
const char *log_progname(void);
void log_set_level(enum log_level level);
int log_verbose(void);
/* How many lines this process has written (at any level shown). */
unsigned long log_lines(void);

/* A line at any level; err != 0 appends strerror(err).  For the callers
 * that must clean up between reporting a fatal error and exiting. */
void log_line(const char *level, int err, const char *fmt, ...) PRINTFLIKE(3, 4);
void log_info(const char *fmt, ...) PRINTFLIKE(1, 2);
void log_debug(const char *fmt, ...) PRINTFLIKE(1, 2);	/* verbose level only */
void log_warn(const char *fmt, ...) PRINTFLIKE(1, 2);   /* appends errno text */
void log_warnx(const char *fmt, ...) PRINTFLIKE(1, 2);
noreturn void fatal(int status, const char *fmt, ...) PRINTFLIKE(2, 3);
noreturn void fatalx(int status, const char *fmt, ...) PRINTFLIKE(2, 3);
noreturn void panic(const char *fmt, ...) PRINTFLIKE(1, 2);

#endif
