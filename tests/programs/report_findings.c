/*
 * report_findings.c — one small training loop per step-summary finding, chosen by MODE, so each
 * rule of exporters/summary_rules.c can be shown to fire alone (and a well-behaved loop to fire
 * none). Every step is an NVTX range "step" holding three kernel launches on a created stream and
 * an async host-to-device copy from pinned memory, then a host pause of 1 ms (input preparation);
 * the modes change one thing:
 *
 *   good       nothing else: no synchronization, pinned copies, GPU work queued ahead
 *   sync       cudaStreamSynchronize at the end of every step
 *   d2h        a synchronous cudaMemcpy device-to-host of 4 bytes every step (reading the loss)
 *   pageable   the host-to-device copy comes from malloc'ed (pageable) memory
 *   idle       one kernel per step and a 5 ms host pause: the GPU waits for the host
 *   tiny       100 launches per step and no pause (meant for short kernels: FAKECUDA_KERNEL_NS=5000)
 *   variance   step 3 pauses 30 ms instead of 1 ms
 *   flood      20000 cudaMemsetAsync calls per step and a 20 ms pause (overflows a small buffer)
 *
 * Usage: report_findings MODE [STEPS]   (STEPS else $STEPS, else 8). Stdout: `done`. Exit 0; 2 on
 * a bad MODE. A cudaDeviceSynchronize after the loop drains the queued work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "report_findings"
#include "cuda_check.h"

volatile int marks[3];
void kernel_a(void) { marks[0] = 1; }
void kernel_b(void) { marks[1] = 2; }
void kernel_c(void) { marks[2] = 3; }
static void (*const kernels[3])(void) = {kernel_a, kernel_b, kernel_c};

enum { BYTES = 1 << 16 };

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void launch(int k, cudaStream_t s)
{
    dim3 g = {32, 1, 1}, b = {128, 1, 1};
    CHECK(cudaLaunchKernel((const void *)kernels[k % 3], g, b, NULL, 0, s));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    static const char *const modes[] = {"good", "sync", "d2h", "pageable", "idle", "tiny", "variance", "flood"};
    int known = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        known |= strcmp(mode, modes[i]) == 0;
    long steps = parse_steps(argc - 1, argv + 1, 8);
    if (!known || steps < 0) {
        fprintf(stderr, "usage: report_findings good|sync|d2h|pageable|idle|tiny|variance|flood [STEPS]\n");
        return 2;
    }
    cudaStream_t s = NULL;
    CHECK(cudaStreamCreate(&s));
    void *pinned = NULL, *dev = NULL, *pageable = calloc(1, BYTES);
    CHECK(cudaMallocHost(&pinned, BYTES));
    CHECK(cudaMalloc(&dev, BYTES));
    void *host = strcmp(mode, "pageable") == 0 || !pinned ? pageable : pinned;
    for (long i = 0; i < steps; i++) {
        nvtxRangePushA("step");
        CHECK(cudaMemcpyAsync(dev, host, BYTES, cudaMemcpyHostToDevice, s));
        int n = strcmp(mode, "idle") == 0 ? 1 : strcmp(mode, "tiny") == 0 ? 100 : 3;
        for (int k = 0; k < n; k++)
            launch(k, s);
        if (strcmp(mode, "flood") == 0)
            for (int k = 0; k < 20000; k++)
                CHECK(cudaMemsetAsync(dev, 0, 4, s));
        if (strcmp(mode, "d2h") == 0)
            CHECK(cudaMemcpy(pinned ? pinned : pageable, dev, 4, cudaMemcpyDeviceToHost));
        if (strcmp(mode, "sync") == 0)
            CHECK(cudaStreamSynchronize(s));
        long ms = strcmp(mode, "idle") == 0 ? 5 : strcmp(mode, "flood") == 0 ? 20 : strcmp(mode, "tiny") == 0 ? 0 : 1;
        if (strcmp(mode, "variance") == 0 && i == 3)
            ms = 30;
        if (ms)
            pause_ms(ms);
        nvtxRangePop();
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(dev));
    if (pinned)
        CHECK(cudaFreeHost(pinned));
    free(pageable);
    check_summary();
    printf("done\n");
    return 0;
}
