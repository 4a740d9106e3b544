/* exporters/summary_rules.c — the findings of the step summary. Each rule is
 * a function with its thresholds named here; a rule that fires records its
 * evidence (numbers, also in summary.json) and a concrete recommendation.
 * Rules that need GPU activity records are not evaluated without them
 * (the summary then says what it cannot know). docs/reports.md has this table.
 *
 *   id               needs  fires when
 *   gpu_idle         GPU    avg GPU idle over the steps >= 30% of step wall time (busiest device)
 *   short_kernels    GPU    avg >= 50 kernels per step and mean kernel duration < 10 us
 *   pageable_copy    GPU    any memcpy from/to pageable host memory inside the steps
 *   sync_per_step    host   a device / stream / event synchronize call in >= 50% of the steps
 *   blocking_d2h     host   a synchronous (non-Async) device-to-host cudaMemcpy in >= 50% of the steps
 *   dominant_kernel  GPU    >= 2 distinct kernels and one has >= 50% of all kernel time
 *   step_variance    host   >= 3 steps, stddev >= 20% of the mean and max - min >= 1 ms
 *   dropped_events   host   the buffer dropped any event in the window
 */
#include "summary_int.h"
#include "table.h"

#include <stdio.h>
#include <string.h>

#define IDLE_PCT 30.0
#define SHORT_KERNEL_NS 10000
#define MANY_KERNELS_PER_STEP 50.0
#define STEP_SHARE 0.5
#define DOMINANT_SHARE 0.5
#define VARIANCE_CV 0.2
#define VARIANCE_MIN_SPREAD_NS 1000000
#define VARIANCE_MIN_STEPS 3

static sum_finding_t *add(sp_summary_t *m, const char *id, const char *title)
{
    if (m->nf == SUM_MAX_FINDINGS)
        return NULL;
    sum_finding_t *f = &m->f[m->nf++];
    memset(f, 0, sizeof *f);
    f->id = id;
    f->title = title;
    return f;
}

static void ev(sum_finding_t *f, const char *key, double v)
{
    if (f->nev < SUM_MAX_EVIDENCE) {
        f->ev_key[f->nev] = key;
        f->ev_val[f->nev++] = v;
    }
}

static const char *t(char *buf, double ns)
{
    sp_rep_fmt_time(buf, 32, (int64_t)(ns + 0.5));
    return buf;
}

static void rule_gpu_idle(sp_summary_t *m)
{
    if (!m->ndev)
        return;
    int d = m->primary;
    double sum = 0, worst = -1;
    long worst_i = 0;
    for (long i = 0; i < m->nsteps; i++) {
        double p = sum_idle_pct(&m->steps[i], d);
        sum += p;
        if (p > worst) {
            worst = p;
            worst_i = i;
        }
    }
    double avg = m->nsteps ? sum / (double)m->nsteps : 0;
    if (avg < IDLE_PCT)
        return;
    sum_finding_t *f = add(m, "gpu_idle", "GPU idle while the CPU is inside the step");
    if (!f)
        return;
    char a[32], b[32];
    sum_stat_t busy = sum_stat(m, SUM_FIELD(busy) + (size_t)d * sizeof(int64_t)), wall = sum_stat(m, SUM_FIELD(wall));
    snprintf(f->evidence, sizeof f->evidence,
             "GPU %ld idle %.1f%% of step time on average (busy %s of %s per step; worst step %ld: %.1f%% idle); "
             "threshold %.0f%%", m->dev_id[d], avg, t(a, busy.avg), t(b, wall.avg), (long)m->steps[worst_i].step,
             worst, IDLE_PCT);
    snprintf(f->recommendation, sizeof f->recommendation,
             "The GPU waits for the host. Overlap input preparation with compute (more DataLoader workers, "
             "pin_memory=True with non_blocking copies, prefetching); if the host is busy launching, cut launch "
             "overhead with CUDA graphs or fused kernels (torch.compile).");
    ev(f, "device", (double)m->dev_id[d]);
    ev(f, "idle_pct_avg", avg);
    ev(f, "busy_us_avg", busy.avg / 1e3);
    ev(f, "wall_us_avg", wall.avg / 1e3);
    ev(f, "worst_step", (double)m->steps[worst_i].step);
    ev(f, "worst_idle_pct", worst);
}

