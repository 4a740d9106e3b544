/* schedule/config.c — resolves sp_config_t: defaults from the key table
 * (config_keys.h), then the `profiling:` section of the file (read by
 * config_yaml.c), then the PROF_* environment, then the rules that span
 * several keys. It owns the table's rows and how a value of each type is
 * parsed, and the message and "did you mean" helpers that config_yaml.c and
 * marker.c share through config_int.h, so that every configuration problem,
 * wherever it is found, is one "stepprof:" line naming where it is
 * (file:line:column: or PROF_X="v":) and what was expected. The marker grammar
 * is marker.c's. It keeps no state outside the sp_config_t it fills; it runs
 * once, at activation. */
#define _GNU_SOURCE
#include "config_int.h"

#include "../collectors/log.h"
#include "../collectors/rank.h"
#include "../collectors/stacks.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int sp_config_torch_default;
int sp_config_no_driver;

#define DISABLED "; profiling disabled for this run"

/* A word an ENUM or WORD key accepts; each list ends with a NULL word. */
struct choice {
    const char *word;
    int value;
};

static const struct choice log_choices[] = {
    {"info", SP_LOG_INFO}, {"quiet", SP_LOG_WARN}, {"debug", SP_LOG_DEBUG}, {NULL, 0}};
static const struct choice print_choices[] = {{"stderr", SP_TABLE_PRINT_STDERR}, {"file", SP_TABLE_PRINT_FILE},
                                              {"both", SP_TABLE_PRINT_BOTH},     {"none", SP_TABLE_PRINT_NONE},
                                              {NULL, 0}};
static const struct choice gzip_lib_choices[] = {
    {"auto", SP_GZIP_LIB_AUTO}, {"isal", SP_GZIP_LIB_ISAL}, {"zlib", SP_GZIP_LIB_ZLIB}, {NULL, 0}};
static const struct choice cupti_api_filter_choices[] = {
    {"queries", SP_CUPTI_API_FILTER_QUERIES}, {"none", SP_CUPTI_API_FILTER_NONE}, {NULL, 0}};
static const struct choice launch_durations_choices[] = {
    {"auto", SP_LAUNCH_DUR_AUTO}, {"host", SP_LAUNCH_DUR_HOST}, {"start", SP_LAUNCH_DUR_START}, {NULL, 0}};
static const struct choice unwinder_choices[] = {{"auto", SP_STACK_UNWIND_AUTO},
                                                {"libunwind", SP_STACK_UNWIND_LIBUNWIND},
                                                {"glibc", SP_STACK_UNWIND_GLIBC},
                                                {NULL, 0}};
/* torch's key_averages().table(sort_by=...) names; "" lets the exporter pick. */
static const struct choice sort_choices[] = {
    {"", 0}, {"cpu_time", 0}, {"cuda_time", 0}, {"cpu_time_total", 0}, {"cuda_time_total", 0},
    {"self_cpu_time_total", 0}, {"self_cuda_time_total", 0}, {"cpu_memory_usage", 0},
    {"cuda_memory_usage", 0}, {"self_cpu_memory_usage", 0}, {"self_cuda_memory_usage", 0},
    {"count", 0}, {NULL, 0}};
static const struct choice bool_words[] = {{"true", 1}, {"false", 0}, {"yes", 1}, {"no", 0}, {"on", 1},
                                           {"off", 0},  {"1", 1},     {"0", 0},   {NULL, 0}};

#define FIELD_SIZE(f) sizeof(((sp_config_t *)0)->f)
#define KEY_ROW(id, name, type, field, def, min, max, choices, help)                               \
    [SP_CFG_##id] = {name, T_##type, offsetof(sp_config_t, field), FIELD_SIZE(field), def, min, max, choices, help},
const struct key sp_cfg_keys[SP_CFG_NKEYS] = {SP_CONFIG_KEYS(KEY_ROW)};

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
size_t sp_cfg_distance(const char *a, const char *b)
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
    size_t d = sp_cfg_distance(typed, cand);
    if (d <= 2)
        return d;
    return folded_prefix(typed, cand) || folded_prefix(cand, typed) ? 3 : SIZE_MAX;
}

