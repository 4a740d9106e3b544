/* schedule/config.c — loads sp_config_t from the key table (config_keys.h),
 * the `profiling:` section of a YAML file (libyaml event API, so a large
 * training config costs no more than one pass and no document tree) and the
 * PROF_* environment. It owns every message about configuration: each problem
 * is one "stepprof:" line naming where it is (file:line:column: or PROF_X="v":)
 * and what was expected, with a "did you mean" for near misses. It keeps no
 * state outside the sp_config_t it fills; it runs once, at activation. */
#define _GNU_SOURCE
#include "config.h"

#include "../collectors/log.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define DISABLED "; profiling disabled for this run"

struct choice {
    const char *word;
    int value;
};

static const struct choice log_choices[] = {
    {"info", SP_LOG_INFO}, {"quiet", SP_LOG_WARN}, {"debug", SP_LOG_DEBUG}, {NULL, 0}};
static const struct choice print_choices[] = {{"stderr", SP_TABLE_PRINT_STDERR},
                                              {"file", SP_TABLE_PRINT_FILE},
                                              {"both", SP_TABLE_PRINT_BOTH},
                                              {"none", SP_TABLE_PRINT_NONE},
                                              {NULL, 0}};
/* torch's key_averages().table(sort_by=...) names; "" lets the exporter pick. */
static const struct choice sort_choices[] = {
    {"", 0}, {"cpu_time", 0}, {"cuda_time", 0}, {"cpu_time_total", 0}, {"cuda_time_total", 0},
    {"self_cpu_time_total", 0}, {"self_cuda_time_total", 0}, {"cpu_memory_usage", 0},
    {"cuda_memory_usage", 0}, {"self_cpu_memory_usage", 0}, {"self_cuda_memory_usage", 0},
    {"count", 0}, {NULL, 0}};
static const struct choice bool_words[] = {{"true", 1}, {"false", 0}, {"yes", 1}, {"no", 0}, {"on", 1},
                                           {"off", 0},  {"1", 1},     {"0", 0},   {NULL, 0}};

enum type { T_BOOL, T_LONG, T_STR, T_ENUM, T_WORD, T_MARKER };

struct key {
    const char *name;
    enum type type;
    size_t off, size;
    const char *def;
    long min, max;
    const struct choice *choices;
    const char *help;
};

