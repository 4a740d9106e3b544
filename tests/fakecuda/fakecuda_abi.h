/*
 * fakecuda_abi.h - C prototypes of the entry points that nvcc-generated host code calls.
 *
 * The toolkit declares these only for C++ under nvcc (crt/host_runtime.h, crt/device_functions.h), so
 * C code cannot include the real declarations.  They are restated here exactly; abi_check.cu includes
 * this header in an nvcc compilation, where any difference from NVIDIA's declarations is a
 * "conflicting declaration of C function" error (see fakecuda.mk).
 */
#ifndef FAKECUDA_ABI_H
#define FAKECUDA_ABI_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global);
char __cudaInitModule(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FAKECUDA_ABI_H */
