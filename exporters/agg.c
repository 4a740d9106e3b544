/* exporters/agg.c — see agg.h. The event set (a growable array; its strings
 * are agg_strings.c's), the canonical order, the per-thread nesting pass and
 * correlation charging of GPU time. Everything is O(n log n) in the number of
 * events: traces hold millions of them. */
#include "agg_int.h"
#include "../collectors/bigmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(sp_rep_event_t) == 40, "a report event is 40 bytes: one per event of a window");

void sp_rep_init(sp_rep_set_t *s)
{
    memset(s, 0, sizeof *s);
    sp_rep_strings_init(s);
    sp_rep_lanes_init(s);
}

void sp_rep_free(sp_rep_set_t *s)
{
    sp_rep_strings_free(s);
    sp_rep_lanes_free_set(s);
    sp_big_free(s->ev);
    sp_big_free(s->mem);
    sp_big_free(s->cuda);
    memset(s, 0, sizeof *s);
}

static int grow_to(sp_rep_set_t *s, size_t cap)
{
    sp_rep_event_t *ev = cap <= SIZE_MAX / sizeof *ev ? sp_big_realloc(s->ev, cap * sizeof *ev) : NULL;
    if (!ev) {
        s->oom = 1;
        return -1;
    }
    s->ev = ev;
    s->cap = cap;
    return 0;
}

int sp_rep_reserve(sp_rep_set_t *s, size_t n)
{
    return s->cap - s->n >= n ? 0 : grow_to(s, s->n + n);
}

void sp_rep_reset(const sp_rep_set_t *s, sp_rep_event_t *e)
{
    (void)s;
    memset(e, 0, sizeof *e);
    e->bytes = -1;
    sp_rep_set_parent(e, -1);   /* and launcher */
}

sp_rep_event_t *sp_rep_add(sp_rep_set_t *s)
{
    if (s->n == s->cap && grow_to(s, s->cap ? s->cap * 2 : 4096) != 0)
        return NULL;
    sp_rep_event_t *e = &s->ev[s->n++];
    sp_rep_reset(s, e);
    return e;
}
/* ---- canonical order and nesting ------------------------------------------ */

static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* Ids of interned strings depend on input order; compare text. */
static int cmp_str(const sp_rep_set_t *s, sp_rep_str_t a, sp_rep_str_t b)
{
    return a == b ? 0 : strcmp(sp_rep_str(s, a), sp_rep_str(s, b));
}

int sp_rep_cmp(const sp_rep_set_t *s, const sp_rep_event_t *a, const sp_rep_event_t *b)
{
    int c;
    if ((c = cmp_i64(a->ts, b->ts)) || (c = cmp_i64(b->dur, a->dur)) || (c = cmp_i64(a->cat, b->cat)))
        return c;
    if (sp_rep_lane_of(a) != sp_rep_lane_of(b)) {   /* by pid, then tid (two lanes may differ by device alone) */
        const sp_rep_lane_t *la = &s->lanes[sp_rep_lane_of(a)], *lb = &s->lanes[sp_rep_lane_of(b)];
        if ((c = cmp_i64(la->pid, lb->pid)) || (c = cmp_i64(la->tid, lb->tid)))
            return c;
    }
    if ((c = cmp_str(s, a->name, b->name)))
        return c;
    if (a->correlation != b->correlation)
        return a->correlation < b->correlation ? -1 : 1;
    if ((c = cmp_i64(a->bytes, b->bytes)) || a->detail == b->detail)
        return c;
    const sp_rep_detail_t *da = sp_rep_detail_of(s, a), *db = sp_rep_detail_of(s, b);
    if ((c = cmp_str(s, da->shape, db->shape)))
        return c;
    return cmp_str(s, da->stack, db->stack);
}

/* The canonical sort, for input that is mostly runs already in order (the
 * adapter appends host events sorted by start, then GPU records, then memory
 * events): a natural merge sort of 32-bit indices, linear in a sorted run and
 * n log(runs) overall, then the events permuted in place along the
 * permutation's cycles. Extra memory: two indices per event, not a copy of
 * the events. */
static void merge_runs(const sp_rep_set_t *s, const uint32_t *a, size_t lo, size_t mid, size_t hi, uint32_t *out)
{
    const sp_rep_event_t *ev = s->ev;
    size_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi)
        out[k++] = sp_rep_cmp(s, &ev[a[j]], &ev[a[i]]) < 0 ? a[j++] : a[i++];
    while (i < mid)
        out[k++] = a[i++];
    while (j < hi)
        out[k++] = a[j++];
}