#define FIELD_SIZE(f) sizeof(((sp_config_t *)0)->f)
#define KEY_ROW(id, name, type, field, def, min, max, choices, help)                               \
    [SP_CFG_##id] = {name, T_##type, offsetof(sp_config_t, field), FIELD_SIZE(field), def, min, max, choices, help},
static const struct key keys[SP_CFG_NKEYS] = {SP_CONFIG_KEYS(KEY_ROW)};

/* A row whose field does not match its type would write out of bounds. */
#define SIZE_OK(t, sz)                                                                             \
    ((t) == T_BOOL || (t) == T_ENUM ? (sz) == sizeof(int) : (t) == T_LONG ? (sz) == sizeof(long) : (sz) > 1)
#define KEY_CHECK(id, name, type, field, ...)                                                      \
    _Static_assert(SIZE_OK(T_##type, FIELD_SIZE(field)), "field of key " name " does not fit its type");
SP_CONFIG_KEYS(KEY_CHECK)

/* ---- near-miss suggestions ------------------------------------------------ */

/* Case and '.'/'_'/'-' are not worth a "did you mean" mismatch. */
static int fold(int ch)
{
    ch = tolower((unsigned char)ch);
    return ch == '.' || ch == '-' ? '_' : ch;
}

/* Levenshtein distance on folded characters; SIZE_MAX for names too long to be keys. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (fold(a[i - 1]) != fold(b[j - 1]));
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static int folded_prefix(const char *p, const char *s)
{
    size_t n = strlen(p);
    if (n < 3 || n > strlen(s))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (fold(p[i]) != fold(s[i]))
            return 0;
    return 1;
}

/* How close a typed name is to a candidate: the edit distance when <= 2,
 * 3 when one is a prefix of the other (warm -> warmup, output_directory ->
 * output_dir), SIZE_MAX when they are unrelated. */
static size_t closeness(const char *typed, const char *cand)
{
    size_t d = distance(typed, cand);
    if (d <= 2)
        return d;
    return folded_prefix(typed, cand) || folded_prefix(cand, typed) ? 3 : SIZE_MAX;
}

struct best {
    size_t score;
    char name[64];
};

static void consider(struct best *b, const char *typed, const char *cand, const char *name, size_t namelen)
{
    size_t s = closeness(typed, cand);
    if (s < b->score && namelen < sizeof b->name) {
        b->score = s;
        memcpy(b->name, name, namelen);
        b->name[namelen] = 0;
    }
}

/* The key (or, with groups, the group such as "table") closest to typed. A
 * nested key also matches by its leaf, so a top-level `sort_by:` suggests
 * table.sort_by. Returns "" when nothing is close. */
static const char *suggest_key(const char *typed, int groups, struct best *b)
{
    b->score = SIZE_MAX;
    b->name[0] = 0;
    for (const struct key *k = keys; k < keys + SP_CFG_NKEYS; k++) {
        consider(b, typed, k->name, k->name, strlen(k->name));
        const char *dot = strchr(k->name, '.');
        if (!dot)
            continue;
        consider(b, typed, dot + 1, k->name, strlen(k->name));
        char group[64];
        size_t glen = (size_t)(dot - k->name);
        if (groups && glen < sizeof group) {
            memcpy(group, k->name, glen);
            group[glen] = 0;
            consider(b, typed, group, group, glen);
        }
    }
    return b->name;
}

/* ---- value parsing ---------------------------------------------------------- */

static void vappend(char *buf, size_t n, const char *fmt, va_list ap)
{
    size_t used = strlen(buf);
    if (used + 1 < n)
        vsnprintf(buf + used, n - used, fmt, ap);
}

/* Appends printf output to buf (always NUL-terminated, silently truncated). */
__attribute__((format(printf, 3, 4))) static void append(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vappend(buf, n, fmt, ap);
    va_end(ap);
}

/* Writes a reason into buf and returns -1: the shape of every failure below. */
__attribute__((format(printf, 3, 4))) static int say(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    buf[0] = 0;
    va_start(ap, fmt);
    vappend(buf, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The word of list equal to s (any case, blanks around s ignored), or NULL. */
static const struct choice *match_word(const struct choice *list, const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    for (; list->word; list++)
        if (strlen(list->word) == n && strncasecmp(list->word, s, n) == 0)
            return list;
    return NULL;
}

int sp_config_parse_bool(const char *s, int *out)
{
    const struct choice *c = s ? match_word(bool_words, s) : NULL;
    if (!c)
        return -1;
    *out = c->value;
    return 0;
}

int sp_config_parse_long(const char *s, long *out)
{
    if (!s)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    /* strtol alone would take "", "0x10" as 0 and blanks after a sign. */
    if (!isdigit((unsigned char)s[*s == '+' || *s == '-']))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno == ERANGE || *end)
        return -1;
    *out = v;
    return 0;
}

/* "expected ..." for key k: the sentence every wrong value of k gets. */
static int expect(const struct key *k, char *buf, size_t n)
{
    switch (k->type) {
    case T_BOOL:
        return say(buf, n, "expected a boolean (true/false, yes/no, on/off, 1/0)");
    case T_LONG:
        if (k->max == SP_CFG_BIG)
            return say(buf, n, "expected an integer >= %ld", k->min);
        return say(buf, n, "expected an integer from %ld to %ld", k->min, k->max);
    case T_ENUM:
    case T_WORD:
        say(buf, n, "expected one of");
        for (const struct choice *c = k->choices; c->word; c++)
            append(buf, n, "%s %s", c == k->choices ? "" : ",", c->word[0] ? c->word : "\"\" (automatic)");
        return -1;
    case T_STR:
        return say(buf, n, "expected a string");
    case T_MARKER:
        break;
    }
    return say(buf, n, "expected a marker such as nvtx:train_step");
}

static int copy_text(const struct key *k, const char *text, char *dst, char *why, size_t n)
{
    size_t len = strlen(text);
    if (len >= k->size)
        return say(why, n, "longer than %zu bytes", k->size - 1);
    memcpy(dst, text, len + 1);
    return 0;
}

/* Parses text into k's field, or writes why and leaves the field alone. */
static int parse_value(const struct key *k, const char *text, sp_config_t *cfg, char *why, size_t n)
{
    void *f = (char *)cfg + k->off;
    long v = 0;
    int ok;
    const struct choice *c;
    sp_marker_t m;
    switch (k->type) {
    case T_BOOL:
        return sp_config_parse_bool(text, f) == 0 ? 0 : expect(k, why, n);
    case T_LONG:
        ok = sp_config_parse_long(text, &v) == 0;
        if (ok && v >= k->min && v <= k->max) {
            *(long *)f = v;
            return 0;
        }
        expect(k, why, n);
        if (ok && v > k->max && k->max == SP_CFG_BIG)
            append(why, n, " and at most %ld", k->max);
        return -1;
    case T_STR:
        return copy_text(k, text, f, why, n);
    case T_ENUM:
    case T_WORD:
        /* ENUM stores the word's value, WORD the canonical word itself. */
        if ((c = match_word(k->choices, text)) && k->type == T_ENUM)
            *(int *)f = c->value;
        if (c)
            return k->type == T_ENUM ? 0 : copy_text(k, c->word, f, why, n);
        expect(k, why, n);
        struct best b = {SIZE_MAX, ""};
        for (c = k->choices; c->word; c++)
            if (c->word[0])
                consider(&b, text, c->word, c->word, strlen(c->word));
        if (b.name[0])
            append(why, n, " (did you mean %s?)", b.name);
        return -1;
    case T_MARKER:
        if (sp_config_parse_marker(text, &m, why, n) != 0 || copy_text(k, text, f, why, n) != 0)
            return -1;
        cfg->marker = m;
        return 0;
    }
    return -1;
}

