/*
 * fakecuda_copy.c - memcpy / memset entry points, including 2D, peer and symbol variants.  Each becomes
 * a 2D work item: the bytes really move at issue time (kernels never read them, so the order relative to
 * simulated kernels is unobservable) and the op takes bytes / FAKECUDA_COPY_GBPS (or _SET_GBPS) on the
 * timeline.  Synchronous variants then wait until the op's simulated end, as a GPU copy would make the
 * host wait.  Symbols are the host shadows registered by __cudaRegisterVar.
 */
#include "fakecuda_int.h"

/* The devices of the peer copy the calling thread is making (plus one), 0 otherwise. */
static __thread int peer_src, peer_dst;

static cudaError_t copy2d(const char *api, cudaStream_t hs, bool pt, bool sync, void *dst, size_t dpitch,
                          const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind) {
  if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (width == 0 || height == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  if (dpitch < width || spitch < width) return cudaErrorInvalidPitchValue;
  struct fc_work w = {.kind = FAKECUDA_OP_MEMCPY, .dst = dst, .src = src, .width = width, .height = height,
                      .dpitch = dpitch, .spitch = spitch, .ckind = kind, .src_dev = peer_src, .dst_dev = peer_dst};
  struct CUstream_st *s = fc_stream(hs, pt);
  uint64_t end;
  cudaError_t r = fc_submit(api, hs, s, &w, &end);
  if (r == cudaSuccess && sync && !s->capture) fc_wait_until(end);
  return r;
}

/* Rows of `width` bytes set to `value`, an element of `elem` bytes (0: 1, as cudaMemset). */
static cudaError_t set_elems(const char *api, cudaStream_t hs, bool pt, bool sync, void *dst, size_t pitch,
                             int value, unsigned elem, size_t width, size_t height) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (!dst) return cudaErrorInvalidValue;
  if (pitch < width) return cudaErrorInvalidPitchValue;
  struct fc_work w = {.kind = FAKECUDA_OP_MEMSET, .dst = dst, .width = width, .height = height, .dpitch = pitch,
                      .value = value, .elem = elem};
  struct CUstream_st *s = fc_stream(hs, pt);
  uint64_t end;
  cudaError_t r = fc_submit(api, hs, s, &w, &end);
  if (r == cudaSuccess && sync && !s->capture) fc_wait_until(end);
  return r;
}

static cudaError_t set2d(const char *api, cudaStream_t hs, bool pt, bool sync, void *dst, size_t pitch, int value,
                         size_t width, size_t height) {
  return set_elems(api, hs, pt, sync, dst, pitch, value, 0, width, height);
}

#define COPY1D(sync, dst, src, n, kind, stream) \
  copy2d(__func__, stream, per_thread, sync, dst, n, src, n, n, 1, kind)

FC_API_TWINS(cudaMemcpy, _ptds, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),
             kind == cudaMemcpyHostToDevice
                 ? FC_VIA_DRV(!per_thread, memcpy_htod, ((CUdeviceptr)dst, src, count),
                              COPY1D(true, dst, src, count, kind, NULL))
                 : FC_VIA_DRV(!per_thread && kind == cudaMemcpyDeviceToHost, memcpy_dtoh,
                              (dst, (CUdeviceptr)src, count), COPY1D(true, dst, src, count, kind, NULL)))
