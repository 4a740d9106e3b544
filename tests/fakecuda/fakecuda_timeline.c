/*
 * fakecuda_timeline.c - the simulated GPU clock.  Each stream keeps the CLOCK_MONOTONIC time at which
 * its queued work ends ("busy"); an op starts at the latest of its issue time, its stream's busy time
 * and the implicit dependencies of the legacy NULL stream (it waits for every blocking stream, and
 * blocking streams wait for it), then occupies its duration.  Updates are lock-free compare-and-swap
 * on the stream, so concurrent launches into one stream still serialize.  Also owns stream ids,
 * per-thread default streams and the real waiting done by synchronizing calls.
 */
#include <stdlib.h>

#include "fakecuda_int.h"

struct fc_device fc_dev[FAKECUDA_MAX_DEVICES];
static _Atomic unsigned long long next_stream_id = FAKECUDA_FIRST_STREAM_ID;

__attribute__((constructor)) static void timeline_init(void) {
  for (int d = 0; d < FAKECUDA_MAX_DEVICES; d++) {
    fc_dev[d].legacy.id = FAKECUDA_LEGACY_STREAM_ID;
    fc_dev[d].legacy.device = d;
    fc_dev[d].legacy.legacy = true;
  }
}

/* Sleeping has ~50-100 us of wake-up slack, so the last stretch is spun to end on time like a
 * GPU-spinning cudaDeviceSynchronize does. */
void fc_wait_until(uint64_t t) {
  for (;;) {
    uint64_t now = fc_now();
    if (now >= t) return;
    if (t - now > 200000) {
      uint64_t wake = t - 100000;
      struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000u), .tv_nsec = (long)(wake % 1000000000u)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

struct CUstream_st *fc_stream_new(int device, unsigned flags, int priority) {
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->id = atomic_fetch_add(&next_stream_id, 1);
  s->device = device;
  s->flags = flags;
  s->priority = priority;
  return s;
}

/* Never freed: the thread may exit while ops it issued are still on the timeline, and a handful of
 * structs per thread is the whole cost. */
struct CUstream_st *fc_per_thread_stream(void) {
  int d = fc_tls.device;
  if (FC_UNLIKELY(!fc_tls.per_thread[d])) fc_tls.per_thread[d] = fc_stream_new(d, 0, 0);
  return fc_tls.per_thread[d];
}

FC_EXPORT unsigned long long fakecuda_stream_id(void *stream) {
  struct CUstream_st *s = fc_stream(stream, false);
  return s ? s->id : 0;
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v) {
  uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
  while (cur < v && !atomic_compare_exchange_weak(a, &cur, v)) {
  }
}

static bool is_blocking(const struct CUstream_st *s) {
  return !s->legacy && !(s->flags & cudaStreamNonBlocking);
}

static void publish_end(struct CUstream_st *s, uint64_t end) {
  struct fc_device *dev = &fc_dev[s->device];
  atomic_max(&dev->all_busy, end);
  if (is_blocking(s)) atomic_max(&dev->blocking_busy, end);
}

struct fc_span fc_enqueue(struct CUstream_st *s, uint64_t dur, bool timed) {
  struct fc_device *dev = &fc_dev[s->device];
  uint64_t dep = 0;
  if (s->legacy)
    dep = atomic_load_explicit(&dev->blocking_busy, memory_order_acquire);
  else if (is_blocking(s))
    dep = atomic_load_explicit(&dev->legacy.busy, memory_order_acquire);
  if (dur || timed || fc_observing()) {
    /* Observed work reaches the GPU a submission latency after it is issued: a kernel never
     * starts at the instant its launch call began (real launch latency is microseconds). */
    uint64_t now = fc_now() + (fc_observing() ? fc_cfg.launch_latency_ns : 0);
    if (now > dep) dep = now;
  }
  struct fc_span sp;
  uint64_t old = atomic_load_explicit(&s->busy, memory_order_acquire);
  do {
    sp.start = old > dep ? old : dep;
    sp.end = sp.start + dur;
    if (sp.end == old) return sp; /* nothing changes; the common case for free kernels */
  } while (!atomic_compare_exchange_weak(&s->busy, &old, sp.end));
  publish_end(s, sp.end);
  return sp;
}

void fc_stream_advance(struct CUstream_st *s, uint64_t t) {
  atomic_max(&s->busy, t);
  publish_end(s, t);
}

void fc_emit_sync(const char *api, cudaStream_t hs, struct CUstream_st *s, void *event, uint64_t t0) {
  fakecuda_op_t op = {
      .kind = FAKECUDA_OP_SYNC,
      .api = api,
      .stream = hs,
      .stream_id = s ? s->id : 0,
      .device = s ? s->device : fc_tls.device,
      .event = event,
      .event_id = event ? ((const struct CUevent_st *)event)->id : 0,
      .gpu_start_ns = t0,
      .gpu_end_ns = fc_now(),
  };
  fc_emit(&op);
}