static void rule_short_kernels(sp_summary_t *m)
{
    sum_stat_t k = sum_stat(m, SUM_FIELD(kernels)), kt = sum_stat(m, SUM_FIELD(kernel_time));
    double mean = k.avg > 0 ? kt.avg / k.avg : 0;
    if (k.avg < MANY_KERNELS_PER_STEP || mean >= SHORT_KERNEL_NS)
        return;
    sum_finding_t *f = add(m, "short_kernels", "Many short kernels: launch overhead bound");
    if (!f)
        return;
    char a[32];
    snprintf(f->evidence, sizeof f->evidence,
             "%.1f kernels per step with a mean duration of %s (thresholds: >= %.0f per step, < %s)", k.avg,
             t(a, mean), MANY_KERNELS_PER_STEP, "10.000us");
    snprintf(f->recommendation, sizeof f->recommendation,
             "Each launch costs the host several microseconds, more than these kernels run. Capture the step in a "
             "CUDA graph (cudaStreamBeginCapture, torch.cuda.graphs), fuse element-wise kernels (torch.compile), "
             "or give each kernel more work (larger batch).");
    ev(f, "kernels_per_step", k.avg);
    ev(f, "mean_kernel_us", mean / 1e3);
}

static void rule_pageable(sp_summary_t *m)
{
    sum_stat_t n = sum_stat(m, SUM_FIELD(pageable)), by = sum_stat(m, SUM_FIELD(pageable_bytes)),
               tm = sum_stat(m, SUM_FIELD(pageable_time));
    if (n.max <= 0)
        return;
    sum_finding_t *f = add(m, "pageable_copy", "Copies from or to pageable host memory");
    if (!f)
        return;
    char a[32];
    snprintf(f->evidence, sizeof f->evidence,
             "%.1f pageable copies per step, %.0f bytes and %s of copy time per step (threshold: any)", n.avg,
             by.avg, t(a, tm.avg));
    snprintf(f->recommendation, sizeof f->recommendation,
             "Pageable copies go through a staging buffer and cannot overlap compute. Allocate these host buffers "
             "pinned (cudaMallocHost / cudaHostAlloc, pin_memory=True in a DataLoader) and copy with "
             "cudaMemcpyAsync (non_blocking=True).");
    ev(f, "copies_per_step", n.avg);
    ev(f, "bytes_per_step", by.avg);
    ev(f, "copy_us_per_step", tm.avg / 1e3);
}

/* Per-step rules need steps: without a step marker the window is one span
 * and a synchronize at the end of training would look like one per step. */
static int in_most_steps(const sp_summary_t *m, size_t off)
{
    if (!m->nsteps || m->steps[0].step < 0)
        return 0;
    long k = sum_steps_with(m, off);
    return k > 0 && (double)k >= STEP_SHARE * (double)m->nsteps;
}

static void rule_sync(sp_summary_t *m)
{
    if (!in_most_steps(m, SUM_FIELD(host_syncs)))
        return;
    sum_finding_t *f = add(m, "sync_per_step", "Synchronization inside the step");
    if (!f)
        return;
    sum_stat_t n = sum_stat(m, SUM_FIELD(host_syncs)), tm = sum_stat(m, SUM_FIELD(host_sync_time)),
               wall = sum_stat(m, SUM_FIELD(wall));
    char a[32], calls[256] = "";
    for (size_t i = 0, o = 0; i < m->sync_calls.n && o < sizeof calls; i++)
        if (strstr(m->sync_calls.t[i].name, "Synchronize"))
            o += (size_t)snprintf(calls + o, sizeof calls - o, "%s%s x%lld", o ? ", " : "", m->sync_calls.t[i].name,
                                  (long long)m->sync_calls.t[i].count);
    long k = sum_steps_with(m, SUM_FIELD(host_syncs));
    double share = wall.avg > 0 ? 100.0 * tm.avg / wall.avg : 0;
    snprintf(f->evidence, sizeof f->evidence,
             "%ld of %ld steps call a synchronize (%s); %.1f calls and %s blocked per step, %.1f%% of step time "
             "(threshold: >= %.0f%% of steps)", k, m->nsteps, calls, n.avg, t(a, tm.avg), share, STEP_SHARE * 100);
    snprintf(f->recommendation, sizeof f->recommendation,
             "Each synchronize stalls the host until the GPU drains, so the next step's launches cannot queue "
             "ahead. Drop it from the step (avoid .item() / .cpu() / printing GPU values every step; log every N "
             "steps) or wait on a CUDA event recorded earlier instead of the whole stream or device.");
    ev(f, "steps_with_sync", (double)k);
    ev(f, "sync_calls_per_step", n.avg);
    ev(f, "sync_us_per_step", tm.avg / 1e3);
    ev(f, "sync_pct_of_step", share);
}

