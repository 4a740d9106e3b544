/* exporters/trace.c — streams one window's events as Kineto-flavoured Chrome
 * trace JSON: top-level keys in the order HTA and TensorBoard expect (rank
 * metadata before traceEvents), host events as "X" slices on pid/tid, process
 * and thread metadata, and the closing "Record Window End" instant. The args
 * of each runtime call are printed from its API shape (collectors/api.h). */
#define _GNU_SOURCE
#include "trace.h"

#include "../collectors/api.h"
#include "../collectors/clock.h"
#include "../collectors/kernels.h"
#include "../collectors/rank.h"
#include "../collectors/stacks.h"
#include "../collectors/strings.h"
#include "gpu_annot.h"
#include "gz.h"
#include "jsonw.h"
#include "memory_trace.h"
#include "ops_trace.h"
#include "outfile.h"
#include "py_trace.h"
#include "report_buf.h"
#include "json_escape.h"
#include "stacks_sym.h"
#include "../collectors/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEPPROF_VERSION "0.1.0"

/* JSON text that repeats from event to event, built once per export: a
 * fragment of escaped text (NULL: none). */
typedef struct frag {
    char *s;
    size_t n;
} frag_t;

static void frag_put(void *b, const char *p, size_t n)
{
    sp_rb_add(b, p, n);
}

/* lit, then (when str is not NULL) str as a quoted trace name, then tail. */
static frag_t frag_make(const char *lit, const char *str, const char *tail)
{
    sp_rb_t b;
    sp_rb_init(&b);
    sp_rb_puts(&b, lit);
    if (str) {
        sp_rb_add(&b, "\"", 1);
        sp_json_escape(str, 1, frag_put, &b);
        sp_rb_add(&b, "\"", 1);
    }
    sp_rb_puts(&b, tail);
    char *t = b.oom ? NULL : realloc(b.s, b.n + 1);   /* a report buffer starts at 4 KiB */
    if (!t) {
        sp_rb_free(&b);
        return (frag_t){NULL, 0};
    }
    return (frag_t){t, b.n};
}

/* A launch's kernel name by function or handle, looked up once per export
 * (sp_kern_name per launch was ~3-4% of the export). A name that JSON and
 * the trace's name rules leave as it is (nearly all) is written from
 * collectors/kernels.c's text, which lives as long as the process; only one
 * that needs escaping gets its `,"kernel":"..."` built (a copy per kernel
 * was ~150 KiB of a 4096-kernel window's export). Direct-mapped; a clash
 * only costs a lookup. */
typedef struct kname_cache {
    struct kname {
        const void *fn;
        const char *text;   /* NULL: no name */
        uint32_t len;
        uint8_t handle, known, built;   /* built: text is the whole argument, ours to free */
    } slot[4096];
} kname_cache_t;

/* 1 when sp_json_escape(s, 1, ...) would write s unchanged. */
static int name_as_is(const char *s, size_t *len)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int n = c >= 0x20 && c != 0x7f && c != '"' && c != '\\' ? sp_utf8_len(p) : 0;
        if (!n)
            return 0;
        p += n;
    }
    *len = (size_t)(p - (const unsigned char *)s);
    return 1;
}

static void kname_arg(sp_jw_t *w, kname_cache_t *c, const void *fn, int handle)
{
    uintptr_t h = (uintptr_t)fn;
    struct kname *k = &c->slot[(h ^ h >> 12 ^ h >> 24) & 4095];
    if (!k->known || k->fn != fn || k->handle != handle) {
        const char *name = sp_kern_name(fn, handle);
        size_t len = 0;
        if (k->built)
            free((char *)k->text);
        *k = (struct kname){fn, name, 0, (uint8_t)handle, 1, 0};
        if (name && name_as_is(name, &len) && len <= UINT32_MAX) {
            k->len = (uint32_t)len;
        } else if (name) {
            frag_t f = frag_make(",\"kernel\":", name, "");
            *k = (struct kname){fn, f.s, (uint32_t)f.n, (uint8_t)handle, f.s != NULL, 1};
            if (!f.s || f.n > UINT32_MAX) {
                w->err = ENOMEM;   /* the trace fails as a failed write would (outfile.c says it) */
                k->known = 0;
            }
        }
    }
    if (!k->text)
        return;
    if (k->built) {
        sp_jw_raw(w, k->text, k->len);
        return;
    }
    SP_JW_LIT(w, ",\"kernel\":\"");
    sp_jw_raw(w, k->text, k->len);
    SP_JW_LIT(w, "\"");
}

