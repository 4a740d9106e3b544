/*
 * calls_all.c — calls every CUDA runtime function stepprof intercepts exactly once, in a fixed order
 * and with distinctive arguments, and writes what it called as JSON to argv[1], so a test can compare
 * the cuda_runtime events of the trace (names, order, arguments, return codes) with the truth.
 *
 * Built twice: build/programs/calls_all, and build/programs/calls_all_ptsz with
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1, where cuda_runtime_api.h renames calls to the per-thread
 * spellings (cudaMemcpy -> cudaMemcpy_ptds, cudaMemcpyAsync -> cudaMemcpyAsync_ptsz, ...). The names
 * written come from stringifying the macro-expanded identifier (NAME below), so they are exactly the
 * symbols the binary imports in both builds; functions the header does not rename (cudaMalloc,
 * cudaMemcpyPeer, cudaDeviceSynchronize, cudaEventSynchronize, ...) keep their plain names.
 *
 * The order (one entry each, array order of the JSON):
 *   1 cudaProfilerStart          2 cudaMalloc (1048583)       3 cudaMallocAsync (524309)
 *   4 cudaMallocHost (262147)    5 cudaHostAlloc (131101)     6 cudaMallocManaged (65557)
 *   7 cudaMallocPitch (1200x17)  8 cudaMemcpy HtoD (40961)    9 cudaMemcpyAsync DtoH (20483)
 *  10 cudaMemcpy2D DtoD (1000x13) 11 cudaMemcpy2DAsync Default (600x11)
 *  12 cudaMemcpyPeer (8209)     13 cudaMemcpyPeerAsync (4099) 14 cudaMemset (12289, 0x5a)
 *  15 cudaMemsetAsync (6151, 0xa5)
 *  16 cudaLaunchKernel grid 3,5,7 block 32,4,2 shmem 96
 *  17 cudaLaunchKernelExC grid 11,1,1 block 64,1,1 shmem 256
 *  18 cudaLaunchCooperativeKernel grid 2,2,1 block 128,1,1 shmem 512
 *  19 cudaLaunchHostFunc        20 cudaGraphLaunch (an empty graph)
 *  21 cudaStreamWaitEvent       22 cudaEventSynchronize      23 cudaStreamSynchronize
 *  24 cudaDeviceSynchronize     25 cudaFreeAsync             26 cudaFree
 *  27 cudaFreeHost              28 cudaProfilerStop
 * Each JSON object has "name", "ret" (the cudaError_t returned), "errno" (errno right after the call;
 * errno is set to ERRNO_SENTINEL before every recorded call, so a run under stepprof must write the
 * same values as a bare run: an interposer must leave errno as the runtime left it) and, where they apply: "bytes",
 * "kind" (HtoH/HtoD/DtoH/DtoD/Default), "stream" (handle as an integer, 0 = default stream), "ptr"
 * (allocation result or pointer freed / written, as an integer), "value" (memset byte), "flags",
 * "width"/"height"/"pitch" (for pitched calls "bytes" = width*height, the bytes asked for or moved),
 * "dstDevice"/"srcDevice", "grid"/"block" ([x,y,z]), "shared memory", "event".
 * With no driver every call fails and every pointer and handle is 0; the calls are still made.
 * Non-intercepted setup calls (not in the JSON): cudaStreamCreate, cudaEventCreate, cudaEventRecord,
 * cudaGraphCreate, cudaGraphInstantiate and, after cudaProfilerStop, the matching destroys.
 * The managed, pitched and cudaHostAlloc buffers are deliberately not freed: one free call each.
 *
 * Usage: calls_all OUT.json. Stdout: `calls_all: N calls written to OUT.json`. Exit 0 however the
 * calls went; 2 on bad usage or when OUT.json cannot be written.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#define PROG "calls_all"
#include "cuda_check.h"

/* Two levels so the argument is macro-expanded first: NAME(cudaMemcpy) is "cudaMemcpy_ptds" in the
   per-thread build. */
#define NAME_(x) #x
#define NAME(x) NAME_(x)

#define ERRNO_SENTINEL 4242

static char json[16384];
static size_t json_len;
static int ncalls, nfailed;

/* Append one entry: `fields` is the JSON text of the extra members (without braces), may be "". */
__attribute__((format(printf, 3, 4)))
static void record(const char *name, cudaError_t ret, const char *fields, ...)
{
    int err = errno;
    char extra[1024];
    va_list ap;
    va_start(ap, fields);
    vsnprintf(extra, sizeof extra, fields, ap);
    va_end(ap);
    json_len += snprintf(json + json_len, sizeof json - json_len, "%s\n  {\"name\": \"%s\", \"ret\": %d, \"errno\": %d%s%s}",
                         ncalls ? "," : "", name, (int)ret, err, *extra ? ", " : "", extra);
    ncalls++;
    nfailed += ret != cudaSuccess;
    if (json_len >= sizeof json) {
        fprintf(stderr, "calls_all: JSON buffer too small\n");
        exit(2);
    }
    errno = ERRNO_SENTINEL; /* for the next call */
}

