/*
 * decimal.h: the one reading of an unsigned decimal number in weir's own
 * files and protocols: digits only (no sign, no blank), no leading zero
 * ("0" itself is a number, "00" and "07" are not), and at most a bound
 * the caller names, checked without overflow.  Configuration values
 * (durations, policy.conf's times and limits) and others' formats
 * (SMTP's SIZE=, JSON, qmail's u and p records in a todo file, which
 * qmail reads with leading zeros) have rules of their own and do not
 * use it.
 *
 * Trusts: nothing about the bytes.  Config keys: none.
 */
#ifndef WEIR_DECIMAL_H
#define WEIR_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* s[0..n) whole: 0 with *v, or -1 (empty, a byte that is not a digit, a
 * leading zero, above max). */
int dec_parse(const char *s, size_t n, uint64_t max, uint64_t *v);

/* The number at the start of s[0..n), up to the first byte that is not
 * a digit: how many digits it has, with *v; 0 if there is none, it has
 * a leading zero, or it is above max. */
size_t dec_prefix(const char *s, size_t n, uint64_t max, uint64_t *v);

#endif
