/*
 * drv_reload.c — a module unloaded and another loaded, the way Triton, CuPy and numba JIT kernels
 * through the CUDA driver API: loads module A, gets "_Z8kernel_aPf", launches it 3 times, unloads A;
 * loads module B, gets "_Z8kernel_bPf" (which may get the address kernel_a had: the driver frees an
 * unloaded module's functions), launches it 3 times, synchronizes. Prints `reused=0|1` (whether B's
 * function has A's address) and `launches=6`. Exit status 0 when every call succeeded.
 */
#include <cuda.h>
#include <stdio.h>

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        CUresult r_ = (call);                                                                        \
        if (r_ != CUDA_SUCCESS) {                                                                    \
            fprintf(stderr, "drv_reload: %s = %d\n", #call, (int)r_);                               \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

static const char image[] = "any image: the driver stand-in accepts it";

static int launch3(CUfunction f, CUdeviceptr buf)
{
    void *params[] = {&buf};
    for (int i = 0; i < 3; i++)
        CHECK(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    return 0;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule a, b;
    CUfunction fa, fb;
    CUdeviceptr buf;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAlloc(&buf, 4096));
    CHECK(cuModuleLoadData(&a, image));
    CHECK(cuModuleGetFunction(&fa, a, "_Z8kernel_aPf"));
    if (launch3(fa, buf))
        return 1;
    CHECK(cuCtxSynchronize());
    CHECK(cuModuleUnload(a));
    CHECK(cuModuleLoadData(&b, image));
    CHECK(cuModuleGetFunction(&fb, b, "_Z8kernel_bPf"));
    printf("reused=%d\n", fb == fa);
    if (launch3(fb, buf))
        return 1;
    CHECK(cuCtxSynchronize());
    CHECK(cuModuleUnload(b));
    CHECK(cuMemFree(buf));
    printf("launches=6\n");
    return 0;
}
