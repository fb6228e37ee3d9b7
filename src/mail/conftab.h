/*
 * conftab.h: the key tables of weir.conf (config.c) and policy.conf
 * (policy.c).  Each file declares its keys once, as rows of struct
 * conftab_key: name, kind, default, range and where the value goes in
 * the section's struct.  From a table come the libconfuse options
 * (conftab_opts), the check of a value while the parser still knows its
 * line (conftab_check, from a validate callback), the defaults and the
 * values into the struct (conftab_defaults, conftab_copy, or conftab_set
 * for a value read without libconfuse), and freeing them (conftab_free).
 *
 * The rules of every kind are here, written once; a file's own rules for
 * its string values (weir.conf's host names and account names,
 * policy.conf's unit, reset and rate) come from the file as a
 * conftab_rule.  The messages, each after "file:line: " (confparse.h):
 *
 *   NAME must not be empty                          K_STR
 *   NAME = "V": WHY                                 string kinds, the rule's
 *   NAME = "V": must be one of A, B, C              K_CHOICE
 *   NAME: "V": WHY                                  K_DURATION, K_WORD(S)
 *   NAME = N is out of range MIN..MAX[ seconds]     K_INT, K_LONG, K_DURATION
 *   NAME: an empty string in the list               K_LIST
 *   NAME: empty pattern                             K_PATTERNS
 */
#ifndef WEIR_CONFTAB_H
#define WEIR_CONFTAB_H

#include <confuse.h>
#include <stddef.h>

enum conftab_kind {
	K_STR,		/* a string, not empty: char * */
	K_OPTSTR,	/* a string, "" for none: char *, NULL for "" */
	K_ACCOUNT,	/* a user or group name, "" for none: as K_OPTSTR */
	K_INT,		/* an integer, min..max: unsigned */
	K_LONG,		/* an integer, min..max: long long */
	K_DURATION,	/* "90s", "5m", "1d" (lib/timefmt.h), min..max s: long long */
	K_BOOL,		/* true or false: int 0 or 1 */
	K_LIST,		/* strings, none empty: struct strlist (config.h) */
	K_PATTERNS,	/* patterns, none empty: not stored (CONFTAB_NOFF) */
	K_CHOICE,	/* one of choices: int, its index; -1 without a default */
	K_WORD,		/* a string the rule reads and stores */
	K_WORDS,	/* strings the rule reads: not stored (CONFTAB_NOFF) */
};

struct conftab_key {
	const char *name;
	enum conftab_kind kind;
	const char *def;	/* K_STR, K_OPTSTR, K_DURATION, K_CHOICE, K_WORD; NULL: none */
	long long idef, min, max; /* K_INT, K_LONG, K_BOOL default; range of K_INT, K_LONG, K_DURATION */
	size_t off;		/* where the value goes in the struct; CONFTAB_NOFF: read by the caller */
	const char *const *choices; /* K_CHOICE: the values, NULL-ended */
};

#define CONFTAB_NOFF ((size_t)-1)

/* A file's rule for a string value v of k (K_STR, K_OPTSTR, K_ACCOUNT
 * when not empty; K_WORD, each of K_WORDS): why it is wrong, or NULL.
 * For a K_WORD given field, it also stores the value there. */
typedef const char *conftab_rule(const struct conftab_key *k, const char *v, void *field);

/* The key of tab[0..n) called name, or NULL. */
const struct conftab_key *conftab_find(const struct conftab_key *tab, size_t n,
    const char *name);

/* The libconfuse options of tab, into opts[0..n), and CFG_END() at
 * opts[n].  Every key is without a default (CFGF_NODEFAULT): the
 * defaults are conftab_defaults()'. */
void conftab_opts(const struct conftab_key *tab, size_t n, cfg_opt_t *opts);

/* For a validate callback: opt's values checked against k (NULL: not
 * one of the table's, 0), rule for the file's own (NULL: none).  0 ok;
 * -1 after cfg_error(). */
int conftab_check(cfg_t *cfg, cfg_opt_t *opt, const struct conftab_key *k,
    conftab_rule *rule);

/* Every stored key of tab at its default, into the struct at base
 * (whose lists and strings hold nothing yet). */
void conftab_defaults(const struct conftab_key *tab, size_t n, void *base,
    conftab_rule *rule);

/* The values set in cfg (checked by conftab_check), over the defaults
 * already in base. */
void conftab_copy(const struct conftab_key *tab, size_t n, void *base, cfg_t *cfg,
    conftab_rule *rule);

/* v, a value given as text (config.c's salvage of a file that does not
 * load), checked as conftab_check() checks it and stored in base.  0
 * stored; -1 not valid, or of a kind not read from text (K_BOOL,
 * K_CHOICE, lists, words). */
int conftab_set(const struct conftab_key *k, const char *v, void *base, conftab_rule *rule);

/* The value of k stored in the struct at base, as the file would write
 * it ("text", 25, 5m, true, {"a", "b"}), into out; "(none)" for a
 * string or list left unset. */
struct buf;
void conftab_format(const struct conftab_key *k, const void *base, struct buf *out);

/* The strings and lists of tab in base freed, and NULL or empty. */
void conftab_free(const struct conftab_key *tab, size_t n, void *base);

#endif
