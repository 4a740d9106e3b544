/* collectors/memory_map.c — see memory_map.h. */
#include "memory_map.h"

#include <stdlib.h>
#include <string.h>

static size_t hash(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

int sp_memmap_init(sp_memmap_t *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->v = calloc(cap, sizeof *m->v);
    m->cap = m->v ? cap : 0;
    return m->v ? 0 : -1;
}

void sp_memmap_free(sp_memmap_t *m)
{
    free(m->v);
    memset(m, 0, sizeof *m);
}

sp_memmap_entry_t *sp_memmap_find(const sp_memmap_t *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->v[i].key == key)
            return &m->v[i];
        if (m->v[i].key == 0)
            return NULL;
    }
}

static int rebuild(sp_memmap_t *m, size_t cap)
{
    sp_memmap_entry_t *nv = calloc(cap, sizeof *nv);
    if (!nv)
        return -1;
    for (size_t k = 0; k < m->cap; k++) {
        if (!sp_memmap_used(&m->v[k]))
            continue;
        size_t i = hash(m->v[k].key, cap);
        while (nv[i].key)
            i = (i + 1) & (cap - 1);
        nv[i] = m->v[k];
    }
    free(m->v);
    m->v = nv;
    m->cap = cap;
    m->used = m->live;
    return 0;
}

sp_memmap_entry_t *sp_memmap_insert(sp_memmap_t *m, uint64_t key)
{
    sp_memmap_entry_t *e = sp_memmap_find(m, key);
    if (e)
        return e;
    if ((m->used + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap : 64;
        while ((m->live + 1) * 4 > cap)
            cap *= 2;
        if (rebuild(m, cap) != 0)
            return NULL;
    }
    size_t i = hash(key, m->cap);
    while (sp_memmap_used(&m->v[i]))
        i = (i + 1) & (m->cap - 1);
    if (m->v[i].key == 0)
        m->used++;
    m->live++;
    memset(&m->v[i], 0, sizeof m->v[i]);
    m->v[i].key = key;
    return &m->v[i];
}

void sp_memmap_erase(sp_memmap_t *m, sp_memmap_entry_t *e)
{
    e->key = SP_MEMMAP_TOMB;
    m->live--;
}
