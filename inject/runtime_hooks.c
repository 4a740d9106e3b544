/* inject/runtime_hooks.c — the CUDA runtime interposers: one SP_INTERPOSE line
 * per entry point of collectors/api.h (launches, allocations, copies, sets,
 * synchronization, profiler start/stop), each spelling with its _ptsz / _ptds
 * twin, plus the kernel-name registration hooks (__cudaRegisterFunction,
 * __cudaGetKernel), which feed the registry even before activation, and
 * cudaSetDevice, which tells the memory collector each thread's device. The
 * allocation interposers also feed the memory collector (hook.h
 * SP_INTERPOSE_MEM). Signatures come from the toolkit's cuda_runtime_api.h so
 * the compiler checks them; the twins and the nvcc-internal entry points are
 * declared here because the C headers only declare them for C++ or
 * per-thread builds. */
#include <cuda_runtime_api.h>

#include "../collectors/kernels.h"
#include "cudacopies.h"
#include "hook.h"
#include "markers.h"

cudaError_t cudaLaunchKernel_ptsz(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *, const void *, void **);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t, cudaStream_t);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t, cudaHostFn_t, void *);
cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMemcpy2D_ptds(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpy2DAsync_ptsz(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind,
                                   cudaStream_t);
cudaError_t cudaMemset_ptds(void *, int, size_t);
cudaError_t cudaMemsetAsync_ptsz(void *, int, size_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t, cudaEvent_t, unsigned int);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t __cudaGetKernel(cudaKernel_t *, const void *);
void __cudaRegisterFunction(void **, const char *, char *, const char *, int, uint3 *, uint3 *, dim3 *, dim3 *,
                            int *);

static inline void fill_launch(sp_event_t *e, const void *f, dim3 g, dim3 b, size_t shm, cudaStream_t s)
{
    e->a[0] = (uint64_t)(uintptr_t)f;
    e->a[1] = g.x | (uint64_t)g.y << 32;
    e->a[2] = b.x | (uint64_t)b.y << 32;
    e->a[3] = (uint64_t)(uintptr_t)s;
    e->a[4] = g.z | (uint64_t)b.z << 32;
    e->aux = (uint32_t)shm;
}

static inline void fill_launch_ex(sp_event_t *e, const cudaLaunchConfig_t *c, const void *f)
{
    if (c)
        fill_launch(e, f, c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream);
    else
        e->a[0] = (uint64_t)(uintptr_t)f;
}

static inline uint32_t peer_devices(int dst, int src)
{
    return (uint32_t)(dst & 0xffff) | (uint32_t)(src & 0xffff) << 16;
}

#define P(x) SP_U64(x)

#define LAUNCH_HOOKS(sym)                                                                         \
    SP_INTERPOSE_GATED(cudaError_t, sym, (const void *f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s), \
                       (f, g, b, args, shm, s), f, 0, rdi, sp_launch_end_clock, fill_launch(e, f, g, b, shm, s))
LAUNCH_HOOKS(cudaLaunchKernel)
LAUNCH_HOOKS(cudaLaunchKernel_ptsz)
LAUNCH_HOOKS(cudaLaunchCooperativeKernel)
LAUNCH_HOOKS(cudaLaunchCooperativeKernel_ptsz)

#define KLAUNCH_HOOKS(sym)                                                                        \
    SP_INTERPOSE_GATED(cudaError_t, sym, (cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s), \
                       (k, g, b, args, shm, s), k, 1, rdi, sp_launch_end_clock, fill_launch(e, k, g, b, shm, s))
KLAUNCH_HOOKS(__cudaLaunchKernel)
KLAUNCH_HOOKS(__cudaLaunchKernel_ptsz)

#define LAUNCH_EX_HOOKS(sym)                                                                      \
    SP_INTERPOSE_GATED(cudaError_t, sym, (const cudaLaunchConfig_t *c, const void *f, void **args), (c, f, args), \
                       f, 0, rsi, sp_launch_end_clock, fill_launch_ex(e, c, f))
LAUNCH_EX_HOOKS(cudaLaunchKernelExC)
LAUNCH_EX_HOOKS(cudaLaunchKernelExC_ptsz)

#define GRAPH_HOOKS(sym) \
    SP_INTERPOSE(cudaError_t, sym, (cudaGraphExec_t g, cudaStream_t s), (g, s), sp_fill4(e, P(g), 0, 0, P(s)))
GRAPH_HOOKS(cudaGraphLaunch)
GRAPH_HOOKS(cudaGraphLaunch_ptsz)

#define HOSTFN_HOOKS(sym)                                                                       \
    SP_INTERPOSE(cudaError_t, sym, (cudaStream_t s, cudaHostFn_t fn, void *ud), (s, fn, ud),   \
                 sp_fill4(e, P(fn), 0, 0, P(s)))
HOSTFN_HOOKS(cudaLaunchHostFunc)
HOSTFN_HOOKS(cudaLaunchHostFunc_ptsz)

/* Allocations and frees also feed the memory collector (profile_memory),
 * which hands back a free's size for the FREE record's a[1]. */
#define ALLOC_HOOK(...) SP_ALLOC_HOOK(cudaError_t, __VA_ARGS__)
#define FREE_HOOK(...) SP_FREE_HOOK(cudaError_t, __VA_ARGS__)
#define PITCH (r == cudaSuccess && pitch ? *pitch : 0)

ALLOC_HOOK(cudaMalloc, (void **p, size_t n), (p, n), p, n, 0, 0, SP_MEM_DEVICE)
ALLOC_HOOK(cudaMallocHost, (void **p, size_t n), (p, n), p, n, 0, 0, SP_MEM_PINNED)
ALLOC_HOOK(cudaHostAlloc, (void **p, size_t n, unsigned int fl), (p, n, fl), p, n, fl, 0, SP_MEM_PINNED)
ALLOC_HOOK(cudaMallocManaged, (void **p, size_t n, unsigned int fl), (p, n, fl), p, n, fl, 0, SP_MEM_MANAGED)
ALLOC_HOOK(cudaMallocPitch, (void **p, size_t *pitch, size_t wd, size_t h), (p, pitch, wd, h), p,
           (PITCH ? PITCH : wd) * h, PITCH, 0, SP_MEM_DEVICE)
#define MALLOC_ASYNC_HOOKS(sym) \
    ALLOC_HOOK(sym, (void **p, size_t n, cudaStream_t s), (p, n, s), p, n, 0, s, SP_MEM_DEVICE)
MALLOC_ASYNC_HOOKS(cudaMallocAsync)
MALLOC_ASYNC_HOOKS(cudaMallocAsync_ptsz)

FREE_HOOK(cudaFree, (void *p), (p), p, 0)
FREE_HOOK(cudaFreeHost, (void *p), (p), p, 0)
#define FREE_ASYNC_HOOKS(sym) FREE_HOOK(sym, (void *p, cudaStream_t s), (p, s), p, s)
FREE_ASYNC_HOOKS(cudaFreeAsync)
FREE_ASYNC_HOOKS(cudaFreeAsync_ptsz)

#define COPY_HOOKS(sym)                                                                         \
    SP_INTERPOSE(cudaError_t, sym, (void *d, const void *src, size_t n, enum cudaMemcpyKind k), (d, src, n, k), \
                 (sp_fill4(e, P(d), n, (uint64_t)k, 0), e->a[4] = P(src)))
COPY_HOOKS(cudaMemcpy)
COPY_HOOKS(cudaMemcpy_ptds)
#define COPY_ASYNC_HOOKS(sym)                                                                   \
    SP_INTERPOSE(cudaError_t, sym, (void *d, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s), \
                 (d, src, n, k, s), (sp_fill4(e, P(d), n, (uint64_t)k, P(s)), e->a[4] = P(src)))
COPY_ASYNC_HOOKS(cudaMemcpyAsync)
COPY_ASYNC_HOOKS(cudaMemcpyAsync_ptsz)
#define COPY2D_HOOKS(sym)                                                                       \
    SP_INTERPOSE(cudaError_t, sym,                                                              \
                 (void *d, size_t dp, const void *src, size_t sp, size_t wd, size_t h, enum cudaMemcpyKind k), \
                 (d, dp, src, sp, wd, h, k), (sp_fill4(e, P(d), wd * h, (uint64_t)k, 0), e->a[4] = P(src)))
COPY2D_HOOKS(cudaMemcpy2D)
COPY2D_HOOKS(cudaMemcpy2D_ptds)
#define COPY2D_ASYNC_HOOKS(sym)                                                                 \
    SP_INTERPOSE(cudaError_t, sym,                                                              \
                 (void *d, size_t dp, const void *src, size_t sp, size_t wd, size_t h, enum cudaMemcpyKind k, \
                  cudaStream_t s),                                                              \
                 (d, dp, src, sp, wd, h, k, s), (sp_fill4(e, P(d), wd * h, (uint64_t)k, P(s)), e->a[4] = P(src)))
COPY2D_ASYNC_HOOKS(cudaMemcpy2DAsync)
COPY2D_ASYNC_HOOKS(cudaMemcpy2DAsync_ptsz)
SP_INTERPOSE(cudaError_t, cudaMemcpyPeer, (void *d, int dd, const void *src, int sd, size_t n), (d, dd, src, sd, n),
             (sp_fill4(e, P(d), n, SP_COPY_PEER, 0), e->a[4] = P(src), e->aux = peer_devices(dd, sd)))
SP_INTERPOSE(cudaError_t, cudaMemcpyPeerAsync, (void *d, int dd, const void *src, int sd, size_t n, cudaStream_t s),
             (d, dd, src, sd, n, s),
             (sp_fill4(e, P(d), n, SP_COPY_PEER, P(s)), e->a[4] = P(src), e->aux = peer_devices(dd, sd)))

#define SET_HOOKS(sym) \
    SP_INTERPOSE(cudaError_t, sym, (void *p, int v, size_t n), (p, v, n), sp_fill4(e, P(p), n, (uint64_t)v, 0))
SET_HOOKS(cudaMemset)
SET_HOOKS(cudaMemset_ptds)
#define SET_ASYNC_HOOKS(sym)                                                                    \
    SP_INTERPOSE(cudaError_t, sym, (void *p, int v, size_t n, cudaStream_t s), (p, v, n, s),   \
                 sp_fill4(e, P(p), n, (uint64_t)v, P(s)))
SET_ASYNC_HOOKS(cudaMemsetAsync)
SET_ASYNC_HOOKS(cudaMemsetAsync_ptsz)

SP_INTERPOSE(cudaError_t, cudaDeviceSynchronize, (void), (), (void)0)
#define STREAM_SYNC_HOOKS(sym) \
    SP_INTERPOSE(cudaError_t, sym, (cudaStream_t s), (s), sp_fill4(e, 0, 0, 0, P(s)))
STREAM_SYNC_HOOKS(cudaStreamSynchronize)
STREAM_SYNC_HOOKS(cudaStreamSynchronize_ptsz)
SP_INTERPOSE(cudaError_t, cudaEventSynchronize, (cudaEvent_t ev), (ev), sp_fill4(e, P(ev), 0, 0, 0))
#define WAIT_EVENT_HOOKS(sym)                                                                   \
    SP_INTERPOSE(cudaError_t, sym, (cudaStream_t s, cudaEvent_t ev, unsigned int fl), (s, ev, fl), \
                 sp_fill4(e, P(ev), 0, fl, P(s)))
WAIT_EVENT_HOOKS(cudaStreamWaitEvent)
WAIT_EVENT_HOOKS(cudaStreamWaitEvent_ptsz)

SP_INTERPOSE_EX(cudaError_t, cudaProfilerStart, (void), (), sp_mark_profiler_wanted(), sp_mark_profiler_api(1, &w),
                (void)0)
SP_INTERPOSE_EX(cudaError_t, cudaProfilerStop, (void), (), sp_mark_profiler_wanted(), sp_mark_profiler_api(0, &w),
                (void)0)

/* Not an event either: the memory collector's per-thread current device,
 * which names the device of each allocation without a runtime call of ours
 * (CUPTI would record it in the program's trace). */
SP_REAL_FN(cudaError_t, cudaSetDevice, (int device), (device))
SP_EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t r = real_cudaSetDevice(device);
    if (r == cudaSuccess)
        sp_mem_set_device(device);
    return r;
}

