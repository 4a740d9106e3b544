/*
 * drv_versions.c — the driver entry points whose ABI CUDA 13 changed, as a program that gets its driver
 * from dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2") (static cudart, Triton, JAX, cuda-python)
 * fetches them (tests/test_driver.py). cuGetProcAddress asked for "cuCtxSynchronize" / "cuCtxGetDevice"
 * at version 13000 answers with cuCtxSynchronize_v2(CUcontext) / cuCtxGetDevice_v2(CUdevice *, CUcontext)
 * (a NULL context is the current one), asked at 12080 with the old cuCtxSynchronize(void) /
 * cuCtxGetDevice(CUdevice *); dlsym of the exported names gives each. Each is called, in this order:
 *   cuCtxSynchronize(13000,NULL), cuCtxSynchronize(13000,ctx), cuCtxSynchronize(12080),
 *   cuCtxSynchronize_v2(dlsym,NULL), cuCtxSynchronize(dlsym), cuCtxGetDevice(13000,NULL),
 *   cuCtxGetDevice(13000,ctx), cuCtxGetDevice(12080)
 * printing `NAME=RESULT` per call, `distinct=1` when both versions' answers differ for both names, and
 * `devices=A,B,C` (what the three cuCtxGetDevice calls gave). With a second device, its context is
 * synchronized while device 0's stays current: cuCtxSynchronize(13000,other), then
 * cuCtxGetDevice(12080,after) says which device is current. Exit status 0 when every call succeeded.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#undef cuGetProcAddress

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*sync_v2_fn)(CUcontext);
typedef CUresult (*sync_fn)(void);
typedef CUresult (*getdev_v2_fn)(CUdevice *, CUcontext);
typedef CUresult (*getdev_fn)(CUdevice *);

static gpa_fn gpa;
static int failed;

/* cuGetProcAddress's answer for `name` asked at `version` (NULL when it has none). */
static void *at(const char *name, int version)
{
    void *f = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa(name, &f, version, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)
        f = NULL;
    if (!f)
        fprintf(stderr, "drv_versions: no %s at %d\n", name, version);
    return f;
}

static void show(const char *name, CUresult r)
{
    printf("%s=%d\n", name, (int)r);
    failed |= r != CUDA_SUCCESS;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    gpa = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return 1;
    CUresult (*init)(unsigned) = at("cuInit", CUDA_VERSION);
    CUresult (*device_get)(CUdevice *, int) = at("cuDeviceGet", CUDA_VERSION);
    CUresult (*retain)(CUcontext *, CUdevice) = at("cuDevicePrimaryCtxRetain", CUDA_VERSION);
    CUresult (*set_current)(CUcontext) = at("cuCtxSetCurrent", CUDA_VERSION);
    sync_v2_fn sync13 = at("cuCtxSynchronize", 13000), sync_sym13 = dlsym(h, "cuCtxSynchronize_v2");
    sync_fn sync12 = at("cuCtxSynchronize", 12080), sync_sym = dlsym(h, "cuCtxSynchronize");
    getdev_v2_fn getdev13 = at("cuCtxGetDevice", 13000);
    getdev_fn getdev12 = at("cuCtxGetDevice", 12080);
    if (!init || !device_get || !retain || !set_current || !sync13 || !sync_sym13 || !sync12 || !sync_sym ||
        !getdev13 || !getdev12)
        return 1;
    printf("distinct=%d\n", (void *)sync13 != (void *)sync12 && (void *)getdev13 != (void *)getdev12);
    CUdevice dev = 0, other = 0, d[3] = {-1, -1, -1};
    CUcontext ctx = NULL, other_ctx = NULL;
    show("cuInit", init(0));
    show("cuDeviceGet", device_get(&dev, 0));
    show("cuDevicePrimaryCtxRetain", retain(&ctx, dev));
    show("cuCtxSetCurrent", set_current(ctx));
    show("cuCtxSynchronize(13000,NULL)", sync13(NULL));
    show("cuCtxSynchronize(13000,ctx)", sync13(ctx));
    show("cuCtxSynchronize(12080)", sync12());
    show("cuCtxSynchronize_v2(dlsym,NULL)", sync_sym13(NULL));
    show("cuCtxSynchronize(dlsym)", sync_sym());
    show("cuCtxGetDevice(13000,NULL)", getdev13(&d[0], NULL));
    show("cuCtxGetDevice(13000,ctx)", getdev13(&d[1], ctx));
    show("cuCtxGetDevice(12080)", getdev12(&d[2]));
    printf("devices=%d,%d,%d\n", (int)d[0], (int)d[1], (int)d[2]);
    if (device_get(&other, 1) == CUDA_SUCCESS) {
        CUdevice now = -1;
        show("cuDevicePrimaryCtxRetain(other)", retain(&other_ctx, other));
        show("cuCtxSynchronize(13000,other)", sync13(other_ctx));
        show("cuCtxGetDevice(12080,after)", getdev12(&now));
        printf("current=%d\n", (int)now);
    }
    return failed;
}
