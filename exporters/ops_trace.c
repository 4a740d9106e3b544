/* exporters/ops_trace.c — how an operator record (collectors/ops.c) reads in
 * the trace, as Kineto writes cpu_op events: "Sequence number" when the op
 * has one, "Fwd thread id" (0 on forward ops; on backward work, the thread of
 * the forward op it is linked to), "Input Dims" with record_shapes (torch's
 * NVTX text is the JSON list Kineto writes once its tensor lists are
 * regrouped: ops_lists.c); and Kineto's forward-to-backward flows ("cat":
 * "fwdbwd").
 *
 * Linking. torch's sequence numbers are per thread, and Kineto keys a
 * backward node by (the thread that ran its forward, sequence number); the
 * NVTX message of a backward node has the number but not that thread. What
 * the records do say: a thread's numbers only grow (each autograd node takes
 * the next one), so a (thread, number) pair names one forward group in a
 * run, and a backward node runs after its forward. So a backward op with
 * number N is linked to thread T's forward op with number N only when T is
 * the one thread of the cycle with a forward op numbered N that started
 * before it; when two or more threads have one, which thread built the node
 * cannot be told from NVTX, and the op gets no link and no Fwd thread id
 * (never a wrong one). Among a thread's forward ops with one number the
 * latest is linked, and among the backward ops linked to one forward group
 * the latest, as Kineto does. The rule relies on the forward being recorded
 * whenever its backward is: a backward whose graph was built outside the
 * window, or on a thread whose operators stepprof did not record, may be
 * linked to another recorded thread's op with the same number. Fwd thread id
 * is the forward thread's OS id as the trace draws it (Kineto writes torch's
 * own thread counter, which NVTX does not carry). Flow ids are numbered in
 * backward order. */
#include "ops_trace.h"

#include "../collectors/ops.h"
#include "../collectors/ranges.h"
#include "../collectors/strings.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A thread's forward ops with one sequence number. */
typedef struct group {
    uint64_t seq;
    int tid;
    uint64_t first;        /* start of its earliest op */
    size_t fwd, bwd;       /* event index + 1 of its latest op and of the latest backward op linked to it; 0 = none */
} group_t;

/* A backward op's resolved forward thread. */
typedef struct bwd {
    size_t index;
    int tid;
} bwd_t;

struct sp_ops_links {
    bwd_t *bwd;            /* by event index */
    size_t nbwd;
    group_t *flows;        /* linked groups, in backward order */
    size_t nflows;
};

const char *sp_ops_trace_cat(const sp_event_t *e)
{
    return e->flags & SP_RANGE_OP ? "cpu_op" : "user_annotation";
}

static int numbered(const sp_event_t *e)
{
    return e->kind == SP_EV_RANGE && (e->flags & SP_RANGE_OP) && e->a[1];
}

static int fwd_tid(const sp_ops_links_t *l, size_t i)
{
    size_t lo = 0, hi = l ? l->nbwd : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->bwd[mid].index < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < (l ? l->nbwd : 0) && l->bwd[lo].index == i ? l->bwd[lo].tid : 0;
}

void sp_ops_trace_args(sp_jw_t *w, const sp_ops_links_t *l, const sp_event_ref_t *ev, size_t i)
{
    const sp_event_t *e = ev[i].ev;
    if (!(e->flags & SP_RANGE_OP))
        return;
    if (e->a[1]) {
        sp_jw_printf(w, ", \"Sequence number\": %" PRIu64, e->a[1] - 1);
        int tid = e->flags & SP_RANGE_BWD ? fwd_tid(l, i) : 0;
        if (tid || !(e->flags & SP_RANGE_BWD))
            sp_jw_printf(w, ", \"Fwd thread id\": %d", tid);
    }
    if (e->a[2]) {
        sp_jw_puts(w, ", \"Input Dims\": ");
        sp_jw_puts(w, sp_str_get((uint32_t)e->a[2]));
    }
}

/* Events are sorted by start (exporters/export.c), so index order is time order. */
static int cmp_group(const void *a, const void *b)
{
    const group_t *x = a, *y = b;
    if (x->seq != y->seq)
        return (x->seq > y->seq) - (x->seq < y->seq);
    if (x->tid != y->tid)
        return (x->tid > y->tid) - (x->tid < y->tid);
    return (x->fwd > y->fwd) - (x->fwd < y->fwd);
}

