/* exporters/export.c — one export job from records to files: collect the
 * window's records from the buffer (in place), convert ticks to nanoseconds, sort by
 * start (ties: the longer, enclosing event first, so nesting reads top-down),
 * and hand them to each file writer under one stem. Also the bound on how
 * many traces a run writes: cycles that end faster than SP_EXPORT_MAX_PER_S
 * per second on average (past a burst of SP_EXPORT_BURST, e.g. `repeat: 0`
 * with very short steps) are dropped, said in one line. */
#include "export.h"

#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/log.h"
#include "../collectors/memory.h"
#include "../collectors/threads.h"
#include "memory_html.h"
#include "memory_report.h"
#include "outfile.h"
#include "radix.h"
#include "report_write.h"
#include "trace.h"

#include <pthread.h>
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

/* The order cmp_start gives with a stable sort, in linear time: a radix sort
 * on the start, then each run of equal starts (rare and short) by end. The
 * spare half of the radix buffers, as big as the references, takes the
 * permuted references. */
static void sort_by_start(sp_event_ref_t *ev, size_t n)
{
    _Static_assert(sizeof(sp_kv_t) == sizeof(sp_event_ref_t), "the spare buffer holds the references");
    sp_kv_t *kv = malloc(2 * n * sizeof *kv), *out = NULL;
    for (size_t i = 0; kv && i < n; i++)
        kv[i] = (sp_kv_t){ev[i].ev->t0, i};
    if (kv)
        out = sp_radix_sort(kv, kv + n, n);
    if (!out) {
        free(kv);
        qsort(ev, n, sizeof *ev, cmp_start);
        return;
    }
    tie_base = ev;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && out[j].key == out[i].key; j++)
            ;
        if (j - i > 1)
            qsort(out + i, j - i, sizeof *out, cmp_tie);
    }
    sp_event_ref_t *spare = (sp_event_ref_t *)(out == kv ? kv + n : kv);
    for (size_t i = 0; i < n; i++)
        spare[i] = ev[out[i].val];
    memcpy(ev, spare, n * sizeof *ev);
    free(kv);
}

static uint64_t event_limit; /* set once at activation, before any job */
static _Atomic uint64_t running_events; /* events of the job being written (exit's loss line) */

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
    free(ev);
    sp_ev_release();
    free(job->gpu);
    sp_mem_cycle_free(sp_mem_cycle_take(job->window));
}

/* The reports of a job, computed on their own thread while the exporter's
 * writes the trace (design.md: export runs on two threads). */
typedef struct report_task {
    const sp_export_job_t *job;
    const sp_event_ref_t *ev;
    size_t n;
    const sp_gpu_view_t *gpu;
    const sp_mem_cycle_t *mem;
    uint64_t base, end;
    sp_reports_t rep;
    int rc, done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} report_task_t;

static void *report_main(void *arg)
{
    report_task_t *t = arg;
    int rc = sp_report_render(&t->rep, t->job, t->ev, t->n, t->gpu, t->mem, t->base, t->end);
    pthread_mutex_lock(&t->lock);
    t->rc = rc;
    t->done = 1;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void report_wait(report_task_t *t)
{
    pthread_mutex_lock(&t->lock);
    while (!t->done)
        pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

void sp_export_collect_gpu(sp_export_job_t *job)
{
    if (!job->gpu_collect)
        return;
    /* The window's close, the part that waits: off the program's thread (design.md). */
    job->ngpu = sp_cupti_collect(job->gpu_sync, job->gpu_device, sp_clock_to_ns(job->t_begin),
                                 sp_clock_to_ns(job->t_end), job->cupti_api_filter, &job->gpu, &job->cupti_dropped,
                                 &job->api_filtered);
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
        return -1;
    }
    sp_event_ref_t *ev = NULL;
    size_t n = sp_ev_collect(job->window, 1, &ev);
    atomic_store(&running_events, (uint64_t)n + job->ngpu);
    sp_clock_recalibrate();
    for (size_t i = 0; i < n; i++) {   /* in place: the records are ours until sp_ev_release */
        ev[i].ev->t0 = sp_clock_to_ns(ev[i].ev->t0);
        ev[i].ev->t1 = sp_clock_to_ns(ev[i].ev->t1);
    }
    if (n)   /* a window of driver calls only has no records: ev is NULL */
        sort_by_start(ev, n);
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
    sp_gpuv_build(&gpu, ev, n, job->gpu, job->ngpu); /* the view owns and frees them */
    /* GPU work launched in the window may finish after it: the window's end
     * ("Record Window End") covers it. */
    for (size_t i = 0; i < gpu.n; i++)
        if (gpu.gpu[i].end > end)
            end = gpu.gpu[i].end;
    sp_mem_cycle_t *mem = sp_mem_cycle_take(job->window); /* NULL unless profile_memory */
    /* The reports beside the trace, on a second thread: both only read the
     * records, the GPU view and the memory operations. */
    report_task_t rt = {.job = job, .ev = ev, .n = n, .gpu = &gpu, .mem = mem, .base = base, .end = end,
                        .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    int beside = sp_thread_spawn(report_main, &rt, "stepprof-report", NULL) == 0;
    int rc = sp_trace_write(job, stem, ev, n, &gpu, base, end, mem);
    if (rc == 0 && mem && (sp_memreport_write(job, stem, mem, ev, n) | sp_memhtml_write(job, stem, mem)) != 0)
        rc = -1;
    /* Reports sit beside the trace: where it could not be written (its error
     * said why), they would fail the same way and only repeat the message. */
    if (beside)
        report_wait(&rt);
    else if (rc == 0)
        rt.rc = sp_report_render(&rt.rep, job, ev, n, &gpu, mem, base, end);
    sp_mem_cycle_free(mem);
    sp_gpuv_free(&gpu);
    free(ev);
    sp_ev_release();
    if (rc == 0 && rt.rc == 0)
        rc = sp_report_write(&rt.rep, job, stem);
    else
        sp_report_discard(&rt.rep);   /* holds nothing when the rendering failed (and said so) */
    if (rt.rc)
        rc = -1;
    atomic_store(&running_events, 0);
    return rc;
}
