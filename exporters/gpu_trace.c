/* exporters/gpu_trace.c — see gpu_trace.h: the GPU view built from CUPTI's
 * records (the host calls paired with them in exporters/gpu_pair.c) and the
 * trace's GPU side written from it. */
#define _GNU_SOURCE
#include "gpu_trace.h"
#include "gpu_annot.h"
#include "../collectors/bigmem.h"
#include "gpu_launch.h"

#include "../collectors/api.h"
#include "../collectors/cupti.h"
#include "../collectors/kernels.h"
#include "../collectors/strings.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Direct-mapped by string id: a window's kernel records name a few thousand
 * kernels, each demangled (under the kernel table's lock) once, not once per
 * record and writer. A clash only asks again. */
#define MEMO_SLOTS 8192
typedef struct sp_gpuv_memo {
    uint32_t id[MEMO_SLOTS];
    const char *name[MEMO_SLOTS];
} memo_t;

void sp_gpuv_build(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev, const sp_gpu_recs_t *recs)
{
    memset(v, 0, sizeof *v);
    sp_gpu_event_t *gpu = v->gpu = recs->work;
    size_t ngpu = v->n = recs->nwork;
    sp_gpu_api_t *api = v->api = recs->calls;
    size_t napi = v->napi = recs->ncalls;
    v->host_corr_base = SP_GPUV_HOST_CORR_MIN;
    for (size_t i = 0; i < ngpu; i++)
        if (gpu[i].correlation >= v->host_corr_base)
            v->host_corr_base = (uint64_t)gpu[i].correlation + 1;
    for (size_t i = 0; i < napi; i++)
        if (api[i].correlation >= v->host_corr_base)
            v->host_corr_base = (uint64_t)api[i].correlation + 1;
    /* A sync's device, from its context, here for the trace and every report:
     * CUPTI's record has none, and its context's work may be parsed after it.
     * A context no work record showed: device 0 (where syncs were drawn before). */
    for (size_t i = 0; i < ngpu; i++) {
        if (gpu[i].kind == SP_GPU_SYNC) {
            int d = sp_cupti_context_device(gpu[i].context);
            gpu[i].device = d < 0 ? 0 : (uint32_t)d;
        }
        if (gpu[i].device < 32)
            v->devices |= 1u << gpu[i].device;
    }
    /* Without CUPTI's API records no host event has a match: no array (4
     * bytes an event at the export's peak). */
    v->host_match = napi ? sp_big_alloc((nev ? nev : 1) * sizeof *v->host_match, 0) : NULL;
    v->api_used = calloc(napi ? napi : 1, 1);
    for (int r = 0; ngpu + napi && r < 2; r++)   /* NULL: no memo, names asked each time */
        v->memo[r] = calloc(1, sizeof *v->memo[r]);
    if ((napi && !v->host_match) || !v->api_used)
        sp_gpuv_free(v);   /* no pairs: every launch timed by its start lasts 0, counted */
    sp_gpuv_pair(v, ev, nev);
}

void sp_gpuv_build_ranges(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev)
{
    sp_annot_ranges(v, ev, nev);
}

void sp_gpuv_free(sp_gpu_view_t *v)
{
    free(v->gpu);
    free(v->api);
    sp_big_free(v->host_match);
    free(v->api_used);
    free(v->range_ev);
    free(v->range_parent);
    free(v->range_call);
    free(v->memo[0]);
    free(v->memo[1]);
    memset(v, 0, sizeof *v);
}

const sp_gpu_api_t *sp_gpuv_match(const sp_gpu_view_t *v, size_t h)
{
    return v->host_match && v->host_match[h] >= 0 ? &v->api[v->host_match[h]] : NULL;
}

const char *sp_gpuv_api_name(const char *real, char *buf, size_t len)
{
    const char *p = real[0] == '_' && strncmp(real, "__cudaLaunch", 12) == 0 ? real + 2 : real;
    size_t n = strlen(p);
    if (n > 5 && p[n - 5] == '_' && (memcmp(p + n - 4, "ptsz", 4) == 0 || memcmp(p + n - 4, "ptds", 4) == 0))
        n -= 5;
    if (p == real && n == strlen(real))
        return real;
    snprintf(buf, len, "%.*s", (int)n, p);
    return buf;
}

void sp_gpuv_write_device_props(sp_jw_t *w, const sp_gpu_view_t *v)
{
    int first = 1;
    for (uint32_t d = 0; d < SP_MAX_DEVICES; d++) {
        const sp_devprop_t *p = (v->devices >> d) & 1 ? sp_cupti_device(d) : NULL;
        if (!p)
            continue;
        sp_jw_puts(w, first ? "\n    " : ",\n    ");
        first = 0;
        sp_jw_printf(w, "{\"id\": %u, \"name\": ", d);
        sp_jw_str(w, p->name, 0);
        sp_jw_printf(w, ", \"totalGlobalMem\": %" PRIu64 ", \"computeMajor\": %d, \"computeMinor\": %d, "
                        "\"maxThreadsPerBlock\": %d, \"maxThreadsPerMultiprocessor\": %d, \"regsPerBlock\": %d, "
                        "\"regsPerMultiprocessor\": %d, \"warpSize\": %d, \"sharedMemPerBlock\": %" PRIu64
                        ", \"sharedMemPerMultiprocessor\": %" PRIu64 ", \"numSms\": %d, "
                        "\"maxBlocksPerMultiprocessor\": %d}",
                     p->total_global_mem, p->major, p->minor, p->max_threads_per_block, p->max_threads_per_sm,
                     p->regs_per_block, p->regs_per_sm, p->warp_size, p->shared_mem_per_block,
                     p->shared_mem_per_sm, p->num_sms, p->max_blocks_per_sm);
    }
    if (!first)
        sp_jw_puts(w, "\n  ");
}

/* GPU events: pid = device (a sync's from sp_gpuv_build), tid = stream. CUPTI
 * gives context-wide syncs stream id 0xffffffff: draw them on lane 0. */
static uint32_t gpu_tid(const sp_gpu_event_t *e)
{
    return e->stream == UINT32_MAX ? 0 : e->stream;
}

void sp_gpuv_write_metadata(sp_jw_t *w, const sp_gpu_view_t *v)
{
    char label[64];
    uint32_t seen_streams[256];
    size_t ns = 0;
    for (uint32_t d = 0; d < 32; d++) {
        if (!((v->devices >> d) & 1))
            continue;
        snprintf(label, sizeof label, "GPU %u", d);
        sp_jw_meta(w, "process_name", d, 0, "name", label, 0);
        sp_jw_meta(w, "process_labels", d, 0, "labels", label, 0);
        sp_jw_meta(w, "process_sort_index", d, 0, "sort_index", NULL, 0x1000000L + d);
    }
    for (size_t i = 0; i < v->n; i++) {
        const sp_gpu_event_t *e = &v->gpu[i];
        uint32_t key = e->device << 24 | (gpu_tid(e) & 0xffffff);
        size_t k = 0;
        while (k < ns && seen_streams[k] != key)
            k++;
        if (k < ns || ns == sizeof seen_streams / sizeof seen_streams[0])
            continue;
        seen_streams[ns++] = key;
        snprintf(label, sizeof label, "stream %u ", gpu_tid(e));
        sp_jw_meta(w, "thread_name", e->device, gpu_tid(e), "name", label, 0);
        sp_jw_meta(w, "thread_sort_index", e->device, gpu_tid(e), "sort_index", NULL, gpu_tid(e));
    }
}

static const char *copy_kind(uint8_t k)
{
    static const char *const n[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    return k < sizeof n / sizeof n[0] ? n[k] : "Unknown";
}

static const char *mem_kind(uint32_t k)
{
    static const char *const n[] = {"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"};
    return k < sizeof n / sizeof n[0] ? n[k] : "Unknown";
}

static const char *sync_name(uint8_t t)
{
    static const char *const n[] = {"Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync"};
    return t < sizeof n / sizeof n[0] ? n[t] : "Unknown Sync";
}

void sp_gpuv_slice(sp_jw_t *w, const char *cat, const char *name, long pid, long tid, int64_t ts, int64_t dur)
{
    SP_JW_LIT(w, "{\"ph\":\"X\",\"cat\":\"");
    sp_jw_puts(w, cat);
    SP_JW_LIT(w, "\",\"name\":");
    sp_jw_str(w, name, 1);
    SP_JW_KI(w, ",\"pid\":", pid);
    SP_JW_LIT(w, ",\"tid\":");
    sp_gpuv_slice_times(w, tid, ts, dur);
}

void sp_gpuv_slice_times(sp_jw_t *w, long tid, int64_t ts, int64_t dur)
{
    sp_jw_i64(w, tid);
    SP_JW_LIT(w, ",\"ts\":");
    sp_jw_us(w, ts);
    SP_JW_LIT(w, ",\"dur\":");
    sp_jw_us(w, dur < 0 ? 0 : sp_trace_dur(ts, dur));
}

/* Occupancy as Kineto reports it: resident blocks per SM limited by threads,
 * registers, shared memory and the block cap, against the launch's blocks per
 * SM. */
static void occupancy(sp_jw_t *w, const sp_gpu_event_t *e)
{
    const sp_devprop_t *p = sp_cupti_device(e->device);
    long blocks = (long)e->grid[0] * e->grid[1] * e->grid[2];
    long tpb = (long)e->block[0] * e->block[1] * e->block[2];
    int known = p && p->num_sms > 0 && tpb > 0 && p->warp_size > 0;
    double bps = known ? (double)blocks / p->num_sms : 0;
    long warps_pb = known ? (tpb + p->warp_size - 1) / p->warp_size : 0;
    SP_JW_LIT(w, ",\"blocks per SM\":");
    sp_jw_fix6(w, bps);
    SP_JW_LIT(w, ",\"warps per SM\":");
    sp_jw_fix6(w, bps * (double)warps_pb);
    SP_JW_KI(w, ",\"grid\":[", e->grid[0]);
    SP_JW_KI(w, ",", e->grid[1]);
    SP_JW_KI(w, ",", e->grid[2]);
    SP_JW_KI(w, "],\"block\":[", e->block[0]);
    SP_JW_KI(w, ",", e->block[1]);
    SP_JW_KI(w, ",", e->block[2]);
    SP_JW_LIT(w, "]");
    if (!known)
        return;
    long max_by_threads = p->max_threads_per_sm / (warps_pb * p->warp_size);
    long regs = (long)e->registers * warps_pb * p->warp_size;
    long max_by_regs = regs > 0 && p->regs_per_sm > 0 ? p->regs_per_sm / regs : max_by_threads;
    long smem = (long)e->static_smem + e->dynamic_smem;
    long max_by_smem = smem > 0 && p->shared_mem_per_sm ? (long)(p->shared_mem_per_sm / (uint64_t)smem) : max_by_threads;
    long active = max_by_threads;
    if (max_by_regs < active)
        active = max_by_regs;
    if (max_by_smem < active)
        active = max_by_smem;
    if (p->max_blocks_per_sm > 0 && p->max_blocks_per_sm < active)
        active = p->max_blocks_per_sm;
    double resident = bps < (double)active ? bps : (double)active;
    double max_warps = (double)p->max_threads_per_sm / p->warp_size;
    double occ = max_warps > 0 ? 100.0 * resident * (double)warps_pb / max_warps : 0;
    SP_JW_KI(w, ",\"est. achieved occupancy %\":", (int)(occ > 100 ? 100 : occ + 0.5));
}

/* occupancy()'s text by launch configuration, kept across events and
 * exports (GPU events are written by one job at a time, as export.c's token
 * bucket): kernels repeat a few configurations, and the text was ~4% of the
 * trace thread's time with CUPTI on. Direct-mapped; a clash only costs a
 * rendering. The text is captured from the writer's buffer as written. */
#define OCC_SLOTS 512
typedef struct occ_slot {
    int32_t key[11];   /* device + 1, grid, block, registers, shared memory, the device's SMs (-1: unknown) */
    uint32_t len;      /* 0: empty */
    char text[216];
} occ_slot_t;
static occ_slot_t *occ_cache;

static void occupancy_cached(sp_jw_t *w, const sp_gpu_event_t *e)
{
    const sp_devprop_t *p = sp_cupti_device(e->device);
    int32_t key[11] = {(int32_t)e->device + 1, e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1],
                       e->block[2], e->registers, e->static_smem, e->dynamic_smem, p ? (int32_t)p->num_sms : -1};
    if (!occ_cache && !(occ_cache = calloc(OCC_SLOTS, sizeof *occ_cache))) {
        occupancy(w, e);
        return;
    }
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 11; i++)
        h = (h ^ (uint32_t)key[i]) * 1099511628211ull;
    occ_slot_t *c = &occ_cache[(h ^ h >> 29) & (OCC_SLOTS - 1)];
    if (c->len && !memcmp(c->key, key, sizeof key)) {
        sp_jw_raw(w, c->text, c->len);
        return;
    }
    size_t n0 = w->n;
    occupancy(w, e);
    if (w->n >= n0 && w->n - n0 <= sizeof c->text && !w->err) {   /* no flush in between */
        memcpy(c->key, key, sizeof key);
        memcpy(c->text, w->buf + n0, w->n - n0);
        c->len = (uint32_t)(w->n - n0);
    }
}

