/*
 * marker_common.c — the training loop shared by the function-marker test programs (marker_lib,
 * marker_dlopen, marker_static): each differs only in how it reaches its step function, which
 * marker_run() calls at the start of every step.
 *
 * marker_run(argc, argv, step): STEPS from argv[1], else $STEPS, else 12. One cudaMalloc first (the
 * call that activates stepprof), then per step i: step(i), two cudaLaunchKernel calls, one cudaMemcpy
 * host-to-device, and `step i` on stdout; `done` at the end. Returns the exit code: 0, also when every
 * CUDA call fails (warnings on stderr, see cuda_check.h); 2 on a bad STEPS.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define PROG "marker"
#include "cuda_check.h"

/* Kernel stand-ins: only their addresses are used (see train_c.c). */
volatile int marker_kernel_marks[2];
void marker_forward_kernel(void) { marker_kernel_marks[0] = 1; }
void marker_backward_kernel(void) { marker_kernel_marks[1] = 2; }

static void launch(void (*fn)(void), void **args)
{
    dim3 grid = {64, 1, 1}, block = {256, 1, 1};
    check_call(cudaLaunchKernel((const void *)fn, grid, block, args, 0, NULL), "cudaLaunchKernel");
}

int marker_run(int argc, char **argv, void (*step)(int));

int marker_run(int argc, char **argv, void (*step)(int))
{
    long steps = parse_steps(argc, argv, 12);
    if (steps < 0) {
        fprintf(stderr, "usage: %s [STEPS]   (or STEPS=n in the environment)\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    enum { N = 4096 };
    static float host[N];
    float *dev = NULL;
    CHECK(cudaMalloc((void **)&dev, sizeof host));
    int n = N;
    void *args[] = {&dev, &n};
    for (long i = 0; i < steps; i++) {
        step((int)i);
        launch(marker_forward_kernel, args);
        launch(marker_backward_kernel, args);
        CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
        printf("step %ld\n", i);
    }
    CHECK(cudaFree(dev));
    check_summary();
    printf("done\n");
    return 0;
}
