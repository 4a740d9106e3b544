/* exporters/report_write.h — the in-process reports of one cycle, written
 * beside the trace under the same stem: <stem>.key_averages.txt (and/or
 * stderr, per table.print), <stem>.summary.txt, <stem>.summary.json.txt (JSON; no
 * name ending in .json, which HTA would read as a trace) and,
 * with with_stack, <stem>.stacks.txt (self CPU time) plus
 * <stem>.stacks_cuda.txt (GPU time, when the window has any). */
#ifndef SP_REPORT_WRITE_H
#define SP_REPORT_WRITE_H

#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "agg.h"
#include "export.h"
#include "gpu_trace.h"
#include "report_buf.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Every report of a cycle, rendered in memory: each with its rendering's
 * result (0, or -1: that report is not written). */
typedef struct sp_reports {
    sp_rb_t table;
    int table_rc;
    sp_rb_t stacks[2];      /* self CPU time, GPU time */
    int stacks_rc[2], nstacks;
    sp_rb_t text, json;     /* the summary */
    int summary_rc;
} sp_reports_t;

/* The summary is rendered by whichever thread is free first once the set is
 * analysed: the reports' own thread after the table and stacks, or the
 * trace's thread after the trace (sp_report_help). A window of a million
 * distinct names spends as long on its summary as on its table, while the
 * trace's thread would only wait. Set up before the reports' thread is given
 * the job (sp_report_share_init), freed after it finished. */
typedef struct sp_report_share {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int state;               /* enum in report_write.c */
    sp_rep_set_t *set;       /* the analysed set, while state says so */
    sp_reports_t *r;
} sp_report_share_t;

void sp_report_share_init(sp_report_share_t *sh);
void sp_report_share_destroy(sp_report_share_t *sh);
/* *var = value, under the share's lock, waking every waiter; and waiting
 * while *var == value. The two export threads' one-way signals (export.c's
 * settled names and ready inputs, the summary's state here). */
void sp_report_share_store(sp_report_share_t *sh, int *var, int value);
void sp_report_share_wait_while(sp_report_share_t *sh, const int *var, int value);
/* On the trace's thread: waits until the set is analysed (or failed), then
 * renders the summary if the reports' thread has not taken it. */
void sp_report_help(sp_report_share_t *sh);

/* Two steps, so that the reports can be computed beside the trace's writer
 * (they only read what it reads: the window's records, the GPU view and the
 * memory operations; what the trace's writer changes in them the reports do
 * not read) and written after it, only
 * when the trace was: sp_report_render builds the neutral event set from the
 * inputs of sp_trace_write, analyses it, renders every report into r (the
 * summary perhaps on the thread that calls sp_report_help on sh; sh may be
 * NULL) and frees the set (0, or -1 said: r then holds nothing); sp_report_write writes r's
 * files and frees r (0 when every file was written); sp_report_discard frees r
 * unwritten. */
int sp_report_render(sp_reports_t *r, sp_report_share_t *sh, const sp_export_job_t *job, const sp_event_ref_t *ev,
                     size_t n, const sp_gpu_view_t *gpu, const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns);
int sp_report_write(sp_reports_t *r, const sp_export_job_t *job, const char *stem);
void sp_report_discard(sp_reports_t *r);

#endif