static void gpu_args(sp_jw_t *w, const sp_gpu_event_t *e, uint64_t ext)
{
    SP_JW_LIT(w, ",\"args\":{");
    if (ext)
        SP_JW_KU(w, "\"External id\":", ext), SP_JW_LIT(w, ",");
    if (e->kind == SP_GPU_KERNEL)
        SP_JW_KU(w, "\"queued\":", e->queued > e->start ? 0 : e->queued ? (e->start - e->queued) : 0), SP_JW_LIT(w, ",");
    SP_JW_KU(w, "\"device\":", e->device);
    SP_JW_KU(w, ",\"context\":", e->context);
    SP_JW_KU(w, ",\"stream\":", e->stream);
    SP_JW_KU(w, ",\"correlation\":", e->correlation);
    if (e->kind == SP_GPU_KERNEL) {
        SP_JW_KU(w, ",\"registers per thread\":", e->registers);
        SP_JW_KI(w, ",\"shared memory\":", e->static_smem + e->dynamic_smem);
        occupancy_cached(w, e);
    } else if (e->kind == SP_GPU_MEMCPY || e->kind == SP_GPU_MEMSET) {
        uint64_t dur = sp_gpu_end(e) - e->start;
        SP_JW_KU(w, ",\"bytes\":", e->bytes);
        SP_JW_LIT(w, ",\"memory bandwidth (GB/s)\":");
        sp_jw_fix6(w, dur ? (double)e->bytes / (double)dur : 0.0);
    }
    SP_JW_LIT(w, "}},\n");
}

