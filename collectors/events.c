/* collectors/events.c — the bounded chunk pool behind collectors/events.h.
 * Everything here is the cold path: a thread's first record (registration),
 * a full chunk (refill, once per ~900 records, without a lock: a pop from the
 * free stack or a bump of the never-used frontier, both by CAS), and the
 * exporter's collection pass (under pool_lock, which no writer takes). The
 * free stack's head carries a 32-bit tag bumped by every successful CAS, so a
 * pop whose view of the head's next went stale (the chunk was popped and
 * pushed again meanwhile) fails instead of corrupting the stack. A chunk is recycled only after its owner has
 * retired it and the exporter has consumed every record in it and released
 * them (the exporter reads records in place, without copying), so a writer
 * never shares a chunk with a reader that frees it. A thread that exits
 * retires its chunk (retire_at_exit), or short-lived threads would keep one
 * chunk each for ever. */
#define _GNU_SOURCE
#include "events.h"

#include "bigmem.h"

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

_Static_assert(sizeof(sp_event_t) == 80, "a host record is 80 bytes");

_Atomic uint32_t sp_ev_gate = SP_GATE_UNINIT;
__thread sp_thread_t *sp_ev_self;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* exporter side */
unsigned char *sp_ev_pool_base;   /* events.h: sp_ev_owner */
static uint32_t pool_chunks;       /* chunks in the pool */
static _Atomic uint32_t pool_next; /* first never-used chunk (never past pool_chunks) */
static _Atomic uint64_t free_head; /* recycled chunks: tag << 32 | (index + 1) */
static _Atomic(sp_thread_t *) threads;
static _Atomic uint32_t thread_count;

/* Per-cycle cap. Records are counted when their chunk is full and its owner
 * asks for the next one (the owner's own chunk: no race), so the count lags
 * by at most one chunk per thread and recording stops only once the cap is
 * surely reached; the exporter trims to the exact cap. The window and its
 * count share one word (window << 32 | records), so a count made for a
 * window the gate has since left is never added to the next one's; a
 * window's records all sit in the pool, so 32 bits hold its count. */
static _Atomic uint64_t cycle_max; /* 0 = none */
static _Atomic uint64_t cycle;     /* window << 32 | its records counted */
static uint32_t capped[16];        /* ring of windows the cap stopped, under pool_lock */
static unsigned capped_next;
static _Atomic uint32_t capped_last; /* the last window pushed on the ring */

static sp_chunk_t *chunk_at(uint32_t i)
{
    return (sp_chunk_t *)(sp_ev_pool_base + (size_t)i * SP_CHUNK_BYTES);
}

static uint32_t chunks_used(void)
{
    return atomic_load_explicit(&pool_next, memory_order_acquire);
}

/* Only the exporter pushes (under pool_lock); any writer pops. */
static void push_free(uint32_t i)
{
    uint64_t h = atomic_load_explicit(&free_head, memory_order_relaxed);
    do
        atomic_store_explicit(&chunk_at(i)->next_free, (uint32_t)h, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&free_head, &h, ((h >> 32) + 1) << 32 | (i + 1),
                                                  memory_order_release, memory_order_relaxed));
}

static sp_chunk_t *pop_free(void)
{
    uint64_t h = atomic_load_explicit(&free_head, memory_order_acquire);
    while ((uint32_t)h) {
        uint32_t next = atomic_load_explicit(&chunk_at((uint32_t)h - 1)->next_free, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&free_head, &h, ((h >> 32) + 1) << 32 | next,
                                                  memory_order_acquire, memory_order_acquire))
            return chunk_at((uint32_t)h - 1);
    }
    return NULL;
}

static sp_chunk_t *bump_frontier(void)
{
    uint32_t i = atomic_load_explicit(&pool_next, memory_order_relaxed);
    do
        if (i >= pool_chunks)
            return NULL;
    while (!atomic_compare_exchange_weak_explicit(&pool_next, &i, i + 1, memory_order_relaxed,
                                                  memory_order_relaxed));
    sp_prefault_need((size_t)(i + 1) * SP_CHUNK_BYTES);
    return chunk_at(i);
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
    sp_ev_pool_base = p;
    pool_chunks = (uint32_t)(bytes / SP_CHUNK_BYTES);
    return 0;
}

void sp_ev_set_gate(uint32_t value)
{
    if (atomic_load(&cycle_max) && sp_win_records(value) && value != atomic_load(&cycle) >> 32)
        atomic_store(&cycle, (uint64_t)value << 32);
    atomic_store_explicit(&sp_ev_gate, value, memory_order_release);
}

