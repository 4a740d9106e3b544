/*
 * markers_misc.c — one target program for the step markers that need a program written for them:
 *   markers_misc nvtx-domain  — each step is an NVTX domain range "step" in domain "trainer", opened
 *                               with a registered string (nvtxDomainRegisterStringA +
 *                               nvtxDomainRangePushEx); also default-domain "step" push/pop ranges
 *                               (which must NOT match nvtx:step@trainer), a mark and a start/end range.
 *   markers_misc profiler     — cudaProfilerStart before step 3 and cudaProfilerStop after step 5,
 *                               again around steps 8..9 (two capture ranges, as nsys sees them).
 *   markers_misc signal       — like nvtx-domain but default-domain "train_step" ranges and a
 *                               STEP_SLEEP_MS (default 30) sleep per step, so a test can send a signal
 *                               to the running process; prints "step N" (flushed) at each step start.
 * Every step: 2 cudaLaunchKernel (step_kernel_a, step_kernel_b) and one cudaMemcpy HtoD of 4096
 * bytes. STEPS env (default 12). Prints "done" and exits 0.
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <cuda_profiler_api.h>
#include <string.h>
#include <time.h>

#define PROG "markers_misc"
#include "cuda_check.h"

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
    for (long i = 0; i < steps; i++) {
        if (strcmp(mode, "profiler") == 0) {
            if (i == 3 || i == 8)
                CHECK(cudaProfilerStart());
            step_work(dev, host);
            if (i == 5 || i == 9)
                CHECK(cudaProfilerStop());
        } else if (strcmp(mode, "signal") == 0) {
            printf("step %ld\n", i);
            fflush(stdout);
            nvtxRangePushA("train_step");
            step_work(dev, host);
            sleep_ms(sleep);
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
