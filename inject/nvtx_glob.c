/* inject/nvtx_glob.c — see nvtx_glob.h. The general matcher walks pattern
 * and name once, keeping one backtrack point (the last '*'): every element
 * but '*' takes exactly one character, so retrying from the last '*' only is
 * enough. Characters are UTF-8 sequences; a byte that starts no valid
 * sequence is a character of its own (never equal to a code point). */
#define _GNU_SOURCE
#include "nvtx_glob.h"

#include <stdint.h>
#include <string.h>

enum { G_GENERAL, G_EXACT, G_PREFIX, G_SUFFIX, G_CONTAINS, G_ANY };

#define NOT_CHAR 0x80000000u   /* | byte: an invalid byte */

/* The character at s (not at its NUL): its code point, its length in *n. */
static uint32_t decode(const char *str, int *n)
{
    const unsigned char *s = (const unsigned char *)str;
    uint32_t c = s[0];
    int len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (len <= 1) {
        *n = 1;
        return len ? c : NOT_CHAR | c;
    }
    uint32_t cp = c & (0x7Fu >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *n = 1;
            return NOT_CHAR | c;
        }
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_of[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
        *n = 1;
        return NOT_CHAR | c;
    }
    *n = len;
    return cp;
}

static const char *const class_names[] = {"alpha", "digit", "alnum", "upper", "lower", "space",
                                           "blank", "punct", "xdigit", "cntrl", "graph", "print"};

/* [:name:] of len bytes takes c: 1 or 0 (only ASCII characters are in a
 * class); -1 for an unknown name. */
static int in_class(const char *name, size_t len, uint32_t c)
{
    int alpha = (c | 32) - 'a' < 26, digit = c - '0' < 10, graph = c - 0x21 < 94;
    for (size_t k = 0; k < sizeof class_names / sizeof class_names[0]; k++) {
        if (strlen(class_names[k]) != len || memcmp(class_names[k], name, len) != 0)
            continue;
        if (c >= 0x80)
            return 0;
        switch (k) {
        case 0: return alpha;
        case 1: return digit;
        case 2: return alpha || digit;
        case 3: return c - 'A' < 26;
        case 4: return c - 'a' < 26;
        case 5: return c == ' ' || c - '\t' < 5;
        case 6: return c == ' ' || c == '\t';
        case 7: return graph && !alpha && !digit;
        case 8: return digit || (c | 32) - 'a' < 6;
        case 9: return c < 0x20 || c == 0x7F;
        case 10: return graph;
        default: return c - 0x20 < 95;
        }
    }
    return -1;
}

/* A member character of a bracket at *p (a '\\' escapes the next one). */
static uint32_t member(const char **p)
{
    int n;
    if (**p == '\\' && (*p)[1])
        (*p)++;
    uint32_t c = decode(*p, &n);
    *p += n;
    return c;
}

/* The bracket expression at p ('['): 1 when it takes c, 0 when not, with
 * *end past its ']'; -1 when p starts none (no closing ']', an unknown
 * class): then '[' is a plain character. */
static int bracket(const char *p, uint32_t c, const char **end)
{
    const char *q = p + 1;
    int negate = *q == '!' || *q == '^', hit = 0;
    q += negate;
    for (int first = 1; first || *q != ']'; first = 0) {
        if (!*q)
            return -1;
        if (q[0] == '[' && q[1] == ':') {
            const char *close = strstr(q + 2, ":]");
            if (!close)
                return -1;
            int r = in_class(q + 2, (size_t)(close - q - 2), c);
            if (r < 0)
                return -1;
            hit |= r;
            q = close + 2;
            continue;
        }
        uint32_t lo = member(&q), hi = lo;
        if (q[0] == '-' && q[1] && q[1] != ']') {
            q++;
            hi = member(&q);
        }
        if (!(lo & NOT_CHAR) && !(hi & NOT_CHAR) && !(c & NOT_CHAR) ? lo <= c && c <= hi : c == lo)
            hit = 1;
    }
    *end = q + 1;
    return hit != negate;
}

static __attribute__((noinline)) int general(const char *p, const char *s)
{
    const char *star_p = NULL, *star_s = NULL;
    for (;;) {
        if (*p == '*') {
            star_p = ++p;
            star_s = s;
            continue;
        }
        if (!*s)
            break;
        int n, ok;
        uint32_t c = decode(s, &n);
        const char *next = p + 1;
        if (*p == '?') {
            ok = 1;
        } else if (*p == '[' && (ok = bracket(p, c, &next)) >= 0) {
            /* a bracket expression: ok says */
        } else {
            if (*p == '\\' && !*++p)
                return 0;        /* a lone trailing '\\' matches nothing */
            int m;
            ok = *p && decode(p, &m) == c;
            next = p + (*p ? m : 0);
        }
        if (ok) {
            p = next;
            s += n;
            continue;
        }
        if (!star_p)
            return 0;
        decode(star_s, &n);     /* the last '*' takes one more character */
        p = star_p;
        s = star_s += n;
    }
    return *p == 0;
}

void sp_glob_compile(sp_glob_t *g, const char *pat)
{
    size_t n = strlen(pat), a = 0, b = n;
    while (a < n && pat[a] == '*')
        a++;
    while (b > a && pat[b - 1] == '*')
        b--;
    *g = (sp_glob_t){pat, G_GENERAL, b - a, pat + a, ""};
    if (strcspn(pat + a, "*?[\\") < b - a)
        return;                  /* a metacharacter inside: the general matcher */
    int lead = a > 0, trail = b < n;
    g->kind = n && a == n ? G_ANY : lead && trail ? G_CONTAINS : lead ? G_SUFFIX : trail ? G_PREFIX : G_EXACT;
    if (g->kind == G_CONTAINS && g->len >= sizeof g->inner)
        g->kind = G_GENERAL;
    else if (g->kind == G_CONTAINS)
        memcpy(g->inner, g->lit, g->len); /* NUL-terminated: zeroed above */
}

static __attribute__((noinline)) int suffix(const sp_glob_t *g, const char *s)
{
    size_t n = strlen(s);
    return n >= g->len && memcmp(s + n - g->len, g->lit, g->len) == 0;
}

static __attribute__((noinline)) int contains(const sp_glob_t *g, const char *s)
{
    return strstr(s, g->inner) != NULL;
}

/* The first byte decides most names, without a call. */
int sp_glob_match(const sp_glob_t *g, const char *s)
{
    switch (g->kind) {
    case G_ANY:
        return 1;
    case G_EXACT:
        return s[0] == g->lit[0] && (!s[0] || strcmp(s + 1, g->lit + 1) == 0);
    case G_PREFIX:
        return s[0] == g->lit[0] && strncmp(s, g->lit, g->len) == 0;
    case G_SUFFIX:
        return suffix(g, s);
    case G_CONTAINS:
        return contains(g, s);
    default:
        return general(g->pat, s);
    }
}
