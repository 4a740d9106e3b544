/* collectors/gpu.h — GPU-side events as the CUPTI collector hands them to the
 * exporters: one neutral record per kernel, copy, set, synchronization and
 * runtime/driver API call, with CLOCK_MONOTONIC nanosecond timestamps (the
 * same domain as host records after sp_clock_to_ns). API calls, about half
 * of a window's records, are kept apart in a smaller record. */
#ifndef SP_GPU_H
#define SP_GPU_H

#include <stddef.h>
#include <stdint.h>

enum sp_gpu_kind {
    SP_GPU_KERNEL = 1,
    SP_GPU_MEMCPY,
    SP_GPU_MEMSET,
    SP_GPU_SYNC,
    SP_GPU_RUNTIME,   /* API record from CUPTI's RUNTIME kind (sp_gpu_api_t) */
    SP_GPU_DRIVER,    /* API record from CUPTI's DRIVER kind (sp_gpu_api_t) */
};

/* GPU work: 88 bytes (a window of a million launches holds ~2M): the fields
 * of one kind of record share their room with the other kinds'. Read a field
 * only for the kinds its comment names; the rest of the record is zero as
 * parsed. */
typedef struct sp_gpu_event {
    uint64_t start, end;       /* CLOCK_MONOTONIC ns */
    uint32_t kind;
    uint32_t correlation;
    uint32_t device, context, stream;   /* GPU work (0 in API records) */
    uint32_t graph_id;         /* kernels, copies, sets */
    union {
        struct {               /* SP_GPU_KERNEL */
            uint64_t queued;   /* when queued, 0 if unknown */
            uint32_t name;     /* interned mangled name (collectors/strings.h) */
            int32_t grid[3], block[3];
            int32_t static_smem, dynamic_smem;
            uint16_t registers;
        };
        struct {               /* SP_GPU_MEMCPY, SP_GPU_MEMSET */
            uint64_t bytes;
            uint32_t value;    /* memsets: the memory kind */
            uint8_t copy_kind, src_kind, dst_kind;  /* copies: CUPTI memcpy / memory kinds */
        };
        uint8_t sync_type;     /* SP_GPU_SYNC */
    };
} sp_gpu_event_t;

/* A runtime or driver API call: 40 bytes. */
typedef struct sp_gpu_api {
    uint64_t start, end;       /* CLOCK_MONOTONIC ns */
    uint32_t kind;             /* SP_GPU_RUNTIME, SP_GPU_DRIVER */
    uint32_t correlation;
    uint32_t cbid;
    uint32_t tid;              /* OS thread id */
    int32_t result;
} sp_gpu_api_t;

/* CUPTI's records of one or more windows, GPU work and API calls apart, each
 * in the order parsed. */
typedef struct sp_gpu_recs {
    sp_gpu_event_t *work;
    size_t nwork, capwork;
    sp_gpu_api_t *calls;
    size_t ncalls, capcalls;
} sp_gpu_recs_t;

#endif
