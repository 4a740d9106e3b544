/* inject/torch.c — the C side of the PyTorch bootstrap (inject/python/). In
 * a Python interpreter that reads PYTHONPATH and runs site.py (no -E, -I or
 * -S) the constructor prepends stepprof's Python folder to PYTHONPATH, so the
 * interpreter runs its sitecustomize.py (which gives the program its own
 * PYTHONPATH back and chains to the user's own sitecustomize) before the
 * program; nothing else happens until the program imports torch. Python then
 * talks to the library through the exported stepprof_torch(op):
 * torch is being imported (the torch marker becomes the default), torch is
 * ready (activate, and say which parts are wanted), an optimizer step ended a
 * step (a boundary), the program runs torch.profiler itself (stepprof hands
 * CUPTI and operators over to it) or emit_nvtx (operators only). Every
 * answer carries whether operators are wanted now: only in warmup and record
 * windows. A multiprocessing child (an mp.spawn rank, a DataLoader worker)
 * stays dormant until its first optimizer step, then says its rank and
 * wakes. (Ctrl-C, an uncaught KeyboardInterrupt: inject/selfsignal.c.) */
#define _GNU_SOURCE
#include "hook.h"

#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/log.h"
#include "../schedule/schedule.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ops of stepprof_torch and bits of its answer; inject/python/_stepprof_torch.py
 * spells the same numbers. */
enum { OP_IMPORTING = 1, OP_READY = 2, OP_STEP = 3, OP_YIELD = 4, OP_STATE = 5, OP_YIELD_OPS = 6, OP_WAKE = 7,
       OP_IMPORTING_DORMANT = 8 };
enum { ANS_ON = 1, ANS_STEPS = 2, ANS_SHAPES = 4, ANS_STACK = 8, ANS_OPS_NOW = 16, ANS_WHOLE_RUN = 32,
       ANS_DORMANT = 64 };

int InitializeInjection(void); /* inject/preload.c: activation */
void sp_torch_bootstrap_env(void); /* inject/preload.c calls it from the constructor */

static int is_python(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    return fnmatch("python*", base, 0) == 0;
}

/* The interpreter's own options, before the script, -c or -m: -E and -I
 * ignore PYTHONPATH and -S skips site.py (so sitecustomize); with any of them
 * stepprof's folder would only be left in the program's environment, or on
 * its sys.path. */
static int python_skips_bootstrap(void)
{
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *end = buf + n, *a = buf + strlen(buf) + 1; /* argv[1] */
    while (a < end) {
        const char *next = a + strlen(a) + 1;
        if (a[0] != '-' || !a[1] || strcmp(a, "--") == 0)
            return 0; /* the script, stdin, or the end of the options */
        if (a[1] == '-') {
            if (strcmp(a, "--check-hash-based-pycs") == 0 && next < end)
                next += strlen(next) + 1;
            a = next;
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            if (*c == 'E' || *c == 'I' || *c == 'S')
                return 1;
            if (*c == 'c' || *c == 'm')
                return 0; /* what follows is the program's */
            if (*c == 'W' || *c == 'X') {
                if (!c[1] && next < end)
                    next += strlen(next) + 1;
                break;
            }
        }
        a = next;
    }
    return 0;
}

/* <dir of libstepprof.so>/python in the build tree, <dir>/stepprof/python installed. */
static int python_dir(char *out, size_t len)
{
    Dl_info info;
    char lib[PATH_MAX];
    if (!dladdr((void *)sp_torch_bootstrap_env, &info) || !info.dli_fname || !realpath(info.dli_fname, lib))
        return -1;
    char *slash = strrchr(lib, '/');
    if (!slash)
        return -1;
    *slash = 0;
    static const char *const sub[] = {"python", "stepprof/python"};
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        char file[PATH_MAX + 64];
        snprintf(file, sizeof file, "%s/%s/sitecustomize.py", lib, sub[i]);
        if (access(file, R_OK) == 0 && snprintf(out, len, "%s/%s", lib, sub[i]) < (int)len)
            return 0;
    }
    return -1;
}

void sp_torch_bootstrap_env(void)
{
    char dir[PATH_MAX];
    if (!is_python() || python_skips_bootstrap() || python_dir(dir, sizeof dir) != 0)
        return;
    const char *old = getenv("PYTHONPATH");
    if (old && *old) {
        /* Inherited from a profiled parent: already first, nothing to add. */
        size_t k = strlen(dir);
        if (strncmp(old, dir, k) == 0 && (old[k] == ':' || old[k] == 0))
            return;
        size_t need = strlen(dir) + strlen(old) + 2;
        char *v = malloc(need);
        if (!v)
            return;
        snprintf(v, need, "%s:%s", dir, old);
        setenv("PYTHONPATH", v, 1);
        free(v);
    } else {
        setenv("PYTHONPATH", dir, 1);
    }
}