static const char *kernel_name(uint32_t id)
{
    const char *k = sp_str_get(id);
    const char *d = sp_kern_demangle(k);
    return d ? d : k;
}

const char *sp_gpuv_name(const sp_gpu_view_t *v, int reader, const sp_gpu_event_t *e, char *buf, size_t len)
{
    switch (e->kind) {
    case SP_GPU_KERNEL: {
        memo_t *m = v->memo[reader];
        if (!m)
            return kernel_name(e->name);
        size_t h = (e->name * 0x9e3779b1u) >> 19 & (MEMO_SLOTS - 1);
        if (!m->name[h] || m->id[h] != e->name) {
            m->name[h] = kernel_name(e->name);
            m->id[h] = e->name;
        }
        return m->name[h];
    }
    case SP_GPU_MEMCPY:
        snprintf(buf, len, "Memcpy %s (%s -> %s)", copy_kind(e->copy_kind), mem_kind(e->src_kind),
                 mem_kind(e->dst_kind));
        return buf;
    case SP_GPU_MEMSET:
        snprintf(buf, len, "Memset (%s)", mem_kind(e->value));
        return buf;
    case SP_GPU_SYNC:
        return sync_name(e->sync_type);
    default:   /* API records are named by their cbid (sp_cupti_api_name): sync_type is not theirs */
        return sync_name(0);
    }
}

