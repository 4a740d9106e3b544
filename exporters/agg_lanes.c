/* exporters/agg_lanes.c — the host lanes of a report set: its host and
 * memory events grouped by thread ((pid, tid) order) and in canonical order
 * inside each, for the per-thread nesting pass (agg.c). Each distinct
 * (pid, tid) gets its rank among them, found through an index by value; a
 * counting sort by rank then orders the events in linear time, where a
 * comparison sort of every event was the nesting pass's main cost. */
#include "agg_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct lane_key {
    long pid, tid;
} lane_key_t;

static int cmp_lane(const void *pa, const void *pb)
{
    const lane_key_t *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return (a->tid > b->tid) - (a->tid < b->tid);
}

typedef struct lanes {
    lane_key_t *key;     /* distinct lanes, first-seen order, then sorted */
    uint32_t *slot;      /* open addressing: lane number + 1, 0 = empty */
    uint32_t *rank;      /* lane number -> rank in (pid, tid) order */
    size_t n, cap;       /* cap: slots, a power of two >= 2 * n */
} lanes_t;

static size_t lane_slot(const lanes_t *l, long pid, long tid)
{
    uint64_t h = ((uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)tid) * 0xff51afd7ed558ccdull;
    size_t i = (size_t)(h >> 32) & (l->cap - 1);
    while (l->slot[i] && (l->key[l->slot[i] - 1].pid != pid || l->key[l->slot[i] - 1].tid != tid))
        i = (i + 1) & (l->cap - 1);
    return i;
}

/* The lane number of (pid, tid), new ones appended; -1 when out of memory. */
static long lane_of(lanes_t *l, long pid, long tid)
{
    if ((l->n + 1) * 2 > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint32_t *slot = calloc(cap, sizeof *slot);
        lane_key_t *key = realloc(l->key, cap / 2 * sizeof *key);
        if (!slot || !key) {
            free(slot);
            l->key = key ? key : l->key;
            return -1;
        }
        free(l->slot);
        l->slot = slot;
        l->key = key;
        l->cap = cap;
        for (size_t k = 0; k < l->n; k++)
            l->slot[lane_slot(l, l->key[k].pid, l->key[k].tid)] = (uint32_t)(k + 1);
    }
    size_t i = lane_slot(l, pid, tid);
    if (!l->slot[i]) {
        l->key[l->n] = (lane_key_t){pid, tid};
        l->slot[i] = (uint32_t)++l->n;
    }
    return (long)l->slot[i] - 1;
}

/* Rank of every lane in (pid, tid) order. */
static int lanes_rank(lanes_t *l)
{
    lane_key_t *sorted = malloc((l->n ? l->n : 1) * sizeof *sorted);
    l->rank = malloc((l->n ? l->n : 1) * sizeof *l->rank);
    if (!sorted || !l->rank) {
        free(sorted);
        return -1;
    }
    if (l->n)   /* no lanes: no key array either */
        memcpy(sorted, l->key, l->n * sizeof *sorted);
    qsort(sorted, l->n, sizeof *sorted, cmp_lane);
    for (size_t k = 0; k < l->n; k++)
        l->rank[l->slot[lane_slot(l, sorted[k].pid, sorted[k].tid)] - 1] = (uint32_t)k;
    free(sorted);
    return 0;
}

static void lanes_free(lanes_t *l)
{
    free(l->key);
    free(l->slot);
    free(l->rank);
}

/* A counting sort by lane rank: stable, so canonical order inside a lane. */
long sp_rep_lane_order(const sp_rep_set_t *s, uint32_t **order_out, uint32_t **lane_out)
{
    lanes_t l = {0};
    uint32_t *lane = malloc((s->n ? s->n : 1) * sizeof *lane), *order = NULL, *next = NULL;
    size_t m = 0;
    int ok = lane != NULL;
    for (size_t i = 0; ok && i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        long k = sp_rep_is_host(e->cat) || e->cat == SP_REP_MEMORY ? lane_of(&l, e->pid, e->tid) : LONG_MAX;
        ok = k >= 0;
        lane[i] = k == LONG_MAX ? UINT32_MAX : (uint32_t)k;
        m += k != LONG_MAX;
    }
    ok = ok && lanes_rank(&l) == 0 && (order = malloc((m ? m : 1) * sizeof *order)) != NULL &&
         (next = calloc(l.n + 1, sizeof *next)) != NULL;
    for (size_t i = 0; ok && i < s->n; i++)   /* counted at rank + 1: after the sums, next[rank] is where it starts */
        if (lane[i] != UINT32_MAX)
            next[l.rank[lane[i]] + 1]++;
    for (size_t r = 1; ok && r <= l.n; r++)
        next[r] += next[r - 1];
    for (size_t i = 0; ok && i < s->n; i++)
        if (lane[i] != UINT32_MAX)
            order[next[l.rank[lane[i]]]++] = (uint32_t)i;
    lanes_free(&l);
    free(next);
    if (!ok) {
        free(lane);
        free(order);
        return -1;
    }
    *order_out = order;
    *lane_out = lane;
    return (long)m;
}
