/* inject/driver_copy_hooks.c — the CUDA driver API interposers for copies,
 * sets, synchronization and host functions, each with its
 * per-thread-default-stream twin (_ptsz / _ptds) where the driver has one,
 * one row each in collectors/api.h's SP_DRIVER_API_LIST, written as
 * cuda_driver events with the payload of their runtime equivalents: a copy's
 * bytes and cudaMemcpyKind (cuMemcpy / cuMemcpyAsync are unified-addressing
 * copies: Default, as cudaMemcpyDefault; cuMemcpy2D/3D take theirs from the
 * descriptor's memory types), a set's bytes (elements times their size) and
 * value, a wait's event. Peer copies name contexts, not devices: their
 * devices are recorded as unknown rather than asked of the driver on the
 * program's thread. Like the launches, these are reached from inside
 * runtime calls (NVIDIA's runtime copies and syncs through the driver), so
 * a nested call passes through unrecorded (SP_HOOK_NESTED). */
#include <cuda.h>

#define SP_HOOK_NESTED 1 /* called from inside the runtime's calls: hook.h SP_ASM_OPEN */
#include "driver_twins.h"
#include "hook.h"

#define P(x) SP_U64(x)

/* Copy kinds as collectors/api.h's COPY shape records them (cudaMemcpyKind). */
enum { H2D = 1, D2H = 2, D2D = 3, DEFAULT = 4 };

/* The cudaMemcpyKind of a copy between two CUmemorytypes (an array is on
 * the device; unified addressing lets the driver tell: Default). */
static inline uint64_t kind_of(CUmemorytype src, CUmemorytype dst)
{
    if (src == CU_MEMORYTYPE_UNIFIED || dst == CU_MEMORYTYPE_UNIFIED)
        return DEFAULT;
    return (src == CU_MEMORYTYPE_HOST ? 0 : D2H) + (dst == CU_MEMORYTYPE_HOST ? 0 : H2D);
}

/* The first byte a copy descriptor names (an array: its handle). */
static inline uint64_t first_byte(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr, size_t off)
{
    if (t == CU_MEMORYTYPE_ARRAY)
        return P(arr);
    return (t == CU_MEMORYTYPE_HOST ? P(host) : dev) + off;
}

#define FILL_COPY(e, c, bytes, soff, doff, s)                                                     \
    (sp_fill4(e, first_byte((c)->dstMemoryType, (c)->dstHost, (c)->dstDevice, (c)->dstArray, doff), bytes, \
              kind_of((c)->srcMemoryType, (c)->dstMemoryType), P(s)),                            \
     (e)->a[4] = first_byte((c)->srcMemoryType, (c)->srcHost, (c)->srcDevice, (c)->srcArray, soff))

static inline void fill_copy2d(sp_event_t *e, const CUDA_MEMCPY2D *c, CUstream s)
{
    if (c)
        FILL_COPY(e, c, (uint64_t)c->WidthInBytes * c->Height, c->srcY * c->srcPitch + c->srcXInBytes,
                  c->dstY * c->dstPitch + c->dstXInBytes, s);
    else
        e->a[3] = P(s);
}

static inline void fill_copy3d(sp_event_t *e, const CUDA_MEMCPY3D *c, CUstream s)
{
    if (c)
        FILL_COPY(e, c, (uint64_t)c->WidthInBytes * c->Height * c->Depth,
                  (c->srcZ * c->srcHeight + c->srcY) * c->srcPitch + c->srcXInBytes,
                  (c->dstZ * c->dstHeight + c->dstY) * c->dstPitch + c->dstXInBytes, s);
    else
        e->a[3] = P(s);
}

#define HTOD_HOOKS(sym)                                                                           \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, const void *h, size_t n), (d, h, n),             \
                 (sp_fill4(e, d, n, H2D, 0), e->a[4] = P(h)))
HTOD_HOOKS(cuMemcpyHtoD_v2)
HTOD_HOOKS(cuMemcpyHtoD_v2_ptds)
#define DTOH_HOOKS(sym)                                                                           \
    SP_INTERPOSE(CUresult, sym, (void *h, CUdeviceptr d, size_t n), (h, d, n),                   \
                 (sp_fill4(e, P(h), n, D2H, 0), e->a[4] = d))
