/* collectors/memory_order.h — the pure parts of merging a window's memory log
 * with CUPTI's records (collectors/memory.c holds the locked state and calls
 * these on the exporter's side, in sp_mem_cycle_take): time order, matching a
 * CUPTI record to the interposed call it describes, running totals. */
#ifndef SP_MEMORY_ORDER_H
#define SP_MEMORY_ORDER_H

#include "memory.h"

#include <stddef.h>

#define SP_MEM_MATCH_SLACK_NS 5000ull   /* CUPTI's clock mapping error, generously */

/* qsort comparator: by time (op->t). */
int sp_mem_cmp_op_time(const void *a, const void *b);
/* Stable sort of ops logged in nearly time order (close to linear). */
void sp_mem_sort_nearly(sp_mem_op_t *v, size_t n);
/* ops[0, mid) and ops[mid, n) are each in time order; make the whole so. */
void sp_mem_merge_runs(sp_mem_op_t *ops, size_t mid, size_t n);
/* Index in ops (end order) of the unused interposed op that CUPTI's record
 * rec describes, or -1. */
long sp_mem_match(const sp_mem_op_t *ops, size_t n, const unsigned char *used, const sp_mem_op_t *rec);
/* Each op's slot total after it, from the window's opening levels. */
void sp_mem_fill_totals(sp_mem_cycle_t *c);

#endif
