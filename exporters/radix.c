/* exporters/radix.c — see radix.h. Eleven-bit digits (a 16 KiB count table
 * each stays in L1/L2). A first read pass finds the digits that are not the
 * same in every key (and input already in order, which ends there); a second
 * counts those digits, then one scatter pass per such digit. */
#include "radix.h"

#include <stdlib.h>

#define DIGIT_BITS 11
#define DIGITS 6 /* 66 bits >= 64 */
#define BUCKETS (1u << DIGIT_BITS)

sp_kv_t *sp_radix_sort(sp_kv_t *a, sp_kv_t *tmp, size_t n)
{
    /* One read pass: whether the keys are in order already, and which bits
     * differ from the first key's (digits without any are left alone). */
    uint64_t differ = 0;
    size_t unsorted = 0;
    for (size_t i = 1; i < n; i++) {
        differ |= a[i].key ^ a[0].key;
        unsorted += a[i - 1].key > a[i].key;
    }
    if (!unsorted)   /* often so: records that come in time order */
        return a;
    int digit[DIGITS], nd = 0;
    for (int d = 0; d < DIGITS; d++)
        if ((differ >> (d * DIGIT_BITS)) & (BUCKETS - 1))
            digit[nd++] = d;
    size_t (*count)[BUCKETS] = calloc((size_t)nd, sizeof *count);
    if (!count)
        return NULL;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < nd; k++)
            count[k][(a[i].key >> (digit[k] * DIGIT_BITS)) & (BUCKETS - 1)]++;
    for (int k = 0; k < nd; k++) {
        unsigned shift = (unsigned)digit[k] * DIGIT_BITS;
        size_t *c = count[k], sum = 0;
        for (unsigned b = 0; b < BUCKETS; b++) {
            size_t m = c[b];
            c[b] = sum;
            sum += m;
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