static void write_gpu_event(sp_jw_t *w, const sp_gpu_view_t *v, const sp_gpu_event_t *e, uint64_t ext, uint64_t base)
{
    static const char *const cats[] = {[SP_GPU_KERNEL] = "kernel", [SP_GPU_MEMCPY] = "gpu_memcpy",
                                       [SP_GPU_MEMSET] = "gpu_memset", [SP_GPU_SYNC] = "cuda_sync"};
    if (e->kind >= sizeof cats / sizeof cats[0] || !cats[e->kind])
        return;
    char name[128];
    sp_gpuv_slice(w, cats[e->kind], sp_gpuv_name(v, SP_GPUV_TRACE, e, name, sizeof name), e->device, gpu_tid(e), (int64_t)(e->start - base),
          (int64_t)(sp_gpu_end(e) - e->start));
    gpu_args(w, e, ext);
}

/* A CUPTI DRIVER record of a driver call that an intercepted runtime call made to do its work (same
 * thread, same correlation id; not its span: CUPTI's clock is mapped to the host's) is drawn as CUPTI gave it, but its id is written as
 * stepprof_runtime_correlation: under "correlation" a second event with the call's id makes clients
 * (TensorBoard's plugin) count that call's GPU work twice. */
static void write_unmatched_api(sp_jw_t *w, const sp_gpu_api_t *e, uint64_t ext, int pid, uint64_t base, int nested)
{
    const char *real = sp_cupti_api_name(e->kind == SP_GPU_DRIVER, e->cbid);
    char fallback[32], buf[64];
    if (!real) {
        snprintf(fallback, sizeof fallback, "cbid %u", e->cbid);
        real = fallback;
    }
    const char *name = sp_gpuv_api_name(real, buf, sizeof buf);
    sp_gpuv_slice(w, e->kind == SP_GPU_DRIVER ? "cuda_driver" : "cuda_runtime", name, pid, e->tid, (int64_t)(e->start - base),
          (int64_t)(e->end - e->start));
    SP_JW_KU(w, ",\"args\":{\"cbid\":", e->cbid);
    if (nested)
        SP_JW_KU(w, ",\"stepprof_runtime_correlation\":", e->correlation);
    else
        SP_JW_KU(w, ",\"correlation\":", e->correlation);
    if (ext)
        SP_JW_KU(w, ",\"External id\":", ext);
    if (name != real) {
        SP_JW_LIT(w, ",\"stepprof_api\":\"");
        sp_jw_puts(w, real);
        SP_JW_LIT(w, "\"");
    }
    if (e->result)   /* as an intercepted call's (trace.c): absent = 0 */
        SP_JW_KI(w, ",\"result\":", e->result);
    SP_JW_LIT(w, ",\"stepprof_source\":\"cupti\"}},\n");
}