void sp_cfg_consider(struct best *b, const char *typed, const char *cand, const char *name, size_t namelen)
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
const char *sp_cfg_suggest_key(const char *typed, int groups, struct best *b)
{
    b->score = SIZE_MAX;
    b->name[0] = 0;
    for (const struct key *k = sp_cfg_keys; k < sp_cfg_keys + SP_CFG_NKEYS; k++) {
        sp_cfg_consider(b, typed, k->name, k->name, strlen(k->name));
        const char *dot = strchr(k->name, '.');
        if (!dot)
            continue;
        sp_cfg_consider(b, typed, dot + 1, k->name, strlen(k->name));
        char group[64];
        size_t glen = (size_t)(dot - k->name);
        if (groups && glen < sizeof group) {
            memcpy(group, k->name, glen);
            group[glen] = 0;
            sp_cfg_consider(b, typed, group, group, glen);
        }
    }
    return b->name;
}

/* ---- messages --------------------------------------------------------------- */

void sp_cfg_vappend(char *buf, size_t n, const char *fmt, va_list ap)
{
    size_t used = strlen(buf);
    if (used + 1 < n)
        vsnprintf(buf + used, n - used, fmt, ap);
}

/* Appends printf output to buf (always NUL-terminated, silently truncated). */
void sp_cfg_append(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sp_cfg_vappend(buf, n, fmt, ap);
    va_end(ap);
}

