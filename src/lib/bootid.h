/*
 * bootid.h: this boot's id, /proc/sys/kernel/random/boot_id: what tells
 * a CLOCK_MONOTONIC time written before a reboot from one of this boot
 * (the gate's journal, weir-send's flight files).
 * Trusts: the kernel's file only once it has the form of an id.
 * Config keys: none.
 */
#ifndef WEIR_BOOTID_H
#define WEIR_BOOTID_H

#include <stddef.h>

#define BOOT_ID_MAX 40	/* with the NUL */

/* The boot id (hexadecimal digits and dashes), or "unknown". */
void boot_id(char *out, size_t n);

#endif
