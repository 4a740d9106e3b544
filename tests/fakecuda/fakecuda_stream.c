/*
 * fakecuda_stream.c - stream, event and synchronization entry points on top of the timeline: creating
 * and querying streams and events, recording events at a stream's busy time, and the calls that make
 * the host really wait (device, stream and event synchronize).  Host functions and stream callbacks
 * run immediately on the calling thread; their place in the stream costs no simulated time.
 */
#include <stdlib.h>

#include "fakecuda_int.h"

#define FC_PRIORITY_LEAST 0
#define FC_PRIORITY_GREATEST (-5) /* H100's range */

static cudaError_t stream_create(cudaStream_t *ps, unsigned flags, int priority) {
  if (!ps) return cudaErrorInvalidValue;
  if (priority > FC_PRIORITY_LEAST) priority = FC_PRIORITY_LEAST;
  if (priority < FC_PRIORITY_GREATEST) priority = FC_PRIORITY_GREATEST;
  *ps = fc_stream_new(fc_tls.device, flags, priority);
  return *ps ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Ops already queued keep their simulated times; nothing refers back to the struct. */
static cudaError_t stream_destroy(cudaStream_t hs) {
  if ((uintptr_t)hs <= (uintptr_t)cudaStreamPerThread) return cudaErrorInvalidResourceHandle;
  free(hs);
  return cudaSuccess;
}

FC_API(cudaStreamCreate, (cudaStream_t *pStream), stream_create(pStream, 0, 0))
FC_API(cudaStreamCreateWithFlags, (cudaStream_t *pStream, unsigned int flags),
       stream_create(pStream, flags, 0))
FC_API(cudaStreamCreateWithPriority, (cudaStream_t *pStream, unsigned int flags, int priority),
       stream_create(pStream, flags, priority))
FC_API(cudaStreamDestroy, (cudaStream_t stream), stream_destroy(stream))

static cudaError_t priority_range(int *least, int *greatest) {
  if (least) *least = FC_PRIORITY_LEAST;
  if (greatest) *greatest = FC_PRIORITY_GREATEST;
  return cudaSuccess;
}
FC_API(cudaDeviceGetStreamPriorityRange, (int *leastPriority, int *greatestPriority),
       priority_range(leastPriority, greatestPriority))

enum stream_field { SF_FLAGS, SF_PRIORITY, SF_ID, SF_DEVICE };

static cudaError_t stream_get(cudaStream_t hs, bool pt, enum stream_field f, void *out) {
  if (!out) return cudaErrorInvalidValue;
  const struct CUstream_st *s = fc_stream(hs, pt);
  switch (f) {
  case SF_FLAGS: *(unsigned *)out = s->flags; break;
  case SF_PRIORITY: *(int *)out = s->priority; break;
  case SF_ID: *(unsigned long long *)out = s->id; break;
  case SF_DEVICE: *(int *)out = s->device; break;
  }
  return cudaSuccess;
}

FC_API_TWINS(cudaStreamGetFlags, _ptsz, (cudaStream_t hStream, unsigned int *flags),
             stream_get(hStream, per_thread, SF_FLAGS, flags))
FC_API_TWINS(cudaStreamGetPriority, _ptsz, (cudaStream_t hStream, int *priority),
             stream_get(hStream, per_thread, SF_PRIORITY, priority))
FC_API_TWINS(cudaStreamGetId, _ptsz, (cudaStream_t hStream, unsigned long long *streamId),
             stream_get(hStream, per_thread, SF_ID, streamId))
FC_API_TWINS(cudaStreamGetDevice, _ptsz, (cudaStream_t hStream, int *device),
             stream_get(hStream, per_thread, SF_DEVICE, device))

static cudaError_t done_by(uint64_t t) {
  return fc_now() >= t ? cudaSuccess : cudaErrorNotReady;
}

FC_API_TWINS(cudaStreamQuery, _ptsz, (cudaStream_t stream),
             done_by(atomic_load(&fc_stream(stream, per_thread)->busy)))

static cudaError_t stream_sync(const char *api, cudaStream_t hs, bool pt) {
  struct CUstream_st *s = fc_stream(hs, pt);
  if (s->capture) return cudaErrorStreamCaptureUnsupported;
  uint64_t t0 = fc_now();
  fc_wait_until(atomic_load(&s->busy));
  if (fc_observing()) fc_emit_sync(api, hs, s, NULL, t0);
  return cudaSuccess;
}

static cudaError_t device_sync(const char *api, int dev) {
  uint64_t t0 = fc_now();
  fc_wait_until(atomic_load(&fc_dev[dev].all_busy));
  if (fc_observing()) {
    int current = fc_tls.device;
    fc_tls.device = dev; /* the op's device: fc_emit_sync gives a stream-less op the current one */
    fc_emit_sync(api, NULL, NULL, NULL, t0);
    fc_tls.device = current;
  }
  return cudaSuccess;
}

FC_API_TWINS(cudaStreamSynchronize, _ptsz, (cudaStream_t stream),
             FC_VIA_DRV(!per_thread, stream_sync, ((CUstream)stream), stream_sync(__func__, stream, per_thread)))
FC_API(cudaDeviceSynchronize, (void), FC_VIA_DRV(true, ctx_sync, (NULL), device_sync(__func__, fc_tls.device)))
/* For the driver stand-in only (fakedriver.c's cuCtxSynchronize_v2 of another device's context, which
 * NVIDIA's runtime has no call for): waits for `device`'s work, the current device staying current. */
FC_API(fakecuda_deviceSynchronize, (int device),
       device >= 0 && device < fc_cfg.ndev ? device_sync(__func__, device) : cudaErrorInvalidDevice)

/* ---- events ---- */

static _Atomic unsigned next_event_id = 1;

static cudaError_t event_create(cudaEvent_t *pe, unsigned flags) {
  if (!pe) return cudaErrorInvalidValue;
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return cudaErrorMemoryAllocation;
  e->flags = flags;
  e->device = fc_tls.device;
  e->id = atomic_fetch_add(&next_event_id, 1);
  *pe = e;
  return cudaSuccess;
}

static cudaError_t event_destroy(cudaEvent_t e) {
  if (!e) return cudaErrorInvalidResourceHandle;
  free(e);
  return cudaSuccess;
}

/* The event completes when the work queued before it does, so it takes a zero-length slot. */
static cudaError_t event_record(cudaEvent_t e, cudaStream_t hs, bool pt) {
  if (!e) return cudaErrorInvalidResourceHandle;
  atomic_store(&e->at, fc_enqueue(fc_stream(hs, pt), 0, true).end);
  return cudaSuccess;
}

static cudaError_t event_sync(const char *api, cudaEvent_t e) {
  if (!e) return cudaErrorInvalidResourceHandle;
  uint64_t t0 = fc_now();
  fc_wait_until(atomic_load(&e->at));
  if (fc_observing()) fc_emit_sync(api, NULL, NULL, e, t0);
  return cudaSuccess;
}

static cudaError_t event_elapsed(float *ms, cudaEvent_t a, cudaEvent_t b) {
  if (!ms) return cudaErrorInvalidValue;
  if (!a || !b || ((a->flags | b->flags) & cudaEventDisableTiming)) return cudaErrorInvalidResourceHandle;
  uint64_t ta = atomic_load(&a->at), tb = atomic_load(&b->at);
  if (!ta || !tb) return cudaErrorInvalidResourceHandle;
  uint64_t now = fc_now();
  if (now < ta || now < tb) return cudaErrorNotReady;
  *ms = (float)(((double)tb - (double)ta) / 1e6);
  return cudaSuccess;
}

static cudaError_t stream_wait_event(const char *api, cudaStream_t hs, bool pt, cudaEvent_t e) {
  if (!e) return cudaErrorInvalidResourceHandle;
  struct CUstream_st *s = fc_stream(hs, pt);
  uint64_t t0 = fc_now();
  fc_stream_advance(s, atomic_load(&e->at));
  if (fc_observing()) fc_emit_sync(api, hs, s, e, t0);
  return cudaSuccess;
}

FC_API(cudaEventCreate, (cudaEvent_t *event), event_create(event, 0))
FC_API(cudaEventCreateWithFlags, (cudaEvent_t *event, unsigned int flags), event_create(event, flags))
FC_API(cudaEventDestroy, (cudaEvent_t event), event_destroy(event))
FC_API_TWINS(cudaEventRecord, _ptsz, (cudaEvent_t event, cudaStream_t stream),
             event_record(event, stream, per_thread))
FC_API_TWINS(cudaEventRecordWithFlags, _ptsz, (cudaEvent_t event, cudaStream_t stream, unsigned int flags FC_UNUSED),
             event_record(event, stream, per_thread))
FC_API(cudaEventQuery, (cudaEvent_t event), event ? done_by(atomic_load(&event->at)) : cudaErrorInvalidResourceHandle)
FC_API(cudaEventSynchronize, (cudaEvent_t event), event_sync(__func__, event))
FC_API(cudaEventElapsedTime, (float *ms, cudaEvent_t start, cudaEvent_t end), event_elapsed(ms, start, end))
FC_API_TWINS(cudaStreamWaitEvent, _ptsz, (cudaStream_t stream, cudaEvent_t event, unsigned int flags FC_UNUSED),
             stream_wait_event(__func__, stream, per_thread, event))

/* ---- host work in streams ---- */

static cudaError_t host_func(const char *api, cudaStream_t hs, bool pt, cudaHostFn_t fn, void *user) {
  if (!fn) return cudaErrorInvalidValue;
  struct fc_work w = {.kind = FC_WORK_HOSTFN, .fn = fn, .user = user};
  return fc_submit(api, hs, fc_stream(hs, pt), &w, NULL);
}

struct callback_args {
  cudaStreamCallback_t cb;
  cudaStream_t stream;
  void *user;
};

/* Runs synchronously inside fc_submit, so the arguments may live on the caller's stack. */
static void run_callback(void *p) {
  struct callback_args *a = p;
  a->cb(a->stream, cudaSuccess, a->user);
}

static cudaError_t add_callback(const char *api, cudaStream_t hs, bool pt, cudaStreamCallback_t cb, void *user) {
  if (!cb) return cudaErrorInvalidValue;
  struct callback_args a = {cb, hs, user};
  struct CUstream_st *s = fc_stream(hs, pt);
  if (s->capture) return cudaErrorStreamCaptureUnsupported;
  return host_func(api, hs, pt, run_callback, &a);
}

FC_API_TWINS(cudaLaunchHostFunc, _ptsz, (cudaStream_t stream, cudaHostFn_t fn, void *userData),
             host_func(__func__, stream, per_thread, fn, userData))
FC_API_TWINS(cudaStreamAddCallback, _ptsz,
             (cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned int flags FC_UNUSED),
             add_callback(__func__, stream, per_thread, callback, userData))
