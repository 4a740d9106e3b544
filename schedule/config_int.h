/* schedule/config_int.h — what config.c, config_yaml.c and marker.c share, and
 * nothing else may include: the key table's row type, the helpers every
 * configuration message is built with and the near-miss matcher behind every
 * "did you mean". They live in config.c; they are extern only because the
 * loader is split over three files, so they carry an sp_cfg_ prefix to stay
 * apart from the rest of the library, and -fvisibility=hidden keeps them out
 * of libstepprof.so's exports. */
#ifndef SP_CONFIG_INT_H
#define SP_CONFIG_INT_H

#include <stdarg.h>
#include <stddef.h>

#include "config.h"

/* ---- the key table (rows from config_keys.h) ------------------------------ */

struct choice; /* a word an ENUM or WORD key accepts; only config.c looks inside */

enum key_type { T_BOOL, T_LONG, T_STR, T_ENUM, T_WORD, T_MARKER };

struct key {
    const char *name; /* dotted below profiling:, e.g. "table.sort_by" */
    enum key_type type;
    size_t off, size; /* of its field in sp_config_t */
    const char *def;
    long min, max;
    const struct choice *choices;
    const char *help;
};

/* Indexed by SP_CFG_<ID>, so that k - sp_cfg_keys is the index into cfg->set. */
extern const struct key sp_cfg_keys[SP_CFG_NKEYS];

/* The key named name (dotted), or NULL. */
const struct key *sp_cfg_find_key(const char *name);
/* Whether name is the group of some dotted key ("table"). */
int sp_cfg_is_group(const char *name);
/* Writes the "expected ..." sentence for k to buf; returns -1. */
int sp_cfg_expect(const struct key *k, char *buf, size_t n);
/* Parses text into k's field and records src (SP_CFG_SRC_*) in cfg->set;
 * on failure writes `"<text>": <why>` to msg and returns -1. */
int sp_cfg_apply(sp_config_t *cfg, const struct key *k, const char *text, int src, char *msg, size_t n);

/* ---- messages --------------------------------------------------------------- */

/* Append printf output to buf, always NUL-terminated, silently truncated. */
void sp_cfg_vappend(char *buf, size_t n, const char *fmt, va_list ap);
__attribute__((format(printf, 3, 4))) void sp_cfg_append(char *buf, size_t n, const char *fmt, ...);
/* Replaces buf with the message and returns -1, so a failure is one statement. */
__attribute__((format(printf, 3, 4))) int sp_cfg_say(char *buf, size_t n, const char *fmt, ...);
/* Prints the one "stepprof: ...; profiling disabled" line of a failed load; returns -1. */
__attribute__((format(printf, 1, 2))) int sp_cfg_fail(const char *fmt, ...);

/* ---- near misses ------------------------------------------------------------ */

/* The closest candidate so far: score SIZE_MAX and name "" while none is close. */
struct best {
    size_t score;
    char name[64];
};

/* Levenshtein distance ignoring case and '.'/'_'/'-'; SIZE_MAX for long names. */
size_t sp_cfg_distance(const char *a, const char *b);
/* Makes name (namelen bytes) the best if cand is closer to typed than the best so far. */
void sp_cfg_consider(struct best *b, const char *typed, const char *cand, const char *name, size_t namelen);
/* The key (with groups, also the group) closest to typed, in b->name; "" if none. */
const char *sp_cfg_suggest_key(const char *typed, int groups, struct best *b);

/* ---- config_yaml.c ---------------------------------------------------------- */

/* Reads the profiling: section of path into cfg. A missing file is fine
 * unless named (by PROF_CONFIG). 0 ok; -1 with its one line printed. */
int sp_cfg_load_file(sp_config_t *cfg, const char *path, int named);

#endif
