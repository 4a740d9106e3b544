/*
 * fakecupti_int.h - internals shared by the fakecupti sources (the libcupti.so.13 stand-in): the
 * enabled-kind mask, the clock, the record buffer interface, and the link to the fakecuda runtime.
 *
 * Layout of the library: fakecupti_api.c owns the exported control entry points (subscription, kind
 * enabling, timestamps, ids, test knobs); fakecupti_buffer.c owns client buffers (request, fill,
 * deliver, iterate); fakecupti_records.c turns fakecuda observer events into CUDA 13.0 activity
 * records.  Everything is compiled against the toolkit's own CUPTI headers, so record layouts and
 * signatures are NVIDIA's.
 */
#ifndef FAKECUPTI_INT_H
#define FAKECUPTI_INT_H

#include <cupti.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fakecuda.h"

#pragma GCC visibility push(hidden)

#define FCP_EXPORT __attribute__((visibility("default")))
#define FCP_LIKELY(x) __builtin_expect(!!(x), 1)
#define FCP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- enabled kinds (fakecupti_api.c) ---- */

/* Bit k set while CUpti_ActivityKind k is enabled.  CUPTI_ACTIVITY_KIND_COUNT is 56 in CUDA 13.0. */
extern _Atomic uint64_t fcp_mask;
_Static_assert(CUPTI_ACTIVITY_KIND_COUNT <= 64, "the enabled-kind mask needs more bits");

static inline bool fcp_on(CUpti_ActivityKind k) {
  return (atomic_load_explicit(&fcp_mask, memory_order_relaxed) >> k) & 1;
}

/* ---- clock (fakecupti_api.c) ---- */

/* Records carry CLOCK_MONOTONIC + fcp_offset: CUPTI's CLOCK_REALTIME by default, or the client's
 * clock from cuptiActivityRegisterTimestampCallback.  A fixed offset keeps host- and GPU-side times
 * exactly ordered, which a clock read per record could not (CLOCK_REALTIME can step). */
extern _Atomic int64_t fcp_offset;

static inline uint64_t fcp_mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t fcp_ts(uint64_t mono) {
  return mono + (uint64_t)atomic_load_explicit(&fcp_offset, memory_order_relaxed);
}

/* CUpti_ActivityThreadIdType in force (cuptiSetThreadIdType); latency timestamps on or off. */
extern _Atomic int fcp_thread_id_type;
extern _Atomic bool fcp_latency_timestamps;

/* ---- buffers (fakecupti_buffer.c) ---- */

/* Copies one record into the client's buffers, requesting one when needed; counts it as dropped
 * when the client has none to give.  `complete` is the CLOCK_MONOTONIC time from which the record
 * is final (a GPU op's end): non-forced flushes hold back buffers with records still in flight. */
void fcp_record(const void *rec, size_t size, uint64_t complete);
CUptiResult fcp_register_buffers(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done);
CUptiResult fcp_flush(uint32_t flag);
size_t fcp_take_dropped(void);
void fcp_buffers_finalize(void); /* returns every buffer and forgets the callbacks */
size_t fcp_record_size(CUpti_ActivityKind kind); /* 0 for kinds this library never writes */

/* ---- the fakecuda runtime and its observer (fakecupti_records.c) ---- */

struct fcp_runtime {
  void (*set_observer)(const fakecuda_observer_t *);
  unsigned long long (*stream_id)(void *stream);
  int (*current_device)(void);
};
extern struct fcp_runtime fcp_rt;

bool fcp_runtime_find(void);  /* false when the process runs NVIDIA's libcudart (or none yet) */
void fcp_observe(bool on);    /* installs or removes the observer; caller serializes */
CUptiResult fcp_ext_push(CUpti_ExternalCorrelationKind kind, uint64_t id);
CUptiResult fcp_ext_pop(CUpti_ExternalCorrelationKind kind, uint64_t *last);

/* ---- tables generated from the toolkit's headers (fakecupti_gen.sh) ---- */

struct fcp_cbid {
  const char *name;
  uint32_t cbid;
};
struct fcp_result {
  int code;
  const char *name;
};

#pragma GCC visibility pop

#endif /* FAKECUPTI_INT_H */
