/* exporters/export.c — one export job from records to files: collect the
 * window's records from the buffer, convert ticks to nanoseconds, sort by
 * start (ties: the longer, enclosing event first, so nesting reads top-down),
 * and hand them to each file writer under one stem. */
#include "export.h"

#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "outfile.h"
#include "trace.h"

#include <stdlib.h>

static int cmp_start(const void *a, const void *b)
{
    const sp_event_t *x = &((const sp_event_ref_t *)a)->ev, *y = &((const sp_event_ref_t *)b)->ev;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1)
        return x->t1 > y->t1 ? -1 : 1;
    return 0;
}

int sp_export_run(const sp_export_job_t *job)
{
    sp_event_ref_t *ev = NULL;
    size_t n = sp_ev_collect(job->window, &ev);
    sp_clock_recalibrate();
    for (size_t i = 0; i < n; i++) {
        ev[i].ev.t0 = sp_clock_to_ns(ev[i].ev.t0);
        ev[i].ev.t1 = sp_clock_to_ns(ev[i].ev.t1);
    }
    qsort(ev, n, sizeof *ev, cmp_start);
    uint64_t base = sp_clock_to_ns(job->t_begin), end = sp_clock_to_ns(job->t_end);
    if (n && ev[0].ev.t0 < base)
        base = ev[0].ev.t0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].ev.t1 > end)
            end = ev[i].ev.t1;
    char stem[512];
    sp_outfile_stem(stem, sizeof stem, job->worker, end + (uint64_t)sp_clock_epoch_offset());
    sp_gpu_event_t *gpu_recs = NULL;
    size_t ngpu = sp_cupti_take(sp_clock_to_ns(job->t_begin), sp_clock_to_ns(job->t_end), &gpu_recs);
    sp_gpu_view_t gpu;
    sp_gpuv_build(&gpu, ev, n, gpu_recs, ngpu);
    int rc = sp_trace_write(job, stem, ev, n, &gpu, base, end);
    sp_gpuv_free(&gpu);
    free(ev);
    return rc;
}
