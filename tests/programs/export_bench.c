/*
 * export_bench.c — one recorded window of a chosen size, for `make bench`'s export benchmark
 * (scripts/bench_export.py) and tests/test_scale.py.
 *
 * Usage: export_bench LAUNCHES [DISTINCT_RANGE_NAMES [LAUNCHES_PER_RANGE]]
 * Registers 4096 kernels the way nvcc's constructors do (__cudaRegisterFatBinary +
 * __cudaRegisterFunction, distinct mangled names), then: NVTX range "step" (the marker; stepprof
 * is run with nvtx:step, wait 0, warmup 1, active 1, repeat 1: a first empty "step" is the warmup), LAUNCHES cudaLaunchKernel calls
 * cycling through the kernels, one NVTX range per 8 launches (LAUNCHES_PER_RANGE; named
 * "layer_<i mod 16>", or with DISTINCT_RANGE_NAMES > 0 "range_<i mod DISTINCT_RANGE_NAMES>"), a cudaMalloc/cudaFree pair per
 * 1024 launches; then the push of the next "step", which closes the window, timed.
 * Stdout: `launches N`, `ranges N`, `rss_before_close_kb N` (read once it holds still for 10 ms), `close_stall_ns N`,
 * `close_realtime_ns N` (CLOCK_REALTIME at the close), `cpu_before_close_ns N` (the process's CPU
 * time before the close: what the export costs in CPU is the rest), then it returns from main (stepprof exports
 * the window before the process ends). Exit 0; 2 on bad usage. Linked with libstdc++, as nvcc's
 * programs are (scale.mk).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

enum { KERNELS = 4096 };

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

/* Host stubs: only their addresses are used, one byte each. */
static char stubs[KERNELS];
static char mangled[KERNELS][32];
static int fake_fatbin[4];

static long now_ns(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long launches = argc > 1 ? strtol(argv[1], &end, 10) : -1;
    long distinct = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    long per_range = argc > 3 ? strtol(argv[3], NULL, 10) : 8;
    if (launches < 1 || (end && *end) || distinct < 0 || per_range < 1) {
        fprintf(stderr, "usage: export_bench LAUNCHES [DISTINCT_RANGE_NAMES [LAUNCHES_PER_RANGE]]\n");
        return 2;
    }
    void **h = __cudaRegisterFatBinary(fake_fatbin);
    for (int i = 0; i < KERNELS; i++) {
        snprintf(mangled[i], sizeof mangled[i], "_Z11kernel_%04dPfi", i);
        __cudaRegisterFunction(h, &stubs[i], mangled[i], mangled[i], -1, NULL, NULL, NULL, NULL, NULL);
    }
    __cudaRegisterFatBinaryEnd(h);
    cudaSetDevice(0); /* the first runtime call: NVTX is seen from there on */
    dim3 grid = {64, 1, 1}, block = {256, 1, 1};
    char name[32];
    long ranges = 0;
    nvtxRangePushA("step"); /* step 0: warmup */
    nvtxRangePop();
    nvtxRangePushA("step"); /* step 1: recorded */
    for (long i = 0; i < launches; i++) {
        if (i % per_range == 0) {
            if (i)
                nvtxRangePop();
            if (distinct)
                snprintf(name, sizeof name, "range_%ld", (i / per_range) % distinct);
            else
                snprintf(name, sizeof name, "layer_%ld", (i / per_range) % 16);
            nvtxRangePushA(name);
            ranges++;
        }
        cudaLaunchKernel(&stubs[i % KERNELS], grid, block, NULL, 0, 0);
        if (i % 1024 == 1023) {
            void *p = NULL;
            if (cudaMalloc(&p, 4096) == cudaSuccess)
                cudaFree(p);
        }
    }
    nvtxRangePop();
    nvtxRangePop();
    /* The event pool's prefault helper may still be populating its lead (up to 64 MiB in front of
     * the last record): wait until the RSS holds still, so that what the recording populated is not
     * counted as the export's (it moved the 1M-launch row's figure by up to 15 B/event). */
    long rss = rss_kb();
    for (int i = 0; i < 100; i++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        long again = rss_kb();
        if (again == rss)
            break;
        rss = again;
    }
    long cpu = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    long t0 = now_ns(CLOCK_MONOTONIC);
    nvtxRangePushA("step");
    long stall = now_ns(CLOCK_MONOTONIC) - t0;
    long real = now_ns(CLOCK_REALTIME);
    nvtxRangePop();
    printf("launches %ld\nranges %ld\nrss_before_close_kb %ld\nclose_stall_ns %ld\nclose_realtime_ns %ld\n"
           "cpu_before_close_ns %ld\n", launches, ranges, rss, stall, real, cpu);
    return 0;
}
