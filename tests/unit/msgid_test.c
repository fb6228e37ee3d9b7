/*
 * msgid_test.c: a message's id in the logs (mail/queue.h's queue_msgid
 * and queue_parse_msgid): INODE.SEC.NSEC, written and read back, and
 * every malformed form refused (weir-remote -q and its session requests,
 * `weir delete ID`, qqclient.c's reading of weir-queue's answer).
 *
 * Trusts: nothing.  Test code only (Criterion).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "mail/queue.h"

Test(msgid, written_and_read_back)
{
	struct timespec t = { 1795629217, 457678383 }, z = { 1795629217, 7 }, back;
	char id[QUEUE_ID_MAX];
	unsigned long ino;

	cr_assert_str_eq(queue_msgid(id, 11087092, &t), "11087092.1795629217.457678383");
	cr_assert_eq(queue_parse_msgid(id, &ino, &back), 0);
	cr_assert(ino == 11087092 && back.tv_sec == t.tv_sec && back.tv_nsec == t.tv_nsec);
	/* The nanoseconds always have nine digits, leading zeros kept. */
	cr_assert_str_eq(queue_msgid(id, 5, &z), "5.1795629217.000000007");
	cr_assert_eq(queue_parse_msgid(id, &ino, &back), 0);
	cr_assert(ino == 5 && back.tv_nsec == 7);
}

Test(msgid, malformed_refused)
{
	static const char *const bad[] = {
		"", "1", "1.2", "1.2.3", "1.2.12345678", "1.2.1234567890", "01.2.123456789",
		"1.02.123456789", ".2.123456789", "1..123456789", "1.2.123456789.",
		"1.2.12345678x", "1.2.123456789\n", "-1.2.123456789", "1.-2.123456789",
		"1.2.+23456789", " 1.2.123456789", "1.2. 23456789",
		"99999999999999999999999.2.123456789", "1.99999999999999999999999.123456789",
	};
	struct timespec t;
	unsigned long ino;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(queue_parse_msgid(bad[i], &ino, &t), -1, "\"%s\" taken", bad[i]);
}
