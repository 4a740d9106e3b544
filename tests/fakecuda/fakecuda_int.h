/*
 * fakecuda_int.h - internals shared by the fakecuda source files: configuration, per-thread state, the
 * structs behind the runtime's opaque handles, the timeline / registry / memory / graph interfaces, and
 * the FC_API macros that generate every exported cudaError_t entry point (and its _ptsz/_ptds twin).
 *
 * Rule: exported functions only wrap static or hidden helpers; no code here calls an exported symbol,
 * so a profiler interposing on the runtime sees each application call exactly once.
 */
#ifndef FAKECUDA_INT_H
#define FAKECUDA_INT_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fakecuda.h"
#include "fakecuda_abi.h"

#pragma GCC visibility push(hidden)

#define FC_LIKELY(x) __builtin_expect(!!(x), 1)
#define FC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FC_EXPORT __attribute__((visibility("default")))
#define FC_UNUSED __attribute__((unused)) /* parameters of the real signature we ignore */
#define FC_CFG_DEPTH 16 /* nested <<<>>> configurations (a launch inside a kernel argument) */

/* ---- configuration (fakecuda_core.c) ---- */

struct fc_config {
  uint64_t kernel_ns;    /* default simulated kernel duration */
  uint64_t kernel_min_ns; /* floor of an observed kernel (a GPU never reports 0 ns) */
  double copy_ns_per_byte;
  double set_ns_per_byte;
  uint64_t copy_latency_ns; /* fixed cost of every copy / memset on top of bytes over bandwidth */
  uint64_t set_latency_ns;
  uint64_t launch_latency_ns; /* observed work starts no sooner than this after it is issued */
  size_t mem_limit;      /* per device */
  int ndev;
};
extern struct fc_config fc_cfg;

/* Duration for a kernel with this mangled name (FAKECUDA_KERNEL_NS_<sub> overrides). */
uint64_t fc_kernel_ns_for(const char *name);

/* ---- per-thread state ---- */

struct fc_launch_cfg {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
};

struct fc_thread {
  cudaError_t last_error;
  int device;
  int cfg_depth;
  unsigned long long api_start_ns;
  struct fc_launch_cfg cfg[FC_CFG_DEPTH];
  struct CUstream_st *per_thread[FAKECUDA_MAX_DEVICES]; /* lazily created default streams */
  const char *driver_api; /* set by the libcuda.so.1 stand-in around the runtime call it runs on */
  cudaError_t drv_inner;  /* what that runtime call returned (fakecuda_drv.c) */
};
extern __thread struct fc_thread fc_tls;

/* ---- API hooks (fakecuda_core.c) ---- */

extern _Atomic int fc_hooks_on; /* an observer is set, FAKECUDA_FAIL names something, or the
                                  CUDA_INJECTION64_PATH check of the first call is still to come */
extern const fakecuda_observer_t *_Atomic fc_observer;

cudaError_t fc_api_enter(const char *api); /* notifies; returns the injected failure or cudaSuccess */
cudaError_t fc_api_exit(const char *api, cudaError_t r);
void fc_note_enter(const char *api);       /* for entry points that do not return cudaError_t */
void fc_note_exit(const char *api, int result);
void fc_emit(fakecuda_op_t *op);           /* completes api_start_ns and hands op to the observer */

static inline bool fc_hooked(void) {
  return atomic_load_explicit(&fc_hooks_on, memory_order_relaxed) != 0;
}
static inline bool fc_observing(void) {
  return atomic_load_explicit(&fc_observer, memory_order_relaxed) != NULL;
}

/* cudaErrorNotReady answers a poll; recording it would make cudaGetLastError report a non-error. */
static inline cudaError_t fc_result(cudaError_t r) {
  if (FC_UNLIKELY(r != cudaSuccess && r != cudaErrorNotReady)) fc_tls.last_error = r;
  return r;
}

#define FC_RETURN(call)                                     \
  do {                                                      \
    if (FC_UNLIKELY(fc_hooked())) {                         \
      cudaError_t fc_r_ = fc_api_enter(__func__);           \
      if (fc_r_ == cudaSuccess) fc_r_ = (call);             \
      return fc_api_exit(__func__, fc_r_);                  \
    }                                                       \
    cudaError_t fc_r_ = (call);                             \
    if (FC_UNLIKELY(fc_tls.driver_api != NULL)) fc_tls.drv_inner = fc_r_; \
    return fc_result(fc_r_);                                \
  } while (0)

/* ---- the driver, reached through cuGetProcAddress (fakecuda_drv.c) ---- */

struct fc_drv {
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
  CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void **, void **);
  CUresult (*stream_sync)(CUstream);
  CUresult (*ctx_sync)(CUcontext); /* CUDA 13's cuCtxSynchronize_v2: NULL is the current context */
};
const struct fc_drv *fc_drv(void);   /* NULL: no driver, or the driver is running this very call */
cudaError_t fc_from_drv(CUresult r); /* the runtime's code for what the driver returned */

/* `cond` true and a driver present: the runtime call is the driver call `field args`; else `fallback`. */
#define FC_VIA_DRV(cond, field, args, fallback) \
  ((cond) && fc_drv() ? fc_from_drv(fc_drv()->field args) : (fallback))

/* Defines exported `cudaError_t name params` returning `call`.  Inside `call`, `per_thread` is false
 * for the legacy spelling and true for the twin, and __func__ is the exported name. */
