/* collectors/api.h — the table of interposed CUDA runtime entry points: one
 * row per symbol with its CUPTI runtime callback id (cupti_runtime_cbid.h,
 * CUDA 13.0) and its shape, then the driver API's (SP_DRIVER_API_LIST, CUPTI
 * driver callback ids from cupti_driver_cbid.h, written as cuda_driver), which says what the record's payload holds and
 * how the exporter prints it. Interposers (inject/) and exporters share it so
 * a symbol is named in exactly one place. */
#ifndef SP_API_H
#define SP_API_H

#include <stdint.h>

enum sp_api_shape {
    SP_SHAPE_LAUNCH,     /* a[0]=func a[1]=grid.x|y<<32 a[2]=block.x|y<<32 a[3]=stream
                            a[4]=grid.z|block.z<<32 aux=dynamic shared memory */
    SP_SHAPE_KLAUNCH,    /* same, a[0] is a cudaKernel_t from __cudaGetKernel */
    SP_SHAPE_GRAPH,      /* a[0]=graph exec a[3]=stream */
    SP_SHAPE_HOSTFN,     /* a[0]=host fn a[3]=stream */
    SP_SHAPE_ALLOC,      /* a[0]=returned ptr a[1]=bytes a[2]=flags/pitch a[3]=stream */
    SP_SHAPE_FREE,       /* a[0]=ptr a[1]=bytes freed (profile_memory; 0 when unknown) a[3]=stream */
    SP_SHAPE_COPY,       /* a[0]=dst a[1]=bytes a[2]=kind (SP_COPY_PEER for peer) a[3]=stream a[4]=src
                            aux=dst device|src device<<16 (peer; SP_PEER_UNKNOWN where
                            the call names contexts, as the driver's do) */
    SP_SHAPE_SET,        /* a[0]=ptr a[1]=bytes a[2]=value a[3]=stream */
    SP_SHAPE_SYNC,       /* a[0]=event (if any) a[3]=stream */
    SP_SHAPE_PLAIN,      /* no payload */
};

/* Copy kind recorded for cudaMemcpyPeer*, which take no cudaMemcpyKind. */
#define SP_COPY_PEER 100
#define SP_PEER_UNKNOWN 0xffffffffu

/* X(symbol, cbid, shape, takes a stream argument); the cbid is the one CUPTI records the call
 * with: __cudaLaunchKernel(_ptsz) as cudaLaunchKernel(_ptsz), seen on an H200 (CUDA 13.0) */
#define SP_API_LIST(X)                                         \
    X(cudaLaunchKernel, 211, LAUNCH, 1)                           \
    X(cudaLaunchKernel_ptsz, 214, LAUNCH, 1)                      \
    X(__cudaLaunchKernel, 211, KLAUNCH, 1)                        \
    X(__cudaLaunchKernel_ptsz, 214, KLAUNCH, 1)                   \
    X(cudaLaunchKernelExC, 430, LAUNCH, 1)                        \
    X(cudaLaunchKernelExC_ptsz, 431, LAUNCH, 1)                   \
    X(cudaLaunchCooperativeKernel, 269, LAUNCH, 1)                \
    X(cudaLaunchCooperativeKernel_ptsz, 270, LAUNCH, 1)           \
    X(cudaGraphLaunch, 311, GRAPH, 1)                             \
    X(cudaGraphLaunch_ptsz, 312, GRAPH, 1)                        \
    X(cudaLaunchHostFunc, 284, HOSTFN, 1)                         \
    X(cudaLaunchHostFunc_ptsz, 285, HOSTFN, 1)                    \
    X(cudaMalloc, 20, ALLOC, 0)                                   \
    X(cudaMallocAsync, 373, ALLOC, 1)                             \
    X(cudaMallocAsync_ptsz, 374, ALLOC, 1)                        \
    X(cudaMallocHost, 25, ALLOC, 0)                               \
    X(cudaHostAlloc, 27, ALLOC, 0)                                \
    X(cudaMallocManaged, 206, ALLOC, 0)                           \
    X(cudaMallocPitch, 21, ALLOC, 0)                              \
    X(cudaFree, 22, FREE, 0)                                      \
    X(cudaFreeAsync, 375, FREE, 1)                                \
    X(cudaFreeAsync_ptsz, 376, FREE, 1)                           \
    X(cudaFreeHost, 26, FREE, 0)                                  \
    X(cudaMemcpy, 31, COPY, 0)                                    \
    X(cudaMemcpy_ptds, 215, COPY, 0)                              \
    X(cudaMemcpyAsync, 41, COPY, 1)                               \
    X(cudaMemcpyAsync_ptsz, 225, COPY, 1)                         \
    X(cudaMemcpy2D, 32, COPY, 0)                                  \
    X(cudaMemcpy2D_ptds, 216, COPY, 0)                            \
    X(cudaMemcpy2DAsync, 44, COPY, 1)                             \
    X(cudaMemcpy2DAsync_ptsz, 228, COPY, 1)                       \
    X(cudaMemcpyPeer, 160, COPY, 0)                               \
    X(cudaMemcpyPeerAsync, 161, COPY, 1)                          \
    X(cudaMemset, 49, SET, 0)                                     \
    X(cudaMemset_ptds, 233, SET, 0)                               \
    X(cudaMemsetAsync, 51, SET, 1)                                \
    X(cudaMemsetAsync_ptsz, 235, SET, 1)                          \
    X(cudaDeviceSynchronize, 165, SYNC, 0)                        \
    X(cudaStreamSynchronize, 131, SYNC, 1)                        \
    X(cudaStreamSynchronize_ptsz, 239, SYNC, 1)                   \
    X(cudaEventSynchronize, 137, SYNC, 0)                         \
    X(cudaStreamWaitEvent, 147, SYNC, 1)                          \
    X(cudaStreamWaitEvent_ptsz, 247, SYNC, 1)                     \
    X(cudaProfilerStart, 171, PLAIN, 0)                           \
    X(cudaProfilerStop, 172, PLAIN, 0)

