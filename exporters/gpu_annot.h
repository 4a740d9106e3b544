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
 * fills v->nranges, range_ev, range_parent, range_call (sp_gpuv_call_ext),
 * nslots and ranges_oom; host events sorted by start. */
void sp_annot_ranges(sp_gpu_view_t *v, const sp_event_ref_t *ev, size_t nev);

/* One pass over the host events in that order, telling each one's External
 * id as sp_annot_ranges numbered them: a range's or step's own, a call's
 * innermost enclosing range's (sp_gpuv_call_ext maps it), 0 for none. The
 * trace's writers run one beside their own pass: an array of the ids was 4
 * bytes per event at the export's peak. */
typedef struct sp_annot_walk {
    struct sp_annot_thread *ts;   /* open ranges per registration slot */
    size_t nts;
    uint64_t next;                /* ranges numbered so far */
    int oom;                      /* a stack could not grow: ids from here on are wrong, fail */
} sp_annot_walk_t;

/* 0, or -1 when out of memory. nslots: the view's. */
int sp_annot_walk_init(sp_annot_walk_t *w, size_t nslots);
/* Event i's id; called for i = 0, 1, ... in turn. *parent (when not NULL):
 * the innermost range open around event i on its thread (0 = none). */
uint64_t sp_annot_walk_next(sp_annot_walk_t *w, const sp_event_ref_t *ev, size_t i, uint64_t *parent);
void sp_annot_walk_free(sp_annot_walk_t *w);
/* The range External ids in (thread, start) order (malloc'd; NULL when none). */
uint64_t *sp_annot_by_thread(const sp_gpu_view_t *v, const sp_event_ref_t *ev);
/* The innermost range or step open on thread tid at time t (ns): its External id, 0 = none. */
uint64_t sp_annot_range_at(const sp_gpu_view_t *v, const sp_event_ref_t *ev, const uint64_t *byt, long tid,
                           int64_t t);
/* gext: per GPU record, its launching call's External id (0 = none). */
void sp_annot_write(sp_jw_t *w, const sp_gpu_view_t *v, const sp_event_ref_t *ev, const uint64_t *gext,
                    uint64_t base);

#endif