#define FC_API_DEF_(name, params, pt, call)                 \
  FC_EXPORT cudaError_t name params {                       \
    const bool per_thread = (pt);                           \
    (void)per_thread;                                       \
    FC_RETURN(call);                                        \
  }
#define FC_API(name, params, call) FC_API_DEF_(name, params, false, call)
/* Also defines name##sfx (_ptsz or _ptds), declared with the exact type of the real `name`. */
#define FC_API_TWINS(name, sfx, params, call)               \
  FC_API_DEF_(name, params, false, call)                    \
  __typeof__(name) name##sfx;                               \
  FC_API_DEF_(name##sfx, params, true, call)

/* ---- handles and the timeline (fakecuda_timeline.c) ---- */

struct CUstream_st {
  _Atomic uint64_t busy;      /* CLOCK_MONOTONIC ns at which the last queued op ends */
  unsigned long long id;
  int device;
  unsigned flags;
  int priority;
  bool legacy;                /* the device's NULL stream */
  struct CUgraph_st *capture; /* set while stream capture records into a graph */
};

struct CUevent_st {
  _Atomic uint64_t at;        /* completion time of the last record, 0 if never recorded */
  unsigned flags;
  int device;
  unsigned id;                /* process-unique, for the observer (CUPTI's cudaEventId) */
};

struct fc_device {
  struct CUstream_st legacy;
  _Atomic uint64_t blocking_busy; /* latest end on a blocking (not cudaStreamNonBlocking) stream */
  _Atomic uint64_t all_busy;      /* latest end on any stream */
};
extern struct fc_device fc_dev[FAKECUDA_MAX_DEVICES];

struct fc_span {
  uint64_t start, end;
};

static inline uint64_t fc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void fc_wait_until(uint64_t t);
struct CUstream_st *fc_per_thread_stream(void);
struct CUstream_st *fc_stream_new(int device, unsigned flags, int priority);

/* The stream an op on handle `hs` goes to; per_thread is the _ptsz/_ptds flavour of NULL. */
static inline struct CUstream_st *fc_stream(cudaStream_t hs, bool per_thread) {
  if ((uintptr_t)hs > (uintptr_t)cudaStreamPerThread) return hs;
  if (hs == cudaStreamPerThread || (hs == NULL && per_thread)) return fc_per_thread_stream();
  return &fc_dev[fc_tls.device].legacy;
}

/* Queues `dur` ns on s after its dependencies.  The clock is read only when the span can be seen
 * (dur > 0, `timed`, or an observer): a zero-length op that nobody observes may end in the past. */
struct fc_span fc_enqueue(struct CUstream_st *s, uint64_t dur, bool timed);
void fc_stream_advance(struct CUstream_st *s, uint64_t t); /* s waits for time t (events) */
/* Sync op for the observer: host waited from t0 until now. */
void fc_emit_sync(const char *api, cudaStream_t hs, struct CUstream_st *s, void *event, uint64_t t0);

/* ---- work items: launches, copies, sets, host functions (fakecuda_launch.c) ---- */

/* Work kinds besides FAKECUDA_OP_KERNEL, _MEMCPY and _MEMSET. */
enum { FC_WORK_EMPTY = 0, FC_WORK_HOSTFN = 100 };

struct fc_work {
  int kind;
  struct CUkern_st *kern;
  dim3 grid, block;
  size_t shmem;
  void *dst;              /* copies and sets are 2D: height rows of width bytes */
  const void *src;
  size_t width, height, dpitch, spitch;
  int value;
  unsigned elem;          /* memset element size in bytes; 0 means 1 */
  enum cudaMemcpyKind ckind;
  cudaHostFn_t fn;
  void *user;
  unsigned graph_id;      /* set on the copies an executable graph replays; reported to the observer */
  unsigned long long graph_node_id;
  int src_dev, dst_dev;   /* peer copies (cudaMemcpyPeer*): the devices as passed, plus one; 0 otherwise */
};

/* Runs w on stream handle hs (recording it instead while the stream captures); *end gets the
 * simulated completion time, for callers that must wait. */
cudaError_t fc_submit(const char *api, cudaStream_t hs, struct CUstream_st *s, const struct fc_work *w,
                      uint64_t *end);

/* ---- kernel and variable registry (fakecuda_registry.c) ---- */

struct CUkern_st {
  const void *host_fun;
  char *name;           /* mangled device name (copied), NULL for unregistered functions */
  uint64_t ns;
  void **module;
};

/* func may be a host stub or a cudaKernel_t; unknown pointers get an unnamed entry. */
struct CUkern_st *fc_kernel(const void *func);

struct fc_var {
  char *host;           /* the host shadow; for managed variables, the managed allocation */
  size_t size;
};
struct fc_var *fc_var_lookup(const void *symbol);

/* ---- memory (fakecuda_mem.c) ---- */

int fc_mem_kind(const void *p);     /* enum fakecuda_mem_kind, FAKECUDA_MEM_PAGEABLE if unknown */
void fc_mem_reset_device(int device);
cudaError_t fc_mem_alloc(const char *api, void **p, size_t size, int kind, size_t align);

/* ---- graphs (fakecuda_graph.c) ---- */

cudaError_t fc_capture_append(struct CUgraph_st *g, const struct fc_work *w);

#pragma GCC visibility pop

#endif /* FAKECUDA_INT_H */
