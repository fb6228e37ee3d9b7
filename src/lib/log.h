/*
 * log.h: the one logging module.  One line per event, "prog: level: text",
 * on stderr (the supervisor or the journal captures it).  fatal() appends
 * strerror(errno); fatalx() does not; panic() is for broken invariants.
 * Trusts: its callers.  Config keys: none.
 */
#ifndef WEIR_LOG_H
#define WEIR_LOG_H

#include <stdarg.h>
#include <stdnoreturn.h>

#define PRINTFLIKE(a, b) __attribute__((format(printf, a, b)))

void log_init(const char *progname);
const char *log_progname(void);

/* A line at any level; err != 0 appends strerror(err).  For the callers
 * that must clean up between reporting a fatal error and exiting. */
void log_line(const char *level, int err, const char *fmt, ...) PRINTFLIKE(3, 4);
void log_info(const char *fmt, ...) PRINTFLIKE(1, 2);
void log_warn(const char *fmt, ...) PRINTFLIKE(1, 2);   /* appends errno text */
void log_warnx(const char *fmt, ...) PRINTFLIKE(1, 2);
noreturn void fatal(int status, const char *fmt, ...) PRINTFLIKE(2, 3);
noreturn void fatalx(int status, const char *fmt, ...) PRINTFLIKE(2, 3);
noreturn void panic(const char *fmt, ...) PRINTFLIKE(1, 2);

#endif
