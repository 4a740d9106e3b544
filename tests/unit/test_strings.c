/* tests/unit/test_strings.c — the interned-string table (collectors/strings.c): ids stable and
 * distinct across growth to a million strings, the same id for the same text from 8 threads at
 * once (lock-free finds racing inserts and table doublings), sp_str_get round trips, the
 * per-thread pointer cache verified by content when a buffer is reused, batches (sp_str_intern_many)
 * agreeing with one-by-one interning. The deferred-text log
 * (collectors/strings_log.c): deferred ids settle to the interned id of their text; text too
 * long for a block is interned at once; texts of dropped records are taken back in nesting order; the log's blocks are reused once their windows are
 * settled (more text than the log can hold goes through it without a fallback); 64 writer
 * threads and short-lived threads defer window r+1 while the collecting side settles window r
 * (lock-free block refills racing the reuse of blocks), every name checked. sp_str_defer_plain
 * (the recording NVTX push's one pass over its text): texts of 0 to 40 bytes ending at the last
 * byte before an unmapped page are copied whole or left to sp_str_defer (never a fault), a ','
 * before the NUL refuses the text, one after it does not; texts that start in a page's last 32
 * bytes are copied only when no 16-byte load straddles the boundary. */
#include "../../collectors/strings.h"
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* The deferred-text log's bound (unit.mk builds it with 1024 blocks of 16 KiB). */
#ifndef SP_STR_LOG_BLOCKS
#define SP_STR_LOG_BLOCKS 16384u
#endif
#define LOG_BYTES ((size_t)SP_STR_LOG_BLOCKS * 16384u)
enum { WRITERS = 64, PER = 200, ROUNDS = 100, SHORT = 50 };

static void text_of(char *buf, size_t len, long t, long window, long i)
{
    if (i % 4 == 0) /* a quarter of the names repeat across writers and windows */
        snprintf(buf, len, "common_%ld", i % 40);
    else
        snprintf(buf, len, "w%ld_t%ld_i%ld", window, t, i);
}

static int settle_and_check(uint32_t window, uint32_t *ids, size_t n, long writers)
{
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        bad += !(ids[k] & SP_STR_DEFERRED);
    sp_str_settle(window, ids, n, sizeof *ids);
    char buf[64];
    for (size_t k = 0; k < n; k++) {
        long t = (long)k / PER, i = (long)k % PER;
        text_of(buf, sizeof buf, t < writers ? t : 1000 + t, window, i);
        bad += ids[k] == 0 || (ids[k] & SP_STR_DEFERRED) || strcmp(sp_str_get(ids[k]), buf) != 0;
    }
    return bad;
}

/* Deferred id `id` of `window` settles to an interned id of `text`. */
static int settles_to(uint32_t id, uint32_t window, const char *text)
{
    sp_str_settle(window, &id, 1, sizeof id);
    return strcmp(sp_str_get(id), text) == 0;
}

static void check_defer_basics(void)
{
    char buf[64];
    uint32_t ids[3 * PER];
    for (long i = 0; i < 3 * PER; i++) {
        text_of(buf, sizeof buf, i / PER, 1, i % PER);
        ids[i] = sp_str_defer(buf, 1);
    }
    CHECK(settle_and_check(1, ids, 3 * PER, 3) == 0, "deferred names settle to their interned text");
    char *big = malloc(20000);
    if (big) {
        memset(big, 'x', 19999);
        big[19999] = 0;
        uint32_t id = sp_str_defer(big, 2);
        CHECK(!(id & SP_STR_DEFERRED) && strcmp(sp_str_get(id), big) == 0, "text longer than a block is interned");
        free(big);
    }
    uint32_t none = 5;
    sp_str_settle(2, &none, 1, sizeof none);
    CHECK(none == 5, "settling leaves interned ids alone");
    /* Dropped records give their text back, innermost first; an inner one kept pins the outer. */
    uint32_t a = sp_str_defer("outer", 3), b = sp_str_defer("inner", 3);
    sp_str_undefer(a);
    uint32_t c = sp_str_defer("next", 3);
    CHECK(c != a && c != b, "a text under another is not taken back");
    sp_str_undefer(c);
    sp_str_undefer(b);
    sp_str_undefer(a);
    uint32_t d = sp_str_defer("again", 3);
    CHECK(d == a, "texts taken back in nesting order free their space");
    CHECK(settles_to(d, 3, "again"), "a reused place settles to its new text");
}

/* Start/end ranges overlap: a record dropped while text after its own is still in use gives its
 * text back with that text. Three times the log's size in dropped overlapping names (of 1 to 40
 * bytes: the walk back over earlier texts crosses 8-byte slots) must not fill it: every name stays
 * deferred, and the space is the same after each round. */
