/*
 * report_stack_bench.c — the stack collector (collectors/stacks.c) and its symbolizer
 * (exporters/stacks_sym.c) driven directly, without a CUDA program: both are built into
 * libreport_stacks.so beside this program (reports.mk), so, as in libstepprof, the collector's
 * own frames are in a different module from the caller's.
 *
 *   report_stack_bench check [U]      capture at main -> chain_outer -> chain_middle -> chain_inner and
 *                                     print `stack <text>` (outermost first) and `again <same id: 0|1>`
 *   report_stack_bench bench [N [U]]  N captures (default 1000000) of one 7-frame stack: prints
 *                                     `frames F` and `ns_per_capture X` (all but the first take the
 *                                     dedup hit path: unwind + hash + lock-free lookup)
 *
 * U is the native unwinder, as the config key unwinder spells it: auto (default), libunwind or glibc.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../collectors/stacks.h"
#include "../../exporters/stacks_sym.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile long sink;

/* Every capture from one call site: the first inserts the stack, the rest hit it. */
__attribute__((noinline)) uint32_t chain_inner(long n)
{
    uint32_t id = 0;
    for (long i = 0; i < n; i++) {
        uint32_t got = sp_stack_capture();
        if (!id)
            id = got;
        else if (got != id)
            return 0;
    }
    return id;
}

__attribute__((noinline)) uint32_t chain_middle(long n)
{
    uint32_t id = chain_inner(n);
    sink++;
    return id;
}

__attribute__((noinline)) uint32_t chain_outer(long n)
{
    uint32_t id = chain_middle(n);
    sink++;
    return id;
}

static int unwinder(const char *word)
{
    return !word || strcmp(word, "auto") == 0   ? SP_STACK_UNWIND_AUTO
           : strcmp(word, "libunwind") == 0     ? SP_STACK_UNWIND_LIBUNWIND
           : strcmp(word, "glibc") == 0         ? SP_STACK_UNWIND_GLIBC
                                                : -1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int check = strcmp(mode, "check") == 0;
    int u = unwinder(argc > (check ? 2 : 3) ? argv[check ? 2 : 3] : NULL);
    if (u < 0) {
        fprintf(stderr, "report_stack_bench: unwinder: expected auto, libunwind or glibc\n");
        return 2;
    }
    if (sp_stack_init(32, u) != 0)
        return 1;
    if (check) {
        uint32_t id[2];
        for (volatile int i = 0; i < 2; i++)   /* one call site (not unrolled): the same stack twice */
            id[i] = chain_outer(1);
        const char *t = sp_stacks_text(id[0]);
        printf("stack %s\nagain %d\n", t ? t : "(none)", id[0] != 0 && id[0] == id[1]);
        return id[0] ? 0 : 1;
    }
    if (strcmp(mode, "bench") == 0) {
        long n = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
        if (n < 2)
            n = 2;
        uint64_t t0 = now_ns();
        uint32_t id = chain_outer(n);
        double per = (double)(now_ns() - t0) / (double)n;
        size_t frames = 0;
        sp_stack_get(id, &frames);
        printf("frames %zu\nns_per_capture %.1f\n", frames, per);
        return id ? 0 : 1;
    }
    fprintf(stderr, "usage: report_stack_bench check [UNWINDER] | bench [N [UNWINDER]]\n");
    return 2;
}