/* DRV(symbol, driver cbid, shape, takes a stream argument), each with the
 * per-thread-default-stream twin cuda.h maps it to under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (_ptsz / _ptds), where the driver has one */
#define SP_DRIVER_API_LIST(DRV)                                \
    DRV(cuLaunchKernel, 307, LAUNCH, 1)                           \
    DRV(cuLaunchKernel_ptsz, 442, LAUNCH, 1)                      \
    DRV(cuLaunchKernelEx, 652, LAUNCH, 1)                         \
    DRV(cuLaunchKernelEx_ptsz, 653, LAUNCH, 1)                    \
    DRV(cuLaunchCooperativeKernel, 477, LAUNCH, 1)                \
    DRV(cuLaunchCooperativeKernel_ptsz, 478, LAUNCH, 1)           \
    DRV(cuGraphLaunch, 514, GRAPH, 1)                             \
    DRV(cuGraphLaunch_ptsz, 515, GRAPH, 1)                        \
    DRV(cuMemAlloc_v2, 243, ALLOC, 0)                             \
    DRV(cuMemAllocAsync, 598, ALLOC, 1)                           \
    DRV(cuMemAllocAsync_ptsz, 599, ALLOC, 1)                      \
    DRV(cuMemFree_v2, 245, FREE, 0)                               \
    DRV(cuMemFreeAsync, 600, FREE, 1)                             \
    DRV(cuMemFreeAsync_ptsz, 601, FREE, 1)                        \
    DRV(cuMemcpyHtoD_v2, 276, COPY, 0)                            \
    DRV(cuMemcpyHtoD_v2_ptds, 397, COPY, 0)                       \
    DRV(cuMemcpyDtoH_v2, 278, COPY, 0)                            \
    DRV(cuMemcpyDtoH_v2_ptds, 398, COPY, 0)                       \
    DRV(cuMemcpyHtoDAsync_v2, 277, COPY, 1)                       \
    DRV(cuMemcpyHtoDAsync_v2_ptsz, 421, COPY, 1)                  \
    DRV(cuMemcpyDtoHAsync_v2, 279, COPY, 1)                       \
    DRV(cuMemcpyDtoHAsync_v2_ptsz, 422, COPY, 1)                  \
    DRV(cuMemAllocHost_v2, 294, ALLOC, 0)                         \
    DRV(cuMemHostAlloc, 39, ALLOC, 0)                             \
    DRV(cuMemAllocManaged, 371, ALLOC, 0)                         \
    DRV(cuMemAllocPitch_v2, 244, ALLOC, 0)                        \
    DRV(cuMemAllocFromPoolAsync, 611, ALLOC, 1)                   \
    DRV(cuMemAllocFromPoolAsync_ptsz, 612, ALLOC, 1)              \
    DRV(cuMemFreeHost, 38, FREE, 0)                               \
    DRV(cuMemcpy, 305, COPY, 0)                                   \
    DRV(cuMemcpy_ptds, 408, COPY, 0)                              \
    DRV(cuMemcpyAsync, 306, COPY, 1)                              \
    DRV(cuMemcpyAsync_ptsz, 418, COPY, 1)                         \
    DRV(cuMemcpyDtoD_v2, 280, COPY, 0)                            \
    DRV(cuMemcpyDtoD_v2_ptds, 399, COPY, 0)                       \
    DRV(cuMemcpyDtoDAsync_v2, 281, COPY, 1)                       \
    DRV(cuMemcpyDtoDAsync_v2_ptsz, 423, COPY, 1)                  \
    DRV(cuMemcpyPeer, 318, COPY, 0)                               \
    DRV(cuMemcpyPeer_ptds, 409, COPY, 0)                          \
    DRV(cuMemcpyPeerAsync, 319, COPY, 1)                          \
    DRV(cuMemcpyPeerAsync_ptsz, 426, COPY, 1)                     \
    DRV(cuMemcpy2D_v2, 287, COPY, 0)                              \
    DRV(cuMemcpy2D_v2_ptds, 405, COPY, 0)                         \
    DRV(cuMemcpy2DAsync_v2, 289, COPY, 1)                         \
    DRV(cuMemcpy2DAsync_v2_ptsz, 424, COPY, 1)                    \
    DRV(cuMemcpy3D_v2, 290, COPY, 0)                              \
    DRV(cuMemcpy3D_v2_ptds, 407, COPY, 0)                         \
    DRV(cuMemcpy3DAsync_v2, 291, COPY, 1)                         \
    DRV(cuMemcpy3DAsync_v2_ptsz, 425, COPY, 1)                    \
    DRV(cuMemsetD8_v2, 249, SET, 0)                               \
    DRV(cuMemsetD8_v2_ptds, 411, SET, 0)                          \
    DRV(cuMemsetD8Async, 216, SET, 1)                             \
    DRV(cuMemsetD8Async_ptsz, 428, SET, 1)                        \
    DRV(cuMemsetD16_v2, 250, SET, 0)                              \
    DRV(cuMemsetD16_v2_ptds, 412, SET, 0)                         \
    DRV(cuMemsetD16Async, 218, SET, 1)                            \
    DRV(cuMemsetD16Async_ptsz, 429, SET, 1)                       \
    DRV(cuMemsetD32_v2, 251, SET, 0)                              \
    DRV(cuMemsetD32_v2_ptds, 413, SET, 0)                         \
    DRV(cuMemsetD32Async, 220, SET, 1)                            \
    DRV(cuMemsetD32Async_ptsz, 430, SET, 1)                       \
    DRV(cuEventSynchronize, 121, SYNC, 0)                         \
    DRV(cuStreamWaitEvent, 295, SYNC, 1)                          \
    DRV(cuStreamWaitEvent_ptsz, 436, SYNC, 1)                     \
    DRV(cuLaunchHostFunc, 527, HOSTFN, 1)                         \
    DRV(cuLaunchHostFunc_ptsz, 528, HOSTFN, 1)                    \
    DRV(cuStreamSynchronize, 126, SYNC, 1)                        \
    DRV(cuStreamSynchronize_ptsz, 440, SYNC, 1)                   \
    DRV(cuCtxSynchronize, 17, SYNC, 0)                            \
    DRV(cuCtxSynchronize_v2, 800, SYNC, 0)

enum sp_api_id {
#define SP_API_ENUM(sym, cbid, shape, stream) SP_API_##sym,
    SP_API_LIST(SP_API_ENUM)
    SP_DRIVER_API_LIST(SP_API_ENUM)
#undef SP_API_ENUM
    SP_API_COUNT
};

typedef struct sp_api_info {
    const char *name;
    int cbid;
    enum sp_api_shape shape;
    int has_stream;
    int driver; /* a driver API entry point (cuda_driver, driver cbid) */
} sp_api_info_t;

extern const sp_api_info_t sp_api_table[SP_API_COUNT];

/* "HtoD" for a recorded cudaMemcpyKind (a[2] of a copy), "PtoP" for peer copies. */
const char *sp_api_copy_kind_name(uint64_t kind);

#endif
