/* exporters/report_adapt.c — see report_adapt.h. Mirrors exporters/trace.c
 * field by field: API name and correlation (sp_gpuv_host_corr),
 * launch grid/block/shared memory, copy/set/allocation bytes
 * and copy direction, "Call stack", NVTX range names and ProfilerStep#N, with
 * the trace's name rules (backslash -> '/', newlines dropped). Instant marks
 * are not table rows and are skipped. From exporters/gpu_trace.c: CUPTI's
 * correlation id on matched calls, CUPTI API records no host event claimed,
 * and kernel / gpu_memcpy / gpu_memset / cuda_sync events (gpu_user_annotation
 * spans are drawn from host ranges and are no report rows). From
 * exporters/memory_trace.c: the [memory] instants of allocations and frees. */
#include "report_adapt.h"

#include "../collectors/api.h"
#include "../collectors/cupti.h"
#include "../collectors/ranges.h"
#include "../collectors/stacks.h"
#include "../collectors/strings.h"
#include "stacks_sym.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The trace writer's name rules, so names compare equal after a round trip. */
static sp_rep_str_t trace_name(sp_rep_set_t *s, const char *raw)
{
    if (!strpbrk(raw, "\\\n"))
        return sp_rep_intern_id(s, raw);
    char *t = strdup(raw);
    if (!t) {
        s->oom = 1;
        return 0;
    }
    size_t o = 0;
    for (const char *p = raw; *p; p++)
        if (*p != '\n')
            t[o++] = *p == '\\' ? '/' : *p;
    sp_rep_str_t r = sp_rep_intern_id_n(s, t, o);
    free(t);
    return r;
}

/* Names by the address of their source string (kernel names, API names:
 * strings that live as long as the process), so a window of a million launches
 * hashes each distinct name once, not once per event. Open addressing at most
 * half full, doubling from 1024 slots: a fixed direct-mapped 16384 (192 KiB,
 * cleared) was most of a small window's report memory. */
typedef struct name_cache {
    const char **src;
    sp_rep_str_t *name;
    size_t cap, used;
} name_cache_t;

static size_t name_slot(const name_cache_t *c, const char *raw)
{
    uint64_t h = (uint64_t)(uintptr_t)raw * 0x9e3779b97f4a7c15ull;
    size_t j = (size_t)(h >> 32) & (c->cap - 1);
    while (c->src[j] && c->src[j] != raw)
        j = (j + 1) & (c->cap - 1);
    return j;
}

/* Room for one more name; -1 when out of memory. */
static int name_room(name_cache_t *c)
{
    if (c->cap && (c->used + 1) * 2 <= c->cap)
        return 0;
    name_cache_t g = {NULL, NULL, c->cap ? c->cap * 2 : 1024, c->used};
    g.src = calloc(g.cap, sizeof *g.src);
    g.name = malloc(g.cap * sizeof *g.name);
    if (!g.src || !g.name) {
        free(g.src);
        free(g.name);
        return -1;
    }
    for (size_t i = 0; i < c->cap; i++) {
        if (c->src[i]) {
            size_t j = name_slot(&g, c->src[i]);
            g.src[j] = c->src[i];
            g.name[j] = c->name[i];
        }
    }
    free(c->src);
    free(c->name);
    *c = g;
    return 0;
}

static void name_cache_free(name_cache_t *c)
{
    if (c) {
        free(c->src);
        free(c->name);
        free(c);
    }
}

static sp_rep_str_t cached_name(sp_rep_set_t *s, name_cache_t *c, const char *raw)
{
    if (name_room(c) != 0) {
        s->oom = 1;
        return 0;
    }
    size_t j = name_slot(c, raw);
    if (!c->src[j]) {
        c->name[j] = trace_name(s, raw);
        c->src[j] = raw;
        c->used++;
    }
    return c->name[j];
}

