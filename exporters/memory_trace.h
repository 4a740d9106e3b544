/* exporters/memory_trace.h — the memory part of a window's Chrome trace
 * (profile_memory): the [memory] and [OutOfMemory] instant events of
 * formats.md section 3, and one "ph": "C" counter track per device (and one
 * for pinned host memory) with the allocated bytes over the window, which
 * Perfetto and chrome://tracing draw as a curve. */
#ifndef SP_MEMORY_TRACE_H
#define SP_MEMORY_TRACE_H

#include "../collectors/memory.h"
#include "jsonw.h"

#include <stdint.h>

/* Events of one frozen window, each followed by ",\n"; nothing when m is
 * NULL. Times are clamped into [base_ns, end_ns], the trace's window. */
void sp_memtrace_write(sp_jw_t *w, const sp_mem_cycle_t *m, int pid, uint64_t base_ns, uint64_t end_ns);

#endif