DTOH_HOOKS(cuMemcpyDtoH_v2)
DTOH_HOOKS(cuMemcpyDtoH_v2_ptds)
#define HTOD_ASYNC_HOOKS(sym)                                                                     \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, const void *h, size_t n, CUstream s), (d, h, n, s), \
                 (sp_fill4(e, d, n, H2D, P(s)), e->a[4] = P(h)))
HTOD_ASYNC_HOOKS(cuMemcpyHtoDAsync_v2)
HTOD_ASYNC_HOOKS(cuMemcpyHtoDAsync_v2_ptsz)
#define DTOH_ASYNC_HOOKS(sym)                                                                     \
    SP_INTERPOSE(CUresult, sym, (void *h, CUdeviceptr d, size_t n, CUstream s), (h, d, n, s),    \
                 (sp_fill4(e, P(h), n, D2H, P(s)), e->a[4] = d))
DTOH_ASYNC_HOOKS(cuMemcpyDtoHAsync_v2)
DTOH_ASYNC_HOOKS(cuMemcpyDtoHAsync_v2_ptsz)

/* Device to device by address: cuMemcpyDtoD (D2D) and cuMemcpy (DEFAULT). */
#define DTOD_HOOKS(sym, kind)                                                                     \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, CUdeviceptr src, size_t n), (d, src, n),          \
                 (sp_fill4(e, d, n, kind, 0), e->a[4] = src))
DTOD_HOOKS(cuMemcpy, DEFAULT)
DTOD_HOOKS(cuMemcpy_ptds, DEFAULT)
DTOD_HOOKS(cuMemcpyDtoD_v2, D2D)
DTOD_HOOKS(cuMemcpyDtoD_v2_ptds, D2D)
#define DTOD_ASYNC_HOOKS(sym, kind)                                                               \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s), (d, src, n, s), \
                 (sp_fill4(e, d, n, kind, P(s)), e->a[4] = src))
DTOD_ASYNC_HOOKS(cuMemcpyAsync, DEFAULT)
DTOD_ASYNC_HOOKS(cuMemcpyAsync_ptsz, DEFAULT)
DTOD_ASYNC_HOOKS(cuMemcpyDtoDAsync_v2, D2D)
DTOD_ASYNC_HOOKS(cuMemcpyDtoDAsync_v2_ptsz, D2D)

#define PEER_HOOKS(sym)                                                                           \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n), \
                 (d, dc, src, sc, n), (sp_fill4(e, d, n, SP_COPY_PEER, 0), e->a[4] = src, e->aux = SP_PEER_UNKNOWN))
PEER_HOOKS(cuMemcpyPeer)
PEER_HOOKS(cuMemcpyPeer_ptds)
#define PEER_ASYNC_HOOKS(sym)                                                                     \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s), \
                 (d, dc, src, sc, n, s),                                                          \
                 (sp_fill4(e, d, n, SP_COPY_PEER, P(s)), e->a[4] = src, e->aux = SP_PEER_UNKNOWN))
PEER_ASYNC_HOOKS(cuMemcpyPeerAsync)
PEER_ASYNC_HOOKS(cuMemcpyPeerAsync_ptsz)

#define COPY2D_HOOKS(sym) SP_INTERPOSE(CUresult, sym, (const CUDA_MEMCPY2D *c), (c), fill_copy2d(e, c, 0))
COPY2D_HOOKS(cuMemcpy2D_v2)
COPY2D_HOOKS(cuMemcpy2D_v2_ptds)
#define COPY2D_ASYNC_HOOKS(sym) \
    SP_INTERPOSE(CUresult, sym, (const CUDA_MEMCPY2D *c, CUstream s), (c, s), fill_copy2d(e, c, s))
