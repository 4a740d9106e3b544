/* collectors/gpu.h — GPU-side events as the CUPTI collector hands them to the
 * exporters: one neutral record per kernel, copy, set, synchronization and
 * runtime/driver API call, with CLOCK_MONOTONIC nanosecond timestamps (the
 * same domain as host records after sp_clock_to_ns). */
#ifndef SP_GPU_H
#define SP_GPU_H

#include <stdint.h>

enum sp_gpu_kind {
    SP_GPU_KERNEL = 1,
    SP_GPU_MEMCPY,
    SP_GPU_MEMSET,
    SP_GPU_SYNC,
    SP_GPU_RUNTIME,   /* API record from CUPTI's RUNTIME kind */
    SP_GPU_DRIVER,    /* API record from CUPTI's DRIVER kind */
};

typedef struct sp_gpu_event {
    uint64_t start, end;       /* CLOCK_MONOTONIC ns */
    uint64_t queued;           /* kernels: when queued, 0 if unknown */
    uint64_t bytes;            /* copies and sets */
    uint32_t kind;
    uint32_t correlation;
    uint32_t device, context, stream;
    uint32_t name;             /* kernels: interned mangled name (collectors/strings.h) */
    uint32_t cbid;             /* API records */
    uint32_t tid;              /* API records: OS thread id */
    int32_t result;            /* API records */
    uint32_t graph_id;
    int32_t grid[3], block[3];
    int32_t static_smem, dynamic_smem;
    uint16_t registers;
    uint8_t copy_kind, src_kind, dst_kind;  /* CUPTI memcpy / memory kinds */
    uint8_t sync_type;
    uint32_t value;            /* memset value, memory kind for sets */
} sp_gpu_event_t;

#endif