static int cmp_bwd(const void *a, const void *b)
{
    const group_t *x = a, *y = b;
    return (x->bwd > y->bwd) - (x->bwd < y->bwd);
}

/* Forward ops into one group per (sequence number, thread), sorted. */
static size_t make_groups(group_t *g, const sp_event_ref_t *ev, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (numbered(ev[i].ev) && !(ev[i].ev->flags & SP_RANGE_BWD))
            g[k++] = (group_t){ev[i].ev->a[1], sp_ev_owner(ev[i].ev)->tid, ev[i].ev->t0, i + 1, 0};
    qsort(g, k, sizeof *g, cmp_group);
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        if (m && g[m - 1].seq == g[j].seq && g[m - 1].tid == g[j].tid)
            g[m - 1].fwd = g[j].fwd;   /* sorted by index within the pair: the latest */
        else
            g[m++] = g[j];
    }
    return m;
}

/* The one group numbered like backward op i that began before it; NULL when none or several. */
static group_t *forward_of(group_t *g, size_t m, const sp_event_ref_t *ev, size_t i)
{
    uint64_t seq = ev[i].ev->a[1];
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    group_t *found = NULL;
    for (size_t j = lo; j < m && g[j].seq == seq; j++) {
        if (g[j].first >= ev[i].ev->t0)
            continue;
        if (found)
            return NULL;
        found = &g[j];
    }
    return found;
}

sp_ops_links_t *sp_ops_trace_link(const sp_event_ref_t *ev, size_t n)
{
    size_t nops = 0, nb = 0;
    for (size_t i = 0; i < n; i++)
        if (numbered(ev[i].ev)) {
            nops++;
            nb += (ev[i].ev->flags & SP_RANGE_BWD) != 0;
        }
    if (!nb)
        return NULL;
    sp_ops_links_t *l = calloc(1, sizeof *l);
    group_t *g = malloc((nops - nb + 1) * sizeof *g);
    if (l)
        l->bwd = malloc(nb * sizeof *l->bwd);
    if (!l || !g || !l->bwd) {
        free(g);
        sp_ops_trace_free(l);
        return NULL;
    }
    size_t m = make_groups(g, ev, n);
    for (size_t i = 0; i < n; i++) {
        if (!numbered(ev[i].ev) || !(ev[i].ev->flags & SP_RANGE_BWD))
            continue;
        group_t *f = forward_of(g, m, ev, i);
        if (!f)
            continue;
        l->bwd[l->nbwd++] = (bwd_t){i, f->tid};
        f->bwd = i + 1;   /* in time order: the latest wins */
    }
    size_t k = 0;
    for (size_t j = 0; j < m; j++)
        if (g[j].bwd)
            g[k++] = g[j];
    qsort(g, k, sizeof *g, cmp_bwd);
    l->flows = g;
    l->nflows = k;
    return l;
}

void sp_ops_trace_free(sp_ops_links_t *l)
{
    if (!l)
        return;
    free(l->bwd);
    free(l->flows);
    free(l);
}

static void flow(sp_jw_t *w, const char *ph, size_t id, const sp_event_ref_t *r, int pid, uint64_t base_ns)
{
    sp_jw_printf(w, "{\"ph\": \"%s\", \"id\": %zu, \"pid\": %d, \"tid\": %d, \"ts\": ", ph, id, pid, sp_ev_owner(r->ev)->tid);
    sp_jw_us(w, (int64_t)(r->ev->t0 - base_ns));
    sp_jw_printf(w, ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"%s},\n", *ph == 'f' ? ", \"bp\": \"e\"" : "");
}

void sp_ops_trace_flows(sp_jw_t *w, const sp_ops_links_t *l, const sp_event_ref_t *ev, int pid, uint64_t base_ns)
{
    for (size_t j = 0; l && j < l->nflows && !w->err; j++) {
        flow(w, "s", j + 1, &ev[l->flows[j].fwd - 1], pid, base_ns);
        flow(w, "f", j + 1, &ev[l->flows[j].bwd - 1], pid, base_ns);
    }
}
