/*
 * cupti_queries.c — a loop that asks the runtime what PyTorch asks it on every operator: per step,
 * inside an NVTX range "step", cudaGetDevice twice, cudaSetDevice to the same device, cudaGetLastError
 * twice (calls stepprof does not record: only CUPTI sees them, and torch.profiler leaves them out),
 * then cudaPeekAtLastError and cudaDeviceGetAttribute (CUPTI-only too, but Kineto keeps them), one
 * cudaLaunchKernel and one cudaDeviceSynchronize (intercepted, paired with CUPTI's records).
 *
 * Usage: cupti_queries [STEPS]   (else $STEPS, else 5). Stdout: `done steps=N`. Exit 0, also when
 * every CUDA call fails (warnings on stderr); 2 on a bad STEPS.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "cupti_queries"
#include "cuda_check.h"

/* A stand-in for a kernel: only its address is used (the build links with -rdynamic). */
volatile int query_mark;
void query_kernel(void) { query_mark = 1; }

int main(int argc, char **argv)
{
    long steps = parse_steps(argc, argv, 5);
    if (steps < 0) {
        fprintf(stderr, "usage: cupti_queries [STEPS]   (or STEPS=n in the environment)\n");
        return 2;
    }
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, 4096));
    void *args[] = {&d};
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    for (long s = 0; s < steps; s++) {
        nvtxRangePushA("step");
        int dev = 0, value = 0;
        CHECK(cudaGetDevice(&dev));
        CHECK(cudaGetDevice(&dev));
        CHECK(cudaSetDevice(dev));
        CHECK(cudaGetLastError());
        CHECK(cudaGetLastError());
        CHECK(cudaPeekAtLastError());
        CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, dev));
        CHECK(cudaLaunchKernel((const void *)query_kernel, grid, block, args, 0, NULL));
        CHECK(cudaDeviceSynchronize());
        nvtxRangePop();
    }
    CHECK(cudaFree(d));
    printf("done steps=%ld\n", steps);
    check_summary();
    return 0;
}
