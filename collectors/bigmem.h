/* collectors/bigmem.h — the export's per-event arrays (record references,
 * sort scratch, External ids, report events): mapped on their own when large,
 * so that freeing one gives its pages back to the kernel at once.
 *
 * From malloc, a freed array of a few MB can stay in the heap: glibc raises
 * its mmap threshold (up to 32 MB) each time a mapped block is freed, after
 * which such arrays come from an arena that keeps them. Then the export's
 * peak held what earlier phases had freed (the CUPTI-off 1M-launch window:
 * 63.6 or 67.4 B/event of export memory from run to run), and the program
 * kept the export's memory after it. Small arrays still come from malloc. A
 * block carries its size in a 16-byte header; free it with sp_big_free only. */
#ifndef SP_BIGMEM_H
#define SP_BIGMEM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SP_BIG_MIN ((size_t)1 << 20)   /* mapped from this size on */
#define SP_BIG_HDR 16u

/* n bytes (zeroed when zero), NULL when out of memory. */
static inline void *sp_big_alloc(size_t n, int zero)
{
    if (n > SIZE_MAX - SP_BIG_HDR)
        return NULL;
    size_t total = n + SP_BIG_HDR;
    char *b;
    if (total >= SP_BIG_MIN) {
        b = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   /* zeroed */
        if (b == MAP_FAILED)
            return NULL;
    } else {
        b = zero ? calloc(1, total) : malloc(total);
        if (!b)
            return NULL;
    }
    memcpy(b, &total, sizeof total);
    return b + SP_BIG_HDR;
}

static inline void sp_big_free(void *p)
{
    if (!p)
        return;
    char *b = (char *)p - SP_BIG_HDR;
    size_t total;
    memcpy(&total, b, sizeof total);
    if (total >= SP_BIG_MIN)
        munmap(b, total);
    else
        free(b);
}

/* p grown or shrunk to n bytes (its contents kept up to the smaller size,
 * by a copy: the export sizes its arrays once); NULL when out of memory, p
 * then unchanged. p may be NULL. */
static inline void *sp_big_realloc(void *p, size_t n)
{
    if (!p)
        return sp_big_alloc(n, 0);
    if (n > SIZE_MAX - SP_BIG_HDR)
        return NULL;
    char *b = (char *)p - SP_BIG_HDR;
    size_t total, want = n + SP_BIG_HDR;
    memcpy(&total, b, sizeof total);
    char *q = sp_big_alloc(n, 0);
    if (!q)
        return NULL;
    memcpy(q, p, (total < want ? total : want) - SP_BIG_HDR);
    sp_big_free(p);
    return q;
}

#endif
