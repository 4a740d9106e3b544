/*
 * nvtx_bench.c — measures one nvtxRangePushA + nvtxRangePop pair, for `make bench` (issue 10 item 4:
 * <= 60 ns per pair whatever the number of distinct names, no global lock on the program's thread).
 *
 * Usage: nvtx_bench PAIRS DISTINCT. It makes one CUDA call first (stepprof stays inert until then),
 * builds DISTINCT names "range_<i>" (untimed), makes 10000 warm-up pairs with one name, then times
 * PAIRS pairs cycling through the names (so with DISTINCT >= PAIRS every push brings a new string),
 * with CLOCK_MONOTONIC. Stdout: `ns_per_pair <float>`, then `cpu_pair_ns <float>`: the same from the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID: time the thread was not running, on a shared machine,
 * left out; page faults kept in). Exit 0; 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

static double now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    char *end1 = NULL, *end2 = NULL;
    long pairs = argc == 3 ? strtol(argv[1], &end1, 10) : 0;
    long distinct = argc == 3 ? strtol(argv[2], &end2, 10) : 0;
    if (argc != 3 || *end1 || *end2 || pairs < 1 || distinct < 1) {
        fprintf(stderr, "usage: nvtx_bench PAIRS DISTINCT\n");
        return 2;
    }
    int devices = 0;
    (void)cudaGetDeviceCount(&devices);   /* the first CUDA call: stepprof activates here */
    char **names = malloc((size_t)distinct * sizeof *names);
    if (!names)
        return 1;
    for (long i = 0; i < distinct; i++) {
        names[i] = malloc(32);
        if (!names[i])
            return 1;
        snprintf(names[i], 32, "range_%ld", i);
    }
    for (int i = 0; i < 10000; i++) {
        nvtxRangePushA("warm");
        nvtxRangePop();
    }
    double t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < pairs; i++) {
        nvtxRangePushA(names[i % distinct]);
        nvtxRangePop();
    }
    double t1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    printf("ns_per_pair %.2f\ncpu_pair_ns %.2f\n", (t1 - t0) / (double)pairs, (c1 - c0) / (double)pairs);
    return 0;
}
