/* collectors/events.c — the bounded chunk pool behind collectors/events.h.
 * Everything here is the cold path: a thread's first record (registration),
 * a full chunk (refill under a mutex, once per ~900 records), and the
 * exporter's collection pass. A chunk is recycled only after its owner has
 * retired it and the exporter has consumed every record in it and released
 * them (the exporter reads records in place, without copying), so a writer
 * never shares a chunk with a reader that frees it. A thread that exits
 * retires its chunk (retire_at_exit), or short-lived threads would keep one
 * chunk each for ever. */
#define _GNU_SOURCE
#include "events.h"

#include "log.h"
#include "prefault.h"
#include "strings.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

_Atomic uint32_t sp_ev_gate = SP_GATE_UNINIT;
__thread sp_thread_t *sp_ev_self;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *pool_base;
static uint32_t pool_chunks;       /* chunks in the pool */
static uint32_t pool_next;         /* first never-used chunk */
static sp_chunk_t *free_list;      /* recycled chunks */
static _Atomic(sp_thread_t *) threads;
static _Atomic uint32_t thread_count;

/* Per-cycle cap, under pool_lock. Records are counted when their chunk is
 * full and its owner asks for the next one (the owner's own chunk: no race),
 * so the count lags by at most one chunk per thread and recording stops
 * only once the cap is surely reached; the exporter trims to the exact cap. */
static uint64_t cycle_max;         /* 0 = none */
static uint32_t cycle_window;      /* record window cycle_events counts for */
static uint64_t cycle_events;
static uint32_t capped[16];        /* ring of windows the cap stopped */
static unsigned capped_next;

static sp_chunk_t *chunk_at(uint32_t i)
{
    return (sp_chunk_t *)(pool_base + (size_t)i * SP_CHUNK_BYTES);
}

int sp_ev_pool_init(long buffer_mb)
{
    size_t bytes = (size_t)buffer_mb << 20;
    if (bytes < SP_CHUNK_BYTES)
        bytes = SP_CHUNK_BYTES;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        sp_log(SP_LOG_ERROR, "cannot reserve a %ld MB event buffer (%s); profiling disabled", buffer_mb,
               strerror(errno));
        return -1;
    }
    /* Huge pages make a recorded call ~35 ns cheaper than 4 KiB pages (one
     * fault per 2 MiB instead of per 46 records), and the prefault helper
     * takes their multi-millisecond first touch off the recording threads. */
    sp_prefault_start(p, bytes);
    pool_base = p;
    pool_chunks = (uint32_t)(bytes / SP_CHUNK_BYTES);
    return 0;
}

void sp_ev_set_gate(uint32_t value)
{
    if (cycle_max && sp_win_records(value) && value != cycle_window) {
        pthread_mutex_lock(&pool_lock);
        cycle_window = value;
        cycle_events = 0;
        pthread_mutex_unlock(&pool_lock);
    }
    atomic_store_explicit(&sp_ev_gate, value, memory_order_release);
}

void sp_ev_set_cycle_cap(uint64_t max_events)
{
    pthread_mutex_lock(&pool_lock);
    cycle_max = max_events;
    pthread_mutex_unlock(&pool_lock);
}

int sp_ev_window_capped(uint32_t window)
{
    int hit = 0;
    pthread_mutex_lock(&pool_lock);
    for (unsigned i = 0; i < sizeof capped / sizeof capped[0]; i++)
        hit |= window != 0 && capped[i] == window;
    pthread_mutex_unlock(&pool_lock);
    return hit;
}

/* Thread exit: the exporter frees the chunk once it has consumed it. A CUDA
 * call made by a later destructor takes a chunk again and re-arms the key
 * (sp_ev_reserve_slow), so that chunk is retired too. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void retire_at_exit(void *p)
{
    sp_thread_t *t = p;
    pthread_mutex_lock(&pool_lock);
    if (t->cur)
        atomic_store_explicit(&t->cur->retired, 1, memory_order_release);
    t->cur = NULL;
    pthread_mutex_unlock(&pool_lock);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, retire_at_exit);
}

sp_thread_t *sp_ev_thread_slow(void)
{
    int saved = errno;
    sp_thread_t *t = calloc(1, sizeof *t);
    if (t) {
        t->tid = (int)gettid();
        prctl(PR_GET_NAME, t->name, 0, 0, 0);
        t->slot = atomic_fetch_add(&thread_count, 1);
        sp_thread_t *head = atomic_load(&threads);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&threads, &head, t));
        sp_ev_self = t;
    }
    errno = saved;
    return t;
}

sp_thread_t *sp_ev_thread_alias(const sp_thread_t *of)
{
    sp_thread_t *t = calloc(1, sizeof *t);
    if (t) {
        t->tid = of->tid;
        memcpy(t->name, of->name, sizeof t->name);
        t->slot = atomic_fetch_add(&thread_count, 1);
        sp_thread_t *head = atomic_load(&threads);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&threads, &head, t));
    }
    return t;
}

sp_event_t *sp_ev_reserve_slow(sp_thread_t *t)
{
    sp_chunk_t *c = NULL;
    pthread_mutex_lock(&pool_lock);
    if (cycle_max && cycle_events < cycle_max && t->cur) {
        const sp_chunk_t *full = t->cur;
        uint32_t n = atomic_load_explicit(&full->count, memory_order_relaxed);
        for (uint32_t k = 0; k < n; k++)
            cycle_events += full->ev[k].window == cycle_window;
    }
    if (cycle_max && cycle_events >= cycle_max) {
        if (capped[(capped_next - 1) % 16u] != cycle_window)
            capped[capped_next++ % 16u] = cycle_window;
    } else if (free_list) {
        c = free_list;
        free_list = c->next_free;
    } else if (pool_next < pool_chunks) {
        c = chunk_at(pool_next++);
        sp_prefault_need((size_t)pool_next * SP_CHUNK_BYTES);
    }
    if (c) {
        atomic_store_explicit(&c->count, 0, memory_order_relaxed);
        c->consumed = 0;
        atomic_store_explicit(&c->retired, 0, memory_order_relaxed);
        c->owner = t;
        c->next_free = NULL;
        if (t->cur)
            atomic_store_explicit(&t->cur->retired, 1, memory_order_release);
        t->cur = c;
    }
    pthread_mutex_unlock(&pool_lock);
    if (c && pthread_once(&exit_once, make_exit_key) == 0 && pthread_getspecific(exit_key) != t)
        pthread_setspecific(exit_key, t);
    if (!c) {
        atomic_store_explicit(&t->dropped, atomic_load_explicit(&t->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return NULL;
    }
    return &c->ev[0];
}

/* How many records of `window` chunk c holds from its cursor on, before the
 * first of a later window. Called with pool_lock held. */
