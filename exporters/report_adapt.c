/* exporters/report_adapt.c — see report_adapt.h. Mirrors exporters/trace.c
 * field by field: API name and correlation (sp_gpuv_host_corr),
 * launch grid/block/shared memory and kernel name, copy/set/allocation bytes
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
#include "../collectors/kernels.h"
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
static const char *trace_name(sp_rep_set_t *s, const char *raw)
{
    if (!strpbrk(raw, "\\\n"))
        return sp_rep_intern(s, raw);
    char *t = strdup(raw);
    if (!t) {
        s->oom = 1;
        return "";
    }
    size_t o = 0;
    for (const char *p = raw; *p; p++)
        if (*p != '\n')
            t[o++] = *p == '\\' ? '/' : *p;
    const char *r = sp_rep_intern_n(s, t, o);
    free(t);
    return r;
}

/* Names by the address of their source string (kernel names, API names:
 * strings that live as long as the process), so a window of a million launches
 * hashes each distinct name once, not once per event. Direct-mapped, with
 * room for a few thousand kernels: a clash only costs an intern. */
typedef struct name_cache {
    const char *src[16384];
    const char *name[16384];
} name_cache_t;

static const char *cached_name(sp_rep_set_t *s, name_cache_t *c, const char *raw)
{
    uintptr_t h = (uintptr_t)raw;
    h = (h ^ h >> 14 ^ h >> 28) & 16383;
    if (c->src[h] != raw) {
        c->name[h] = trace_name(s, raw);
        c->src[h] = raw;
    }
    return c->name[h];
}

static void api_fields(sp_rep_set_t *s, name_cache_t *c, sp_rep_event_t *r, const sp_event_t *e)
{
    const sp_api_info_t *api = &sp_api_table[e->name];
    switch (api->shape) {
    case SP_SHAPE_LAUNCH:
    case SP_SHAPE_KLAUNCH: {
        const char *k = sp_kern_name((const void *)(uintptr_t)e->a[0], api->shape == SP_SHAPE_KLAUNCH);
        r->kernel = k ? cached_name(s, c, k) : NULL;
        unsigned grid[3] = {(unsigned)(e->a[1] & 0xffffffffu), (unsigned)(e->a[1] >> 32), (unsigned)e->a[4]};
        unsigned block[3] = {(unsigned)(e->a[2] & 0xffffffffu), (unsigned)(e->a[2] >> 32),
                             (unsigned)(e->a[4] >> 32)};
        r->shape = sp_rep_shape_launch(s, grid, block, e->aux);
        r->launch = 1;
        break;
    }
    case SP_SHAPE_COPY:
        r->kind = sp_rep_intern(s, sp_api_copy_kind_name(e->a[2]));
        __attribute__((fallthrough)); /* copies, sets and allocations all have bytes in a[1] */
    case SP_SHAPE_SET:
    case SP_SHAPE_ALLOC:
        r->bytes = (int64_t)e->a[1];
        r->shape = sp_rep_shape_bytes(s, r->bytes);
        break;
    default:
        break;
    }
}

static void add_gpu(sp_rep_set_t *s, name_cache_t *c, const sp_gpu_event_t *g, long pid, uint64_t base_ns)
{
    static const int cat[] = {[SP_GPU_KERNEL] = SP_REP_KERNEL, [SP_GPU_MEMCPY] = SP_REP_MEMCPY,
                              [SP_GPU_MEMSET] = SP_REP_MEMSET, [SP_GPU_SYNC] = SP_REP_SYNC,
                              [SP_GPU_RUNTIME] = SP_REP_RUNTIME, [SP_GPU_DRIVER] = SP_REP_DRIVER};
    if (g->kind < SP_GPU_KERNEL || g->kind > SP_GPU_DRIVER)
        return;
    sp_rep_event_t *r = sp_rep_add(s);
    if (!r)
        return;
    char buf[128];
    r->cat = cat[g->kind];
    r->ts = (int64_t)(g->start - base_ns);
    if (g->kind == SP_GPU_RUNTIME || g->kind == SP_GPU_DRIVER)
        r->dur = g->end > g->start ? sp_trace_dur(r->ts, (int64_t)(g->end - g->start)) : 0;
    else
        r->dur = sp_trace_dur(r->ts, (int64_t)(sp_gpu_end(g) - g->start));
    r->correlation = g->correlation;
    if (r->cat == SP_REP_RUNTIME || r->cat == SP_REP_DRIVER) {
        const char *api = sp_cupti_api_name(g->kind == SP_GPU_DRIVER, g->cbid);
        if (!api)
            snprintf(buf, sizeof buf, "cbid %u", g->cbid);
        char shown[64];
        r->name = trace_name(s, api ? sp_gpuv_api_name(api, shown, sizeof shown) : buf);
        r->pid = pid;
        r->tid = g->tid;
        return;
    }
    const char *name = sp_gpuv_name(g, buf, sizeof buf);
    r->name = name == buf ? trace_name(s, name) : cached_name(s, c, name);
    r->pid = g->kind == SP_GPU_SYNC ? 0 : g->device;
    r->tid = g->stream;
    r->device = (int)g->device;
    if (g->kind == SP_GPU_KERNEL) {
        unsigned grid[3] = {(unsigned)g->grid[0], (unsigned)g->grid[1], (unsigned)g->grid[2]};
        unsigned block[3] = {(unsigned)g->block[0], (unsigned)g->block[1], (unsigned)g->block[2]};
        r->shape = sp_rep_shape_launch(s, grid, block, (uint64_t)(g->static_smem + g->dynamic_smem));
    } else if (g->kind == SP_GPU_MEMCPY || g->kind == SP_GPU_MEMSET) {
        r->bytes = (int64_t)g->bytes;
        r->shape = sp_rep_shape_bytes(s, r->bytes);
    }
}

