/*
 * fakecupti_records.c - turns what the fakecuda runtime reports through its observer into CUDA 13.0
 * activity records: API calls -> CUpti_ActivityAPI (+ CUpti_ActivityExternalCorrelation), kernels ->
 * CUpti_ActivityKernel10, copies -> CUpti_ActivityMemcpy6, sets -> CUpti_ActivityMemset4, waits ->
 * CUpti_ActivitySynchronization2, allocations -> CUpti_ActivityMemory4.  Also owns the per-thread call
 * stack that gives every GPU op the correlation id of the API call that issued it, the per-thread
 * external correlation stacks, the name -> cbid lookup, and kernel-name interning.
 *
 * Correlation works by thread: fakecuda calls gpu_op between api_enter and api_exit on the calling
 * thread, so the innermost open call on this thread issued the op.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecupti_int.h"

#define FCP_WANT_CBIDS
#include "fakecupti_gen.h"

#define FCP_CALL_DEPTH 8 /* nested runtime calls on one thread (a host function calling CUDA...) */
#define FCP_EXT_DEPTH 32 /* pushed external ids per kind and thread */
#define FCP_CACHE_SLOTS 4096

struct fcp_runtime fcp_rt;

/* ---- the runtime ---- */

/* RTLD_DEFAULT finds fakecuda when it came in as a dependency of the program; the RTLD_NOLOAD open
 * finds it when something loaded it with RTLD_LOCAL (Python extensions do). */
bool fcp_runtime_find(void) {
  if (fcp_rt.set_observer) return true;
  void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  void *set = dlsym(RTLD_DEFAULT, "fakecuda_set_observer");
  if (!set && h) set = dlsym(h, "fakecuda_set_observer");
  if (!set) return false;
  void *sid = dlsym(h ? h : RTLD_DEFAULT, "fakecuda_stream_id");
  void *dev = dlsym(h ? h : RTLD_DEFAULT, "fakecuda_current_device");
  if (!sid || !dev) return false; /* an older fakecuda: ids could not be resolved */
  *(void **)&fcp_rt.stream_id = sid;
  *(void **)&fcp_rt.current_device = dev;
  *(void **)&fcp_rt.set_observer = set;
  return true; /* h stays open: the runtime must not go away under the observer */
}

/* ---- lock-free pointer -> value cache (the runtime passes the same `api` / name pointer every time) ---- */

struct cache_slot {
  const void *_Atomic key;
  _Atomic uintptr_t val; /* 0 until published */
};

static size_t slot_of(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  return (size_t)(x ^ (x >> 33)) & (FCP_CACHE_SLOTS - 1);
}

/* Returns the slot holding key, claiming an empty one for it if needed; NULL when the table is full. */
static struct cache_slot *cache_slot(struct cache_slot *tab, const void *key) {
  for (size_t i = slot_of(key), n = 0; n < FCP_CACHE_SLOTS; i = (i + 1) & (FCP_CACHE_SLOTS - 1), n++) {
    const void *k = atomic_load_explicit(&tab[i].key, memory_order_acquire);
    if (k == key) return &tab[i];
    if (!k && atomic_compare_exchange_strong(&tab[i].key, &k, key)) return &tab[i];
    if (k == key) return &tab[i]; /* lost the race to the same key */
  }
  return NULL;
}

static struct cache_slot cbid_cache[FCP_CACHE_SLOTS], name_cache[FCP_CACHE_SLOTS];

static int cmp_cbid(const void *key, const void *entry) {
  return strcmp(key, ((const struct fcp_cbid *)entry)->name);
}

/* Marks a driver cbid in struct call and the cbid cache (runtime and driver cbids overlap). */
#define FCP_DRIVER_CBID 0x80000000u

/* Driver entry points (fakecuda_driver_call names: "cu" + capital) look in the driver table. */
static uint32_t lookup_cbid(const char *api) {
  bool driver = api[0] == 'c' && api[1] == 'u' && api[2] >= 'A' && api[2] <= 'Z';
  const struct fcp_cbid *tab = driver ? fcp_driver_cbids : fcp_cbids;
  size_t n = driver ? sizeof fcp_driver_cbids / sizeof fcp_driver_cbids[0] : sizeof fcp_cbids / sizeof fcp_cbids[0];
  const struct fcp_cbid *e = bsearch(api, tab, n, sizeof tab[0], cmp_cbid);
  return !e ? CUPTI_RUNTIME_TRACE_CBID_INVALID : driver ? e->cbid | FCP_DRIVER_CBID : e->cbid;
}

