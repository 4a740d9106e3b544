/*
 * rel_throw.cc — a C++ program that dies of an uncaught exception in the middle of a recorded
 * cycle (std::terminate -> abort -> SIGABRT), for tests/test_reliability.py. Run with
 * PROF_MARKER=cudaProfilerApi PROF_REPEAT=0.
 *
 * Usage: rel_throw [CYCLES (default 2)] [LAUNCHES (default 50)]: CYCLES complete
 * cudaProfilerStart..Stop cycles of LAUNCHES cudaLaunchKernel each ("cycle N done" after each),
 * then a started cycle with LAUNCHES launches, "in cycle", and throw std::runtime_error.
 */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

extern "C" {
volatile int rel_throw_mark;
void rel_throw_kernel(void) { rel_throw_mark = 1; }
}

static void launches(long n)
{
    dim3 g(1, 1, 1), b(32, 1, 1);
    for (long i = 0; i < n; i++)
        if (cudaLaunchKernel((const void *)rel_throw_kernel, g, b, nullptr, 0, 0) != cudaSuccess)
            std::fprintf(stderr, "rel_throw: launch failed\n");
}

int main(int argc, char **argv)
{
    long cycles = argc > 1 ? std::atol(argv[1]) : 2, n = argc > 2 ? std::atol(argv[2]) : 50;
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    for (long c = 0; c < cycles; c++) {
        cudaProfilerStart();
        launches(n);
        cudaProfilerStop();
        std::printf("cycle %ld done\n", c);
    }
    cudaProfilerStart();
    launches(n);
    std::printf("in cycle\n");
    throw std::runtime_error("rel_throw: uncaught on purpose");
}
