/* exporters/agg_lanes.c — lanes by value: the report set's (pid, tid,
 * device) triples, which an event holds as a 32-bit number instead of ten
 * bytes, its copy directions as 11-bit numbers, and the host threads of the per-thread nesting pass (agg.c), each
 * with its stack of open events. The pass visits the events once in
 * canonical order and keeps one stack per thread, so its memory is the
 * threads and their depth; ordering the events by thread first took two
 * indices per event and a stack sized for all of them. */
#include "agg_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LANES (1u << 31)   /* sp_rep_event_t's lane fields, as a long */
#define MAX_KINDS 2048         /* sp_rep_event_t's kind field */

static int same(const sp_rep_lane_t *a, const sp_rep_lane_t *b)
{
    return a->pid == b->pid && a->tid == b->tid && a->device == b->device;
}

static size_t slot_of(const sp_rep_lane_index_t *x, const sp_rep_lane_t *k)
{
    uint64_t h = (((uint64_t)(uint32_t)k->pid * 0x9e3779b97f4a7c15ull ^ (uint32_t)k->tid) * 0xff51afd7ed558ccdull) ^
                 (uint32_t)k->device;
    size_t i = (size_t)(h >> 32) & (x->cap - 1);
    while (x->slot[i] && !same(&x->key[x->slot[i] - 1], k))
        i = (i + 1) & (x->cap - 1);
    return i;
}

static int grow(sp_rep_lane_index_t *x, void **parallel, size_t item)
{
    size_t cap = x->cap ? x->cap * 2 : 64;
    uint32_t *slot = calloc(cap, sizeof *slot);
    sp_rep_lane_t *key = realloc(x->key, cap / 2 * sizeof *key);
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
        x->slot[slot_of(x, &x->key[k])] = (uint32_t)(k + 1);
    return 0;
}

long sp_rep_lane_find(sp_rep_lane_index_t *x, sp_rep_lane_t k, void **parallel, size_t item)
{
    if (x->n && same(&x->key[x->last], &k))
        return x->last;
    if ((x->n + 1) * 2 > x->cap && grow(x, parallel, item) != 0)
        return -1;
    size_t i = slot_of(x, &k);
    if (!x->slot[i]) {
        if (x->n >= MAX_LANES)
            return -1;
        x->key[x->n] = k;
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

/* ---- the set's lanes -------------------------------------------------------- */

static const sp_rep_lane_t no_lanes[1];   /* lane 0 of a set whose table could not be made */

void sp_rep_lanes_init(sp_rep_set_t *s)
{
    s->lane_index = calloc(1, sizeof *s->lane_index);
    if (!s->lane_index || sp_rep_lane_find(s->lane_index, (sp_rep_lane_t){0, 0, 0}, NULL, 0) != 0) {
        s->oom = 1;
        s->lanes = (sp_rep_lane_t *)no_lanes;
        return;
    }
    s->lanes = s->lane_index->key;
}

void sp_rep_lanes_free_set(sp_rep_set_t *s)
{
    if (s->lane_index) {
        sp_rep_lane_index_free(s->lane_index);
        free(s->lane_index);
    }
    s->lane_index = NULL;
    s->lanes = NULL;
    free(s->kinds);
    sp_rep_idmap_free(&s->kind_number);
    s->kinds = NULL;
    s->nkinds = 0;
}

void sp_rep_set_lane(sp_rep_set_t *s, sp_rep_event_t *e, long pid, long tid, int device)
{
    long k = s->lane_index && s->lanes != no_lanes
                 ? sp_rep_lane_find(s->lane_index, (sp_rep_lane_t){(int32_t)pid, (int32_t)tid, device}, NULL, 0)
                 : -1;
    if (k < 0) {
        s->oom = 1;
        k = 0;
    } else {
        s->lanes = s->lane_index->key;   /* it may have moved */
    }
    e->lane_lo = (uint32_t)k & 0xffffu;
    e->lane_hi = (uint32_t)k >> 16;
}

void sp_rep_set_kind(sp_rep_set_t *s, sp_rep_event_t *e, sp_rep_str_t kind)
{
    e->kind = 0;
    if (!kind)
        return;
    if (!s->kinds && !(s->kinds = calloc(MAX_KINDS, sizeof *s->kinds))) {
        s->oom = 1;
        return;
    }
    uint32_t *number = sp_rep_idmap_at(&s->kind_number, kind);
    if (number && !*number && s->nkinds + 1 < MAX_KINDS) {   /* number 0 is none */
        *number = (uint32_t)++s->nkinds;
        s->kinds[*number] = kind;
    }
    if (!number || !*number)
        s->oom = 1;
    else
        e->kind = *number;
}

/* ---- the nesting pass's threads --------------------------------------------- */

sp_rep_stack_t *sp_rep_lane_stack(sp_rep_lanes_t *l, long pid, long tid)
{
    long k = sp_rep_lane_find(&l->index, (sp_rep_lane_t){(int32_t)pid, (int32_t)tid, 0}, (void **)&l->stack,
                              sizeof *l->stack);
    return k < 0 ? NULL : &l->stack[k];
}

int sp_rep_stack_push(sp_rep_stack_t *st, int32_t i)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        int32_t *at = realloc(st->at, cap * sizeof *at);
        if (!at)
            return -1;
        st->at = at;
        st->cap = cap;
    }
    st->at[st->n++] = i;
    return 0;
}

void sp_rep_lanes_free(sp_rep_lanes_t *l)
{
    for (size_t k = 0; k < l->index.n; k++)
        free(l->stack[k].at);
    free(l->stack);
    sp_rep_lane_index_free(&l->index);
}
