/* collectors/ranges.h — NVTX ranges and marks as events: a per-thread stack
 * for push/pop ranges, a small id table for start/end ranges (which may end on
 * another thread), and instant records for marks. A range is stored when it
 * began inside a record window; it is written when it ends. */
#ifndef SP_RANGES_H
#define SP_RANGES_H

#include "events.h"

#include <stdint.h>

/* An NVTX range's name is either an interned id (text NULL) or text, named
 * as the window at the push needs: a copy interned at collection while it
 * records (strings.h sp_str_defer), interned at once before activation
 * (such a range may be adopted), not at all otherwise. */
int sp_range_push(const char *text, uint32_t id);  /* the range's 0-based level (NVTX's contract) */
/* A push under gate w, which neither records nor is SP_GATE_UNINIT: nothing
 * of it is kept but its place on the stack, so neither its text nor whether
 * it is a PyTorch operator matters. */
int sp_range_push_idle(uint32_t w);
/* sp_range_push(text, 0) under record window w, reading the text once: or
 * SP_RANGE_NOT_PLAIN, nothing pushed, when the text holds a ',' (it may be a
 * PyTorch operator: collectors/ops.c) or anything is not the common case
 * (a new log block, no stack yet, past its depth, ticks not the TSC); the
 * caller then takes the general path. */
#define SP_RANGE_NOT_PLAIN (-2)
int sp_range_push_plain(const char *text, uint32_t w);
/* Does a range opened under gate w need its name (recorded, or maybe
 * adopted by a whole-run recording at activation)? */
_Static_assert(SP_WIN_COUNT == 0x40000000u && SP_WIN_WARMUP == 0x80000000u, "record windows are 1..COUNT-1");
static inline int sp_range_gate_keeps(uint32_t w)
{
    return w - 1u < SP_WIN_COUNT - 1u || w == SP_GATE_UNINIT; /* sp_win_records(w) || UNINIT */
}

/* A PyTorch operator pushed as an NVTX range (collectors/ops.c): stored in
 * the range record as flags, a[1] = seq, a[2] = shapes, stack. */
#define SP_RANGE_OP 2u        /* flags: a cpu_op, not a user range */
#define SP_RANGE_BWD 4u       /* flags: runs a backward node (Kineto's Fwd thread id > 0) */
#define SP_RANGE_EVAL 8u      /* flags: autograd::engine::evaluate_function: wrapper */
#define SP_RANGE_TORCH 16u    /* flags: pushed by torch's profiler (an operator or a record_function
                                 scope), not an NVTX range of the program or a library: its calls'
                                 External id is the innermost such range's (exporters/gpu_trace.h) */
typedef struct sp_range_op {
    uint16_t flags;
    uint64_t seq;             /* sequence number + 1, 0 = none */
    uint32_t shapes;          /* interned Input Dims text, 0 = none */
    uint32_t stack;           /* with_stack: Python frames (collectors/stacks.h), 0 = none */
} sp_range_op_t;
void sp_range_push_op(uint32_t name, const sp_range_op_t *op);
/* The operator fields of this thread's innermost open push range (and its
 * name in *name), NULL when none. */
sp_range_op_t *sp_range_top_op(uint32_t *name);
int sp_range_pop(void);                  /* returns the depth before the pop, -1 if empty (NVTX's contract) */
uint64_t sp_range_start(const char *text, uint32_t id);  /* the nvtxRangeId_t to hand back */
void sp_range_end(uint64_t id);
void sp_range_mark(const char *text, uint32_t id);
/* The schedule's whole-run window opened at activation: ranges still open
 * from before the first CUDA call are stored in it when they end. */
void sp_range_adopt_early(uint32_t window);

#endif
