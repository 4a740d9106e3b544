/* exporters/agg_strings.c — the report set's strings (see agg.h): interning
 * into 32-bit ids (open addressing on the hash, texts in arena chunks, ids to
 * texts in pages that never move, a lock once two threads share the set),
 * batched interning, the id-indexed map that groups by name, and the input
 * shape texts of launches and copies. */
#include "agg_int.h"

#include "../collectors/hash.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- string interning -------------------------------------------------- */

typedef struct sp_intern {
    pthread_mutex_t lock;     /* taken once shared (sp_rep_share) */
    int shared;
    uint64_t *slot;           /* open addressing: the hash's high 32 bits, then id + 1; 0 = empty */
    size_t cap, used;
    char **chunks;            /* arena: strings never move once interned */
    size_t nchunks, chunk_used, chunk_cap;
    struct shape_memo {        /* launch shapes by value: a window has few */
        unsigned v[6];
        uint64_t shm;
        sp_rep_str_t id;      /* 0 ("", never a shape): none yet */
    } memo[64];
} intern_t;

/* Text chunks start at ARENA_FIRST and double up to ARENA_CHUNK: a window
 * with a few hundred names does not hold 256 KiB of recycled (resident)
 * heap for them. */
#define ARENA_FIRST (16u * 1024u)
#define ARENA_CHUNK (256u * 1024u)
#define STR_TOP_BYTES (((size_t)1 << (32 - SP_REP_STR_PAGE_BITS)) * sizeof(const char **))

static char *arena_copy(intern_t *t, const char *s, size_t n)
{
    if (!t->nchunks || t->chunk_used + n + 1 > t->chunk_cap) {
        size_t want = t->nchunks < 4 ? ARENA_FIRST << t->nchunks : ARENA_CHUNK;
        size_t cap = n + 1 > want ? n + 1 : want;
        char **nc = realloc(t->chunks, (t->nchunks + 1) * sizeof *nc);
        if (!nc)
            return NULL;
        t->chunks = nc;
        if (!(nc[t->nchunks] = malloc(cap)))
            return NULL;
        t->nchunks++;
        t->chunk_used = 0;
        t->chunk_cap = cap;
    }
    char *p = t->chunks[t->nchunks - 1] + t->chunk_used;
    memcpy(p, s, n);
    p[n] = 0;
    t->chunk_used += n + 1;
    return p;
}

/* A slot keeps the upper half of its string's hash beside the id: a probe
 * passes other strings, and a grow moves every slot, without reading text
 * (a million names are a cache miss each). */
#define SLOT_ID(v) ((uint32_t)(v))
#define SLOT_HASH(v) ((v) >> 32)

/* To cap slots (a power of two). */
static int intern_grow_to(intern_t *t, size_t cap)
{
    uint64_t *ns = calloc(cap, sizeof *ns);
    if (!ns)
        return -1;
    /* The low bits that pick a slot: the hash's low half is not kept, so
     * the slot index comes from the upper half (tables stay at or under
     * 2^32 slots: sp_rep_reserve_strings caps them, ids stop below 2^32). */
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i])
            continue;
        size_t j = SLOT_HASH(t->slot[i]) & (cap - 1);
        while (ns[j])
            j = (j + 1) & (cap - 1);
        ns[j] = t->slot[i];
    }
    free(t->slot);
    t->slot = ns;
    t->cap = cap;
    return 0;
}

