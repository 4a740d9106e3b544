/*
 * fakedriver_xfer.c - the libcuda.so.1 stand-in's copies, sets, host / managed / pitched / pool
 * allocations, events, stream waits and host functions, each run (fakedriver_int.h) on one runtime
 * stand-in entry point under its own driver name, with its per-thread-default-stream twin where NVIDIA's
 * libcuda exports one. Where NVIDIA's runtime has no call to run a driver call on (cuMemsetD16 / D32,
 * the per-thread peer copies), the runtime stand-in has a fakecuda_* one (fakecuda_copy.c).
 * cuMemcpy2D / 3D run as cudaMemcpy2D: arrays are not supported (CUDA_ERROR_NOT_SUPPORTED), nor a 3D
 * copy whose slices are not contiguous rows (srcHeight or dstHeight other than Height with Depth > 1).
 * Memory pools are one token per device (cuDeviceGetDefaultMemPool); an allocation from one is
 * cudaMallocAsync's on the current device.
 */
#include <stdbool.h>

#include "fakecuda.h"
#include "fakedriver_int.h"

/* ---- copies ---- */

#define COPY_PROTO (void *, const void *, size_t, enum cudaMemcpyKind)
#define COPY_ASYNC_PROTO (void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t)
#define PEER_PROTO (void *, int, const void *, int, size_t)
#define COPY2D_PROTO (void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind)

DRV_TWINS(cuMemcpyHtoD_v2, _ptds, (CUdeviceptr d, const void *h, size_t n), (void)0, cudaMemcpy, COPY_PROTO,
          ((void *)d, h, n, cudaMemcpyHostToDevice))
DRV_TWINS(cuMemcpyDtoH_v2, _ptds, (void *h, CUdeviceptr d, size_t n), (void)0, cudaMemcpy, COPY_PROTO,
          (h, (const void *)d, n, cudaMemcpyDeviceToHost))
DRV_TWINS(cuMemcpyHtoDAsync_v2, _ptsz, (CUdeviceptr d, const void *h, size_t n, CUstream s), (void)0,
          cudaMemcpyAsync, COPY_ASYNC_PROTO, ((void *)d, h, n, cudaMemcpyHostToDevice, (cudaStream_t)s))
DRV_TWINS(cuMemcpyDtoHAsync_v2, _ptsz, (void *h, CUdeviceptr d, size_t n, CUstream s), (void)0, cudaMemcpyAsync,
          COPY_ASYNC_PROTO, (h, (const void *)d, n, cudaMemcpyDeviceToHost, (cudaStream_t)s))

/* cuMemcpy / cuMemcpyAsync: unified addressing, the runtime's cudaMemcpyDefault. */
#define BY_ADDRESS(name, sfx, kind)                                                                     \
  DRV_TWINS(name, sfx, (CUdeviceptr d, CUdeviceptr src, size_t n), (void)0, cudaMemcpy, COPY_PROTO,      \
            ((void *)d, (const void *)src, n, kind))
#define BY_ADDRESS_ASYNC(name, sfx, kind)                                                               \
  DRV_TWINS(name, sfx, (CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s), (void)0, cudaMemcpyAsync, \
            COPY_ASYNC_PROTO, ((void *)d, (const void *)src, n, kind, (cudaStream_t)s))
BY_ADDRESS(cuMemcpy, _ptds, cudaMemcpyDefault)
BY_ADDRESS(cuMemcpyDtoD_v2, _ptds, cudaMemcpyDeviceToDevice)
BY_ADDRESS_ASYNC(cuMemcpyAsync, _ptsz, cudaMemcpyDefault)
BY_ADDRESS_ASYNC(cuMemcpyDtoDAsync_v2, _ptsz, cudaMemcpyDeviceToDevice)

/* The devices of a peer copy's contexts, or CUDA_ERROR_INVALID_CONTEXT. */
#define PEER_DEVICES                                                                                    \
  int dd = fd_ctx_device(dc);                                                                            \
  int sd = fd_ctx_device(sc);                                                                            \
  if (dd < 0 || sd < 0) return CUDA_ERROR_INVALID_CONTEXT

DRV_TWINS(cuMemcpyPeer, _ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
          PEER_DEVICES, fakecuda_memcpyPeer, PEER_PROTO, ((void *)d, dd, (const void *)src, sd, n))
DRV_TWINS(cuMemcpyPeerAsync, _ptsz,
          (CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s), PEER_DEVICES,
          fakecuda_memcpyPeerAsync, (void *, int, const void *, int, size_t, cudaStream_t),
          ((void *)d, dd, (const void *)src, sd, n, (cudaStream_t)s))