static void check_overlapping_drops(void)
{
    char buf[64];
    long rounds = (long)(3 * LOG_BYTES / (3 * 48)), bad = 0;
    uint32_t first = 0;
    for (long r = 0; r < rounds; r++) {
        uint32_t id[3];
        for (int k = 0; k < 3; k++) {
            int len = 1 + (int)((r * 7 + k * 13) % 40);
            memset(buf, 'a' + k, (size_t)len);
            buf[len] = 0;
            id[k] = sp_str_defer(buf, 4);
            bad += !(id[k] & SP_STR_DEFERRED);
        }
        if (!r)
            first = id[0];
        bad += id[0] != first;
        /* ended in the order a, c, b: a marked, c taken back, then b and a with it */
        sp_str_undefer(id[0]);
        sp_str_undefer(id[2]);
        sp_str_undefer(id[1]);
    }
    CHECK(bad == 0, "%ld of %ld rounds of overlapping dropped names not deferred in the same place", bad, rounds);
    /* A text kept (stored) under dropped ones stops the taking back there. */
    uint32_t kept = sp_str_defer("kept", 4), a = sp_str_defer("a_dropped_name_longer_than_8", 4),
             b = sp_str_defer("b", 4);
    sp_str_undefer(a);
    sp_str_undefer(b);
    CHECK(sp_str_defer("next", 4) == a && settles_to(kept, 4, "kept"),
          "dropped texts above a kept one are taken back down to it, and it stays intact");
}

/* Batches of new and known names give sp_str_intern's ids. */
static void check_intern_many(void)
{
    enum { M = 100000 };
    char (*buf)[24] = malloc(M * sizeof *buf);
    const char **txt = malloc(M * sizeof *txt);
    uint32_t *ids = malloc(M * sizeof *ids);
    int bad = 0;
    for (long i = 0; buf && txt && ids && i < M; i++) {
        snprintf(buf[i], sizeof buf[i], i % 3 ? "many_%ld" : "name_%ld", i); /* name_: interned already */
        txt[i] = buf[i];
    }
    for (long i = 0; buf && txt && ids && i < M; i += 1000)
        sp_str_intern_many(txt + i, ids + i, (size_t)(M - i < 1000 ? M - i : 1000));
    for (long i = 0; buf && txt && ids && i < M; i++)
        bad += ids[i] == 0 || ids[i] != sp_str_intern(txt[i]) || strcmp(sp_str_get(ids[i]), txt[i]) != 0;
    CHECK(buf && txt && ids && bad == 0, "%d names interned in batches differ from one by one", bad);
    free(buf);
    free(txt);
    free(ids);
}

/* One writer per window, each window settled before the next: 1.5x the log's bound in all. */
static void check_reuse(void)
{
    enum { LEN = 200, NAMES = 1000 };
    long windows = (long)(LOG_BYTES * 3 / 2 / (NAMES * (LEN + 8)));
    char buf[LEN + 1];
    uint32_t *ids = malloc(NAMES * sizeof *ids);
    int bad = 0;
    for (long w = 10; ids && w < 10 + windows; w++) {
        for (long i = 0; i < NAMES; i++) {
            memset(buf, 'a' + (int)(i % 26), LEN);
            snprintf(buf, sizeof buf, "reuse_%ld", i);
            buf[strlen(buf)] = '.';
            buf[LEN] = 0;
            ids[i] = sp_str_defer(buf, (uint32_t)w);
            bad += !(ids[i] & SP_STR_DEFERRED);
        }
        sp_str_settle((uint32_t)w, ids, NAMES, sizeof *ids);
        bad += strncmp(sp_str_get(ids[NAMES - 1]), "reuse_999.", 10) != 0;
    }
    CHECK(ids && bad == 0, "%d names not deferred or wrong: blocks of settled windows not reused", bad);
    free(ids);
}

static pthread_barrier_t round_done;
static uint32_t round_ids[2][(WRITERS + 1) * PER];

static void *writer(void *arg)
{
    long t = (long)arg;
    char buf[64];
    for (long r = 0; r < ROUNDS; r++) {
        uint32_t window = (uint32_t)(100000 + r + 1);
        for (long i = 0; i < PER; i++) {
            text_of(buf, sizeof buf, t, window, i);
            round_ids[r & 1][t * PER + i] = sp_str_defer(buf, window);
        }
        pthread_barrier_wait(&round_done);
    }
    return NULL;
}

/* A thread that defers SHORT names and exits: its block is retired at exit. */
static void *short_writer(void *arg)
{
    uint32_t window = (uint32_t)(uintptr_t)arg;
    char buf[64];
    for (long i = 0; i < SHORT; i++) {
        text_of(buf, sizeof buf, 1000 + WRITERS, window, i);
        round_ids[window & 1 ? 0 : 1][WRITERS * PER + i] = sp_str_defer(buf, window);
    }
    return NULL;
}

