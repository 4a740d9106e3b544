/* collectors/cupti_devices.c — device properties for the trace's
 * deviceProperties, read through the real runtime's cudaGetDeviceProperties
 * (not our interposers), and for each device it did not answer for (no shared
 * runtime in the process: static cudart, driver-API programs; or the call
 * failed) through the real driver's cuDevice* queries. Those never call cuInit:
 * before the program's cuInit they fail (CUDA_ERROR_NOT_INITIALIZED) and a
 * later try asks again. The first try runs after an intercepted call returns
 * (sp_cupti_query_devices); later ones, while no device is known, at a
 * collect that syncs and at the exit before its last window closes
 * (sp_cupti_query_devices_again), at most SP_DEVQ_TRIES in all. CUPTI records these calls too: each try runs
 * between sp_cupti_own_calls(1) and (0), so the collector drops their records
 * (they are not the program's calls). */
#define _GNU_SOURCE
#include "cupti.h"
#include "cupti_int.h"

#include "log.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void *sp_real(const char *name); /* inject/lookup.c: also RTLD_LOCAL runtimes */

static sp_devprop_t devices[SP_MAX_DEVICES];
volatile int sp_cupti_devices_pending;
static pthread_mutex_t query_lock = PTHREAD_MUTEX_INITIALIZER;
static int tries, known;   /* under query_lock */
#define NO_ENTRY (-1)      /* a try's error: no loaded library defines an entry point */

static void publish(sp_devprop_t *o)
{
    __atomic_store_n(&o->valid, 1, __ATOMIC_RELEASE);
    known = 1;
}

/* The runtime's answer: 0, or the first error it gave (NO_ENTRY: no runtime). */
static int query_runtime(void)
{
    cudaError_t (*count_fn)(int *) = (cudaError_t(*)(int *))sp_real("cudaGetDeviceCount");
    cudaError_t (*prop_fn)(struct cudaDeviceProp *, int) =
        (cudaError_t(*)(struct cudaDeviceProp *, int))sp_real("cudaGetDeviceProperties");
    int n = 0, err = 0;
    cudaError_t r;
    if (!count_fn || !prop_fn)
        return NO_ENTRY;
    if ((r = count_fn(&n)) != cudaSuccess)
        return (int)r;
    for (int d = 0; d < n && d < SP_MAX_DEVICES; d++) {
        struct cudaDeviceProp p;
        sp_devprop_t *o = &devices[d];
        if (o->valid)
            continue;
        if ((r = prop_fn(&p, d)) != cudaSuccess) {
            err = err ? err : (int)r;
            continue;
        }
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
        publish(o);
    }
    return err;
}

/* The fields cudaGetDeviceProperties fills above, as driver attributes. */
#define ATTR(a, field) {CU_DEVICE_ATTRIBUTE_##a, offsetof(sp_devprop_t, field), sizeof(((sp_devprop_t *)0)->field)}
static const struct {
    CUdevice_attribute attr;
    size_t off, size;
} attrs[] = {
    ATTR(COMPUTE_CAPABILITY_MAJOR, major),
    ATTR(COMPUTE_CAPABILITY_MINOR, minor),
    ATTR(MAX_THREADS_PER_BLOCK, max_threads_per_block),
    ATTR(MAX_THREADS_PER_MULTIPROCESSOR, max_threads_per_sm),
    ATTR(MAX_REGISTERS_PER_BLOCK, regs_per_block),
    ATTR(MAX_REGISTERS_PER_MULTIPROCESSOR, regs_per_sm),
    ATTR(WARP_SIZE, warp_size),
    ATTR(MAX_SHARED_MEMORY_PER_BLOCK, shared_mem_per_block),
    ATTR(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, shared_mem_per_sm),
    ATTR(MULTIPROCESSOR_COUNT, num_sms),
    ATTR(MAX_BLOCKS_PER_MULTIPROCESSOR, max_blocks_per_sm),
};
#undef ATTR

typedef struct {
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*name)(char *, int, CUdevice);
    CUresult (*total_mem)(size_t *, CUdevice);
    CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
} drv_api_t;

static CUresult driver_device(const drv_api_t *cu, int d, sp_devprop_t *o)
{
    CUdevice dev;
    size_t mem = 0;
    CUresult r;
    if ((r = cu->get(&dev, d)) != CUDA_SUCCESS || (r = cu->name(o->name, (int)sizeof o->name, dev)) != CUDA_SUCCESS ||
        (r = cu->total_mem(&mem, dev)) != CUDA_SUCCESS)
        return r;
    o->total_global_mem = mem;
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int v = 0;
        if ((r = cu->attr(&v, attrs[i].attr, dev)) != CUDA_SUCCESS)
            return r;
        if (attrs[i].size == sizeof v) {
            memcpy((char *)o + attrs[i].off, &v, sizeof v);
        } else {
            uint64_t w = (uint64_t)(unsigned)v;
            memcpy((char *)o + attrs[i].off, &w, sizeof w);
        }
    }
    publish(o);
    return CUDA_SUCCESS;
}

/* The driver's answer for the devices still unknown: 0, or the first error. */
static int query_driver(void)
{
    drv_api_t cu;
    *(void **)&cu.count = sp_real("cuDeviceGetCount");
    *(void **)&cu.get = sp_real("cuDeviceGet");
    *(void **)&cu.name = sp_real("cuDeviceGetName");
    *(void **)&cu.total_mem = sp_real("cuDeviceTotalMem_v2");
    *(void **)&cu.attr = sp_real("cuDeviceGetAttribute");
    int n = 0, err = 0;
    CUresult r;
    if (!cu.count || !cu.get || !cu.name || !cu.total_mem || !cu.attr)
        return NO_ENTRY;
    if ((r = cu.count(&n)) != CUDA_SUCCESS)   /* CUDA_ERROR_NOT_INITIALIZED before the program's cuInit */
        return (int)r;
    for (int d = 0; d < n && d < SP_MAX_DEVICES; d++)
        if (!devices[d].valid && (r = driver_device(&cu, d, &devices[d])) != CUDA_SUCCESS)
            err = err ? err : (int)r;
    return err;
}

static void query_devices(void)
{
    pthread_mutex_lock(&query_lock);
    if (!known && tries < SP_DEVQ_TRIES) {
        tries++;
        int held = sp_cupti_guard_take();
        sp_cupti_own_calls(1);
        int rt = query_runtime(), drv = rt ? query_driver() : 0;
        sp_cupti_own_calls(0);
        sp_cupti_guard_give(held);
        if (rt || drv)
            sp_log(SP_LOG_DEBUG, "device properties, try %d of %d: runtime error %d, driver error %d%s", tries,
                   SP_DEVQ_TRIES, rt, drv, known ? "" : "; none known yet");
    }
    pthread_mutex_unlock(&query_lock);
}

void sp_cupti_query_devices(void)
{
    if (__atomic_exchange_n(&sp_cupti_devices_pending, 0, __ATOMIC_ACQ_REL))
        query_devices();
}

void sp_cupti_query_devices_again(void)
{
    if (__atomic_load_n(&sp_cupti_shared.state, __ATOMIC_ACQUIRE) != 1)
        return;   /* no CUPTI (or a fork child's copy): no GPU record to describe a device for */
    __atomic_store_n(&sp_cupti_devices_pending, 0, __ATOMIC_RELEASE);
    query_devices();
}

const sp_devprop_t *sp_cupti_device(uint32_t dev)
{
    return dev < SP_MAX_DEVICES && __atomic_load_n(&devices[dev].valid, __ATOMIC_ACQUIRE) ? &devices[dev] : NULL;
}
