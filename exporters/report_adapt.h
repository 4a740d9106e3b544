/* exporters/report_adapt.h — the in-process source of report events: one
 * finished window's records turned into the neutral array of agg.h, with the
 * same names, numbers and strings the trace writer prints for them, so the
 * reports made here equal the ones stepprof-report makes from the trace. */
#ifndef SP_REPORT_ADAPT_H
#define SP_REPORT_ADAPT_H

#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "agg.h"
#include "gpu_trace.h"

/* ev: sorted, t0/t1 in CLOCK_MONOTONIC ns; gpu: the view the trace was
 * written from; mem: the window's memory operations (NULL without
 * profile_memory); [base_ns, end_ns]: the trace's window. Adds the window's
 * events to s; 0, or -1 when out of memory. */
int sp_report_adapt(sp_rep_set_t *s, const sp_event_ref_t *ev, size_t n, const sp_gpu_view_t *gpu,
                    const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns);

#endif