/* Flow arrow from the launching call (tid, ts) to the GPU event. */
static void flow(sp_jw_t *w, uint32_t id, long pid, long tid, int64_t ts, long gpid, long gtid, int64_t gts)
{
    SP_JW_KU(w, "{\"ph\":\"s\",\"id\":", id);
    SP_JW_KI(w, ",\"pid\":", pid);
    SP_JW_KI(w, ",\"tid\":", tid);
    SP_JW_LIT(w, ",\"ts\":");
    sp_jw_us(w, ts);
    SP_JW_KU(w, ",\"cat\":\"ac2g\",\"name\":\"ac2g\"},\n{\"ph\":\"f\",\"id\":", id);
    SP_JW_KI(w, ",\"pid\":", gpid);
    SP_JW_KI(w, ",\"tid\":", gtid);
    SP_JW_LIT(w, ",\"ts\":");
    sp_jw_us(w, gts);
    SP_JW_LIT(w, ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"},\n");
}

static int inside_runtime_call(const sp_launches_t *t, const sp_gpu_api_t *e)
{
    if (e->kind != SP_GPU_DRIVER)
        return 0;
    const sp_launch_t *f = sp_launches_find(t, e->correlation);
    return f && f->host && !f->driver && f->tid == (int64_t)e->tid;
}

