/* schedule/marker.c — the grammar of the marker key: what counts as a step
 * (nvtx:NAME[@DOMAIN], function:SYMBOL[@LIBRARY], kernel:GLOB[/N] or
 * cudaProfilerApi, torch: a torch.optim optimizer step, see inject/torch.c)
 * and the signal that may start and stop recording
 * (signal[:SIGNAME]), as a comma-separated list with at most one of each. It
 * owns sp_config_parse_marker and the tables of marker kinds and signals,
 * including why a signal the program needs for itself is refused. Like the rest
 * of the loader it only writes a reason (with a "did you mean" from
 * config_int.h); config.c or the YAML reader adds where the text came from. */
#define _GNU_SOURCE
#include "config_int.h"

#include <ctype.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

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
    {"torch", SP_MARK_TORCH, 0, NULL, NULL, NULL},
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
            sp_cfg_consider(&b, name, sigs[i].name, sigs[i].name, strlen(sigs[i].name));
    }
    if (!s && numeric && num >= SIGRTMIN && num <= SIGRTMAX) {
        *signo = (int)num;
        return 0;
    }
    if (!s && numeric)
        return sp_cfg_say(why, n, "unknown signal number %ld", num);
    if (!s) {
        sp_cfg_say(why, n, "unknown signal \"%s\"", arg);
        if (b.name[0])
            sp_cfg_append(why, n, " (did you mean SIG%s?)", b.name);
        return -1;
    }
    if (s->refused)
        return sp_cfg_say(why, n, "SIG%s cannot be a marker: it %s; use SIGUSR1 or SIGUSR2", s->name, s->refused);
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
        sp_cfg_consider(&b, item, mark_kinds[i].word, mark_kinds[i].word, strlen(mark_kinds[i].word));
    }
    if (!mk) {
        sp_cfg_say(why, n, "unknown marker \"%.64s\"", item);
        if (b.name[0])
            sp_cfg_append(why, n, " (did you mean %s?)", b.name);
        sp_cfg_append(why, n, "; expected nvtx:NAME[@DOMAIN], function:SYMBOL[@LIBRARY], kernel:GLOB[/N], "
                              "cudaProfilerApi, torch or signal[:SIGNAME]");
        return -1;
    }
    if (mk->kind == SP_MARK_NONE && m->has_signal)
        return sp_cfg_say(why, n, "more than one signal entry");
    if (mk->kind == SP_MARK_NONE) {
        m->has_signal = 1;
        return parse_signal(arg, &m->signo, why, n);
    }
    if (m->kind != SP_MARK_NONE)
        return sp_cfg_say(why, n, "more than one step marker; give one of nvtx, function, kernel, cudaProfilerApi or "
                                  "torch, plus at most one signal");
    m->kind = mk->kind;
    if (!mk->sep)
        return arg ? sp_cfg_say(why, n, "%s takes no argument", mk->word) : 0;
    char *sep = arg ? strrchr(arg, mk->sep) : NULL;
    if (sep)
        *sep++ = 0;
    if (!arg || !*arg)
        return sp_cfg_say(why, n, "%s marker needs %s, e.g. %s", mk->word, mk->what, mk->example);
    if (sep && mk->sep == '/' && (sp_config_parse_long(sep, &m->every_n) != 0 || m->every_n < 1))
        return sp_cfg_say(why, n, "kernel marker count \"/%s\" must be an integer >= 1", sep);
    if (sep && mk->sep == '@' && !*sep)
        return sp_cfg_say(why, n, "empty %s after \"@\"", mk->scope);
    if (strlen(arg) >= sizeof m->name || (mk->sep == '@' && sep && strlen(sep) >= sizeof m->scope))
        return sp_cfg_say(why, n, "marker name longer than %zu bytes", sizeof m->name - 1);
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
            return sp_cfg_say(why, whylen, "empty entry in the marker list");
        if (len >= sizeof item)
            return sp_cfg_say(why, whylen, "marker entry longer than %zu bytes", sizeof item - 1);
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
