/* collectors/cupti_window.h — window membership of parsed CUPTI records on
 * one clock (collectors/cupti_window.c), and the one CUPTI entry point
 * collectors/cupti_names.c needs; internal to the CUPTI collector. */
#ifndef SP_CUPTI_WINDOW_H
#define SP_CUPTI_WINDOW_H

#include "gpu.h"

#include <stddef.h>
#include <stdint.h>

/* A query record left out as it was parsed (cupti_api_filter: queries):
 * what a take needs of it. */
typedef struct {
    uint64_t start;   /* CLOCK_MONOTONIC ns, on the offset in use */
    uint32_t tid;
} sp_query_rec_t;

/* Finds stepprof's own call (the latest RUNTIME record of cbid on tid), timed
 * on the host as [h0, h1], removes it, and shifts every record and *offset
 * as little as needed so that it lies inside that span. 0 when no such
 * record was parsed. */
int sp_cupti_marker_fix(sp_gpu_recs_t *r, uint32_t tid, uint32_t cbid, uint64_t h0, uint64_t h1, int64_t *offset);

/* Drops the runtime and driver records of thread tid (stepprof's collecting
 * thread: none of its calls are the program's). */
void sp_cupti_drop_thread(sp_gpu_recs_t *r, uint32_t tid);
/* The records of the window [begin, end] (CLOCK_MONOTONIC ns) as *out (count
 * of both kinds returned; the caller frees its arrays, whose room is their
 * counts): the arrays of *r themselves, compacted, and *r becomes new arrays
 * of later windows' records (NULL when none; room = count). On failure 0,
 * *out empty and nothing changed. */
size_t sp_cupti_take_window(sp_gpu_recs_t *r, uint64_t begin, uint64_t end, sp_gpu_recs_t *out);

/* The window [begin, end]'s query records left out, counted; those of thread
 * tid (stepprof's collecting thread; 0: none) are not the program's; later
 * windows' stay in q. A record's start moves with the offset: shift is what
 * sp_cupti_marker_fix just moved it by. */
uint64_t sp_cupti_take_queries(sp_query_rec_t *q, size_t *nq, int64_t shift, uint64_t begin, uint64_t end,
                               uint32_t tid);

/* CUPTI's own name of a callback id, with its version suffix; NULL if none
 * (collectors/cupti.c, which holds the looked-up entry points). */
const char *sp_cupti_callback_name(int driver, uint32_t cbid);
/* Every callback id's name looked up and kept (collectors/cupti_names.c): called
 * before the hand-over, after which sp_cupti_callback_name answers NULL. */
void sp_cupti_names_prefetch(void);

#endif
