/* exporters/memory_report.h — <stem>.memory.txt (profile_memory): per-device
 * peak (bytes, when, in which step and NVTX range), the per-step peak / net
 * table, allocations by size class, the leak report (blocks allocated in the
 * cycle and live at its end, grouped by stack or call site, largest first),
 * the blocks alive at exit, bad frees, and for each out-of-memory failure the
 * live blocks at that moment, largest first. Also the small analysis both
 * memory files share (peaks, names, the file writer). */
#ifndef SP_MEMORY_REPORT_H
#define SP_MEMORY_REPORT_H

#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "export.h"
#include "report_buf.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sp_memrep_peak {
    int64_t bytes;
    uint64_t t;      /* CLOCK_MONOTONIC ns */
    long step;
    long op;         /* index in the cycle's ops; -1: the level the window opened at */
} sp_memrep_peak_t;

/* The highest allocated level of a slot inside the window (the first time it
 * was reached). */
void sp_memrep_peak(const sp_mem_cycle_t *m, int slot, sp_memrep_peak_t *out);

/* "GPU 0" or "pinned host". */
const char *sp_memrep_slot_name(int slot, char *buf, size_t len);

/* Writes b to <dir>/<stem><suffix> through a temporary file; 0 on success. */
int sp_memrep_write_file(const sp_export_job_t *job, const char *stem, const char *suffix, const sp_rb_t *b);

/* ev: the window's host events (sorted by start, ns), for NVTX ranges. */
int sp_memreport_write(const sp_export_job_t *job, const char *stem, const sp_mem_cycle_t *m,
                       const sp_event_ref_t *ev, size_t n);

/* At the end of a process whose last cycle ended earlier (so no cycle report
 * can list them): <dir>/<worker>.<unix_ns>.memory_exit.txt with the blocks
 * still allocated, largest first. 0 on success or when there are none. */
int sp_memrep_write_exit(const char *output_dir, const char *worker);

#endif
