/*
 * rel_ends.c — every way a process can end, in the middle of a recorded cycle, for
 * tests/test_reliability.py. Run with PROF_MARKER=cudaProfilerApi PROF_REPEAT=0 so that each
 * cudaProfilerStart..cudaProfilerStop pair is one cycle.
 *
 * Usage: rel_ends MODE [CYCLES (default 2)] [LAUNCHES (default 50)]
 * It runs CYCLES complete cycles of LAUNCHES cudaLaunchKernel(rel_kernel) each, printing
 * "cycle N done" (flushed) after each, then starts one more cycle, makes LAUNCHES launches, prints
 * "in cycle" and ends as MODE says:
 *   return       return 0 from main              exit-thread  another thread calls exit(5)
 *   _exit        _exit(6)                         abort        abort()
 *   segv         writes through a null pointer    devreset     cudaDeviceReset(), then return 0
 *   wait         sleeps until a signal ends it (exit 99 after 30 s): the test sends the signal
 *   handler-before / handler-after
 *                installs a SIGTERM handler before the first CUDA call / after the first cycle;
 *                the handler sets a flag, main prints "handled" and returns 3; else like wait
 *   ignore-int   SIGINT is SIG_IGN from the start; after "in cycle" it sleeps 300 ms, ends the
 *                cycle with cudaProfilerStop and returns 0
 *   blocked-thread  a thread that blocks every signal sleeps throughout (as a library's worker
 *                does); after "in cycle" main ends the cycle, sleeps 300 ms and returns 0
 * REL_FIRST_LAUNCHES (env), when set, is the number of launches of cycle 0 only (a cycle whose
 * trace is much bigger than the others).
 * Exit codes: as above; 2 on a bad MODE.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#define PROG "rel_ends"
#include "cuda_check.h"

volatile int rel_kernel_mark;
void rel_kernel(void) { rel_kernel_mark = 1; }

static volatile sig_atomic_t got_term;
static void on_term(int sig) { (void)sig; got_term = 1; }

static void launches(long n)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    for (long i = 0; i < n; i++)
        CHECK(cudaLaunchKernel((const void *)rel_kernel, g, b, NULL, 0, 0));
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *exit_from_thread(void *arg)
{
    (void)arg;
    sleep_ms(20);
    exit(5);
}

static void *blocked_sleeper(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;)
        sleep_ms(1000);
    return NULL;
}

static void handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
}

/* Sleeps until a signal ends the process, or until the program's own handler ran. */
static int wait_for_signal(void)
{
    for (int i = 0; i < 3000 && !got_term; i++)
        sleep_ms(10);
    if (got_term) {
        printf("handled\n");
        return 3;
    }
    return 99;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "return";
    long cycles = argc > 2 ? atol(argv[2]) : 2, n = argc > 3 ? atol(argv[3]) : 50;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "handler-before"))
        handler();
    if (!strcmp(mode, "ignore-int"))
        signal(SIGINT, SIG_IGN);
    if (!strcmp(mode, "blocked-thread")) {
        pthread_t th;
        pthread_create(&th, NULL, blocked_sleeper, NULL);
    }
    const char *first = getenv("REL_FIRST_LAUNCHES");
    for (long c = 0; c < cycles; c++) {
        CHECK(cudaProfilerStart());
        launches(c == 0 && first ? atol(first) : n);
        CHECK(cudaProfilerStop());
        printf("cycle %ld done\n", c);
        if (c == 0 && !strcmp(mode, "handler-after"))
            handler();
    }
    CHECK(cudaProfilerStart());
    launches(n);
    printf("in cycle\n");
    if (!strcmp(mode, "return"))
        return 0;
    if (!strcmp(mode, "_exit"))
        _exit(6);
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "segv")) {
        volatile int *volatile p = NULL;
        *p = 1;
    }
    if (!strcmp(mode, "devreset")) {
        CHECK(cudaDeviceReset());
        return 0;
    }
    if (!strcmp(mode, "exit-thread")) {
        pthread_t th;
        pthread_create(&th, NULL, exit_from_thread, NULL);
        for (;;) { /* still inside the cycle when the other thread exits */
            launches(1);
            sleep_ms(1);
        }
    }
    if (!strcmp(mode, "wait") || !strncmp(mode, "handler-", 8))
        return wait_for_signal();
    if (!strcmp(mode, "ignore-int")) {
        sleep_ms(300);
        CHECK(cudaProfilerStop());
        return 0;
    }
    if (!strcmp(mode, "blocked-thread")) {
        CHECK(cudaProfilerStop());
        sleep_ms(300);
        return 0;
    }
    fprintf(stderr, "rel_ends: unknown mode %s\n", mode);
    return 2;
}
