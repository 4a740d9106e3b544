/*
 * mem_bench.c — measures one cudaMalloc + cudaFree pair, to put a number on what profile_memory adds
 * to allocation calls: run it bare and preloaded, with and without PROF_PROFILE_MEMORY, and compare.
 *
 * Usage: mem_bench [PAIRS]   (default 1000000). It first makes 10000 untimed pairs (lazy binding,
 * runtime and stepprof start-up), then PAIRS pairs of 256 bytes in a tight loop, timed with
 * CLOCK_MONOTONIC; 64 blocks stay live throughout (the first 64 frees are of NULL). Stdout: exactly
 * one line, `ns_per_pair <float>`. Exit 0; 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

enum { LIVE = 64 };
static void *live[LIVE];

/* Each pair frees the oldest of LIVE blocks and allocates its successor, so
 * the live map holds a steady population, as under a caching allocator. */
static long run(long pairs)
{
    long failed = 0;
    for (long i = 0; i < pairs; i++) {
        void **slot = &live[i % LIVE];
        failed += cudaFree(*slot) != cudaSuccess;
        *slot = NULL;
        failed += cudaMalloc(slot, 256) != cudaSuccess;
    }
    return failed;
}

int main(int argc, char **argv)
{
    long pairs = 1000000;
    if (argc > 1) {
        char *end;
        pairs = strtol(argv[1], &end, 10);
        if (*end || pairs < 1) {
            fprintf(stderr, "usage: mem_bench [PAIRS (default 1000000)]\n");
            return 2;
        }
    }
    run(10000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long failed = run(pairs);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    if (failed)
        fprintf(stderr, "mem_bench: warning: %ld of %ld timed calls failed\n", failed, 2 * pairs);
    printf("ns_per_pair %.3f\n", ns / (double)pairs);
    return 0;
}
