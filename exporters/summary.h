/* exporters/summary.h — the step summary (<stem>.summary.txt and
 * <stem>.summary.json): per recorded step wall time, GPU busy / idle, time
 * in kernels, copies, sets and syncs, launches; min/avg/max over the cycle;
 * CPU time per NVTX range; and findings fired by the explicit rules of
 * exporters/summary_rules.c (thresholds there and in docs/reports.md). */
#ifndef SP_SUMMARY_H
#define SP_SUMMARY_H

#include "agg.h"
#include "report_buf.h"

/* Appends the text and the JSON summary of an analysed set (either may be
 * NULL). 0, or -1 when out of memory. */
int sp_rep_summary(sp_rep_set_t *s, sp_rb_t *text, sp_rb_t *json);

#endif
