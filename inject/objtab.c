/* inject/objtab.c — the loaded objects' table kept between walks (see
 * objtab.h): appended to as objects load, read again after an unload, with
 * an address index and a name index so that finding a caller's object and
 * one object's dependency scope cost no walk over every object. */
#define _GNU_SOURCE
#include "objtab.h"

#include <stdlib.h>
#include <string.h>

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static sp_ot_name_t *name_slot(sp_ot_name_t *tab, size_t cap, const char *name)
{
    size_t i = (size_t)name_hash(name) & (cap - 1);
    while (tab[i].name && strcmp(tab[i].name, name) != 0)
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* Remembers name for entry idx unless an earlier entry has it (glibc takes
 * the first loaded object of a name). */
static int name_put(sp_ot_t *t, const char *name, size_t idx)
{
    if (!name || !name[0])
        return 0;
    if (2 * (t->nnames + 1) > t->capnames) {
        size_t cap = t->capnames ? 2 * t->capnames : 256;
        sp_ot_name_t *p = calloc(cap, sizeof *p);
        if (!p)
            return -1;
        for (size_t i = 0; i < t->capnames; i++)
            if (t->names[i].name)
                *name_slot(p, cap, t->names[i].name) = t->names[i];
        free(t->names);
        t->names = p;
        t->capnames = cap;
    }
    sp_ot_name_t *s = name_slot(t->names, t->capnames, name);
    if (!s->name) {
        s->name = name;
        s->idx = idx;
        t->nnames++;
    }
    return 0;
}

size_t sp_ot_by_name(const sp_ot_t *t, const char *need)
{
    if (!t->capnames)
        return SP_OT_NONE;
    const sp_ot_name_t *s = name_slot(t->names, t->capnames, need);
    return s->name ? s->idx : SP_OT_NONE;
}

#ifndef SP_OT_BULK
#define SP_OT_BULK 16 /* more new entries than this are sorted, fewer inserted (sp_ot_find) */
#endif
/* The first table's entries (tests/unit/test_objtab.c sets a small one, to
 * make a handful of objects grow the table). */
#ifndef SP_OT_MIN_CAP
#define SP_OT_MIN_CAP 128
#endif

static int grow(sp_ot_t *t)
{
    size_t cap = t->cap ? 2 * t->cap : SP_OT_MIN_CAP;
    sp_ot_ent_t *v = realloc(t->v, cap * sizeof *v);
    if (!v)
        return -1;
    t->v = v;
    size_t *o = realloc(t->order, cap * sizeof *o), *b = o ? realloc(t->byaddr, cap * sizeof *b) : NULL;
    if (o)
        t->order = o;
    if (b)
        t->byaddr = b;
    if (!o || !b)
        return -1;
    t->cap = cap;
    for (size_t i = 0; i < t->n; i++) /* the entries moved */
        t->v[i].o.info = &t->v[i].info;
    return 0;
}

static int add(sp_ot_t *t, const struct dl_phdr_info *info, size_t size)
{
    if (t->n == t->cap && grow(t) != 0)
        return -1;
    size_t i = t->n;
    sp_ot_ent_t *e = &t->v[i];
    memset(e, 0, sizeof *e);
    memcpy(&e->info, info, size < sizeof e->info ? size : sizeof e->info);
    e->o.info = &e->info; /* also where it is not read (the vDSO) */
    e->ok = !sp_elf_is_vdso(&e->info) && sp_elf_read(&e->info, (int)i, &e->o) == 0;
    e->lo = UINTPTR_MAX;
    for (int k = 0; k < info->dlpi_phnum; k++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[k];
        uintptr_t s = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD) {
            e->lo = s < e->lo ? s : e->lo;
            e->hi = s + p->p_memsz > e->hi ? s + p->p_memsz : e->hi;
        }
    }
    int ours = sp_elf_is_ours(&e->info);
    if (ours)
        t->ours = i;
    t->n++;
    if (!e->ok || ours)
        return 0;
    for (int k = 0; k < t->nprobes; k++) {
        const ElfW(Sym) *s;
        int has = sp_elf_lookup(&e->o, t->probes[k], &s, 1) > 0;
        e->probes |= (unsigned)has << k;
        t->nprobe[k] += has;
    }
    const char *slash = strrchr(e->o.name, '/');
    return name_put(t, sp_elf_soname(&e->o), i) | name_put(t, slash ? slash + 1 : e->o.name, i);
}

