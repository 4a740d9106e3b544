/* exporters/gpu_trace.h — the GPU half of a window's trace: CUPTI's records
 * joined to the host records (each intercepted call matched to CUPTI's record
 * of the same call, so no call appears twice), written as kernel / gpu_memcpy
 * / gpu_memset / cuda_sync events on pid = device, tid = stream, ac2g flow
 * arrows from the launching call, gpu_user_annotation spans (one per NVTX
 * range and stream; never for ProfilerStep#N, which TensorBoard would count
 * as extra steps), and device metadata. docs/formats.md: which client reads
 * which field. */
#ifndef SP_GPU_TRACE_H
#define SP_GPU_TRACE_H

#include "../collectors/events.h"
#include "../collectors/gpu.h"
#include "jsonw.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sp_gpu_view {
    sp_gpu_event_t *gpu;   /* GPU work */
    size_t n;
    sp_gpu_api_t *api;     /* CUPTI's runtime and driver API records */
    size_t napi;
    int32_t *host_match;   /* per host event: index of its CUPTI API record, or -1; NULL without API records */
    uint8_t *api_used;     /* per API record: already matched to a host event */
    uint32_t devices;      /* bit mask of devices with activity */
    size_t nranges;        /* ranges and steps, in External id order (id = index + 1); a host
                              event's own id is told by a pass beside the writer's
                              (sp_annot_walk), not kept per event. 32-bit ids: they count
                              ranges, fewer than a window's events */
    uint32_t *range_ev;    /* per range: its host event index */
    uint32_t *range_parent; /* per range: the enclosing range's External id (0 = none) */
    uint32_t *range_call;  /* per range: the External id of a call made directly inside it */
    uint32_t nslots;       /* host events' thread registration slots: 0 .. nslots - 1 */
    int ranges_oom;        /* the ranges ran out of memory: the trace fails (ENOMEM) */
    uint64_t host_corr_base; /* sp_gpuv_host_corr's first id: above every CUPTI id of the window */
    uint64_t ends_cupti, ends_none; /* launches timed by their start only (SP_EV_END_CUPTI): ended by
                                       CUPTI's record of the call / without one (0 ns long) */
    uint64_t ends_last;    /* the latest end among them */
    struct sp_gpuv_memo *memo[2]; /* kernel display names by string id, as they are asked for: one
                                     per reader (SP_GPUV_TRACE, SP_GPUV_REPORTS), which run at once */
} sp_gpu_view_t;

/* Where a GPU record ends in the trace: CUPTI never reports 0 ns for real
 * work, and HTA's temporal breakdown fails on zero-length activity, so a
 * record that ends at or before its start lasts 1 ns. */
static inline uint64_t sp_gpu_end(const sp_gpu_event_t *e)
{
    return e->end > e->start ? e->end : e->start + 1;
}

/* The duration to print (ns) for a slice starting ts ns after the base: at
 * most 1 ns shorter than dur, so that ts + dur added in doubles (as every
 * reader does, in microseconds) never passes the true end. Otherwise a step
 * ending where the next begins overlaps it by 1e-13 us and TensorBoard drops
 * the next step's whole subtree ("ranges on the same thread should not
 * intersect"). */
static inline int64_t sp_trace_dur(int64_t ts, int64_t dur)
{
    double end = (double)(ts + dur) / 1000.0;
    while (dur > 0 && (double)ts / 1000.0 + (double)dur / 1000.0 > end)
        dur--;
    return dur;
}

/* The External id of a call whose innermost enclosing range (or step) is
 * `range` (0 = none): that range's own, unless it lies inside a torch
 * operator or record_function scope (SP_RANGE_TORCH), then the innermost
 * such one's. torch.profiler never sees NVTX ranges, so a kernel
 * launched inside a library's range (CCCL's cub::DeviceRadixSort, in its own
 * domain) or a user's range within an operator belongs to the operator, as
 * in Kineto; the range is still drawn (user_annotation, gpu_user_annotation).
 * Outside every torch scope, the innermost range's. */
static inline uint64_t sp_gpuv_call_ext(const sp_gpu_view_t *v, uint64_t range)
{
    return range && v->range_call ? v->range_call[range - 1] : range;
}

/* Builds the view; host events sorted by start, t0/t1 in ns. Takes ownership of recs' arrays. */
void sp_gpuv_build(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev, const sp_gpu_recs_t *recs);
/* sp_gpuv_build's pairing (exporters/gpu_pair.c): host_match and api_used
 * filled (left alone without them), the ends of launches timed by their
 * start set and counted (ends_*). */
void sp_gpuv_pair(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev);
/* Its ranges (External ids, nesting: ext, nranges, range_*; gpu_annot.h), which only the trace reads:
 * built apart, on the trace writer's thread once the reports are under way beside it. */
void sp_gpuv_build_ranges(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev);
void sp_gpuv_free(sp_gpu_view_t *v);

/* The correlation id of an intercepted call no CUPTI record claimed: the
 * view's base plus the call's index among the window's host events, so
 * unique in the window and above every CUPTI id in it (nothing else in the
 * trace carries it: no flow, no GPU event). Dense, so it prints in few
 * digits. The base is at least SP_GPUV_HOST_CORR_MIN: HTA narrows the
 * correlation column to the smallest integer type its values fit
 * (pandas downcast), and then cannot store row numbers in it. The trace
 * header says the base (stepprof_host_correlation_base). */
#define SP_GPUV_HOST_CORR_MIN 32768
static inline uint64_t sp_gpuv_host_corr(const sp_gpu_view_t *v, size_t host_index)
{
    return v->host_corr_base + host_index;
}

/* For a host API event: CUPTI's record of the same call, or NULL. */
const sp_gpu_api_t *sp_gpuv_match(const sp_gpu_view_t *v, size_t host_index);

/* The trace name of a GPU record: demangled kernel, "Memcpy HtoD (Pageable ->
 * Device)", "Memset (Device)", "Stream Sync"...; may use buf. Each reader
 * (the trace's writer, the reports) names its own memo: they run on two
 * threads. */
enum { SP_GPUV_TRACE, SP_GPUV_REPORTS };
const char *sp_gpuv_name(const sp_gpu_view_t *v, int reader, const sp_gpu_event_t *e, char *buf, size_t len);

/* The name a runtime call is drawn with, as HTA and TensorBoard look for it:
 * the launch spellings nvcc's <<<>>> produces (__cudaLaunchKernel) and the
 * per-thread-stream spellings (_ptsz, _ptds) lose their decoration, so every
 * launch reads cudaLaunchKernel / cudaLaunchKernelExC. The true name stays in
 * args (cbid, and "stepprof_api" when it differs). May use buf. */
const char *sp_gpuv_api_name(const char *real, char *buf, size_t len);

/* One "X" slice up to its args: {"ph", "cat", "name", "pid", "tid", "ts", "dur"}, times in ns from the base. */
void sp_gpuv_slice(sp_jw_t *w, const char *cat, const char *name, long pid, long tid, int64_t ts, int64_t dur);
/* Its end from the thread on, after `"tid":`: tid, then "ts" and "dur". */
void sp_gpuv_slice_times(sp_jw_t *w, long tid, int64_t ts, int64_t dur);

void sp_gpuv_write_device_props(sp_jw_t *w, const sp_gpu_view_t *v);
void sp_gpuv_write_metadata(sp_jw_t *w, const sp_gpu_view_t *v);
/* Everything GPU-side plus CUPTI API records no host event claimed. */
void sp_gpuv_write_events(sp_jw_t *w, const sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev, int pid,
                          uint64_t base_ns);

#endif