static int sort_canonical(sp_rep_set_t *s)
{
    size_t n = s->n, sorted = 1;
    while (sorted < n && sp_rep_cmp(s, &s->ev[sorted - 1], &s->ev[sorted]) <= 0)
        sorted++;
    if (sorted >= n)   /* the adapter merges its sources: usually in order already */
        return 0;
    uint32_t *a = sp_big_alloc(n * sizeof *a, 0), *b = sp_big_alloc(n * sizeof *b, 0);
    if (!a || !b || n > UINT32_MAX) {
        sp_big_free(a);
        sp_big_free(b);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (uint32_t)i;
    for (;;) {   /* one pass merges neighbouring runs pairwise */
        size_t runs = 0;
        for (size_t lo = 0; lo < n;) {
            size_t mid = lo + 1;
            while (mid < n && sp_rep_cmp(s, &s->ev[a[mid - 1]], &s->ev[a[mid]]) <= 0)
                mid++;
            size_t hi = mid < n ? mid + 1 : n;
            while (hi < n && sp_rep_cmp(s, &s->ev[a[hi - 1]], &s->ev[a[hi]]) <= 0)
                hi++;
            merge_runs(s, a, lo, mid, hi, b);
            runs++;
            lo = hi;
        }
        uint32_t *t = a;
        a = b;
        b = t;
        if (runs <= 1)
            break;
    }
    /* Position i takes event a[i]: follow each cycle once, one event held aside. */
    for (size_t i = 0; i < n; i++) {
        if (a[i] == i)
            continue;
        sp_rep_event_t held = s->ev[i];
        size_t k = i;
        while (a[k] != i) {
            size_t from = a[k];
            s->ev[k] = s->ev[from];
            a[k] = (uint32_t)k;
            k = from;
        }
        s->ev[k] = held;
        a[k] = (uint32_t)k;
    }
    sp_big_free(a);
    sp_big_free(b);
    return 0;
}

static void charge_memory(const sp_rep_set_t *s, long owner, const sp_rep_event_t *m)
{
    if (owner < 0)
        return;
    const sp_rep_event_t *ev = s->ev;
    sp_rep_mem_t *mem = s->mem;
    int cuda = sp_rep_device(s, m) == 1;
    if (cuda)
        mem[owner].self_cuda += m->bytes;
    else
        mem[owner].self_cpu += m->bytes;
    for (long p = owner; p >= 0; p = sp_rep_parent(&ev[p])) {
        if (cuda)
            mem[p].cuda += m->bytes;
        else
            mem[p].cpu += m->bytes;
    }
}

/* The memory collector stamps an allocation when its call returned, on
 * CLOCK_MONOTONIC, while the call's record ends at its own converted clock
 * read: the stamp can fall just after the call. So a memory event belongs to
 * the innermost open event it falls in, or ends at most this long before. */
#define MEMORY_SLACK_NS 1000

static long memory_owner(const sp_rep_event_t *ev, const sp_rep_stack_t *st, int64_t ts)
{
    for (size_t k = st->n; k-- > 0;) {
        const sp_rep_event_t *p = &ev[st->at[k]];
        if (p->ts <= ts && ts <= p->ts + p->dur + MEMORY_SLACK_NS)
            return st->at[k];
    }
    return -1;
}

/* Closes the innermost open event of a thread's stack. As torch's
 * _remove_dup_nodes before key_averages: an annotation whose only child is
 * one of the same name takes the child's self time and self memory, and the
 * child is left out of the rows, stacks and summary (sp_rep_merged; its
 * children stay its own, which none of them reads). torch merges any such
 * pair; runtime calls, whose room holds their sizes, are not merged (a
 * runtime call with one child of its own name does not happen). */
static void close_top(sp_rep_set_t *s, sp_rep_stack_t *st)
{
    sp_rep_event_t *ev = s->ev, *p = &ev[st->at[--st->n]];
    int32_t k = st->kid[st->n];
    if (k >= 0 && p->cat == SP_REP_ANNOTATION && sp_rep_step(p) < 0 && ev[k].cat == p->cat &&
        ev[k].name == p->name && ev[k].bytes == -1) {
        p->self_cpu += ev[k].self_cpu;
        if (s->mem) {
            s->mem[st->at[st->n]].self_cpu += s->mem[k].self_cpu;
            s->mem[st->at[st->n]].self_cuda += s->mem[k].self_cuda;
        }
        ev[k].bytes = SP_REP_MERGED;
    }
}

/* torch's _populate_cpu_children: a stack of open events per thread; an event
 * is a child of the top when it starts before the top ends and does not end
 * after it. One pass in canonical order, each event on its own thread's
 * stack: memory is the threads and their depth, not the events. */
static int nest_threads(sp_rep_set_t *s)
{
    sp_rep_event_t *ev = s->ev;
    sp_rep_lanes_t l = {0};
    int rc = 0;
    for (size_t i = 0; i < s->n && rc == 0; i++) {
        sp_rep_event_t *e = &ev[i];
        if (!sp_rep_is_host(e->cat) && e->cat != SP_REP_MEMORY)
            continue;
        sp_rep_stack_t *st = sp_rep_lane_stack(&l, sp_rep_pid(s, e), sp_rep_tid(s, e));
        if (!st) {
            rc = -1;
            break;
        }
        if (e->cat == SP_REP_MEMORY) {
            charge_memory(s, memory_owner(ev, st, e->ts), e);
            continue;
        }
        int64_t end = e->ts + e->dur;
        while (st->n) {
            const sp_rep_event_t *p = &ev[st->at[st->n - 1]];
            if (e->ts >= p->ts + p->dur || end > p->ts + p->dur)
                close_top(s, st);
            else
                break;
        }
        int32_t parent = st->n ? st->at[st->n - 1] : -1;
        sp_rep_set_parent(e, parent);
        if (parent >= 0)
            ev[parent].self_cpu -= e->dur;
        rc = sp_rep_stack_push(st, (int32_t)i);
    }
    for (size_t k = 0; k < l.index.n && rc == 0; k++)
        while (l.stack[k].n)
            close_top(s, &l.stack[k]);
    sp_rep_lanes_free(&l);
    return rc;
}

/* ---- correlation map ------------------------------------------------------ */

/* CUPTI numbers calls densely from 1, so ids below a bound that is a small
 * multiple of the call count index an array (sequential, cache-friendly:
 * GPU records come in id order; stepprof's own ids of calls CUPTI did not
 * see follow the window's CUPTI ids densely, sp_gpuv_host_corr); the rest
 * (ids of a late window, a sparse foreign trace) go to a
 * hash table sized by how many there are. */
typedef struct corr_map {
    int32_t *dense;   /* id -> event index + 1, 0 = none */
    uint64_t ndense;
    uint64_t *key;    /* open addressing, 0 = empty */
    int32_t *val;
    size_t cap;
} corr_map_t;

static size_t mix64(uint64_t x, size_t cap)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int is_call(const sp_rep_event_t *e, int runtime_only)
{
    return e->correlation && (e->cat == SP_REP_RUNTIME || (!runtime_only && e->cat == SP_REP_DRIVER));
}

static void corr_free(corr_map_t *m)
{
    free(m->dense);
    free(m->key);
    free(m->val);
}

/* The first (earliest) call keeps a reused id. */
static int corr_build(corr_map_t *m, const sp_rep_set_t *s, int runtime_only)
{
    /* One pass: the calls (their count, the largest 32-bit id, how many
     * above) and the ids looked up (the driver calls when runtime_only, else
     * the GPU work: whether any falls outside the dense array). */
    size_t calls = 0, big_calls = 0, looked = 0, looked_big = 0, cap = 16;
    uint64_t top = 0, looked_top = 0;
    for (size_t i = 0; i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        int big = e->correlation >= (1ull << 32);
        if (runtime_only ? e->cat == SP_REP_DRIVER : sp_rep_is_gpu_work(e->cat)) {
            looked++;
            looked_big += big;
            if (!big && e->correlation > looked_top)
                looked_top = e->correlation;
        }
        if (!is_call(e, runtime_only))
            continue;
        calls++;
        big_calls += big;
        if (!big && e->correlation > top)
            top = e->correlation;
    }
    /* Nothing looked up (no GPU work: CUPTI off): an empty map, no pass. */
    m->ndense = looked && top < 4 * (uint64_t)calls + 4096 ? top + 1 : 0;
    /* Sparse ids are kept only when one is looked up. */
    size_t sparse = m->ndense ? big_calls : calls;
    int wanted = m->ndense ? looked_big || looked_top >= m->ndense : looked > 0;
    if (!wanted)
        sparse = 0;
    while (cap < sparse * 2)
        cap *= 2;
    m->cap = cap;
    m->dense = calloc(m->ndense ? m->ndense : 1, sizeof *m->dense);
    m->key = calloc(cap, sizeof *m->key);
    m->val = malloc(cap * sizeof *m->val);
    if (!m->dense || !m->key || !m->val)
        return -1;
    for (size_t i = 0; i < (m->ndense || sparse ? s->n : 0); i++) {
        const sp_rep_event_t *e = &s->ev[i];
        if (!is_call(e, runtime_only))
            continue;
        if (e->correlation < m->ndense) {
            if (!m->dense[e->correlation])
                m->dense[e->correlation] = (int32_t)i + 1;
            continue;
        }
        if (!sparse)
            continue;
        size_t j = mix64(e->correlation, cap);
        while (m->key[j] && m->key[j] != e->correlation)
            j = (j + 1) & (cap - 1);
        if (!m->key[j]) {
            m->key[j] = e->correlation;
            m->val[j] = (int32_t)i;
        }
    }
    return 0;
}

static long corr_find(const corr_map_t *m, uint64_t c)
{
    if (!c)
        return -1;
    if (c < m->ndense)
        return (long)m->dense[c] - 1;
    for (size_t j = mix64(c, m->cap); m->key[j]; j = (j + 1) & (m->cap - 1))
        if (m->key[j] == c)
            return m->val[j];
    return -1;
}

/* A driver call that a runtime call made to do its work (NVIDIA's runtime reaches the driver through
 * cuGetProcAddress; CUPTI's DRIVER kind records that call, with the runtime call's correlation id) is
 * part of that call, not a second call: it leaves the set, so no table row, count, self time or summary
 * line has it twice. The trace still draws it, nested, as CUPTI gave it. Nested means: same thread and
 * same correlation id as a runtime call (not the span: CUPTI's clock is mapped to the host's).
 * Two passes: the map holds indices into the set as it was, and compacting it moves later events into
 * the slots of earlier ones, so every lookup is done before the first move (a runtime call followed by
 * GPU work that starts before its driver call would otherwise be read from a slot a kernel took). */
static int drop_nested_driver_calls(sp_rep_set_t *s)
{
    size_t drivers = 0;
    for (size_t i = 0; i < s->n; i++)
        drivers += s->ev[i].cat == SP_REP_DRIVER;
    if (!drivers)
        return 0;
    corr_map_t m = {0};
    int rc = corr_build(&m, s, 1);
    for (size_t i = 0; i < s->n; i++) {   /* a nested call's parent is its runtime call, for now */
        sp_rep_event_t *e = &s->ev[i];
        long r = rc == 0 && e->cat == SP_REP_DRIVER ? corr_find(&m, e->correlation) : -1;
        sp_rep_set_parent(e, r >= 0 && sp_rep_tid(s, &s->ev[r]) == sp_rep_tid(s, e) &&
                                     sp_rep_pid(s, &s->ev[r]) == sp_rep_pid(s, e)
                                 ? (int32_t)r
                                 : -1);
    }
    corr_free(&m);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->ev[i].cat == SP_REP_DRIVER && sp_rep_parent(&s->ev[i]) >= 0)
            continue;
        if (k != i)
            s->ev[k] = s->ev[i];
        k++;
    }
    s->n = k;
    return rc;
}

