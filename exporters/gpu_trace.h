/* exporters/gpu_trace.h — the GPU half of a window's trace: CUPTI's records
 * joined to the host records (each intercepted call matched to CUPTI's record
 * of the same call, so no call appears twice), written as kernel / gpu_memcpy
 * / gpu_memset / cuda_sync events on pid = device, tid = stream, ac2g flow
 * arrows from the launching call, gpu_user_annotation spans, and device
 * metadata. */
#ifndef SP_GPU_TRACE_H
#define SP_GPU_TRACE_H

#include "../collectors/events.h"
#include "../collectors/gpu.h"
#include "jsonw.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sp_gpu_view {
    sp_gpu_event_t *gpu;
    size_t n;
    int32_t *host_match;   /* per host event: index of its CUPTI API record, or -1 */
    uint8_t *api_used;     /* per GPU record: an API record already matched to a host event */
    uint32_t devices;      /* bit mask of devices with activity */
    uint64_t *ext;         /* per host event, Kineto's "External id": a range's or step's own
                              id; for a call, its innermost enclosing range's (0 = none) */
} sp_gpu_view_t;

/* Builds the view; host events sorted by start, t0/t1 in ns. Takes ownership of gpu. */
void sp_gpuv_build(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev, sp_gpu_event_t *gpu, size_t ngpu);
void sp_gpuv_free(sp_gpu_view_t *v);

/* For a host API event: CUPTI's record of the same call, or NULL. */
const sp_gpu_event_t *sp_gpuv_match(const sp_gpu_view_t *v, size_t host_index);

/* The trace name of a GPU record: demangled kernel, "Memcpy HtoD (Pageable ->
 * Device)", "Memset (Device)", "Stream Sync"...; may use buf. */
const char *sp_gpuv_name(const sp_gpu_event_t *e, char *buf, size_t len);

void sp_gpuv_write_device_props(sp_jw_t *w, const sp_gpu_view_t *v);
void sp_gpuv_write_metadata(sp_jw_t *w, const sp_gpu_view_t *v);
/* Everything GPU-side plus CUPTI API records no host event claimed. */
void sp_gpuv_write_events(sp_jw_t *w, const sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev, int pid,
                          uint64_t base_ns);

#endif