/* h: the upper half of the string's hash; the table has room for it. */
static sp_rep_str_t intern_hashed(sp_rep_set_t *s, intern_t *t, const char *str, size_t len, uint64_t h)
{
    size_t j = h & (t->cap - 1);
    for (; t->slot[j]; j = (j + 1) & (t->cap - 1)) {
        if (SLOT_HASH(t->slot[j]) != h)
            continue;
        const char *text = sp_rep_str(s, SLOT_ID(t->slot[j]) - 1);
        if (strncmp(text, str, len) == 0 && text[len] == 0)
            return SLOT_ID(t->slot[j]) - 1;
    }
    const char **page = s->str[t->used >> SP_REP_STR_PAGE_BITS];
    if (!page) {
        /* Mapped: its 128 KiB are touched as ids fill it, where calloc on
         * a thread's heap clears (and makes resident) all of it at once. */
        void *m = mmap(NULL, SP_REP_STR_PAGE * sizeof *page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            s->oom = 1;
            return 0;
        }
        page = s->str[t->used >> SP_REP_STR_PAGE_BITS] = m;
    }
    char *copy = arena_copy(t, str, len);
    if (!copy) {
        s->oom = 1;
        return 0;
    }
    page[t->used & (SP_REP_STR_PAGE - 1)] = copy;
    t->slot[j] = h << 32 | (uint32_t)++t->used;
    return (sp_rep_str_t)(t->used - 1);
}

/* Room for n more strings with the table at most half full (grown by
 * doubling, at once to the size n needs); 0, or -1 (s->oom set). */
static int intern_room(sp_rep_set_t *s, intern_t *t, size_t n)
{
    size_t cap = t->cap ? t->cap : 1024;
    while (cap < (t->used + n) * 2 && cap < ((size_t)1 << 32))
        cap *= 2;
    if (t->used + n >= UINT32_MAX - 1 || (cap > t->cap && intern_grow_to(t, cap) != 0)) {
        s->oom = 1;
        return -1;
    }
    return 0;
}

static sp_rep_str_t intern_locked(sp_rep_set_t *s, intern_t *t, const char *str, size_t len)
{
    return intern_room(s, t, 1) == 0 ? intern_hashed(s, t, str, len, sp_hash_bytes(str, len) >> 32) : 0;
}

void sp_rep_intern_many(sp_rep_set_t *s, const char *const *str, const size_t *len, sp_rep_str_t *ids, size_t n)
{
    enum { GROUP = 16 };
    intern_t *t = s->strings;
    if (t && t->shared)
        pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i += GROUP) {
        size_t g = n - i < GROUP ? n - i : GROUP;
        uint64_t h[GROUP];
        if (!t || intern_room(s, t, g) != 0) {
            memset(ids + i, 0, (n - i) * sizeof *ids);
            s->oom = 1;
            break;
        }
        for (size_t k = 0; k < g; k++) {   /* hashes first, each slot fetched while the next hashes */
            h[k] = sp_hash_bytes(str[i + k], len[i + k]) >> 32;
            __builtin_prefetch(&t->slot[h[k] & (t->cap - 1)]);
        }
        for (size_t k = 0; k < g; k++)
            ids[i + k] = intern_hashed(s, t, str[i + k], len[i + k], h[k]);
    }
    if (t && t->shared)
        pthread_mutex_unlock(&t->lock);
}

sp_rep_str_t sp_rep_intern_id_n(sp_rep_set_t *s, const char *str, size_t len)
{
    intern_t *t = s->strings;
    if (!t) {
        s->oom = 1;
        return 0;
    }
    if (!t->shared)
        return intern_locked(s, t, str, len);
    pthread_mutex_lock(&t->lock);
    sp_rep_str_t id = intern_locked(s, t, str, len);
    pthread_mutex_unlock(&t->lock);
    return id;
}

int sp_rep_reserve_strings(sp_rep_set_t *s, size_t n)
{
    if (!s->strings) {
        s->oom = 1;
        return -1;
    }
    return intern_room(s, s->strings, n);
}

void sp_rep_share(sp_rep_set_t *s)
{
    if (s->strings)
        s->strings->shared = 1;
}

sp_rep_str_t sp_rep_intern_id(sp_rep_set_t *s, const char *str)
{
    return sp_rep_intern_id_n(s, str ? str : "", str ? strlen(str) : 0);
}

const char *sp_rep_intern_n(sp_rep_set_t *s, const char *str, size_t len)
{
    sp_rep_str_t id = sp_rep_intern_id_n(s, str, len);
    return s->str && s->str[0] ? sp_rep_str(s, id) : "";
}

#define IDMAP_BITS 10u