typedef struct {
    sp_ot_t *t;
    size_t i;
    int err;
} fill_t;

static int fill_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    fill_t *f = arg;
    if (f->i++ < f->t->n) /* no unload since: the known objects come first, in order */
        return 0;
    f->err = add(f->t, info, size);
    return f->err;
}

static void clear(sp_ot_t *t)
{
    t->n = 0;
    t->nsorted = 0;
    t->ours = SP_OT_NONE;
    t->nnames = 0;
    memset(t->nprobe, 0, sizeof t->nprobe);
    if (t->names)
        memset(t->names, 0, t->capnames * sizeof *t->names);
}

int sp_ot_refresh(sp_ot_t *t, const struct dl_phdr_info *first)
{
    if (t->filled && first->dlpi_adds == t->adds && first->dlpi_subs == t->subs)
        return 0;
    if (!t->filled || first->dlpi_subs != t->subs)
        clear(t); /* an unloaded object's base may be the next one's */
    t->ver++;
    fill_t f = {t, 0, 0};
    dl_iterate_phdr(fill_cb, &f);
    if (f.err) {
        clear(t);
        t->filled = 0;
        return -1;
    }
    t->adds = first->dlpi_adds;
    t->subs = first->dlpi_subs;
    t->filled = 1;
    return 0;
}

void sp_ot_free(sp_ot_t *t)
{
    free(t->v);
    free(t->order);
    free(t->byaddr);
    free(t->names);
    memset(t, 0, sizeof *t);
}

/* The first index in byaddr[0..n) whose object starts above p. */
static size_t upper(const sp_ot_t *t, size_t n, uintptr_t p)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[t->byaddr[mid]].lo <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int by_lo(const void *a, const void *b, void *arg)
{
    const sp_ot_t *t = arg;
    uintptr_t x = t->v[*(const size_t *)a].lo, y = t->v[*(const size_t *)b].lo;
    return x < y ? -1 : x > y;
}

/* Objects' extents never interleave (glibc reserves each object's whole
 * span), so the last extent starting at or below p is the only candidate.
 * Entries added since the last lookup are inserted into the order (a few
 * per load: a move each, not a sort of every object); many at once (a first
 * fill, a re-read after an unload) are sorted. */
size_t sp_ot_find(sp_ot_t *t, uintptr_t p)
{
    if (t->n - t->nsorted > SP_OT_BULK) {
        for (size_t i = 0; i < t->n; i++)
            t->byaddr[i] = i;
        qsort_r(t->byaddr, t->n, sizeof *t->byaddr, by_lo, t);
        t->nsorted = t->n;
    }
    for (; t->nsorted < t->n; t->nsorted++) {
        size_t at = upper(t, t->nsorted, t->v[t->nsorted].lo);
        memmove(&t->byaddr[at + 1], &t->byaddr[at], (t->nsorted - at) * sizeof *t->byaddr);
        t->byaddr[at] = t->nsorted;
    }
    size_t lo = upper(t, t->n, p);
    size_t x = lo ? t->byaddr[lo - 1] : SP_OT_NONE;
    return x != SP_OT_NONE && sp_elf_contains(&t->v[x].info, p) ? x : SP_OT_NONE;
}

size_t sp_ot_scope(sp_ot_t *t, size_t x)
{
    if (++t->stamp == 0) { /* wrapped: no entry may look visited */
        for (size_t i = 0; i < t->n; i++)
            t->v[i].mark = 0;
        t->stamp = 1;
    }
    size_t n = 0;
    t->order[n++] = x;
    t->v[x].mark = t->stamp;
    for (size_t q = 0; q < n; q++) {
        const char *need;
        for (int i = 0; (need = sp_elf_needed(&t->v[t->order[q]].o, i)) != NULL; i++) {
            size_t d = sp_ot_by_name(t, need);
            if (d != SP_OT_NONE && t->v[d].mark != t->stamp) {
                t->v[d].mark = t->stamp;
                t->order[n++] = d;
            }
        }
    }
    return n;
}

uintptr_t sp_ot_scope_def(const sp_ot_t *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        const sp_ot_ent_t *e = &t->v[t->order[i]];
        const ElfW(Sym) *s;
        if (e->ok && t->order[i] != t->ours && sp_elf_lookup(&e->o, name, &s, 1) &&
            ELF64_ST_TYPE(s->st_info) == STT_FUNC)
            return e->info.dlpi_addr + s->st_value;
    }
    return 0;
}
