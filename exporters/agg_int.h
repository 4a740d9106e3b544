/* exporters/agg_int.h — what the aggregation's files share and nothing else
 * calls (see agg.h for the report set itself). */
#ifndef SP_AGG_INT_H
#define SP_AGG_INT_H

#include "agg.h"

/* A thread's open host events, innermost last (indices into the set). */
typedef struct sp_rep_stack {
    int32_t *at;
    size_t n, cap;
} sp_rep_stack_t;

/* Host lanes ((pid, tid)) by value, each with its stack (agg_lanes.c). A
 * zeroed one is empty. */
typedef struct sp_rep_lanes {
    struct sp_rep_lane_key *key;  /* distinct lanes, first-seen order */
    sp_rep_stack_t *stack;        /* per lane */
    uint32_t *slot;               /* open addressing: lane number + 1, 0 = empty */
    size_t n, cap;                /* cap: slots, a power of two >= 2 * n */
    long last;                    /* the lane found last (-1 none): runs of one thread */
} sp_rep_lanes_t;

/* The stack of lane (pid, tid), a new one when first seen; NULL when out of
 * memory. */
sp_rep_stack_t *sp_rep_lane_stack(sp_rep_lanes_t *l, long pid, long tid);
/* 0, or -1 when out of memory. */
int sp_rep_stack_push(sp_rep_stack_t *st, int32_t i);
void sp_rep_lanes_free(sp_rep_lanes_t *l);

/* The set's strings (agg_strings.c), made by sp_rep_init and freed by
 * sp_rep_free. */
void sp_rep_strings_init(sp_rep_set_t *s);
void sp_rep_strings_free(sp_rep_set_t *s);

#endif