/* Per API: `{"ph":"X","cat":"...","name":"...","pid":N,"tid":` up to the
 * thread, `,"args":{"cbid":N,"correlation":` and the `,"stepprof_api":"..."`
 * of a call drawn under another name (empty otherwise). */
typedef struct api_frags {
    frag_t head[SP_API_COUNT], args[SP_API_COUNT], real[SP_API_COUNT];
} api_frags_t;

static int api_frags_make(api_frags_t *f, unsigned id, int pid)
{
    if (f->head[id].s)
        return 0;
    char name[64], lit[128], tail[64];
    const sp_api_info_t *api = &sp_api_table[id];
    const char *shown = sp_gpuv_api_name(api->name, name, sizeof name);
    snprintf(lit, sizeof lit, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", api->driver ? "cuda_driver" : "cuda_runtime");
    snprintf(tail, sizeof tail, ",\"pid\":%d,\"tid\":", pid);
    f->head[id] = frag_make(lit, shown, tail);
    snprintf(lit, sizeof lit, ",\"args\":{\"cbid\":%d,\"correlation\":", api->cbid);
    f->args[id] = frag_make(lit, NULL, "");
    if (shown != api->name)
        snprintf(lit, sizeof lit, ",\"stepprof_api\":\"%s\"", api->name);
    f->real[id] = frag_make(shown != api->name ? lit : "", NULL, "");
    return f->head[id].s && f->args[id].s && f->real[id].s ? 0 : -1;
}

static void api_frags_free(api_frags_t *f)
{
    for (unsigned i = 0; f && i < SP_API_COUNT; i++) {
        free(f->head[i].s);
        free(f->args[i].s);
        free(f->real[i].s);
    }
    free(f);
}

static void kname_free(kname_cache_t *c)
{
    for (size_t i = 0; c && i < sizeof c->slot / sizeof c->slot[0]; i++)
        if (c->slot[i].built)
            free((char *)c->slot[i].text);
    free(c);
}

/* A launch's ,"grid":[...],"block":[...] as the last launch wrote it: most
 * launches repeat their predecessor's shape, and then it is one copy instead
 * of six numbers. Written with room reserved, so no flush splits it. */
typedef struct dims_memo {
    uint64_t a1, a2, a4;
    size_t n;          /* 0: none yet */
    char text[96];     /* two [x,y,z] of 32-bit numbers and their keys: at most 85 */
} dims_memo_t;

typedef struct ctx {
    sp_jw_t *w;
    int pid;
    uint64_t base_ns;
    const sp_gpu_view_t *gpu;
    const sp_event_ref_t *ev;
    const sp_ops_links_t *links;   /* forward-to-backward links of the operators */
    const sp_py_trace_t *py;       /* python_function ids (with_stack) */
    kname_cache_t *kn;
    api_frags_t *api;
    dims_memo_t dims;
    sp_annot_walk_t walk;          /* each host event's External id, in the writer's order */
} ctx_t;

static void slice_head(ctx_t *c, const char *cat, const char *name, const sp_event_ref_t *r)
{
    sp_gpuv_slice(c->w, cat, name, c->pid, sp_ev_owner(r->ev)->tid, (int64_t)(r->ev->t0 - c->base_ns),
                  (int64_t)(r->ev->t1 - r->ev->t0));
}

static void dim_arg(sp_jw_t *w, uint64_t xy, uint32_t z)
{
    SP_JW_KU(w, "[", xy & 0xffffffffu);
    SP_JW_KU(w, ",", xy >> 32);
    SP_JW_KU(w, ",", z);
    SP_JW_LIT(w, "]");
}

static void dims_arg(sp_jw_t *w, dims_memo_t *m, const sp_event_t *e)
{
    if (m->n && m->a1 == e->a[1] && m->a2 == e->a[2] && m->a4 == e->a[4]) {
        sp_jw_raw(w, m->text, m->n);
        return;
    }
    if (w->cap - w->n < sizeof m->text && (sp_jw_flush(w) != 0 || w->cap < sizeof m->text))
        return;
    size_t at = w->n;
    SP_JW_LIT(w, ",\"grid\":");
    dim_arg(w, e->a[1], (uint32_t)e->a[4]);
    SP_JW_LIT(w, ",\"block\":");
    dim_arg(w, e->a[2], (uint32_t)(e->a[4] >> 32));
    *m = (dims_memo_t){.a1 = e->a[1], .a2 = e->a[2], .a4 = e->a[4], .n = w->n - at};
    memcpy(m->text, w->buf + at, m->n);
}

static void api_args(sp_jw_t *w, kname_cache_t *kn, dims_memo_t *dm, const sp_event_t *e)
{
    const sp_api_info_t *api = &sp_api_table[e->name];
    switch (api->shape) {
    case SP_SHAPE_LAUNCH:
    case SP_SHAPE_KLAUNCH: {
        kname_arg(w, kn, (const void *)(uintptr_t)e->a[0], api->shape == SP_SHAPE_KLAUNCH);
        dims_arg(w, dm, e);
        if (e->aux)   /* dynamic shared memory; absent: 0 bytes, as in most launches */
            SP_JW_KU(w, ",\"shared memory\":", e->aux);
        break;
    }
    case SP_SHAPE_GRAPH:
        SP_JW_KU(w, ",\"graph exec\":", e->a[0]);
        break;
    case SP_SHAPE_HOSTFN:
        SP_JW_KU(w, ",\"host function\":", e->a[0]);
        break;
    case SP_SHAPE_ALLOC:
        SP_JW_KU(w, ",\"bytes\":", e->a[1]);
        SP_JW_KU(w, ",\"ptr\":", e->a[0]);
        if (e->name == SP_API_cudaMallocPitch || e->name == SP_API_cuMemAllocPitch_v2)
            SP_JW_KU(w, ",\"pitch\":", e->a[2]);
        else if (e->a[2])
            SP_JW_KU(w, ",\"flags\":", e->a[2]);
        break;
    case SP_SHAPE_FREE:
        SP_JW_KU(w, ",\"ptr\":", e->a[0]);
        if (e->a[1])
            SP_JW_KU(w, ",\"bytes\":", e->a[1]);
        break;
    case SP_SHAPE_COPY:
        SP_JW_KU(w, ",\"bytes\":", e->a[1]);
        SP_JW_LIT(w, ",\"kind\":\"");
        sp_jw_puts(w, sp_api_copy_kind_name(e->a[2]));
        SP_JW_KU(w, "\",\"dst\":", e->a[0]);
        SP_JW_KU(w, ",\"src\":", e->a[4]);
        if (e->a[2] == SP_COPY_PEER && e->aux != SP_PEER_UNKNOWN) {
            SP_JW_KU(w, ",\"dstDevice\":", e->aux & 0xffffu);
            SP_JW_KU(w, ",\"srcDevice\":", e->aux >> 16);
        }
        break;
    case SP_SHAPE_SET:
        SP_JW_KU(w, ",\"bytes\":", e->a[1]);
        SP_JW_KU(w, ",\"ptr\":", e->a[0]);
        if (api->driver)   /* cuMemsetD8/16/32: unsigned char / short / int */
            SP_JW_KU(w, ",\"value\":", (uint32_t)e->a[2]);
        else               /* cudaMemset*: int */
            SP_JW_KI(w, ",\"value\":", (int)e->a[2]);
        break;
    case SP_SHAPE_SYNC:
        if (e->a[0])
            SP_JW_KU(w, ",\"event\":", e->a[0]);
        break;
    case SP_SHAPE_PLAIN:
        break;
    }
    /* Never "stream": HTA takes any event with args.stream for GPU work. */
    if (api->has_stream)
        SP_JW_KU(w, ",\"stream handle\":", e->a[3]);
}

static void write_event(ctx_t *c, const sp_event_ref_t *r, size_t index)
{
    uint64_t ext = sp_annot_walk_next(&c->walk, c->ev, index, NULL);
    sp_jw_t *w = c->w;
    const sp_event_t *e = r->ev;
    char name[64];
    switch (e->kind) {
    case SP_EV_API: {
        if (e->name >= SP_API_COUNT)
            return;
        /* With CUPTI's record of the same call, its correlation id is the
         * one GPU events carry. External id: the enclosing operator's or
         * range's, as Kineto (sp_gpuv_call_ext). */
        const sp_gpu_api_t *m = sp_gpuv_match(c->gpu, index);
        const api_frags_t *f = c->api;
        if (api_frags_make(c->api, e->name, c->pid) != 0) {
            w->err = ENOMEM;
            return;
        }
        sp_jw_raw(w, f->head[e->name].s, f->head[e->name].n);
        sp_gpuv_slice_times(w, sp_ev_owner(r->ev)->tid, (int64_t)(e->t0 - c->base_ns), (int64_t)(e->t1 - e->t0));
        sp_jw_raw(w, f->args[e->name].s, f->args[e->name].n);
        sp_jw_u64(w, m ? (uint64_t)m->correlation : sp_gpuv_host_corr(c->gpu, index));
        if ((ext = sp_gpuv_call_ext(c->gpu, ext)))
            SP_JW_KU(w, ",\"External id\":", ext);
        sp_jw_raw(w, f->real[e->name].s, f->real[e->name].n);
        if (e->result)   /* absent: the call returned 0 (cudaSuccess / CUDA_SUCCESS) */
            SP_JW_KI(w, ",\"result\":", e->result);
        api_args(w, c->kn, &c->dims, e);
        sp_stacks_write_arg(w, SP_EV_STACK(e));
        SP_JW_LIT(w, "}}");
        break;
    }
    case SP_EV_STEP:
        snprintf(name, sizeof name, "ProfilerStep#%" PRIu64, e->a[0]);
        slice_head(c, "user_annotation", name, r);
        SP_JW_KU(w, ",\"args\":{\"External id\":", ext);
        SP_JW_LIT(w, "}}");
        break;
    case SP_EV_RANGE:
        slice_head(c, sp_ops_trace_cat(e), sp_str_get(e->name), r);
        SP_JW_KU(w, ",\"args\":{\"External id\":", ext);
        sp_ops_trace_args(w, c->links, c->ev, index);
        sp_stacks_write_arg(w, SP_EV_STACK(e));
        SP_JW_LIT(w, "}}");
        break;
    case SP_EV_PYFUNC:
        sp_py_trace_write(w, c->py, c->ev, index, c->pid, c->base_ns);
        return;
    case SP_EV_MARK:
        SP_JW_LIT(w, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"user_annotation\",\"name\":");
        sp_jw_str(w, sp_str_get(e->name), 1);
        SP_JW_KI(w, ",\"pid\":", c->pid);
        SP_JW_KI(w, ",\"tid\":", sp_ev_owner(r->ev)->tid);
        SP_JW_LIT(w, ",\"ts\":");
        sp_jw_us(w, (int64_t)(e->t0 - c->base_ns));
        SP_JW_LIT(w, "}");
        break;
    default:
        return;
    }
    SP_JW_LIT(w, ",\n");
}

static void read_comm(const char *path, char *out, size_t len, const char *fallback)
{
    snprintf(out, len, "%s", fallback);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = 0;
    else
        snprintf(out, len, "%s", fallback);
    fclose(f);
}

static int cmp_thread(const void *a, const void *b)
{
    const sp_thread_t *x = *(const sp_thread_t *const *)a, *y = *(const sp_thread_t *const *)b;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Threads whose calls only CUPTI saw (CUDA injection without preload, a
 * static cudart): their API records need a thread_name too. One pass; a
 * thread is looked up only when the tid changes between records. */
static void write_cupti_only_threads(ctx_t *c, const sp_thread_t **ts, size_t nt)
{
    const sp_gpu_view_t *g = c->gpu;
    uint32_t named[256], last = 0;
    size_t nn = 0;
    char comm[64], path[64], label[128];
    for (size_t i = 0; g && i < g->napi; i++) {
        const sp_gpu_api_t *e = &g->api[i];
        if ((g->api_used && g->api_used[i]) || e->tid == last)
            continue;
        last = e->tid;
        int seen = 0;
        for (size_t k = 0; k < nt && !seen; k++)
            seen = (uint32_t)ts[k]->tid == e->tid;
        for (size_t k = 0; k < nn && !seen; k++)
            seen = named[k] == e->tid;
        if (seen || nn == sizeof named / sizeof named[0])
            continue;
        named[nn++] = e->tid;
        snprintf(path, sizeof path, "/proc/self/task/%u/comm", e->tid);
        read_comm(path, comm, sizeof comm, "thread");
        snprintf(label, sizeof label, "thread %u (%s)", e->tid, comm);
        sp_jw_meta(c->w, "thread_name", c->pid, (int)e->tid, "name", label, 0);
        sp_jw_meta(c->w, "thread_sort_index", c->pid, (int)e->tid, "sort_index", NULL, e->tid);
    }
}

static void write_metadata(ctx_t *c, const sp_event_ref_t *ev, size_t n)
{
    char comm[64], path[64], label[128];
    read_comm("/proc/self/comm", comm, sizeof comm, "process");
    sp_jw_meta(c->w, "process_name", c->pid, 0, "name", comm, 0);
    sp_jw_meta(c->w, "process_labels", c->pid, 0, "labels", "CPU", 0);
    sp_jw_meta(c->w, "process_sort_index", c->pid, 0, "sort_index", NULL, c->pid);
    /* Distinct threads that have events, in tid order (at most one per
     * registration slot: an array per event was 8 bytes of export memory
     * per event). */
    size_t nt = 0;
    uint32_t nslots = 0;
    for (size_t i = 0; i < n; i++)
        nslots = sp_ev_owner(ev[i].ev)->slot + 1 > nslots ? sp_ev_owner(ev[i].ev)->slot + 1 : nslots;
    const sp_thread_t **ts = malloc((nslots ? nslots : 1) * sizeof *ts);
    unsigned char *seen = calloc(nslots ? nslots : 1, 1); /* by registration slot: O(1) per event */
    if (!ts || !seen) {
        free(ts);
        free(seen);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!seen[sp_ev_owner(ev[i].ev)->slot]) {
            seen[sp_ev_owner(ev[i].ev)->slot] = 1;
            ts[nt++] = sp_ev_owner(ev[i].ev);
        }
    }
    free(seen);
    qsort(ts, nt, sizeof *ts, cmp_thread);
    for (size_t i = 0; i < nt; i++) {
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", ts[i]->tid);
        read_comm(path, comm, sizeof comm, ts[i]->name);
        snprintf(label, sizeof label, "thread %d (%s)", ts[i]->tid, comm);
        sp_jw_meta(c->w, "thread_name", c->pid, ts[i]->tid, "name", label, 0);
        sp_jw_meta(c->w, "thread_sort_index", c->pid, ts[i]->tid, "sort_index", NULL, ts[i]->tid);
    }
    write_cupti_only_threads(c, ts, nt);
    free(ts);
}

static void write_header(sp_jw_t *w, const sp_export_job_t *job, const sp_gpu_view_t *gpu, int memory,
                         uint64_t base_epoch_ns)
{
    sp_jw_puts(w, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
    sp_gpuv_write_device_props(w, gpu);
    sp_jw_puts(w, "],\n");
    /* Kineto's shape; HTA finds the rank by "rank":\s+N, so keep the space. */
    const sp_rank_t *r = sp_rank();
    const char *backend = r->rank >= 0 ? sp_rank_backend() : NULL;
    if (r->rank >= 0)
        sp_jw_printf(w, "  \"distributedInfo\": {%s%s%s\"rank\": %ld, \"world_size\": %ld},\n",
                     backend ? "\"backend\": \"" : "", backend ? backend : "", backend ? "\", " : "", r->rank,
                     r->world > 0 ? r->world : r->rank + 1);
    if (memory)
        sp_jw_puts(w, "  \"profile_memory\": 1,\n");
    if (job->with_stack)
        sp_jw_puts(w, "  \"with_stack\": 1,\n");
    if (job->record_shapes)
        sp_jw_puts(w, "  \"record_shapes\": 1,\n");
    sp_jw_printf(w, "  \"stepprof_version\": \"%s\",\n  \"stepprof_cycle\": %ld,\n", STEPPROF_VERSION, job->cycle);
    if (job->first_step >= 0)
        sp_jw_printf(w, "  \"stepprof_steps\": [%ld, %ld],\n", job->first_step, job->last_step);
    sp_jw_printf(w, "  \"stepprof_dropped_events\": %" PRIu64 ",\n  \"stepprof_truncated\": %s,\n", job->dropped,
                 job->truncated ? "true" : "false");
    sp_jw_printf(w, "  \"stepprof_gpu_source\": \"%s\",\n  \"stepprof_cupti_dropped_records\": %" PRIu64 ",\n",
                 job->cupti ? "cupti" : "none", job->cupti_dropped);
    sp_jw_printf(w, "  \"stepprof_api_records_filtered\": %" PRIu64 ",\n", job->api_filtered);
    sp_jw_printf(w, "  \"stepprof_host_correlation_base\": %" PRIu64 ",\n", gpu->host_corr_base);
    if (gpu->ends_cupti || gpu->ends_none)
        sp_jw_printf(w, "  \"stepprof_launch_ends\": {\"cupti\": %" PRIu64 ", \"none\": %" PRIu64 "},\n",
                     gpu->ends_cupti, gpu->ends_none);
    sp_jw_printf(w, "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": %" PRIu64 ",\n  \"traceEvents\": [\n",
                 base_epoch_ns);
}

int sp_trace_write(const sp_export_job_t *job, const char *stem, const sp_event_ref_t *ev, size_t n,
                   const sp_gpu_view_t *gpu, uint64_t base_ns, uint64_t end_ns, const sp_mem_cycle_t *mem)
{
    sp_outfile_t f;
    if (sp_outfile_open(&f, job->output_dir, stem, job->use_gzip ? ".pt.trace.json.gz" : ".pt.trace.json") != 0)
        return -1;
    sp_jw_t *w = malloc(sizeof *w);
    if (!w) {
        sp_outfile_abort(&f);
        return -1;
    }
    sp_gz_t *gz = job->use_gzip ? sp_gz_open(f.fd, job->gzip_lib) : NULL;
    if (job->use_gzip && !gz) {
        sp_outfile_abort(&f);
        if (sp_outfile_open(&f, job->output_dir, stem, ".pt.trace.json") != 0) {
            free(w);
            return -1;
        }
    }
    sp_jw_init(w, f.fd, gz, 256 * ((uint64_t)n + gpu->n));   /* about 250 bytes an event (README) */
    sp_ops_links_t *links = sp_ops_trace_link(ev, n);
    sp_py_trace_t *py = sp_py_trace_prepare(ev, n);
    ctx_t c = {w, (int)getpid(), base_ns, gpu, ev, links, py, calloc(1, sizeof(kname_cache_t)),
               calloc(1, sizeof(api_frags_t)), {0}, {0}};
    if (!c.kn || !c.api || gpu->ranges_oom || sp_annot_walk_init(&c.walk, gpu->nslots) != 0)
        w->err = ENOMEM;   /* the trace fails as a failed write would (outfile.c says it) */
    write_header(w, job, gpu, mem != NULL, base_ns + (uint64_t)sp_clock_epoch_offset());
    write_metadata(&c, ev, n);
    sp_gpuv_write_metadata(w, gpu);
    for (size_t i = 0; i < n && !w->err; i++)
        write_event(&c, &ev[i], i);
    if (c.walk.oom)
        w->err = ENOMEM;
    sp_annot_walk_free(&c.walk);
    sp_ops_trace_flows(w, links, ev, c.pid, base_ns);
    sp_ops_trace_free(links);
    sp_py_trace_free(py);
    kname_free(c.kn);
    api_frags_free(c.api);
    sp_gpuv_write_events(w, gpu, ev, n, c.pid, base_ns);
    sp_memtrace_write(w, mem, c.pid, base_ns, end_ns);
    sp_jw_puts(w, "{\"name\":\"Record Window End\",\"ph\":\"i\",\"s\":\"g\",\"pid\":\"\",\"tid\":\"\",\"ts\":");
    sp_jw_us(w, (int64_t)(end_ns - base_ns));
    sp_jw_puts(w, "}\n  ],\n  \"traceName\": ");
    sp_jw_str(w, f.final, 0);
    sp_jw_puts(w, "\n}\n");
    int err = sp_jw_finish(w) != 0 ? w->err : 0;
    free(w);
    if (err) {
        sp_outfile_fail(&f, err); /* one line per problem for the run (outfile.c) */
        return -1;
    }
    return sp_outfile_commit(&f);
}
