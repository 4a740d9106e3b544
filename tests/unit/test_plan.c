/* tests/unit/test_plan.c — sp_sched_action against an independent model of
 * torch.profiler.schedule (a step-by-step simulation with phase counters, no
 * modular arithmetic) over every small schedule, the worked examples of
 * formats.md section 1 spelled out literally, and the plan line. Prints one
 * line per failure and a final "N passed, N failed"; exits non-zero on failure. */
#include "../../schedule/plan.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define NSTEPS 61

#include "check.h"

/* Walks the steps the way a user describes a schedule: skip, then cycles of
 * wait / warmup / active (the first cycle without its wait when
 * skip_first_wait), `repeat` cycles or forever, nothing afterwards. */
static void reference(const sp_sched_t *s, sp_action_t *out, long nsteps)
{
    long step = 0, cycle = 0;
    while (step < nsteps && step < s->skip_first)
        out[step++] = SP_ACT_NONE;
    while (step < nsteps) {
        if (s->repeat > 0 && cycle == s->repeat) {
            out[step++] = SP_ACT_NONE;
            continue;
        }
        long waiting = cycle == 0 && s->skip_first_wait ? 0 : s->wait;
        for (long i = 0; i < waiting && step < nsteps; i++)
            out[step++] = SP_ACT_NONE;
        for (long i = 0; i < s->warmup && step < nsteps; i++)
            out[step++] = SP_ACT_WARMUP;
        for (long i = 0; i < s->active && step < nsteps; i++)
            out[step++] = i == s->active - 1 ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD;
        cycle++;
    }
}

static void test_sweep(void)
{
    for (long sf = 0; sf <= 2; sf++)
        for (int sfw = 0; sfw <= 1; sfw++)
            for (long w = 0; w <= 3; w++)
                for (long wu = 0; wu <= 2; wu++)
                    for (long a = 1; a <= 3; a++)
                        for (long r = 0; r <= 3; r++) {
                            sp_sched_t s = {sf, sfw, w, wu, a, r};
                            sp_action_t want[NSTEPS];
                            reference(&s, want, NSTEPS);
                            long bad = -1;
                            for (long step = 0; step < NSTEPS && bad < 0; step++)
                                if (sp_sched_action(&s, step) != want[step])
                                    bad = step;
                            CHECK(bad < 0, "skip_first=%ld skip_first_wait=%d wait=%ld warmup=%ld active=%ld "
                                  "repeat=%ld: step %ld is %d, expected %d", sf, sfw, w, wu, a, r, bad,
                                  bad < 0 ? 0 : (int)sp_sched_action(&s, bad), bad < 0 ? 0 : (int)want[bad]);
                        }
}

static void expect_actions(const char *label, const sp_sched_t *s, const sp_action_t *want, long n)
{
    for (long step = 0; step < n; step++)
        CHECK(sp_sched_action(s, step) == want[step], "%s: step %ld is %d, expected %d", label, step,
              (int)sp_sched_action(s, step), (int)want[step]);
}

static void test_examples(void)
{
#define N SP_ACT_NONE
#define W SP_ACT_WARMUP
#define R SP_ACT_RECORD
#define S SP_ACT_RECORD_AND_SAVE
    /* wait=1 warmup=1 active=2 repeat=1: steps 0..4 = NONE WARMUP RECORD RAS NONE */
    static const sp_sched_t one = {0, 0, 1, 1, 2, 1};
    static const sp_action_t one_want[] = {N, W, R, S, N, N, N, N, N, N};
    expect_actions("example 1", &one, one_want, 10);
    /* skip_first=2 skip_first_wait=1 wait=3 warmup=1 active=1 repeat=2:
     * 0-1 NONE, 2 WARMUP, 3 RAS, 4-6 NONE, 7 WARMUP, 8 RAS, 9+ NONE */
    static const sp_sched_t two = {2, 1, 3, 1, 1, 2};
    static const sp_action_t two_want[] = {N, N, W, S, N, N, N, W, S, N, N, N, N, N, N, N};
    expect_actions("example 2", &two, two_want, 16);
#undef N
#undef W
#undef R
#undef S
}

static void test_out_of_contract(void)
{
    sp_sched_t ok = {0, 0, 0, 0, 1, 0};
    CHECK(sp_sched_action(&ok, -1) == SP_ACT_NONE, "negative step");
    CHECK(sp_sched_action(&ok, LONG_MAX) == SP_ACT_RECORD_AND_SAVE, "step LONG_MAX, active 1, forever");
    sp_sched_t zero = {0, 0, 0, 0, 0, 0};
    CHECK(sp_sched_action(&zero, 3) == SP_ACT_NONE, "active 0 must not divide by zero");
    sp_sched_t neg = {-1, 0, -5, 0, 1, 0};
    CHECK(sp_sched_action(&neg, 3) == SP_ACT_NONE, "negative counts");
    sp_sched_t huge = {0, 1, LONG_MAX, LONG_MAX, LONG_MAX, 0};
    CHECK(sp_sched_action(&huge, LONG_MAX) == SP_ACT_NONE, "overflowing sums");
}

