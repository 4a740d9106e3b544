/* collectors/prefault.c — see prefault.h. The helper populates in 256 KiB
 * steps with MADV_POPULATE_WRITE, falling back to touching
 * one byte per 4 KiB page on kernels without it, and stays AHEAD bytes in
 * front of the allocation frontier. It sleeps on a condition variable between
 * stretches and has every signal blocked. */
#define _GNU_SOURCE
#include "prefault.h"

#include "threads.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

/* 256 KiB, not one 2 MiB huge page per call: MADV_POPULATE_WRITE holds the
 * process's mmap lock for the call, and with THP compaction a 2 MiB step took
 * 4-10 ms on the test VM, during which the program's own mmap, brk and
 * mprotect (malloc, a new thread's stack) waited: a window close that
 * allocated measured 1-10 ms instead of 0.1 ms. */
#define STEP (256u << 10)
#define AHEAD (8u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static unsigned char *base;
static size_t size, populated, wanted;

static void populate(unsigned char *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
        return;
#endif
    for (size_t i = 0; i < n; i += 4096)
        ((volatile unsigned char *)p)[i] = 0;
}

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (populated >= wanted)
            pthread_cond_wait(&wake, &lock);
        size_t from = populated, n = wanted - populated;
        if (n > STEP)
            n = STEP;
        pthread_mutex_unlock(&lock);
        populate(base + from, n);
        pthread_mutex_lock(&lock);
        populated = from + n;
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
    populated = wanted = first;
    sp_thread_spawn(helper, NULL, "stepprof-fault", NULL);
}

void sp_prefault_need(size_t offset)
{
    size_t target = offset + AHEAD < size ? offset + AHEAD : size;
    if (target <= wanted)
        return;
    pthread_mutex_lock(&lock);
    if (target > wanted) {
        wanted = target;
        pthread_cond_signal(&wake);
    }
    pthread_mutex_unlock(&lock);
}

void sp_prefault_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    base = NULL;
    size = populated = wanted = 0;
}
