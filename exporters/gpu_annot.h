/* exporters/gpu_annot.h — the ranges of a window's trace: their External ids,
 * their nesting, the External id each call inside carries, and the
 * gpu_user_annotation spans: one per (NVTX range, device, stream), spanning
 * the GPU work launched inside the range, with Kineto's args ({"External id":
 * the CPU range's id}). Never for ProfilerStep#N: TensorBoard counts every
 * ProfilerStep# event as a step. Also places calls only CUPTI saw inside
 * their thread's ranges. */
#ifndef SP_GPU_ANNOT_H
#define SP_GPU_ANNOT_H

#include "gpu_trace.h"

/* Numbers the window's ranges and steps (External ids, in start order) and
 * fills v->ext, nranges, range_ev, range_parent and range_call
 * (sp_gpuv_call_ext); host events sorted by start. */
void sp_annot_ranges(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev);
/* The range External ids in (thread, start) order (malloc'd; NULL when none). */
uint64_t *sp_annot_by_thread(const sp_gpu_view_t *v, const sp_event_ref_t *ev);
/* The innermost range or step open on thread tid at time t (ns): its External id, 0 = none. */
uint64_t sp_annot_range_at(const sp_gpu_view_t *v, const sp_event_ref_t *ev, const uint64_t *byt, long tid,
                           int64_t t);
/* gext: per GPU record, its launching call's External id (0 = none). */
void sp_annot_write(sp_jw_t *w, const sp_gpu_view_t *v, const sp_event_ref_t *ev, const uint64_t *gext,
                    uint64_t base);

#endif
