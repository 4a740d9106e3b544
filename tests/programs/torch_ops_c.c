/*
 * torch_ops_c.c — what a PyTorch CUDA program shows stepprof when its autograd profiler runs in NVTX
 * mode, written in plain C for the CPU stand-in (tests/test_torch.py cannot run real PyTorch on it):
 * per step, NVTX ranges with the messages torch's NVTX observer writes (checked against real torch
 * 2.15 in tests/test_torch.py) around the CUDA calls the operators would make — a forward
 * "aten::mm, seq = N, op_id = K, sizes = [[64, 32], [32, 16]], input_op_ids = [...]" launching
 * mm_kernel, an "aten::copy_" doing a cudaMemcpy, and the backward
 * "autograd::engine::evaluate_function: MmBackward0" > "MmBackward0, seq = N" launching
 * mm_backward_kernel; then a plain "Optimizer.step#SGD.step" scope. Steps come from an NVTX marker
 * range "train_step". Usage: torch_ops_c [STEPS] [cccl] (default 4). Stdout: `done`.
 * With "cccl", each step then runs, inside a user range "user_block" that launches user_kernel, an
 * "aten::embedding_dense_backward" operator that launches embedding_kernel and, as CUB does inside
 * it, opens a range of its own NVTX domain ("CCCL", registered string "cub::DeviceRadixSort::SortPairs")
 * around radix_sort_kernel, a cudaMemsetAsync and a second cudaMemsetAsync that only CUPTI sees (called
 * through libcudart's own symbol, as a library with its own runtime would), then a default-domain range
 * "user_inner" around inner_kernel; a start/end range "io" begun in the operator ends after it, around
 * io_kernel.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "torch_ops_c"
#include "cuda_check.h"

volatile int kernel_marks[2];
void mm_kernel(void) { kernel_marks[0] = 1; }
void mm_backward_kernel(void) { kernel_marks[1] = 2; }
void user_kernel(void) { kernel_marks[0] = 3; }
void embedding_kernel(void) { kernel_marks[0] = 4; }
void radix_sort_kernel(void) { kernel_marks[0] = 5; }
void inner_kernel(void) { kernel_marks[0] = 6; }
void io_kernel(void) { kernel_marks[0] = 7; }

static void launch(void (*fn)(void), const char *what)
{
    dim3 g = {4, 1, 1}, b = {128, 1, 1};
    check_call(cudaLaunchKernel((const void *)fn, g, b, NULL, 0, 0), what);
}

typedef cudaError_t (*memset_async_fn)(void *, int, size_t, cudaStream_t);

/* One "cccl" step (see the header); op_id is torch's running operator number. */
static void cccl_step(nvtxDomainHandle_t cccl, nvtxStringHandle_t sort, memset_async_fn unseen, float *dev,
                      long *op_id)
{
    char msg[256];
    nvtxRangePushA("user_block");
    launch(user_kernel, "user_kernel");
    snprintf(msg, sizeof msg, "aten::embedding_dense_backward, op_id = %ld, sizes = [[64, 16], [64], [], [], []], "
             "input_op_ids = []", (*op_id)++);
    nvtxRangePushA(msg);
    launch(embedding_kernel, "embedding_kernel");
    nvtxEventAttributes_t a = {.version = NVTX_VERSION, .size = NVTX_EVENT_ATTRIB_STRUCT_SIZE,
                               .messageType = NVTX_MESSAGE_TYPE_REGISTERED, .message.registered = sort};
    nvtxDomainRangePushEx(cccl, &a);
    launch(radix_sort_kernel, "radix_sort_kernel");
    CHECK(cudaMemsetAsync(dev, 0, 64, 0));
    if (unseen)
        CHECK(unseen(dev, 1, 128, 0));
    nvtxDomainRangePop(cccl);
    nvtxRangePushA("user_inner");
    launch(inner_kernel, "inner_kernel");
    nvtxRangePop();
    nvtxRangeId_t io = nvtxRangeStartA("io");
    nvtxRangePop();
    launch(io_kernel, "io_kernel");
    nvtxRangeEnd(io);
    nvtxRangePop();
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
    int cccl = argc > 2 && strcmp(argv[2], "cccl") == 0;
    nvtxDomainHandle_t dom = cccl ? nvtxDomainCreateA("CCCL") : NULL;
    nvtxStringHandle_t sort = cccl ? nvtxDomainRegisterStringA(dom, "cub::DeviceRadixSort::SortPairs") : NULL;
    void *rt = cccl ? dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD) : NULL;
    memset_async_fn unseen = rt ? (memset_async_fn)dlsym(rt, "cudaMemsetAsync") : NULL;
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
        if (cccl)
            cccl_step(dom, sort, unseen, dev, &op_id);
        CHECK(cudaDeviceSynchronize());
        nvtxRangePop();
        seq++;
    }
    if (dom)
        nvtxDomainDestroy(dom);
    CHECK(cudaFree(dev));
    printf("done\n");
    return 0;
}
