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

#include <stddef.h>
#include <stdint.h>

/* Two steps, so that the window's records, CUPTI's and the GPU view can be
 * freed before the analysis, the export's peak: sp_report_build turns the
 * same inputs as sp_trace_write into s (0, or -1 said and s freed);
 * sp_report_write analyses s, writes every report and frees s (0 when every
 * file was written). */
int sp_report_build(sp_rep_set_t *s, const sp_export_job_t *job, const sp_event_ref_t *ev, size_t n,
                    const sp_gpu_view_t *gpu, const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns);
int sp_report_write(const sp_export_job_t *job, const char *stem, sp_rep_set_t *s);

#endif