FC_API_TWINS(cudaMemcpyAsync, _ptsz,
             (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
             COPY1D(false, dst, src, count, kind, stream))
FC_API_TWINS(cudaMemcpy2D, _ptds,
             (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
              enum cudaMemcpyKind kind),
             copy2d(__func__, NULL, per_thread, true, dst, dpitch, src, spitch, width, height, kind))
FC_API_TWINS(cudaMemcpy2DAsync, _ptsz,
             (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
              enum cudaMemcpyKind kind, cudaStream_t stream),
             copy2d(__func__, stream, per_thread, false, dst, dpitch, src, spitch, width, height, kind))

static cudaError_t peer_copy(const char *api, cudaStream_t hs, bool pt, bool sync, void *dst, int dst_dev,
                             const void *src, int src_dev, size_t count) {
  if (dst_dev < 0 || dst_dev >= fc_cfg.ndev || src_dev < 0 || src_dev >= fc_cfg.ndev) return cudaErrorInvalidDevice;
  peer_src = src_dev + 1, peer_dst = dst_dev + 1;
  cudaError_t r = copy2d(api, hs, pt, sync, dst, count, src, count, count, 1, cudaMemcpyDeviceToDevice);
  peer_src = peer_dst = 0;
  return r;
}

FC_API(cudaMemcpyPeer, (void *dst, int dstDevice, const void *src, int srcDevice, size_t count),
       peer_copy(__func__, NULL, false, true, dst, dstDevice, src, srcDevice, count))
FC_API(cudaMemcpyPeerAsync,
       (void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream),
       peer_copy(__func__, stream, false, false, dst, dstDevice, src, srcDevice, count))

/* For the driver stand-in only (fakedriver_xfer.c), which runs each driver call on one runtime entry
 * point: what NVIDIA's runtime has no call for. The peer copies' per-thread twins (cuMemcpyPeer_ptds,
 * cuMemcpyPeerAsync_ptsz) and cuMemsetD16/D32 and the 2D sets' elements of `elem` bytes. */
FC_API_TWINS(fakecuda_memcpyPeer, _ptds, (void *dst, int dstDevice, const void *src, int srcDevice, size_t count),
             peer_copy(__func__, NULL, per_thread, true, dst, dstDevice, src, srcDevice, count))
FC_API_TWINS(fakecuda_memcpyPeerAsync, _ptsz,
             (void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream),
             peer_copy(__func__, stream, per_thread, false, dst, dstDevice, src, srcDevice, count))
FC_API_TWINS(fakecuda_memsetD, _ptds,
             (void *dst, size_t pitch, unsigned value, unsigned elem, size_t width, size_t height),
             set_elems(__func__, NULL, per_thread, true, dst, pitch, (int)value, elem, width * elem, height))
FC_API_TWINS(fakecuda_memsetDAsync, _ptsz,
             (void *dst, size_t pitch, unsigned value, unsigned elem, size_t width, size_t height,
              cudaStream_t stream),
             set_elems(__func__, stream, per_thread, false, dst, pitch, (int)value, elem, width * elem, height))

FC_API_TWINS(cudaMemset, _ptds, (void *devPtr, int value, size_t count),
             FC_VIA_DRV(!per_thread, memset_d8, ((CUdeviceptr)devPtr, (unsigned char)value, count),
                        set2d(__func__, NULL, per_thread, true, devPtr, count, value, count, 1)))
FC_API_TWINS(cudaMemsetAsync, _ptsz, (void *devPtr, int value, size_t count, cudaStream_t stream),
             set2d(__func__, stream, per_thread, false, devPtr, count, value, count, 1))
FC_API_TWINS(cudaMemset2D, _ptds, (void *devPtr, size_t pitch, int value, size_t width, size_t height),
             set2d(__func__, NULL, per_thread, true, devPtr, pitch, value, width, height))
FC_API_TWINS(cudaMemset2DAsync, _ptsz,
             (void *devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream),
             set2d(__func__, stream, per_thread, false, devPtr, pitch, value, width, height))

/* ---- symbols ---- */

/* Address of [offset, offset + count) inside the variable, or NULL with *err set. */
static char *symbol_range(const void *symbol, size_t offset, size_t count, cudaError_t *err) {
  const struct fc_var *v = fc_var_lookup(symbol);
  if (!v) {
    *err = cudaErrorInvalidSymbol;
    return NULL;
  }
  if (offset > v->size || count > v->size - offset) {
    *err = cudaErrorInvalidValue;
    return NULL;
  }
  return v->host + offset;
}

static cudaError_t to_symbol(const char *api, cudaStream_t hs, bool pt, bool sync, const void *symbol,
                             const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind) {
  cudaError_t err = cudaSuccess;
  char *dst = symbol_range(symbol, offset, count, &err);
  if (!dst) return err;
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  return copy2d(api, hs, pt, sync, dst, count, src, count, count, 1, kind);
}

static cudaError_t from_symbol(const char *api, cudaStream_t hs, bool pt, bool sync, void *dst, const void *symbol,
                               size_t count, size_t offset, enum cudaMemcpyKind kind) {
  cudaError_t err = cudaSuccess;
  const char *src = symbol_range(symbol, offset, count, &err);
  if (!src) return err;
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  return copy2d(api, hs, pt, sync, dst, count, src, count, count, 1, kind);
}

FC_API_TWINS(cudaMemcpyToSymbol, _ptds,
             (const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind),
             to_symbol(__func__, NULL, per_thread, true, symbol, src, count, offset, kind))
FC_API_TWINS(cudaMemcpyToSymbolAsync, _ptsz,
             (const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind,
              cudaStream_t stream),
             to_symbol(__func__, stream, per_thread, false, symbol, src, count, offset, kind))
FC_API_TWINS(cudaMemcpyFromSymbol, _ptds,
             (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind),
             from_symbol(__func__, NULL, per_thread, true, dst, symbol, count, offset, kind))
FC_API_TWINS(cudaMemcpyFromSymbolAsync, _ptsz,
             (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,
              cudaStream_t stream),
             from_symbol(__func__, stream, per_thread, false, dst, symbol, count, offset, kind))

static cudaError_t symbol_address(void **out, const void *symbol) {
  cudaError_t err = cudaSuccess;
  char *p = out ? symbol_range(symbol, 0, 0, &err) : NULL;
  if (!out) return cudaErrorInvalidValue;
  if (p) *out = p;
  return err;
}

static cudaError_t symbol_size(size_t *out, const void *symbol) {
  const struct fc_var *v = fc_var_lookup(symbol);
  if (!out) return cudaErrorInvalidValue;
  if (!v) return cudaErrorInvalidSymbol;
  *out = v->size;
  return cudaSuccess;
}

FC_API(cudaGetSymbolAddress, (void **devPtr, const void *symbol), symbol_address(devPtr, symbol))
FC_API(cudaGetSymbolSize, (size_t *size, const void *symbol), symbol_size(size, symbol))
