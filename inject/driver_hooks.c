/* inject/driver_hooks.c — the CUDA driver API allocation interposers, for
 * profile_memory only: cuMemAlloc_v2 / cuMemFree_v2, the stream-ordered
 * cuMemAllocAsync / cuMemFreeAsync (and their _ptsz twins), and the virtual
 * memory calls behind PyTorch's expandable segments: cuMemCreate /
 * cuMemRelease (physical memory, counted by handle) and cuMemMap /
 * cuMemUnmap (virtual ranges, tracked but not counted again). They reach
 * programs that call the driver through its exported symbols, and through
 * cuGetProcAddress / dlsym (inject/driver_proc.c hands these out).
 * The allocation and free calls have rows in collectors/api.h (cuda_driver
 * events); the virtual memory calls have none: the memory collector is their
 * only consumer, and the gate still routes them through the slow path so the
 * first one can activate stepprof. The device of a block is the thread's cudaSetDevice device
 * (driver context switches are not followed); cuMemCreate names its own. */
#include "driver_twins.h"
#include "hook.h"

#define P(x) ((uint64_t)(uintptr_t)(x))
#define OUT(pp) (r == CUDA_SUCCESS && (pp) ? (uint64_t)*(pp) : 0)

#define DRV_ALLOC_HOOK(sym, params, call, pp, bytes, s)                                          \
    SP_INTERPOSE_MEM(CUresult, sym, params, call,                                                \
                     sp_mem_alloc(&mc, OUT(pp), bytes, P(s), SP_MEM_DEVICE, sp_mem_device()),   \
                     SP_RECORD_API(sym, (e->a[0] = OUT(pp), e->a[1] = bytes, e->a[3] = P(s))))
#define DRV_FREE_HOOK(sym, params, call, ptr, s)                                                    \
    SP_INTERPOSE_MEM(CUresult, sym, params, call, mem_bytes = sp_mem_free(&mc, (uint64_t)(ptr), P(s)), \
                     SP_RECORD_API(sym, (e->a[0] = (uint64_t)(ptr), e->a[1] = mem_bytes, e->a[3] = P(s))))

DRV_ALLOC_HOOK(cuMemAlloc_v2, (CUdeviceptr * p, size_t n), (p, n), p, n, 0)
DRV_ALLOC_HOOK(cuMemAllocAsync, (CUdeviceptr * p, size_t n, CUstream s), (p, n, s), p, n, s)
DRV_ALLOC_HOOK(cuMemAllocAsync_ptsz, (CUdeviceptr * p, size_t n, CUstream s), (p, n, s), p, n, s)
DRV_FREE_HOOK(cuMemFree_v2, (CUdeviceptr p), (p), p, 0)
DRV_FREE_HOOK(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s), p, s)
DRV_FREE_HOOK(cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), (p, s), p, s)

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
