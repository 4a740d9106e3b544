/*
 * drv_work.c — GPU work through the CUDA driver API only, the way Triton, JAX, cuBLAS internals and
 * statically linked cudart reach it. drv_work(mode) initializes the driver, loads a module (the
 * kernel's PTX: a real driver compiles it, the stand-in takes any image), gets the kernel
 * "_Z10drv_kernelPf", allocates, copies, launches
 * LAUNCHES times, sets, copies back, synchronizes and frees, printing `NAME=RESULT` per call kind and
 * `launches=N`; with "more" (drv_work_more, argv[2] of the programs) also the async copies, cuLaunchKernelEx,
 * cuLaunchCooperativeKernel and a cuGraphLaunch of no graph (which fails: its result is printed, not
 * counted). Where the entry points come from:
 *   direct   the program's own imports of libcuda.so.1 (built with DRV_LINKED)
 *   proc     cuGetProcAddress_v2, itself fetched through cuGetProcAddress (built with DRV_LINKED)
 *   dlopen   dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2"), then cuGetProcAddress for the
 *            rest: what statically linked cudart does (any build)
 * cuGetProcAddress is asked at CUDA_VERSION: with CUDA 13 its "cuCtxSynchronize" is cuCtxSynchronize_v2,
 * which takes the context (NULL: the current one); `direct` calls the linked cuCtxSynchronize(void).
 * Either way the line printed is `cuCtxSynchronize=N`.
 * Built three ways (loading.mk): drv_linked (links libcuda), drv_static (does not link libcuda) and
 * libdrvblas.so (links libcuda; plugin_host drv loads it with RTLD_LOCAL and calls drv_work("direct")).
 * drv_linked_pt and drv_static_pt are built with -DCUDA_API_PER_THREAD_DEFAULT_STREAM: cuda.h then turns
 * the linked names into their per-thread twins (cuLaunchKernel_ptsz, cuMemcpyHtoD_v2_ptds, ...) and
 * cuGetProcAddress is asked with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, as such a build's cudart
 * asks.
 * Exit status 0 when every call succeeded.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#undef cuGetProcAddress
enum { LAUNCHES = 5, N = 1024 };

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*stream_sync)(CUstream);
    CUresult (*ctx_sync)(void);          /* direct: the linked cuCtxSynchronize */
    CUresult (*ctx_sync_v2)(CUcontext);  /* proc, dlopen: cuGetProcAddress's at CUDA_VERSION >= 13000 */
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*launch_coop)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void **);
    CUresult (*graph_launch)(CUgraphExec, CUstream);
} cu;

static int drv_work_more;

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PROC_FLAGS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#else
#define PROC_FLAGS CU_GET_PROC_ADDRESS_DEFAULT
#endif

static int get(gpa_fn gpa, const char *name, void *slot)
{
    CUdriverProcAddressQueryResult st;
    CUresult r = gpa(name, (void **)slot, CUDA_VERSION, PROC_FLAGS, &st);
    if (r != CUDA_SUCCESS || !*(void **)slot) {
        fprintf(stderr, "drv_work: cuGetProcAddress(%s) = %d\n", name, (int)r);
        return -1;
    }
    return 0;
}

/* cuGetProcAddress asked for "cuCtxSynchronize" at 13000 or later answers with CUDA 13's
 * cuCtxSynchronize_v2(CUcontext), a new ABI (called with NULL: the current context); before, with
 * cuCtxSynchronize(void). */
#if CUDA_VERSION >= 13000
#define CTX_SYNC_SLOT (&cu.ctx_sync_v2)
#else
#define CTX_SYNC_SLOT (&cu.ctx_sync)
#endif

static int fill_from(gpa_fn gpa)
{
    return get(gpa, "cuInit", &cu.init) | get(gpa, "cuDeviceGet", &cu.device_get) |
           get(gpa, "cuDevicePrimaryCtxRetain", &cu.retain) | get(gpa, "cuCtxSetCurrent", &cu.set_current) |
           get(gpa, "cuModuleLoadData", &cu.load) | get(gpa, "cuModuleGetFunction", &cu.get_function) |
           get(gpa, "cuMemAlloc", &cu.alloc) | get(gpa, "cuMemcpyHtoD", &cu.htod) |
           get(gpa, "cuLaunchKernel", &cu.launch) | get(gpa, "cuMemsetD8", &cu.memset8) |
           get(gpa, "cuMemcpyDtoH", &cu.dtoh) | get(gpa, "cuStreamSynchronize", &cu.stream_sync) |
           get(gpa, "cuCtxSynchronize", CTX_SYNC_SLOT) | get(gpa, "cuMemFree", &cu.free) |
           get(gpa, "cuMemcpyHtoDAsync", &cu.htod_async) | get(gpa, "cuMemcpyDtoHAsync", &cu.dtoh_async) |
           get(gpa, "cuLaunchKernelEx", &cu.launch_ex) | get(gpa, "cuLaunchCooperativeKernel", &cu.launch_coop) |
           get(gpa, "cuGraphLaunch", &cu.graph_launch);
}

