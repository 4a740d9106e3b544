/* collectors/cupti_buffers.c — CUPTI's activity buffers: 4 MiB each, from a
 * small free list filled off the hot path (sp_cupti_preallocate when kinds go
 * on), capped by cupti_buffer_mb (a full cap makes CUPTI drop, and count,
 * records rather than stall a launch); the pages a collect's parse gave back
 * (madvise) and the cold list those buffers wait on, numbered by their
 * collect, until a thread of stepprof's touches them again (sp_cupti_rewarm):
 * the exporter after that collect's export, or the collecting thread when a
 * request (sp_cupti_set_rewarm_wake) says recording goes on meanwhile. Under
 * sp_cupti_shared.lock, like the records parsed from the buffers
 * (collectors/cupti_records.c, which walks them). */
#define _GNU_SOURCE
#include "cupti.h"
#include "cupti_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define BUF_BYTES (4u << 20)

#define sh sp_cupti_shared   /* collectors/cupti_records.c */

static size_t buf_cap, buf_live;   /* cupti_buffer_mb's bytes; those allocated */
static void *free_bufs[8];
static int nfree;
/* Buffers whose parsed pages were given back (sp_cupti_buf_release): handed to CUPTI
 * only when no warm one is left, since its writes, on the recording threads,
 * would fault the pages in again. sp_cupti_rewarm touches them again off the
 * program's threads and they rejoin free_bufs: the exporter's, once the
 * export of their collect is done (gen: that collect's number, so that an
 * export does not warm the buffers a later collect gave back during it); the
 * collecting thread's, as soon as kinds go back on or a request leaves at
 * most one warm one while cold ones wait (rewarm_wake: recording goes on
 * during an export). Such a request names the latest collect whose buffers
 * it may warm, as of when it is made: one the collecting thread comes to
 * after a later collect does not warm that collect's buffers before its
 * export, nor does the collect that turns kinds on warm its own. */
static struct {
    void *buf;
    size_t released; /* bytes from its start that were given back */
    uint64_t gen;
} cold_bufs[8];
static int ncold;
static uint64_t cold_gen;      /* collects that gave pages back (sh.lock) */
static void (*rewarm_wake)(uint64_t upto);
static __thread int releasing; /* this thread is in the collect's forced flush */

void sp_cupti_buf_cap(size_t bytes)
{
    buf_cap = bytes;
}

/* The collecting thread is asked to warm the cold buffers of collects up to
 * `upto` (nothing while it has not started, or when upto is 0: none). */
static void wake_rewarm(uint64_t upto)
{
    void (*wake)(uint64_t) = __atomic_load_n(&rewarm_wake, __ATOMIC_ACQUIRE);
    if (wake && upto)
        wake(upto);
}

void CUPTIAPI sp_cupti_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    void *b = NULL;
    pthread_mutex_lock(&sh.lock);
    if (nfree)
        b = free_bufs[--nfree];
    else if (ncold)
        b = cold_bufs[--ncold].buf;
    else if (buf_live + BUF_BYTES <= buf_cap && posix_memalign(&b, 8, BUF_BYTES) == 0)
        buf_live += BUF_BYTES;
    /* Recording goes on (the next window, while the last one's export runs) and
     * at most one warm buffer is left: the collecting thread warms the cold
     * ones while CUPTI fills this one and the next. */
    uint64_t warm_upto = nfree <= 1 && ncold ? cold_gen : 0;
    pthread_mutex_unlock(&sh.lock);
    wake_rewarm(warm_upto);
    if (!b)
        sp_cupti_launch_records_lost();   /* CUPTI drops records until a buffer comes back */
    *buf = b;
    *size = b ? BUF_BYTES : 0;
    *max_records = 0;
}

/* Only in the collect's forced flush (sp_cupti_release_pages), on the
 * exporter's side: never on a program's thread (a window's open flushes
 * there), and such a buffer waits among the cold ones until the export is
 * done (sp_cupti_rewarm). */
int sp_cupti_buf_releasing(void)
{
    return releasing;
}

