/*
 * fakecuda_mem.c - allocations.  "Device" memory is aligned host memory, so kernels' pointers work on
 * the CPU and copies are plain memmove.  Every allocation the runtime hands out or registers is kept
 * in an address-sorted table: it classifies any interior pointer (for the observer's src/dst kinds and
 * cudaPointerGetAttributes), rejects frees of unknown pointers, and counts live device bytes against
 * FAKECUDA_MEM_LIMIT.  Allocation calls are rare next to launches, so one mutex guards it all.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda_int.h"

#define FC_DEVICE_ALIGN 256 /* cudaMalloc's documented minimum alignment */
#define FC_PITCH_ALIGN 512
#define FC_HOST_ALIGN 4096  /* pinned memory is page-locked, hence page-aligned */

struct alloc {
  uintptr_t base;
  size_t size;
  int kind;
  int device;
  bool registered; /* cudaHostRegister: the caller owns the memory */
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;
static size_t n_allocs, cap_allocs;
static size_t used[FAKECUDA_MAX_DEVICES];

static bool counts_as_device(int kind) {
  return kind == FAKECUDA_MEM_DEVICE || kind == FAKECUDA_MEM_MANAGED;
}

/* Index of the first allocation starting above p.  Caller holds mem_lock. */
static size_t upper_bound(uintptr_t p) {
  size_t lo = 0, hi = n_allocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (allocs[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Caller holds mem_lock.  Zero-size entries still own their first byte. */
static struct alloc *containing(const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  size_t i = upper_bound(p);
  if (i == 0) return NULL;
  struct alloc *a = &allocs[i - 1];
  return p - a->base < (a->size ? a->size : 1) ? a : NULL;
}

static bool insert(struct alloc a) {
  if (n_allocs == cap_allocs) {
    size_t cap = cap_allocs ? cap_allocs * 2 : 64;
    struct alloc *n = realloc(allocs, cap * sizeof *n);
    if (!n) return false;
    allocs = n;
    cap_allocs = cap;
  }
  size_t i = upper_bound(a.base);
  memmove(&allocs[i + 1], &allocs[i], (n_allocs - i) * sizeof *allocs);
  allocs[i] = a;
  n_allocs++;
  if (counts_as_device(a.kind)) used[a.device] += a.size;
  return true;
}

static void erase(struct alloc *a) {
  if (counts_as_device(a->kind)) used[a->device] -= a->size;
  size_t i = (size_t)(a - allocs);
  memmove(&allocs[i], &allocs[i + 1], (n_allocs - i - 1) * sizeof *allocs);
  n_allocs--;
}

int fc_mem_kind(const void *p) {
  pthread_mutex_lock(&mem_lock);
  const struct alloc *a = containing(p);
  int kind = a ? a->kind : FAKECUDA_MEM_PAGEABLE;
  pthread_mutex_unlock(&mem_lock);
  return kind;
}

static void emit_mem(const char *api, int kind, const void *p, size_t size, int mem, cudaStream_t hs) {
  const struct CUstream_st *s = hs ? fc_stream(hs, false) : NULL;
  uint64_t now = fc_now();
  fakecuda_op_t op = {.kind = kind, .api = api, .ptr = p, .bytes = size, .dst_mem = mem, .stream = hs,
                      .stream_id = s ? s->id : 0, .device = fc_tls.device, .gpu_start_ns = now,
                      .gpu_end_ns = now};
  fc_emit(&op);
}

static cudaError_t mem_alloc(const char *api, void **out, size_t size, int kind, size_t align,
                             cudaStream_t hs) {
  if (!out) return cudaErrorInvalidValue;
  *out = NULL;
  if (size == 0) return cudaSuccess;
  void *p;
  size_t rounded = (size + align - 1) / align * align;
  if (rounded < size || posix_memalign(&p, align, rounded)) return cudaErrorMemoryAllocation;
  int dev = fc_tls.device;
  pthread_mutex_lock(&mem_lock);
  /* used[] never exceeds the limit, so the subtraction cannot wrap. */
  bool ok = !(counts_as_device(kind) && size > fc_cfg.mem_limit - used[dev]) &&
            insert((struct alloc){(uintptr_t)p, size, kind, dev, false});
  pthread_mutex_unlock(&mem_lock);
  if (!ok) {
    free(p);
    return cudaErrorMemoryAllocation;
  }
  *out = p;
  if (fc_observing()) emit_mem(api, FAKECUDA_OP_ALLOC, p, size, kind, hs);
  return cudaSuccess;
}

cudaError_t fc_mem_alloc(const char *api, void **p, size_t size, int kind, size_t align) {
  return mem_alloc(api, p, size, kind, align, NULL);
}

/* `kinds` is a bit mask of the allocation kinds this entry point may release. */
static cudaError_t mem_free(const char *api, void *p, unsigned kinds, cudaStream_t hs) {
  if (!p) return cudaSuccess;
  pthread_mutex_lock(&mem_lock);
  struct alloc *a = containing(p);
  bool ok = a && a->base == (uintptr_t)p && !a->registered && (kinds >> a->kind & 1);
  struct alloc gone = ok ? *a : (struct alloc){0};
  if (ok) erase(a);
  pthread_mutex_unlock(&mem_lock);
  if (!ok) return cudaErrorInvalidValue;
  if (fc_observing()) emit_mem(api, FAKECUDA_OP_FREE, p, gone.size, gone.kind, hs);
  free(p);
  return cudaSuccess;
}

/* cudaFree and cudaFreeHost synchronize the device before releasing memory. */
static cudaError_t free_sync(const char *api, void *p, unsigned kinds) {
  fc_wait_until(atomic_load(&fc_dev[fc_tls.device].all_busy));
  return mem_free(api, p, kinds, NULL);
}

#define DEVICE_KINDS (1u << FAKECUDA_MEM_DEVICE | 1u << FAKECUDA_MEM_MANAGED)
#define PINNED_KINDS (1u << FAKECUDA_MEM_PINNED)

static cudaError_t malloc_pitch(const char *api, void **p, size_t *pitch, size_t width, size_t height) {
  if (!pitch) return cudaErrorInvalidValue;
  *pitch = (width + FC_PITCH_ALIGN - 1) / FC_PITCH_ALIGN * FC_PITCH_ALIGN;
  return mem_alloc(api, p, *pitch * height, FAKECUDA_MEM_DEVICE, FC_DEVICE_ALIGN, NULL);
}

FC_API(cudaMalloc, (void **devPtr, size_t size),
       FC_VIA_DRV(true, mem_alloc, ((CUdeviceptr *)devPtr, size),
                  mem_alloc(__func__, devPtr, size, FAKECUDA_MEM_DEVICE, FC_DEVICE_ALIGN, NULL)))
FC_API_TWINS(cudaMallocAsync, _ptsz, (void **devPtr, size_t size, cudaStream_t hStream),
             mem_alloc(__func__, devPtr, size, FAKECUDA_MEM_DEVICE, FC_DEVICE_ALIGN, hStream))
FC_API(cudaMallocPitch, (void **devPtr, size_t *pitch, size_t width, size_t height),
       malloc_pitch(__func__, devPtr, pitch, width, height))
FC_API(cudaMallocManaged, (void **devPtr, size_t size, unsigned int flags FC_UNUSED),
       mem_alloc(__func__, devPtr, size, FAKECUDA_MEM_MANAGED, FC_DEVICE_ALIGN, NULL))
FC_API(cudaMallocHost, (void **ptr, size_t size),
       mem_alloc(__func__, ptr, size, FAKECUDA_MEM_PINNED, FC_HOST_ALIGN, NULL))
FC_API(cudaHostAlloc, (void **pHost, size_t size, unsigned int flags FC_UNUSED),
       mem_alloc(__func__, pHost, size, FAKECUDA_MEM_PINNED, FC_HOST_ALIGN, NULL))
FC_API(cudaFree, (void *devPtr),
       FC_VIA_DRV(true, mem_free, ((CUdeviceptr)devPtr), free_sync(__func__, devPtr, DEVICE_KINDS)))
FC_API(cudaFreeHost, (void *ptr), free_sync(__func__, ptr, PINNED_KINDS))
/* The simulated GPU never touches the memory, so it can go back at once rather than at the
 * stream's point of use. */
FC_API_TWINS(cudaFreeAsync, _ptsz, (void *devPtr, cudaStream_t hStream),
             mem_free(__func__, devPtr, DEVICE_KINDS, hStream))

/* ---- registered host memory ---- */

static cudaError_t host_register(const char *api, void *p, size_t size) {
  if (!p || !size) return cudaErrorInvalidValue;
  pthread_mutex_lock(&mem_lock);
  size_t i = upper_bound((uintptr_t)p + size - 1);
  bool overlap = i > 0 && allocs[i - 1].base + allocs[i - 1].size > (uintptr_t)p;
  bool ok = !overlap && insert((struct alloc){(uintptr_t)p, size, FAKECUDA_MEM_PINNED, fc_tls.device, true});
  pthread_mutex_unlock(&mem_lock);
  if (overlap) return cudaErrorHostMemoryAlreadyRegistered;
  if (!ok) return cudaErrorMemoryAllocation;
  if (fc_observing()) emit_mem(api, FAKECUDA_OP_ALLOC, p, size, FAKECUDA_MEM_PINNED, NULL);
  return cudaSuccess;
}

static cudaError_t host_unregister(const char *api, void *p) {
  pthread_mutex_lock(&mem_lock);
  struct alloc *a = p ? containing(p) : NULL;
  bool ok = a && a->base == (uintptr_t)p && a->registered;
  size_t size = ok ? a->size : 0;
  if (ok) erase(a);
  pthread_mutex_unlock(&mem_lock);
  if (!ok) return cudaErrorHostMemoryNotRegistered;
  if (fc_observing()) emit_mem(api, FAKECUDA_OP_FREE, p, size, FAKECUDA_MEM_PINNED, NULL);
  return cudaSuccess;
}

static cudaError_t host_device_pointer(void **dev, void *host) {
  if (!dev) return cudaErrorInvalidValue;
  if (fc_mem_kind(host) != FAKECUDA_MEM_PINNED) return cudaErrorInvalidValue;
  *dev = host;
  return cudaSuccess;
}

FC_API(cudaHostRegister, (void *ptr, size_t size, unsigned int flags FC_UNUSED), host_register(__func__, ptr, size))
FC_API(cudaHostUnregister, (void *ptr), host_unregister(__func__, ptr))
FC_API(cudaHostGetDevicePointer, (void **pDevice, void *pHost, unsigned int flags FC_UNUSED),
       host_device_pointer(pDevice, pHost))

/* ---- queries ---- */

static cudaError_t pointer_attributes(struct cudaPointerAttributes *attr, const void *p) {
  if (!attr) return cudaErrorInvalidValue;
  pthread_mutex_lock(&mem_lock);
  const struct alloc *a = containing(p);
  struct alloc found = a ? *a : (struct alloc){.kind = FAKECUDA_MEM_PAGEABLE, .device = -2};
  pthread_mutex_unlock(&mem_lock);
  attr->type = (enum cudaMemoryType)found.kind;
  attr->device = found.device;
  attr->devicePointer = a ? (void *)p : NULL;
  attr->hostPointer = a && found.kind != FAKECUDA_MEM_DEVICE ? (void *)p : NULL;
  return cudaSuccess;
}

static cudaError_t mem_info(size_t *free_bytes, size_t *total) {
  if (!free_bytes || !total) return cudaErrorInvalidValue;
  pthread_mutex_lock(&mem_lock);
  *total = fc_cfg.mem_limit;
  *free_bytes = fc_cfg.mem_limit - used[fc_tls.device];
  pthread_mutex_unlock(&mem_lock);
  return cudaSuccess;
}

FC_API(cudaPointerGetAttributes, (struct cudaPointerAttributes * attributes, const void *ptr),
       pointer_attributes(attributes, ptr))
FC_API(cudaMemGetInfo, (size_t *free, size_t *total), mem_info(free, total))

/* cudaDeviceReset: the device's allocations die with its context; pinned memory is host state. */
void fc_mem_reset_device(int device) {
  pthread_mutex_lock(&mem_lock);
  for (size_t i = n_allocs; i-- > 0;) {
    if (allocs[i].device != device || !counts_as_device(allocs[i].kind)) continue;
    void *p = (void *)allocs[i].base;
    erase(&allocs[i]);
    free(p);
  }
  pthread_mutex_unlock(&mem_lock);
}
