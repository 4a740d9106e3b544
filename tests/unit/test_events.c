/* tests/unit/test_events.c — the event pool's lock-free chunk hand-out
 * (collectors/events.c): writer threads fill chunks from a pool small enough
 * that chunks are recycled many times, while this thread collects and
 * releases them as the exporter does. Every record must be seen exactly
 * once, intact, or counted as dropped (a batch lists chunks in pool order,
 * not in time order, so each record is ticked off in a bitmap); and the
 * per-cycle cap must stop a window once its records reach it. Run it under -fsanitize=thread
 * too (SP_UNIT_TSAN=1 make ...): the races it looks for are there. */
#define _GNU_SOURCE
#include "../../collectors/bigmem.h"
#include "../../collectors/events.h"
#include "check.h"

#include <pthread.h>
#include <stdlib.h>

/* Each round the writers write ROUND records each while the exporter
 * collects concurrently, then all meet at a barrier after a last collection:
 * a round needs at most 4 chunks per writer, so with 64 chunks nothing is
 * dropped, and ROUNDS rounds pass ~100 times the pool through. */
#define WRITERS 4
#define ROUND (3u * SP_CHUNK_EVENTS)
#define ROUNDS 100u
#define PER_WRITER (ROUND * ROUNDS)
#define WINDOW 7u

static _Atomic int writers_done;
static pthread_barrier_t round_end;

static void *writer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    sp_thread_t *t = sp_ev_thread();
    for (uint32_t i = 0; i < PER_WRITER; i++) {
        sp_event_t *e = sp_ev_reserve(t, WINDOW);
        if (e) {
            e->window = WINDOW;
            e->a[0] = id;
            e->a[1] = i;
            sp_ev_commit(t);
        }
        if ((i + 1) % ROUND == 0) {
            atomic_fetch_add(&writers_done, 1);
            pthread_barrier_wait(&round_end);
        }
    }
    return NULL;
}

static unsigned char seen_rec[WRITERS][PER_WRITER];

static size_t take(int *bad)
{
    sp_event_ref_t *v = NULL;
    size_t n = sp_ev_collect(WINDOW, 0, &v);
    for (size_t k = 0; k < n; k++) {
        uint64_t id = v[k].ev->a[0], seq = v[k].ev->a[1];
        if (id >= WRITERS || seq >= PER_WRITER || seen_rec[id][seq])
            (*bad)++;
        else
            seen_rec[id][seq] = 1;
    }
    sp_big_free(v);
    sp_ev_release();
    return n;
}

static void recycled_chunks(void)
{
    pthread_t th[WRITERS];
    pthread_barrier_init(&round_end, NULL, WRITERS + 1);
    for (uintptr_t i = 0; i < WRITERS; i++)
        pthread_create(&th[i], NULL, writer, (void *)i);
    int bad = 0;
    size_t seen = 0;
    for (unsigned r = 1; r <= ROUNDS; r++) {
        while (atomic_load(&writers_done) < (int)(r * WRITERS))
            seen += take(&bad);
        seen += take(&bad);
        pthread_barrier_wait(&round_end);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    seen += take(&bad);
    uint64_t dropped = sp_ev_dropped_total();
    CHECK(bad == 0, "%d records seen twice, out of order or corrupted", bad);
    CHECK(dropped == 0, "%llu records dropped: chunks were not recycled", (unsigned long long)dropped);
    CHECK(seen == (uint64_t)WRITERS * PER_WRITER, "%zu records seen of %u written", seen, WRITERS * PER_WRITER);
}

static void *cap_writer(void *arg)
{
    sp_thread_t *t = sp_ev_thread();
    for (uint32_t i = 0; i < 20u * SP_CHUNK_EVENTS; i++) {
        sp_event_t *e = sp_ev_reserve(t, 9u);
        if (e) {
            e->window = 9u;
            sp_ev_commit(t);
        }
    }
    return arg;
}

/* The per-cycle cap: recording stops once full chunks hold the cap's records
 * (counted at most one chunk late per thread), and the window is noted. */
static void cycle_cap(void)
{
    uint64_t cap = 10u * SP_CHUNK_EVENTS, before = sp_ev_dropped_total();
    sp_ev_set_cycle_cap(cap);
    sp_ev_set_gate(9u);
    pthread_t th;
    pthread_create(&th, NULL, cap_writer, NULL);
    pthread_join(th, NULL);
    sp_event_ref_t *v = NULL;
    size_t n = sp_ev_collect(9u, 0, &v);
    sp_big_free(v);
    sp_ev_release();
    CHECK(n >= cap && n <= cap + SP_CHUNK_EVENTS, "%zu records kept under a cap of %llu", n, (unsigned long long)cap);
    CHECK(sp_ev_dropped_total() - before == 20u * SP_CHUNK_EVENTS - n, "dropped records not counted");
    CHECK(sp_ev_window_capped(9u) && !sp_ev_window_capped(WINDOW), "capped windows wrong");
}

int main(void)
{
    if (sp_ev_pool_init(4) != 0) { /* 64 chunks */
        printf("cannot map the pool\n");
        return 1;
    }
    sp_ev_set_gate(WINDOW);
    recycled_chunks();
    cycle_cap();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
