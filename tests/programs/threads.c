/*
 * threads.c — many threads launching at once, to test stepprof's per-thread buffers and its thread
 * metadata under contention (no lock on the hot path, no lost or torn records, one thread_name per
 * thread in the trace).
 *
 * N threads (argv[1], default 8) each make M cudaLaunchKernel calls (argv[2], default 10000) on the
 * default stream with grid 1 and block 32; a barrier releases them together so the launches overlap.
 * Each thread is named `launcher-<i>` (pthread_setname_np) so the trace's thread names can be checked.
 *
 * Stdout: `threads N launches_per_thread M`, then `total_launches N*M`. Exit 0, also when the launches
 * fail (one warning line with the failure count on stderr); 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define PROG "threads"
#include "cuda_check.h"

/* The kernel stand-in: only its address is used (see train_c.c). */
volatile int threads_kernel_mark;
void threads_kernel(void) { threads_kernel_mark = 1; }

static pthread_barrier_t start_line;
static long per_thread;

struct worker {
    pthread_t tid;
    int index;
    long launched, failed;
};

static void *launcher(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "launcher-%d", w->index);
    pthread_setname_np(pthread_self(), name);
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    pthread_barrier_wait(&start_line);
    for (long i = 0; i < per_thread; i++) {
        if (cudaLaunchKernel((const void *)threads_kernel, grid, block, NULL, 0, 0) != cudaSuccess)
            w->failed++;
        w->launched++;
    }
    return NULL;
}

static long arg_count(int argc, char **argv, int i, long dflt)
{
    if (argc <= i)
        return dflt;
    char *end;
    long v = strtol(argv[i], &end, 10);
    return (*end || v < 1) ? -1 : v;
}

int main(int argc, char **argv)
{
    long nthreads = arg_count(argc, argv, 1, 8);
    per_thread = arg_count(argc, argv, 2, 10000);
    if (nthreads < 1 || nthreads > 4096 || per_thread < 1) {
        fprintf(stderr, "usage: threads [THREADS (default 8)] [LAUNCHES_PER_THREAD (default 10000)]\n");
        return 2;
    }
    struct worker *workers = calloc(nthreads, sizeof *workers);
    if (!workers || pthread_barrier_init(&start_line, NULL, (unsigned)nthreads)) {
        fprintf(stderr, "threads: setup failed\n");
        return 2;
    }
    for (long i = 0; i < nthreads; i++) {
        workers[i].index = (int)i;
        if (pthread_create(&workers[i].tid, NULL, launcher, &workers[i])) {
            fprintf(stderr, "threads: pthread_create failed\n");
            return 2;
        }
    }
    long total = 0, failed = 0;
    for (long i = 0; i < nthreads; i++) {
        pthread_join(workers[i].tid, NULL);
        total += workers[i].launched;
        failed += workers[i].failed;
    }
    CHECK(cudaDeviceSynchronize());
    pthread_barrier_destroy(&start_line);
    free(workers);
    if (failed)
        fprintf(stderr, "threads: warning: %ld of %ld launches failed\n", failed, total);
    check_summary();
    printf("threads %ld launches_per_thread %ld\n", nthreads, per_thread);
    printf("total_launches %ld\n", total);
    return 0;
}
