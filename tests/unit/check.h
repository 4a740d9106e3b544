/* tests/unit/check.h — the one assertion macro of the C unit tests: counts
 * passes, prints each failure with file:line and a message, never stops, so a
 * run reports every broken check; each test ends with "N passed, N failed".
 * Also the tests' one random source: a fixed-seed xorshift, so a failure
 * replays. */
#ifndef SP_UNIT_CHECK_H
#define SP_UNIT_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static inline uint64_t check_rnd(void)
{
    static uint64_t s = 88172645463325252ull;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

#endif
