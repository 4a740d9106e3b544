/*
 * fakecuda.h - the observer API of the fakecuda test fixture.
 *
 * fakecuda (build/fakecuda/libcudart.so.13) is a CPU stand-in for NVIDIA's CUDA runtime with the real
 * soname, symbol versions and signatures, so programs built by `nvcc -cudart shared` run on a machine
 * without a GPU.  Kernels execute no device code; every GPU operation is placed on a simulated per-stream
 * timeline (CLOCK_MONOTONIC ns) and synchronizing calls really wait for it.  This header is the only
 * interface beyond the CUDA runtime API itself: a single observer that sees every runtime API call and
 * every simulated GPU operation, meant for test doubles such as the CUPTI stand-in (fakecupti_*.c,
 * build/fakecuda/libcupti.so.13), which installs it while activity kinds are on.  Find the functions
 * with dlsym(RTLD_DEFAULT, "fakecuda_set_observer"): their absence means the real runtime is loaded.
 *
 * Environment knobs (read once when the library loads):
 *   FAKECUDA_KERNEL_NS=n          simulated duration of every kernel (default 20000)
 *   FAKECUDA_KERNEL_NS_<sub>=n    duration of kernels whose mangled name contains <sub> (first match wins)
 *   FAKECUDA_COPY_GBPS=x          memcpy bandwidth in GB/s (default 20)
 *   FAKECUDA_SET_GBPS=x           memset bandwidth in GB/s (default 200)
 *   FAKECUDA_KERNEL_MIN_NS=n      floor of an observed kernel's duration (default 2000)
 *   FAKECUDA_COPY_LATENCY_NS=n    fixed cost of every copy before its bytes (default 1500)
 *   FAKECUDA_SET_LATENCY_NS=n     fixed cost of every memset (default 1000)
 *   FAKECUDA_MEM_LIMIT=bytes      device memory per device; cudaMalloc beyond it fails (default 80 GiB)
 *   FAKECUDA_DEVICES=n            number of devices (default 1, at most FAKECUDA_MAX_DEVICES)
 *   FAKECUDA_FAIL=api[:code],...  listed APIs (base name; twins included) return `code` (default 999,
 *                                 cudaErrorUnknown) without doing anything; a driver entry point of
 *                                 libcuda.so.1 (cuDeviceGetName...) is listed under its own name, not
 *                                 under the runtime call the stand-in runs it on
 *   FAKECUDA_LOG_DRIVER=1         at the first lookup of the driver (fakecuda_drv.c), one stderr line per
 *                                 driver entry point: which object cuGetProcAddress handed it out from
 *   CUDA_INJECTION64_PATH=lib     read at the first runtime call (not at load, and never by the __cuda*
 *                                 registration calls of constructors), as the driver's cuInit does:
 *                                 the library is dlopen'ed (RTLD_NOW) and its `int InitializeInjection(void)`
 *                                 runs once, before that first call reaches the observer
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKECUDA_MAX_DEVICES 16
#define FAKECUDA_LEGACY_STREAM_ID 7ULL /* what traces of real GPUs show for the NULL stream */
#define FAKECUDA_FIRST_STREAM_ID 13ULL /* created and per-thread streams count up from here */

enum fakecuda_op_kind {
  FAKECUDA_OP_KERNEL = 1,
  FAKECUDA_OP_MEMCPY = 2,
  FAKECUDA_OP_MEMSET = 3,
  FAKECUDA_OP_SYNC = 4,  /* host waited: Device/Stream/EventSynchronize; StreamWaitEvent (no wait) */
  FAKECUDA_OP_ALLOC = 5, /* memory allocated (every cudaMalloc* / cudaHostAlloc / cudaHostRegister) */
  FAKECUDA_OP_FREE = 6,  /* memory released */
};

/* Memory kinds; the values equal enum cudaMemoryType. */
enum fakecuda_mem_kind {
  FAKECUDA_MEM_PAGEABLE = 0, /* not known to the runtime */
  FAKECUDA_MEM_PINNED = 1,   /* cudaMallocHost, cudaHostAlloc, cudaHostRegister */
  FAKECUDA_MEM_DEVICE = 2,   /* cudaMalloc, cudaMallocAsync, cudaMallocPitch */
  FAKECUDA_MEM_MANAGED = 3,  /* cudaMallocManaged, __managed__ variables */
};

