/* exporters/trace.h — the Chrome trace (Kineto flavour, formats.md section 3)
 * for one finished window. */
#ifndef SP_TRACE_H
#define SP_TRACE_H

#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "export.h"
#include "gpu_trace.h"

#include <stddef.h>

/* Events are sorted by start and their t0/t1 already converted to
 * CLOCK_MONOTONIC ns; gpu holds CUPTI's records of the window (may be empty). base_ns: the window start (CLOCK_MONOTONIC ns), end_ns:
 * its end; mem: the window's memory events (profile_memory), or NULL.
 * Writes <dir>/<stem>.pt.trace.json; 0 on success. */
int sp_trace_write(const sp_export_job_t *job, const char *stem, const sp_event_ref_t *ev, size_t n,
                   const sp_gpu_view_t *gpu, uint64_t base_ns, uint64_t end_ns, const sp_mem_cycle_t *mem);

#endif
