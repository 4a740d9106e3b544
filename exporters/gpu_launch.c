/* exporters/gpu_launch.c — the correlation id -> launching call table of
 * gpu_launch.h: direct-mapped when the ids are dense (the usual window),
 * open addressing otherwise. */
#include "gpu_launch.h"

#include <stddef.h>
#include <sys/mman.h>

int sp_launches_init(sp_launches_t *t, size_t cap, uint32_t lo, uint32_t hi)
{
    *t = (sp_launches_t){0};
    t->dense = cap && (uint64_t)(hi - lo) < 4 * (uint64_t)cap + 4096;
    t->lo = t->dense ? lo : 0;
    if (t->dense) {
        t->nslot = (size_t)(hi - lo) + 1;
    } else {
        t->nslot = 16;
        while (t->nslot < cap * 2)
            t->nslot *= 2;
    }
    t->cap = cap;
    /* One mapping (zeroed: every slot empty), not the heap: a table past
     * malloc's threshold placed in the exporter's arena stays resident
     * beside the report set the export builds next (+3.5 B/event at its peak). */
    t->bytes = (t->nslot + (t->nslot & 1)) * sizeof *t->slot + (cap ? cap : 1) * sizeof *t->l;
    void *m = mmap(NULL, t->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        *t = (sp_launches_t){0};
        return -1;
    }
    t->slot = m;
    t->l = (sp_launch_t *)(t->slot + t->nslot + (t->nslot & 1));
    return 0;
}

/* The slot of an id: its call's, or the empty one where it would go. */
static int32_t *slot_of(const sp_launches_t *t, uint32_t corr)
{
    if (t->dense)
        return corr - t->lo < t->nslot ? &t->slot[corr - t->lo] : NULL;
    size_t j = (size_t)((corr * 0x9e3779b97f4a7c15ull) >> 32) & (t->nslot - 1);
    while (t->slot[j] && t->l[t->slot[j] - 1].corr != corr)
        j = (j + 1) & (t->nslot - 1);
    return &t->slot[j];
}

void sp_launches_add(sp_launches_t *t, const sp_launch_t *c)
{
    int32_t *s = c->corr && t->n < t->cap ? slot_of(t, c->corr) : NULL;
    if (!s)
        return;
    if (*s && !(t->l[*s - 1].driver && !c->driver))
        return;
    t->l[t->n++] = *c;
    *s = (int32_t)t->n;
}

sp_launch_t *sp_launches_find(const sp_launches_t *t, uint32_t corr)
{
    int32_t *s = corr && t->slot ? slot_of(t, corr) : NULL;
    return s && *s ? &t->l[*s - 1] : NULL;
}

void sp_launches_free(sp_launches_t *t)
{
    if (t->slot)
        munmap(t->slot, t->bytes);
    *t = (sp_launches_t){0};
}