/* For calls with no argument worth recording (a zero-length format would trip -Wformat). */
static void record_plain(const char *name, cudaError_t ret) { record(name, ret, "%s", ""); }

static unsigned long long iptr(const void *p) { return (unsigned long long)(uintptr_t)p; }

/* Kernel stand-ins: only their addresses are used (see train_c.c for why they are exported). */
volatile int calls_all_marks[3];
void calls_all_kernel(int v) { calls_all_marks[0] = v; }
void calls_all_kernel_ex(int v) { calls_all_marks[1] = v; }
void calls_all_kernel_coop(int v) { calls_all_marks[2] = v; }

static void CUDART_CB host_callback(void *user) { *(volatile int *)user = 1; }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: calls_all OUT.json\n");
        return 2;
    }

    /* Setup, not intercepted and so not recorded. */
    cudaStream_t s = NULL;
    cudaEvent_t ev = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaEventCreate(&ev));
    CHECK(cudaGraphCreate(&graph, 0));
    if (graph)
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
    unsigned long long st = iptr(s);
    char *h_src = calloc(1, 1 << 20);
    if (!h_src)
        return 2;

    cudaError_t r;
    void *d_a = NULL, *d_b = NULL, *h_pin = NULL, *h_alloc = NULL, *d_m = NULL, *d_p = NULL;
    size_t pitch = 0;

    errno = ERRNO_SENTINEL;
    r = cudaProfilerStart();
    record_plain(NAME(cudaProfilerStart), r);

    r = cudaMalloc(&d_a, 1048583);
    record(NAME(cudaMalloc), r, "\"bytes\": 1048583, \"ptr\": %llu", iptr(d_a));
    r = cudaMallocAsync(&d_b, 524309, s);
    record(NAME(cudaMallocAsync), r, "\"bytes\": 524309, \"stream\": %llu, \"ptr\": %llu", st, iptr(d_b));
    r = cudaMallocHost(&h_pin, 262147);
    record(NAME(cudaMallocHost), r, "\"bytes\": 262147, \"ptr\": %llu", iptr(h_pin));
    r = cudaHostAlloc(&h_alloc, 131101, cudaHostAllocPortable);
    record(NAME(cudaHostAlloc), r, "\"bytes\": 131101, \"flags\": %u, \"ptr\": %llu",
           (unsigned)cudaHostAllocPortable, iptr(h_alloc));
    r = cudaMallocManaged(&d_m, 65557, cudaMemAttachGlobal);
    record(NAME(cudaMallocManaged), r, "\"bytes\": 65557, \"flags\": %u, \"ptr\": %llu",
           (unsigned)cudaMemAttachGlobal, iptr(d_m));
    r = cudaMallocPitch(&d_p, &pitch, 1200, 17);
    record(NAME(cudaMallocPitch), r,
           "\"bytes\": 20400, \"width\": 1200, \"height\": 17, \"pitch\": %zu, \"ptr\": %llu", pitch,
           iptr(d_p));
    /* Keep the later 2D copy's arguments self-consistent when the allocation failed. */
    if (pitch < 1200)
        pitch = 1200;

    r = cudaMemcpy(d_a, h_src, 40961, cudaMemcpyHostToDevice);
    record(NAME(cudaMemcpy), r, "\"bytes\": 40961, \"kind\": \"HtoD\", \"ptr\": %llu", iptr(d_a));
    r = cudaMemcpyAsync(h_pin, d_a, 20483, cudaMemcpyDeviceToHost, s);
    record(NAME(cudaMemcpyAsync), r, "\"bytes\": 20483, \"kind\": \"DtoH\", \"stream\": %llu, \"ptr\": %llu",
           st, iptr(h_pin));
    r = cudaMemcpy2D(d_p, pitch, d_a, 1000, 1000, 13, cudaMemcpyDeviceToDevice);
    record(NAME(cudaMemcpy2D), r,
           "\"bytes\": 13000, \"kind\": \"DtoD\", \"width\": 1000, \"height\": 13, \"ptr\": %llu", iptr(d_p));
    r = cudaMemcpy2DAsync(h_alloc, 700, h_pin, 700, 600, 11, cudaMemcpyDefault, s);
    record(NAME(cudaMemcpy2DAsync), r,
           "\"bytes\": 6600, \"kind\": \"Default\", \"width\": 600, \"height\": 11, \"stream\": %llu, "
           "\"ptr\": %llu", st, iptr(h_alloc));
    r = cudaMemcpyPeer(d_m, 0, d_a, 0, 8209);
    record(NAME(cudaMemcpyPeer), r, "\"bytes\": 8209, \"dstDevice\": 0, \"srcDevice\": 0, \"ptr\": %llu",
           iptr(d_m));
    r = cudaMemcpyPeerAsync(d_b, 0, d_a, 0, 4099, s);
    record(NAME(cudaMemcpyPeerAsync), r,
           "\"bytes\": 4099, \"dstDevice\": 0, \"srcDevice\": 0, \"stream\": %llu, \"ptr\": %llu", st, iptr(d_b));
    r = cudaMemset(d_a, 0x5a, 12289);
    record(NAME(cudaMemset), r, "\"bytes\": 12289, \"value\": %d, \"ptr\": %llu", 0x5a, iptr(d_a));
    r = cudaMemsetAsync(d_b, 0xa5, 6151, s);
    record(NAME(cudaMemsetAsync), r, "\"bytes\": 6151, \"value\": %d, \"stream\": %llu, \"ptr\": %llu", 0xa5,
           st, iptr(d_b));

    int arg = 42;
    void *args[] = {&arg};
    dim3 grid = {3, 5, 7}, block = {32, 4, 2};
    r = cudaLaunchKernel((const void *)calls_all_kernel, grid, block, args, 96, s);
    record(NAME(cudaLaunchKernel), r,
           "\"grid\": [3, 5, 7], \"block\": [32, 4, 2], \"shared memory\": 96, \"stream\": %llu", st);

    cudaLaunchConfig_t config;
    memset(&config, 0, sizeof config);
    config.gridDim = (dim3){11, 1, 1};
    config.blockDim = (dim3){64, 1, 1};
    config.dynamicSmemBytes = 256;
    config.stream = s;
    r = cudaLaunchKernelExC(&config, (const void *)calls_all_kernel_ex, args);
    record(NAME(cudaLaunchKernelExC), r,
           "\"grid\": [11, 1, 1], \"block\": [64, 1, 1], \"shared memory\": 256, \"stream\": %llu", st);

    r = cudaLaunchCooperativeKernel((const void *)calls_all_kernel_coop, (dim3){2, 2, 1}, (dim3){128, 1, 1},
                                    args, 512, s);
    record(NAME(cudaLaunchCooperativeKernel), r,
           "\"grid\": [2, 2, 1], \"block\": [128, 1, 1], \"shared memory\": 512, \"stream\": %llu", st);

    static volatile int host_fn_ran;
    r = cudaLaunchHostFunc(s, host_callback, (void *)&host_fn_ran);
    record(NAME(cudaLaunchHostFunc), r, "\"stream\": %llu", st);
    r = cudaGraphLaunch(exec, s);
    record(NAME(cudaGraphLaunch), r, "\"stream\": %llu", st);

    CHECK(cudaEventRecord(ev, s));
    r = cudaStreamWaitEvent(s, ev, 0);
    record(NAME(cudaStreamWaitEvent), r, "\"stream\": %llu, \"event\": %llu", st, iptr(ev));
    r = cudaEventSynchronize(ev);
    record(NAME(cudaEventSynchronize), r, "\"event\": %llu", iptr(ev));
    r = cudaStreamSynchronize(s);
    record(NAME(cudaStreamSynchronize), r, "\"stream\": %llu", st);
    r = cudaDeviceSynchronize();
    record_plain(NAME(cudaDeviceSynchronize), r);

    r = cudaFreeAsync(d_b, s);
    record(NAME(cudaFreeAsync), r, "\"ptr\": %llu, \"stream\": %llu", iptr(d_b), st);
    r = cudaFree(d_a);
    record(NAME(cudaFree), r, "\"ptr\": %llu", iptr(d_a));
    r = cudaFreeHost(h_pin);
    record(NAME(cudaFreeHost), r, "\"ptr\": %llu", iptr(h_pin));

    r = cudaProfilerStop();
    record_plain(NAME(cudaProfilerStop), r);

    /* Teardown after the recorded sequence; the stream is synchronized already. */
    if (exec)
        CHECK(cudaGraphExecDestroy(exec));
    if (graph)
        CHECK(cudaGraphDestroy(graph));
    if (ev)
        CHECK(cudaEventDestroy(ev));
    if (s)
        CHECK(cudaStreamDestroy(s));
    free(h_src);

    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "[%s\n]\n", json) < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 2;
    }
    if (nfailed)
        fprintf(stderr, "calls_all: %d of the %d recorded calls failed (see \"ret\")\n", nfailed, ncalls);
    check_summary();
    printf("calls_all: %d calls written to %s\n", ncalls, argv[1]);
    return 0;
}
