/*
 * rel_fork.c — a DataLoader-like parent for tests/test_reliability.py: it uses CUDA, and forks
 * (without exec) worker children while its own launcher threads are recording — so stepprof's
 * locks may be held at the fork — and while one of those threads holds a lock of the program.
 *
 * Usage: rel_fork [CPU_CHILDREN (default 8)] [THREADS (default 4)] [LAUNCHES (default 2000)]
 *   parent: LAUNCHES launches of parent_kernel; then THREADS threads launching parent_kernel
 *           LAUNCHES times each (one holds `program_lock` meanwhile); during that, CPU_CHILDREN
 *           children that compute a checksum and end with _exit(0) (even ones) or exit(0) (odd
 *           ones), then two CUDA children; then LAUNCHES more launches; waits for every child.
 *   CUDA children: LAUNCHES launches of child_kernel; the first ends with exit(0), the second
 *           with _exit(0) (what Python's os._exit in a worker does).
 * Stdout: "cpu PID" / "cuda PID" per child, then "parent PID launches N" (N = the parent's
 * launches, all threads) and "done". Exit 0 when every child exited 0, else 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define PROG "rel_fork"
#include "cuda_check.h"

volatile int rel_fork_marks[2];
void parent_kernel(void) { rel_fork_marks[0] = 1; }
void child_kernel(void) { rel_fork_marks[1] = 1; }

static pthread_mutex_t program_lock = PTHREAD_MUTEX_INITIALIZER;
static long per_thread;

static void launch(void (*k)(void), long n)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    for (long i = 0; i < n; i++)
        CHECK(cudaLaunchKernel((const void *)k, g, b, NULL, 0, 0));
}

static void *launcher(void *arg)
{
    long index = (long)arg;
    if (index == 0)
        pthread_mutex_lock(&program_lock); /* held across the forks below */
    launch(parent_kernel, per_thread);
    if (index == 0)
        pthread_mutex_unlock(&program_lock);
    return NULL;
}

int main(int argc, char **argv)
{
    long cpu_children = argc > 1 ? atol(argv[1]) : 8, nthreads = argc > 2 ? atol(argv[2]) : 4;
    long n = argc > 3 ? atol(argv[3]) : 2000;
    per_thread = n;
    setvbuf(stdout, NULL, _IOLBF, 0);
    launch(parent_kernel, n);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    for (long i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, launcher, (void *)i);
    pid_t kids[64];
    int nkids = 0;
    for (long i = 0; i < cpu_children && nkids < 62; i++) {
        pid_t p = fork();
        if (p == 0) {
            volatile unsigned long sum = 0;
            for (unsigned long k = 0; k < 2000000; k++)
                sum += k * k;
            if (i % 2)
                exit(0);
            _exit(0);
        }
        printf("cpu %d\n", (int)p);
        kids[nkids++] = p;
    }
    for (int c = 0; c < 2; c++) {
        pid_t p = fork();
        if (p == 0) {
            launch(child_kernel, n);
            CHECK(cudaDeviceSynchronize());
            if (c == 0)
                exit(0);
            _exit(0);
        }
        printf("cuda %d\n", (int)p);
        kids[nkids++] = p;
    }
    for (long i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    launch(parent_kernel, n);
    CHECK(cudaDeviceSynchronize());
    int bad = 0;
    for (int i = 0; i < nkids; i++) {
        int st = 0;
        if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rel_fork: child %d ended with status 0x%x\n", (int)kids[i], st);
            bad = 1;
        }
    }
    free(th);
    check_summary();
    printf("parent %d launches %ld\n", (int)getpid(), n * (2 + nthreads));
    printf("done\n");
    return bad;
}