uint8_t *sp_cupti_buf_release(uint8_t *from, uint8_t *to)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), b = (uintptr_t)to & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
    return b > a ? (uint8_t *)b : from;
}

/* sh.lock held: a buffer no list keeps, to be freed by the caller. */
static void *drop_buf(void *b)
{
    buf_live -= BUF_BYTES;
    return b;
}

/* sh.lock held: b onto the free list; NULL, or b to be freed when the list is full. */
static void *keep_warm(void *b)
{
    if (nfree == (int)(sizeof free_bufs / sizeof free_bufs[0]))
        return drop_buf(b);
    free_bufs[nfree++] = b;
    return NULL;
}

/* sh.lock held: a buffer that gave pages back waits cold, numbered by its collect. */
void *sp_cupti_buf_return(void *buf, size_t released)
{
    if (released && ncold < (int)(sizeof cold_bufs / sizeof cold_bufs[0])) {
        cold_bufs[ncold].buf = buf;
        cold_bufs[ncold].gen = cold_gen;
        cold_bufs[ncold++].released = released;
        return NULL;
    }
    return released ? drop_buf(buf) : keep_warm(buf);
}

uint64_t sp_cupti_release_pages(int on)
{
    releasing = on;
    pthread_mutex_lock(&sh.lock);
    uint64_t gen = on ? ++cold_gen : cold_gen;
    pthread_mutex_unlock(&sh.lock);
    return gen;
}

void sp_cupti_set_rewarm_wake(void (*wake)(uint64_t upto))
{
    __atomic_store_n(&rewarm_wake, wake, __ATOMIC_RELEASE);
}

/* sh.lock held: the index of the last cold buffer of collect `upto` or earlier; -1 if none. */
static int cold_upto(uint64_t upto)
{
    int i = ncold - 1;
    while (i >= 0 && cold_bufs[i].gen > upto)
        i--;
    return i;
}

/* One cold buffer of collect `upto` or earlier at a time off the list while
 * the pages it gave back are touched (a request meanwhile takes another, or a
 * new one), then onto the free list: resident again as before the close, no
 * more. Between two buffers, stop() may end it (a collect waits). */
int sp_cupti_rewarm(uint64_t upto, int (*stop)(void))
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (;;) {
        pthread_mutex_lock(&sh.lock);
        int i = cold_upto(upto);
        void *b = i >= 0 ? cold_bufs[i].buf : NULL;
        size_t n = i >= 0 ? cold_bufs[i].released : 0;
        if (i >= 0)
            cold_bufs[i] = cold_bufs[--ncold];
        pthread_mutex_unlock(&sh.lock);
        if (!b)
            return 0;
        for (size_t off = 0; off < n; off += page)
            ((volatile uint8_t *)b)[off] = 0;
        pthread_mutex_lock(&sh.lock);
        b = keep_warm(b);
        int left = cold_upto(upto) >= 0;
        pthread_mutex_unlock(&sh.lock);
        free(b);
        if (left && stop && stop())
            return 1;
    }
}

/* Kinds go on at warmup: fill the free list then, so CUPTI's first buffer
 * requests in the recorded steps do not allocate 4 MB on a launching thread.
 * Cold buffers count as free ones: they are warmed (recording again while an
 * export runs: before CUPTI needs them) rather than joined by new ones, which
 * would stay on once they are warm too. `own`: the collect that turns kinds
 * on, whose buffers wait for its export (0 on a program's thread). */
void sp_cupti_preallocate(uint64_t own)
{
    pthread_mutex_lock(&sh.lock);
    while (nfree + ncold < 2 && buf_live + BUF_BYTES <= buf_cap) {
        void *b = NULL;
        if (posix_memalign(&b, 8, BUF_BYTES) != 0)
            break;
        free_bufs[nfree++] = b;
        buf_live += BUF_BYTES;
    }
    uint64_t upto = own ? own - 1 : cold_gen;
    if (cold_upto(upto) < 0)
        upto = 0;
    pthread_mutex_unlock(&sh.lock);
    wake_rewarm(upto);
}
