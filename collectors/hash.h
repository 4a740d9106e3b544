/* collectors/hash.h — the one string hash of the collectors and the report
 * set (collectors/strings.c, collectors/kernels.c, exporters/agg_strings.c):
 * 8 bytes at a time, each word mixed in with a multiply, then a final
 * avalanche, so both halves of the result are usable (the report set keeps
 * the upper half beside each id). Header-only: the offline tool links the
 * report set without the collectors. */
#ifndef SP_HASH_H
#define SP_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t sp_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
}

#endif
