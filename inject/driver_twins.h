/* inject/driver_twins.h — the per-thread-default-stream twins of the driver
 * entry points stepprof interposes (cuLaunchKernel_ptsz, cuMemcpyHtoD_v2_ptds,
 * ...). cuda.h declares them only under CUDA_API_PER_THREAD_DEFAULT_STREAM,
 * by renaming the plain ones, so here each gets the exact type of its plain
 * entry point. NVIDIA's libcuda exports them; programs built per-thread call
 * them, and cuGetProcAddress hands them out with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. */
#ifndef SP_DRIVER_TWINS_H
#define SP_DRIVER_TWINS_H

#include <cuda.h>

__typeof__(cuLaunchKernel) cuLaunchKernel_ptsz;
__typeof__(cuLaunchKernelEx) cuLaunchKernelEx_ptsz;
__typeof__(cuLaunchCooperativeKernel) cuLaunchCooperativeKernel_ptsz;
__typeof__(cuGraphLaunch) cuGraphLaunch_ptsz;
__typeof__(cuMemAllocAsync) cuMemAllocAsync_ptsz;
__typeof__(cuMemFreeAsync) cuMemFreeAsync_ptsz;
__typeof__(cuMemcpyHtoD_v2) cuMemcpyHtoD_v2_ptds;
__typeof__(cuMemcpyDtoH_v2) cuMemcpyDtoH_v2_ptds;
__typeof__(cuMemcpyHtoDAsync_v2) cuMemcpyHtoDAsync_v2_ptsz;
__typeof__(cuMemcpyDtoHAsync_v2) cuMemcpyDtoHAsync_v2_ptsz;
__typeof__(cuMemsetD8_v2) cuMemsetD8_v2_ptds;
__typeof__(cuStreamSynchronize) cuStreamSynchronize_ptsz;
__typeof__(cuMemAllocFromPoolAsync) cuMemAllocFromPoolAsync_ptsz;
__typeof__(cuMemcpy) cuMemcpy_ptds;
__typeof__(cuMemcpyAsync) cuMemcpyAsync_ptsz;
__typeof__(cuMemcpyDtoD_v2) cuMemcpyDtoD_v2_ptds;
__typeof__(cuMemcpyDtoDAsync_v2) cuMemcpyDtoDAsync_v2_ptsz;
__typeof__(cuMemcpyPeer) cuMemcpyPeer_ptds;
__typeof__(cuMemcpyPeerAsync) cuMemcpyPeerAsync_ptsz;
__typeof__(cuMemcpy2D_v2) cuMemcpy2D_v2_ptds;
__typeof__(cuMemcpy2DAsync_v2) cuMemcpy2DAsync_v2_ptsz;
__typeof__(cuMemcpy3D_v2) cuMemcpy3D_v2_ptds;
__typeof__(cuMemcpy3DAsync_v2) cuMemcpy3DAsync_v2_ptsz;
__typeof__(cuMemsetD8Async) cuMemsetD8Async_ptsz;
__typeof__(cuMemsetD16_v2) cuMemsetD16_v2_ptds;
__typeof__(cuMemsetD16Async) cuMemsetD16Async_ptsz;
__typeof__(cuMemsetD32_v2) cuMemsetD32_v2_ptds;
__typeof__(cuMemsetD32Async) cuMemsetD32Async_ptsz;
__typeof__(cuStreamWaitEvent) cuStreamWaitEvent_ptsz;
__typeof__(cuLaunchHostFunc) cuLaunchHostFunc_ptsz;

#endif
