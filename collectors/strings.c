/* collectors/strings.c — see strings.h. A string is found without a lock:
 * an open-addressing table of slots (the string's hash, then its entry,
 * which readers load with acquire), probed by hash; a writer (a new string)
 * takes the lock, and when the table is half full publishes a doubled copy.
 * Superseded tables are kept (a reader may still be probing one): tables
 * only double, so that costs at most the live table again. Tables of 2 MiB
 * and more ask for huge pages (a million names: 32 MiB of slots, every probe
 * a TLB miss otherwise). Entries are carved from 64 KiB arenas under the
 * lock and never freed. Ids index pages of string pointers that never move,
 * so sp_str_get is lock-free too. The per-thread cache is direct-mapped by
 * pointer: NVTX messages are mostly string literals, so a hit costs one
 * compare of the cached copy instead of a hash. Names deferred on the hot
 * path (sp_str_defer) live in collectors/strings_log.c until settled, in
 * batches (sp_str_intern_many) whose cache misses overlap. */
#include "strings.h"

#include "hash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE_BITS 14u
#define PAGE_IDS (1u << PAGE_BITS)
#define MAX_PAGES (1u << 16) /* 2^30 ids */
#define ARENA_BYTES 65536u   /* entries are carved from arenas of this size */
#define GROUP 16u            /* sp_str_intern_many's prefetch distance */

typedef struct entry {
    uint32_t id;
    char s[];
} entry_t;

/* A slot's hash is written before its entry is published (release) and
 * never changes, so a reader that sees the entry reads the right hash; a
 * probe passes a slot of another hash without touching its entry. */
typedef struct slot {
    uint64_t hash;
    entry_t *_Atomic e;
} slot_t;

typedef struct table {
    size_t mask;
    struct table *older; /* superseded tables, kept for readers */
    slot_t slot[];
} table_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static table_t *_Atomic current;
static size_t used;                      /* under lock */
static char *arena;                      /* under lock */
static size_t arena_left;                /* under lock */
static const char **_Atomic pages[MAX_PAGES];
static _Atomic uint32_t count = 1;      /* id 0 is reserved for "none" */

/* The length first, with libc's vector strlen, then sp_hash_bytes. */
static uint64_t hash_str(const char *s, size_t *len)
{
    *len = strlen(s);
    return sp_hash_bytes(s, *len);
}

/* The entry holding s, or NULL with *at the empty slot where it would go. */
static entry_t *probe(table_t *t, const char *s, uint64_t h, slot_t **at)
{
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        slot_t *x = &t->slot[i];
        entry_t *e = atomic_load_explicit(&x->e, memory_order_acquire);
        if (!e || (x->hash == h && strcmp(e->s, s) == 0)) {
            *at = x;
            return e;
        }
    }
}

/* Caller holds lock. Entries are all distinct: each goes to the first empty
 * slot from its hash, read from the old slot (no entry is touched); the
 * destination of the entry GROUP slots ahead is prefetched. */
static table_t *grow(table_t *old)
{
    size_t cap = old ? (old->mask + 1) * 2 : 4096, bytes = sizeof(table_t) + cap * sizeof(slot_t);
    /* Huge pages: a probe of a large table otherwise misses the TLB too. */
    table_t *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return NULL;
    if (bytes >= (2u << 20))
        madvise(t, bytes, MADV_HUGEPAGE);
    t->mask = cap - 1;
    t->older = old;
    for (size_t i = 0; old && i <= old->mask; i++) {
        if (i + GROUP <= old->mask && atomic_load_explicit(&old->slot[i + GROUP].e, memory_order_relaxed))
            __builtin_prefetch(&t->slot[old->slot[i + GROUP].hash & t->mask], 1);
        entry_t *e = atomic_load_explicit(&old->slot[i].e, memory_order_relaxed);
        if (!e)
            continue;
        size_t j = (size_t)old->slot[i].hash & t->mask;
        while (atomic_load_explicit(&t->slot[j].e, memory_order_relaxed))
            j = (j + 1) & t->mask;
        t->slot[j].hash = old->slot[i].hash;
        atomic_store_explicit(&t->slot[j].e, e, memory_order_relaxed);
    }
    atomic_store_explicit(&current, t, memory_order_release);
    return t;
}

/* Caller holds lock: a new entry for s, from the arena (long strings get
 * their own allocation). */
static entry_t *new_entry(const char *s, size_t len)
{
    size_t need = (sizeof(entry_t) + len + 1 + 7) & ~(size_t)7;
    entry_t *e;
    if (need > ARENA_BYTES / 16) {
        e = malloc(need);
    } else {
        if (need > arena_left) {
            arena = malloc(ARENA_BYTES);
            arena_left = arena ? ARENA_BYTES : 0;
        }
        if (!arena)
            return NULL;
        e = (entry_t *)arena;
        arena += need;
        arena_left -= need;
    }
    if (e)
        memcpy(e->s, s, len + 1);
    return e;
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

static uint32_t intern_hashed(const char *s, uint64_t h, size_t len)
{
    slot_t *at;
    table_t *t = atomic_load_explicit(&current, memory_order_acquire);
    entry_t *e = t ? probe(t, s, h, &at) : NULL;
    if (e)
        return e->id;
    uint32_t id = 0;
    pthread_mutex_lock(&lock);
    t = atomic_load_explicit(&current, memory_order_relaxed);
    if (!t || (used + 1) * 2 > t->mask + 1)
        t = grow(t);
    if (!t)
        goto out;
    e = probe(t, s, h, &at);
    if (e) {
        id = e->id;
        goto out;
    }
    e = new_entry(s, len);
    if (!e || add_id(e) != 0)
        goto out; /* only when ids run out (2^30): the arena entry is not given back */
    at->hash = h;
    atomic_store_explicit(&at->e, e, memory_order_release);
    used++;
    id = e->id;
out:
    pthread_mutex_unlock(&lock);
    return id;
}

uint32_t sp_str_intern(const char *s)
{
    if (!s)
        s = "";
    size_t len;
    uint64_t h = hash_str(s, &len);
    return intern_hashed(s, h, len);
}

/* The batch the collecting thread settles: the hashes of a group first, each
 * prefetching its slot, then each slot's entry prefetched, then the lookups,
 * so that a group's cache misses overlap instead of following each other. */
void sp_str_intern_many(const char *const *s, uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i += GROUP) {
        size_t g = n - i < GROUP ? n - i : GROUP;
        uint64_t h[GROUP];
        size_t len[GROUP];
        table_t *t = atomic_load_explicit(&current, memory_order_acquire);
        for (size_t k = 0; k < g; k++) {
            h[k] = hash_str(s[i + k], &len[k]);
            if (t)
                __builtin_prefetch(&t->slot[h[k] & t->mask]);
        }
        for (size_t k = 0; t && k < g; k++) {
            entry_t *e = atomic_load_explicit(&t->slot[h[k] & t->mask].e, memory_order_relaxed);
            if (e)
                __builtin_prefetch(e);
        }
        for (size_t k = 0; k < g; k++)
            ids[i + k] = intern_hashed(s[i + k], h[k], len[k]);
    }
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
