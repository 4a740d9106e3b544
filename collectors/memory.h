/* collectors/memory.h — GPU memory tracking (profile_memory): the live
 * allocation map (address -> size, device, stream, time, step, stack or call
 * site), per-device current and peak bytes, and for each record window a log
 * of allocation events that is frozen when the window closes, together with
 * the blocks still live at that moment and snapshots taken at out-of-memory
 * failures. Fed by the allocation interposers (inject/) after the real call,
 * whether or not a window records, and by CUPTI MEMORY2 records for the
 * allocations no interposer saw. Exporters read a frozen window through
 * sp_mem_cycle_take. Nothing here runs on the launch path: only allocation
 * interposers test sp_mem_on. */
#ifndef SP_MEMORY_H
#define SP_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Devices tracked one by one; the host's pinned memory is one more slot. */
#define SP_MEM_DEVICES 16
#define SP_MEM_HOST SP_MEM_DEVICES
#define SP_MEM_SLOTS (SP_MEM_DEVICES + 1)

/* Both the runtime's cudaErrorMemoryAllocation and the driver's
 * CUDA_ERROR_OUT_OF_MEMORY are 2: one test serves both interposer families. */
#define SP_MEM_OOM_RESULT 2

enum sp_mem_kind {
    SP_MEM_DEVICE = 0,   /* cudaMalloc, cudaMallocAsync, cudaMallocPitch, cuMemAlloc */
    SP_MEM_MANAGED,      /* cudaMallocManaged */
    SP_MEM_PINNED,       /* cudaMallocHost, cudaHostAlloc: counted in the host slot */
    SP_MEM_PHYSICAL,     /* cuMemCreate: physical memory behind a handle */
    SP_MEM_MAPPING,      /* cuMemMap: a virtual range; no bytes of its own */
};

enum sp_mem_op_type {
    SP_MOP_ALLOC = 1,
    SP_MOP_FREE,
    SP_MOP_OOM,          /* a failed allocation: bytes = the request */
    SP_MOP_BAD_FREE,     /* free of an address never seen allocated */
    SP_MOP_DOUBLE_FREE,  /* free of an address freed before */
    SP_MOP_STEP,         /* step boundary inside the window: step = the new step */
    SP_MOP_MAP,
    SP_MOP_UNMAP,
};

/* 1 while profile_memory is on: the allocation interposers' second gate. */
extern int sp_mem_on;

/* What an interposer knows about one allocation call, after the real call. */
typedef struct sp_mem_call {
    const char *api;     /* exported name of the interposed function */
    uint64_t t0, t1;     /* CLOCK_MONOTONIC ns around the real call */
    uintptr_t site;      /* return address into the caller */
    int tid;
    int result;          /* 0 = success */
} sp_mem_call_t;

/* CLOCK_MONOTONIC ns for memory times. Outside record windows a time only
 * dates a live block for the reports, and the coarse clock (a few ns instead
 * of ~25, one tick of resolution, never ahead of the fine one) is enough. */
