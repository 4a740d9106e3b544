/*
 * libmarkstep.c — the shared library whose function marks the steps in the function-marker tests
 * (PROF_MARKER=function:markstep_train_step): a stand-in for a training library that exports its
 * step function. Programs call markstep_train_step through their PLT, so stepprof has to hook it in
 * the callers' GOTs. No CUDA here: only the calls count.
 *
 * Exports: markstep_init() (programs that reach the step function only through a plugin loaded
 * later call it, so the library is loaded from the start) and markstep_train_step(i) (some host
 * work, so the call is not optimised into nothing; the result lands in markstep_checksum).
 */
#include <stdint.h>

volatile uint64_t markstep_checksum;
static uint64_t table[256];

void markstep_init(void)
{
    for (unsigned k = 0; k < 256; k++)
        table[k] = k * 0x9e3779b97f4a7c15ull;
}

void markstep_train_step(int i)
{
    uint64_t h = (uint64_t)i;
    for (unsigned k = 0; k < 256; k++)
        h = (h ^ table[k]) * 0x100000001b3ull;
    markstep_checksum += h;
}
