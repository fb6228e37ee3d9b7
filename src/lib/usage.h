/*
 * usage.h: --help and --version, the same in every weir program.  The
 * first argument alone decides (as GNU programs do for these two), before
 * any other option parsing, configuration or privilege change.  The
 * version is debian/changelog's latest (the Makefile's version.h).
 * Trusts: nothing.  Config keys: none.
 */
#ifndef WEIR_USAGE_H
#define WEIR_USAGE_H

/* argv[1] is "--help": text (the usage, ending in '\n') on stdout;
 * "--version": "NAME (weir) VERSION" on stdout.  Returns the exit code
 * (0, or 1 if stdout could not be written) when it answered, -1 when
 * argv[1] is neither. */
int usage_std(int argc, char *const *argv, const char *name, const char *text);

#endif
