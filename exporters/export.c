/* exporters/export.c — one export job from records to files: collect the
 * window's records from the buffer (in place), convert ticks to nanoseconds, sort by
 * start (ties: the longer, enclosing event first, so nesting reads top-down),
 * and hand them to each file writer under one stem. Also the bound on how
 * many traces a run writes: cycles that end faster than SP_EXPORT_MAX_PER_S
 * per second on average (past a burst of SP_EXPORT_BURST, e.g. `repeat: 0`
 * with very short steps) are dropped, said in one line. */
#include "export.h"

#include "../collectors/bigmem.h"

#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/log.h"
#include "../collectors/memory.h"
#include "memory_html.h"
#include "memory_report.h"
#include "ops_trace.h"
#include "outfile.h"
#include "radix.h"
#include "report_write.h"
#include "trace.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_start(const void *a, const void *b)
{
    const sp_event_t *x = ((const sp_event_ref_t *)a)->ev, *y = ((const sp_event_ref_t *)b)->ev;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1)
        return x->t1 > y->t1 ? -1 : 1;
    return 0;
}

static const sp_event_ref_t *tie_base;

/* Events that start in the same nanosecond: the longer first, then collect order. */
static int cmp_tie(const void *a, const void *b)
{
    const sp_kv_t *x = a, *y = b;
    uint64_t e1 = tie_base[x->val].ev->t1, e2 = tie_base[y->val].ev->t1;
    if (e1 != e2)
        return e1 > e2 ? -1 : 1;
    return (x->val > y->val) - (x->val < y->val);
}

/* The order cmp_start gives with a stable sort of the n references kv
 * names (key: start, value: index; kv has room for 2n), in linear time: a
 * radix sort on the start, then each run of equal starts (rare and short) by
 * end. order[k] is the index of the k-th; 0, or -1 when out of memory. */
static int sort_side(sp_event_ref_t *ev, sp_kv_t *kv, size_t n, size_t *order)
{
    sp_kv_t *out = sp_radix_sort(kv, kv + n, n);
    if (!out)
        return -1;
    tie_base = ev;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && out[j].key == out[i].key; j++)
            ;
        if (j - i > 1)
            qsort(out + i, j - i, sizeof *out, cmp_tie);
    }
    for (size_t i = 0; i < n; i++)
        order[i] = out[i].val;
    return 0;
}

/* Whether reference i comes before reference j (i != j) in cmp_start's
 * stable order: by start, the longer first, then in collect order. */
static int ref_before(const sp_event_ref_t *ev, size_t i, size_t j)
{
    const sp_event_t *a = ev[i].ev, *b = ev[j].ev;
    if (a->t0 != b->t0)
        return a->t0 < b->t0;
    if (a->t1 != b->t1)
        return a->t1 > b->t1;
    return i < j;
}

/* Times to nanoseconds, then the references in cmp_start's stable order,
 * in a new array (ev itself is left as it was: the reports' thread may be
 * settling names through it); NULL when out of memory, the times converted.
 * Records come nearly in order (a thread's records in the order its calls
 * ended: a range after the calls inside it), so one pass keeps the longest
 * ascending run it can take greedily and sets the rest aside; only those are
 * sorted (sort_side), and one merge joins the two. */
static sp_event_ref_t *to_ns_sorted(sp_event_ref_t *ev, size_t n)
{
    size_t *run = sp_big_alloc(n * sizeof *run, 0), *side_order = sp_big_alloc(n * sizeof *side_order, 0), nrun = 0,
           nside = 0;
    sp_kv_t *side = sp_big_alloc(2 * n * sizeof *side, 0);
    sp_event_ref_t *out = sp_big_alloc(n * sizeof *out, 0);
    for (size_t i = 0; i < n; i++) {   /* in place: the records are ours until sp_ev_release */
        ev[i].ev->t0 = sp_clock_to_ns(ev[i].ev->t0);
        ev[i].ev->t1 = sp_clock_to_ns(ev[i].ev->t1);
        if (!run || !side)
            continue;
        if (!nrun || ref_before(ev, run[nrun - 1], i))
            run[nrun++] = i;
        else
            side[nside++] = (sp_kv_t){ev[i].ev->t0, i};
    }
    if (!run || !side || !side_order || !out || sort_side(ev, side, nside, side_order) != 0) {
        sp_big_free(out);
        out = NULL;
    } else {
        for (size_t i = 0, a = 0, b = 0; i < n; i++)
            out[i] = ev[b == nside || (a < nrun && ref_before(ev, run[a], side_order[b])) ? run[a++] : side_order[b++]];
    }
    sp_big_free(run);
    sp_big_free(side_order);
    sp_big_free(side);
    return out;
}

