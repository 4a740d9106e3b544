/* exporters/ops_trace.c — how an operator record (collectors/ops.c) reads in
 * the trace, as Kineto writes cpu_op events: "Sequence number" when the op
 * has one, "Fwd thread id" (0 on forward ops; on backward work, the thread of
 * the forward op it is linked to), "Input Dims" with record_shapes (torch's
 * NVTX text is already the JSON list Kineto writes); and Kineto's
 * forward-to-backward flows ("cat": "fwdbwd").
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
 * backward order.
 *
 * Tensor lists. torch's NVTX text flattens them; before anything reads the
 * cycle, an operator with tensor-list arguments (collectors/ops.h) gets its
 * Input Dims regrouped in place as Kineto writes them: a Tensor[] as the list
 * of its tensors' sizes, a Tensor?[] as [] (Kineto's GenericList). The text
 * does not say which overload ran: an overload fits when its arguments
 * account for the flattened count (lists of equal length, as foreach ops
 * take them) with "[]" wherever it takes no tensor; among those that fit,
 * the ones that put the fewest "[]" (0-dim tensors) into lists and leave
 * the fewest lists empty (an out= variant that fits too). When they
 * disagree (_foreach_add_(a, b, alpha=x): a list of 4, or two of 2?) the
 * text stays as torch wrote it: never a wrong grouping. */
#include "ops_trace.h"

#include "../collectors/ops.h"
#include "../collectors/ranges.h"
#include "../collectors/strings.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ITEMS_MAX 4096      /* top-level entries of one sizes text */
#define MEMO 4096u          /* (name, sizes) -> regrouped text; the exporter thread only */

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

/* The top-level items of "[a, b, ...]": their starts and lengths; -1 when malformed or too many. */
static int split_items(const char *t, const char **at, size_t *len)
{
    size_t n = strlen(t);
    if (n < 2 || t[0] != '[' || t[n - 1] != ']')
        return -1;
    int k = 0, depth = 0;
    const char *start = t + 1;
    for (const char *p = t + 1; p < t + n - 1; p++) {
        depth += (*p == '[') - (*p == ']');
        if (depth == 0 && *p == ',') {
            if (k == ITEMS_MAX)
                return -1;
            at[k] = start, len[k++] = (size_t)(p - start);
            start = p + 1 + (p[1] == ' ');
        }
    }
    if (start < t + n - 1) {
        if (k == ITEMS_MAX)
            return -1;
        at[k] = start, len[k++] = (size_t)(t + n - 1 - start);
    }
    return k;
}

/* Writes the n items regrouped by one overload's kinds (kinds[0..nk)) into
 * out: its score (how many "[]" items, 0-dim tensors, it puts in lists, and
 * how many lists it leaves empty: the fewer the likelier), or -1 when they do not fit it (a non-tensor argument
 * is always "[]" in torch's text). */
static int fit(const char *kinds, size_t nk, const char **at, const size_t *len, int n, char *out, size_t cap)
{
    size_t lists = 0;
    for (size_t i = 0; i < nk; i++)
        lists += kinds[i] == 'L' || kinds[i] == 'O';
    size_t plain = nk - lists;
    if (!lists || (size_t)n < plain || ((size_t)n - plain) % lists)
        return -1;
    size_t each = ((size_t)n - plain) / lists, o = 0;
    int item = 0, score = 0;
#define PUT(s, l) do { if (o + (l) >= cap) return -1; memcpy(out + o, (s), (l)); o += (l); } while (0)
    PUT("[", 1);
    for (size_t i = 0; i < nk; i++) {
        if (i)
            PUT(", ", 2);
        if (kinds[i] == 'T' || kinds[i] == '.') {
            if (kinds[i] == '.' && !(len[item] == 2 && memcmp(at[item], "[]", 2) == 0))
                return -1;
            PUT(at[item], len[item]);
            item++;
            continue;
        }
        PUT("[", 1);
        score += each == 0;
        for (size_t j = 0; j < each; j++, item++) {
            score += len[item] == 2;
            if (kinds[i] == 'L') {
                if (j)
                    PUT(", ", 2);
                PUT(at[item], len[item]);
            }
        }
        PUT("]", 1);
    }
    PUT("]", 1);
#undef PUT
    out[o] = 0;
    return score;
}

/* The Input Dims id of operator `name` with torch's flattened sizes text:
 * the likeliest overloads' regrouping when they all agree, else the text. */
static uint32_t regroup(uint32_t name, uint32_t sizes)
{
    static struct {
        uint32_t name, sizes, out;
    } memo[MEMO];
    const char *kinds = sp_ops_list_kinds(name);
    if (!kinds)
        return sizes;
    uint32_t h = (name * 0x9E3779B1u ^ sizes * 0x85EBCA77u) & (MEMO - 1);
    if (memo[h].name == name && memo[h].sizes == sizes)
        return memo[h].out;
    static const char *at[ITEMS_MAX];
    static size_t len[ITEMS_MAX];
    const char *text = sp_str_get(sizes);
    int n = split_items(text, at, len), best = -1, agree = 1;
    size_t cap = strlen(text) + 2 * ITEMS_MAX + 16;
    char *out = malloc(cap), *chosen = malloc(cap);
    for (const char *k = kinds; out && chosen && n >= 0 && *k;) {
        size_t nk = strcspn(k, "\t");
        int score = fit(k, nk, at, len, n, out, cap);
        if (score >= 0 && (best < 0 || score < best)) {
            best = score, agree = 1;
            strcpy(chosen, out);
        } else if (score >= 0 && score == best && strcmp(chosen, out) != 0) {
            agree = 0;
        }
        k += nk + (k[nk] == '\t');
    }
    uint32_t id = best >= 0 && agree ? sp_str_intern(chosen) : sizes;
    free(out);
    free(chosen);
    if (id && out && chosen)
        memo[h].name = name, memo[h].sizes = sizes, memo[h].out = id;
    return id ? id : sizes;
}

void sp_ops_regroup(const sp_event_ref_t *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sp_event_t *e = ev[i].ev;
        if (e->kind == SP_EV_RANGE && (e->flags & SP_RANGE_OP) && e->a[2])
            e->a[2] = regroup(e->name, (uint32_t)e->a[2]);
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
