/* inject/driver_hooks.c — the CUDA driver API allocation interposers, for
 * profile_memory only: cuMemAlloc_v2 / cuMemFree_v2, the stream-ordered
 * cuMemAllocAsync / cuMemAllocFromPoolAsync / cuMemFreeAsync (and their
 * _ptsz twins), cuMemAllocPitch_v2, cuMemAllocManaged, the pinned host
 * memory of cuMemAllocHost_v2 / cuMemHostAlloc / cuMemFreeHost (kinds as
 * their runtime equivalents: device, managed, pinned), and the virtual
 * memory calls behind PyTorch's expandable segments: cuMemCreate /
 * cuMemRelease (physical memory, counted by handle) and cuMemMap /
 * cuMemUnmap (virtual ranges, tracked but not counted again). They reach
 * programs that call the driver through its exported symbols, and through
 * cuGetProcAddress / dlsym (inject/driver_proc.c hands these out).
 * The allocation and free calls have rows in collectors/api.h (cuda_driver
 * events); the virtual memory calls have none: the memory collector is their
 * only consumer, and the gate still routes them through the slow path so the
 * first one can activate stepprof. The device of a block is the current
 * context's (cuCtxGetDevice, after the call: a driver-only program on
 * several GPUs switches contexts, not cudaSetDevice devices), the thread's
 * cudaSetDevice device where that fails; cuMemCreate names its own. */
#include "driver_twins.h"

#define SP_ALLOC_DEVICE() drv_device() /* hook.h's SP_ALLOC_HOOK: the block's device */
#include "hook.h"

/* The old ABI, cuCtxGetDevice(CUdevice *): SP_REAL_FN resolves the exported symbol by its name
 * (sp_real: dlsym), which CUDA 13 keeps with that signature. Only cuGetProcAddress asked at version 13000
 * answers "cuCtxGetDevice" with cuCtxGetDevice_v2(CUdevice *, CUcontext), a different ABI: never ask it
 * that way here. */
SP_REAL_FN(CUresult, cuCtxGetDevice, (CUdevice * d), (d))

/* Allocation calls only, with profile_memory on: the driver answers from the thread's current context. */
static int drv_device(void)
{
    CUdevice d;
    return real_cuCtxGetDevice(&d) == CUDA_SUCCESS ? (int)d : sp_mem_device();
}

#define OUT(pp) (r == CUDA_SUCCESS && (pp) ? (uint64_t)*(pp) : 0)

#define DRV_ALLOC_HOOK(...) SP_ALLOC_HOOK(CUresult, __VA_ARGS__)
#define DRV_FREE_HOOK(...) SP_FREE_HOOK(CUresult, __VA_ARGS__)

DRV_ALLOC_HOOK(cuMemAlloc_v2, (CUdeviceptr * p, size_t n), (p, n), p, n, 0, 0, SP_MEM_DEVICE)
#define ALLOC_ASYNC_HOOKS(sym) \
    DRV_ALLOC_HOOK(sym, (CUdeviceptr * p, size_t n, CUstream s), (p, n, s), p, n, 0, s, SP_MEM_DEVICE)
ALLOC_ASYNC_HOOKS(cuMemAllocAsync)
ALLOC_ASYNC_HOOKS(cuMemAllocAsync_ptsz)
#define ALLOC_POOL_HOOKS(sym)                                                                        \
    DRV_ALLOC_HOOK(sym, (CUdeviceptr * p, size_t n, CUmemoryPool pool, CUstream s), (p, n, pool, s), p, n, 0, s, \
                   SP_MEM_DEVICE)
ALLOC_POOL_HOOKS(cuMemAllocFromPoolAsync)
ALLOC_POOL_HOOKS(cuMemAllocFromPoolAsync_ptsz)
#define PITCH (r == CUDA_SUCCESS && pitch ? *pitch : 0)
DRV_ALLOC_HOOK(cuMemAllocPitch_v2, (CUdeviceptr * p, size_t *pitch, size_t wd, size_t h, unsigned int elem),
               (p, pitch, wd, h, elem), p, (PITCH ? PITCH : wd) * h, PITCH, 0, SP_MEM_DEVICE)
DRV_ALLOC_HOOK(cuMemAllocManaged, (CUdeviceptr * p, size_t n, unsigned int fl), (p, n, fl), p, n, fl, 0,
               SP_MEM_MANAGED)
DRV_ALLOC_HOOK(cuMemAllocHost_v2, (void **p, size_t n), (p, n), p, n, 0, 0, SP_MEM_PINNED)
DRV_ALLOC_HOOK(cuMemHostAlloc, (void **p, size_t n, unsigned int fl), (p, n, fl), p, n, fl, 0, SP_MEM_PINNED)
DRV_FREE_HOOK(cuMemFree_v2, (CUdeviceptr p), (p), p, 0)
DRV_FREE_HOOK(cuMemFreeHost, (void *p), (p), p, 0)
#define FREE_ASYNC_HOOKS(sym) DRV_FREE_HOOK(sym, (CUdeviceptr p, CUstream s), (p, s), p, s)
FREE_ASYNC_HOOKS(cuMemFreeAsync)
FREE_ASYNC_HOOKS(cuMemFreeAsync_ptsz)

static int on_host(const CUmemAllocationProp *prop)
{
    return prop && prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE;
}

static int device_of(const CUmemAllocationProp *prop)
{
    return prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : sp_mem_device();
}

SP_INTERPOSE_MEM(CUresult, cuMemCreate,
                 (CUmemGenericAllocationHandle * h, size_t n, const CUmemAllocationProp *prop, unsigned long long fl),
                 (h, n, prop, fl), sp_mem_handle_create(&mc, OUT(h), n, device_of(prop), on_host(prop)), (void)0)
SP_INTERPOSE_MEM(CUresult, cuMemRelease, (CUmemGenericAllocationHandle h), (h), sp_mem_handle_release(&mc, h),
                 (void)0)
SP_INTERPOSE_MEM(CUresult, cuMemMap,
                 (CUdeviceptr va, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long fl),
                 (va, n, off, h, fl), sp_mem_map(&mc, va, n, h), (void)0)
SP_INTERPOSE_MEM(CUresult, cuMemUnmap, (CUdeviceptr va, size_t n), (va, n), sp_mem_unmap(&mc, va), (void)0)
