/* collectors/cupti_window.c — which parsed CUPTI records belong to a window,
 * decided on one clock. CUPTI's clock is mapped onto CLOCK_MONOTONIC by an
 * offset; a calibration by back-to-back reads of cuptiGetTimestamp is only as
 * good as that call's agreement with the records' clock (tests/fakecuda
 * models them 50 us apart, FAKECUPTI_CLOCK_SKEW_NS). So at each window close
 * the offset is measured on the records themselves: stepprof's own
 * cudaDeviceSynchronize is timed on the host, and its RUNTIME record (the
 * latest on that thread: nothing else runs there during the close) must lie
 * inside that host span: the offset in use (first by back-to-back reads at
 * start) is kept where it agrees, else moved to the nearest offset that does
 * (a span's midpoint, or a recalibration under load, is off by hundreds of
 * ns to microseconds, enough to draw a kernel before its launch). The records
 * are then shifted onto the corrected
 * offset and split by the window's host bounds, the window's pure queries
 * left out there (cupti_api_filter). Callers hold cupti.c's lock. */
#include "cupti_window.h"

#include "cupti.h"

#include <stdlib.h>
#include <string.h>

int sp_cupti_marker_fix(sp_gpu_recs_t *r, uint32_t tid, uint32_t cbid, uint64_t h0, uint64_t h1, int64_t *offset)
{
    sp_gpu_api_t *api = r->calls;
    size_t n = r->ncalls, at = n;
    for (size_t i = 0; i < n; i++)
        if (api[i].kind == SP_GPU_RUNTIME && api[i].tid == tid && api[i].cbid == cbid &&
            (at == n || api[i].start >= api[at].start))
            at = i;
    if (at == n)
        return 0;
    /* stored = raw + offset; the true offset puts [start, end] inside [h0, h1] */
    int64_t lo = (int64_t)h0 - (int64_t)api[at].start, hi = (int64_t)h1 - (int64_t)api[at].end;
    int64_t fix = lo > 0 ? lo : hi < 0 ? hi : 0;   /* the offset in use, moved only as far as needed */
    memmove(&api[at], &api[at + 1], (n - at - 1) * sizeof *api);   /* stepprof's call, not the program's */
    r->ncalls = --n;
    for (size_t i = 0; i < n; i++) {
        if (api[i].start)
            api[i].start = (uint64_t)((int64_t)api[i].start + fix);
        if (api[i].end)
            api[i].end = (uint64_t)((int64_t)api[i].end + fix);
    }
    for (size_t i = 0; i < r->nwork; i++) {
        sp_gpu_event_t *e = &r->work[i];
        if (e->start)
            e->start = (uint64_t)((int64_t)e->start + fix);
        if (e->end)
            e->end = (uint64_t)((int64_t)e->end + fix);
        if (e->kind == SP_GPU_KERNEL && e->queued)
            e->queued = (uint64_t)((int64_t)e->queued + fix);
    }
    *offset += fix;
    return 1;
}

void sp_cupti_drop_thread(sp_gpu_recs_t *r, uint32_t tid)
{
    size_t k = 0;
    for (size_t i = 0; i < r->ncalls; i++)
        if (r->calls[i].tid != tid)
            r->calls[k++] = r->calls[i];
    r->ncalls = k;
}

