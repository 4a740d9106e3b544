/*
 * mem_oom.c — runs out of device memory and recovers, for the profile_memory tests. Run it on the
 * stand-in with FAKECUDA_MEM_LIMIT=8388608 (8 MiB).
 *
 * It allocates 3 MiB, 2 MiB, 1 MiB and 1 MiB (7 MiB live), then asks for 4 MiB, which fails with
 * cudaErrorMemoryAllocation. Its own error handling then runs, as a training script's would: it
 * prints what failed, frees the 3 MiB block (its "cache") and retries with 512 KiB, which fits.
 * Everything is freed at the end.
 *
 * Usage: mem_oom. Stdout: `out of memory: cudaMalloc of 4194304 bytes returned 2`, then
 * `recovered with 524288 bytes` (or `not recovered`), then `done`. Exit 0; 1 when the 4 MiB request
 * did not fail (the limit was not set).
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#define PROG "mem_oom"
#include "cuda_check.h"

enum { MIB = 1 << 20 };

int main(void)
{
    static const size_t sizes[] = {3 * MIB, 2 * MIB, 1 * MIB, 1 * MIB};
    void *blocks[4] = {NULL};
    for (int i = 0; i < 4; i++)
        CHECK(cudaMalloc(&blocks[i], sizes[i]));
    void *big = NULL;
    cudaError_t err = cudaMalloc(&big, 4 * MIB);
    if (err == cudaSuccess) {
        fprintf(stderr, "mem_oom: the 4 MiB request fit: is FAKECUDA_MEM_LIMIT set?\n");
        return 1;
    }
    printf("out of memory: cudaMalloc of %d bytes returned %d\n", 4 * MIB, (int)err);
    CHECK(cudaFree(blocks[0]));
    blocks[0] = NULL;
    void *small = NULL;
    if (cudaMalloc(&small, MIB / 2) == cudaSuccess)
        printf("recovered with %d bytes\n", MIB / 2);
    else
        printf("not recovered\n");
    CHECK(cudaFree(small));
    for (int i = 1; i < 4; i++)
        CHECK(cudaFree(blocks[i]));
    check_summary();
    printf("done\n");
    return 0;
}