static void rule_blocking_d2h(sp_summary_t *m)
{
    if (!in_most_steps(m, SUM_FIELD(blocking_d2h)))
        return;
    sum_finding_t *f = add(m, "blocking_d2h", "Synchronous device-to-host copy inside the step");
    if (!f)
        return;
    sum_stat_t n = sum_stat(m, SUM_FIELD(blocking_d2h)), by = sum_stat(m, SUM_FIELD(blocking_d2h_bytes)),
               tm = sum_stat(m, SUM_FIELD(blocking_d2h_time));
    long k = sum_steps_with(m, SUM_FIELD(blocking_d2h));
    char a[32];
    snprintf(f->evidence, sizeof f->evidence,
             "%ld of %ld steps call cudaMemcpy device-to-host: %.1f copies, %.0f bytes and %s blocked per step "
             "(threshold: >= %.0f%% of steps)", k, m->nsteps, n.avg, by.avg, t(a, tm.avg), STEP_SHARE * 100);
    snprintf(f->recommendation, sizeof f->recommendation,
             "A synchronous cudaMemcpy to the host waits for all queued work and, on the legacy default stream, "
             "serializes the other streams (typical: reading the loss every step). Copy with cudaMemcpyAsync into "
             "pinned memory on a side stream and read the value a step later, or only every N steps.");
    ev(f, "steps_with_copy", (double)k);
    ev(f, "copies_per_step", n.avg);
    ev(f, "bytes_per_step", by.avg);
    ev(f, "blocked_us_per_step", tm.avg / 1e3);
}

static void rule_dominant(sp_summary_t *m)
{
    if (m->kernels.n < 2 || m->kernel_total <= 0)
        return;
    const sum_tally_t *top = &m->kernels.t[0];
    for (size_t i = 1; i < m->kernels.n; i++)
        if (m->kernels.t[i].total > top->total)
            top = &m->kernels.t[i];
    double share = (double)top->total / (double)m->kernel_total;
    if (share < DOMINANT_SHARE)
        return;
    sum_finding_t *f = add(m, "dominant_kernel", "One kernel dominates GPU time");
    if (!f)
        return;
    char a[32];
    snprintf(f->evidence, sizeof f->evidence, "%s: %.1f%% of kernel time, %lld calls, %s per step (threshold %.0f%%)",
             top->name, 100 * share, (long long)top->count, t(a, (double)top->total / (double)m->nsteps),
             DOMINANT_SHARE * 100);
    snprintf(f->recommendation, sizeof f->recommendation,
             "Optimize this kernel first: profile it with Nsight Compute (occupancy, memory throughput), use "
             "tensor-core friendly shapes and dtypes (AMP, multiples of 8), or a faster library implementation.");
    ev(f, "share_pct", 100 * share);
    ev(f, "calls", (double)top->count);
    ev(f, "kernel_us_per_step", (double)top->total / (double)m->nsteps / 1e3);
}

static void rule_variance(sp_summary_t *m)
{
    if (m->nsteps < VARIANCE_MIN_STEPS || m->steps[0].step < 0)
        return;
    sum_stat_t w = sum_stat(m, SUM_FIELD(wall));
    if (w.avg <= 0 || w.stddev < VARIANCE_CV * w.avg || w.max - w.min < VARIANCE_MIN_SPREAD_NS)
        return;
    sum_finding_t *f = add(m, "step_variance", "Step times vary");
    if (!f)
        return;
    long slow = 0;
    for (long i = 1; i < m->nsteps; i++)
        if (m->steps[i].wall > m->steps[slow].wall)
            slow = i;
    char a[32], b[32], c[32];
    snprintf(f->evidence, sizeof f->evidence,
             "step time min %s, avg %s, max %s (step %ld); stddev %.1f%% of the mean (thresholds: >= %.0f%% and "
             "max - min >= 1ms)", t(a, w.min), t(b, w.avg), t(c, w.max), (long)m->steps[slow].step,
             100 * w.stddev / w.avg, VARIANCE_CV * 100);
    snprintf(f->recommendation, sizeof f->recommendation,
             "Open the slowest step in the trace: periodic work (data loading stalls, checkpointing, logging, "
             "garbage collection, allocator growth) or contention on the host makes steps uneven.");
    ev(f, "min_us", w.min / 1e3);
    ev(f, "avg_us", w.avg / 1e3);
    ev(f, "max_us", w.max / 1e3);
    ev(f, "stddev_pct", 100 * w.stddev / w.avg);
    ev(f, "slowest_step", (double)m->steps[slow].step);
}

static void rule_dropped(sp_summary_t *m)
{
    if (!m->dropped)
        return;
    sum_finding_t *f = add(m, "dropped_events", "Events were dropped");
    if (!f)
        return;
    snprintf(f->evidence, sizeof f->evidence,
             "%llu events did not fit in the buffer; every number above undercounts (threshold: any)",
             (unsigned long long)m->dropped);
    snprintf(f->recommendation, sizeof f->recommendation,
             "Raise buffer_mb (PROF_BUFFER_MB) or record fewer steps per cycle (active) so every event fits.");
    ev(f, "dropped", (double)m->dropped);
}

void sum_rules(sp_summary_t *m)
{
    m->nf = 0;
    m->rules_skipped = !m->gpu;
    if (m->gpu) {
        rule_gpu_idle(m);
        rule_short_kernels(m);
        rule_pageable(m);
    }
    rule_sync(m);
    rule_blocking_d2h(m);
    if (m->gpu)
        rule_dominant(m);
    rule_variance(m);
    rule_dropped(m);
}