static uint64_t event_limit; /* set once at activation, before any job */
static _Atomic uint64_t running_events; /* events of the job being written (exit's loss line) */
static _Atomic int running_trace_done;   /* its trace is written (its reports may not be yet) */

int sp_export_running_trace_done(void)
{
    return atomic_load(&running_trace_done) || sp_outfile_committing();
}

uint64_t sp_export_running_events(void)
{
    return atomic_load(&running_events);
}

void sp_export_set_limit(uint64_t max_events)
{
    event_limit = max_events;
}

/* Token bucket on the exporter's thread (jobs run one at a time; the
 * fallback on a program thread only when that thread could not start). */
static double tokens = SP_EXPORT_BURST;
static double tokens_at;
static unsigned long rate_dropped;

static int over_rate(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    if (tokens_at > 0) {
        tokens += (now - tokens_at) * SP_EXPORT_MAX_PER_S;
        if (tokens > SP_EXPORT_BURST)
            tokens = SP_EXPORT_BURST;
    }
    tokens_at = now;
    if (tokens >= 1) {
        tokens -= 1;
        return 0;
    }
    if (rate_dropped++ == 0)
        sp_log(SP_LOG_WARN, "cycles end faster than %d per second (after %d): only that many traces are written, "
               "the other cycles are dropped (a longer active phase or a wait between cycles keeps them)",
               SP_EXPORT_MAX_PER_S, SP_EXPORT_BURST);
    return 1;
}

/* A dropped cycle's records are still taken, so their memory is reused. */
static void discard(const sp_export_job_t *job)
{
    sp_event_ref_t *ev = NULL;
    sp_ev_collect(job->window, 0, &ev);
    sp_big_free(ev);
    sp_ev_release();
    free(job->gpu.work);
    free(job->gpu.calls);
    sp_mem_cycle_free(sp_mem_cycle_take(job->window));
}

/* The reports of a job, computed on the report helper while the exporter's
 * thread writes the trace (worker.c: sp_export_beside). */
typedef struct report_task {
    /* First the window's NVTX names, settled on the reports' thread while
     * the exporter's sorts (a million distinct names take as long as the
     * sort); the exporter waits for `settled` before anything reads a name,
     * the reports' thread for `inputs` (the fields below) before the rest. */
    uint32_t window;
    sp_event_ref_t *refs;
    size_t nrefs;
    int settled, inputs;
    const sp_export_job_t *job;
    const sp_event_ref_t *ev;
    size_t n;
    const sp_gpu_view_t *gpu;
    const sp_mem_cycle_t *mem;
    uint64_t base, end;
    sp_reports_t rep;
    sp_report_share_t share;   /* the summary goes to whichever thread is free first */
    int rc;
} report_task_t;

static void report_main(void *arg)
{
    report_task_t *t = arg;
    sp_ev_settle(t->window, t->refs, t->nrefs);
    sp_report_share_store(&t->share, &t->settled, 1);
    sp_report_share_wait_while(&t->share, &t->inputs, 0);
    t->rc = sp_report_render(&t->rep, &t->share, t->job, t->ev, t->n, t->gpu, t->mem, t->base, t->end);
}

void sp_export_collect_gpu(sp_export_job_t *job)
{
    if (!job->gpu_collect)
        return;
    /* The window's close, the part that waits: off the program's thread (design.md). */
    sp_cupti_collect(job->gpu_sync, job->gpu_device, sp_clock_to_ns(job->t_begin),
                     sp_clock_to_ns(job->t_end), &job->gpu, &job->cupti_dropped, &job->api_filtered,
                     &job->cupti_cold_gen);
    job->gpu_collect = 0;
}

