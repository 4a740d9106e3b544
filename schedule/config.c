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
static const struct choice print_choices[] = {{"stderr", SP_TABLE_PRINT_STDERR}, {"file", SP_TABLE_PRINT_FILE},
                                              {"both", SP_TABLE_PRINT_BOTH},     {"none", SP_TABLE_PRINT_NONE},
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

/* ---- marker specs -------------------------------------------------------- */

struct mark_kind {
    const char *word;
    sp_marker_kind_t kind;
    char sep; /* '@' NAME@SCOPE, '/' GLOB/N, 0 no argument */
    const char *what, *scope, *example;
};
/* The signal entry (kind NONE) is no step marker; parse_signal reads it. */
static const struct mark_kind mark_kinds[] = {
    {"nvtx", SP_MARK_NVTX, '@', "an NVTX range name", "domain", "nvtx:train_step"},
    {"function", SP_MARK_FUNCTION, '@', "a symbol", "library", "function:train_step"},
    {"kernel", SP_MARK_KERNEL, '/', "a kernel name glob", NULL, "kernel:*sgemm*/4"},
    {"cudaProfilerApi", SP_MARK_PROFILER_API, 0, NULL, NULL, NULL},
    {"signal", SP_MARK_NONE, 0, NULL, NULL, NULL},
};
#define NKINDS (sizeof mark_kinds / sizeof mark_kinds[0])

/* Signals a user may send to start/stop recording, and why the others are refused. */
#define CRASH "reports a crash and belongs to the program"
#define ENDS "asks the program to stop"
#define SHELL "has a job-control or pipe meaning for the program"
static const struct sig {
    const char *name;
    int signo;
    const char *refused;
} sigs[] = {
    {"USR2", SIGUSR2, NULL},     {"USR1", SIGUSR1, NULL},  {"HUP", SIGHUP, NULL},
    {"TTIN", SIGTTIN, NULL},     {"TTOU", SIGTTOU, NULL},  {"WINCH", SIGWINCH, NULL},
    {"PROF", SIGPROF, NULL},     {"URG", SIGURG, NULL},    {"ALRM", SIGALRM, NULL},
    {"VTALRM", SIGVTALRM, NULL}, {"PWR", SIGPWR, NULL},    {"KILL", SIGKILL, "cannot be caught"},
    {"STOP", SIGSTOP, "cannot be caught"}, {"SEGV", SIGSEGV, CRASH}, {"BUS", SIGBUS, CRASH},
    {"FPE", SIGFPE, CRASH},      {"ILL", SIGILL, CRASH},   {"ABRT", SIGABRT, CRASH},
    {"TRAP", SIGTRAP, CRASH},    {"SYS", SIGSYS, CRASH},   {"INT", SIGINT, ENDS},
    {"TERM", SIGTERM, ENDS},     {"QUIT", SIGQUIT, ENDS},  {"CHLD", SIGCHLD, SHELL},
    {"CONT", SIGCONT, SHELL},    {"TSTP", SIGTSTP, SHELL}, {"PIPE", SIGPIPE, SHELL},
};
#define NSIGS (sizeof sigs / sizeof sigs[0])

/* arg: NULL for a bare "signal" (SIGUSR2), else the text after "signal:";
 * a name with or without SIG, any case, or a number. */
static int parse_signal(const char *arg, int *signo, char *why, size_t n)
{
    const struct sig *s = NULL;
    const char *name = arg && strncasecmp(arg, "SIG", 3) == 0 ? arg + 3 : arg;
    struct best b = {SIZE_MAX, ""};
    long num;
    if (!arg) {
        *signo = SIGUSR2;
        return 0;
    }
    int numeric = sp_config_parse_long(arg, &num) == 0;
    for (size_t i = 0; i < NSIGS && !s; i++) {
        s = (numeric ? sigs[i].signo == num : strcasecmp(sigs[i].name, name) == 0) ? &sigs[i] : NULL;
        if (!sigs[i].refused)
            consider(&b, name, sigs[i].name, sigs[i].name, strlen(sigs[i].name));
    }
    if (!s && numeric && num >= SIGRTMIN && num <= SIGRTMAX) {
        *signo = (int)num;
        return 0;
    }
    if (!s && numeric)
        return say(why, n, "unknown signal number %ld", num);
    if (!s) {
        say(why, n, "unknown signal \"%s\"", arg);
        if (b.name[0])
            append(why, n, " (did you mean SIG%s?)", b.name);
        return -1;
    }
    if (s->refused)
        return say(why, n, "SIG%s cannot be a marker: it %s; use SIGUSR1 or SIGUSR2", s->name, s->refused);
    *signo = s->signo;
    return 0;
}

/* One comma-separated entry, trimmed and non-empty; item is modified. */
static int parse_marker_item(char *item, sp_marker_t *m, char *why, size_t n)
{
    char *arg = strchr(item, ':');
    const struct mark_kind *mk = NULL;
    struct best b = {SIZE_MAX, ""};
    if (arg)
        *arg++ = 0;
    for (size_t i = 0; i < NKINDS && !mk; i++) {
        mk = strcasecmp(mark_kinds[i].word, item) == 0 ? &mark_kinds[i] : NULL;
        consider(&b, item, mark_kinds[i].word, mark_kinds[i].word, strlen(mark_kinds[i].word));
    }
    if (!mk) {
        say(why, n, "unknown marker \"%.64s\"", item);
        if (b.name[0])
            append(why, n, " (did you mean %s?)", b.name);
        append(why, n, "; expected nvtx:NAME[@DOMAIN], function:SYMBOL[@LIBRARY], kernel:GLOB[/N], "
                       "cudaProfilerApi or signal[:SIGNAME]");
        return -1;
    }
    if (mk->kind == SP_MARK_NONE && m->has_signal)
        return say(why, n, "more than one signal entry");
    if (mk->kind == SP_MARK_NONE) {
        m->has_signal = 1;
        return parse_signal(arg, &m->signo, why, n);
    }
    if (m->kind != SP_MARK_NONE)
        return say(why, n, "more than one step marker; give one of nvtx, function, kernel or cudaProfilerApi, "
                           "plus at most one signal");
    m->kind = mk->kind;
    if (!mk->sep)
        return arg ? say(why, n, "%s takes no argument", mk->word) : 0;
    char *sep = arg ? strrchr(arg, mk->sep) : NULL;
    if (sep)
        *sep++ = 0;
    if (!arg || !*arg)
        return say(why, n, "%s marker needs %s, e.g. %s", mk->word, mk->what, mk->example);
    if (sep && mk->sep == '/' && (sp_config_parse_long(sep, &m->every_n) != 0 || m->every_n < 1))
        return say(why, n, "kernel marker count \"/%s\" must be an integer >= 1", sep);
    if (sep && mk->sep == '@' && !*sep)
        return say(why, n, "empty %s after \"@\"", mk->scope);
    if (strlen(arg) >= sizeof m->name || (mk->sep == '@' && sep && strlen(sep) >= sizeof m->scope))
        return say(why, n, "marker name longer than %zu bytes", sizeof m->name - 1);
    strcpy(m->name, arg);
    if (mk->sep == '@' && sep)
        strcpy(m->scope, sep);
    return 0;
}

int sp_config_parse_marker(const char *spec, sp_marker_t *out, char *why, size_t whylen)
{
    sp_marker_t m = {.kind = SP_MARK_NONE, .every_n = 1};
    const char *p = spec;
    while (isspace((unsigned char)*p))
        p++;
    for (const char *comma = p; *p; p = comma + 1) {
        comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[1024];
        while (len && isspace((unsigned char)*p))
            p++, len--;
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (len == 0 || (comma && !comma[1 + strspn(comma + 1, " \t\n")]))
            return say(why, whylen, "empty entry in the marker list");
        if (len >= sizeof item)
            return say(why, whylen, "marker entry longer than %zu bytes", sizeof item - 1);
        memcpy(item, p, len);
        item[len] = 0;
        if (parse_marker_item(item, &m, why, whylen) != 0)
            return -1;
        if (!comma)
            break;
    }
    *out = m;
    return 0;
}

/* ---- reporting ---------------------------------------------------------- */

/* Prints the one error line of a failed load. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    char msg[1024] = "";
    va_list ap;
    va_start(ap, fmt);
    vappend(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_log(SP_LOG_ERROR, "%s" DISABLED, msg);
    return -1;
}

/* Parses text into key k, or writes `"<text>": <why>` to msg for the caller
 * to prefix with where the text came from. */
static int apply(sp_config_t *cfg, const struct key *k, const char *text, int src, char *msg, size_t n)
{
    char why[512], shown[80];
    size_t i = 0;
    if (parse_value(k, text, cfg, why, sizeof why) == 0) {
        cfg->set[k - keys] = (unsigned char)src;
        return 0;
    }
    /* Quote the value bounded and without control characters or quotes. */
    for (const char *s = text; *s && i + 4 < sizeof shown; s++)
        shown[i++] = (unsigned char)*s < 0x20 || *s == '"' ? '?' : *s;
    snprintf(shown + i, sizeof shown - i, "%s", strlen(text) > i ? "..." : "");
    return say(msg, n, "\"%s\": %s", shown, why);
}

static const struct key *find_key(const char *name)
{
    for (const struct key *k = keys; k < keys + SP_CFG_NKEYS; k++)
        if (strcmp(k->name, name) == 0)
            return k;
    return NULL;
}

static int is_group(const char *name)
{
    size_t n = strlen(name);
    for (const struct key *k = keys; k < keys + SP_CFG_NKEYS; k++)
        if (strncmp(k->name, name, n) == 0 && k->name[n] == '.')
            return 1;
    return 0;
}

/* ---- YAML ------------------------------------------------------------------ */

/* A problem found while reading is kept in msg, not printed at once: a syntax
 * error further down the file, which explains more, takes its place. */
struct reader {
    sp_config_t *cfg;
    const char *file;
    yaml_parser_t parser;
    size_t line[SP_CFG_NKEYS]; /* where the file set each key, for "set twice" */
    char msg[1024];
    int syntax; /* msg is libyaml's */
};

/* Keeps "file:line:column: <message>" (libyaml marks are 0-based). */
__attribute__((format(printf, 3, 4))) static int rfail(struct reader *r, yaml_mark_t m, const char *fmt, ...)
{
    va_list ap;
    say(r->msg, sizeof r->msg, "%s:%zu:%zu: ", r->file, m.line + 1, m.column + 1);
    va_start(ap, fmt);
    vappend(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int yaml_fail(struct reader *r)
{
    const yaml_parser_t *p = &r->parser;
    const char *problem = p->problem ? p->problem : "syntax error";
    r->syntax = 1;
    if (p->error == YAML_MEMORY_ERROR)
        return say(r->msg, sizeof r->msg, "%s: out of memory while reading YAML", r->file);
    if (p->error == YAML_READER_ERROR)
        return say(r->msg, sizeof r->msg, "%s: invalid YAML: %s at byte %zu", r->file, problem, p->problem_offset);
    if (!p->context)
        return rfail(r, p->problem_mark, "invalid YAML: %s", problem);
    return rfail(r, p->problem_mark, "invalid YAML: %s (%s at line %zu, column %zu)", problem, p->context,
                 p->context_mark.line + 1, p->context_mark.column + 1);
}

static int next(struct reader *r, yaml_event_t *ev)
{
    /* On failure libyaml leaves ev zeroed: nothing to delete. */
    return yaml_parser_parse(&r->parser, ev) ? 0 : yaml_fail(r);
}

static const char *node_kind(yaml_event_type_t t)
{
    if (t == YAML_MAPPING_START_EVENT)
        return "a mapping";
    if (t == YAML_SEQUENCE_START_EVENT)
        return "a sequence";
    return t == YAML_ALIAS_EVENT ? "an alias (YAML anchors are not followed here)" : "a scalar";
}

static int is_null(const yaml_event_t *ev)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp((const char *)ev->data.scalar.value, nulls[i]) == 0)
            return 1;
    return 0;
}

/* Consumes the rest of a node whose first event (of type t) was already read. */
static int skip_rest(struct reader *r, yaml_event_type_t t)
{
    for (int depth = t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT; depth > 0;) {
        yaml_event_t ev;
        if (next(r, &ev))
            return -1;
        if (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT)
            depth++;
        else if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT)
            depth--;
        yaml_event_delete(&ev);
    }
    return 0;
}