COPY2D_ASYNC_HOOKS(cuMemcpy2DAsync_v2)
COPY2D_ASYNC_HOOKS(cuMemcpy2DAsync_v2_ptsz)
#define COPY3D_HOOKS(sym) SP_INTERPOSE(CUresult, sym, (const CUDA_MEMCPY3D *c), (c), fill_copy3d(e, c, 0))
COPY3D_HOOKS(cuMemcpy3D_v2)
COPY3D_HOOKS(cuMemcpy3D_v2_ptds)
#define COPY3D_ASYNC_HOOKS(sym) \
    SP_INTERPOSE(CUresult, sym, (const CUDA_MEMCPY3D *c, CUstream s), (c, s), fill_copy3d(e, c, s))
COPY3D_ASYNC_HOOKS(cuMemcpy3DAsync_v2)
COPY3D_ASYNC_HOOKS(cuMemcpy3DAsync_v2_ptsz)

/* cuMemsetD8/16/32: n elements of `type`, recorded in bytes as cudaMemset's. */
#define SET_HOOKS(sym, type)                                                                      \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, type v, size_t n), (d, v, n),                     \
                 sp_fill4(e, d, (uint64_t)n * sizeof(type), v, 0))
SET_HOOKS(cuMemsetD8_v2, unsigned char)
SET_HOOKS(cuMemsetD8_v2_ptds, unsigned char)
SET_HOOKS(cuMemsetD16_v2, unsigned short)
SET_HOOKS(cuMemsetD16_v2_ptds, unsigned short)
SET_HOOKS(cuMemsetD32_v2, unsigned int)
SET_HOOKS(cuMemsetD32_v2_ptds, unsigned int)
#define SET_ASYNC_HOOKS(sym, type)                                                                \
    SP_INTERPOSE(CUresult, sym, (CUdeviceptr d, type v, size_t n, CUstream s), (d, v, n, s),      \
                 sp_fill4(e, d, (uint64_t)n * sizeof(type), v, P(s)))
SET_ASYNC_HOOKS(cuMemsetD8Async, unsigned char)
SET_ASYNC_HOOKS(cuMemsetD8Async_ptsz, unsigned char)
SET_ASYNC_HOOKS(cuMemsetD16Async, unsigned short)
SET_ASYNC_HOOKS(cuMemsetD16Async_ptsz, unsigned short)
SET_ASYNC_HOOKS(cuMemsetD32Async, unsigned int)
SET_ASYNC_HOOKS(cuMemsetD32Async_ptsz, unsigned int)

#define HOSTFN_HOOKS(sym)                                                                         \
    SP_INTERPOSE(CUresult, sym, (CUstream s, CUhostFn fn, void *ud), (s, fn, ud), sp_fill4(e, P(fn), 0, 0, P(s)))
HOSTFN_HOOKS(cuLaunchHostFunc)
HOSTFN_HOOKS(cuLaunchHostFunc_ptsz)
#define WAIT_EVENT_HOOKS(sym)                                                                     \
    SP_INTERPOSE(CUresult, sym, (CUstream s, CUevent ev, unsigned int fl), (s, ev, fl),          \
                 sp_fill4(e, P(ev), 0, fl, P(s)))
WAIT_EVENT_HOOKS(cuStreamWaitEvent)
WAIT_EVENT_HOOKS(cuStreamWaitEvent_ptsz)
SP_INTERPOSE(CUresult, cuEventSynchronize, (CUevent ev), (ev), sp_fill4(e, P(ev), 0, 0, 0))
SP_INTERPOSE(CUresult, cuCtxSynchronize, (void), (), (void)0)
/* CUDA 13's, what cuGetProcAddress hands out for "cuCtxSynchronize" asked at 13000 (older versions get
 * the one above); its context is not recorded: the SYNC shape has no place for one. */
SP_INTERPOSE(CUresult, cuCtxSynchronize_v2, (CUcontext ctx), (ctx), (void)0)
#define STREAM_SYNC_HOOKS(sym) SP_INTERPOSE(CUresult, sym, (CUstream s), (s), sp_fill4(e, 0, 0, 0, P(s)))
STREAM_SYNC_HOOKS(cuStreamSynchronize)
STREAM_SYNC_HOOKS(cuStreamSynchronize_ptsz)