/* 0 (CUPTI_RUNTIME_TRACE_CBID_INVALID) for names CUPTI does not trace: they get no API record.
 * Seen on an H200 (CUDA 13.0, driver 580, docs/gpu-validation.md): the <<<>>> path's
 * __cudaLaunchKernel(_ptsz) is recorded as cudaLaunchKernel(_ptsz)_v7000 (211 / 214), although the
 * header names its own cbids (505 / 506). */
static uint32_t cbid_of(const char *api) {
  struct cache_slot *s = cache_slot(cbid_cache, api);
  uintptr_t v = s ? atomic_load_explicit(&s->val, memory_order_acquire) : 0;
  if (FCP_LIKELY(v)) return (uint32_t)(v - 1);
  uint32_t cbid = lookup_cbid(api);
  if (cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000)
    cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  else if (cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000)
    cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000;
  if (s) atomic_store_explicit(&s->val, (uintptr_t)cbid + 1, memory_order_release);
  return cbid;
}

/* Kernel names must outlive the records (CUPTI's do, and clients keep the pointers), whatever the
 * runtime does with its copy; the content check catches a freed name whose address was reused. */
static const char *intern(const char *name) {
  if (!name) return "<unregistered kernel>";
  struct cache_slot *s = cache_slot(name_cache, name);
  const char *v = s ? (const char *)atomic_load_explicit(&s->val, memory_order_acquire) : NULL;
  if (FCP_LIKELY(v && strcmp(v, name) == 0)) return v;
  char *copy = strdup(name); /* never freed, by design; a lost race leaks one duplicate */
  if (!copy) return "<out of memory>";
  if (s) atomic_store_explicit(&s->val, (uintptr_t)copy, memory_order_release);
  return copy;
}

/* ---- per-thread state ---- */

struct call {
  const char *api;
  uint64_t start; /* CLOCK_MONOTONIC */
  uint32_t corr;
  uint32_t cbid;
  bool sync; /* the call waited (fakecuda SYNC op): a synchronization record at exit */
  bool by_runtime; /* a driver call the runtime makes for a runtime call: no DRIVER record (see below) */
  uint8_t sync_type;
  uint32_t sync_stream, sync_event, sync_context;
};

struct tstate {
  unsigned gen; /* observer generation the stack belongs to */
  int depth;
  struct call calls[FCP_CALL_DEPTH];
  int ext_depth[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];
  uint64_t ext[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE][FCP_EXT_DEPTH];
};

static __thread struct tstate ts;
static _Atomic unsigned observer_gen;
static _Atomic uint32_t next_corr = 1;
static _Atomic int64_t next_grid_id = 1;

/* Calls opened before the observer was last (re)installed never see their api_exit: drop them. */
static struct tstate *tstate(void) {
  struct tstate *t = &ts;
  unsigned g = atomic_load_explicit(&observer_gen, memory_order_relaxed);
  if (FCP_UNLIKELY(t->gen != g)) {
    t->gen = g;
    t->depth = 0;
  }
  return t;
}

/* gettid() and getpid() are system calls; a record per API call wants them cheap. */
static __thread uint32_t cached_tid;
static _Atomic uint32_t cached_pid;

static void forget_ids(void) {
  cached_tid = 0; /* the forking thread lives on in the child under new ids */
  atomic_store(&cached_pid, (uint32_t)getpid());
}

__attribute__((constructor)) static void records_init(void) {
  atomic_store(&cached_pid, (uint32_t)getpid());
  pthread_atfork(NULL, NULL, forget_ids);
}

static uint32_t process_id(void) {
  return atomic_load_explicit(&cached_pid, memory_order_relaxed);
}