static void check_concurrent(void)
{
    pthread_t th[WRITERS];
    pthread_barrier_init(&round_done, NULL, WRITERS + 1);
    for (long t = 0; t < WRITERS; t++)
        pthread_create(&th[t], NULL, writer, (void *)t);
    int bad = 0;
    /* Round r: the writers defer window base+r+1 into round_ids[r & 1]; meanwhile this thread
     * runs a short-lived writer for it and settles window base+r (round_ids[(r - 1) & 1]). */
    for (long r = 0; r <= ROUNDS; r++) {
        uint32_t window = (uint32_t)(100000 + r + 1);
        pthread_t sh;
        int spawned = r < ROUNDS && pthread_create(&sh, NULL, short_writer, (void *)(uintptr_t)window) == 0;
        if (r > 0)
            bad += settle_and_check(window - 1, round_ids[(r - 1) & 1], WRITERS * PER + SHORT, WRITERS);
        if (spawned)
            pthread_join(sh, NULL);
        if (r < ROUNDS)
            pthread_barrier_wait(&round_done);
    }
    for (long t = 0; t < WRITERS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&round_done);
    CHECK(bad == 0, "%d names wrong with %d writers deferring while windows settle", bad, WRITERS);
}

/* Texts ending right before an unmapped page, each length 0..40, with no ',', a ',' inside, and
 * a ',' just after the NUL: sp_str_defer_plain either copies the text (it settles to it) or,
 * when it would have to read into the next page or finds a ',', keeps nothing. */
static void check_defer_plain(void)
{
    enum { WINDOW = 200000 };
    char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED && mprotect(page + 4096, 4096, PROT_NONE) == 0, "a page before an unmapped one");
    if (page == MAP_FAILED)
        return;
    (void)sp_str_defer("first", WINDOW); /* the thread's block */
    int bad = 0, copied = 0;
    for (int len = 0; len <= 40; len++) {
        char *text = page + 4096 - (len + 1);
        for (int i = 0; i < len; i++)
            text[i] = (char)('a' + i % 26);
        text[len] = 0;
        uint32_t id = sp_str_defer_plain(text, WINDOW);
        copied += id != 0;
        bad += id && (!(id & SP_STR_DEFERRED) || !settles_to(id, WINDOW, text));
        bad += !id && (len + 1) % 16 == 0; /* its 16-byte loads all stay in the page */
        if (len >= 1) {
            text[len / 2] = ',';
            bad += sp_str_defer_plain(text, WINDOW) != 0;
            text[len / 2] = 'x';
        }
        char *mid = page + 1024;
        memcpy(mid, text, (size_t)len + 1);
        mid[len + 1] = ',';
        id = sp_str_defer_plain(mid, WINDOW);
        bad += !id || !settles_to(id, WINDOW, mid);
    }
    CHECK(bad == 0 && copied >= 2, "%d texts wrong (%d copied at a page's end)", bad, copied);
    munmap(page, 8192);
}

/* Texts that start at each of a page's last 32 bytes and run on into the next (mapped) page, 0 to
 * 40 bytes: sp_str_defer_plain copies one only when none of its 16-byte loads would straddle the
 * page boundary (offsets 4081..4095), and refuses it with a ',' at bytes 0, 15, 16 or its last;
 * sp_str_defer keeps every one. */
static void check_defer_plain_page_cross(void)
{
    enum { WINDOW = 200001 };
    char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED, "two pages");
    if (page == MAP_FAILED)
        return;
    int bad = 0;
    for (int start = 4064; start < 4096; start++)
        for (int len = 0; len <= 40; len++) {
            char *text = page + start;
            for (int i = 0; i < len; i++)
                text[i] = (char)('a' + (i + start) % 26);
            text[len] = 0;
            int straddles = 0;
            for (int n = 0; n <= len; n += 16)
                straddles |= (start + n) % 4096 > 4080;
            uint32_t id = sp_str_defer_plain(text, WINDOW);
            bad += id && (straddles || !settles_to(id, WINDOW, text));
            const int at[] = {0, 15, 16, len - 1};
            for (int k = 0; k < 4; k++) {
                if (at[k] < 0 || at[k] >= len)
                    continue;
                char c = text[at[k]];
                text[at[k]] = ',';
                bad += sp_str_defer_plain(text, WINDOW) != 0;
                bad += !settles_to(sp_str_defer(text, WINDOW), WINDOW, text);
                text[at[k]] = c;
            }
        }
    CHECK(bad == 0, "%d texts across a page boundary wrong", bad);
    munmap(page, 8192);
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
    check_intern_many();
    check_defer_basics();
    check_overlapping_drops();
    check_reuse();
    check_concurrent();
    check_defer_plain();
    check_defer_plain_page_cross();
    printf("test_strings: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
