/*
 * mem_driver.c — driver API allocations for the profile_memory tests, linked against
 * libmemdrv_stub.so (mem_drvstub.c) instead of libcuda. In order: cuMemAlloc_v2 1 MiB,
 * cuMemAllocAsync 2 MiB on stream 0x77, cuMemCreate 4 MiB on device 0 mapped into a reserved range
 * (cuMemAddressReserve + cuMemMap), a cuMemAlloc_v2 of 100 MiB that fails with
 * CUDA_ERROR_OUT_OF_MEMORY (the stub's limit is 16 MiB), then cuMemUnmap + cuMemRelease,
 * cuMemFreeAsync, cuMemFree_v2, and cuMemFree_v2 of the same pointer again.
 *
 * Usage: mem_driver. Stdout: the result of each call as `NAME RESULT`, then `done`. Exit 0.
 */
#include <stdint.h>
#include <stdio.h>

#include <cuda.h>

#define SHOW(call) printf("%s %d\n", #call, (int)(call))

int main(void)
{
    enum { MIB = 1 << 20 };
    CUdeviceptr d1 = 0, d2 = 0, d3 = 0, va = 0;
    CUstream s = (CUstream)(uintptr_t)0x77;
    CUmemGenericAllocationHandle h = 0;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    SHOW(cuMemAlloc_v2(&d1, 1 * MIB));
    SHOW(cuMemAllocAsync(&d2, 2 * MIB, s));
    SHOW(cuMemCreate(&h, 4 * MIB, &prop, 0));
    SHOW(cuMemAddressReserve(&va, 4 * MIB, 0, 0, 0));
    SHOW(cuMemMap(va, 4 * MIB, 0, h, 0));
    SHOW(cuMemAlloc_v2(&d3, 100 * MIB));
    SHOW(cuMemUnmap(va, 4 * MIB));
    SHOW(cuMemRelease(h));
    SHOW(cuMemAddressFree(va, 4 * MIB));
    SHOW(cuMemFreeAsync(d2, s));
    SHOW(cuMemFree_v2(d1));
    SHOW(cuMemFree_v2(d1));
    printf("done\n");
    return 0;
}
