/* exporters/agg_lanes.c — the host lanes of a report set for the per-thread
 * nesting pass (agg.c): each distinct (pid, tid) found through an index by
 * value, and its stack of open events. The pass visits the events once in
 * canonical order and keeps one stack per thread, so its memory is the
 * threads and their depth; ordering the events by thread first took two
 * indices per event and a stack sized for all of them. */
#include "agg_int.h"

#include <stdlib.h>

struct sp_rep_lane_key {
    long pid, tid;
};

static size_t lane_slot(const sp_rep_lanes_t *l, long pid, long tid)
{
    uint64_t h = ((uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)tid) * 0xff51afd7ed558ccdull;
    size_t i = (size_t)(h >> 32) & (l->cap - 1);
    while (l->slot[i] && (l->key[l->slot[i] - 1].pid != pid || l->key[l->slot[i] - 1].tid != tid))
        i = (i + 1) & (l->cap - 1);
    return i;
}

static int grow(sp_rep_lanes_t *l)
{
    size_t cap = l->cap ? l->cap * 2 : 64;
    uint32_t *slot = calloc(cap, sizeof *slot);
    struct sp_rep_lane_key *key = realloc(l->key, cap / 2 * sizeof *key);
    l->key = key ? key : l->key;
    sp_rep_stack_t *stack = key ? realloc(l->stack, cap / 2 * sizeof *stack) : NULL;
    l->stack = stack ? stack : l->stack;
    if (!slot || !key || !stack) {
        free(slot);
        return -1;
    }
    free(l->slot);
    l->slot = slot;
    l->cap = cap;
    for (size_t k = 0; k < l->n; k++)
        l->slot[lane_slot(l, l->key[k].pid, l->key[k].tid)] = (uint32_t)(k + 1);
    return 0;
}

sp_rep_stack_t *sp_rep_lane_stack(sp_rep_lanes_t *l, long pid, long tid)
{
    if (l->n && l->last >= 0 && l->key[l->last].pid == pid && l->key[l->last].tid == tid)
        return &l->stack[l->last];
    if ((l->n + 1) * 2 > l->cap && grow(l) != 0)
        return NULL;
    size_t i = lane_slot(l, pid, tid);
    if (!l->slot[i]) {
        l->key[l->n] = (struct sp_rep_lane_key){pid, tid};
        l->stack[l->n] = (sp_rep_stack_t){NULL, 0, 0};
        l->slot[i] = (uint32_t)++l->n;
    }
    l->last = (long)l->slot[i] - 1;
    return &l->stack[l->last];
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
    for (size_t k = 0; k < l->n; k++)
        free(l->stack[k].at);
    free(l->key);
    free(l->stack);
    free(l->slot);
}
