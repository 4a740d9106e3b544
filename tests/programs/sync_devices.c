/*
 * sync_devices.c — stream and context synchronizations on two GPUs, for the tests of where a sync
 * is drawn (CUPTI's synchronization records carry a context id, no device id). Run it on the stand-in
 * with FAKECUDA_DEVICES=2.
 *
 * On GPU 1 (cudaSetDevice(1)), then on GPU 0: cudaDeviceSynchronize before the device has run
 * anything (a context sync whose context's work comes after it), a created stream, a launch of
 * sync_devices_kernel and a cudaMemsetAsync of 4 KiB on it, cudaStreamSynchronize of that stream,
 * cudaDeviceSynchronize. (On a GPU the launch fails, the program has no device code; the memset is
 * the work CUPTI records there, with its device and context.)
 *
 * Usage: sync_devices. Stdout: `done`. Exit 0, also when CUDA calls fail (warnings on stderr).
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#define PROG "sync_devices"
#include "cuda_check.h"

/* The kernel stand-in: only its address is used (see train_c.c). */
volatile int sync_devices_mark;
void sync_devices_kernel(void) { sync_devices_mark = 1; }

static void on_device(int device)
{
    cudaStream_t s = NULL;
    void *p = NULL;
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    CHECK(cudaSetDevice(device));
    CHECK(cudaDeviceSynchronize());
    if (CHECK(cudaStreamCreate(&s)) != cudaSuccess)
        s = NULL;
    if (CHECK(cudaMalloc(&p, 4096)) != cudaSuccess)
        p = NULL;
    CHECK(cudaLaunchKernel((const void *)sync_devices_kernel, grid, block, NULL, 0, s));
    if (p)
        CHECK(cudaMemsetAsync(p, 0, 4096, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaDeviceSynchronize());
    if (p)
        CHECK(cudaFree(p));
    if (s)
        CHECK(cudaStreamDestroy(s));
}

int main(void)
{
    on_device(1);
    on_device(0);
    check_summary();
    printf("done\n");
    return 0;
}