uint64_t sp_cupti_take_queries(sp_query_rec_t *q, size_t *nq, int64_t shift, uint64_t begin, uint64_t end,
                               uint32_t tid)
{
    uint64_t in = 0;
    size_t keep = 0;
    for (size_t i = 0; i < *nq; i++) {
        uint64_t s = (uint64_t)((int64_t)q[i].start + shift);
        if (tid && q[i].tid == tid)
            continue;
        if (s > end)
            q[keep++] = (sp_query_rec_t){s, q[i].tid};
        else
            in += s >= begin;
    }
    *nq = keep;
    return in;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The correlation ids of the window's API records: a bitmap over their span
 * when they are dense (CUPTI numbers calls from 1: the usual case), an O(1)
 * test per GPU record; else sorted, and a binary search per record. */
typedef struct corr_set {
    uint32_t *ids;
    size_t n;
    uint64_t *bits;
    uint32_t lo, hi;
} corr_set_t;

static void corr_set_build(corr_set_t *c)
{
    c->lo = UINT32_MAX;
    c->hi = 0;
    for (size_t i = 0; i < c->n; i++) {
        c->lo = c->ids[i] < c->lo ? c->ids[i] : c->lo;
        c->hi = c->ids[i] > c->hi ? c->ids[i] : c->hi;
    }
    if (c->n && (uint64_t)(c->hi - c->lo) < 64 * (uint64_t)c->n + 65536 &&
        (c->bits = calloc((size_t)(c->hi - c->lo) / 64 + 1, sizeof *c->bits))) {
        for (size_t i = 0; i < c->n; i++) {
            uint32_t k = c->ids[i] - c->lo;
            c->bits[k / 64] |= 1ull << (k % 64);
        }
        return;
    }
    qsort(c->ids, c->n, sizeof *c->ids, cmp_u32);
}

static int corr_set_has(const corr_set_t *c, uint32_t id)
{
    if (c->bits)
        return id >= c->lo && id <= c->hi && (c->bits[(id - c->lo) / 64] >> ((id - c->lo) % 64) & 1);
    return bsearch(&id, c->ids, c->n, sizeof *c->ids, cmp_u32) != NULL;
}

/* 1: a record that starts at start, with correlation id corr, is the
 * window's; 0: it is not (-1: a later window's, kept). */
static int window_side(int api, uint64_t start, uint32_t corr, const corr_set_t *mine, uint64_t begin, uint64_t end)
{
    int ours = api ? (start >= begin && start <= end)
                   : (corr && corr_set_has(mine, corr)) || (!corr && start >= begin && start <= end);
    return ours ? 1 : start > end ? -1 : 0;
}

/* The side of record i of an array of GPU work (api 0) or of API calls (api 1). */
static int side_at(const void *recs, int api, size_t i, const corr_set_t *mine, uint64_t begin, uint64_t end)
{
    if (api) {
        const sp_gpu_api_t *e = (const sp_gpu_api_t *)recs + i;
        return window_side(1, e->start, e->correlation, mine, begin, end);
    }
    const sp_gpu_event_t *e = (const sp_gpu_event_t *)recs + i;
    return window_side(0, e->start, e->correlation, mine, begin, end);
}

static size_t count_later(const void *recs, int api, size_t n, const corr_set_t *mine, uint64_t begin, uint64_t end)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += side_at(recs, api, i, mine, begin, end) < 0;
    return k;
}

/* The window's records of an array of n (each `size` bytes) moved to its
 * front, in order, their count returned; the later windows' to `later`. */
static size_t split(void *recs, int api, size_t n, size_t size, void *later, const corr_set_t *mine, uint64_t begin,
                    uint64_t end)
{
    char *p = recs, *l = later;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int side = side_at(recs, api, i, mine, begin, end);
        if (side > 0 && k++ != i)
            memcpy(p + (k - 1) * size, p + i * size, size);
        else if (side < 0)
            memcpy(l, p + i * size, size), l += size;
    }
    return k;
}

size_t sp_cupti_take_window(sp_gpu_recs_t *r, uint64_t begin, uint64_t end, sp_gpu_recs_t *out)
{
    memset(out, 0, sizeof *out);
    corr_set_t mine = {malloc((r->ncalls ? r->ncalls : 1) * sizeof *mine.ids), 0, NULL, 0, 0};
    if (!mine.ids)
        return 0;
    for (size_t i = 0; i < r->ncalls; i++)
        if (r->calls[i].start >= begin && r->calls[i].start <= end)
            mine.ids[mine.n++] = r->calls[i].correlation;
    corr_set_build(&mine);
    size_t wlater = count_later(r->work, 0, r->nwork, &mine, begin, end);
    size_t alater = count_later(r->calls, 1, r->ncalls, &mine, begin, end);
    /* The window's records are nearly all of them: they stay where they are,
     * moved to the front, and the arrays become the window's; the few of
     * later windows move to new ones (a copy of the whole would be the
     * export's largest allocation: 68 bytes per trace event). */
    sp_gpu_event_t *wl = wlater ? malloc(wlater * sizeof *wl) : NULL;
    sp_gpu_api_t *al = alater ? malloc(alater * sizeof *al) : NULL;
    if ((wlater && !wl) || (alater && !al)) {
        free(wl);
        free(al);
        free(mine.ids);
        free(mine.bits);
        return 0;
    }
    out->work = r->work;
    out->nwork = out->capwork = split(r->work, 0, r->nwork, sizeof *wl, wl, &mine, begin, end);
    out->calls = r->calls;
    out->ncalls = out->capcalls = split(r->calls, 1, r->ncalls, sizeof *al, al, &mine, begin, end);
    r->work = wl;
    r->nwork = r->capwork = wlater;
    r->calls = al;
    r->ncalls = r->capcalls = alater;
    free(mine.ids);
    free(mine.bits);
    return out->nwork + out->ncalls;
}
