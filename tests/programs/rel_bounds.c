/*
 * rel_bounds.c — target of tests/test_reliability_bounds.py (issue 14 items 2, 3, 5, 6): what
 * stepprof keeps must stay bounded and well-formed, and its config reading must not touch the
 * program's input. Usage: rel_bounds MODE [N]
 *   stdin   one CUDA call, then reads all of stdin; stdout `read N bytes: <first 32 bytes>`.
 *   names   one CUDA call, then N steps (default 3), each an NVTX range `step\xff\xfe` (invalid UTF-8) around a kernel
 *           launch and a cudaDeviceSynchronize (a blocking call); stdout `names done`.
 *   early   pushes NVTX range `early_outer` and starts `early_started` before any CUDA call, sleeps
 *           20 ms, then 4 kernel launches inside `inner`, sleeps 5 ms, then ends both;
 *           stdout `early done`.
 *   closed  before any CUDA call: pushes `pre_outer`, inside it `pre_inner` with mark `pre_mark`,
 *           pops both, and a second thread pushes/pops `pre_thread` (joined); sleeps 10 ms, then
 *           4 kernel launches; stdout `closed done`. With N, first N marks `pre_many`.
 *   threads N steps (range + 4 launches each) on each of 4 threads, which exit (joined) before
 *           main's one cudaDeviceSynchronize; stdout `launches <4*4*N>`.
 *   steps   N steps (default 1000): NVTX `train_step` around 4 kernel launches on the default
 *           stream; stdout the launches made, then `VmHWM <kB>` and `VmRSS <kB>` of this process.
 * Exit 0 (2 on bad usage). CUDA failures only warn (cuda_check.h).
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "rel_bounds"
#include "cuda_check.h"

/* Kernel stand-ins: only their addresses are used (see train_c.c). */
volatile int rel_bounds_mark;
void rel_bounds_kernel(void) { rel_bounds_mark = 1; }

static void launch(void)
{
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    CHECK(cudaLaunchKernel((const void *)rel_bounds_kernel, grid, block, NULL, 0, 0));
}

static void print_mem(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0 || strncmp(line, "VmRSS:", 6) == 0)
            printf("%.5s %ld\n", line, strtol(line + 6, NULL, 10));
    if (f)
        fclose(f);
}

static void *pre_thread(void *arg)
{
    (void)arg;
    nvtxRangePushA("pre_thread");
    usleep(1000);
    nvtxRangePop();
    return NULL;
}

static void *step_thread(void *arg)
{
    long n = *(const long *)arg;
    for (long i = 0; i < n; i++) {
        nvtxRangePushA("thread_step");
        for (int j = 0; j < 4; j++)
            launch();
        nvtxRangePop();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    if (strcmp(mode, "stdin") == 0) {
        CHECK(cudaDeviceSynchronize());
        char buf[65536];
        size_t got = 0, k;
        char head[33] = "";
        while ((k = fread(buf, 1, sizeof buf, stdin)) > 0) {
            if (got < 32)
                memcpy(head + got, buf, got + k < 32 ? k : 32 - got);
            got += k;
        }
        head[got < 32 ? got : 32] = 0;
        printf("read %zu bytes: %s\n", got, head);
    } else if (strcmp(mode, "names") == 0) {
        CHECK(cudaDeviceSynchronize()); /* stepprof starts at the first CUDA call */
        for (long i = 0; i < (n ? n : 3); i++) {
            nvtxRangePushA("step\xff\xfe");
            launch();
            CHECK(cudaDeviceSynchronize());
            nvtxRangePop();
        }
        printf("names done\n");
    } else if (strcmp(mode, "early") == 0) {
        nvtxRangePushA("early_outer");
        nvtxRangeId_t id = nvtxRangeStartA("early_started");
        usleep(20000); /* the ranges' true start is 20 ms before stepprof starts */
        nvtxRangePushA("inner");
        for (int i = 0; i < 4; i++)
            launch();
        CHECK(cudaDeviceSynchronize());
        nvtxRangePop();
        usleep(5000);
        nvtxRangeEnd(id);
        nvtxRangePop();
        printf("early done\n");
    } else if (strcmp(mode, "closed") == 0) {
        for (long i = 0; i < n; i++)
            nvtxMarkA("pre_many");
        nvtxRangePushA("pre_outer");
        usleep(1000);
        nvtxRangePushA("pre_inner");
        nvtxMarkA("pre_mark");
        usleep(1000);
        nvtxRangePop();
        usleep(1000);
        nvtxRangePop();
        pthread_t th;
        if (pthread_create(&th, NULL, pre_thread, NULL) == 0)
            pthread_join(th, NULL);
        usleep(10000); /* the ranges ended 10 ms before stepprof starts */
        for (int i = 0; i < 4; i++)
            launch();
        CHECK(cudaDeviceSynchronize());
        printf("closed done\n");
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t th[4];
        int made = 0;
        for (int i = 0; i < 4; i++)
            made += pthread_create(&th[made], NULL, step_thread, &n) == 0;
        for (int i = 0; i < made; i++)
            pthread_join(th[i], NULL);
        CHECK(cudaDeviceSynchronize());
        printf("launches %ld\n", 16 * n * made / 4);
    } else if (strcmp(mode, "steps") == 0) {
        long launches = 0;
        for (long i = 0; i < (n ? n : 1000); i++) {
            nvtxRangePushA("train_step");
            for (int j = 0; j < 4; j++, launches++)
                launch();
            nvtxRangePop();
        }
        CHECK(cudaDeviceSynchronize());
        printf("launches %ld\n", launches);
        print_mem();
    } else {
        fprintf(stderr, "usage: rel_bounds stdin|names|early|closed|threads|steps [N]\n");
        return 2;
    }
    check_summary();
    return 0;
}