/* One simulated GPU operation.  Fields that do not apply to a kind are zero. */
typedef struct fakecuda_op {
  int kind;                     /* enum fakecuda_op_kind */
  const char *api;              /* exported entry point that issued it, e.g. "cudaMemcpyAsync_ptsz" */
  const void *func;             /* KERNEL: host stub (what cudaLaunchKernel got, or what the
                                   __cudaGetKernel handle maps to) */
  const char *kernel_name;      /* KERNEL: mangled device name registered for func, or NULL */
  unsigned grid[3], block[3];   /* KERNEL */
  size_t shared_mem;            /* KERNEL: dynamic shared memory bytes */
  size_t bytes;                 /* MEMCPY, MEMSET, ALLOC, FREE */
  int copy_kind;                /* MEMCPY: enum cudaMemcpyKind; cudaMemcpyDefault is resolved */
  int src_mem, dst_mem;         /* MEMCPY: enum fakecuda_mem_kind; MEMSET, ALLOC, FREE: dst_mem */
  const void *ptr;              /* MEMCPY, MEMSET: destination; ALLOC, FREE: the allocation */
  void *stream;                 /* cudaStream_t as the caller passed it (NULL, cudaStreamPerThread...) */
  unsigned long long stream_id; /* resolved: FAKECUDA_LEGACY_STREAM_ID or a created stream's id */
  int device;
  void *event;                  /* SYNC from cudaEventSynchronize / cudaStreamWaitEvent */
  unsigned long long gpu_start_ns, gpu_end_ns; /* CLOCK_MONOTONIC; SYNC: the host's wait */
  unsigned long long api_start_ns;             /* when the issuing API call was entered */
  /* Appended later; fields above keep their offsets. */
  int value;                       /* MEMSET: the value as passed (cudaMemset's int) */
  unsigned graph_id;               /* op replayed by cudaGraphLaunch: process-unique id (from 1) of the
                                      cudaGraph_t that was instantiated; 0 otherwise */
  unsigned long long graph_node_id; /* ... and of its node (from 1); 0 otherwise */
  unsigned event_id;               /* SYNC with an event: the event's process-unique id (from 1) */
  int src_device, dst_device;      /* MEMCPY from cudaMemcpyPeer*: the devices passed; -1 otherwise */
} fakecuda_op_t;

/*
 * Callbacks run on the thread that made the runtime call.  api_enter/api_exit bracket every exported
 * runtime entry point (including nvcc's __cuda* ones); `api` is the exported name and the same pointer
 * on every call.  gpu_op runs between them, after the operation was placed on the timeline, so an
 * observer can correlate by thread.  A graph launch reports one op per node.  `result` is the return
 * value as an int (0 for functions returning void or pointers).  Callbacks may be NULL.
 */
typedef struct fakecuda_observer {
  void (*api_enter)(const char *api, void *ctx);
  void (*api_exit)(const char *api, int result, void *ctx);
  void (*gpu_op)(const fakecuda_op_t *op, void *ctx);
  void *ctx;
} fakecuda_observer_t;

/* Installs a copy of *obs (NULL removes it).  Call it from one thread at a time.  Calls already
 * inside a callback may still use the previous observer, so tear down its ctx only after the
 * program's threads are quiet. */
void fakecuda_set_observer(const fakecuda_observer_t *obs);

/* The id stream ops report for a cudaStream_t, resolved for the calling thread (NULL and
 * cudaStreamLegacy give FAKECUDA_LEGACY_STREAM_ID; cudaStreamPerThread its thread's stream). */
unsigned long long fakecuda_stream_id(void *stream);

/* The calling thread's current device (cudaSetDevice), without making an observed runtime call. */
int fakecuda_current_device(void);

/* For the libcuda.so.1 stand-in: until the next call with NULL, the calling thread's runtime calls are
 * reported to the observer under the driver entry point `api` (same pointer on every call). */
void fakecuda_driver_call(const char *api);

#ifdef __cplusplus
}
#endif

#endif /* FAKECUDA_H */