/* A 2D or 3D descriptor as the runtime's cudaMemcpy2D arguments. */
struct flat {
  void *dst;
  const void *src;
  size_t dpitch, spitch, width, rows;
  enum cudaMemcpyKind kind;
};

static bool on_host(CUmemorytype t) {
  return t == CU_MEMORYTYPE_HOST;
}

/* The address of byte `off` of one side of a copy; NULL for a memory type the stand-in has no memory of. */
static char *place(CUmemorytype t, const void *host, CUdeviceptr dev, size_t off) {
  if (t == CU_MEMORYTYPE_HOST) return (char *)host + off;
  if (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED) return (char *)dev + off;
  return NULL;
}

static CUresult flatten(struct flat *f, CUmemorytype st, CUmemorytype dt, char *src, char *dst) {
  if (st == CU_MEMORYTYPE_ARRAY || dt == CU_MEMORYTYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
  if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
  f->src = src, f->dst = dst;
  if (st == CU_MEMORYTYPE_UNIFIED || dt == CU_MEMORYTYPE_UNIFIED) f->kind = cudaMemcpyDefault;
  else f->kind = on_host(st) ? (on_host(dt) ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                             : (on_host(dt) ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
  return CUDA_SUCCESS;
}

static CUresult flat2d(const CUDA_MEMCPY2D *c, struct flat *f) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *f = (struct flat){.dpitch = c->dstPitch, .spitch = c->srcPitch, .width = c->WidthInBytes, .rows = c->Height};
  return flatten(f, c->srcMemoryType, c->dstMemoryType,
                 place(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcY * c->srcPitch + c->srcXInBytes),
                 place(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstY * c->dstPitch + c->dstXInBytes));
}

static CUresult flat3d(const CUDA_MEMCPY3D *c, struct flat *f) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->Depth > 1 && (c->srcHeight != c->Height || c->dstHeight != c->Height)) return CUDA_ERROR_NOT_SUPPORTED;
  *f = (struct flat){.dpitch = c->dstPitch, .spitch = c->srcPitch, .width = c->WidthInBytes,
                     .rows = c->Height * c->Depth};
  return flatten(f, c->srcMemoryType, c->dstMemoryType,
                 place(c->srcMemoryType, c->srcHost, c->srcDevice,
                       (c->srcZ * c->srcHeight + c->srcY) * c->srcPitch + c->srcXInBytes),
                 place(c->dstMemoryType, c->dstHost, c->dstDevice,
                       (c->dstZ * c->dstHeight + c->dstY) * c->dstPitch + c->dstXInBytes));
}

#define FLAT(fn)                                                                                        \
  struct flat f;                                                                                        \
  CUresult fr = fn(c, &f);                                                                              \
  if (fr != CUDA_SUCCESS) return fr
#define FLAT_ARGS f.dst, f.dpitch, f.src, f.spitch, f.width, f.rows, f.kind

#define COPY_ND(name, sfx, desc, fn)                                                                    \
  DRV_TWINS(name, sfx, (const desc *c), FLAT(fn), cudaMemcpy2D, COPY2D_PROTO, (FLAT_ARGS))
#define COPY_ND_ASYNC(name, sfx, desc, fn)                                                              \
  DRV_TWINS(name, sfx, (const desc *c, CUstream s), FLAT(fn), cudaMemcpy2DAsync,                        \
            (void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind, cudaStream_t),  \
            (FLAT_ARGS, (cudaStream_t)s))
COPY_ND(cuMemcpy2D_v2, _ptds, CUDA_MEMCPY2D, flat2d)
COPY_ND_ASYNC(cuMemcpy2DAsync_v2, _ptsz, CUDA_MEMCPY2D, flat2d)
COPY_ND(cuMemcpy3D_v2, _ptds, CUDA_MEMCPY3D, flat3d)
COPY_ND_ASYNC(cuMemcpy3DAsync_v2, _ptsz, CUDA_MEMCPY3D, flat3d)

/* ---- sets ---- */

DRV_TWINS(cuMemsetD8_v2, _ptds, (CUdeviceptr d, unsigned char v, size_t n), (void)0, cudaMemset,
          (void *, int, size_t), ((void *)d, v, n))
DRV_TWINS(cuMemsetD8Async, _ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream s), (void)0, cudaMemsetAsync,
          (void *, int, size_t, cudaStream_t), ((void *)d, v, n, (cudaStream_t)s))

