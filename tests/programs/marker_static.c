/*
 * marker_static.c — function-marker target whose step functions are static functions of the
 * executable, called directly from inside it: no PLT, no GOT, no dynamic symbol; stepprof finds them
 * in .symtab and patches their entries. Built -O2 -fno-inline and not stripped.
 *
 * Each step calls, in this order:
 *   do_train_step(i)  the marker of the tests (PROF_MARKER=function:do_train_step); its first
 *                     instruction reads a global, a RIP-relative access the trampoline relocates.
 *   abi_probe(3, ...) variadic, with double arguments (in %xmm0-2, their count in %al): marking
 *                     steps with it (function:abi_probe) checks that the hook hands every argument
 *                     register over untouched.
 * Stdout: marker_common.c's `step i` lines and `done`, then `state S probe P`, values that depend on
 * every argument the two functions received. Exit 0.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

int marker_run(int argc, char **argv, void (*step)(int)); /* marker_common.c */

static volatile uint64_t train_state = 1;
static double probe_sum;

static void __attribute__((noinline)) do_train_step(int i)
{
    uint64_t s = train_state;
    for (int k = 0; k < 64; k++)
        s = s * 6364136223846793005ull + (uint64_t)(i + k);
    train_state = s;
}

static double __attribute__((noinline)) abi_probe(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    double acc = 0;
    for (int k = 0; k < n; k++)
        acc = acc * 1.5 + va_arg(ap, double);
    va_end(ap);
    return acc;
}

/* Called through a pointer by marker_common.c; calls the two functions directly. */
static void step(int i)
{
    do_train_step(i);
    probe_sum += abi_probe(3, 0.5 * i, 1.25, -(double)i);
}

int main(int argc, char **argv)
{
    int rc = marker_run(argc, argv, step);
    printf("state %016llx probe %.6f\n", (unsigned long long)train_state, probe_sum);
    return rc;
}
