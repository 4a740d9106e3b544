/* collectors/cupti_int.h — what the parts of the CUPTI collector share: the
 * control side (collectors/cupti.c: subscribe, kinds on/off, windows,
 * collects, the hand-over), the record side (collectors/cupti_records.c:
 * parsing, the records kept, CUPTI's clock offset) and the activity buffers
 * (collectors/cupti_buffers.c). Internal to the collector. */
#ifndef SP_CUPTI_INT_H
#define SP_CUPTI_INT_H

#include "cupti_window.h"
#include "gpu.h"

#include <cupti.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SP_CUPTI_HANDED_OVER (-2)

/* Defined in collectors/cupti_records.c. */
typedef struct {
    pthread_mutex_t lock;   /* the fields below but state; never held while calling into CUPTI */
    int state;              /* 0 not tried, 1 active, -1 degraded, 2 a fork child of an active process,
                               SP_CUPTI_HANDED_OVER: the program's torch.profiler has CUPTI (sp_cupti_release) */
    int64_t clock_offset;   /* CLOCK_MONOTONIC - CUPTI clock */
    uint64_t window_begin;  /* CLOCK_MONOTONIC ns when the last window opened */
    uint64_t window_end;    /* when it closed (atomic: the program's thread stores it without the
                               lock); UINT64_MAX while open */
    uint32_t window_corr;   /* the highest correlation id of an API call in it: GPU work with an id up
                               to it was launched in the window, even if it ran after the close */
    sp_gpu_recs_t recs;     /* parsed records not yet taken */
    uint64_t recs_dropped;  /* parsed records past the bound on those kept, cumulative */
    /* cupti_api_filter: queries. Query records (sp_cupti_api_is_query) are left
     * out as they are parsed: only their start and thread are kept, apart from
     * the records, so that they never take a record's place under the cycle
     * cap (a PyTorch step makes more queries than launches); a take counts
     * the window's. Bounded by cupti_buffer_mb's bytes; past that, counted in
     * queries_unkept and given to the next take. */
    int filter_queries;
    sp_query_rec_t *queries;
    size_t nqueries;
    uint64_t queries_unkept;
    uint64_t drops_pending; /* of those, since the last take or window open */
} sp_cupti_shared_t;

extern sp_cupti_shared_t sp_cupti_shared;

/* stepprof's own CUDA calls on a program's thread: the recursion guard is
 * taken so the calls they make through our interposers are not recorded as
 * the program's; give back what take returned. Defined in collectors/cupti.c. */
int sp_cupti_guard_take(void);
void sp_cupti_guard_give(int held);

/* CUPTI's records of the open window are being lost (a buffer refused at
 * cupti_buffer_mb, or a record dropped past the records' cap): a launch whose
 * record is lost would last 0, so launches read the clock twice again until
 * the next window opens (launch_durations: auto). Any thread, no lock. cupti.c. */
void sp_cupti_launch_records_lost(void);

/* cupti_buffer_mb: the activity buffers' cap, and the parsed records' byte bound. */
void sp_cupti_set_buffer_cap(long buffer_mb);
/* CUPTI's buffer callbacks (cuptiActivityRegisterCallbacks). */
void CUPTIAPI sp_cupti_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records);
void CUPTIAPI sp_cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid);
/* clock_offset from back-to-back reads of both clocks. */
void sp_cupti_calibrate(void);
/* Fills the buffers' free list ahead of the recorded steps, cold buffers
 * counted (and warmed, but those of collect `own`: 0 on a program's thread). */
void sp_cupti_preallocate(uint64_t own);
/* collectors/cupti_buffers.c, for the parse of a completed buffer, sh.lock
 * held: the buffers' cap; whether this thread gives parsed pages back (a
 * collect's forced flush); the whole pages of [from, to) given back (returns
 * where the next release starts); the buffer back to the pool, `released`
 * bytes from its start given back, or to be freed by the caller (returned,
 * after sh.lock is let go). */
void sp_cupti_buf_cap(size_t bytes);
int sp_cupti_buf_releasing(void);
uint8_t *sp_cupti_buf_release(uint8_t *from, uint8_t *to);
void *sp_cupti_buf_return(void *buf, size_t released);
/* On this thread, buffers completed from now until off have their parsed pages
 * given back (the collect's forced flush only). */
uint64_t sp_cupti_release_pages(int on);   /* on: this collect's number (cold buffers' gen) */

#endif