/* Registration is not an event: it must work before activation (it runs in
 * constructors) and in processes that never open the gate. */
typedef void (*register_fn)(void **, const char *, char *, const char *, int, uint3 *, uint3 *, dim3 *, dim3 *,
                            int *);
SP_EXPORT void __cudaRegisterFunction(void **fatbin, const char *host_fun, char *device_fun, const char *device_name,
                                      int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    static register_fn real;
    if (!real)
        real = (register_fn)sp_real("__cudaRegisterFunction");
    /* A plugin's constructor registering with its own runtime copy, inside
     * dlopen: this call and its later ones go to that copy (cudacopies.c). */
    sp_copies_check();
    register_fn to = (register_fn)sp_copies_target(__builtin_return_address(0), "__cudaRegisterFunction",
                                                   (void *)real);
    sp_kern_register(host_fun, device_fun ? device_fun : device_name);
    sp_mark_forget(host_fun);
    if (to)
        to(fatbin, host_fun, device_fun, device_name, thread_limit, tid, bid, bdim, gdim, wsize);
}

SP_REAL_FN(cudaError_t, __cudaGetKernel, (cudaKernel_t * handle, const void *host_fun), (handle, host_fun))
SP_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *handle, const void *host_fun)
{
    cudaError_t r = real___cudaGetKernel(handle, host_fun);
    if (r == cudaSuccess && handle) {
        sp_kern_map_handle(*handle, host_fun);
        sp_mark_forget(*handle);
    }
    return r;
}
