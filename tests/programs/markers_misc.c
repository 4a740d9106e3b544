/*
 * markers_misc.c — one target program for the step markers that need a program written for them:
 *   markers_misc nvtx-domain  — each step is an NVTX domain range "step" in domain "trainer", opened
 *                               with a registered string (nvtxDomainRegisterStringA +
 *                               nvtxDomainRangePushEx); also default-domain "step" push/pop ranges
 *                               (which must NOT match nvtx:step@trainer), a mark and a start/end range.
 *   markers_misc profiler     — cudaProfilerStart before step 3 and cudaProfilerStop after step 5,
 *                               again around steps 8..9 (two capture ranges, as nsys sees them).
 *   markers_misc signal       — like nvtx-domain but default-domain "train_step" ranges and a
 *                               STEP_SLEEP_MS (default 30) sleep at the start of each step, after
 *                               printing "step N" (flushed), so a signal a test sends on reading that
 *                               line arrives before step N's first call.
 *   markers_misc graph        — a CUDA graph of three kernel nodes (a, b, a), launched once per step:
 *                               its kernels must appear one by one, attributed to cudaGraphLaunch.
 *   markers_misc names        — NVTX ranges and a thread name with characters JSON must escape or
 *                               a trace must rewrite: quote, backslash, tab, newline, \x01, invalid
 *                               UTF-8 (\xff) and valid UTF-8 (U+00E9).
 *   markers_misc late-name    — step_kernel_a (named from the symbol table at first) is registered as
 *                               "late_kernel()" (__cudaRegisterFunction, as a module's constructor
 *                               would) before step STEPS/2: a kernel: marker on that name must see it.
 * Every step: 2 cudaLaunchKernel (step_kernel_a, step_kernel_b) and one cudaMemcpy HtoD of 4096
 * bytes. STEPS env (default 12). Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <cuda_profiler_api.h>
#include <string.h>
#include <time.h>

#define PROG "markers_misc"
#include "cuda_check.h"

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

static volatile int sink;
void step_kernel_a(void) { sink = 1; }
void step_kernel_b(void) { sink = 2; }

static void step_work(float *dev, float *host)
{
    dim3 g = {4, 1, 1}, b = {128, 1, 1};
    CHECK(cudaLaunchKernel((const void *)step_kernel_a, g, b, NULL, 0, 0));
    CHECK(cudaLaunchKernel((const void *)step_kernel_b, g, b, NULL, 0, 0));
    CHECK(cudaMemcpy(dev, host, 4096, cudaMemcpyHostToDevice));
}

/* Three kernel nodes a, b, a; NULL when graphs are not available. */
static cudaGraphExec_t make_graph(void)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    if (CHECK(cudaGraphCreate(&g, 0)) != cudaSuccess)
        return NULL;
    void (*fns[3])(void) = {step_kernel_a, step_kernel_b, step_kernel_a};
    cudaGraphNode_t prev = NULL;
    for (int i = 0; i < 3; i++) {
        struct cudaKernelNodeParams p;
        memset(&p, 0, sizeof p);
        p.func = (void *)fns[i];
        p.gridDim = (dim3){2, 1, 1};
        p.blockDim = (dim3){64, 1, 1};
        cudaGraphNode_t node;
        if (CHECK(cudaGraphAddKernelNode(&node, g, prev ? &prev : NULL, prev ? 1 : 0, &p)) != cudaSuccess)
            return NULL;
        prev = node;
    }
    if (CHECK(cudaGraphInstantiate(&exec, g, 0)) != cudaSuccess)
        exec = NULL;
    return exec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "nvtx-domain";
    long steps = parse_steps(1, argv, 12);
    const char *sl = getenv("STEP_SLEEP_MS");
    long sleep = sl ? atol(sl) : 30;
    static float host[1024];
    float *dev = NULL;
    if (CHECK(cudaMalloc((void **)&dev, 4096)) != cudaSuccess)
        dev = NULL;
    nvtxDomainHandle_t dom = nvtxDomainCreateA("trainer");
    nvtxStringHandle_t step_name = nvtxDomainRegisterStringA(dom, "step");
    cudaGraphExec_t graph = strcmp(mode, "graph") == 0 ? make_graph() : NULL;
    if (strcmp(mode, "names") == 0)
        pthread_setname_np(pthread_self(), "q\"b\\t\tx");
    for (long i = 0; i < steps; i++) {
        if (strcmp(mode, "late-name") == 0 && i == steps / 2) {
            static int image[4];
            static char late[] = "_Z11late_kernelv";
            void **h = __cudaRegisterFatBinary(image);
            __cudaRegisterFunction(h, (const char *)step_kernel_a, late, late, -1, NULL, NULL, NULL, NULL, NULL);
            __cudaRegisterFatBinaryEnd(h);
        }
        if (strcmp(mode, "graph") == 0) {
            nvtxRangePushA("train_step");
            if (graph)
                CHECK(cudaGraphLaunch(graph, 0));
            CHECK(cudaDeviceSynchronize());
            nvtxRangePop();
        } else if (strcmp(mode, "names") == 0) {
            nvtxRangePushA("train_step");
            nvtxRangePushA("quote\" back\\slash tab\t nl\n ctrl\x01 bad\xff e\xc3\xa9");
            step_work(dev, host);
            nvtxRangePop();
            nvtxRangePop();
        } else if (strcmp(mode, "profiler") == 0) {
            if (i == 3 || i == 8)
                CHECK(cudaProfilerStart());
            step_work(dev, host);
            if (i == 5 || i == 9)
                CHECK(cudaProfilerStop());
        } else if (strcmp(mode, "signal") == 0) {
            /* Sleep first: a signal sent on reading "step N" lands before step N's
             * first call, so the tests know exactly which step it arms. */
            printf("step %ld\n", i);
            fflush(stdout);
            sleep_ms(sleep);
            nvtxRangePushA("train_step");
            step_work(dev, host);
            nvtxRangePop();
        } else {
            nvtxEventAttributes_t a;
            memset(&a, 0, sizeof a);
            a.version = NVTX_VERSION;
            a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
            a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
            a.message.registered = step_name;
            nvtxDomainRangePushEx(dom, &a);
            nvtxRangePushA("step"); /* default domain: not the marker */
            nvtxRangeId_t r = nvtxRangeStartA("io");
            step_work(dev, host);
            nvtxRangeEnd(r);
            nvtxMarkA("checkpoint");
            nvtxRangePop();
            nvtxDomainRangePop(dom);
        }
    }
    nvtxDomainDestroy(dom);
    CHECK(cudaFree(dev));
    check_summary();
    printf("done\n");
    return 0;
}
