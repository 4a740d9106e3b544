/* exporters/agg_lanes.c — 12-byte keys by value: the report set's (pid,
 * tid, device) triples, which an event holds as a 32-bit number instead of
 * ten bytes, its details (shape, stack, copy direction, launch flag: twelve
 * bytes most events share) as 28-bit numbers, and the host threads of the
 * per-thread nesting pass (agg.c), each
 * with its stack of open events. The pass visits the events once in
 * canonical order and keeps one stack per thread, so its memory is the
 * threads and their depth; ordering the events by thread first took two
 * indices per event and a stack sized for all of them. */
#include "agg_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LANES (1u << 31)   /* sp_rep_event_t's lane fields, as a long */
#define MAX_DETAILS (1u << 28) /* sp_rep_event_t's detail field */

_Static_assert(sizeof(sp_rep_lane_t) == SP_REP_KEY_BYTES && sizeof(sp_rep_detail_t) == SP_REP_KEY_BYTES,
               "lanes and details share one index");

static const void *key_at(const sp_rep_lane_index_t *x, size_t k)
{
    return (const char *)x->key + k * SP_REP_KEY_BYTES;
}

static size_t slot_of(const sp_rep_lane_index_t *x, const void *k)
{
    uint32_t w[3];
    memcpy(w, k, sizeof w);
    uint64_t h = (((uint64_t)w[0] * 0x9e3779b97f4a7c15ull ^ w[1]) * 0xff51afd7ed558ccdull) ^ w[2];
    size_t i = (size_t)(h >> 32) & (x->cap - 1);
    while (x->slot[i] && memcmp(key_at(x, x->slot[i] - 1), k, SP_REP_KEY_BYTES) != 0)
        i = (i + 1) & (x->cap - 1);
    return i;
}

static int grow(sp_rep_lane_index_t *x, void **parallel, size_t item)
{
    size_t cap = x->cap ? x->cap * 2 : 64;
    uint32_t *slot = calloc(cap, sizeof *slot);
    void *key = realloc(x->key, cap / 2 * SP_REP_KEY_BYTES);
    x->key = key ? key : x->key;
    void *par = parallel && key ? realloc(*parallel, cap / 2 * item) : NULL;
    if (par)
        *parallel = par;
    if (!slot || !key || (parallel && !par)) {
        free(slot);
        return -1;
    }
    free(x->slot);
    x->slot = slot;
    x->cap = cap;
    for (size_t k = 0; k < x->n; k++)
        x->slot[slot_of(x, key_at(x, k))] = (uint32_t)(k + 1);
    return 0;
}

long sp_rep_lane_find(sp_rep_lane_index_t *x, const void *k, void **parallel, size_t item)
{
    if (x->n && memcmp(key_at(x, x->last), k, SP_REP_KEY_BYTES) == 0)
        return x->last;
    if ((x->n + 1) * 2 > x->cap && grow(x, parallel, item) != 0)
        return -1;
    size_t i = slot_of(x, k);
    if (!x->slot[i]) {
        if (x->n >= (x->max ? x->max : MAX_LANES))
            return -1;
        memcpy((char *)x->key + x->n * SP_REP_KEY_BYTES, k, SP_REP_KEY_BYTES);
        if (parallel)
            memset((char *)*parallel + x->n * item, 0, item);
        x->slot[i] = (uint32_t)++x->n;
    }
    x->last = x->slot[i] - 1;
    return x->last;
}

void sp_rep_lane_index_free(sp_rep_lane_index_t *x)
{
    free(x->key);
    free(x->slot);
    memset(x, 0, sizeof *x);
}

/* ---- the set's lanes and details --------------------------------------------- */

static const sp_rep_lane_t no_lanes[1];   /* lane 0 of a set whose table could not be made */
static const sp_rep_detail_t no_details[1];   /* detail 0 of a set whose table could not be made */

