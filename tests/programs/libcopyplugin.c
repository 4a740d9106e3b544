/*
 * libcopyplugin.c — a plugin that ships its own copy of the CUDA runtime, as wheels repaired by
 * auditwheel do (libcudart-<hash>.so.13, same symbol versions). Built twice (loading.mk): libcopy_a.so
 * links libcudart.so.13, libcopy_b.so links copies/libcudart-b.so.13 (the stand-in under another
 * soname); plugin_host copies dlopens both RTLD_LOCAL, so each copy stays in its plugin's own scope.
 * The constructor registers one kernel the way nvcc's does (fat binary, function, end). copy_run()
 * prints `TAG.NAME=RESULT` lines: cudaFuncGetName, which stepprof does not interpose, asks the plugin's
 * own runtime for the kernel's name, which it knows only when the registration reached that runtime;
 * then an allocation, a launch, a copy back, a sync and a free, the calls stepprof interposes, and an
 * allocation and free through cudaMalloc looked up with dlsym(RTLD_DEFAULT) from inside the plugin
 * (glibc finds the plugin's own copy). Built with -DCOPY_NOREG (libcopy_c.so, on B's copy) it registers
 * nothing: a plugin whose first contact with its runtime is a call, not a constructor.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#ifndef COPY_TAG
#error "COPY_TAG: a or b"
#endif
#define STR2(x) #x
#define STR(x) STR2(x)
#define TAG STR(COPY_TAG)

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int threadLimit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

volatile int copy_marks;
static void copy_kernel(void) { copy_marks = 1; } /* only its address is used, as in train_c.c */

#ifndef COPY_NOREG
static char kernel_name[] = "copy_kernel_" TAG;

__attribute__((constructor)) static void copy_register(void)
{
    static char fatbin[64];
    void **h = __cudaRegisterFatBinary(fatbin);
    __cudaRegisterFunction(h, (const char *)copy_kernel, kernel_name, kernel_name, -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
}
#endif

__attribute__((visibility("default"))) int copy_run(void)
{
    const char *name = NULL;
    void *d = NULL;
    char host[256] = {0};
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    int r = (int)cudaFuncGetName(&name, (const void *)copy_kernel);
    printf(TAG ".cudaFuncGetName=%d %s\n", r, r == 0 && name ? name : "-");
    printf(TAG ".cudaMalloc=%d\n", (int)cudaMalloc(&d, sizeof host));
    printf(TAG ".cudaLaunchKernel=%d\n", (int)cudaLaunchKernel((const void *)copy_kernel, g, b, NULL, 0, 0));
    printf(TAG ".cudaMemcpy=%d\n", (int)cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
    printf(TAG ".cudaDeviceSynchronize=%d\n", (int)cudaDeviceSynchronize());
    printf(TAG ".cudaFree=%d\n", (int)cudaFree(d));
    cudaError_t (*probed)(void **, size_t) = (cudaError_t(*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
    d = NULL;
    printf(TAG ".dlsym_cudaMalloc=%d\n", probed ? (int)probed(&d, 64) : -1);
    printf(TAG ".cudaFree=%d\n", (int)cudaFree(d));
    return 0;
}