#ifdef DRV_LINKED
/* cuda.h's names: cuMemAlloc is cuMemAlloc_v2, cuMemcpyHtoD is cuMemcpyHtoD_v2 (_v2_ptds per-thread)... */
static int fill_linked(void)
{
    cu.init = cuInit;
    cu.device_get = cuDeviceGet;
    cu.retain = cuDevicePrimaryCtxRetain;
    cu.set_current = cuCtxSetCurrent;
    cu.load = cuModuleLoadData;
    cu.get_function = cuModuleGetFunction;
    cu.alloc = cuMemAlloc;
    cu.htod = cuMemcpyHtoD;
    cu.launch = cuLaunchKernel;
    cu.memset8 = cuMemsetD8;
    cu.dtoh = cuMemcpyDtoH;
    cu.stream_sync = cuStreamSynchronize;
    cu.ctx_sync = cuCtxSynchronize;
    cu.free = cuMemFree;
    cu.htod_async = cuMemcpyHtoDAsync;
    cu.dtoh_async = cuMemcpyDtoHAsync;
    cu.launch_ex = cuLaunchKernelEx;
    cu.launch_coop = cuLaunchCooperativeKernel;
    cu.graph_launch = cuGraphLaunch;
    return 0;
}

/* cuGetProcAddress_v2 as the driver hands it out for "cuGetProcAddress". */
static gpa_fn proc_of_proc(void)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    return cuGetProcAddress_v2("cuGetProcAddress", &p, CUDA_VERSION, 0, &st) == CUDA_SUCCESS ? (gpa_fn)p : NULL;
}
#endif

static int fill_dlopen(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    gpa_fn gpa = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    return gpa ? fill_from(gpa) : -1;
}

#define RUN(name, call)                                              \
    do {                                                             \
        CUresult r_ = (call);                                        \
        printf("%s=%d\n", name, (int)r_);                            \
        failed |= r_ != CUDA_SUCCESS;                                \
    } while (0)

/* The module: PTX text of drv_kernel(float *p) { p[blockIdx.x * blockDim.x + threadIdx.x] += 1; }, which
 * NVIDIA's driver compiles when loaded (scripts/gpu-validate.sh runs these programs on a GPU; the
 * stand-in accepts any image). PTX ISA 7.0 for sm_75 and later, checked with ptxas for sm_90. */
static const char image[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry _Z10drv_kernelPf(.param .u64 p)\n"
    "{\n"
    "    .reg .f32 %f<3>;\n"
    "    .reg .b32 %r<5>;\n"
    "    .reg .b64 %rd<5>;\n"
    "    ld.param.u64 %rd1, [p];\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mov.u32 %r1, %ctaid.x;\n"
    "    mov.u32 %r2, %ntid.x;\n"
    "    mov.u32 %r3, %tid.x;\n"
    "    mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "    mul.wide.u32 %rd3, %r4, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    ld.global.f32 %f1, [%rd4];\n"
    "    add.f32 %f2, %f1, 0f3F800000;\n"
    "    st.global.f32 [%rd4], %f2;\n"
    "    ret;\n"
    "}\n";

__attribute__((visibility("default"))) int drv_work(const char *mode)
{
    int ok = -1;
#ifdef DRV_LINKED
    if (!strcmp(mode, "direct"))
        ok = fill_linked();
    else if (!strcmp(mode, "proc")) {
        gpa_fn gpa = proc_of_proc();
        ok = gpa ? fill_from(gpa) : -1;
    }
#endif
    if (!strcmp(mode, "dlopen"))
        ok = fill_dlopen();
    if (ok != 0) {
        fprintf(stderr, "drv_work: no driver entry points for mode %s\n", mode);
        return 1;
    }
    int failed = 0;
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CUmodule mod = NULL;
    CUfunction f = NULL;
    CUdeviceptr d = 0;
    static float host[N];
    RUN("cuInit", cu.init(0));
    RUN("cuDeviceGet", cu.device_get(&dev, 0));
    RUN("cuDevicePrimaryCtxRetain", cu.retain(&ctx, dev));
    RUN("cuCtxSetCurrent", cu.set_current(ctx));
    RUN("cuModuleLoadData", cu.load(&mod, image));
    RUN("cuModuleGetFunction", cu.get_function(&f, mod, "_Z10drv_kernelPf"));
    RUN("cuMemAlloc", cu.alloc(&d, sizeof host));
    RUN("cuMemcpyHtoD", cu.htod(d, host, sizeof host));
    void *args[] = {&d};
    int launched = 0;
    for (int i = 0; i < LAUNCHES; i++) {
        CUresult r = cu.launch(f, 4, 1, 1, 256, 1, 1, 128, NULL, args, NULL);
        launched += r == CUDA_SUCCESS;
        failed |= r != CUDA_SUCCESS;
    }
    printf("launches=%d\n", launched);
    RUN("cuMemsetD8", cu.memset8(d, 0, sizeof host));
    RUN("cuMemcpyDtoH", cu.dtoh(host, d, sizeof host));
    if (drv_work_more) {
        CUlaunchConfig cfg = {.gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
                              .blockDimZ = 1, .sharedMemBytes = 128};
        RUN("cuMemcpyHtoDAsync", cu.htod_async(d, host, sizeof host, NULL));
        RUN("cuLaunchKernelEx", cu.launch_ex(&cfg, f, args, NULL));
        RUN("cuLaunchCooperativeKernel", cu.launch_coop(f, 4, 1, 1, 256, 1, 1, 128, NULL, args));
        printf("cuGraphLaunch=%d\n", (int)cu.graph_launch(NULL, NULL));
        RUN("cuMemcpyDtoHAsync", cu.dtoh_async(host, d, sizeof host, NULL));
    }
    RUN("cuStreamSynchronize", cu.stream_sync(NULL));
    RUN("cuCtxSynchronize", cu.ctx_sync_v2 ? cu.ctx_sync_v2(NULL) : cu.ctx_sync());
    RUN("cuMemFree", cu.free(d));
    return failed;
}

#ifdef DRV_MAIN
int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    drv_work_more = argc > 2 && !strcmp(argv[2], "more");
    return drv_work(argc > 1 ? argv[1] : "dlopen");
}
#endif
