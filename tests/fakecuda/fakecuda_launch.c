/*
 * fakecuda_launch.c - executing work on the simulated GPU: fc_submit (the one path every kernel, copy,
 * set and host function takes: do the host-side effect, take a timeline slot, tell the observer), the
 * <<<>>> configuration stack, every kernel-launch entry point, and the function-attribute and occupancy
 * queries.  Kernels run no code; the launch path does no allocation, locking or system call once a
 * function is known, so benchmarks of millions of launches stay cheap.
 */
#include <string.h>

#include "fakecuda_int.h"

#define FC_MAX_THREADS_PER_BLOCK 1024

/* 2D copies and sets keep the runtime's row-by-row semantics; memmove because DtoD may overlap. */
static void copy_rows(const struct fc_work *w) {
  for (size_t r = 0; r < w->height; r++)
    memmove((char *)w->dst + r * w->dpitch, (const char *)w->src + r * w->spitch, w->width);
}

/* Wider elements (graph memset nodes) take the low bytes of value, as on a little-endian GPU. */
static void set_rows(const struct fc_work *w) {
  for (size_t r = 0; r < w->height; r++) {
    char *row = (char *)w->dst + r * w->dpitch;
    if (w->elem <= 1) memset(row, w->value, w->width);
    else
      for (size_t i = 0; i + w->elem <= w->width; i += w->elem) memcpy(row + i, &w->value, w->elem);
  }
}

static bool on_device(int mem) {
  return mem == FAKECUDA_MEM_DEVICE || mem == FAKECUDA_MEM_MANAGED;
}

static enum cudaMemcpyKind resolve_kind(enum cudaMemcpyKind k, int src_mem, int dst_mem) {
  static const enum cudaMemcpyKind by_place[2][2] = {
      {cudaMemcpyHostToHost, cudaMemcpyHostToDevice},
      {cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice},
  };
  return k == cudaMemcpyDefault ? by_place[on_device(src_mem)][on_device(dst_mem)] : k;
}

static void emit_work(const char *api, cudaStream_t hs, const struct CUstream_st *s, const struct fc_work *w,
                      struct fc_span sp) {
  fakecuda_op_t op = {
      .kind = w->kind,
      .api = api,
      .stream = hs,
      .stream_id = s->id,
      .device = s->device,
      .gpu_start_ns = sp.start,
      .gpu_end_ns = sp.end,
      .graph_id = w->graph_id,
      .graph_node_id = w->graph_node_id,
  };
  if (w->kind == FAKECUDA_OP_KERNEL) {
    op.func = w->kern->host_fun;
    op.kernel_name = w->kern->name;
    op.grid[0] = w->grid.x, op.grid[1] = w->grid.y, op.grid[2] = w->grid.z;
    op.block[0] = w->block.x, op.block[1] = w->block.y, op.block[2] = w->block.z;
    op.shared_mem = w->shmem;
  } else {
    op.bytes = w->width * w->height;
    op.ptr = w->dst;
    op.dst_mem = fc_mem_kind(w->dst);
    op.value = w->value;
    if (w->kind == FAKECUDA_OP_MEMCPY) {
      op.src_mem = fc_mem_kind(w->src);
      op.copy_kind = resolve_kind(w->ckind, op.src_mem, op.dst_mem);
      op.src_device = w->src_dev - 1;
      op.dst_device = w->dst_dev - 1;
    }
  }
  fc_emit(&op);
}

static inline cudaError_t submit(const char *api, cudaStream_t hs, struct CUstream_st *s,
                                 const struct fc_work *w, uint64_t *end) {
  if (FC_UNLIKELY(s->capture != NULL)) return fc_capture_append(s->capture, w);
  uint64_t dur;
  switch (w->kind) {
  case FAKECUDA_OP_KERNEL: /* observed or captured: never shorter than a real kernel can be */
    dur = w->kern->ns > fc_cfg.kernel_min_ns ? w->kern->ns : fc_cfg.kernel_min_ns;
    break;
  case FAKECUDA_OP_MEMCPY:
    copy_rows(w);
    dur = fc_cfg.copy_latency_ns + (uint64_t)((double)(w->width * w->height) * fc_cfg.copy_ns_per_byte);
    break;
  case FAKECUDA_OP_MEMSET:
    set_rows(w);
    dur = fc_cfg.set_latency_ns + (uint64_t)((double)(w->width * w->height) * fc_cfg.set_ns_per_byte);
    break;
  case FC_WORK_HOSTFN:
    w->fn(w->user);
    dur = 0;
    break;
  default:
    return cudaSuccess;
  }
  struct fc_span sp = fc_enqueue(s, dur, false);
  if (end) *end = sp.end;
  if (FC_UNLIKELY(fc_observing()) && w->kind != FC_WORK_HOSTFN) emit_work(api, hs, s, w, sp);
  return cudaSuccess;
}

