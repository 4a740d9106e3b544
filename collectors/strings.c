/* collectors/strings.c — see strings.h. Ids index a growable array of
 * strdup'ed strings; a chained hash finds existing ones. The per-thread cache
 * is direct-mapped by pointer: NVTX messages are mostly string literals, so a
 * hit costs one compare of the cached copy instead of a hash and a lock. */
#include "strings.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 4096u

typedef struct entry {
    char *s;
    uint32_t id;
    struct entry *next;
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *buckets[NBUCKETS];
static char **by_id;
static uint32_t count = 1, cap; /* id 0 is reserved for "none" */

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

uint32_t sp_str_intern(const char *s)
{
    if (!s)
        s = "";
    uint32_t b = hash_str(s) & (NBUCKETS - 1), id = 0;
    pthread_mutex_lock(&lock);
    for (entry_t *e = buckets[b]; e; e = e->next) {
        if (strcmp(e->s, s) == 0) {
            id = e->id;
            goto out;
        }
    }
    if (count == cap || !by_id) {
        uint32_t ncap = cap ? cap * 2 : 1024;
        char **nv = realloc(by_id, ncap * sizeof *nv);
        if (!nv)
            goto out;
        by_id = nv;
        cap = ncap;
    }
    entry_t *e = malloc(sizeof *e);
    char *copy = strdup(s);
    if (!e || !copy) {
        free(e);
        free(copy);
        goto out;
    }
    e->s = copy;
    e->id = id = count++;
    e->next = buckets[b];
    buckets[b] = e;
    by_id[id] = copy;
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
    const char *s = "";
    pthread_mutex_lock(&lock);
    if (id && id < count)
        s = by_id[id];
    pthread_mutex_unlock(&lock);
    return s;
}

/* fork() copies a lock some other thread (often the exporter) may hold; the
 * child has only the forking thread, so the lock starts over there. */
void sp_str_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}