static uint32_t window_records(const sp_chunk_t *c, uint32_t cnt, uint32_t window)
{
    uint32_t have = 0;
    for (uint32_t k = c->consumed; k < cnt && c->ev[k].window <= window; k++)
        have += c->ev[k].window == window;
    return have;
}

/* Two passes under the lock: count, then fill an array of the exact size (a
 * growing one would hold up to twice the references at its peak). Each chunk's
 * count is read once, so both passes see the same records. */
size_t sp_ev_collect(uint32_t window, int names, sp_event_ref_t **out)
{
    size_t n = 0;
    pthread_mutex_lock(&pool_lock);
    uint32_t used = pool_next;
    uint32_t *cnt = malloc((used ? used : 1) * sizeof *cnt);
    for (uint32_t i = 0; cnt && i < used; i++) {
        sp_chunk_t *c = chunk_at(i);
        cnt[i] = c->owner ? atomic_load_explicit(&c->count, memory_order_acquire) : 0;
        n += c->owner ? window_records(c, cnt[i], window) : 0;
    }
    sp_event_ref_t *v = cnt && n ? malloc(n * sizeof *v) : NULL;
    size_t k = 0;
    for (uint32_t i = 0; v && i < used; i++) {
        sp_chunk_t *c = chunk_at(i);
        if (!c->owner)
            continue;
        uint32_t j = c->consumed;
        for (; j < cnt[i] && c->ev[j].window <= window; j++)
            if (c->ev[j].window == window)
                v[k++] = (sp_event_ref_t){&c->ev[j], c->owner};
        c->consumed = j;
    }
    pthread_mutex_unlock(&pool_lock);
    free(cnt);
    /* NVTX names the program's thread only copied (sp_str_defer) are interned
     * here, off it; their text is reused once the window is taken. The
     * records are the window's, no longer written by their threads. */
    size_t settle = v && names ? k : 0;
    sp_str_settle_refs(window, settle ? (void *const *)&v[0].ev : NULL, settle, sizeof *v, offsetof(sp_event_t, name));
    *out = v;
    return v ? k : 0;
}

void sp_ev_release(void)
{
    pthread_mutex_lock(&pool_lock);
    for (uint32_t i = 0; i < pool_next; i++) {
        sp_chunk_t *c = chunk_at(i);
        if (!c->owner)
            continue;
        /* retired is read before count: a retired chunk's count is final. */
        int retired = atomic_load_explicit(&c->retired, memory_order_acquire);
        if (retired && c->consumed == atomic_load_explicit(&c->count, memory_order_acquire)) {
            c->owner = NULL;
            c->next_free = free_list;
            free_list = c;
        }
    }
    pthread_mutex_unlock(&pool_lock);
}

uint64_t sp_ev_dropped_total(void)
{
    uint64_t sum = 0;
    for (sp_thread_t *t = atomic_load(&threads); t; t = t->next)
        sum += atomic_load_explicit(&t->dropped, memory_order_relaxed);
    return sum;
}

const sp_thread_t *sp_ev_threads(void)
{
    return atomic_load(&threads);
}

/* The child of fork() inherits the parent's records and thread list; it must
 * start empty so it never writes the parent's events. The pool itself is
 * released: other parent threads do not exist in the child to retire their
 * chunks, and a child that uses CUDA is re-activated with a fresh pool. */
void sp_ev_after_fork_child(void)
{
    pthread_mutex_init(&pool_lock, NULL);
    if (pool_base)
        munmap(pool_base, (size_t)pool_chunks * SP_CHUNK_BYTES);
    pool_base = NULL;
    pool_chunks = pool_next = 0;
    sp_prefault_after_fork_child();
    free_list = NULL;
    atomic_store(&threads, NULL);
    atomic_store(&thread_count, 0);
    sp_ev_self = NULL;
    cycle_max = cycle_events = 0;
    cycle_window = 0;
    memset(capped, 0, sizeof capped);
}
