/* collectors/ranges.h — NVTX ranges and marks as events: a per-thread stack
 * for push/pop ranges, a small id table for start/end ranges (which may end on
 * another thread), and instant records for marks. A range is stored when it
 * began inside a record window; it is written when it ends. */
#ifndef SP_RANGES_H
#define SP_RANGES_H

#include <stdint.h>

void sp_range_push(uint32_t name);
int sp_range_pop(void);                  /* returns the depth before the pop, -1 if empty (NVTX's contract) */
uint64_t sp_range_start(uint32_t name);  /* the nvtxRangeId_t to hand back */
void sp_range_end(uint64_t id);
void sp_range_mark(uint32_t name);
/* The schedule's whole-run window opened at activation: ranges still open
 * from before the first CUDA call are stored in it when they end. */
void sp_range_adopt_early(uint32_t window);

#endif