/* Once per set: host events' correlation ids are read into the map first,
 * then their room holds self CPU time. */
int sp_rep_analyze(sp_rep_set_t *s)
{
    if (s->analyzed)
        return -1;
    s->analyzed = 1;
    if (s->n && sort_canonical(s) != 0)
        return -1;
    if (drop_nested_driver_calls(s) != 0)
        return -1;
    corr_map_t m = {0};
    if (corr_build(&m, s, 0) != 0) {
        corr_free(&m);
        return -1;
    }
    s->has_memory = 0;
    int gpu = 0;
    for (size_t i = 0; i < s->n; i++) {
        sp_rep_event_t *e = &s->ev[i];
        sp_rep_set_parent(e, -1);   /* and launcher */
        if (sp_rep_is_host(e->cat))
            e->self_cpu = e->dur;
        s->has_memory |= e->cat == SP_REP_MEMORY;
        gpu |= sp_rep_is_gpu_work(e->cat) || e->cat == SP_REP_SYNC;
    }
    sp_big_free(s->mem);
    sp_big_free(s->cuda);
    s->mem = s->has_memory ? sp_big_alloc(s->n * sizeof *s->mem, 1) : NULL;
    s->cuda = gpu ? sp_big_alloc(s->n * sizeof *s->cuda, 0) : NULL;
    if ((s->has_memory && !s->mem) || (gpu && !s->cuda) || nest_threads(s) != 0) {
        corr_free(&m);
        return -1;
    }
    for (size_t i = 0; gpu && i < s->n; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        s->cuda[i] = sp_rep_is_gpu_work(e->cat) || e->cat == SP_REP_SYNC ? e->dur : 0;
    }
    for (size_t i = 0; gpu && i < s->n; i++) {
        sp_rep_event_t *e = &s->ev[i];
        if (!sp_rep_is_gpu_work(e->cat))
            continue;
        long launcher = corr_find(&m, e->correlation);
        sp_rep_set_parent(e, (int32_t)launcher);
        for (long p = launcher; p >= 0; p = sp_rep_parent(&s->ev[p]))
            s->cuda[p] += e->dur;
    }
    corr_free(&m);
    return 0;
}