/* Reads the next key of a mapping (name "" unless a scalar) and the first
 * event of its value into *v, which the caller deletes. 1 at the end of the
 * mapping, 0 for a pair, -1 on error. */
static int read_pair(struct reader *r, char *name, size_t n, yaml_mark_t *kmark, yaml_event_type_t *ktype,
                     yaml_event_t *v)
{
    yaml_event_t kev;
    if (next(r, &kev))
        return -1;
    *kmark = kev.start_mark;
    *ktype = kev.type;
    snprintf(name, n, "%s", kev.type == YAML_SCALAR_EVENT ? (const char *)kev.data.scalar.value : "");
    yaml_event_delete(&kev);
    if (*ktype == YAML_MAPPING_END_EVENT)
        return 1;
    return skip_rest(r, *ktype) || next(r, v) ? -1 : 0;
}

static int read_group(struct reader *r, const char *prefix, const yaml_event_t *v);

static int read_value(struct reader *r, const struct key *k, yaml_mark_t kmark, const yaml_event_t *v)
{
    char why[600];
    size_t id = (size_t)(k - keys);
    if (v->type != YAML_SCALAR_EVENT) {
        expect(k, why, sizeof why);
        return rfail(r, v->start_mark, "profiling.%s: %s, got %s", k->name, why, node_kind(v->type));
    }
    if (r->line[id])
        return rfail(r, kmark, "profiling.%s is set twice (first on line %zu)", k->name, r->line[id]);
    const char *text = is_null(v) ? "" : (const char *)v->data.scalar.value;
    if (strlen(text) != v->data.scalar.length)
        return rfail(r, v->start_mark, "profiling.%s: value contains a NUL character", k->name);
    if (apply(r->cfg, k, text, SP_CFG_SRC_FILE, why, sizeof why))
        return rfail(r, v->start_mark, "profiling.%s: %s", k->name, why);
    r->line[id] = kmark.line + 1;
    return 0;
}