static void api_fields(sp_rep_set_t *s, sp_rep_event_t *r, sp_rep_detail_t *d, const sp_event_t *e)
{
    const sp_api_info_t *api = &sp_api_table[e->name];
    switch (api->shape) {
    case SP_SHAPE_LAUNCH:
    case SP_SHAPE_KLAUNCH: {
        unsigned grid[3] = {(unsigned)(e->a[1] & 0xffffffffu), (unsigned)(e->a[1] >> 32), (unsigned)e->a[4]};
        unsigned block[3] = {(unsigned)(e->a[2] & 0xffffffffu), (unsigned)(e->a[2] >> 32),
                             (unsigned)(e->a[4] >> 32)};
        d->shape = sp_rep_shape_launch(s, grid, block, e->aux);
        d->launch = 1;
        break;
    }
    case SP_SHAPE_COPY:
        sp_rep_detail_kind(s, d, sp_rep_intern_id(s, sp_api_copy_kind_name(e->a[2])));
        __attribute__((fallthrough)); /* copies, sets and allocations all have bytes in a[1] */
    case SP_SHAPE_SET:
    case SP_SHAPE_ALLOC:
        sp_rep_set_bytes(r, (int64_t)e->a[1]);
        d->shape = sp_rep_shape_bytes(s, r->bytes);
        break;
    default:
        break;
    }
}

/* One window's sources, read as four streams: host events (sorted by
 * start), GPU work and the API records no host event claimed (each in the
 * order CUPTI delivered them) and memory operations. */
typedef struct adapt {
    sp_rep_set_t *s;
    name_cache_t *c;
    sp_rep_str_t *api_names;  /* by API id, 0 = not yet interned */
    struct id_memo {          /* the last stack text interned per slot, by the collector's id */
        uint32_t id;
        sp_rep_str_t str;
    } *stacks;
    sp_rep_idmap_t range_ids; /* NVTX range and operator names: set id + 1 by collector id */
    const sp_event_ref_t *ev;
    size_t n;
    const sp_gpu_view_t *gpu;
    const sp_mem_cycle_t *mem;
    long pid;
    uint64_t base_ns, end_ns;
    uint32_t *call_tid;       /* by correlation id - corr_lo: see runtime_calls */
    uint64_t corr_lo, corr_n;
} adapt_t;

/* Ids two runtime calls carry: left to sp_rep_analyze, which keeps the first. */
#define CALL_TID_MANY UINT32_MAX

static void claim(adapt_t *a, uint64_t corr, uint32_t tid)
{
    if (corr && corr - a->corr_lo < a->corr_n) {
        uint32_t *t = &a->call_tid[corr - a->corr_lo];
        *t = *t ? CALL_TID_MANY : tid;
    }
}

/* CUPTI's DRIVER record of a driver call that a runtime call made to do its
 * work (same thread, same correlation id) is no report event: sp_rep_analyze
 * would drop it (agg.c drop_nested_driver_calls), and leaving it out here
 * saves an event per launch at the export's peak. So the OS thread of the
 * runtime call (every host API event is one, as are CUPTI's RUNTIME records
 * no host event claimed) by CUPTI correlation id, over the window's ids when
 * they are dense; host calls without a CUPTI record carry ids above them. */
static void runtime_calls(adapt_t *a)
{
    const sp_gpu_view_t *g = a->gpu;
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t drivers = 0;
    for (size_t i = 0; i < g->n; i++) {
        lo = g->gpu[i].correlation < lo ? g->gpu[i].correlation : lo;
        hi = g->gpu[i].correlation > hi ? g->gpu[i].correlation : hi;
    }
    for (size_t i = 0; i < g->napi; i++) {
        const sp_gpu_api_t *e = &g->api[i];
        lo = e->correlation < lo ? e->correlation : lo;
        hi = e->correlation > hi ? e->correlation : hi;
        drivers += e->kind == SP_GPU_DRIVER && !g->api_used[i];
    }
    if (!drivers || hi - lo >= 4 * (uint64_t)(g->n + g->napi) + 4096 || !(a->call_tid = calloc(hi - lo + 1, sizeof *a->call_tid)))
        return;
    a->corr_lo = lo;
    a->corr_n = hi - lo + 1;
    for (size_t i = 0; i < a->n; i++) {
        const sp_gpu_api_t *m = a->ev[i].ev->kind == SP_EV_API ? sp_gpuv_match(g, i) : NULL;
        if (m)
            claim(a, m->correlation, (uint32_t)sp_ev_owner(a->ev[i].ev)->tid);
    }
    for (size_t i = 0; i < g->napi; i++)
        if (g->api[i].kind == SP_GPU_RUNTIME && !g->api_used[i])
            claim(a, g->api[i].correlation, g->api[i].tid);
}

