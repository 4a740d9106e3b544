/* tests/unit/test_strings.c — the interned-string table (collectors/strings.c): ids stable and
 * distinct across growth to a million strings, the same id for the same text from 8 threads at
 * once (lock-free finds racing inserts and table doublings), sp_str_get round trips, the
 * per-thread pointer cache verified by content when a buffer is reused. */
#include "../../collectors/strings.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1000000, THREADS = 8, SHARED = 50000 };

static uint32_t ids[THREADS][SHARED];

static void *worker(void *arg)
{
    long t = (long)arg;
    char buf[32];
    /* Every thread interns the same SHARED names, each in its own order. */
    for (long i = 0; i < SHARED; i++) {
        long k = (i * 7919 + t * 104729) % SHARED;
        snprintf(buf, sizeof buf, "shared_%ld", k);
        ids[t][k] = (t & 1) ? sp_str_intern_cached(buf) : sp_str_intern(buf);
    }
    return NULL;
}

int main(void)
{
    char buf[32];
    uint32_t *mine = malloc(N * sizeof *mine);
    int bad = 0;
    for (long i = 0; i < N && mine; i++) {
        snprintf(buf, sizeof buf, "name_%ld", i);
        mine[i] = sp_str_intern_cached(buf); /* same buffer, new content each time */
        bad += mine[i] == 0 || (i && mine[i] == mine[i - 1]);
    }
    CHECK(mine && bad == 0, "%d names got id 0 or the previous id", bad);
    for (long i = 0; i < N && mine; i += 997) {
        snprintf(buf, sizeof buf, "name_%ld", i);
        if (strcmp(sp_str_get(mine[i]), buf) != 0 || sp_str_intern(buf) != mine[i])
            bad++;
    }
    CHECK(bad == 0, "%d names do not round trip after growth", bad);
    CHECK(strcmp(sp_str_get(0), "") == 0 && strcmp(sp_str_get(0x7fffffff), "") == 0, "unknown ids are \"\"");
    CHECK(sp_str_intern(NULL) == sp_str_intern(""), "NULL interns as \"\"");

    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (long t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    bad = 0;
    for (long k = 0; k < SHARED; k++) {
        snprintf(buf, sizeof buf, "shared_%ld", k);
        for (int t = 0; t < THREADS; t++)
            bad += ids[t][k] != ids[0][k] || ids[t][k] == 0;
        bad += strcmp(sp_str_get(ids[0][k]), buf) != 0;
    }
    CHECK(bad == 0, "%d disagreements between threads interning the same names", bad);
    free(mine);
    printf("test_strings: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
