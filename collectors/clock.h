/* collectors/clock.h — stepprof's one clock domain. Hot-path timestamps are raw
 * ticks: the TSC when the CPU advertises an invariant one (rdtsc ~12 ns here,
 * against ~26 ns for clock_gettime, and two reads per call must fit a 40 ns
 * budget), else CLOCK_MONOTONIC nanoseconds. Exporters convert ticks to
 * CLOCK_MONOTONIC ns with sp_clock_to_ns(), and to Unix-epoch ns by adding
 * sp_clock_epoch_offset(). */
#ifndef SP_CLOCK_H
#define SP_CLOCK_H

#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

extern int sp_clock_tsc;   /* 1 when ticks are TSC cycles */

static inline uint64_t sp_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t sp_clock_ticks(void)
{
    if (__builtin_expect(sp_clock_tsc, 1))
        return __rdtsc();
    return sp_clock_mono_ns();
}

void sp_clock_init(void);            /* once, at activation */
/* Another clock against CLOCK_MONOTONIC: the narrowest of `tries` brackets
 * [monotonic, read(), monotonic], since a bracket the thread was preempted in
 * is off by up to half the preemption, and the first, cold one (a 1 us
 * bracket was once taken as good enough) by up to half its width: 100-500 ns,
 * which drew calls before the NVTX range that encloses them. *value: that
 * bracket's read; returned: its CLOCK_MONOTONIC midpoint, 0 when read fails
 * (nonzero). */
uint64_t sp_clock_bracket(int (*read)(void *arg, uint64_t *value), void *arg, int tries, uint64_t *value);
void sp_clock_recalibrate(void);     /* before converting a batch of ticks */
uint64_t sp_clock_to_ns(uint64_t ticks);
int64_t sp_clock_epoch_offset(void); /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
/* Ticks for a CLOCK_MONOTONIC time taken before sp_clock_init (ticks read
 * then were nanoseconds): for NVTX ranges opened before the first CUDA call.
 * With the TSC, a time before activation is kept as nanoseconds tagged with
 * SP_CLOCK_MONO_TAG (a TSC reaches bit 63 after decades), which
 * sp_clock_to_ns returns untouched: no rate is needed on the program's thread. */
#define SP_CLOCK_MONO_TAG (1ULL << 63)
uint64_t sp_clock_ticks_of_mono(uint64_t ns);

#endif
