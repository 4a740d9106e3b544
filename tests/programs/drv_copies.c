/*
 * drv_copies.c — the driver API's copies, sets, host / managed / pitched / pool allocations, event
 * syncs, stream waits and host functions, as JAX/XLA, CuPy, Numba and a static cudart make them
 * (tests/test_driver_copies.py). Prints `NAME=RESULT` per call, in call order, then what the copies
 * and sets left (`check=...`) and how often the host function ran; exit status 0 when every call
 * that should succeed did. One call fails on purpose: cuMemAllocPitch with a 3-byte element
 * (CUDA_ERROR_INVALID_VALUE, printed as `cuMemAllocPitch(3)=1`). Where the entry points come from
 * (argv[1]):
 *   direct   the program's own imports of libcuda.so.1 (cuda.h's names)
 *   proc     dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2"), then cuGetProcAddress by base name
 *            (with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM in the per-thread build)
 *   dlsym    dlopen("libcuda.so.1") + dlsym of each exported name (cuda.h's spelling: cuMemcpyDtoD_v2,
 *            cuMemcpyDtoD_v2_ptds in the per-thread build)
 * DRV_DEVICE=N works on device N (its primary context made current) instead of 0.
 * Built twice (loading.mk): drv_copies and drv_copies_pt (-DCUDA_API_PER_THREAD_DEFAULT_STREAM, where
 * cuda.h turns every name into its per-thread twin: cuMemcpy_ptds, cuMemsetD32Async_ptsz, ...).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef cuGetProcAddress
enum { N = 4096, W = 100, H = 4 };

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PROC_FLAGS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#else
#define PROC_FLAGS CU_GET_PROC_ADDRESS_DEFAULT
#endif

/* One driver entry point: its base name (what cuGetProcAddress is asked), its exported name as cuda.h
 * spells it in this build, and the program's own import of it. */
#define STR_(x) #x
#define STR(x) STR_(x)
#define FNS(X)                                                                                            \
    X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuMemAlloc) X(cuMemFree)    \
    X(cuMemcpyDtoH) X(cuMemAllocHost) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemAllocManaged)            \
    X(cuMemAllocPitch) X(cuDeviceGetDefaultMemPool) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync)          \
    X(cuMemcpy) X(cuMemcpyAsync) X(cuMemcpyDtoD) X(cuMemcpyDtoDAsync) X(cuMemcpyPeer) X(cuMemcpyPeerAsync) \
    X(cuMemcpy2D) X(cuMemcpy2DAsync) X(cuMemcpy3D) X(cuMemcpy3DAsync) X(cuMemsetD8Async) X(cuMemsetD16)    \
    X(cuMemsetD16Async) X(cuMemsetD32) X(cuMemsetD32Async) X(cuEventCreate) X(cuEventRecord)              \
    X(cuStreamWaitEvent) X(cuEventSynchronize) X(cuLaunchHostFunc) X(cuStreamSynchronize) X(cuEventDestroy)

static struct {
#define SLOT(f) __typeof__(f) *f##_;
    FNS(SLOT)
#undef SLOT
} cu;

static const struct {
    const char *base, *exported;
    void **slot;
} table[] = {
#define ROW(f) {#f, STR(f), (void **)&cu.f##_},
    FNS(ROW)
#undef ROW
};

