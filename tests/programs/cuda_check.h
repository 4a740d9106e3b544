/*
 * cuda_check.h — the error policy shared by the CUDA test programs in tests/programs/.
 *
 * These programs must run to completion on three runtimes: a real GPU, the CPU stand-in in
 * tests/fakecuda/, and NVIDIA's real libcudart with no driver, where every call fails (cudaMalloc
 * returns 35, cudaErrorInsufficientDriver). So a failed call is never fatal: CHECK() prints a warning
 * on stderr and returns the error so the caller can fall back (e.g. to pageable memory when
 * cudaMallocHost fails). Only the first few failures are printed, because on the driverless runtime
 * every call fails and thousands of identical lines would bury the output the tests look at;
 * check_summary() reports the total at the end.
 *
 * Also parse_steps(), the STEPS convention of the training programs (argv[1], else $STEPS).
 * The including file defines PROG (its name, a string literal) first.
 */
#ifndef STEPPROF_TESTS_CUDA_CHECK_H
#define STEPPROF_TESTS_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>

#ifndef PROG
#error "define PROG (the program name used in warnings) before including cuda_check.h"
#endif

enum { CHECK_WARN_LIMIT = 10 };

static unsigned long check_failed_calls;

static inline cudaError_t check_call(cudaError_t err, const char *call)
{
    if (err != cudaSuccess) {
        if (check_failed_calls < CHECK_WARN_LIMIT)
            fprintf(stderr, PROG ": warning: %s failed: %s (%d)\n", call,
                    cudaGetErrorString(err), (int)err);
        else if (check_failed_calls == CHECK_WARN_LIMIT)
            fprintf(stderr, PROG ": warning: further CUDA errors not shown\n");
        check_failed_calls++;
    }
    return err;
}

#define CHECK(call) check_call((call), #call)

static inline void check_summary(void)
{
    if (check_failed_calls)
        fprintf(stderr, PROG ": %lu CUDA calls failed\n", check_failed_calls);
}

/* STEPS from argv[1], else $STEPS, else the default; -1 when the text is not a count >= 0. */
static inline long parse_steps(int argc, char **argv, long dflt)
{
    const char *text = argc > 1 ? argv[1] : getenv("STEPS");
    if (!text || !*text)
        return dflt;
    char *end;
    long v = strtol(text, &end, 10);
    return (*end || v < 0) ? -1 : v;
}

#endif
