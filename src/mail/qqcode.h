/*
 * qqcode.h: qmail-queue's exit codes, the interface between every
 * injector (sendmail, weir-smtpd, qmail-inject, qmail-smtpd) and
 * weir-queue.  Codes 11-40 are permanent, every other non-zero code is
 * temporary: the sender must keep the message and try again.
 */
#ifndef WEIR_QQCODE_H
#define WEIR_QQCODE_H

enum qqcode {
	QQ_OK = 0,
	QQ_ADDR_TOO_LONG = 11,	/* an address over 1002 bytes */
	QQ_NOMEM = 51,		/* out of memory */
	QQ_TIMEOUT = 52,	/* inject_timeout expired */
	QQ_WRITE = 53,		/* write or fsync error, disk full */
	QQ_READ = 54,		/* read error, message or envelope truncated */
	QQ_CONFIG = 55,		/* unable to read the configuration */
	QQ_HOME = 61,		/* (qmail: home directory; unused by weir) */
	QQ_QUEUE_DIR = 62,	/* cannot open the queue directory */
	QQ_PID = 63,		/* trouble in pid/ */
	QQ_MESS = 64,		/* trouble in mess/ */
	QQ_INTD = 65,		/* trouble in intd/ */
	QQ_TODO = 66,		/* trouble in todo/ */
	QQ_BUG = 81,		/* internal bug, e.g. a crash */
	QQ_ENVELOPE = 91,	/* envelope format error */
};

/* One line describing the code, as qmail-queue(8) does. */
const char *qq_describe(int code);
/* 1 if the code is a permanent failure (11..40), else 0. */
int qq_permanent(int code);

#endif
