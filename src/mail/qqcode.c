/* qqcode.c: see qqcode.h.  Texts follow qmail-queue(8). */
#include "mail/qqcode.h"

const char *
qq_describe(int code)
{
	switch (code) {
	case QQ_OK: return "message queued";
	case QQ_ADDR_TOO_LONG: return "address too long (permanent)";
	case 31: return "mail server permanently refuses to send the message (permanent)";
	case QQ_NOMEM: return "out of memory (temporary)";
	case QQ_TIMEOUT: return "timeout (temporary)";
	case QQ_WRITE: return "write error, e.g. disk full (temporary)";
	case QQ_READ: return "unable to read the message or envelope (temporary)";
	case QQ_CONFIG: return "unable to read a configuration file (temporary)";
	case QQ_HOME: return "problem with the home directory (temporary)";
	case QQ_QUEUE_DIR: return "problem with the queue directory (temporary)";
	case QQ_PID: return "problem with queue/pid (temporary)";
	case QQ_MESS: return "problem with queue/mess (temporary)";
	case QQ_INTD: return "problem with queue/intd (temporary)";
	case QQ_TODO: return "problem with queue/todo (temporary)";
	case QQ_BUG: return "internal bug (temporary)";
	case QQ_ENVELOPE: return "envelope format error (temporary)";
	default:
		return qq_permanent(code) ? "unknown permanent error"
					  : "unknown temporary error";
	}
}

int
qq_permanent(int code)
{
	return code >= 11 && code <= 40;
}