void sp_ev_set_cycle_cap(uint64_t max_events)
{
    atomic_store(&cycle_max, max_events);
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
    sp_thread_t *t = p;   /* no lock: only its owner touches t->cur; the exporter reads retired */
    if (t->cur)
        atomic_store_explicit(&t->cur->retired, 1, memory_order_release);
    t->cur = NULL;
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

/* Adds the full chunk's records of the counted window to the count, unless
 * the gate moved to another window meanwhile; 1 once the cap is reached, with
 * *window the window judged (the gate may have moved on by the time the caller
 * notes it: reading the cycle again would mark the next window capped). */
static int cycle_full(const sp_chunk_t *full, uint64_t max, uint32_t *window)
{
    uint64_t st = atomic_load(&cycle);
    *window = (uint32_t)(st >> 32);
    if ((uint32_t)st >= max)
        return 1;
    if (!full)
        return 0;
    uint32_t n = atomic_load_explicit(&full->count, memory_order_relaxed), add = 0;
    for (uint32_t k = 0; k < n; k++)
        add += full->ev[k].window == (uint32_t)(st >> 32);
    uint64_t to;
    do
        to = (uint32_t)st + (uint64_t)add > UINT32_MAX ? (st | UINT32_MAX) : st + add;
    while (!atomic_compare_exchange_weak(&cycle, &st, to) && (st >> 32) == (to >> 32));
    return (uint32_t)to >= max && (st >> 32) == (to >> 32);
}

/* The cap stopped window w: noted once for sp_ev_window_capped (a lock, but
 * once per capped window; the records after it are dropped anyway). */
static void note_capped(uint32_t w)
{
    if (atomic_load_explicit(&capped_last, memory_order_relaxed) == w)
        return;
    pthread_mutex_lock(&pool_lock);
    if (capped[(capped_next - 1) % 16u] != w)
        capped[capped_next++ % 16u] = w;
    atomic_store_explicit(&capped_last, w, memory_order_relaxed);
    pthread_mutex_unlock(&pool_lock);
}

sp_event_t *sp_ev_reserve_slow(sp_thread_t *t)
{
    sp_chunk_t *c = NULL;
    uint64_t max = atomic_load_explicit(&cycle_max, memory_order_relaxed);
    uint32_t full_window;
    if (max && cycle_full(t->cur, max, &full_window))
        note_capped(full_window);
    else if (!(c = pop_free()))
        c = bump_frontier();
    if (c) {
        /* The exporter frees only a chunk with an owner that is retired:
         * owner is set last, after retired is cleared. */
        atomic_store_explicit(&c->count, 0, memory_order_relaxed);
        c->consumed = 0;
        atomic_store_explicit(&c->retired, 0, memory_order_relaxed);
        atomic_store_explicit(&c->owner, t, memory_order_release);
        if (t->cur)
            atomic_store_explicit(&t->cur->retired, 1, memory_order_release);
        t->cur = c;
    }
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
    uint32_t used = chunks_used();
    uint32_t *cnt = malloc((used ? used : 1) * sizeof *cnt);
    for (uint32_t i = 0; cnt && i < used; i++) {
        sp_chunk_t *c = chunk_at(i);
        cnt[i] = c->owner ? atomic_load_explicit(&c->count, memory_order_acquire) : 0;
        n += c->owner ? window_records(c, cnt[i], window) : 0;
    }
    sp_event_ref_t *v = cnt && n ? sp_big_alloc(n * sizeof *v, 0) : NULL;
    size_t k = 0;
    for (uint32_t i = 0; v && i < used; i++) {
        sp_chunk_t *c = chunk_at(i);
        if (!cnt[i]) /* also a chunk a writer took after the first pass */
            continue;
        uint32_t j = c->consumed;
        for (; j < cnt[i] && c->ev[j].window <= window; j++)
            if (c->ev[j].window == window)
                v[k++] = (sp_event_ref_t){&c->ev[j]};
        c->consumed = j;
    }
    pthread_mutex_unlock(&pool_lock);
    free(cnt);
    /* NVTX names the program's thread only copied (sp_str_defer) are interned
     * here, off it (with SP_EV_NAMES_LATER: by sp_ev_settle, later); their text
     * is reused once the window is taken. The records are the window's, no
     * longer written by their threads. */
    if (names != SP_EV_NAMES_LATER)
        sp_ev_settle(window, v, v && names ? k : 0);
    *out = v;
    return v ? k : 0;
}

void sp_ev_settle(uint32_t window, const sp_event_ref_t *refs, size_t n)
{
    sp_str_settle_refs(window, n ? (void *const *)&refs[0].ev : NULL, n, sizeof *refs, offsetof(sp_event_t, name));
}

void sp_ev_release(void)
{
    pthread_mutex_lock(&pool_lock);
    for (uint32_t i = 0, used = chunks_used(); i < used; i++) {
        sp_chunk_t *c = chunk_at(i);
        if (!atomic_load_explicit(&c->owner, memory_order_acquire))
            continue;
        /* retired is read before count: a retired chunk's count is final. */
        int retired = atomic_load_explicit(&c->retired, memory_order_acquire);
        if (retired && c->consumed == atomic_load_explicit(&c->count, memory_order_acquire)) {
            atomic_store_explicit(&c->owner, NULL, memory_order_relaxed);
            push_free(i);
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
    if (sp_ev_pool_base)
        munmap(sp_ev_pool_base, (size_t)pool_chunks * SP_CHUNK_BYTES);
    sp_ev_pool_base = NULL;
    pool_chunks = 0;
    atomic_store(&pool_next, 0);
    sp_prefault_after_fork_child();
    atomic_store(&free_head, 0);
    atomic_store(&threads, NULL);
    atomic_store(&thread_count, 0);
    sp_ev_self = NULL;
    atomic_store(&cycle_max, 0);
    atomic_store(&cycle, 0);
    memset(capped, 0, sizeof capped);
    capped_next = 0;
    atomic_store(&capped_last, 0);
}
