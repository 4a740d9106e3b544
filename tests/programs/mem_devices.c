/*
 * mem_devices.c — allocations on two devices from two threads, for the profile_memory tests. Run it
 * on the stand-in with FAKECUDA_DEVICES=2. The main thread allocates 1 MiB on device 0 (never
 * calling cudaSetDevice: a thread starts on device 0), then cudaSetDevice(1) and 2 MiB; a second
 * thread calls cudaSetDevice(1), allocates 4 MiB and frees it; the main thread, still on device 1,
 * allocates 3 MiB there; then everything is freed, each block from the thread that allocated it.
 *
 * Usage: mem_devices. Stdout: `done`. Exit 0, also when CUDA calls fail (warnings on stderr).
 */
#include <pthread.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#define PROG "mem_devices"
#include "cuda_check.h"

enum { MIB = 1 << 20 };

static void *other_thread(void *arg)
{
    (void)arg;
    void *p = NULL;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p, 4 * MIB));
    CHECK(cudaFree(p));
    return NULL;
}

int main(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK(cudaMalloc(&a, 1 * MIB));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&b, 2 * MIB));
    pthread_t th;
    if (pthread_create(&th, NULL, other_thread, NULL) == 0)
        pthread_join(th, NULL);
    CHECK(cudaMalloc(&c, 3 * MIB));
    CHECK(cudaFree(c));
    CHECK(cudaFree(b));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(a));
    check_summary();
    printf("done\n");
    return 0;
}
