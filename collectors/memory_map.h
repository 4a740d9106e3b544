/* collectors/memory_map.h — the live-allocation map of the memory collector:
 * open addressing with linear probing on a 64-bit key (a block's address, or
 * a tagged handle or virtual range), tombstones on erase, rebuilt at twice
 * the live count when half full. Not thread-safe: memory.c holds its lock. */
#ifndef SP_MEMORY_MAP_H
#define SP_MEMORY_MAP_H

#include "memory.h"

#include <stddef.h>
#include <stdint.h>

#define SP_MEMMAP_TOMB 1ull   /* keys 0 (empty) and 1 (erased) are never real */

typedef struct sp_memmap_entry {
    uint64_t key;
    uint32_t window;   /* record window the block was allocated in, 0 if none */
    sp_mem_block_t b;
} sp_memmap_entry_t;

typedef struct sp_memmap {
    sp_memmap_entry_t *v;
    size_t cap, used, live;   /* used counts tombstones too */
} sp_memmap_t;

int sp_memmap_init(sp_memmap_t *m, size_t cap);   /* cap: a power of two; 0 ok */
void sp_memmap_free(sp_memmap_t *m);
sp_memmap_entry_t *sp_memmap_find(const sp_memmap_t *m, uint64_t key);
/* The entry for key, new (key set, the rest zero) or existing; NULL when the
 * table cannot grow. */
sp_memmap_entry_t *sp_memmap_insert(sp_memmap_t *m, uint64_t key);
void sp_memmap_erase(sp_memmap_t *m, sp_memmap_entry_t *e);

static inline int sp_memmap_used(const sp_memmap_entry_t *e)
{
    return e->key > SP_MEMMAP_TOMB;
}

#endif
