/* exporters/gpu_annot.c — see gpu_annot.h. */
#include "gpu_annot.h"

#include "../collectors/bigmem.h"

#include "../collectors/ranges.h"
#include "../collectors/strings.h"

#include <inttypes.h>
#include <stdlib.h>

/* Ranges nest per thread and events come sorted by start (enclosing first),
 * so one pass with a stack per thread finds each call's innermost range, and
 * each range's call id (sp_gpuv_call_ext) from its parent's. */
typedef struct open_range {
    uint64_t end, id;
} open_range_t;

typedef struct sp_annot_thread {
    open_range_t *s;
    size_t n, cap;
} thread_stack_t;

static int is_torch(const sp_event_t *e)
{
    return e->kind == SP_EV_RANGE && (e->flags & SP_RANGE_TORCH);
}

static int is_range(const sp_event_t *e)
{
    return e->kind == SP_EV_RANGE || e->kind == SP_EV_STEP;
}

int sp_annot_walk_init(sp_annot_walk_t *w, size_t nslots)
{
    *w = (sp_annot_walk_t){calloc(nslots ? nslots : 1, sizeof *w->ts), nslots, 0, 0};
    return w->ts ? 0 : -1;
}

uint64_t sp_annot_walk_next(sp_annot_walk_t *w, const sp_event_ref_t *ev, size_t i, uint64_t *parent)
{
    const sp_event_t *e = ev[i].ev;
    thread_stack_t *st = &w->ts[sp_ev_owner(e)->slot];
    while (st->n && st->s[st->n - 1].end <= e->t0)
        st->n--;
    uint64_t top = st->n ? st->s[st->n - 1].id : 0;
    if (parent)
        *parent = top;
    if (!is_range(e))
        return e->kind == SP_EV_API ? top : 0;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        open_range_t *grown = realloc(st->s, cap * sizeof *grown);
        if (!grown) {   /* every pass must see the same nesting: the caller fails */
            w->oom = 1;
            return 0;
        }
        st->s = grown;
        st->cap = cap;
    }
    st->s[st->n++] = (open_range_t){e->t1, ++w->next};
    return w->next;
}

void sp_annot_walk_free(sp_annot_walk_t *w)
{
    for (size_t k = 0; w->ts && k < w->nts; k++)
        free(w->ts[k].s);
    free(w->ts);
    w->ts = NULL;
}

void sp_annot_ranges(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev)
{
    /* The per-range arrays are sized by a count first: most events are calls.
     * One stack per thread, found by its registration slot (dense, 0-based):
     * no search per event whatever the number of threads. */
    size_t want = 1;
    v->nslots = 0;
    for (size_t i = 0; i < nev; i++) {
        want += is_range(ev[i].ev);
        if (sp_ev_owner(ev[i].ev)->slot >= v->nslots)
            v->nslots = sp_ev_owner(ev[i].ev)->slot + 1u;
    }
    v->range_ev = malloc(want * sizeof *v->range_ev);
    v->range_parent = malloc(want * sizeof *v->range_parent);
    v->range_call = malloc(want * sizeof *v->range_call);
    sp_annot_walk_t w;
    v->ranges_oom = sp_annot_walk_init(&w, v->nslots) != 0 || !v->range_ev || !v->range_parent || !v->range_call ||
                    nev >= UINT32_MAX;
    for (size_t i = 0; !v->ranges_oom && i < nev; i++) {
        const sp_event_t *e = ev[i].ev;
        uint64_t parent, id = sp_annot_walk_next(&w, ev, i, &parent);
        if (!is_range(e) || w.oom)
            continue;
        /* The torch scope around the parent, if any, takes this range's calls
         * only when the range ends inside it: a start/end range or a step
         * (a kernel: marker's boundary) begun inside an operator and
         * outliving it keeps its own, as before. */
        uint32_t up = parent ? v->range_call[parent - 1] : 0;
        const sp_event_t *scope = up ? ev[v->range_ev[up - 1]].ev : NULL;
        v->range_ev[id - 1] = (uint32_t)i;
        v->range_parent[id - 1] = (uint32_t)parent;
        v->range_call[id - 1] = !is_torch(e) && scope && is_torch(scope) && e->t1 <= scope->t1 ? up : (uint32_t)id;
        v->nranges = id;
    }
    v->ranges_oom |= w.oom;
    sp_annot_walk_free(&w);
}

/* The innermost range or step open on thread tid at time t (External id, 0 =
 * none), for CUPTI API records no host event claimed. byt: the range ids in
 * (tid, start) order. Ranges nest per thread: the last one started at or before
 * t, or the first of its parents still open at t. */
static const sp_gpu_view_t *range_view;
static const sp_event_ref_t *range_events;

static int cmp_range(const void *a, const void *b)
{
    const sp_event_ref_t *x = &range_events[range_view->range_ev[*(const uint64_t *)a - 1]],
                         *y = &range_events[range_view->range_ev[*(const uint64_t *)b - 1]];
    if (sp_ev_owner(x->ev)->tid != sp_ev_owner(y->ev)->tid)
        return sp_ev_owner(x->ev)->tid < sp_ev_owner(y->ev)->tid ? -1 : 1;
    if (x->ev->t0 != y->ev->t0)
        return x->ev->t0 < y->ev->t0 ? -1 : 1;
    return (*(const uint64_t *)a > *(const uint64_t *)b) - (*(const uint64_t *)a < *(const uint64_t *)b);
}

