/* exporters/radix.c — see radix.h. Eleven-bit digits (a 16 KiB count table
 * each stays in L1/L2), all six digits counted in one read pass, then one
 * scatter pass per digit that is not the same in every key; input already
 * in order costs one comparison per pair. */
#include "radix.h"

#include <stdlib.h>

#define DIGIT_BITS 11
#define DIGITS 6 /* 66 bits >= 64 */
#define BUCKETS (1u << DIGIT_BITS)

sp_kv_t *sp_radix_sort(sp_kv_t *a, sp_kv_t *tmp, size_t n)
{
    size_t sorted = 1;
    while (sorted < n && a[sorted - 1].key <= a[sorted].key)
        sorted++;
    if (sorted >= n)   /* often so: records that come in time order */
        return a;
    size_t (*count)[BUCKETS] = calloc(DIGITS, sizeof *count);
    if (!count)
        return NULL;
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < DIGITS; d++)
            count[d][(a[i].key >> (d * DIGIT_BITS)) & (BUCKETS - 1)]++;
    for (int d = 0; d < DIGITS && n; d++) {
        unsigned shift = (unsigned)d * DIGIT_BITS;
        size_t *c = count[d];
        if (c[(a[0].key >> shift) & (BUCKETS - 1)] == n)
            continue; /* every key has this digit: the pass would change nothing */
        size_t sum = 0;
        for (unsigned b = 0; b < BUCKETS; b++) {
            size_t k = c[b];
            c[b] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++)
            tmp[c[(a[i].key >> shift) & (BUCKETS - 1)]++] = a[i];
        sp_kv_t *t = a;
        a = tmp;
        tmp = t;
    }
    free(count);
    return a;
}
