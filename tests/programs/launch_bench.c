/*
 * launch_bench.c — measures the cost of one cudaLaunchKernel call, to put a number on stepprof's
 * hot-path overhead: run it bare and preloaded (recording and not recording) and compare.
 *
 * Usage: launch_bench [CALLS]   (default 10000000). It first makes 10000 warm-up calls (untimed: they
 * pay for lazy symbol binding, runtime initialisation and, under stepprof, buffer set-up), then CALLS
 * calls in a tight loop on the default stream, timed with CLOCK_MONOTONIC.
 * Stdout: exactly one line, `ns_per_call <float>`. Stderr: one warning line if calls failed (they all
 * do on a runtime with no driver; the number then measures the failing path). Exit 0; 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

/* The kernel stand-in: only its address is used (see train_c.c). */
volatile int bench_kernel_mark;
void bench_kernel(void) { bench_kernel_mark = 1; }

static long run(long calls)
{
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    long failed = 0;
    for (long i = 0; i < calls; i++)
        failed += cudaLaunchKernel((const void *)bench_kernel, grid, block, NULL, 0, 0) != cudaSuccess;
    return failed;
}

int main(int argc, char **argv)
{
    long calls = 10000000;
    if (argc > 1) {
        char *end;
        calls = strtol(argv[1], &end, 10);
        if (*end || calls < 1) {
            fprintf(stderr, "usage: launch_bench [CALLS (default 10000000)]\n");
            return 2;
        }
    }
    run(10000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long failed = run(calls);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    if (failed)
        fprintf(stderr, "launch_bench: warning: %ld of %ld timed calls failed\n", failed, calls);
    printf("ns_per_call %.3f\n", ns / (double)calls);
    return 0;
}