static int nested_driver_call(const adapt_t *a, const sp_gpu_api_t *g)
{
    uint64_t k = g->correlation - a->corr_lo;
    return g->kind == SP_GPU_DRIVER && g->correlation && k < a->corr_n && a->call_tid[k] == g->tid &&
           g->tid != CALL_TID_MANY;
}

/* Each fill sets r from item i of its stream; 0 when that item is no event. */
static int fill_host(adapt_t *a, size_t i, sp_rep_event_t *r)
{
    sp_rep_set_t *s = a->s;
    const sp_event_t *e = a->ev[i].ev;
    char name[64];
    if (e->kind != SP_EV_API && e->kind != SP_EV_STEP && e->kind != SP_EV_RANGE)
        return 0;
    if (e->kind == SP_EV_API && e->name >= SP_API_COUNT)
        return 0;
    sp_rep_detail_t d = sp_rep_no_detail(s);
    int64_t ts = (int64_t)(e->t0 - a->base_ns);
    sp_rep_set_ts(r, ts);
    sp_rep_set_dur(r, sp_trace_dur(ts, (int64_t)(e->t1 - e->t0)));
    sp_rep_set_lane(s, r, a->pid, sp_ev_owner(a->ev[i].ev)->tid, 0);
    if (e->kind == SP_EV_API) {
        r->cat = SP_REP_RUNTIME;
        if (!a->api_names[e->name])
            a->api_names[e->name] = sp_rep_intern_id(s, sp_gpuv_api_name(sp_api_table[e->name].name, name, sizeof name));
        r->name = a->api_names[e->name];
        const sp_gpu_api_t *m = sp_gpuv_match(a->gpu, i);
        r->correlation = m ? m->correlation : sp_gpuv_host_corr(a->gpu, i);
        api_fields(s, r, &d, e);
    } else if (e->kind == SP_EV_STEP) {
        r->cat = SP_REP_ANNOTATION;
        snprintf(name, sizeof name, "ProfilerStep#%" PRIu64, e->a[0]);
        r->name = sp_rep_intern_id(s, name);
        sp_rep_set_step(r, e->a[0] <= INT32_MAX ? (int64_t)e->a[0] : -1);   /* as stepprof-report reads it */
    } else {
        r->cat = SP_REP_ANNOTATION;
        uint32_t *id = sp_rep_idmap_at(&a->range_ids, e->name);   /* every one interned up front */
        r->name = id && *id && *id != UINT32_MAX ? *id - 1 : trace_name(s, sp_str_get(e->name));
        if ((e->flags & SP_RANGE_OP) && e->a[2])
            d.shape = sp_rep_intern_id(s, sp_str_get((uint32_t)e->a[2])); /* operator's Input Dims */
    }
    uint32_t sid = SP_EV_STACK(e);   /* API calls; operators: Python frames */
    struct id_memo *m = &a->stacks[sid & 4095];
    if (sid && m->id != sid) {
        const char *st = sp_stacks_text(sid);
        *m = (struct id_memo){sid, st ? sp_rep_intern_id(s, st) : 0};
    }
    d.stack = sid ? m->str : 0;
    sp_rep_set_detail(s, r, &d);
    return 1;
}

static int fill_gpu(adapt_t *a, const sp_gpu_event_t *g, sp_rep_event_t *r)
{
    static const int cat[] = {[SP_GPU_KERNEL] = SP_REP_KERNEL, [SP_GPU_MEMCPY] = SP_REP_MEMCPY,
                              [SP_GPU_MEMSET] = SP_REP_MEMSET, [SP_GPU_SYNC] = SP_REP_SYNC};
    if (g->kind < SP_GPU_KERNEL || g->kind > SP_GPU_SYNC)
        return 0;
    sp_rep_set_t *s = a->s;
    char buf[128];
    r->cat = cat[g->kind];
    int64_t ts = (int64_t)(g->start - a->base_ns);
    sp_rep_set_ts(r, ts);
    sp_rep_set_dur(r, sp_trace_dur(ts, (int64_t)(sp_gpu_end(g) - g->start)));
    r->correlation = g->correlation;
    const char *name = sp_gpuv_name(a->gpu, SP_GPUV_REPORTS, g, buf, sizeof buf);
    r->name = name == buf ? trace_name(s, name) : cached_name(s, a->c, name);
    sp_rep_set_lane(s, r, g->device, g->stream, (int)g->device);   /* a sync's device: sp_gpuv_build */
    sp_rep_detail_t d = sp_rep_no_detail(s);
    if (g->kind == SP_GPU_KERNEL) {
        unsigned grid[3] = {(unsigned)g->grid[0], (unsigned)g->grid[1], (unsigned)g->grid[2]};
        unsigned block[3] = {(unsigned)g->block[0], (unsigned)g->block[1], (unsigned)g->block[2]};
        d.shape = sp_rep_shape_launch(s, grid, block, (uint64_t)(g->static_smem + g->dynamic_smem));
    } else if (g->kind == SP_GPU_MEMCPY || g->kind == SP_GPU_MEMSET) {
        sp_rep_set_bytes(r, (int64_t)g->bytes);
        d.shape = sp_rep_shape_bytes(s, r->bytes);
    }
    sp_rep_set_detail(s, r, &d);
    return 1;
}