/* One `name: value` pair below profiling: (name is the dotted path). */
static int read_entry(struct reader *r, const char *name, yaml_mark_t kmark, const yaml_event_t *v, int top)
{
    struct best b;
    const struct key *k = find_key(name);
    if (k)
        return read_value(r, k, kmark, v);
    if (top && is_group(name))
        return read_group(r, name, v);
    if (suggest_key(name, top, &b)[0])
        return rfail(r, kmark, "unknown key profiling.%s (did you mean profiling.%s?)", name, b.name);
    return rfail(r, kmark, "unknown key profiling.%s (profiling.example.yaml lists every key)", name);
}

/* The mapping of settings under profiling: (prefix "") or one of its groups
 * (prefix "table"); v is the value's first event. Empty (null) is fine. */
static int read_group(struct reader *r, const char *prefix, const yaml_event_t *v)
{
    if (is_null(v))
        return 0;
    if (v->type != YAML_MAPPING_START_EVENT)
        return rfail(r, v->start_mark, "profiling%s%s: expected a mapping of settings, got %s", *prefix ? "." : "",
                     prefix, node_kind(v->type));
    for (;;) {
        char key[128], name[192];
        yaml_mark_t km;
        yaml_event_type_t kt;
        yaml_event_t kv;
        int rc = read_pair(r, key, sizeof key, &km, &kt, &kv);
        if (rc)
            return rc > 0 ? 0 : -1;
        snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
        if (kt != YAML_SCALAR_EVENT)
            rc = rfail(r, km, "expected a key name in profiling%s%s, got %s", *prefix ? "." : "", prefix,
                       node_kind(kt));
        else
            rc = read_entry(r, name, km, &kv, !*prefix);
        yaml_event_delete(&kv);
        if (rc)
            return -1;
    }
}

