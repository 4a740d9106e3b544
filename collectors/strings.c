/* collectors/strings.c — see strings.h. A string is found without a lock:
 * an open-addressing table of entries, probed by hash, whose pointer readers
 * load with acquire; a writer (a new string) takes the lock, and when the
 * table is half full publishes a doubled copy. Superseded tables are kept (a
 * reader may still be probing one): tables only double, so that costs at most
 * the live table again. Ids index pages of string pointers that never move,
 * so sp_str_get is lock-free too. The per-thread cache is direct-mapped by
 * pointer: NVTX messages are mostly string literals, so a hit costs one
 * compare of the cached copy instead of a hash. Names deferred on the hot
 * path (sp_str_defer) live in collectors/strings_log.c until settled. */
#include "strings.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_BITS 14u
#define PAGE_IDS (1u << PAGE_BITS)
#define MAX_PAGES (1u << 16) /* 2^30 ids */

typedef struct entry {
    uint64_t hash;
    uint32_t id;
    char s[];
} entry_t;

typedef struct table {
    size_t mask;
    struct table *older; /* superseded tables, kept for readers */
    entry_t *_Atomic slot[];
} table_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static table_t *_Atomic current;
static size_t used;                      /* under lock */
static const char **_Atomic pages[MAX_PAGES];
static _Atomic uint32_t count = 1;      /* id 0 is reserved for "none" */

static uint64_t hash_str(const char *s, size_t *len)
{
    uint64_t h = 1469598103934665603ull;
    const char *p = s;
    while (*p)
        h = (h ^ (unsigned char)*p++) * 1099511628211ull;
    *len = (size_t)(p - s);
    return h ^ (h >> 29);
}

/* The slot holding s, or the empty slot where it would go. */
static entry_t *_Atomic *probe(table_t *t, const char *s, uint64_t h)
{
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        entry_t *e = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (!e || (e->hash == h && strcmp(e->s, s) == 0))
            return &t->slot[i];
    }
}

/* Caller holds lock. */
static table_t *grow(table_t *old)
{
    size_t cap = old ? (old->mask + 1) * 2 : 4096;
    table_t *t = calloc(1, sizeof *t + cap * sizeof t->slot[0]);
    if (!t)
        return NULL;
    t->mask = cap - 1;
    t->older = old;
    for (size_t i = 0; old && i <= old->mask; i++) {
        entry_t *e = atomic_load_explicit(&old->slot[i], memory_order_relaxed);
        if (e)
            atomic_store_explicit(probe(t, e->s, e->hash), e, memory_order_relaxed);
    }
    atomic_store_explicit(&current, t, memory_order_release);
    return t;
}

/* Caller holds lock: a new id for e, its string published in the pages. */
static int add_id(entry_t *e)
{
    uint32_t id = atomic_load_explicit(&count, memory_order_relaxed);
    uint32_t pg = id >> PAGE_BITS;
    if (pg >= MAX_PAGES)
        return -1;
    const char **page = atomic_load_explicit(&pages[pg], memory_order_relaxed);
    if (!page) {
        page = calloc(PAGE_IDS, sizeof *page);
        if (!page)
            return -1;
        atomic_store_explicit(&pages[pg], page, memory_order_release);
    }
    page[id & (PAGE_IDS - 1)] = e->s;
    e->id = id;
    atomic_store_explicit(&count, id + 1, memory_order_release);
    return 0;
}

uint32_t sp_str_intern(const char *s)
{
    if (!s)
        s = "";
    size_t len;
    uint64_t h = hash_str(s, &len);
    table_t *t = atomic_load_explicit(&current, memory_order_acquire);
    if (t) {
        /* The slot probe() stopped at may be filled by a writer before it is
         * read again here, with another string: check what it holds. */
        entry_t *e = atomic_load_explicit(probe(t, s, h), memory_order_acquire);
        if (e && e->hash == h && strcmp(e->s, s) == 0)
            return e->id;
    }
    uint32_t id = 0;
    pthread_mutex_lock(&lock);
    t = atomic_load_explicit(&current, memory_order_relaxed);
    if (!t || (used + 1) * 2 > t->mask + 1)
        t = grow(t);
    if (!t)
        goto out;
    entry_t *_Atomic *slot = probe(t, s, h);
    entry_t *e = atomic_load_explicit(slot, memory_order_relaxed);
    if (e) {
        id = e->id;
        goto out;
    }
    e = malloc(sizeof *e + len + 1);
    if (!e)
        goto out;
    e->hash = h;
    memcpy(e->s, s, len + 1);
    if (add_id(e) != 0) {
        free(e);
        goto out;
    }
    atomic_store_explicit(slot, e, memory_order_release);
    used++;
    id = e->id;
out:
    pthread_mutex_unlock(&lock);
    return id;
}

uint32_t sp_str_intern_cached(const char *s)
{
    /* copy points at the interned string, which is never freed, so a hit
     * needs no lock. */
    static __thread struct {
        const char *ptr;
        const char *copy;
        uint32_t id;
    } cache[64];
    if (!s)
        return sp_str_intern(s);
    unsigned i = (unsigned)(((uintptr_t)s >> 3) & 63u);
    if (cache[i].ptr == s && cache[i].id && strcmp(cache[i].copy, s) == 0)
        return cache[i].id;
    uint32_t id = sp_str_intern(s);
    cache[i].ptr = s;
    cache[i].id = id;
    cache[i].copy = sp_str_get(id);
    return id;
}

const char *sp_str_get(uint32_t id)
{
    if (!id || id >= atomic_load_explicit(&count, memory_order_acquire))
        return "";
    const char **page = atomic_load_explicit(&pages[id >> PAGE_BITS], memory_order_acquire);
    return page[id & (PAGE_IDS - 1)];
}

/* fork() copies a lock some other thread (often the exporter) may hold; the
 * child has only the forking thread, so the lock starts over there. */
void sp_str_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    sp_str_log_after_fork_child();
}
