/* schedule/plan.c — sp_sched_action, the schedule as torch.profiler.schedule
 * defines it, and the plan line derived from it. The plan lists recorded
 * steps by asking sp_sched_action, never by re-deriving the arithmetic, so
 * what stepprof announces is what it does. */
#include "plan.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

/* The plan scans step by step; a schedule whose first windows lie further
 * out than this (wait: 10000000) is summarised instead (a few ms of scan). */
#define SCAN_STEPS (1L << 22)

sp_action_t sp_sched_action(const sp_sched_t *s, long step)
{
    long t, n;
    if (step < 0 || s->skip_first < 0 || s->wait < 0 || s->warmup < 0 || s->active < 1 || s->repeat < 0)
        return SP_ACT_NONE;
    if (step < s->skip_first)
        return SP_ACT_NONE;
    t = step - s->skip_first;
    /* skip_first_wait shifts the first cycle past its wait phase. */
    if ((s->skip_first_wait && __builtin_add_overflow(t, s->wait, &t)) ||
        __builtin_add_overflow(s->wait, s->warmup, &n) || __builtin_add_overflow(n, s->active, &n))
        return SP_ACT_NONE;
    /* torch tests t / n >= repeat with true division; for t >= 0 and an
     * integer repeat, floor division gives the same answer. */
    if (s->repeat > 0 && t / n >= s->repeat)
        return SP_ACT_NONE;
    long m = t % n;
    if (m < s->wait)
        return SP_ACT_NONE;
    if (m < s->wait + s->warmup)
        return SP_ACT_WARMUP;
    return m < n - 1 ? SP_ACT_RECORD : SP_ACT_RECORD_AND_SAVE;
}

sp_sched_t sp_sched_from_config(const sp_config_t *cfg)
{
    return (sp_sched_t){cfg->skip_first, cfg->skip_first_wait, cfg->wait, cfg->warmup, cfg->active, cfg->repeat};
}

/* snprintf into a line that keeps counting what it would need once full. */
struct line {
    char *buf;
    size_t len, need;
};

__attribute__((format(printf, 2, 3))) static void put(struct line *l, const char *fmt, ...)
{
    size_t used = l->need < l->len ? l->need : (l->len ? l->len - 1 : 0);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + used, l->len - used, fmt, ap);
    va_end(ap);
    if (n > 0)
        l->need += (size_t)n;
}

/* "2-4, 7-9, ... every 5 steps": the first windows (RECORD runs ending in a
 * RECORD_AND_SAVE), all of them when repeat is 1..3, else two and the period. */
static void put_windows(struct line *l, const sp_sched_t *s)
{
    long want = s->repeat >= 1 && s->repeat <= 3 ? s->repeat : 2;
    long found = 0, lo = -1, first_lo = 0, period = 0, step = s->skip_first;
    put(l, "recording steps ");
    for (long left = SCAN_STEPS; found < want && left > 0 && step < LONG_MAX; step++, left--) {
        sp_action_t a = sp_sched_action(s, step);
        if (a != SP_ACT_RECORD && a != SP_ACT_RECORD_AND_SAVE)
            continue;
        if (lo < 0)
            lo = step;
        if (a == SP_ACT_RECORD)
            continue;
        put(l, "%s%ld", found ? ", " : "", lo);
        if (step > lo)
            put(l, "-%ld", step);
        if (found == 0)
            first_lo = lo;
        else if (found == 1)
            period = lo - first_lo;
        found++;
        lo = -1;
    }
    if (found == 0)
        put(l, "beyond step %ld", step - 1);
    else if (found < want)
        put(l, ", ...");
    else if (s->repeat == 0)
        put(l, ", ... every %ld steps", period);
    else if (s->repeat > want)
        put(l, ", ... every %ld steps, %ld windows", period, s->repeat);
    put(l, " (");
    if (s->skip_first > 0)
        put(l, "skip_first %ld, ", s->skip_first);
    if (s->skip_first_wait)
        put(l, "skip_first_wait true, ");
    put(l, "wait %ld, warmup %ld, active %ld, repeat %ld)", s->wait, s->warmup, s->active, s->repeat);
}

int sp_plan_format(const sp_config_t *cfg, char *buf, size_t len)
{
    char empty[1];
    struct line l = {len ? buf : empty, len ? len : 1, 0};
    l.buf[0] = 0;
    if (!cfg->enabled) {
        put(&l, "disabled by configuration (profiling.enabled / PROF_ENABLED)");
        return (int)l.need;
    }
    if (cfg->marker_spec[0])
        put(&l, "marker %s; ", cfg->marker_spec);
    sp_sched_t s = sp_sched_from_config(cfg);
    if (cfg->marker.has_signal && cfg->marker.kind == SP_MARK_NONE) {
        put(&l, "each signal starts or ends a recorded window");
        if (cfg->has_schedule && cfg->repeat > 0)
            put(&l, ", at most %ld windows", cfg->repeat);
    } else if (cfg->marker.has_signal) {
        /* A signal arms one cycle, counted from the next step. */
        sp_sched_t one = {0, 0, s.wait, s.warmup, s.active, 1};
        put(&l, "on each signal, one cycle counted from the next step: ");
        put_windows(&l, &one);
    } else if (cfg->marker.kind == SP_MARK_PROFILER_API) {
        /* Capture ranges, as nsys --capture-range=cudaProfilerApi: only repeat applies. */
        if (cfg->repeat == 0)
            put(&l, "recording every cudaProfilerStart/Stop range");
        else if (cfg->repeat == 1)
            put(&l, "recording the first cudaProfilerStart/Stop range");
        else
            put(&l, "recording the first %ld cudaProfilerStart/Stop ranges", cfg->repeat);
    } else if (cfg->has_schedule) {
        put_windows(&l, &s);
    } else if (cfg->marker.kind != SP_MARK_NONE) {
        put(&l, "no schedule: recording the whole run as one window, one ProfilerStep per step");
    } else {
        put(&l, "no schedule: recording the whole run as one window");
    }
    put(&l, "; traces -> %s", cfg->output_dir);
    return (int)l.need;
}
