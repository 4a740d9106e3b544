/*
 * report_stacks.c — a target with known call chains for the with_stack tests: every step runs
 * main -> train_step -> forward -> launch -> cudaLaunchKernel, and main -> train_step ->
 * wait_for_gpu -> cudaStreamSynchronize. The functions are noinline, built with sibling-call
 * optimization off and linked -rdynamic (reports.mk), so each keeps a frame with a dynamic symbol
 * that dladdr can name. Steps are NVTX ranges "train_step".
 *
 * launch() issues LAUNCHES_PER_CALL launches, so each launch stack holds whole microseconds of
 * CPU time even where one launch takes a fraction of one (the collapsed stacks count integer us).
 *
 * Usage: report_stacks [STEPS]   (else $STEPS, else 6). Stdout: `done`. Exit 0.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "report_stacks"
#include "cuda_check.h"

volatile int stack_kernel_mark;
void stack_kernel(void) { stack_kernel_mark = 1; }

enum { LAUNCHES_PER_CALL = 100 };

__attribute__((noinline)) void launch(cudaStream_t s)
{
    dim3 g = {64, 1, 1}, b = {128, 1, 1};
    for (int i = 0; i < LAUNCHES_PER_CALL; i++)
        CHECK(cudaLaunchKernel((const void *)stack_kernel, g, b, NULL, 0, s));
}

__attribute__((noinline)) void forward(cudaStream_t s)
{
    launch(s);
    launch(s);
}

__attribute__((noinline)) void wait_for_gpu(cudaStream_t s)
{
    CHECK(cudaStreamSynchronize(s));
}

__attribute__((noinline)) void train_step(cudaStream_t s)
{
    nvtxRangePushA("train_step");
    forward(s);
    wait_for_gpu(s);
    nvtxRangePop();
}

int main(int argc, char **argv)
{
    long steps = parse_steps(argc, argv, 6);
    if (steps < 0)
        return 2;
    cudaStream_t s = NULL;
    CHECK(cudaStreamCreate(&s));
    for (long i = 0; i < steps; i++)
        train_step(s);
    CHECK(cudaDeviceSynchronize());
    check_summary();
    printf("done\n");
    return 0;
}