/* As memory_trace.c writes them: time clamped into the window, CUPTI-only
 * records on the main thread, frees negative, pinned host memory as CPU. */
static void add_memory(sp_rep_set_t *s, const sp_mem_cycle_t *m, long pid, uint64_t base_ns, uint64_t end_ns)
{
    for (size_t i = 0; m && i < m->nops && !s->oom; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (!sp_mem_op_moves(op))
            continue;
        sp_rep_event_t *r = sp_rep_add(s);
        if (!r)
            return;
        uint64_t t = op->t < base_ns ? base_ns : op->t > end_ns ? end_ns : op->t;
        r->cat = SP_REP_MEMORY;
        r->name = sp_rep_intern(s, "[memory]");
        r->ts = (int64_t)(t - base_ns);
        r->pid = pid;
        r->tid = op->tid ? op->tid : pid;
        r->bytes = op->type == SP_MOP_FREE ? -(int64_t)op->bytes : (int64_t)op->bytes;
        r->device = op->slot == SP_MEM_HOST ? 0 : 1;
    }
}

int sp_report_adapt(sp_rep_set_t *s, const sp_event_ref_t *ev, size_t n, const sp_gpu_view_t *gpu,
                    const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns)
{
    long pid = (long)getpid();
    char name[64];
    if (sp_rep_reserve(s, n + gpu->n + (mem ? mem->nops : 0)) != 0)
        return -1;
    name_cache_t *c = calloc(1, sizeof *c);
    const char **api_names = calloc(SP_API_COUNT, sizeof *api_names);   /* by API id */
    if (!c || !api_names) {
        free(c);
        free(api_names);
        s->oom = 1;
        return -1;
    }
    for (size_t i = 0; i < n && !s->oom; i++) {
        const sp_event_t *e = ev[i].ev;
        if (e->kind != SP_EV_API && e->kind != SP_EV_STEP && e->kind != SP_EV_RANGE)
            continue;
        if (e->kind == SP_EV_API && e->name >= SP_API_COUNT)
            continue;
        sp_rep_event_t *r = sp_rep_add(s);
        if (!r)
            break;
        r->ts = (int64_t)(e->t0 - base_ns);
        r->dur = sp_trace_dur(r->ts, (int64_t)(e->t1 - e->t0));
        r->pid = pid;
        r->tid = ev[i].thread->tid;
        if (e->kind == SP_EV_API) {
            r->cat = SP_REP_RUNTIME;
            if (!api_names[e->name])
                api_names[e->name] = sp_rep_intern(s, sp_gpuv_api_name(sp_api_table[e->name].name, name, sizeof name));
            r->name = api_names[e->name];
            const sp_gpu_event_t *m = sp_gpuv_match(gpu, i);
            r->correlation = m ? m->correlation : sp_gpuv_host_corr(gpu, i);
            api_fields(s, c, r, e);
        } else if (e->kind == SP_EV_STEP) {
            r->cat = SP_REP_ANNOTATION;
            snprintf(name, sizeof name, "ProfilerStep#%" PRIu64, e->a[0]);
            r->name = sp_rep_intern(s, name);
            r->step = (long)e->a[0];
        } else {
            r->cat = SP_REP_ANNOTATION;
            r->name = trace_name(s, sp_str_get(e->name));
            if ((e->flags & SP_RANGE_OP) && e->a[2])
                r->shape = sp_rep_intern(s, sp_str_get((uint32_t)e->a[2])); /* operator's Input Dims */
        }
        const char *st = sp_stacks_text(SP_EV_STACK(e)); /* API calls; operators: Python frames */
        r->stack = st ? sp_rep_intern(s, st) : NULL;
    }
    /* GPU work first, then the API records no host event claimed: each in
     * start order as CUPTI delivered them, runs the canonical sort merges. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < gpu->n && !s->oom; i++) {
            int api = gpu->gpu[i].kind == SP_GPU_RUNTIME || gpu->gpu[i].kind == SP_GPU_DRIVER;
            if (api == pass && (!api || !gpu->api_used[i]))
                add_gpu(s, c, &gpu->gpu[i], pid, base_ns);
        }
    }
    add_memory(s, mem, pid, base_ns, end_ns);
    free(c);
    free(api_names);
    return s->oom ? -1 : 0;
}