cudaError_t fc_submit(const char *api, cudaStream_t hs, struct CUstream_st *s, const struct fc_work *w,
                      uint64_t *end) {
  return submit(api, hs, s, w, end);
}

/* ---- kernel launches ---- */

static inline cudaError_t launch(const char *api, struct CUkern_st *k, dim3 g, dim3 b, size_t shmem,
                                 cudaStream_t hs, bool per_thread) {
  if (FC_UNLIKELY(!k)) return cudaErrorInvalidDeviceFunction;
  if (FC_UNLIKELY(!g.x || !g.y || !g.z || !b.x || !b.y || !b.z || g.y > 65535 || g.z > 65535 || b.z > 64 ||
                  (uint64_t)b.x * b.y * b.z > FC_MAX_THREADS_PER_BLOCK))
    return cudaErrorInvalidConfiguration;
  struct CUstream_st *s = fc_stream(hs, per_thread);
  if (FC_UNLIKELY(s->capture != NULL || fc_observing())) {
    struct fc_work w = {.kind = FAKECUDA_OP_KERNEL, .kern = k, .grid = g, .block = b, .shmem = shmem};
    return submit(api, hs, s, &w, NULL);
  }
  /* What submit() would do, minus building a work item nobody reads (a third of the launch cost). */
  fc_enqueue(s, k->ns, false);
  return cudaSuccess;
}

FC_API_TWINS(__cudaLaunchKernel, _ptsz,
             (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args FC_UNUSED, size_t sharedMem,
              cudaStream_t stream),
             launch(__func__, kernel, gridDim, blockDim, sharedMem, stream, per_thread))
FC_API_TWINS(cudaLaunchKernel, _ptsz,
             (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),
             FC_VIA_DRV(!per_thread, launch,
                        ((CUfunction)(uintptr_t)func, gridDim.x, gridDim.y, gridDim.z, blockDim.x, blockDim.y,
                         blockDim.z, (unsigned)sharedMem, (CUstream)stream, args, NULL),
                        launch(__func__, fc_kernel(func), gridDim, blockDim, sharedMem, stream, per_thread)))
FC_API_TWINS(cudaLaunchCooperativeKernel, _ptsz,
             (const void *func, dim3 gridDim, dim3 blockDim, void **args FC_UNUSED, size_t sharedMem,
              cudaStream_t stream),
             launch(__func__, fc_kernel(func), gridDim, blockDim, sharedMem, stream, per_thread))
FC_API_TWINS(cudaLaunchKernelExC, _ptsz, (const cudaLaunchConfig_t *config, const void *func, void **args FC_UNUSED),
             config ? launch(__func__, fc_kernel(func), config->gridDim, config->blockDim, config->dynamicSmemBytes,
                             config->stream, per_thread)
                    : cudaErrorInvalidValue)

/* ---- the <<<>>> path: push at the call site, pop in the stub, then __cudaLaunchKernel ---- */

FC_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream) {
  if (FC_UNLIKELY(fc_hooked())) fc_note_enter(__func__);
  struct fc_thread *t = &fc_tls;
  unsigned r = 1; /* nonzero makes the generated code skip the launch */
  if (FC_LIKELY(t->cfg_depth < FC_CFG_DEPTH)) {
    t->cfg[t->cfg_depth++] = (struct fc_launch_cfg){gridDim, blockDim, sharedMem, stream};
    r = 0;
  }
  if (FC_UNLIKELY(fc_hooked())) fc_note_exit(__func__, (int)r);
  return r;
}