void sp_rep_lanes_init(sp_rep_set_t *s)
{
    const sp_rep_detail_t d0 = sp_rep_no_detail(s);
    s->lane_index = calloc(1, sizeof *s->lane_index);
    s->detail_index = calloc(1, sizeof *s->detail_index);
    if (!s->lane_index || sp_rep_lane_find(s->lane_index, &(sp_rep_lane_t){0, 0, 0}, NULL, 0) != 0) {
        s->oom = 1;
        s->lanes = (sp_rep_lane_t *)no_lanes;
    } else {
        s->lanes = s->lane_index->key;
    }
    if (s->detail_index)
        s->detail_index->max = MAX_DETAILS;
    if (!s->detail_index || sp_rep_lane_find(s->detail_index, &d0, NULL, 0) != 0) {
        s->oom = 1;
        s->details = (sp_rep_detail_t *)no_details;
    } else {
        s->details = s->detail_index->key;
    }
}

static void index_free(sp_rep_lane_index_t *x)
{
    if (x)
        sp_rep_lane_index_free(x);
    free(x);
}

void sp_rep_lanes_free_set(sp_rep_set_t *s)
{
    index_free(s->lane_index);
    index_free(s->detail_index);
    s->lane_index = s->detail_index = NULL;
    s->lanes = NULL;
    s->details = NULL;
}

/* key's number in x (which a set's lanes or details point into: *table,
 * refreshed as it may move), 0 when out of memory (s->oom set). */
static uint32_t set_key(sp_rep_set_t *s, sp_rep_lane_index_t *x, void **table, const void *none, const void *key)
{
    long k = x && *table != none ? sp_rep_lane_find(x, key, NULL, 0) : -1;
    if (k < 0) {
        s->oom = 1;
        return 0;
    }
    *table = x->key;
    return (uint32_t)k;
}

void sp_rep_set_lane(sp_rep_set_t *s, sp_rep_event_t *e, long pid, long tid, int device)
{
    uint32_t k = set_key(s, s->lane_index, (void **)&s->lanes, no_lanes,
                         &(sp_rep_lane_t){(int32_t)pid, (int32_t)tid, device});
    e->lane_lo = k & 0xffffu;
    e->lane_hi = k >> 16;
}

void sp_rep_set_detail(sp_rep_set_t *s, sp_rep_event_t *e, const sp_rep_detail_t *d)
{
    e->detail = d->shape == s->no_shape_id && !d->stack && !d->kind && !d->launch
                    ? 0
                    : set_key(s, s->detail_index, (void **)&s->details, no_details, d);
}

/* ---- the nesting pass's threads --------------------------------------------- */

sp_rep_stack_t *sp_rep_lane_stack(sp_rep_lanes_t *l, long pid, long tid)
{
    long k = sp_rep_lane_find(&l->index, &(sp_rep_lane_t){(int32_t)pid, (int32_t)tid, 0}, (void **)&l->stack,
                              sizeof *l->stack);
    return k < 0 ? NULL : &l->stack[k];
}

int sp_rep_stack_push(sp_rep_stack_t *st, int32_t i)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        int32_t *at = realloc(st->at, cap * sizeof *at);
        if (at)
            st->at = at;
        int32_t *kid = at ? realloc(st->kid, cap * sizeof *kid) : NULL;
        if (!kid)
            return -1;
        st->kid = kid;
        st->cap = cap;
    }
    if (st->n)   /* the parent's only child, or its second */
        st->kid[st->n - 1] = st->kid[st->n - 1] == -1 ? i : -2;
    st->kid[st->n] = -1;
    st->at[st->n++] = i;
    return 0;
}

void sp_rep_lanes_free(sp_rep_lanes_t *l)
{
    for (size_t k = 0; k < l->index.n; k++)
        free(l->stack[k].at), free(l->stack[k].kid);
    free(l->stack);
    sp_rep_lane_index_free(&l->index);
}
