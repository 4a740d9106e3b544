/* collectors/clock.c — TSC detection and calibration. The tick->ns mapping is
 * the line through two (tsc, CLOCK_MONOTONIC) pairs: one taken at activation
 * and one refreshed before each export, so the slope is measured over the whole
 * run and NTP slewing of CLOCK_MONOTONIC is followed. A virtualised or unstable
 * TSC (no constant_tsc + nonstop_tsc flags) falls back to clock_gettime.
 * The second pair is published under a sequence count: the exporter refreshes
 * it while recording and marker threads convert, and a reader must never mix
 * a new tsc with an old ns (a torn slope). */
#include "clock.h"

#include <stdio.h>
#include <string.h>

int sp_clock_tsc;

static uint64_t cal_tsc0, cal_ns0, cal_tsc1, cal_ns1;
static int64_t epoch_offset;
static unsigned cal_seq;   /* odd while cal_tsc1 / cal_ns1 are being written */

static int cpu_has_invariant_tsc(void)
{
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f)
        return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) == 0) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    }
    fclose(f);
    return ok;
}

/* A pair read back to back; the TSC read is bracketed by two clock reads and
 * the midpoint used, which keeps the pair's error near 10 ns, if the thread
 * ran throughout. A bracket the thread was preempted in is off by up to half
 * the preemption (milliseconds on a loaded machine), and the slope through it
 * would draw TSC-timed calls that far from CUPTI's records, across a window's
 * bounds (test_clock): the narrowest of a few brackets is kept. */
uint64_t sp_clock_bracket(int (*read)(void *arg, uint64_t *value), void *arg, int tries, uint64_t *value)
{
    uint64_t best = UINT64_MAX, mid = 0;
    for (int i = 0; i < tries; i++) {
        uint64_t v = 0;
        uint64_t a = sp_clock_mono_ns();
        if (read(arg, &v) != 0)
            return 0;
        uint64_t b = sp_clock_mono_ns();
        if (b - a < best) {
            best = b - a;
            *value = v;
            mid = a + (b - a) / 2;
        }
    }
    return mid;
}

static int read_tsc(void *arg, uint64_t *value)
{
    (void)arg;
    *value = __rdtsc();
    return 0;
}

static void read_pair(uint64_t *tsc, uint64_t *ns)
{
    *ns = sp_clock_bracket(read_tsc, NULL, 16, tsc);
}

void sp_clock_init(void)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t mono = sp_clock_mono_ns();
    epoch_offset = (int64_t)((uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec) - (int64_t)mono;
    if (!cpu_has_invariant_tsc())
        return;
    read_pair(&cal_tsc0, &cal_ns0);
    cal_tsc1 = cal_tsc0;
    cal_ns1 = cal_ns0;
    sp_clock_tsc = 1;
}

void sp_clock_recalibrate(void)
{
    if (!sp_clock_tsc)
        return;
    /* A slope measured over less than 2 ms is too noisy; waiting that long only
     * happens for a run that exports almost as soon as it starts. */
    while (sp_clock_mono_ns() - cal_ns0 < 2000000)
        ;
    uint64_t tsc = 0, ns;
    read_pair(&tsc, &ns);
    /* Writers take the count from even to odd (no lock a fork could copy held). */
    unsigned s = __atomic_load_n(&cal_seq, __ATOMIC_RELAXED);
    while ((s & 1) || !__atomic_compare_exchange_n(&cal_seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        s = __atomic_load_n(&cal_seq, __ATOMIC_RELAXED) & ~1u;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&cal_tsc1, tsc, __ATOMIC_RELAXED);
    __atomic_store_n(&cal_ns1, ns, __ATOMIC_RELAXED);
    __atomic_store_n(&cal_seq, s + 2, __ATOMIC_RELEASE);
}

/* A consistent (tsc1, ns1) pair. */
static void read_cal1(uint64_t *tsc, uint64_t *ns)
{
    unsigned s;
    do {
        while ((s = __atomic_load_n(&cal_seq, __ATOMIC_ACQUIRE)) & 1)
            ;
        *tsc = __atomic_load_n(&cal_tsc1, __ATOMIC_RELAXED);
        *ns = __atomic_load_n(&cal_ns1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while (__atomic_load_n(&cal_seq, __ATOMIC_RELAXED) != s);
}

uint64_t sp_clock_to_ns(uint64_t ticks)
{
    if (!sp_clock_tsc)
        return ticks;
    if (__builtin_expect(ticks & SP_CLOCK_MONO_TAG, 0))
        return ticks & ~SP_CLOCK_MONO_TAG;
    uint64_t tsc1, ns1;
    read_cal1(&tsc1, &ns1);
    if (tsc1 <= cal_tsc0) {
        sp_clock_recalibrate();
        read_cal1(&tsc1, &ns1);
    }
    double slope = (double)(ns1 - cal_ns0) / (double)(tsc1 - cal_tsc0);
    double d = (double)(int64_t)(ticks - cal_tsc0) * slope;
    return (uint64_t)((int64_t)cal_ns0 + (int64_t)d);
}

uint64_t sp_clock_ticks_of_mono(uint64_t ns)
{
    if (!sp_clock_tsc)
        return ns;
    if (ns >= cal_ns0)
        return cal_tsc0;
    /* Carrying a time from before activation back onto the TSC needs the rate,
     * and the rate over the first microseconds is too noisy: the time stays a
     * CLOCK_MONOTONIC one, tagged, and sp_clock_to_ns (on the exporter's side)
     * returns it as it is. Nothing waits on the program's thread. */
    return ns | SP_CLOCK_MONO_TAG;
}

int64_t sp_clock_epoch_offset(void)
{
    return epoch_offset;
}