static int ops_now(void)
{
    return sp_win_timed(sp_ev_gate_load()) ? ANS_OPS_NOW : 0;
}

/* The hand-over to the program's torch.profiler (OP_YIELD) or emit_nvtx
 * (OP_YIELD_OPS), said once: when it happens, or in a dormant child at its
 * wake, once it is known to be profiled at all (a fork child inherits what
 * its parent said). */
static int yield_op, yield_cupti, yield_said;

static void say_yield(const sp_config_t *cfg)
{
    if (yield_said == yield_op)
        return;
    yield_said = yield_op;
    if (yield_op == OP_YIELD)
        sp_log(SP_LOG_WARN, "this program runs torch.profiler itself: stepprof hands %s over to it and records the "
                            "rest", yield_cupti && cfg->cupti ? "CUPTI and operators" : "operators");
    else if (yield_op == OP_YIELD_OPS)
        sp_log(SP_LOG_WARN, "this program runs emit_nvtx itself: stepprof hands operators over to it and records "
                            "the rest");
}

static void yield(int op)
{
    const sp_config_t *cfg = sp_sched_config();   /* NULL before activation: CUPTI, if it starts later, stays Kineto's */
    if (op == OP_YIELD)   /* (the Python side sends each op once, and none after OP_YIELD) */
        yield_cupti = (!cfg || cfg->cupti) && sp_cupti_release();
    yield_op = op;
    if (cfg && !sp_sched_dormant())
        say_yield(cfg);
}

/* woken: a multiprocessing child at its first optimizer step, which ended step 0. */
static int ready(int woken)
{
    InitializeInjection();   /* (no driver: no CUPTI, inject/preload.c) */
    if (woken)
        sp_sched_wake();
    const sp_config_t *cfg = sp_sched_config();
    if (!cfg)   /* off; or left out while its rank is unknown, whose forked children may be ranks */
        return !woken && sp_sched_unranked_left_out() ? ANS_DORMANT : 0;
    if (woken)
        say_yield(cfg);
    if (cfg->marker.kind == SP_MARK_TORCH && woken)
        sp_sched_begin_steps_at_1();
    else if (cfg->marker.kind == SP_MARK_TORCH)
        sp_sched_begin_steps();   /* step 0 is the first iteration, as when prof.start() precedes the loop */
    if (cfg->marker.kind == SP_MARK_NONE && !cfg->marker.has_signal)
        sp_log(SP_LOG_WARN, "torch was imported after stepprof had started without a marker: optimizer steps "
                            "are not steps; set PROF_MARKER=torch to count them");
    return ANS_ON | (cfg->marker.kind == SP_MARK_TORCH ? ANS_STEPS : 0) | (cfg->record_shapes ? ANS_SHAPES : 0) |
           (cfg->with_stack ? ANS_STACK : 0) | (cfg->has_schedule ? 0 : ANS_WHOLE_RUN) | ops_now();
}

SP_EXPORT int stepprof_torch(int op)
{
    const sp_config_t *cfg;
    switch (op) {
    case OP_IMPORTING:
    case OP_IMPORTING_DORMANT:
        sp_config_torch_default = 1;
        if (op == OP_IMPORTING_DORMANT)
            sp_sched_set_dormant();
        return 0;
    case OP_READY:
        return ready(0);
    case OP_WAKE:
        return ready(1);
    case OP_STEP:
        cfg = sp_sched_config();
        if (cfg && cfg->marker.kind == SP_MARK_TORCH)
            sp_sched_boundary();
        return ops_now();
    case OP_YIELD:   /* torch.profiler (Kineto) is about to set up; the Python side turned operators off */
    case OP_YIELD_OPS:
        yield(op);
        return 0;
    case OP_STATE:
        return ops_now();
    default:
        return 0;
    }
}

/* torch.distributed's view, told at a process's first optimizer step when
 * its default group is up: the backend for the trace's distributedInfo (the
 * libnccl guess says nccl for every torch process), and for a process no
 * launcher variable names (an mp.spawn rank, told before OP_WAKE) the rank
 * that file names, distributedInfo and `ranks` use. */
SP_EXPORT void stepprof_torch_dist(int rank, int world, const char *backend)
{
    sp_sched_learn_dist(rank, world, backend);
}