static cudaError_t pop_config(dim3 *grid, dim3 *block, size_t *shmem, void *stream) {
  struct fc_thread *t = &fc_tls;
  if (FC_UNLIKELY(t->cfg_depth == 0)) return cudaErrorMissingConfiguration;
  const struct fc_launch_cfg *c = &t->cfg[--t->cfg_depth];
  *grid = c->grid;
  *block = c->block;
  *shmem = c->shmem;
  *(cudaStream_t *)stream = c->stream;
  return cudaSuccess;
}

FC_API(__cudaPopCallConfiguration, (dim3 * gridDim, dim3 *blockDim, size_t *sharedMem, void *stream),
       pop_config(gridDim, blockDim, sharedMem, stream))

static cudaError_t get_kernel(cudaKernel_t *out, const void *func) {
  if (!out || !func) return cudaErrorInvalidValue;
  *out = fc_kernel(func);
  return *out ? cudaSuccess : cudaErrorMemoryAllocation;
}

FC_API(__cudaGetKernel, (cudaKernel_t * kernel, const void *hostFun), get_kernel(kernel, hostFun))
FC_API(cudaGetKernel, (cudaKernel_t * kernelPtr, const void *entryFuncAddr), get_kernel(kernelPtr, entryFuncAddr))

/* ---- function queries ---- */

static cudaError_t func_name(const char **name, const void *func) {
  const struct CUkern_st *k = fc_kernel(func);
  if (!name) return cudaErrorInvalidValue;
  if (!k || !k->name) return cudaErrorInvalidDeviceFunction;
  *name = k->name;
  return cudaSuccess;
}

/* The driver's handle of a registered kernel (what cuLaunchKernel takes): its registry entry, which
 * fc_kernel() maps to itself. Like NVIDIA's, unregistered symbols are refused. */
static cudaError_t func_by_symbol(cudaFunction_t *out, const void *symbol) {
  if (!out || !symbol) return cudaErrorInvalidValue;
  struct CUkern_st *k = fc_kernel(symbol);
  if (!k || !k->name) return cudaErrorInvalidDeviceFunction;
  *out = (cudaFunction_t)(void *)k;
  return cudaSuccess;
}

/* Values of a small sm_90 kernel: enough for code that sizes launches from them. */
static cudaError_t func_attributes(struct cudaFuncAttributes *a, const void *func) {
  if (!a) return cudaErrorInvalidValue;
  if (!func) return cudaErrorInvalidDeviceFunction;
  memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = FC_MAX_THREADS_PER_BLOCK;
  a->numRegs = 32;
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = 48 * 1024;
  a->preferredShmemCarveout = -1;
  return cudaSuccess;
}

static cudaError_t occupancy(int *blocks, const void *func, int block_size) {
  if (!blocks || block_size <= 0) return cudaErrorInvalidValue;
  if (!func) return cudaErrorInvalidDeviceFunction;
  int n = 2048 / block_size; /* threads per SM, capped by the 32 resident blocks of sm_90 */
  *blocks = n > 32 ? 32 : n;
  return cudaSuccess;
}

FC_API(cudaFuncGetName, (const char **name, const void *func), func_name(name, func))
FC_API(cudaGetFuncBySymbol, (cudaFunction_t * functionPtr, const void *symbolPtr), func_by_symbol(functionPtr, symbolPtr))
FC_API(cudaFuncGetAttributes, (struct cudaFuncAttributes * attr, const void *func), func_attributes(attr, func))
FC_API(cudaFuncSetAttribute, (const void *func, enum cudaFuncAttribute attr FC_UNUSED, int value FC_UNUSED),
       func ? cudaSuccess : cudaErrorInvalidDeviceFunction)
FC_API(cudaFuncSetCacheConfig, (const void *func, enum cudaFuncCache cacheConfig FC_UNUSED),
       func ? cudaSuccess : cudaErrorInvalidDeviceFunction)
FC_API(cudaOccupancyMaxActiveBlocksPerMultiprocessor,
       (int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize FC_UNUSED),
       occupancy(numBlocks, func, blockSize))
FC_API(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
       (int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize FC_UNUSED,
        unsigned int flags FC_UNUSED),
       occupancy(numBlocks, func, blockSize))