static uint32_t thread_id(void) {
  if (atomic_load_explicit(&fcp_thread_id_type, memory_order_relaxed) != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
    return (uint32_t)(uintptr_t)pthread_self(); /* CUPTI's default on Linux, truncated to the field */
  if (FCP_UNLIKELY(!cached_tid)) cached_tid = (uint32_t)gettid();
  return cached_tid;
}

static bool has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- observer callbacks ---- */

static void observe_enter(const char *api, void *ctx) {
  (void)ctx;
  struct tstate *t = tstate();
  if (FCP_UNLIKELY(t->depth == FCP_CALL_DEPTH)) return;
  struct call *c = &t->calls[t->depth++];
  c->api = api;
  c->cbid = cbid_of(api);
  /* A driver call the runtime makes to implement a runtime call (fakecuda_drv.c): its GPU work carries
   * the runtime call's id, as a kernel's does on a GPU (the runtime record's). */
  c->by_runtime = t->depth > 1 && (c->cbid & FCP_DRIVER_CBID) &&
                  (!(c[-1].cbid & FCP_DRIVER_CBID) || c[-1].by_runtime);
  c->corr = c->by_runtime ? c[-1].corr : atomic_fetch_add_explicit(&next_corr, 1, memory_order_relaxed);
  c->sync = false;
  c->start = fcp_mono_now();
}

static void emit_external(const struct call *c, const struct tstate *t) {
  for (int k = 0; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; k++) {
    if (!t->ext_depth[k]) continue;
    CUpti_ActivityExternalCorrelation r = {.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                           .externalKind = (CUpti_ExternalCorrelationKind)k,
                                           .externalId = t->ext[k][t->ext_depth[k] - 1],
                                           .correlationId = c->corr};
    fcp_record(&r, sizeof r, 0);
  }
}

/* Lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2): the program's modules are
 * loaded inside its first allocation or launch, and CUPTI's DRIVER kind reports that nested driver
 * call, cuModuleLoadDataEx (driver cbid 20, the same number as cudaMalloc's runtime cbid 20). Nested in
 * the runtime call, it carries that call's correlation id (cupti_callbacks.h: ids are per API record;
 * that a nested driver call shares its runtime caller's id is an assumption to check on a GPU, see
 * docs/gpu-validation.md). Once per process, at the first such call the observer sees. */
static _Atomic bool modules_loaded;

static bool loads_modules(const char *api) {
  return has_prefix(api, "cudaMalloc") || has_prefix(api, "cudaLaunch") || has_prefix(api, "__cudaLaunch");
}

static void lazy_module_load(const struct call *c, uint64_t end) {
  if (atomic_load_explicit(&modules_loaded, memory_order_relaxed) || !loads_modules(c->api) ||
      atomic_exchange(&modules_loaded, true) || !fcp_on(CUPTI_ACTIVITY_KIND_DRIVER))
    return;
  uint64_t span = end - c->start;
  CUpti_ActivityAPI r = {.kind = CUPTI_ACTIVITY_KIND_DRIVER,
                         .cbid = CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,
                         .start = fcp_ts(c->start + span / 4),
                         .end = fcp_ts(c->start + span / 2),
                         .processId = process_id(),
                         .threadId = thread_id(),
                         .correlationId = c->corr,
                         .returnValue = 0};
  fcp_record(&r, sizeof r, 0);
}

/* CUPTI writes no DRIVER record of the driver calls a runtime makes (H200, CUDA 13.0, 2026-11-26/27: none
 * of cuMemAlloc_v2, cuLaunchKernel, cuStreamSynchronize inside a shared runtime's calls, none of a static
 * runtime's cuLaunchKernel / cuLaunchKernelEx; tests/fakecuda/README.md). FAKECUPTI_RUNTIME_DRIVER_RECORDS=1
 * writes them, nested with the runtime call's id: how CUPTI was assumed to behave before a GPU showed
 * otherwise, kept so that stepprof's handling of such records stays tested. */
static bool runtime_driver_records(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("FAKECUPTI_RUNTIME_DRIVER_RECORDS");
    on = e && *e == '1';
  }
  return on;
}

