/*
 * rel_threads.c — threads created during a recorded cycle, launching all at once and exiting
 * before the cycle ends, for tests/test_reliability.py. Run with PROF_MARKER=cudaProfilerApi.
 *
 * Usage: rel_threads [THREADS (default 32)] [LAUNCHES (default 2000)]
 * main makes one cudaLaunchKernel (activation happens outside the cycle), calls
 * cudaProfilerStart, then creates THREADS threads that wait at a barrier and each make LAUNCHES
 * cudaLaunchKernel(thread_kernel) calls; every thread has exited (joined) before main calls
 * cudaProfilerStop. Stdout: "threads N launches_per_thread M", "total_launches N*M".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#define PROG "rel_threads"
#include "cuda_check.h"

volatile int rel_threads_mark;
void thread_kernel(void) { rel_threads_mark = 1; }

static pthread_barrier_t start_line;
static long per_thread;

static void *launcher(void *arg)
{
    (void)arg;
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    pthread_barrier_wait(&start_line);
    for (long i = 0; i < per_thread; i++)
        CHECK(cudaLaunchKernel((const void *)thread_kernel, g, b, NULL, 0, 0));
    return NULL;
}

int main(int argc, char **argv)
{
    long nthreads = argc > 1 ? atol(argv[1]) : 32;
    per_thread = argc > 2 ? atol(argv[2]) : 2000;
    if (nthreads < 1 || nthreads > 1024 || per_thread < 1)
        return 2;
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    pthread_barrier_init(&start_line, NULL, (unsigned)nthreads);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaProfilerStart());
    for (long i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, launcher, NULL);
    for (long i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    CHECK(cudaProfilerStop());
    free(th);
    check_summary();
    printf("threads %ld launches_per_thread %ld\n", nthreads, per_thread);
    printf("total_launches %ld\n", nthreads * per_thread);
    return 0;
}
