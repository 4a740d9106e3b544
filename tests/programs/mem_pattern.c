/*
 * mem_pattern.c — a known allocation pattern for the profile_memory tests (tests/test_memory.py).
 *
 * Before the loop: W = 1 MiB of device memory (cudaMalloc) and 64 KiB of pinned host memory
 * (cudaMallocHost), both freed after it. Each step, inside NVTX ranges step > alloc_phase:
 * a = cudaMalloc 256 KiB, b = cudaMallocAsync 512 KiB on stream s1, c = cudaMallocAsync 128 KiB on
 * stream s2; then b is freed (cudaFreeAsync on s1), then c (cudaFreeAsync on s2) and a (cudaFree).
 * Step 1 also allocates and frees 8 KiB of pinned memory (cudaHostAlloc / cudaFreeHost) and 64 KiB
 * through libcudart's own cudaMalloc symbol, fetched with dlsym on the library's handle, which no
 * LD_PRELOAD interposer sees (only CUPTI does). Step 2 leaks three blocks before freeing c and a:
 * 100000 and 200000 bytes from leak_a(), 350000 bytes from leak_b(). Step 3 frees a pointer nobody
 * allocated (0x1234), allocates and frees 4096 bytes and frees them again (a double free), and calls
 * cudaFree(NULL). The leaked blocks are never freed.
 *
 * Usage: mem_pattern [STEPS]   (else $STEPS, else 5). Stdout: one line per step, the results of the
 * bad frees, then `done`. Exit 0, also when CUDA calls fail (warnings on stderr); 2 on a bad STEPS.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "mem_pattern"
#include "cuda_check.h"

enum { W_BYTES = 1 << 20, PINNED_BYTES = 64 << 10, A = 256 << 10, B = 512 << 10, C = 128 << 10,
       STEP_PINNED = 8 << 10, HIDDEN = 64 << 10, X = 4096 };

/* Each leak comes from its own call site, which the memory report groups by. */
__attribute__((noinline)) void *leak_a(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n));
    return p;
}

__attribute__((noinline)) void *leak_b(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n));
    return p;
}

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);

/* libcudart's own definitions, not the first ones in the global scope. */
static void hidden_alloc_free(void)
{
    void *rt = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    malloc_fn m = rt ? (malloc_fn)dlsym(rt, "cudaMalloc") : NULL;
    free_fn f = rt ? (free_fn)dlsym(rt, "cudaFree") : NULL;
    void *p = NULL;
    if (m && f && CHECK(m(&p, HIDDEN)) == cudaSuccess)
        CHECK(f(p));
}

static void step_body(long step, cudaStream_t s1, cudaStream_t s2)
{
    void *a = NULL, *b = NULL, *c = NULL;
    nvtxRangePushA("alloc_phase");
    CHECK(cudaMalloc(&a, A));
    CHECK(cudaMallocAsync(&b, B, s1));
    CHECK(cudaMallocAsync(&c, C, s2));
    nvtxRangePop();
    CHECK(cudaFreeAsync(b, s1));
    if (step == 1) {
        void *hp = NULL;
        if (CHECK(cudaHostAlloc(&hp, STEP_PINNED, cudaHostAllocDefault)) == cudaSuccess)
            CHECK(cudaFreeHost(hp));
        hidden_alloc_free();
    }
    if (step == 2) {
        leak_a(100000);
        leak_a(200000);
        leak_b(350000);
    }
    CHECK(cudaFreeAsync(c, s2));
    CHECK(cudaFree(a));
    if (step == 3) {
        void *x = NULL;
        printf("free of an unknown pointer returned %d\n", (int)cudaFree((void *)(uintptr_t)0x1234));
        CHECK(cudaMalloc(&x, X));
        CHECK(cudaFree(x));
        printf("double free returned %d\n", (int)cudaFree(x));
        printf("cudaFree(NULL) returned %d\n", (int)cudaFree(NULL));
    }
}

int main(int argc, char **argv)
{
    long steps = parse_steps(argc, argv, 5);
    if (steps < 0) {
        fprintf(stderr, "usage: mem_pattern [STEPS]\n");
        return 2;
    }
    void *w = NULL, *h = NULL;
    cudaStream_t s1 = NULL, s2 = NULL;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreate(&s2));
    CHECK(cudaMalloc(&w, W_BYTES));
    CHECK(cudaMallocHost(&h, PINNED_BYTES));
    for (long s = 0; s < steps; s++) {
        nvtxRangePushA("step");
        step_body(s, s1, s2);
        CHECK(cudaStreamSynchronize(s1));
        nvtxRangePop();
        printf("step %ld\n", s);
    }
    CHECK(cudaFree(w));
    CHECK(cudaFreeHost(h));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    check_summary();
    printf("done\n");
    return 0;
}
