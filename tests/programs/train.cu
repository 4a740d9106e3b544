/*
 * train.cu — a small training loop written the way people write one, the main target for stepprof.
 *
 * Built three ways (tests/programs/programs.mk): `nvcc -cudart shared` (build/programs/train: the
 * runtime calls are visible to LD_PRELOAD), `--default-stream per-thread` (train_ptsz: launches go
 * through __cudaLaunchKernel_ptsz and the stream APIs through their _ptsz/_ptds spellings), and
 * nvcc's default static cudart (train_static: interposition sees nothing, only CUPTI can).
 *
 * Model: per-element linear regression w*x ~ y with y = 2.5*x, so on a GPU the loss falls each step.
 * Each step, inside NVTX ranges train_step > {forward, backward, optimizer}:
 *   cudaMemcpy H2D of the inputs from pageable memory, cudaMemcpyAsync H2D of the labels from pinned
 *   memory on a created stream, forward kernel (in namespace model, dynamic shared memory) and a loss
 *   reduction kernel, cudaMemset of the gradients (zero_grad), backward kernel (namespace model),
 *   template kernel axpy_kernel<float, 4> as the optimizer, cudaMemcpyAsync D2H of the loss,
 *   cudaStreamSynchronize.
 *
 * Usage: train [STEPS]   (else $STEPS, else 20). Stdout: `step N loss X` per step, then `done`.
 * Exit 0, also when every CUDA call fails (warnings go to stderr, see cuda_check.h); 2 on a bad STEPS.
 * On the CPU stand-in kernels do not run, so the printed loss stays 0.000000 (deterministic).
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "train"
#include "cuda_check.h"

static const int N = 1 << 16;          /* elements per batch and parameters */
static const int THREADS = 256;
static const float LR = 0.1f;

namespace model {

/* out = w * x; the tile through dynamic shared memory gives the kernel record a non-zero
   "shared memory" value, as real kernels have. */
__global__ void forward_kernel(const float *x, const float *w, float *out, int n)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        tile[threadIdx.x] = x[i];
    __syncthreads();
    if (i < n)
        out[i] = w[i] * tile[threadIdx.x];
}

/* grad += 2 (out - y) x: accumulates, which is why the step zeroes grad with cudaMemset first. */
__global__ void backward_kernel(const float *x, const float *out, const float *y, float *grad, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        grad[i] += 2.0f * (out[i] - y[i]) * x[i];
}

} // namespace model

/* loss = mean((out - y)^2), one block, so the result is written without atomics (deterministic). */
__global__ void loss_kernel(const float *out, const float *y, float *loss, int n)
{
    extern __shared__ float partial[];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float d = out[i] - y[i];
        sum += d * d;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *loss = partial[0] / n;
}

/* y += a * x, each thread handling PER_THREAD elements: a template so the trace shows a demangled
   name with template arguments, `void axpy_kernel<float, 4>(float, float const*, float*, int)`. */
template <typename T, int PER_THREAD>
__global__ void axpy_kernel(T a, const T *x, T *y, int n)
{
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * PER_THREAD;
#pragma unroll
    for (int k = 0; k < PER_THREAD; k++)
        if (base + k < n)
            y[base + k] += a * x[base + k];
}

/* Pinned host memory, or pageable memory when the runtime cannot pin (no driver): the program must
   go on either way. *pinned says which, so the right free is used. */
static float *host_alloc(size_t bytes, bool *pinned)
{
    void *p = nullptr;
    *pinned = CHECK(cudaMallocHost(&p, bytes)) == cudaSuccess && p;
    if (!*pinned)
        p = calloc(1, bytes);
    return static_cast<float *>(p);
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
        fprintf(stderr, "usage: train [STEPS]   (or STEPS=n in the environment)\n");
        return 2;
    }
    /* Line-buffered even into a pipe, so a test sees every step printed before a crash. */
    setvbuf(stdout, nullptr, _IOLBF, 0);

    const size_t bytes = N * sizeof(float);
    float *h_x = static_cast<float *>(malloc(bytes));   /* pageable on purpose */
    bool y_pinned, loss_pinned;
    float *h_y = host_alloc(bytes, &y_pinned);
    float *h_loss = host_alloc(sizeof(float), &loss_pinned);
    if (!h_x || !h_y || !h_loss) {
        fprintf(stderr, "train: out of host memory\n");
        return 1;
    }

    cudaStream_t stream = nullptr;
    CHECK(cudaStreamCreate(&stream));
    float *d_x = nullptr, *d_y = nullptr, *d_w = nullptr, *d_out = nullptr, *d_grad = nullptr,
          *d_loss = nullptr;
    CHECK(cudaMalloc(&d_x, bytes));
    CHECK(cudaMalloc(&d_y, bytes));
    CHECK(cudaMalloc(&d_w, bytes));
    CHECK(cudaMalloc(&d_out, bytes));
    CHECK(cudaMalloc(&d_grad, bytes));
    CHECK(cudaMalloc(&d_loss, sizeof(float)));
    /* Defined start values, so the printed loss is the same on every run of the same runtime. */
    CHECK(cudaMemset(d_w, 0, bytes));
    CHECK(cudaMemset(d_loss, 0, sizeof(float)));

    const int grid = (N + THREADS - 1) / THREADS;
    const int axpy_grid = (N + THREADS * 4 - 1) / (THREADS * 4);

    for (long step = 0; step < steps; step++) {
        nvtxRangePushA("train_step");

        for (int i = 0; i < N; i++) {
            h_x[i] = sinf(0.001f * (float)i + (float)step);
            h_y[i] = 2.5f * h_x[i];
        }
        CHECK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpyAsync(d_y, h_y, bytes, cudaMemcpyHostToDevice, stream));

        nvtxRangePushA("forward");
        model::forward_kernel<<<grid, THREADS, THREADS * sizeof(float), stream>>>(d_x, d_w, d_out, N);
        CHECK(cudaGetLastError());
        loss_kernel<<<1, THREADS, THREADS * sizeof(float), stream>>>(d_out, d_y, d_loss, N);
        CHECK(cudaGetLastError());
        nvtxRangePop();

        nvtxRangePushA("backward");
        CHECK(cudaMemset(d_grad, 0, bytes));
        model::backward_kernel<<<grid, THREADS, 0, stream>>>(d_x, d_out, d_y, d_grad, N);
        CHECK(cudaGetLastError());
        nvtxRangePop();

        nvtxRangePushA("optimizer");
        axpy_kernel<float, 4><<<axpy_grid, THREADS, 0, stream>>>(-LR, d_grad, d_w, N);
        CHECK(cudaGetLastError());
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
