/* exporters/radix.h — a stable LSD radix sort of (64-bit key, value) pairs:
 * linear in the count, so orders that would cost a comparison sort of
 * millions of events (start times, matching keys) cost a few sequential
 * passes. Digits every key shares are skipped, so keys that span few bits
 * (times within one window, small ids) take few passes. */
#ifndef SP_RADIX_H
#define SP_RADIX_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_kv {
    uint64_t key;
    uint64_t val;
} sp_kv_t;

/* Sorts a[0..n) by key, ascending; equal keys keep their order. tmp holds n
 * pairs. Returns the array that holds the result (a or tmp), NULL when out
 * of memory (a untouched). */
sp_kv_t *sp_radix_sort(sp_kv_t *a, sp_kv_t *tmp, size_t n);

#endif
