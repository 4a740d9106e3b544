/*
 * train_c.c — the training loop of train.cu written in plain C, built by cc without nvcc.
 *
 * It shows stepprof a program that calls the public runtime API directly: kernels are launched with
 * cudaLaunchKernel((const void *)host_fn, grid, block, args, shmem, stream), where the host_fn are
 * ordinary C functions with no device code behind them (on a real GPU those launches fail with
 * cudaErrorInvalidDeviceFunction; the program warns and goes on). The functions are exported
 * (the build links with -rdynamic) and have distinct bodies so that each has its own address and a
 * name dladdr() can find — what a stand-in runtime or a profiler can use to name them.
 *
 * Per step, inside NVTX ranges train_step > {forward, backward, optimizer}: cudaMemcpy H2D
 * (pageable), cudaMemcpyAsync H2D (pinned) on a created stream, launches of forward_kernel and
 * loss_kernel, cudaMemset of the gradients, backward_kernel, optimizer_axpy_kernel, cudaMemcpyAsync
 * D2H of the loss, cudaStreamSynchronize.
 *
 * Usage: train_c [STEPS]   (else $STEPS, else 20). Stdout: `step N loss X` per step, then `done`.
 * Exit 0, also when every CUDA call fails (warnings on stderr); 2 on a bad STEPS. The loss is what
 * the D2H copy returns: 0.000000 here, since no kernel really runs.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "train_c"
#include "cuda_check.h"

enum { N = 1 << 16, THREADS = 256 };

/* Stand-ins for kernels: never called by the program, only their addresses are used. */
volatile int kernel_marks[4];
void forward_kernel(void) { kernel_marks[0] = 1; }
void loss_kernel(void) { kernel_marks[1] = 2; }
void backward_kernel(void) { kernel_marks[2] = 3; }
void optimizer_axpy_kernel(void) { kernel_marks[3] = 4; }

static void launch(void (*fn)(void), unsigned grid, unsigned block, void **args, size_t shmem,
                   cudaStream_t stream, const char *what)
{
    dim3 g = {grid, 1, 1}, b = {block, 1, 1};
    cudaError_t err = cudaLaunchKernel((const void *)fn, g, b, args, shmem, stream);
    check_call(err, what);
}

static float *host_alloc(size_t bytes, bool *pinned)
{
    void *p = NULL;
    *pinned = CHECK(cudaMallocHost(&p, bytes)) == cudaSuccess && p;
    if (!*pinned)
        p = calloc(1, bytes);
    return p;
}

static void host_free(float *p, bool pinned)
{
    if (pinned)
        CHECK(cudaFreeHost(p));
    else
        free(p);
}

int main(int argc, char **argv)
{
    long steps = parse_steps(argc, argv, 20);
    if (steps < 0) {
        fprintf(stderr, "usage: train_c [STEPS]   (or STEPS=n in the environment)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    const size_t bytes = N * sizeof(float);
    bool y_pinned, loss_pinned;
    float *h_x = malloc(bytes);
    float *h_y = host_alloc(bytes, &y_pinned);
    float *h_loss = host_alloc(sizeof(float), &loss_pinned);
    if (!h_x || !h_y || !h_loss) {
        fprintf(stderr, "train_c: out of host memory\n");
        return 1;
    }

    cudaStream_t stream = NULL;
    CHECK(cudaStreamCreate(&stream));
    float *d_x = NULL, *d_y = NULL, *d_w = NULL, *d_out = NULL, *d_grad = NULL, *d_loss = NULL;
    CHECK(cudaMalloc((void **)&d_x, bytes));
    CHECK(cudaMalloc((void **)&d_y, bytes));
    CHECK(cudaMalloc((void **)&d_w, bytes));
    CHECK(cudaMalloc((void **)&d_out, bytes));
    CHECK(cudaMalloc((void **)&d_grad, bytes));
    CHECK(cudaMalloc((void **)&d_loss, sizeof(float)));
    CHECK(cudaMemset(d_w, 0, bytes));
    CHECK(cudaMemset(d_loss, 0, sizeof(float)));

    int n = N;
    float neg_lr = -0.1f;
    /* Argument arrays as nvcc would build them: one pointer per kernel parameter. */
    void *fwd_args[] = {&d_x, &d_w, &d_out, &n};
    void *loss_args[] = {&d_out, &d_y, &d_loss, &n};
    void *bwd_args[] = {&d_x, &d_out, &d_y, &d_grad, &n};
    void *axpy_args[] = {&neg_lr, &d_grad, &d_w, &n};
    const unsigned grid = (N + THREADS - 1) / THREADS;
    const unsigned axpy_grid = (N + THREADS * 4 - 1) / (THREADS * 4);

    for (long step = 0; step < steps; step++) {
        nvtxRangePushA("train_step");

        for (int i = 0; i < N; i++) {
            h_x[i] = sinf(0.001f * (float)i + (float)step);
            h_y[i] = 2.5f * h_x[i];
        }
        CHECK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpyAsync(d_y, h_y, bytes, cudaMemcpyHostToDevice, stream));

        nvtxRangePushA("forward");
        launch(forward_kernel, grid, THREADS, fwd_args, THREADS * sizeof(float), stream,
               "cudaLaunchKernel(forward_kernel)");
        launch(loss_kernel, 1, THREADS, loss_args, THREADS * sizeof(float), stream,
               "cudaLaunchKernel(loss_kernel)");
        nvtxRangePop();

        nvtxRangePushA("backward");
        CHECK(cudaMemset(d_grad, 0, bytes));
        launch(backward_kernel, grid, THREADS, bwd_args, 0, stream, "cudaLaunchKernel(backward_kernel)");
        nvtxRangePop();

        nvtxRangePushA("optimizer");
        launch(optimizer_axpy_kernel, axpy_grid, THREADS, axpy_args, 0, stream,
               "cudaLaunchKernel(optimizer_axpy_kernel)");
        nvtxRangePop();

        CHECK(cudaMemcpyAsync(h_loss, d_loss, sizeof(float), cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));

        nvtxRangePop();
        printf("step %ld loss %.6f\n", step, (double)*h_loss);
    }

    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_y));
    CHECK(cudaFree(d_w));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_grad));
    CHECK(cudaFree(d_loss));
    if (stream)
        CHECK(cudaStreamDestroy(stream));
    host_free(h_y, y_pinned);
    host_free(h_loss, loss_pinned);
    free(h_x);
    check_summary();
    printf("done\n");
    return 0;
}
