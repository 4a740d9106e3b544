/*
 * rel_sigcuda.c — a program whose signal handler calls CUDA while the interrupted thread is often
 * inside a stepprof interposer, for tests/test_reliability.py (recursion guard: no deadlock, no
 * corrupted records; the nested call may go unrecorded).
 *
 * Usage: rel_sigcuda [LAUNCHES (default 200000)]
 * A 20 us interval timer (ITIMER_REAL) sends SIGALRM; its handler calls
 * cudaLaunchKernel(handler_kernel). Both kernels are launched once before the timer starts: the
 * stand-in registers a kernel under a lock at its first launch (then looks it up lock-free), and a
 * handler must not wait for a lock its own thread holds. Those two launches are outside the count.
 * main makes LAUNCHES
 * cudaLaunchKernel(main_kernel) calls, stops the timer and prints "main LAUNCHES handler H"
 * (H = handler calls). Exit 0.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <cuda_runtime_api.h>

#define PROG "rel_sigcuda"
#include "cuda_check.h"

volatile int rel_sig_marks[2];
void main_kernel(void) { rel_sig_marks[0] = 1; }
void handler_kernel(void) { rel_sig_marks[1] = 1; }

static volatile sig_atomic_t handler_calls;

static void on_alarm(int sig)
{
    (void)sig;
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    cudaLaunchKernel((const void *)handler_kernel, g, b, NULL, 0, 0);
    handler_calls++;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    CHECK(cudaLaunchKernel((const void *)main_kernel, g, b, NULL, 0, 0));
    CHECK(cudaLaunchKernel((const void *)handler_kernel, g, b, NULL, 0, 0));
    CHECK(cudaDeviceSynchronize());
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (long i = 0; i < n; i++)
        CHECK(cudaLaunchKernel((const void *)main_kernel, g, b, NULL, 0, 0));
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    check_summary();
    printf("main %ld handler %ld\n", n, (long)handler_calls);
    return 0;
}