static int fill(const char *mode)
{
    if (!strcmp(mode, "direct")) {
#define LINK(f) cu.f##_ = f;
        FNS(LINK)
#undef LINK
        return 0;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    gpa_fn gpa = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return -1;
    int bad = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        CUdriverProcAddressQueryResult st;
        if (!strcmp(mode, "proc"))
            bad |= gpa(table[i].base, table[i].slot, CUDA_VERSION, PROC_FLAGS, &st) != CUDA_SUCCESS;
        else
            *table[i].slot = dlsym(h, table[i].exported);
        if (!*table[i].slot) {
            fprintf(stderr, "drv_copies: no %s (%s)\n", table[i].base, table[i].exported);
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}

static int failed;

static void show(const char *name, CUresult r)
{
    printf("%s=%d\n", name, (int)r);
    failed |= r != CUDA_SUCCESS;
}

#define RUN(f, ...) show(#f, cu.f##_(__VA_ARGS__))

static void CUDA_CB count_call(void *p)
{
    ++*(int *)p;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "direct";
    if (fill(mode) != 0) {
        fprintf(stderr, "drv_copies: no driver entry points for mode %s\n", mode);
        return 1;
    }
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CUdeviceptr d = 0, d2 = 0, m = 0, pd = 0, pa = 0, bad = 0;
    void *ph = NULL, *ph2 = NULL;
    size_t pitch = 0, bad_pitch = 0;
    CUmemoryPool pool = NULL;
    CUevent ev = NULL;
    int ran = 0;
    RUN(cuInit, 0);
    const char *ord = getenv("DRV_DEVICE"); /* the device to work on (default 0) */
    RUN(cuDeviceGet, &dev, ord ? atoi(ord) : 0);
    RUN(cuDevicePrimaryCtxRetain, &ctx, dev);
    RUN(cuCtxSetCurrent, ctx);
    RUN(cuMemAlloc, &d, N);
    RUN(cuMemAlloc, &d2, N);
    RUN(cuMemAllocHost, &ph, N);
    RUN(cuMemHostAlloc, &ph2, N, CU_MEMHOSTALLOC_PORTABLE);
    RUN(cuMemAllocManaged, &m, N, CU_MEM_ATTACH_GLOBAL);
    RUN(cuMemAllocPitch, &pd, &pitch, W, H, 4);
    printf("cuMemAllocPitch(3)=%d\n", (int)cu.cuMemAllocPitch_(&bad, &bad_pitch, W, H, 3));
    RUN(cuDeviceGetDefaultMemPool, &pool, dev);
    RUN(cuMemAllocFromPoolAsync, &pa, N, pool, NULL);

    memset(ph, 0x5a, N);
    CUDA_MEMCPY2D up = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = ph, .srcPitch = W,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = pd, .dstPitch = pitch,
                        .WidthInBytes = W, .Height = H};
    CUDA_MEMCPY2D down = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = pd, .srcPitch = pitch,
                          .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = ph2, .dstPitch = W,
                          .WidthInBytes = W, .Height = H};
    CUDA_MEMCPY3D cube = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = 64, .srcHeight = 4,
                          .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d2, .dstPitch = 64, .dstHeight = 4,
                          .WidthInBytes = 64, .Height = 4, .Depth = 2};
    CUDA_MEMCPY3D unified = {.srcMemoryType = CU_MEMORYTYPE_UNIFIED, .srcDevice = m, .srcPitch = 64,
                             .srcHeight = 4, .dstMemoryType = CU_MEMORYTYPE_UNIFIED, .dstDevice = d,
                             .dstPitch = 64, .dstHeight = 4, .WidthInBytes = 64, .Height = 4, .Depth = 2};
    RUN(cuMemcpy2D, &up);
    RUN(cuMemcpy2DAsync, &down, NULL);
    RUN(cuMemsetD32, d, 7, N / 4);
    RUN(cuMemcpy, d2, d, N);
    RUN(cuMemcpyAsync, m, d2, N, NULL);
    RUN(cuMemcpyDtoD, d2, d, N);
    RUN(cuMemcpyDtoDAsync, d2, d, N, NULL);
    RUN(cuMemcpyPeer, d2, ctx, d, ctx, N);
    RUN(cuMemcpyPeerAsync, d2, ctx, d, ctx, N, NULL);
    RUN(cuMemcpy3D, &cube);
    RUN(cuMemcpy3DAsync, &unified, NULL);
    unsigned words[2] = {0, 0};
    RUN(cuMemcpyDtoH, words, d2, sizeof words);
    RUN(cuMemsetD8Async, d, 1, N, NULL);
    RUN(cuMemsetD16, d, 0x0102, N / 2);
    RUN(cuMemsetD16Async, d, 0x0304, N / 2, NULL);
    RUN(cuMemsetD32Async, d, 0x85060708u, N / 4, NULL);   /* above INT_MAX: drawn unsigned */

    RUN(cuEventCreate, &ev, CU_EVENT_DEFAULT);
    RUN(cuEventRecord, ev, NULL);
    RUN(cuStreamWaitEvent, NULL, ev, 0);
    RUN(cuEventSynchronize, ev);
    RUN(cuLaunchHostFunc, NULL, count_call, &ran);
    RUN(cuStreamSynchronize, NULL);
    RUN(cuEventDestroy, ev);
    unsigned last = 0;
    RUN(cuMemcpyDtoH, &last, d, sizeof last);
    printf("check=%u,%u pinned=%d last=%#x hostfn=%d\n", words[0], words[1], ((unsigned char *)ph2)[W - 1], last,
           ran);

    RUN(cuMemFreeAsync, pa, NULL);
    RUN(cuMemFree, pd);
    RUN(cuMemFree, m);
    RUN(cuMemFree, d2);
    RUN(cuMemFree, d);
    RUN(cuMemFreeHost, ph2);
    RUN(cuMemFreeHost, ph);
    return failed;
}
