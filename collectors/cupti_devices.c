/* collectors/cupti_devices.c — device properties for the trace's
 * deviceProperties, read once through the runtime's own entry points (not our
 * interposers) after the first intercepted call returns. CUPTI records these
 * calls too: they run between sp_cupti_own_calls(1) and (0), so the collector
 * drops their records (they are not the program's calls). */
#define _GNU_SOURCE
#include "cupti.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

void *sp_real(const char *name); /* inject/lookup.c: also RTLD_LOCAL runtimes */

static sp_devprop_t devices[SP_MAX_DEVICES];
volatile int sp_cupti_devices_pending;

static void query_each(cudaError_t (*prop_fn)(struct cudaDeviceProp *, int), int n)
{
    for (int d = 0; d < n && d < SP_MAX_DEVICES; d++) {
        struct cudaDeviceProp p;
        sp_devprop_t *o = &devices[d];
        if (o->valid || prop_fn(&p, d) != cudaSuccess)
            continue;
        snprintf(o->name, sizeof o->name, "%s", p.name);
        o->total_global_mem = p.totalGlobalMem;
        o->major = p.major;
        o->minor = p.minor;
        o->max_threads_per_block = p.maxThreadsPerBlock;
        o->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
        o->regs_per_block = p.regsPerBlock;
        o->regs_per_sm = p.regsPerMultiprocessor;
        o->warp_size = p.warpSize;
        o->shared_mem_per_block = p.sharedMemPerBlock;
        o->shared_mem_per_sm = p.sharedMemPerMultiprocessor;
        o->num_sms = p.multiProcessorCount;
        o->max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
        o->valid = 1;
    }
}

static void query_devices(void)
{
    cudaError_t (*count_fn)(int *) = (cudaError_t(*)(int *))sp_real("cudaGetDeviceCount");
    cudaError_t (*prop_fn)(struct cudaDeviceProp *, int) =
        (cudaError_t(*)(struct cudaDeviceProp *, int))sp_real("cudaGetDeviceProperties");
    int n = 0;
    sp_cupti_own_calls(1);
    if (count_fn && prop_fn && count_fn(&n) == cudaSuccess)
        query_each(prop_fn, n);
    sp_cupti_own_calls(0);
}

void sp_cupti_query_devices(void)
{
    if (__atomic_exchange_n(&sp_cupti_devices_pending, 0, __ATOMIC_ACQ_REL))
        query_devices();
}

const sp_devprop_t *sp_cupti_device(uint32_t dev)
{
    return dev < SP_MAX_DEVICES && devices[dev].valid ? &devices[dev] : NULL;
}
