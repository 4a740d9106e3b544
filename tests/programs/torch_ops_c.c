/*
 * torch_ops_c.c — what a PyTorch CUDA program shows stepprof when its autograd profiler runs in NVTX
 * mode, written in plain C for the CPU stand-in (tests/test_torch.py cannot run real PyTorch on it):
 * per step, NVTX ranges with the messages torch's NVTX observer writes (checked against real torch
 * 2.15 in tests/test_torch.py) around the CUDA calls the operators would make — a forward
 * "aten::mm, seq = N, op_id = K, sizes = [[64, 32], [32, 16]], input_op_ids = [...]" launching
 * mm_kernel, an "aten::copy_" doing a cudaMemcpy, and the backward
 * "autograd::engine::evaluate_function: MmBackward0" > "MmBackward0, seq = N" launching
 * mm_backward_kernel; then a plain "Optimizer.step#SGD.step" scope. Steps come from an NVTX marker
 * range "train_step". Usage: torch_ops_c [STEPS] (default 4). Stdout: `done`.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "torch_ops_c"
#include "cuda_check.h"

volatile int kernel_marks[2];
void mm_kernel(void) { kernel_marks[0] = 1; }
void mm_backward_kernel(void) { kernel_marks[1] = 2; }

static void launch(void (*fn)(void), const char *what)
{
    dim3 g = {4, 1, 1}, b = {128, 1, 1};
    check_call(cudaLaunchKernel((const void *)fn, g, b, NULL, 0, 0), what);
}

int main(int argc, char **argv)
{
    long steps = parse_steps(argc, argv, 4);
    if (steps < 0)
        return 2;
    float host[256] = {0}, *dev = NULL;
    CHECK(cudaMalloc((void **)&dev, sizeof host));
    long op_id = 1, seq = 0;
    char msg[256];
    for (long s = 0; s < steps; s++) {
        nvtxRangePushA("train_step");
        snprintf(msg, sizeof msg, "aten::mm, seq = %ld, op_id = %ld, sizes = [[64, 32], [32, 16]], "
                 "input_op_ids = [(0,-1), (0,-1)]", seq, op_id++);
        nvtxRangePushA(msg);
        launch(mm_kernel, "mm_kernel");
        nvtxRangePop();
        snprintf(msg, sizeof msg, "aten::copy_, op_id = %ld, sizes = [[256], [256], []], input_op_ids = []", op_id++);
        nvtxRangePushA(msg);
        CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
        nvtxRangePop();
        snprintf(msg, sizeof msg, "autograd::engine::evaluate_function: MmBackward0, op_id = %ld", op_id++);
        nvtxRangePushA(msg);
        snprintf(msg, sizeof msg, "MmBackward0, seq = %ld, op_id = %ld, sizes = [[64, 16]], input_op_ids = []",
                 seq, op_id++);
        nvtxRangePushA(msg);
        launch(mm_backward_kernel, "mm_backward_kernel");
        nvtxRangePop();
        nvtxRangePop();
        snprintf(msg, sizeof msg, "Optimizer.step#SGD.step, op_id = %ld", op_id++);
        nvtxRangePushA(msg);
        nvtxRangePop();
        CHECK(cudaDeviceSynchronize());
        nvtxRangePop();
        seq++;
    }
    CHECK(cudaFree(dev));
    printf("done\n");
    return 0;
}