int sp_export_run(const sp_export_job_t *job_in)
{
    /* A local copy: the GPU records collected here, and the size cap changes
     * the dropped count and the truncation mark every writer below reports. */
    sp_export_job_t capped = *job_in;
    const sp_export_job_t *job = &capped;
    sp_export_collect_gpu(&capped);   /* done already unless the collecting thread could not start */
    if (over_rate()) {
        discard(job);
        sp_cupti_rewarm(job->cupti_cold_gen, NULL);
        return -1;
    }
    sp_event_ref_t *ev = NULL;
    size_t n = sp_ev_collect(job->window, SP_EV_NAMES_LATER, &ev);
    atomic_store(&running_trace_done, 0);
    atomic_store(&running_events, (uint64_t)n + job->gpu.nwork + job->gpu.ncalls);
    report_task_t rt = {.window = job->window, .refs = ev, .nrefs = n, .job = job};
    sp_report_share_init(&rt.share);
    unsigned long beside = sp_export_beside(report_main, &rt);
    if (!beside)
        sp_ev_settle(job->window, ev, n);
    sp_clock_recalibrate();
    sp_event_ref_t *sorted = n ? to_ns_sorted(ev, n) : NULL; /* a window of driver calls only has no records */
    /* The reports' thread may still be settling names through the collected
     * array: it is freed (or, short of memory, sorted in place) only once
     * that is done. Until then this thread builds what needs no name. */
    int settled = !beside;
    if (!sorted && n) {
        if (!settled)
            sp_report_share_wait_while(&rt.share, &rt.settled, 0);
        settled = 1;
        qsort(ev, n, sizeof *ev, cmp_start);
    }
    sp_event_ref_t *collected = sorted ? ev : NULL;
    ev = sorted ? sorted : ev;
    if (event_limit && n > event_limit) {
        capped.dropped += n - event_limit;
        n = (size_t)event_limit;
    }
    if (capped.dropped && (n == event_limit || sp_ev_window_capped(job->window)))
        capped.truncated |= SP_TRUNC_LIMIT;
    uint64_t base = sp_clock_to_ns(job->t_begin), end = sp_clock_to_ns(job->t_end);
    if (n && ev[0].ev->t0 < base)
        base = ev[0].ev->t0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].ev->t1 > end)
            end = ev[i].ev->t1;
    char stem[512];
    sp_outfile_stem(stem, sizeof stem, job->worker, end + (uint64_t)sp_clock_epoch_offset());
    sp_gpu_view_t gpu;
    sp_gpuv_build(&gpu, ev, n, &job->gpu); /* the view owns and frees them */
    /* GPU work launched in the window may finish after it: the window's end
     * ("Record Window End") covers it. */
    for (size_t i = 0; i < gpu.n; i++)
        if (gpu.gpu[i].end > end)
            end = gpu.gpu[i].end;
    for (size_t i = 0; i < gpu.napi; i++)
        if (gpu.api[i].end > end)
            end = gpu.api[i].end;
    end = gpu.ends_last > end ? gpu.ends_last : end;   /* launches whose end the view set */
    sp_mem_cycle_t *mem = sp_mem_cycle_take(job->window); /* NULL unless profile_memory */
    if (!settled)
        sp_report_share_wait_while(&rt.share, &rt.settled, 0);
    sp_big_free(collected);
    sp_ops_regroup(ev, n);   /* before either thread reads an operator's Input Dims */
    /* The reports beside the trace, on a second thread: from here the
     * reports only read the records, the GPU view and the memory operations;
     * what the trace's writer still changes in them (Python functions' ends,
     * the view's range index) the reports do not read. */
    rt.ev = ev;
    rt.n = n;
    rt.gpu = &gpu;
    rt.mem = mem;
    rt.base = base;
    rt.end = end;
    if (beside)
        sp_report_share_store(&rt.share, &rt.inputs, 1);
    sp_gpuv_build_ranges(&gpu, ev, n);   /* the reports do not read them */
    int rc = sp_trace_write(job, stem, ev, n, &gpu, base, end, mem);
    atomic_store(&running_trace_done, 1);   /* written, or failed and said why: not lost at exit */
    if (rc == 0 && mem && (sp_memreport_write(job, stem, mem, ev, n) | sp_memhtml_write(job, stem, mem)) != 0)
        rc = -1;
    /* Reports sit beside the trace: where it could not be written (its error
     * said why), they would fail the same way and only repeat the message. */
    if (beside) {
        if (rc == 0)   /* else the reports are not written: no summary to help with */
            sp_report_help(&rt.share);
        sp_export_beside_wait(beside);
    } else if (rc == 0) {
        rt.rc = sp_report_render(&rt.rep, NULL, job, ev, n, &gpu, mem, base, end);
    }
    sp_report_share_destroy(&rt.share);
    sp_mem_cycle_free(mem);
    sp_gpuv_free(&gpu);
    sp_big_free(ev);   /* the sorted array, or the collected one sorted in place */
    sp_ev_release();
    if (rc == 0 && rt.rc == 0)
        rc = sp_report_write(&rt.rep, job, stem);
    else
        sp_report_discard(&rt.rep);   /* holds nothing when the rendering failed (and said so) */
    if (rt.rc)
        rc = -1;
    atomic_store(&running_events, 0);
    sp_cupti_rewarm(job->cupti_cold_gen, NULL);   /* past the export's peak: its collect's buffers warm again */
    return rc;
}