/* The table of launching calls: room and id range for the host events CUPTI
 * matched and the API records it did not. */
static int launches_init(sp_launches_t *t, const sp_gpu_view_t *v, size_t nev)
{
    size_t n = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < nev + v->napi; i++) {
        const sp_gpu_api_t *e = i < nev ? sp_gpuv_match(v, i) : &v->api[i - nev];
        if (!e || (i >= nev && v->api_used[i - nev]))
            continue;
        n++;
        lo = e->correlation < lo ? e->correlation : lo;
        hi = e->correlation > hi ? e->correlation : hi;
    }
    return sp_launches_init(t, n, lo, hi);
}

void sp_gpuv_write_events(sp_jw_t *w, const sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev, int pid,
                          uint64_t base)
{
    if (!v->n && !v->napi)
        return;
    /* Where each correlation id's call is drawn: the host event it matched, or CUPTI's own record. */
    sp_launches_t t;
    sp_annot_walk_t walk;
    if (v->ranges_oom || sp_annot_walk_init(&walk, v->nslots) != 0)
        return;   /* the trace fails (sp_trace_write) */
    if (launches_init(&t, v, nev) != 0) {
        sp_annot_walk_free(&walk);
        return;
    }
    for (size_t h = 0; h < nev; h++) {
        uint64_t ext = sp_annot_walk_next(&walk, ev, h, NULL);
        const sp_gpu_api_t *m = sp_gpuv_match(v, h);
        if (m)
            sp_launches_add(&t, &(sp_launch_t){ext, (int64_t)ev[h].ev->t0, sp_ev_owner(ev[h].ev)->tid, m->correlation,
                                               m->kind == SP_GPU_DRIVER, 0, 1});
    }
    if (walk.oom)
        w->err = ENOMEM;
    sp_annot_walk_free(&walk);
    /* Ranges in (thread, start) order, to place calls only CUPTI saw (a driver
     * call inside an intercepted runtime call already on the host's clock:
     * gpu_pair.c nested_onto_host). */
    uint64_t *byt = sp_annot_by_thread(v, ev);
    for (size_t i = 0; i < v->napi; i++) {
        const sp_gpu_api_t *e = &v->api[i];
        if (!v->api_used[i]) {
            uint64_t range = sp_annot_range_at(v, ev, byt, e->tid, (int64_t)e->start);
            write_unmatched_api(w, e, sp_gpuv_call_ext(v, range), pid, base, inside_runtime_call(&t, e));
            sp_launches_add(&t, &(sp_launch_t){range, (int64_t)e->start, e->tid, e->correlation,
                                               e->kind == SP_GPU_DRIVER, 0, 0});
        }
    }
    free(byt);
    /* Per GPU record: its launching call's innermost range (a mapping, as the launch table: gpu_launch.c). */
    uint64_t *gext = mmap(NULL, v->n * sizeof *gext, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gext == MAP_FAILED)
        gext = NULL;
    for (size_t i = 0; i < v->n; i++) {
        const sp_gpu_event_t *e = &v->gpu[i];
        sp_launch_t *la = e->kind != SP_GPU_SYNC ? sp_launches_find(&t, e->correlation) : NULL;
        if (la && gext)
            gext[i] = la->range;
        write_gpu_event(w, v, e, la ? sp_gpuv_call_ext(v, la->range) : 0, base);
        /* One arrow per call: flow ids must pair one start with one finish. */
        if (la && !la->flowed++)
            flow(w, e->correlation, pid, la->tid, la->ts - (int64_t)base, e->device, e->stream,
                 (int64_t)(e->start - base));
    }
    if (gext)
        sp_annot_write(w, v, ev, gext, base);
    if (gext)
        munmap(gext, v->n * sizeof *gext);
    sp_launches_free(&t);
}
