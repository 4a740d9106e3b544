/* collectors/prefault.c — see prefault.h. The helper populates in 256 KiB
 * steps with MADV_POPULATE_WRITE, falling back to touching one byte per
 * 4 KiB page on kernels without it, and keeps a lead of populated memory in
 * front of the allocation frontier. The writers only publish the frontier
 * (one CAS per 64 KiB chunk, no lock); the helper refills the lead
 * whole and then sleeps, and a writer wakes it only once WAKE of the lead is
 * spent: one futex wake per MiB, not one lock and signal per chunk. When
 * a writer outruns it (the frontier passes what is populated, so the faults
 * landed on the writer), the lead doubles, up to MAX_LEAD. The helper has
 * every signal blocked. */
#define _GNU_SOURCE
#include "prefault.h"

#include "threads.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

/* 256 KiB, not one 2 MiB huge page per call: MADV_POPULATE_WRITE holds the
 * process's mmap lock for the call, and with THP compaction a 2 MiB step took
 * 4-10 ms on the test VM, during which the program's own mmap, brk and
 * mprotect (malloc, a new thread's stack) waited: a window close that
 * allocated measured 1-10 ms instead of 0.1 ms. The helper keeps stepping
 * while behind, so a fast writer gets back-to-back steps, each short. */
#define STEP ((size_t)256 << 10)
#define AHEAD ((size_t)8 << 20)
/* A writer at ~1.2 GB/s spends 8 MiB in ~7 ms, about one compaction stall;
 * 64 MiB is the most RSS a stopped recording leaves populated unused. */
#define MAX_LEAD ((size_t)64 << 20)
/* A writer wakes the helper once this much of the lead is spent: early
 * enough that a helper slow to be scheduled on a busy machine still refills
 * in time, rarely enough that the writer pays a wake once per 16 chunks. */
#define WAKE ((size_t)1 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static unsigned char *base;
static size_t size;
static _Atomic size_t frontier;    /* written by the pool's writers */
static _Atomic size_t populated;   /* written by the helper */
static _Atomic size_t lead;        /* written by the helper */
static _Atomic int sleeping;       /* 1: the helper waits for a wake */

static void populate(unsigned char *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
        return;
#endif
    for (size_t i = 0; i < n; i += 4096)
        ((volatile unsigned char *)p)[i] = 0;
}

static size_t target(size_t front, size_t ahead)
{
    return front + ahead < size ? front + ahead : size;
}

/* Sleeps until a writer wakes it, unless the frontier moved meanwhile:
 * sleeping is set before the frontier is read again, and a writer stores
 * the frontier before it reads sleeping, so one of the two sees the other. */
static void nap(size_t done)
{
    pthread_mutex_lock(&lock);
    atomic_store(&sleeping, 1);
    if (done < target(atomic_load(&frontier), atomic_load_explicit(&lead, memory_order_relaxed)))
        atomic_store(&sleeping, 0);
    while (atomic_load(&sleeping))
        pthread_cond_wait(&wake, &lock);
    pthread_mutex_unlock(&lock);
}

static void *helper(void *arg)
{
    (void)arg;
    int grown = 0; /* the lead grows once per refill, not once per step */
    for (;;) {
        size_t done = atomic_load_explicit(&populated, memory_order_relaxed);
        size_t front = atomic_load_explicit(&frontier, memory_order_relaxed);
        size_t ahead = atomic_load_explicit(&lead, memory_order_relaxed);
        if (front > done && ahead < MAX_LEAD && !grown) {
            atomic_store_explicit(&lead, ahead *= 2, memory_order_relaxed);
            grown = 1;
        }
        size_t want = target(front, ahead);
        if (done >= want) {
            nap(done);
            grown = 0;
            continue;
        }
        size_t n = want - done < STEP ? want - done : STEP;
        populate(base + done, n);
        atomic_store_explicit(&populated, done + n, memory_order_relaxed);
    }
    return NULL;
}

void sp_prefault_start(void *b, size_t bytes)
{
    base = b;
    size = bytes;
    size_t first = bytes < AHEAD ? bytes : AHEAD;
    madvise(b, bytes, MADV_HUGEPAGE);
    populate(base, first);
    atomic_store(&populated, first);
    atomic_store(&lead, AHEAD);
    atomic_store(&frontier, 0);
    sp_thread_spawn(helper, NULL, "stepprof-fault", NULL);
}

void sp_prefault_need(size_t offset)
{
    /* Writers take chunks concurrently: the frontier only moves forward. */
    size_t f = atomic_load_explicit(&frontier, memory_order_relaxed);
    while (f < offset && !atomic_compare_exchange_weak(&frontier, &f, offset))
        ;
    if (!atomic_load(&sleeping))
        return;
    size_t rest = atomic_load_explicit(&lead, memory_order_relaxed) - WAKE;
    if (offset + rest < atomic_load_explicit(&populated, memory_order_relaxed) ||
        atomic_load_explicit(&populated, memory_order_relaxed) >= size)
        return;
    if (atomic_exchange(&sleeping, 0)) {
        pthread_mutex_lock(&lock);
        pthread_cond_signal(&wake);
        pthread_mutex_unlock(&lock);
    }
}

void sp_prefault_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    base = NULL;
    size = 0;
    atomic_store(&frontier, 0);
    atomic_store(&populated, 0);
    atomic_store(&lead, 0);
    atomic_store(&sleeping, 0);
}
