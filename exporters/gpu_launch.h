/* exporters/gpu_launch.h — the calls that launched a window's GPU work, found
 * by correlation id: the table gpu_trace.c draws flow arrows, External ids
 * and gpu_user_annotation spans from. Ids of one window are dense (CUPTI
 * numbers calls in order), so the table is a direct id -> call index; a
 * sparse set (a foreign or late window) goes to open addressing instead. No
 * sort, no search per GPU record. */
#ifndef SP_GPU_LAUNCH_H
#define SP_GPU_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_launch {
    uint64_t range;    /* the innermost range or step open around the call (its id), 0 = none */
    int64_t ts;        /* absolute ns */
    int64_t tid;
    uint32_t corr;
    uint8_t driver;    /* CUPTI's DRIVER record: a nested driver call shares its runtime caller's id */
    uint8_t flowed;    /* a flow arrow already leaves this call (graph launches run many kernels) */
    uint8_t host;      /* an intercepted call (not a call only CUPTI saw) */
} sp_launch_t;

typedef struct sp_launches {
    sp_launch_t *l;
    size_t n, cap;
    int32_t *slot;     /* call index + 1, 0 = none */
    size_t nslot;
    size_t bytes;      /* the one mapping that holds slot and l */
    uint32_t lo;       /* dense: slot = id - lo */
    int dense;
} sp_launches_t;

/* Room for `cap` calls with ids in [lo, hi]; 0 or -1 (no memory). */
int sp_launches_init(sp_launches_t *t, size_t cap, uint32_t lo, uint32_t hi);
/* Adds a call (id 0: never found, not kept). Of two calls with one id the
 * runtime call wins over a driver call, else the first added. */
void sp_launches_add(sp_launches_t *t, const sp_launch_t *c);
/* The call with that id, NULL if none (or id 0). */
sp_launch_t *sp_launches_find(const sp_launches_t *t, uint32_t corr);
void sp_launches_free(sp_launches_t *t);

#endif
