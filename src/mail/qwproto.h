/*
 * qwproto.h: the protocol of weir-queued's socket (queue_socket), the
 * long-lived queue writer that weir-smtpd and sendmail hand messages to
 * instead of running weir-queue for each (weir-queued(8)).  A stream
 * socket; the writer learns who is speaking from the kernel
 * (SO_PEERCRED: the uid and pid in the Received line and the u and p
 * records, as weir-queue takes its caller's), never from the bytes.
 *
 * Client to writer: records, each a header line and a payload.
 *
 *   M<len>\n<len bytes>   message bytes (in the queue's form: lines end
 *                         in LF), in order; any number of records
 *   E<len>\n<len bytes>   envelope bytes, exactly qmail-queue's fd 1
 *                         (F sender NUL, T rcpt NUL ..., NUL), in one or
 *                         more records after the last M; the record that
 *                         holds the final NUL must end with it
 *
 * <len> is decimal, 1 to QW_CHUNK_MAX, no leading zero, no sign, no
 * space.  Anything else (another type byte, a missing LF, an M after an
 * E, a byte after the envelope's end) is a protocol error: the writer
 * answers Z81 and closes, and nothing of that message is queued.  A
 * client that closes its end before the envelope's end cancels the
 * message: nothing is queued.
 *
 * Writer to client, one line per message, once the envelope ended:
 *
 *   K<id>\n     queued: message, envelope and directory entries are on
 *               disk (QUEUE.md, S4 and todo/ fsynced); id as queue_msgid()
 *   Z<code>\n   not queued: a qmail-queue exit code (mail/qqcode.h),
 *               1 to 255, no leading zero; the writer then closes
 *
 * After a K the next message may follow on the same connection.  The
 * writer may also answer Z before the envelope's end (a write error, a
 * bad address) and close; the client reads it when its write fails.
 *
 * Trusts: nothing; both parsers refuse what does not fit exactly.
 * Config keys: none (queue_socket is the callers').
 */
#ifndef WEIR_QWPROTO_H
#define WEIR_QWPROTO_H

#include <stddef.h>

#include "lib/buf.h"
#include "mail/queue.h"

#define QW_CHUNK_MAX	65536
#define QW_HDR_MAX	8	/* "E65536\n" and one more */
#define QW_REPLY_MAX	(QUEUE_ID_MAX + 2)

/* A record header at the start of s[0..n): 1 with *type ('M' or 'E'),
 * *len and *hdrlen set; 0 if more bytes are needed; -1 if malformed. */
int qw_hdr_parse(const char *s, size_t n, char *type, size_t *len, size_t *hdrlen);
/* Append a record header for len (1..QW_CHUNK_MAX) bytes of type. */
void qw_hdr_put(struct buf *b, char type, size_t len);

/* A reply line at the start of s[0..n): 1 with *code (0 for K) and, for
 * K, id; *linelen its length; 0 if more bytes are needed; -1 malformed. */
int qw_reply_parse(const char *s, size_t n, int *code, char id[QUEUE_ID_MAX], size_t *linelen);

#endif