uint64_t *sp_annot_by_thread(const sp_gpu_view_t *v, const sp_event_ref_t *ev)
{
    uint64_t *byt = v->nranges ? malloc(v->nranges * sizeof *byt) : NULL;
    for (size_t k = 0; byt && k < v->nranges; k++)
        byt[k] = k + 1;
    range_view = v;
    range_events = ev;
    if (byt)
        qsort(byt, v->nranges, sizeof *byt, cmp_range);
    return byt;
}

uint64_t sp_annot_range_at(const sp_gpu_view_t *v, const sp_event_ref_t *ev, const uint64_t *byt, long tid,
                           int64_t t)
{
    size_t lo = 0, hi = byt ? v->nranges : 0; /* first entry after (tid, t) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const sp_event_ref_t *r = &ev[v->range_ev[byt[mid] - 1]];
        if (sp_ev_owner(r->ev)->tid < tid || (sp_ev_owner(r->ev)->tid == tid && (int64_t)r->ev->t0 <= t))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo || sp_ev_owner(ev[v->range_ev[byt[lo - 1] - 1]].ev)->tid != tid)
        return 0;
    uint64_t id = byt[lo - 1];
    while (id && (int64_t)ev[v->range_ev[id - 1]].ev->t1 < t)
        id = v->range_parent[id - 1];
    return id;
}

/* A range's extent on one GPU stream: the union's bounds of the GPU records
 * under it there. Each range has one inline (most run on one stream); more
 * are chained from the side list by index (1-based; 0 ends the chain). */
typedef struct span {
    uint64_t a, b;
    uint32_t dev, stream;
    uint32_t next;
    uint32_t used;
} span_t;

typedef struct spans {
    span_t *head;          /* per External id (index id - 1) */
    span_t *more;
    size_t nmore, capmore;
} spans_t;

static int span_add(spans_t *s, uint64_t id, uint32_t dev, uint32_t stream, uint64_t a, uint64_t b)
{
    span_t *p = &s->head[id - 1];
    if (!p->used) {
        *p = (span_t){a, b, dev, stream, 0, 1};
        return 0;
    }
    for (;;) {
        if (p->dev == dev && p->stream == stream) {
            p->a = a < p->a ? a : p->a;
            p->b = b > p->b ? b : p->b;
            return 0;
        }
        if (!p->next)
            break;
        p = &s->more[p->next - 1];
    }
    /* p is the chain's last: its link is set before the list may move. */
    if (s->nmore == UINT32_MAX)
        return -1;
    p->next = (uint32_t)s->nmore + 1;
    if (s->nmore == s->capmore) {
        size_t nc = s->capmore ? 2 * s->capmore : 64;
        span_t *grown = realloc(s->more, nc * sizeof *grown);
        if (!grown) {
            p->next = 0;
            return -1;
        }
        s->more = grown;
        s->capmore = nc;
    }
    s->more[s->nmore++] = (span_t){a, b, dev, stream, 0, 1};
    return 0;
}

static int stream_before(const span_t *x, const span_t *y)
{
    return x->dev != y->dev ? x->dev < y->dev : x->stream < y->stream;
}

/* Each GPU record widens its span in every NVTX range enclosing its launch
 * (the launching call's innermost range and every range around it; steps are
 * walked through, never drawn): O(records x depth) with no sort, and memory
 * per range, not per record and level. Written in External id order, each
 * range's streams in (device, stream) order. */
void sp_annot_write(sp_jw_t *w, const sp_gpu_view_t *v, const sp_event_ref_t *ev, const uint64_t *gext, uint64_t base)
{
    spans_t s = {calloc(v->nranges ? v->nranges : 1, sizeof *s.head), NULL, 0, 0};
    if (!s.head)
        return;
    for (size_t i = 0; i < v->n; i++) {
        const sp_gpu_event_t *g = &v->gpu[i];
        for (uint64_t id = gext[i]; id; id = v->range_parent[id - 1]) {
            const sp_event_t *re = ev[v->range_ev[id - 1]].ev;
            if (re->kind != SP_EV_RANGE || (re->flags & SP_RANGE_OP))
                continue; /* steps are walked through; operators get no GPU span, as in Kineto */
            if (span_add(&s, id, g->device, g->stream, g->start, sp_gpu_end(g)) != 0)
                goto out;
        }
    }
out:
    for (size_t k = 0; k < v->nranges; k++) {
        if (!s.head[k].used)
            continue;
        /* The range's streams, in order: a short chain, sorted by insertion. */
        span_t one[8], *order = one;
        size_t n = 0, cap = 8;
        for (const span_t *p = &s.head[k];; p = &s.more[p->next - 1]) {
            if (n == cap) {
                span_t *grown = malloc(2 * cap * sizeof *grown);
                if (!grown)
                    break;
                for (size_t j = 0; j < n; j++)
                    grown[j] = order[j];
                if (order != one)
                    free(order);
                order = grown;
                cap *= 2;
            }
            size_t j = n++;
            for (; j > 0 && stream_before(p, &order[j - 1]); j--)
                order[j] = order[j - 1];
            order[j] = *p;
            if (!p->next)
                break;
        }
        const sp_event_t *re = ev[v->range_ev[k]].ev;
        for (size_t j = 0; j < n; j++) {
            sp_gpuv_slice(w, "gpu_user_annotation", sp_str_get(re->name), order[j].dev, order[j].stream,
                          (int64_t)(order[j].a - base), (int64_t)(order[j].b - order[j].a));
            sp_jw_printf(w, ",\"args\":{\"External id\":%" PRIu64 "}},\n", (uint64_t)k + 1);
        }
        if (order != one)
            free(order);
    }
    free(s.head);
    free(s.more);
}
