/* exporters/stacks_out.h — collapsed stacks (formats.md section 5), the
 * input of flamegraph.pl and speedscope, from an analysed set. */
#ifndef SP_STACKS_OUT_H
#define SP_STACKS_OUT_H

#include "agg.h"
#include "report_buf.h"

/* One line per API call with a stack and a positive metric:
 * "outermost;...;innermost;apiName <integer us>". metric:
 * self_cpu_time_total (host time of the call) or self_cuda_time_total (GPU
 * time of the work it launched). 0, or -1 for another metric / no memory. */
int sp_rep_stacks(const sp_rep_set_t *s, const char *metric, sp_rb_t *out);

/* 1 when any event has a stack (so a stacks file is worth writing). */
int sp_rep_has_stacks(const sp_rep_set_t *s);

/* 1 when any GPU work has a positive duration. */
int sp_rep_has_gpu_time(const sp_rep_set_t *s);

#endif