/* The document's top-level mapping: only profiling: is read, the rest skipped. */
static int read_top(struct reader *r)
{
    size_t seen = 0; /* line of the profiling: key, 0 before it */
    for (;;) {
        char name[128];
        yaml_mark_t km;
        yaml_event_type_t kt;
        yaml_event_t v;
        int rc = read_pair(r, name, sizeof name, &km, &kt, &v);
        if (rc)
            return rc > 0 ? 0 : -1;
        int ours = kt == YAML_SCALAR_EVENT && strcmp(name, "profiling") == 0;
        if (ours && seen)
            rc = rfail(r, km, "profiling: appears twice (first on line %zu)", seen);
        else if (ours && (seen = km.line + 1))
            rc = read_group(r, "", &v);
        else if (kt == YAML_SCALAR_EVENT && distance(name, "profiling") <= 2)
            rc = rfail(r, km, "top-level key %s looks like a typo (did you mean profiling?)", name);
        else
            rc = skip_rest(r, v.type);
        yaml_event_delete(&v);
        if (rc)
            return -1;
    }
}

/* Reads the first document and drains the rest of the stream, so that a
 * syntax error anywhere in the file is reported, before anything it caused. */
static int read_stream(struct reader *r)
{
    int documents = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (next(r, &ev))
            return -1;
        yaml_event_type_t t = ev.type;
        documents += t == YAML_DOCUMENT_START_EVENT;
        if (rc == 0 && t == YAML_MAPPING_START_EVENT && documents == 1)
            rc = read_top(r);
        else if (rc == 0)
            rc = skip_rest(r, t);
        yaml_event_delete(&ev);
        if (r->syntax || t == YAML_STREAM_END_EVENT)
            return r->syntax ? -1 : rc;
    }
}

