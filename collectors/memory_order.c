/* collectors/memory_order.c — see memory_order.h. Nothing here takes a lock
 * or touches the live map: the caller (collectors/memory.c) holds its lock. */
#include "memory_order.h"

#include <stdlib.h>
#include <string.h>

#define MATCH_HORIZON_NS 100000000ull   /* how far past a record to look for a long call */

int sp_mem_cmp_op_time(const void *a, const void *b)
{
    const sp_mem_op_t *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

static int same_family(const sp_mem_op_t *mine, const sp_mem_op_t *rec)
{
    int alloc = mine->type == SP_MOP_ALLOC || mine->type == SP_MOP_MAP;
    int release = mine->type == SP_MOP_FREE || mine->type == SP_MOP_UNMAP;
    if (rec->type == SP_MOP_ALLOC ? !alloc : !release)
        return 0;
    /* CUPTI names virtual-memory blocks by address where we hold a handle. */
    return mine->addr == rec->addr || mine->kind == SP_MEM_PHYSICAL || mine->kind == SP_MEM_MAPPING;
}

/* Index of the interposed op that CUPTI's record describes, or -1: same
 * family and address, the record's time inside the call. Ops are in end
 * order, so the search starts at the first call ending after the record. */
long sp_mem_match(const sp_mem_op_t *ops, size_t n, const unsigned char *used, const sp_mem_op_t *rec)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ops[mid].t + SP_MEM_MATCH_SLACK_NS < rec->t)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < n && ops[i].t0 <= rec->t + MATCH_HORIZON_NS; i++)
        if (!used[i] && !ops[i].from_cupti && ops[i].t0 <= rec->t + SP_MEM_MATCH_SLACK_NS && same_family(&ops[i], rec))
            return (long)i;
    return -1;
}

/* Stable insertion sort: interposed ops are logged in nearly the order their
 * calls ended (each thread reads its clock before taking the lock), so this
 * is close to linear, and same-time ops keep their logged order. */
void sp_mem_sort_nearly(sp_mem_op_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        sp_mem_op_t op = v[i];
        size_t k = i;
        for (; k > 0 && v[k - 1].t > op.t; k--)
            v[k] = v[k - 1];
        v[k] = op;
    }
}

/* ops[0, mid) and ops[mid, n) are each in time order; make the whole so. */
void sp_mem_merge_runs(sp_mem_op_t *ops, size_t mid, size_t n)
{
    if (mid == n)
        return;
    sp_mem_op_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        sp_mem_sort_nearly(ops, n);
        return;
    }
    size_t a = 0, b = mid, k = 0;
    while (a < mid || b < n)
        tmp[k++] = b >= n || (a < mid && ops[a].t <= ops[b].t) ? ops[a++] : ops[b++];
    memcpy(ops, tmp, n * sizeof *tmp);
    free(tmp);
}

void sp_mem_fill_totals(sp_mem_cycle_t *c)
{
    int64_t lv[SP_MEM_SLOTS];
    memcpy(lv, c->start, sizeof lv);
    for (int s = 0; s < SP_MEM_SLOTS; s++)
        if (lv[s])
            c->used_slots |= 1u << s;
    for (size_t i = 0; i < c->nops; i++) {
        sp_mem_op_t *op = &c->ops[i];
        if (op->slot < 0)
            continue;
        if (sp_mem_op_moves(op))
            lv[op->slot] += op->type == SP_MOP_ALLOC ? (int64_t)op->bytes : -(int64_t)op->bytes;
        op->total = lv[op->slot];
        c->used_slots |= 1u << op->slot;
    }
}