/* n elements of `type` (cuMemsetD16 / D32), as one row. */
#define SET_ELEMS(name, sfx, type)                                                                      \
  DRV_TWINS(name, sfx, (CUdeviceptr d, type v, size_t n), (void)0, fakecuda_memsetD,                     \
            (void *, size_t, unsigned, unsigned, size_t, size_t), ((void *)d, n * sizeof(type), v, sizeof(type), n, 1))
#define SET_ELEMS_ASYNC(name, sfx, type)                                                                \
  DRV_TWINS(name, sfx, (CUdeviceptr d, type v, size_t n, CUstream s), (void)0, fakecuda_memsetDAsync,    \
            (void *, size_t, unsigned, unsigned, size_t, size_t, cudaStream_t),                         \
            ((void *)d, n * sizeof(type), v, sizeof(type), n, 1, (cudaStream_t)s))
SET_ELEMS(cuMemsetD16_v2, _ptds, unsigned short)
SET_ELEMS(cuMemsetD32_v2, _ptds, unsigned int)
SET_ELEMS_ASYNC(cuMemsetD16Async, _ptsz, unsigned short)
SET_ELEMS_ASYNC(cuMemsetD32Async, _ptsz, unsigned int)

/* ---- host, managed, pitched and pool allocations ---- */

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t n) {
  RT_CALL(__func__, cudaMallocHost, (void **, size_t), (pp, n));
}

/* The flags share their values with cudaHostAlloc's; others are refused, as NVIDIA's driver does. */
EXPORT CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
  if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
    return CUDA_ERROR_INVALID_VALUE;
  RT_CALL(__func__, cudaHostAlloc, (void **, size_t, unsigned), (pp, n, flags));
}

EXPORT CUresult cuMemFreeHost(void *p) {
  RT_CALL(__func__, cudaFreeHost, (void *), (p));
}

/* As NVIDIA's: 0 bytes, or flags other than exactly one of GLOBAL / HOST, are CUDA_ERROR_INVALID_VALUE. */
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags) {
  if (!n || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) return CUDA_ERROR_INVALID_VALUE;
  RT_CALL(__func__, cudaMallocManaged, (void **, size_t, unsigned), ((void **)p, n, flags));
}

/* As NVIDIA's: an element size other than 4, 8 or 16 bytes is CUDA_ERROR_INVALID_VALUE. */
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned int elem) {
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  RT_CALL(__func__, cudaMallocPitch, (void **, size_t *, size_t, size_t), ((void **)p, pitch, width, height));
}

static char pool_tokens[FAKECUDA_MAX_DEVICES]; /* a device's default pool: a token, as contexts are */

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= FAKECUDA_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  *pool = (CUmemoryPool)(void *)&pool_tokens[dev];
  return CUDA_SUCCESS;
}

static bool is_pool(CUmemoryPool pool) {
  char *c = (char *)(void *)pool;
  return c >= pool_tokens && c < pool_tokens + FAKECUDA_MAX_DEVICES;
}

DRV_TWINS(cuMemAllocFromPoolAsync, _ptsz, (CUdeviceptr * p, size_t n, CUmemoryPool pool, CUstream s),
          if (!is_pool(pool)) return CUDA_ERROR_INVALID_VALUE, cudaMallocAsync, (void **, size_t, cudaStream_t),
          ((void **)p, n, (cudaStream_t)s))

/* ---- events, stream waits, host functions ---- */

EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags) {
  RT_CALL(__func__, cudaEventCreateWithFlags, (cudaEvent_t *, unsigned), ((cudaEvent_t *)e, flags));
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  RT_CALL(__func__, cudaEventDestroy, (cudaEvent_t), ((cudaEvent_t)e));
}

DRV_TWINS(cuEventRecord, _ptsz, (CUevent e, CUstream s), (void)0, cudaEventRecord, (cudaEvent_t, cudaStream_t),
          ((cudaEvent_t)e, (cudaStream_t)s))

EXPORT CUresult cuEventSynchronize(CUevent e) {
  RT_CALL(__func__, cudaEventSynchronize, (cudaEvent_t), ((cudaEvent_t)e));
}

DRV_TWINS(cuStreamWaitEvent, _ptsz, (CUstream s, CUevent e, unsigned int flags), (void)0, cudaStreamWaitEvent,
          (cudaStream_t, cudaEvent_t, unsigned), ((cudaStream_t)s, (cudaEvent_t)e, flags))
DRV_TWINS(cuLaunchHostFunc, _ptsz, (CUstream s, CUhostFn fn, void *ud), (void)0, cudaLaunchHostFunc,
          (cudaStream_t, cudaHostFn_t, void *), ((cudaStream_t)s, fn, ud))
