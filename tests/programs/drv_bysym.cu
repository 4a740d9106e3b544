// drv_bysym.cu — a kernel compiled by nvcc (registered by the runtime at start-up) launched through the
// driver: cudaGetFuncBySymbol gives its CUfunction, cuLaunchKernel launches it 3 times, as libraries
// that mix the runtime and the driver do (cooperative-launch helpers, CUTLASS). Prints `NAME=RESULT`
// and `launches=N`; exit 0 when every call succeeded. Built -cudart shared and linked with libcuda
// (loading.mk), run on the stand-ins.
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace drv {
__global__ void scale_kernel(float *x, float a) { x[threadIdx.x] *= a; }
}

int main()
{
    float *d = nullptr;
    cudaFunction_t f = nullptr;
    int failed = 0;
    cudaError_t r = cudaMalloc(&d, 256 * sizeof(float));
    printf("cudaMalloc=%d\n", (int)r);
    failed |= r != cudaSuccess;
    r = cudaGetFuncBySymbol(&f, (const void *)drv::scale_kernel);
    printf("cudaGetFuncBySymbol=%d\n", (int)r);
    failed |= r != cudaSuccess;
    float a = 2.0f;
    void *args[] = {&d, &a};
    int launched = 0;
    for (int i = 0; i < 3; i++) {
        CUresult c = cuLaunchKernel((CUfunction)f, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
        launched += c == CUDA_SUCCESS;
        failed |= c != CUDA_SUCCESS;
    }
    printf("launches=%d\n", launched);
    r = cudaDeviceSynchronize();
    printf("cudaDeviceSynchronize=%d\n", (int)r);
    failed |= r != cudaSuccess;
    cudaFree(d);
    return failed;
}
