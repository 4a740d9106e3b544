/* tests/unit/check.h — the one assertion macro of the C unit tests: counts
 * passes, prints each failure with file:line and a message, never stops, so a
 * run reports every broken check; each test ends with "N passed, N failed". */
#ifndef SP_UNIT_CHECK_H
#define SP_UNIT_CHECK_H

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

#endif