static int fill_api(adapt_t *a, const sp_gpu_api_t *g, sp_rep_event_t *r)
{
    sp_rep_set_t *s = a->s;
    char buf[128], shown[64];
    r->cat = g->kind == SP_GPU_DRIVER ? SP_REP_DRIVER : SP_REP_RUNTIME;
    int64_t ts = (int64_t)(g->start - a->base_ns);
    sp_rep_set_ts(r, ts);
    sp_rep_set_dur(r, g->end > g->start ? sp_trace_dur(ts, (int64_t)(g->end - g->start)) : 0);
    r->correlation = g->correlation;
    const char *api = sp_cupti_api_name(g->kind == SP_GPU_DRIVER, g->cbid);
    if (!api)
        snprintf(buf, sizeof buf, "cbid %u", g->cbid);
    r->name = trace_name(s, api ? sp_gpuv_api_name(api, shown, sizeof shown) : buf);
    sp_rep_set_lane(s, r, a->pid, g->tid, 0);
    return 1;
}

static int fill_gpu_work(adapt_t *a, size_t i, sp_rep_event_t *r)
{
    return fill_gpu(a, &a->gpu->gpu[i], r);
}

static int fill_gpu_api(adapt_t *a, size_t i, sp_rep_event_t *r)
{
    const sp_gpu_api_t *g = &a->gpu->api[i];
    return !a->gpu->api_used[i] && !nested_driver_call(a, g) && fill_api(a, g, r);
}

/* As memory_trace.c writes them: time clamped into the window, CUPTI-only
 * records on the main thread, frees negative, pinned host memory as CPU. */
static int fill_memory(adapt_t *a, size_t i, sp_rep_event_t *r)
{
    const sp_mem_op_t *op = &a->mem->ops[i];
    if (!sp_mem_op_moves(op))
        return 0;
    uint64_t t = op->t < a->base_ns ? a->base_ns : op->t > a->end_ns ? a->end_ns : op->t;
    r->cat = SP_REP_MEMORY;
    r->name = sp_rep_intern_id(a->s, "[memory]");
    sp_rep_set_ts(r, (int64_t)(t - a->base_ns));
    sp_rep_set_lane(a->s, r, a->pid, op->tid ? op->tid : a->pid, op->slot == SP_MEM_HOST ? 0 : 1);
    sp_rep_set_bytes(r, op->type == SP_MOP_FREE ? -(int64_t)op->bytes : (int64_t)op->bytes);
    return 1;
}

typedef struct stream {
    int (*fill)(adapt_t *, size_t, sp_rep_event_t *);
    size_t next, n;
    int full;              /* head holds the stream's next event */
    sp_rep_event_t head;
} stream_t;

static void pull(adapt_t *a, stream_t *st)
{
    for (st->full = 0; !st->full && st->next < st->n && !a->s->oom;) {
        sp_rep_reset(a->s, &st->head);
        st->full = st->fill(a, st->next++, &st->head);
    }
}

static uint32_t *grow_ids(uint32_t *v, size_t *cap)
{
    size_t c = *cap ? *cap * 2 : 1024;
    uint32_t *g = realloc(v, c * sizeof *g);
    if (g)
        *cap = c;
    return g;
}