static void observe_exit(const char *api, int result, void *ctx) {
  (void)ctx;
  struct tstate *t = tstate();
  if (!t->depth || t->calls[t->depth - 1].api != api) return; /* entered before the observer was set */
  /* A copy: delivering a buffer below runs client code, which could make a runtime call of its own. */
  const struct call call = t->calls[--t->depth], *c = &call;
  uint64_t end = fcp_mono_now();
  if (c->sync && fcp_on(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    /* The record spans the whole API call, as CUPTI's do. */
    CUpti_ActivitySynchronization2 r = {.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                        .type = (CUpti_ActivitySynchronizationType)c->sync_type,
                                        .start = fcp_ts(c->start),
                                        .end = fcp_ts(end),
                                        .correlationId = c->corr,
                                        .contextId = c->sync_context,
                                        .streamId = c->sync_stream,
                                        .cudaEventId = c->sync_event,
                                        .cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE,
                                        .returnValue = 0};
    fcp_record(&r, sizeof r, 0);
  }
  lazy_module_load(c, end);
  bool driver = (c->cbid & FCP_DRIVER_CBID) != 0;
  CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  if (c->cbid && fcp_on(kind) && (!c->by_runtime || runtime_driver_records())) {
    /* "the activity API record will be preceded by a CUpti_ActivityExternalCorrelation record" */
    if (fcp_on(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) emit_external(c, t);
    CUpti_ActivityAPI r = {.kind = kind,
                           .cbid = c->cbid & ~FCP_DRIVER_CBID,
                           .start = fcp_ts(c->start),
                           .end = fcp_ts(end),
                           .processId = process_id(),
                           .threadId = thread_id(),
                           .correlationId = c->corr,
                           .returnValue = (uint32_t)result};
    fcp_record(&r, sizeof r, 0);
  }
}

static uint8_t memory_kind(int fakecuda_mem) {
  switch (fakecuda_mem) {
  case FAKECUDA_MEM_PAGEABLE: return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  case FAKECUDA_MEM_PINNED: return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  case FAKECUDA_MEM_DEVICE: return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  case FAKECUDA_MEM_MANAGED: return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  default: return CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
  }
}

static uint8_t copy_kind(const fakecuda_op_t *op) {
  if (has_prefix(op->api, "cudaMemcpyPeer")) return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  switch (op->copy_kind) { /* enum cudaMemcpyKind, cudaMemcpyDefault already resolved by fakecuda */
  case 0: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
  case 1: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  case 2: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  case 3: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  default: return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
  }
}

static void kernel_record(const fakecuda_op_t *op, uint32_t corr, uint64_t api_start) {
  CUpti_ActivityKind kind = fcp_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                            : fcp_on(CUPTI_ACTIVITY_KIND_KERNEL)          ? CUPTI_ACTIVITY_KIND_KERNEL
                                                                          : CUPTI_ACTIVITY_KIND_INVALID;
  if (kind == CUPTI_ACTIVITY_KIND_INVALID) return;
  bool latency = atomic_load_explicit(&fcp_latency_timestamps, memory_order_relaxed);
  uint64_t submitted = latency ? fcp_mono_now() : 0; /* the op is on the timeline now; never after its start */
  CUpti_ActivityKernel10 r = {
      .kind = kind,
      .registersPerThread = 32,
      .start = fcp_ts(op->gpu_start_ns),
      .end = fcp_ts(op->gpu_end_ns),
      .completed = fcp_ts(op->gpu_end_ns), /* no child grids */
      .deviceId = (uint32_t)op->device,
      .contextId = (uint32_t)op->device + 1,
      .streamId = (uint32_t)op->stream_id,
      .gridX = (int32_t)op->grid[0],
      .gridY = (int32_t)op->grid[1],
      .gridZ = (int32_t)op->grid[2],
      .blockX = (int32_t)op->block[0],
      .blockY = (int32_t)op->block[1],
      .blockZ = (int32_t)op->block[2],
      .staticSharedMemory = 0,
      .dynamicSharedMemory = (int32_t)op->shared_mem,
      .correlationId = corr,
      .gridId = atomic_fetch_add_explicit(&next_grid_id, 1, memory_order_relaxed),
      .name = intern(op->kernel_name),
      /* CUPTI fills these only after cuptiActivityEnableLatencyTimestamps(1); 0 is CUPTI_TIMESTAMP_UNKNOWN.
       * Queued when the launch call began, submitted when the op reached the timeline (or its start). */
      .queued = latency ? fcp_ts(api_start) : CUPTI_TIMESTAMP_UNKNOWN,
      .submitted =
          latency ? fcp_ts(submitted < op->gpu_start_ns ? submitted : op->gpu_start_ns) : CUPTI_TIMESTAMP_UNKNOWN,
      .launchType = has_prefix(op->api, "cudaLaunchCooperativeKernel")
                        ? CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE
                        : CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR,
      .sharedMemoryExecuted = (uint32_t)op->shared_mem,
      .graphNodeId = op->graph_node_id,
      .shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT,
      .graphId = op->graph_id,
      .channelType = CUPTI_CHANNEL_TYPE_COMPUTE,
  };
  fcp_record(&r, sizeof r, op->gpu_end_ns);
}

/* The fields CUpti_ActivityMemcpy6 and CUpti_ActivityMemcpyPtoP4 share, by name. */
#define FCP_COPY_FIELDS(op, corr)                                                                             \
  .srcKind = memory_kind((op)->src_mem), .dstKind = memory_kind((op)->dst_mem),                             \
  .flags = strstr((op)->api, "Async") ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : CUPTI_ACTIVITY_FLAG_NONE,         \
  .bytes = (op)->bytes, .start = fcp_ts((op)->gpu_start_ns), .end = fcp_ts((op)->gpu_end_ns),                \
  .deviceId = (uint32_t)(op)->device, .contextId = (uint32_t)(op)->device + 1,                               \
  .streamId = (uint32_t)(op)->stream_id, .correlationId = (corr), .graphNodeId = (op)->graph_node_id,        \
  .graphId = (op)->graph_id, .channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY

static void memcpy_record(const fakecuda_op_t *op, uint32_t corr) {
  /* no driver-level ids are modelled: the runtime call's id serves both */
  CUpti_ActivityMemcpy6 r = {
      .kind = CUPTI_ACTIVITY_KIND_MEMCPY,
      .copyKind = copy_kind(op),
      FCP_COPY_FIELDS(op, corr),
      .runtimeCorrelationId = corr,
      .copyCount = 1,
  };
  fcp_record(&r, sizeof r, op->gpu_end_ns);
}

/* A copy between two devices (cudaMemcpyPeer*) is CUPTI's MEMCPY2 kind, CUpti_ActivityMemcpyPtoP4,
 * when that kind is on (cupti_activity.h: "A peer to peer memory copy"); that it then gives no MEMCPY
 * record as well is an assumption to check on a GPU (docs/gpu-validation.md). */
static void memcpy2_record(const fakecuda_op_t *op, uint32_t corr) {
  CUpti_ActivityMemcpyPtoP4 r = {
      .kind = CUPTI_ACTIVITY_KIND_MEMCPY2,
      .copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP,
      FCP_COPY_FIELDS(op, corr),
      .srcDeviceId = (uint32_t)op->src_device,
      .srcContextId = (uint32_t)op->src_device + 1,
      .dstDeviceId = (uint32_t)op->dst_device,
      .dstContextId = (uint32_t)op->dst_device + 1,
  };
  fcp_record(&r, sizeof r, op->gpu_end_ns);
}

static void memset_record(const fakecuda_op_t *op, uint32_t corr) {
  CUpti_ActivityMemset4 r = {
      .kind = CUPTI_ACTIVITY_KIND_MEMSET,
      .value = (uint32_t)op->value,
      .bytes = op->bytes,
      .start = fcp_ts(op->gpu_start_ns),
      .end = fcp_ts(op->gpu_end_ns),
      .deviceId = (uint32_t)op->device,
      .contextId = (uint32_t)op->device + 1,
      .streamId = (uint32_t)op->stream_id,
      .correlationId = corr,
      .flags = strstr(op->api, "Async") ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : CUPTI_ACTIVITY_FLAG_NONE,
      .memoryKind = memory_kind(op->dst_mem),
      .graphNodeId = op->graph_node_id,
      .graphId = op->graph_id,
      .channelType = CUPTI_CHANNEL_TYPE_COMPUTE,
  };
  fcp_record(&r, sizeof r, op->gpu_end_ns);
}

static void memory_record(const fakecuda_op_t *op, uint32_t corr) {
  bool async = strstr(op->api, "Async") != NULL;
  CUpti_ActivityMemory4 r = {
      .kind = CUPTI_ACTIVITY_KIND_MEMORY2,
      .memoryOperationType = op->kind == FAKECUDA_OP_ALLOC ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                                           : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
      .memoryKind = (CUpti_ActivityMemoryKind)memory_kind(op->dst_mem),
      .correlationId = corr,
      .address = (uint64_t)(uintptr_t)op->ptr,
      .bytes = op->bytes,
      .timestamp = fcp_ts(op->gpu_start_ns),
      .processId = process_id(),
      .deviceId = (uint32_t)op->device,
      .contextId = (uint32_t)op->device + 1,
      .streamId = (uint32_t)op->stream_id,
      .isAsync = async,
  };
  /* Stream-ordered allocations come from the device's default pool. */
  r.memoryPoolConfig.memoryPoolType =
      async ? CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL : CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  fcp_record(&r, sizeof r, 0);
}

/* What CUPTI fills per synchronization type: streamId only for stream syncs and waits, cudaEventId only
 * for event syncs and waits; the rest are CUPTI_SYNCHRONIZATION_INVALID_VALUE. */
static void note_sync(struct call *c, const fakecuda_op_t *op) {
  const uint32_t none = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  CUpti_ActivitySynchronizationType type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
  if (has_prefix(op->api, "cudaStreamSynchronize") || has_prefix(op->api, "cuStreamSynchronize"))
    type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  else if (has_prefix(op->api, "cudaDeviceSynchronize") || has_prefix(op->api, "cuCtxSynchronize"))
    type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  else if (has_prefix(op->api, "cudaEventSynchronize") || has_prefix(op->api, "cuEventSynchronize"))
    type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  else if (has_prefix(op->api, "cudaStreamWaitEvent") || has_prefix(op->api, "cuStreamWaitEvent"))
    type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  bool on_stream = type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ||
                   type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  bool on_event = type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE ||
                  type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  c->sync = true;
  c->sync_type = (uint8_t)type;
  c->sync_context = (uint32_t)op->device + 1;
  c->sync_stream = on_stream ? (uint32_t)op->stream_id : none;
  c->sync_event = on_event && op->event_id ? op->event_id : none;
}

static void observe_op(const fakecuda_op_t *op, void *ctx) {
  (void)ctx;
  struct tstate *t = tstate();
  struct call *c = t->depth ? &t->calls[t->depth - 1] : NULL;
  uint32_t corr = c ? c->corr : 0;
  uint64_t api_start = c ? c->start : op->api_start_ns;
  switch (op->kind) {
  case FAKECUDA_OP_KERNEL: kernel_record(op, corr, api_start); break;
  case FAKECUDA_OP_MEMCPY:
    if (op->src_device >= 0 && has_prefix(op->api, "cudaMemcpyPeer") && fcp_on(CUPTI_ACTIVITY_KIND_MEMCPY2))
      memcpy2_record(op, corr);
    else if (fcp_on(CUPTI_ACTIVITY_KIND_MEMCPY))
      memcpy_record(op, corr);
    break;
  case FAKECUDA_OP_MEMSET:
    if (fcp_on(CUPTI_ACTIVITY_KIND_MEMSET)) memset_record(op, corr);
    break;
  case FAKECUDA_OP_SYNC:
    /* A runtime call's wait done by its nested driver call (fakecuda_drv.c): the record spans the
     * runtime call, the outermost call of that correlation id. */
    while (c && c > t->calls && c[-1].corr == c->corr) c--;
    if (c) note_sync(c, op);
    break;
  case FAKECUDA_OP_ALLOC:
  case FAKECUDA_OP_FREE:
    if (fcp_on(CUPTI_ACTIVITY_KIND_MEMORY2)) memory_record(op, corr);
    break;
  default: break;
  }
}

void fcp_observe(bool on) {
  static const fakecuda_observer_t obs = {.api_enter = observe_enter, .api_exit = observe_exit, .gpu_op = observe_op};
  if (on) atomic_fetch_add(&observer_gen, 1);
  fcp_rt.set_observer(on ? &obs : NULL);
}

/* ---- external correlation: per thread, a stack per kind ---- */

static bool valid_ext_kind(CUpti_ExternalCorrelationKind kind) {
  return kind > CUPTI_EXTERNAL_CORRELATION_KIND_INVALID && kind < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE;
}

CUptiResult fcp_ext_push(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  if (!valid_ext_kind(kind)) return CUPTI_ERROR_INVALID_PARAMETER;
  struct tstate *t = &ts;
  if (t->ext_depth[kind] == FCP_EXT_DEPTH) return CUPTI_ERROR_OUT_OF_MEMORY;
  t->ext[kind][t->ext_depth[kind]++] = id;
  return CUPTI_SUCCESS;
}

CUptiResult fcp_ext_pop(CUpti_ExternalCorrelationKind kind, uint64_t *last) {
  if (!valid_ext_kind(kind)) return CUPTI_ERROR_INVALID_PARAMETER;
  struct tstate *t = &ts;
  if (!t->ext_depth[kind]) return CUPTI_ERROR_QUEUE_EMPTY;
  uint64_t id = t->ext[kind][--t->ext_depth[kind]];
  if (last) *last = id;
  return CUPTI_SUCCESS;
}