static int load_file(sp_config_t *cfg, const char *path, int named)
{
    char err[128];
    struct stat st;
    FILE *f = fopen(path, "re");
    if (!f && errno == ENOENT && !named)
        return 0;
    if (!f)
        return fail("%s: cannot open config file: %s%s", path, strerror_r(errno, err, sizeof err),
                    named ? " (named by PROF_CONFIG)" : "");
    struct reader r = {.cfg = cfg, .file = path};
    int rc = -1;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode))
        say(r.msg, sizeof r.msg, "%s: cannot read config file: it is a directory", path);
    else if (!yaml_parser_initialize(&r.parser))
        say(r.msg, sizeof r.msg, "%s: out of memory while reading YAML", path);
    else {
        yaml_parser_set_input_file(&r.parser, f);
        rc = read_stream(&r);
        yaml_parser_delete(&r.parser);
    }
    fclose(f);
    if (rc)
        return fail("%s", r.msg);
    snprintf(cfg->source, sizeof cfg->source, "%s", path);
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
            env_name(&keys[i], known, sizeof known);
            found = strcmp(name, known) == 0;
        }
        if (found || strcmp(name, "PROF_CONFIG") == 0)
            continue;
        if (!suggest_key(name + 5, 0, &b)[0]) {
            sp_log(SP_LOG_WARN, "%s is not a stepprof setting; ignored", name);
            continue;
        }
        env_name(find_key(b.name), known, sizeof known);
        return fail("%s is not a stepprof setting (did you mean %s?)", name, known);
    }
    return 0;
}

/* PROF_<KEY> for key k; an empty value counts as unset. */
static int apply_env(sp_config_t *cfg, const struct key *k)
{
    char name[64], msg[700];
    env_name(k, name, sizeof name);
    const char *v = getenv(name);
    if (!v || !*v || apply(cfg, k, v, SP_CFG_SRC_ENV, msg, sizeof msg) == 0)
        return 0;
    return fail("%s=%s", name, msg);
}

/* ---- public ----------------------------------------------------------------- */

void sp_config_defaults(sp_config_t *out)
{
    char why[512];
    memset(out, 0, sizeof *out);
    for (const struct key *k = keys; k < keys + SP_CFG_NKEYS; k++)
        parse_value(k, k->def, out, why, sizeof why);
}

/* Rules that involve several keys, checked on the final values. */
static int check(sp_config_t *cfg)
{
    static const int sched_keys[] = {SP_CFG_SKIP_FIRST, SP_CFG_SKIP_FIRST_WAIT, SP_CFG_WAIT,
                                     SP_CFG_WARMUP,     SP_CFG_ACTIVE,          SP_CFG_REPEAT};
    for (size_t i = 0; i < sizeof sched_keys / sizeof sched_keys[0]; i++)
        cfg->has_schedule |= cfg->set[sched_keys[i]] != SP_CFG_SRC_DEFAULT;
    if (!cfg->enabled || !cfg->has_schedule)
        return 0;
    /* A signal alone is a marker too: each signal starts or ends a window. */
    if (cfg->marker.kind == SP_MARK_NONE && !cfg->marker.has_signal)
        return fail("a schedule (wait/warmup/active/repeat) needs a step marker: set profiling.marker or "
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
    if (apply_env(cfg, &keys[SP_CFG_ENABLED]))
        return -1;
    if (!cfg->enabled)
        return 0;
    const char *named = getenv("PROF_CONFIG");
    int is_named = named && *named;
    const char *path = is_named ? named : "profiling.yaml";
    if (strlen(path) >= sizeof cfg->source)
        return fail("PROF_CONFIG is longer than %zu bytes", sizeof cfg->source - 1);
    if (load_file(cfg, path, is_named))
        return -1;
    for (const struct key *k = keys; k < keys + SP_CFG_NKEYS; k++)
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
    out->name = keys[i].name;
    out->def = keys[i].def;
    out->help = keys[i].help;
    env_name(&keys[i], out->env, sizeof out->env);
    return 0;
}
