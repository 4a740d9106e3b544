/* tests/unit/test_clock.c — the TSC -> CLOCK_MONOTONIC mapping (collectors/clock.c)
 * stays within microseconds when the thread is preempted while a calibration
 * pair is read. This program's own clock_gettime (found before libc's by the
 * calls clock.c makes) passes through to libc's and, when armed, stalls one
 * call for 3 ms before reading the time, as a preemption between the TSC
 * read and the clock read after it would: a pair taken from that one bracket
 * is 1.5 ms off, and so is every call drawn through it, enough to move
 * calls across a window's bounds against CUPTI's records. */
#define _GNU_SOURCE
#include "../../collectors/clock.h"
#include "check.h"

#include <dlfcn.h>
#include <stdlib.h>

static int (*real_gettime)(clockid_t, struct timespec *);
static int stall_in;   /* > 0: the call that brings it to 0 stalls */

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (!real_gettime)
        real_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    if (stall_in > 0 && --stall_in == 0) {
        struct timespec d = {0, 3000000};
        nanosleep(&d, NULL);
    }
    return real_gettime(id, ts);
}

static void sleep_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&d, NULL);
}

/* |mapped - true| in ns for a TSC value and the CLOCK_MONOTONIC time read with it. */
static int64_t error_ns(uint64_t tsc, uint64_t mono)
{
    int64_t e = (int64_t)sp_clock_to_ns(tsc) - (int64_t)mono;
    return e < 0 ? -e : e;
}

int main(void)
{
    /* sp_clock_init: CLOCK_REALTIME, CLOCK_MONOTONIC, then the pair's two reads: the 4th call stalls. */
    stall_in = 4;
    sp_clock_init();
    CHECK(stall_in == 0, "the armed stall was reached in sp_clock_init (%d calls left)", stall_in);
    CHECK(sp_clock_tsc, "this machine has an invariant TSC (the mapping under test)");
    uint64_t early_tsc = __rdtsc(), early_mono = sp_clock_mono_ns();
    sleep_ms(20);
    /* sp_clock_recalibrate: its 2 ms wait (one read, already past), then the pair: the 3rd call stalls. */
    stall_in = 3;
    sp_clock_recalibrate();
    CHECK(stall_in == 0, "the armed stall was reached in sp_clock_recalibrate (%d calls left)", stall_in);
    uint64_t late_tsc = __rdtsc(), late_mono = sp_clock_mono_ns();
    int64_t e0 = error_ns(early_tsc, early_mono), e1 = error_ns(late_tsc, late_mono);
    CHECK(e0 < 100000, "a time read just after activation maps %lld ns off (stalled pair kept)", (long long)e0);
    CHECK(e1 < 100000, "a time read just after recalibration maps %lld ns off (stalled pair kept)", (long long)e1);
    /* Without a stall the mapping is as close. */
    sleep_ms(5);
    sp_clock_recalibrate();
    uint64_t t = __rdtsc(), m = sp_clock_mono_ns();
    CHECK(error_ns(t, m) < 100000, "unstalled: %lld ns off", (long long)error_ns(t, m));
    printf("test_clock: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