static inline uint64_t sp_mem_clock(int precise)
{
    struct timespec ts;
    clock_gettime(precise ? CLOCK_MONOTONIC : CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's current device, as cudaSetDevice left it (0 until then). */
void sp_mem_set_device(int device);
int sp_mem_device(void);

void sp_mem_alloc(const sp_mem_call_t *c, uint64_t ptr, uint64_t bytes, uint64_t stream, int kind, int device);
/* Returns the size of the freed block, 0 when unknown (or a failed call). */
uint64_t sp_mem_free(const sp_mem_call_t *c, uint64_t ptr, uint64_t stream);
/* cuMemCreate / cuMemRelease: the handle stands for the block. */
void sp_mem_handle_create(const sp_mem_call_t *c, uint64_t handle, uint64_t bytes, int device, int host);
void sp_mem_handle_release(const sp_mem_call_t *c, uint64_t handle);
void sp_mem_map(const sp_mem_call_t *c, uint64_t va, uint64_t bytes, uint64_t handle);
void sp_mem_unmap(const sp_mem_call_t *c, uint64_t va);

/* A CUPTI MEMORY2 record (cupti_records.c, under its lock); ts in CLOCK_MONOTONIC ns. */
void sp_mem_cupti_record(int is_alloc, int kind, uint64_t addr, uint64_t bytes, uint64_t ts_ns, int device,
                         uint64_t stream);

/* Schedule side, with the schedule's lock held. */
int sp_mem_init(int enabled);                       /* at activation; 0 ok */
void sp_mem_step(long step);                        /* a boundary: the new step number */
void sp_mem_window_open(uint32_t window, long step);
void sp_mem_window_close(uint32_t window, int at_exit);
void sp_mem_after_fork_child(void);

/* ---- read API: one frozen window ---- */

typedef struct sp_mem_op {
    uint64_t t;          /* CLOCK_MONOTONIC ns: when the call returned (CUPTI: its timestamp) */
    uint64_t t0;         /* when the call began (CUPTI: = t) */
    uint64_t addr;
    uint64_t bytes;      /* block size; OOM: the request */
    int64_t total;       /* the slot's allocated bytes after this op (filled by take) */
    uint64_t stream;
    const char *api;     /* NULL for CUPTI records */
    uintptr_t site;
    long step;
    uint32_t stack;
    int32_t slot;        /* device, or SP_MEM_HOST */
    int32_t tid;         /* 0 for CUPTI records */
    int32_t result;      /* the call's result (0 = success) */
    uint8_t type;        /* enum sp_mem_op_type */
    uint8_t kind;        /* enum sp_mem_kind */
    uint8_t from_cupti;
} sp_mem_op_t;

/* Does op change its slot's allocated bytes (an allocation or free of memory,
 * not of a virtual range)? */
static inline int sp_mem_op_moves(const sp_mem_op_t *op)
{
    return (op->type == SP_MOP_ALLOC || op->type == SP_MOP_FREE) && op->kind != SP_MEM_MAPPING && op->slot >= 0;
}

typedef struct sp_mem_block {
    uint64_t addr, bytes, stream, t;   /* t: allocation time, CLOCK_MONOTONIC ns */
    const char *api;
    uintptr_t site;
    long step;
    uint32_t stack;
    int32_t slot;
    int32_t tid;
    uint8_t kind;
    uint8_t in_window;   /* allocated inside this record window */
} sp_mem_block_t;

typedef struct sp_mem_oom {
    sp_mem_op_t op;              /* the failed call */
    int64_t live_bytes;          /* the slot's allocated bytes at that moment */
    size_t live_blocks;
    sp_mem_block_t *largest;     /* the live blocks of that slot, largest first */
    size_t nlargest;
} sp_mem_oom_t;

typedef struct sp_mem_cycle {
    uint32_t window;
    long first_step;
    uint64_t t_open, t_close;            /* CLOCK_MONOTONIC ns */
    int64_t start[SP_MEM_SLOTS];         /* allocated bytes per slot when the window opened */
    uint32_t used_slots;                 /* bit per slot with any bytes or op */
    sp_mem_op_t *ops;                    /* time order once taken */
    size_t nops, ops_cap;
    uint64_t dropped_ops;                /* beyond the window's op cap */
    uint64_t cupti_merged, cupti_duplicates;
    sp_mem_block_t *live;                /* every live block at close, largest first */
    size_t nlive;
    int at_exit;                         /* closed at process exit: live = alive at exit */
    sp_mem_oom_t *ooms;
    size_t nooms;
    uint64_t ooms_total;                 /* including those not snapshotted */
    int64_t process_peak[SP_MEM_SLOTS];  /* since activation, as seen when the window closed */
} sp_mem_cycle_t;

/* The frozen data of `window` (ops in time order with CUPTI's merged in,
 * totals filled, live blocks largest first), handed over to the caller;
 * NULL when memory profiling is off. Free with sp_mem_cycle_free. The
 * exporter calls it after its CUPTI flush of the window (sp_cupti_collect):
 * the merge happens here, off the program's thread. */
sp_mem_cycle_t *sp_mem_cycle_take(uint32_t window);

/* The blocks allocated right now, largest first (malloc'ed, *n of them, their
 * bytes summed in *sum); NULL when there are none or memory is short. */
sp_mem_block_t *sp_mem_live_now(size_t *n, int64_t *sum);
void sp_mem_cycle_free(sp_mem_cycle_t *c);

#endif
