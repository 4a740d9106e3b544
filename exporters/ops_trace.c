/* exporters/ops_trace.c — how an operator record (collectors/ops.c) reads in
 * the trace, as Kineto writes cpu_op events: "Sequence number" and "Fwd
 * thread id" when the op has a sequence number, "Input Dims" with
 * record_shapes (torch's NVTX text is already the JSON list Kineto writes);
 * and Kineto's forward-to-backward flows ("cat": "fwdbwd"): per sequence
 * number, from the forward op that started last to the backward op that
 * started last, ids numbered in backward order. The Fwd thread id of
 * backward work is 1: the NVTX text does not say which thread ran the
 * forward, and 1 is the first thread that ran operators. */
#include "ops_trace.h"

#include "../collectors/ranges.h"
#include "../collectors/strings.h"

#include <inttypes.h>
#include <stdlib.h>

const char *sp_ops_trace_cat(const sp_event_t *e)
{
    return e->flags & SP_RANGE_OP ? "cpu_op" : "user_annotation";
}

void sp_ops_trace_args(sp_jw_t *w, const sp_event_t *e)
{
    if (!(e->flags & SP_RANGE_OP))
        return;
    if (e->a[1])
        sp_jw_printf(w, ", \"Sequence number\": %" PRIu64 ", \"Fwd thread id\": %d", e->a[1] - 1,
                     e->flags & SP_RANGE_BWD ? 1 : 0);
    if (e->a[2]) {
        sp_jw_puts(w, ", \"Input Dims\": ");
        sp_jw_puts(w, sp_str_get((uint32_t)e->a[2]));
    }
}

typedef struct link {
    uint64_t seq;          /* sequence number + 1, 0 = free slot */
    size_t fwd, bwd;       /* event index + 1, 0 = none */
} link_t;

static int later(const sp_event_ref_t *ev, size_t have, size_t i)
{
    return !have || ev[i].ev->t0 >= ev[have - 1].ev->t0;
}

static void flow(sp_jw_t *w, const char *ph, size_t id, const sp_event_ref_t *r, int pid, uint64_t base_ns)
{
    sp_jw_printf(w, "{\"ph\": \"%s\", \"id\": %zu, \"pid\": %d, \"tid\": %d, \"ts\": ", ph, id, pid, r->thread->tid);
    sp_jw_us(w, (int64_t)(r->ev->t0 - base_ns));
    sp_jw_printf(w, ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"%s},\n", *ph == 'f' ? ", \"bp\": \"e\"" : "");
}

static int cmp_bwd(const void *a, const void *b)
{
    const link_t *x = a, *y = b;
    return (x->bwd > y->bwd) - (x->bwd < y->bwd);
}

void sp_ops_trace_flows(sp_jw_t *w, const sp_event_ref_t *ev, size_t n, int pid, uint64_t base_ns)
{
    size_t numbered = 0, cap = 16;
    for (size_t i = 0; i < n; i++)
        numbered += ev[i].ev->kind == SP_EV_RANGE && (ev[i].ev->flags & SP_RANGE_OP) && ev[i].ev->a[1];
    if (!numbered)
        return;
    while (cap < 2 * numbered)
        cap *= 2;
    link_t *t = calloc(cap, sizeof *t);
    if (!t)
        return;
    for (size_t i = 0; i < n; i++) {
        const sp_event_t *e = ev[i].ev;
        if (e->kind != SP_EV_RANGE || !(e->flags & SP_RANGE_OP) || !e->a[1])
            continue;
        size_t h = (size_t)(e->a[1] * 0x9E3779B97F4A7C15ull) & (cap - 1);
        while (t[h].seq && t[h].seq != e->a[1])
            h = (h + 1) & (cap - 1);
        t[h].seq = e->a[1]; /* never full: cap >= 2 * numbered ops */
        size_t *slot = e->flags & SP_RANGE_BWD ? &t[h].bwd : &t[h].fwd;
        if (later(ev, *slot, i))
            *slot = i + 1;
    }
    size_t k = 0;
    for (size_t h = 0; h < cap; h++)
        if (t[h].seq && t[h].fwd && t[h].bwd)
            t[k++] = t[h];
    qsort(t, k, sizeof *t, cmp_bwd);
    for (size_t j = 0; j < k && !w->err; j++) {
        flow(w, "s", j + 1, &ev[t[j].fwd - 1], pid, base_ns);
        flow(w, "f", j + 1, &ev[t[j].bwd - 1], pid, base_ns);
    }
    free(t);
}
