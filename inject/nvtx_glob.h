/* inject/nvtx_glob.h — the nvtx: step marker's glob, matched against every
 * pushed or started range name (nothing is cached per name, so a million
 * distinct names cost the same as one): fnmatch(pattern, name, 0) as in a
 * UTF-8 locale, whatever the program's locale, without a locale lookup, a
 * lock or an allocation. '*', '?' (one UTF-8 character), '[...]' (members,
 * ranges by code point, '!' or '^' negation, [:class:] for ASCII
 * characters), '\\' escapes; a '[' without its ']' is a plain '['; a
 * pattern ending in a lone '\\' matches nothing. Compiled once: a pattern
 * that is a literal, or a literal with a leading and/or trailing '*', is a
 * strcmp, prefix, suffix or substring test. */
#ifndef SP_NVTX_GLOB_H
#define SP_NVTX_GLOB_H

#include <stddef.h>

typedef struct sp_glob {
    const char *pat;      /* the whole pattern (kept by the caller) */
    int kind;             /* how it is matched: see nvtx_glob.c */
    size_t len;           /* the literal's length (literal kinds) */
    const char *lit;      /* the literal inside pat (literal kinds) */
    char inner[256];      /* *literal*: the literal alone, for strstr */
} sp_glob_t;

void sp_glob_compile(sp_glob_t *g, const char *pat);
int sp_glob_match(const sp_glob_t *g, const char *s);   /* 1 match, 0 not */

#endif