/* Every distinct NVTX range and operator name of the window interned up
 * front, by the collector's id (dense, and rising through a window of new
 * names): the ids seen first (one pass), then room for them all in the set's
 * strings, then their texts in batches whose cache misses overlap
 * (sp_rep_intern_many). fill_host then finds each by its collector id. */
static int intern_range_names(adapt_t *a)
{
    sp_rep_set_t *s = a->s;
    size_t ncid = 0, cap = 0;
    uint32_t *cid = NULL;
    for (size_t i = 0; i < a->n; i++) {
        const sp_event_t *e = a->ev[i].ev;
        if (e->kind != SP_EV_RANGE)
            continue;
        uint32_t *at = sp_rep_idmap_at(&a->range_ids, e->name);
        if (at && *at)
            continue;
        uint32_t *grown = at && ncid == cap ? grow_ids(cid, &cap) : cid;
        if (!at || !grown) {
            free(cid);
            s->oom = 1;
            return -1;
        }
        cid = grown;
        *at = UINT32_MAX;   /* seen: interned below */
        cid[ncid++] = e->name;
    }
    enum { BATCH = 256 };
    const char *text[BATCH];
    size_t len[BATCH], nb = 0;
    uint32_t of[BATCH];
    sp_rep_str_t ids[BATCH];
    if (sp_rep_reserve_strings(s, ncid) != 0) {
        free(cid);
        return -1;
    }
    for (size_t k = 0; k <= ncid; k++) {
        if (nb == BATCH || (k == ncid && nb)) {
            sp_rep_intern_many(s, text, len, ids, nb);
            for (size_t b = 0; b < nb; b++)
                *sp_rep_idmap_at(&a->range_ids, of[b]) = ids[b] + 1;
            nb = 0;
        }
        if (k == ncid)
            break;
        const char *t = sp_str_get(cid[k]);
        if (strpbrk(t, "\\\n")) {   /* the trace's name rules first: rare */
            *sp_rep_idmap_at(&a->range_ids, cid[k]) = trace_name(s, t) + 1;
            continue;
        }
        text[nb] = t;
        len[nb] = strlen(t);
        of[nb++] = cid[k];
    }
    free(cid);
    return s->oom ? -1 : 0;
}

/* The streams merged by sp_rep_cmp as they are read (ties: the earlier
 * stream first, as a stable sort of them one after the other): the events
 * arrive in canonical order, or nearly, and sp_rep_analyze's sort then has
 * next to nothing to move. Moving 128-byte events along a permutation's
 * cycles there was the export's slowest step. */
int sp_report_adapt(sp_rep_set_t *s, const sp_event_ref_t *ev, size_t n, const sp_gpu_view_t *gpu,
                    const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns)
{
    if (sp_rep_reserve(s, n + gpu->n + gpu->napi + (mem ? mem->nops : 0)) != 0)
        return -1;
    adapt_t a = {s, calloc(1, sizeof *a.c), calloc(SP_API_COUNT, sizeof *a.api_names), calloc(4096, sizeof *a.stacks),
                 {0}, ev, n, gpu, mem, (long)getpid(), base_ns, end_ns, NULL, 0, 0};
    stream_t *st = calloc(4, sizeof *st);
    if (!a.c || !a.api_names || !a.stacks || !st || intern_range_names(&a) != 0) {
        s->oom = 1;
        goto out;
    }
    st[0] = (stream_t){.fill = fill_host, .n = n};
    st[1] = (stream_t){.fill = fill_gpu_work, .n = gpu->n};
    st[2] = (stream_t){.fill = fill_gpu_api, .n = gpu->napi};
    st[3] = (stream_t){.fill = fill_memory, .n = mem ? mem->nops : 0};
    runtime_calls(&a);
    for (int k = 0; k < 4; k++)
        pull(&a, &st[k]);
    while (!s->oom) {
        stream_t *best = NULL;
        for (int k = 0; k < 4; k++)
            if (st[k].full && (!best || sp_rep_cmp(s, &st[k].head, &best->head) < 0))
                best = &st[k];
        sp_rep_event_t *r = best ? sp_rep_add(s) : NULL;
        if (!r)
            break;
        *r = best->head;
        pull(&a, best);
    }
out:
    name_cache_free(a.c);
    free(a.api_names);
    free(a.stacks);
    sp_rep_idmap_free(&a.range_ids);
    free(a.call_tid);
    free(st);
    return s->oom ? -1 : 0;
}