static void expect_plan(const sp_config_t *cfg, const char *want)
{
    char buf[512];
    int n = sp_plan_format(cfg, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0 && n == (int)strlen(want), "plan\n   got: %s\n  want: %s", buf, want);
}

static sp_config_t sched_config(const char *marker, long sf, int sfw, long w, long wu, long a, long r)
{
    sp_config_t c;
    sp_config_defaults(&c);
    snprintf(c.marker_spec, sizeof c.marker_spec, "%s", marker);
    c.has_schedule = 1;
    c.skip_first = sf;
    c.skip_first_wait = sfw;
    c.wait = w;
    c.warmup = wu;
    c.active = a;
    c.repeat = r;
    return c;
}

static void test_plan_lines(void)
{
    char why[256];
    sp_config_t c = sched_config("nvtx:train_step", 0, 0, 1, 1, 3, 2);
    expect_plan(&c, "marker nvtx:train_step; recording steps 2-4, 7-9 (wait 1, warmup 1, active 3, repeat 2); "
                    "traces -> ./profiler_traces");
    c.repeat = 0;
    expect_plan(&c, "marker nvtx:train_step; recording steps 2-4, 7-9, ... every 5 steps (wait 1, warmup 1, "
                    "active 3, repeat 0); traces -> ./profiler_traces");
    c = sched_config("kernel:*gemm*/4", 2, 1, 3, 1, 1, 2);
    snprintf(c.output_dir, sizeof c.output_dir, "/tmp/t");
    expect_plan(&c, "marker kernel:*gemm*/4; recording steps 3, 8 (skip_first 2, skip_first_wait true, wait 3, "
                    "warmup 1, active 1, repeat 2); traces -> /tmp/t");
    c = sched_config("cudaProfilerApi", 0, 0, 0, 0, 2, 10);
    expect_plan(&c, "marker cudaProfilerApi; recording steps 0-1, 2-3, ... every 2 steps, 10 windows (wait 0, "
                    "warmup 0, active 2, repeat 10); traces -> ./profiler_traces");
    c = sched_config("nvtx:s", 0, 0, 0, 1, 1, 3);
    expect_plan(&c, "marker nvtx:s; recording steps 1, 3, 5 (wait 0, warmup 1, active 1, repeat 3); "
                    "traces -> ./profiler_traces");
    c = sched_config("nvtx:s", 0, 0, 10000000, 1, 1, 0);
    expect_plan(&c, "marker nvtx:s; recording steps beyond step 4194303 (wait 10000000, warmup 1, active 1, "
                    "repeat 0); traces -> ./profiler_traces");

    sp_config_defaults(&c);
    expect_plan(&c, "no schedule: recording the whole run as one window; traces -> ./profiler_traces");
    snprintf(c.marker_spec, sizeof c.marker_spec, "nvtx:step,signal");
    expect_plan(&c, "marker nvtx:step,signal; no schedule: recording the whole run as one window; "
                    "traces -> ./profiler_traces");
    sp_config_parse_marker(c.marker_spec, &c.marker, why, sizeof why);
    expect_plan(&c, "marker nvtx:step,signal; on each signal, one cycle counted from the next step: recording "
                    "steps 1 (wait 0, warmup 1, active 1, repeat 1); traces -> ./profiler_traces");
    c = sched_config("nvtx:step, signal:HUP", 0, 0, 1, 1, 3, 0);
    sp_config_parse_marker(c.marker_spec, &c.marker, why, sizeof why);
    expect_plan(&c, "marker nvtx:step, signal:HUP; on each signal, one cycle counted from the next step: "
                    "recording steps 2-4 (wait 1, warmup 1, active 3, repeat 1); traces -> ./profiler_traces");
    c = sched_config("signal", 0, 0, 0, 1, 1, 2);
    sp_config_parse_marker(c.marker_spec, &c.marker, why, sizeof why);
    expect_plan(&c, "marker signal; each signal starts or ends a recorded window, at most 2 windows; "
                    "traces -> ./profiler_traces");
    c.has_schedule = 0;
    expect_plan(&c, "marker signal; each signal starts or ends a recorded window; traces -> ./profiler_traces");
    c.enabled = 0;
    expect_plan(&c, "disabled by configuration (profiling.enabled / PROF_ENABLED)");

    /* snprintf contract: cut, NUL-terminated, full length returned. */
    sp_config_defaults(&c);
    char small[16], full[512];
    int need = sp_plan_format(&c, full, sizeof full);
    int got = sp_plan_format(&c, small, sizeof small);
    CHECK(got == need && strlen(small) == 15 && strncmp(small, full, 15) == 0, "cut plan: %d %d '%s'", got, need,
          small);
    CHECK(sp_plan_format(&c, NULL, 0) == need, "length-only call");
}

int main(void)
{
    test_sweep();
    test_examples();
    test_out_of_contract();
    test_plan_lines();
    printf("test_plan: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