/* Writes a reason into buf and returns -1: the shape of every failure in the loader. */
int sp_cfg_say(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    buf[0] = 0;
    va_start(ap, fmt);
    sp_cfg_vappend(buf, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- value parsing ---------------------------------------------------------- */

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
int sp_cfg_expect(const struct key *k, char *buf, size_t n)
{
    switch (k->type) {
    case T_BOOL:
        return sp_cfg_say(buf, n, "expected a boolean (true/false, yes/no, on/off, 1/0)");
    case T_LONG:
        if (k->max == SP_CFG_BIG)
            return sp_cfg_say(buf, n, "expected an integer >= %ld", k->min);
        return sp_cfg_say(buf, n, "expected an integer from %ld to %ld", k->min, k->max);
    case T_ENUM:
    case T_WORD:
        sp_cfg_say(buf, n, "expected one of");
        for (const struct choice *c = k->choices; c->word; c++)
            sp_cfg_append(buf, n, "%s %s", c == k->choices ? "" : ",", c->word[0] ? c->word : "\"\" (automatic)");
        return -1;
    case T_STR:
        return sp_cfg_say(buf, n, "expected a string");
    case T_MARKER:
        break;
    }
    return sp_cfg_say(buf, n, "expected a marker such as nvtx:train_step");
}

static int copy_text(const struct key *k, const char *text, char *dst, char *why, size_t n)
{
    size_t len = strlen(text);
    if (len >= k->size)
        return sp_cfg_say(why, n, "longer than %zu bytes", k->size - 1);
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
        return sp_config_parse_bool(text, f) == 0 ? 0 : sp_cfg_expect(k, why, n);
    case T_LONG:
        ok = sp_config_parse_long(text, &v) == 0;
        if (ok && v >= k->min && v <= k->max) {
            *(long *)f = v;
            return 0;
        }
        sp_cfg_expect(k, why, n);
        if (ok && v > k->max && k->max == SP_CFG_BIG)
            sp_cfg_append(why, n, " and at most %ld", k->max);
        return -1;
    case T_STR:
        /* The one string with a syntax: the rank list. */
        if (k == &sp_cfg_keys[SP_CFG_RANKS] && text[0] && sp_rank_in_list(text, 0, why, n) < 0)
            return -1;
        return copy_text(k, text, f, why, n);
    case T_ENUM:
    case T_WORD:
        /* ENUM stores the word's value, WORD the canonical word itself. */
        if ((c = match_word(k->choices, text)) && k->type == T_ENUM)
            *(int *)f = c->value;
        if (c)
            return k->type == T_ENUM ? 0 : copy_text(k, c->word, f, why, n);
        sp_cfg_expect(k, why, n);
        struct best b = {SIZE_MAX, ""};
        for (c = k->choices; c->word; c++)
            if (c->word[0])
                sp_cfg_consider(&b, text, c->word, c->word, strlen(c->word));
        if (b.name[0])
            sp_cfg_append(why, n, " (did you mean %s?)", b.name);
        return -1;
    case T_MARKER:
        if (sp_config_parse_marker(text, &m, why, n) != 0 || copy_text(k, text, f, why, n) != 0)
            return -1;
        cfg->marker = m;
        return 0;
    }
    return -1;
}

/* ---- reporting ---------------------------------------------------------- */

/* Prints the one error line of a failed load. */
int sp_cfg_fail(const char *fmt, ...)
{
    char msg[1024] = "";
    va_list ap;
    va_start(ap, fmt);
    sp_cfg_vappend(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_log(SP_LOG_ERROR, "%s" DISABLED, msg);
    return -1;
}

/* Parses text into key k, or writes `"<text>": <why>` to msg for the caller
 * to prefix with where the text came from. */
int sp_cfg_apply(sp_config_t *cfg, const struct key *k, const char *text, int src, char *msg, size_t n)
{
    char why[512], shown[80];
    size_t i = 0;
    if (parse_value(k, text, cfg, why, sizeof why) == 0) {
        cfg->set[k - sp_cfg_keys] = (unsigned char)src;
        return 0;
    }
    /* Quote the value bounded and without control characters or quotes. */
    for (const char *s = text; *s && i + 4 < sizeof shown; s++)
        shown[i++] = (unsigned char)*s < 0x20 || *s == '"' ? '?' : *s;
    snprintf(shown + i, sizeof shown - i, "%s", strlen(text) > i ? "..." : "");
    return sp_cfg_say(msg, n, "\"%s\": %s", shown, why);
}

const struct key *sp_cfg_find_key(const char *name)
{
    for (const struct key *k = sp_cfg_keys; k < sp_cfg_keys + SP_CFG_NKEYS; k++)
        if (strcmp(k->name, name) == 0)
            return k;
    return NULL;
}

int sp_cfg_is_group(const char *name)
{
    size_t n = strlen(name);
    for (const struct key *k = sp_cfg_keys; k < sp_cfg_keys + SP_CFG_NKEYS; k++)
        if (strncmp(k->name, name, n) == 0 && k->name[n] == '.')
            return 1;
    return 0;
}

/* ---- environment ---------------------------------------------------------- */

static void env_name(const struct key *k, char *buf, size_t n)
{
    size_t i = (size_t)snprintf(buf, n, "PROF_");
    for (const char *s = k->name; *s && i + 1 < n; s++)
        buf[i++] = *s == '.' ? '_' : (char)toupper((unsigned char)*s);
    buf[i] = 0;
}

/* A PROF_* variable that is no key: a near miss is a typo and fails the load
 * like a typo in the file; anything else may belong to another tool. */
static int check_unknown_env(void)
{
    for (char **e = environ; e && *e; e++) {
        size_t len = strcspn(*e, "=");
        char name[64], known[64];
        struct best b;
        int found = 0;
        if (strncmp(*e, "PROF_", 5) != 0 || len >= sizeof name)
            continue;
        memcpy(name, *e, len);
        name[len] = 0;
        for (int i = 0; i < SP_CFG_NKEYS && !found; i++) {
            env_name(&sp_cfg_keys[i], known, sizeof known);
            found = strcmp(name, known) == 0;
        }
        if (found || strcmp(name, "PROF_CONFIG") == 0)
            continue;
        if (!sp_cfg_suggest_key(name + 5, 0, &b)[0]) {
            sp_log(SP_LOG_WARN, "%s is not a stepprof setting; ignored", name);
            continue;
        }
        env_name(sp_cfg_find_key(b.name), known, sizeof known);
        return sp_cfg_fail("%s is not a stepprof setting (did you mean %s?)", name, known);
    }
    return 0;
}

/* PROF_<KEY> for key k; an empty value counts as unset. */
static int apply_env(sp_config_t *cfg, const struct key *k)
{
    char name[64], msg[700];
    env_name(k, name, sizeof name);
    const char *v = getenv(name);
    if (!v || !*v || sp_cfg_apply(cfg, k, v, SP_CFG_SRC_ENV, msg, sizeof msg) == 0)
        return 0;
    return sp_cfg_fail("%s=%s", name, msg);
}

/* ---- public ----------------------------------------------------------------- */

void sp_config_defaults(sp_config_t *out)
{
    char why[512];
    memset(out, 0, sizeof *out);
    for (const struct key *k = sp_cfg_keys; k < sp_cfg_keys + SP_CFG_NKEYS; k++)
        parse_value(k, k->def, out, why, sizeof why);
}

/* Rules that involve several keys, checked on the final values. */
static int check(sp_config_t *cfg)
{
    static const int sched_keys[] = {SP_CFG_SKIP_FIRST, SP_CFG_SKIP_FIRST_WAIT, SP_CFG_WAIT,
                                     SP_CFG_WARMUP,     SP_CFG_ACTIVE,          SP_CFG_REPEAT};
    for (size_t i = 0; i < sizeof sched_keys / sizeof sched_keys[0]; i++)
        cfg->has_schedule |= cfg->set[sched_keys[i]] != SP_CFG_SRC_DEFAULT;
    if (cfg->marker.kind == SP_MARK_NONE && !cfg->marker.has_signal && sp_config_torch_default) {
        cfg->marker.kind = SP_MARK_TORCH;
        snprintf(cfg->marker_spec, sizeof cfg->marker_spec, "torch");
    }
    if (sp_config_no_driver)
        cfg->cupti = 0;
    if (!cfg->enabled || !cfg->has_schedule)
        return 0;
    /* A signal alone is a marker too: each signal starts or ends a window. */
    if (cfg->marker.kind == SP_MARK_NONE && !cfg->marker.has_signal)
        return sp_cfg_fail("a schedule (wait/warmup/active/repeat) needs a step marker: set profiling.marker or "
                           "PROF_MARKER, e.g. PROF_MARKER=nvtx:train_step");
    if (cfg->warmup == 0)
        sp_log(SP_LOG_WARN, "warmup is 0: profiler won't be using warmup, this can skew profiler results "
                            "(the first recorded step includes start-up costs)");
    return 0;
}

static int load(sp_config_t *cfg)
{
    sp_config_defaults(cfg);
    /* The off switch is honoured before anything that could fail. */
    if (apply_env(cfg, &sp_cfg_keys[SP_CFG_ENABLED]))
        return -1;
    if (!cfg->enabled)
        return 0;
    const char *named = getenv("PROF_CONFIG");
    int is_named = named && *named;
    const char *path = is_named ? named : "profiling.yaml";
    if (strlen(path) >= sizeof cfg->source)
        return sp_cfg_fail("PROF_CONFIG is longer than %zu bytes", sizeof cfg->source - 1);
    if (sp_cfg_load_file(cfg, path, is_named))
        return -1;
    for (const struct key *k = sp_cfg_keys; k < sp_cfg_keys + SP_CFG_NKEYS; k++)
        if (apply_env(cfg, k))
            return -1;
    return check_unknown_env() ? -1 : check(cfg);
}

int sp_config_load(sp_config_t *out)
{
    int saved = errno; /* we run inside the first intercepted CUDA call */
    int rc = load(out);
    if (rc)
        out->enabled = 0;
    errno = saved;
    return rc;
}

int sp_config_key_info(int i, sp_config_key_info_t *out)
{
    if (i < 0 || i >= SP_CFG_NKEYS)
        return -1;
    out->name = sp_cfg_keys[i].name;
    out->def = sp_cfg_keys[i].def;
    out->help = sp_cfg_keys[i].help;
    env_name(&sp_cfg_keys[i], out->env, sizeof out->env);
    return 0;
}
