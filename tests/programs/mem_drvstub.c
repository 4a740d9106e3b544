/*
 * mem_drvstub.c — libmemdrv_stub.so, a stand-in for the few CUDA driver allocation calls that
 * mem_driver.c makes, so the driver API interposers can be tested without libcuda. It defines them
 * under their real names and signatures (checked against the toolkit's cuda.h); a preloaded
 * interposer reaches them through RTLD_NEXT exactly as it would reach libcuda.so.1. No memory is
 * handed out: addresses are made up and never touched. Device allocations and physical handles count
 * against MEMDRV_LIMIT bytes (default 16 MiB); a request past it returns CUDA_ERROR_OUT_OF_MEMORY.
 * Frees and releases of unknown addresses or handles return CUDA_ERROR_INVALID_VALUE.
 */
#include <stdlib.h>

#include <cuda.h>

enum { SLOTS = 64 };

static struct {
    unsigned long long key;   /* address or handle; 0 = free slot */
    size_t bytes;
} live[SLOTS];
static size_t used;
static unsigned long long next_addr = 0x200000000ull, next_handle = 0x1000;

static size_t limit(void)
{
    const char *v = getenv("MEMDRV_LIMIT");
    return v ? (size_t)strtoull(v, NULL, 10) : (size_t)16 << 20;
}

static CUresult take(unsigned long long key, size_t n)
{
    if (n > limit() - used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < SLOTS; i++)
        if (!live[i].key) {
            live[i].key = key;
            live[i].bytes = n;
            used += n;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult give_back(unsigned long long key)
{
    for (int i = 0; i < SLOTS; i++)
        if (key && live[i].key == key) {
            used -= live[i].bytes;
            live[i].key = 0;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult alloc(CUdeviceptr *p, size_t n)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = take(next_addr, n);
    *p = r == CUDA_SUCCESS ? (CUdeviceptr)next_addr : 0;
    if (r == CUDA_SUCCESS)
        next_addr += (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return alloc(p, n); }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { (void)s; return alloc(p, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { return give_back(p); }
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return give_back(p); }

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    (void)flags;
    if (!h || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = take(next_handle, n);
    *h = r == CUDA_SUCCESS ? next_handle++ : 0;
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return give_back(h); }

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags)
{
    (void)align, (void)addr, (void)flags;
    *p = (CUdeviceptr)next_addr;
    next_addr += n;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t n) { (void)p, (void)n; return CUDA_SUCCESS; }

CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags)
{
    (void)n, (void)off, (void)flags;
    return p && h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(CUdeviceptr p, size_t n) { (void)n; return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