uint32_t *sp_rep_idmap_at(sp_rep_idmap_t *m, sp_rep_str_t id)
{
    size_t p = id >> IDMAP_BITS;
    if (p >= m->npages) {
        size_t n = m->npages * 2 > p + 1 ? m->npages * 2 : p + 1;
        uint32_t **pg = realloc(m->page, n * sizeof *pg);
        if (!pg)
            return NULL;
        memset(pg + m->npages, 0, (n - m->npages) * sizeof *pg);
        m->page = pg;
        m->npages = n;
    }
    if (!m->page[p] && !(m->page[p] = calloc(1u << IDMAP_BITS, sizeof **m->page)))
        return NULL;
    return &m->page[p][id & ((1u << IDMAP_BITS) - 1)];
}

void sp_rep_idmap_free(sp_rep_idmap_t *m)
{
    for (size_t p = 0; p < m->npages; p++)
        free(m->page[p]);
    free(m->page);
    m->page = NULL;
    m->npages = 0;
}

/* The set's strings: the intern table, the page table of texts, and
 * "" (id 0) and "[]" interned. s->oom set when out of memory. */
void sp_rep_strings_init(sp_rep_set_t *s)
{
    s->strings = calloc(1, sizeof *s->strings);
    /* Room for every id a set can have (2^32 / 2^14 pages): the pages
     * themselves come as ids reach them. Mapped, not calloc'ed: from recycled
     * heap memory calloc would clear all 2 MiB, and only the first few
     * entries are ever touched. */
    void *pages = mmap(NULL, STR_TOP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    s->str = pages == MAP_FAILED ? NULL : pages;
    if (!s->strings || !s->str) {
        free(s->strings);
        s->strings = NULL;
        s->oom = 1;
    } else {
        pthread_mutex_init(&s->strings->lock, NULL);
    }
    sp_rep_intern_id(s, "");   /* id 0 */
    s->no_shape_id = sp_rep_intern_id(s, "[]");
}

void sp_rep_strings_free(sp_rep_set_t *s)
{
    intern_t *t = s->strings;
    if (t) {
        for (size_t i = 0; i < t->nchunks; i++)
            free(t->chunks[i]);
        free(t->chunks);
        free(t->slot);
        pthread_mutex_destroy(&t->lock);
        free(t);
    }
    for (size_t p = 0; s->str && p < ((size_t)1 << (32 - SP_REP_STR_PAGE_BITS)) && s->str[p]; p++)
        munmap(s->str[p], SP_REP_STR_PAGE * sizeof *s->str[p]);
    if (s->str)
        munmap(s->str, STR_TOP_BYTES);
    s->strings = NULL;
    s->str = NULL;
}

sp_rep_str_t sp_rep_shape_launch(sp_rep_set_t *s, const unsigned grid[3], const unsigned block[3], uint64_t shm)
{
    struct shape_memo *m = NULL;
    if (s->strings && !s->strings->shared) {   /* the memo takes no lock: off once two threads share the set */
        unsigned v[6] = {grid[0], grid[1], grid[2], block[0], block[1], block[2]};
        uint64_t h = shm * 0x9e3779b97f4a7c15ull;
        for (int i = 0; i < 6; i++)
            h = (h ^ v[i]) * 0x100000001b3ull;
        m = &s->strings->memo[(h >> 32) & 63];
        if (m->id && m->shm == shm && memcmp(m->v, v, sizeof v) == 0)
            return m->id;
        memcpy(m->v, v, sizeof v);
        m->shm = shm;
        m->id = 0;
    }
    char buf[160];
    snprintf(buf, sizeof buf, "[[%u, %u, %u], [%u, %u, %u], [%" PRIu64 "]]", grid[0], grid[1], grid[2], block[0],
             block[1], block[2], shm);
    sp_rep_str_t r = sp_rep_intern_id(s, buf);
    if (m && !s->oom)
        m->id = r;
    return r;
}

sp_rep_str_t sp_rep_shape_bytes(sp_rep_set_t *s, int64_t bytes)
{
    char buf[48];
    snprintf(buf, sizeof buf, "[[%" PRId64 "]]", bytes);
    return sp_rep_intern_id(s, buf);
}
