/* exporters/agg_int.h — what the aggregation's files share and nothing else
 * calls (see agg.h for the report set itself). */
#ifndef SP_AGG_INT_H
#define SP_AGG_INT_H

#include "agg.h"

/* A thread's open host events, innermost last (indices into the set), each
 * with its only child so far (-1: none yet, -2: several). */
typedef struct sp_rep_stack {
    int32_t *at, *kid;
    size_t n, cap;
} sp_rep_stack_t;

/* Distinct 12-byte keys by value (agg_lanes.c): the set's lanes ((pid,
 * tid, device) triples, sp_rep_lane_t), its details (sp_rep_detail_t), and
 * the nesting pass's threads ((pid, tid, 0)), each with an item of a
 * parallel array (the threads' stacks). A zeroed one is empty. */
#define SP_REP_KEY_BYTES 12
typedef struct sp_rep_lane_index {
    void *key;                    /* distinct keys, first-seen order */
    uint32_t *slot;               /* open addressing: key number + 1, 0 = empty */
    size_t n, cap;                /* cap: slots, a power of two >= 2 * n */
    size_t max;                   /* past this many keys, none is added (0: 2^31) */
    uint32_t last;                /* the key found last (n > 0): runs of one thread */
} sp_rep_lane_index_t;

/* The number of key k (SP_REP_KEY_BYTES), added when new (with a zeroed
 * item of size `item` in *parallel when parallel is not NULL); -1 when out
 * of memory or full. */
long sp_rep_lane_find(sp_rep_lane_index_t *x, const void *k, void **parallel, size_t item);
void sp_rep_lane_index_free(sp_rep_lane_index_t *x);

/* Host threads, each with its stack. */
typedef struct sp_rep_lanes {
    sp_rep_lane_index_t index;
    sp_rep_stack_t *stack;        /* per thread */
} sp_rep_lanes_t;

/* The stack of lane (pid, tid), a new one when first seen; NULL when out of
 * memory. */
sp_rep_stack_t *sp_rep_lane_stack(sp_rep_lanes_t *l, long pid, long tid);
/* 0, or -1 when out of memory. */
int sp_rep_stack_push(sp_rep_stack_t *st, int32_t i);
void sp_rep_lanes_free(sp_rep_lanes_t *l);

/* The set's lanes and details: lane 0 and detail 0 made by
 * sp_rep_lanes_init (sp_rep_init, after the strings), all freed by
 * sp_rep_lanes_free_set (sp_rep_free). */
void sp_rep_lanes_init(sp_rep_set_t *s);
void sp_rep_lanes_free_set(sp_rep_set_t *s);

/* The set's strings (agg_strings.c), made by sp_rep_init and freed by
 * sp_rep_free. */
void sp_rep_strings_init(sp_rep_set_t *s);
void sp_rep_strings_free(sp_rep_set_t *s);

#endif
