/*
 * fakedriver.c - build/fakecuda/libcuda.so.1: a stand-in for NVIDIA's driver library (soname
 * libcuda.so.1, the signatures of the toolkit's cuda.h) over the fakecuda runtime stand-in.
 *
 * NVIDIA's runtime is built on the driver; here the runtime calls some driver entry points (fakecuda_drv.c,
 * through cuGetProcAddress), but each driver entry point runs
 * one runtime entry point of libcudart.so.13 (the stand-in), fetched with dlsym on the runtime's own
 * handle, so no interposer sees that inner call, and fakecuda_driver_call() makes the observer (and so
 * the CUPTI stand-in) see the driver entry point's name instead of the runtime's. Kernels come from
 * cuModuleLoadData (any image) + cuModuleGetFunction(name): each name is registered with the runtime
 * like nvcc's __cudaRegisterFunction, so the CUPTI stand-in names its kernels; cuModuleUnload frees them. cuGetProcAddress(_v2)
 * hands out this library's own functions (the name with _v2 appended, else as given; with the per-thread
 * flag their _ptsz / _ptds twin where there is one); its version is looked at only for the two names whose
 * _v2 is CUDA 13's new ABI, cuCtxSynchronize and cuCtxGetDevice (the _v2 from 13000 on, as NVIDIA's).
 * The stream entry points have their per-thread-default-stream twins, as NVIDIA's. Copies, sets, host / managed / pitched / pool
 * allocations, events, waits and host functions are in fakedriver_xfer.c; fakedriver_int.h has the macros. Error codes: the runtime's, mapped to the driver's where they differ.
 * As NVIDIA's, the device queries (cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceTotalMem_v2,
 * cuDeviceGetAttribute) answer CUDA_ERROR_NOT_INITIALIZED until cuInit has succeeded; their values are
 * the runtime stand-in's cudaGetDeviceProperties / cudaDeviceGetAttribute ones (the two enums share
 * their numbers).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"
#include "fakedriver_int.h"

void *fd_rt;
void (*fd_as_driver)(const char *);

/* At the first driver call that needs it, not at load: NVIDIA's driver library loads no runtime, so a
 * process (or a profiler checking for a driver) that loads libcuda.so.1 gets no libcudart with it. */
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

static void load_runtime(void) {
  fd_rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (fd_rt) fd_as_driver = (void (*)(const char *))dlsym(fd_rt, "fakecuda_driver_call");
}

void *rt_fn(const char *name) {
  pthread_once(&rt_once, load_runtime);
  return fd_rt && fd_as_driver ? dlsym(fd_rt, name) : NULL;
}

CUresult fd_result(cudaError_t r) {
  switch (r) {
  case cudaSuccess: return CUDA_SUCCESS;
  case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorInvalidPitchValue: return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorInvalidMemcpyDirection: return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
  case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
  case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_HANDLE;
  case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
  case cudaErrorInvalidConfiguration: return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorNotReady: return CUDA_ERROR_NOT_READY;
  default: return CUDA_ERROR_UNKNOWN;
  }
}

static dim3 d3(unsigned x, unsigned y, unsigned z) {
  dim3 d = {x, y, z};
  return d;
}

/* ---- initialization, versions, devices, contexts ---- */

static bool initialized; /* cuInit succeeded once: it is never undone */

EXPORT CUresult cuInit(unsigned int flags) {
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  int n;
  cudaError_t r;
  RT_RUN(__func__, cudaGetDeviceCount, (int *), (&n), r); /* the runtime's first call loads CUDA_INJECTION64_PATH */
  if (r == cudaSuccess) __atomic_store_n(&initialized, true, __ATOMIC_RELEASE);
  return fd_result(r);
}

static bool ready(void) {
  return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE);
}

EXPORT CUresult cuDriverGetVersion(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  RT_CALL(__func__, cudaGetDeviceCount, (int *), (n));
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  int n = 0;
  cudaError_t r;
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  RT_RUN(__func__, cudaGetDeviceCount, (int *), (&n), r);
  if (r != cudaSuccess) return fd_result(r);
  if (!d || ordinal < 0 || ordinal >= n) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

/* The runtime's properties of `dev`, fetched as the driver call `api`. */
static CUresult props_of(const char *api, CUdevice dev, struct cudaDeviceProp *p) {
  cudaError_t r;
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  RT_RUN(api, cudaGetDeviceProperties, (struct cudaDeviceProp *, int), (p, dev), r);
  return fd_result(r);
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  struct cudaDeviceProp p;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = props_of(__func__, dev, &p);
  if (r == CUDA_SUCCESS) snprintf(name, (size_t)len, "%s", p.name);
  return r;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  struct cudaDeviceProp p;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = props_of(__func__, dev, &p);
  if (r == CUDA_SUCCESS) *bytes = p.totalGlobalMem;
  return r;
}

_Static_assert((int)CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR == (int)cudaDevAttrMaxBlocksPerMultiprocessor &&
                   (int)CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR ==
                       (int)cudaDevAttrMaxSharedMemoryPerMultiprocessor &&
                   (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == (int)cudaDevAttrComputeCapabilityMajor,
               "CUdevice_attribute and cudaDeviceAttr share their numbers");

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  RT_CALL(__func__, cudaDeviceGetAttribute, (int *, enum cudaDeviceAttr, int), (pi, (enum cudaDeviceAttr)attrib, dev));
}

/* A primary context is a token per device: CUcontext values 1..FAKECUDA_MAX_DEVICES as pointers. */
static char ctx_tokens[FAKECUDA_MAX_DEVICES];

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
  if (!ctx || d < 0 || d >= FAKECUDA_MAX_DEVICES) return CUDA_ERROR_INVALID_VALUE;
  *ctx = (CUcontext)(void *)&ctx_tokens[d];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  return d < 0 || d >= FAKECUDA_MAX_DEVICES ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

int fd_ctx_device(CUcontext ctx) {
  char *c = (char *)(void *)ctx;
  return c < ctx_tokens || c >= ctx_tokens + FAKECUDA_MAX_DEVICES ? -1 : (int)(c - ctx_tokens);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  int d = fd_ctx_device(ctx);
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  RT_CALL(__func__, cudaSetDevice, (int), (d));
}

/* ctx's device, NULL meaning the current context's. */
static CUresult ctx_device(CUdevice *d, CUcontext ctx) {
  int (*dev)(void) = (int (*)(void))rt_fn("fakecuda_current_device");
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!ctx && !dev) return CUDA_ERROR_NOT_INITIALIZED;
  int c = ctx ? fd_ctx_device(ctx) : dev();
  if (c < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *d = c;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
  return ctx_device(d, NULL);
}

/* CUDA 13's (what cuGetProcAddress hands out for "cuCtxGetDevice" at version 13000), as NVIDIA documents
 * it: ctx's device, NULL meaning the current context's. */
EXPORT CUresult cuCtxGetDevice_v2(CUdevice *d, CUcontext ctx) {
  return ctx_device(d, ctx);
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  int (*dev)(void) = (int (*)(void))rt_fn("fakecuda_current_device");
  if (!dev) return CUDA_ERROR_NOT_INITIALIZED;
  *ctx = (CUcontext)(void *)&ctx_tokens[dev()];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
  RT_CALL(__func__, cudaDeviceSynchronize, (void), ());
}

/* CUDA 13's cuCtxSynchronize_v2 (what cuGetProcAddress hands out for "cuCtxSynchronize" at version
 * 13000): waits for ctx's work, NULL meaning the current context, as NVIDIA documents; another device's
 * context is waited for on that device (the runtime stand-in's fakecuda_deviceSynchronize), the current
 * device staying current. */
EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (!ctx) RT_CALL(__func__, cudaDeviceSynchronize, (void), ());
  int d = fd_ctx_device(ctx);
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  RT_CALL(__func__, fakecuda_deviceSynchronize, (int), (d));
}

DRV_TWINS(cuStreamSynchronize, _ptsz, (CUstream s), (void)0, cudaStreamSynchronize, (cudaStream_t),
          ((cudaStream_t)s))

/* ---- modules and functions ---- */

/* A CUfunction is a small block whose address the runtime registers as the host stub of its name. The
 * blocks of unloaded modules go back to a pool that later functions are taken from, last freed first,
 * as a heap hands out the block just freed (NVIDIA's handles are heap memory): the stand-in reuses them
 * whatever allocator the process has (ASan's quarantine never hands a freed block back). */
struct fake_fn {
  struct fake_fn *next_free;
  char *name;
};

struct fake_module {
  void **fatbin; /* the runtime's registration handle */
  struct fake_fn **fns;
  size_t nfns, capfns;
};

static pthread_mutex_t fn_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_fn *fn_pool;

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  void **(*reg)(void *) = (void **(*)(void *))rt_fn("__cudaRegisterFatBinary");
  if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
  if (!reg) return CUDA_ERROR_NOT_INITIALIZED;
  struct fake_module *fm = calloc(1, sizeof *fm);
  if (!fm) return CUDA_ERROR_OUT_OF_MEMORY;
  fd_as_driver(__func__);
  fm->fatbin = reg((void *)image);
  fd_as_driver(NULL);
  *m = (CUmodule)(void *)fm;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  typedef void (*reg_fn)(void **, const char *, char *, const char *, int, uint3 *, uint3 *, dim3 *, dim3 *,
                         int *);
  reg_fn reg = (reg_fn)rt_fn("__cudaRegisterFunction");
  if (!f || !m || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!reg) return CUDA_ERROR_NOT_INITIALIZED;
  struct fake_module *fm = (struct fake_module *)(void *)m;
  for (size_t i = 0; i < fm->nfns; i++) /* as NVIDIA's: the same name, the same handle */
    if (!strcmp(fm->fns[i]->name, name)) return *f = (CUfunction)(void *)fm->fns[i], CUDA_SUCCESS;
  if (fm->nfns == fm->capfns) {
    size_t cap = fm->capfns ? 2 * fm->capfns : 8;
    struct fake_fn **grown = realloc(fm->fns, cap * sizeof *grown);
    if (!grown) return CUDA_ERROR_OUT_OF_MEMORY;
    fm->fns = grown, fm->capfns = cap;
  }
  char *copy = strdup(name);
  if (!copy) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fn_pool_lock);
  struct fake_fn *fn = fn_pool;
  if (fn) fn_pool = fn->next_free;
  pthread_mutex_unlock(&fn_pool_lock);
  if (!fn && !(fn = malloc(sizeof *fn))) {
    free(copy);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *fn = (struct fake_fn){NULL, copy};
  fm->fns[fm->nfns++] = fn;
  fd_as_driver(__func__);
  reg(fm->fatbin, (const char *)fn, copy, copy, -1, NULL, NULL, NULL, NULL, NULL);
  fd_as_driver(NULL);
  *f = (CUfunction)(void *)fn;
  return CUDA_SUCCESS;
}

/* Its functions are unregistered and their blocks go back to the pool, as NVIDIA's frees a module's: a
 * function got from a module loaded later may have the address an unloaded one had. */
EXPORT CUresult cuModuleUnload(CUmodule m) {
  void (*unreg)(void **) = (void (*)(void **))rt_fn("__cudaUnregisterFatBinary");
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  if (!unreg) return CUDA_ERROR_NOT_INITIALIZED;
  struct fake_module *fm = (struct fake_module *)(void *)m;
  fd_as_driver(__func__);
  unreg(fm->fatbin);
  fd_as_driver(NULL);
  pthread_mutex_lock(&fn_pool_lock);
  for (size_t i = 0; i < fm->nfns; i++) {
    free(fm->fns[i]->name);
    fm->fns[i]->name = NULL;
    fm->fns[i]->next_free = fn_pool;
    fn_pool = fm->fns[i];
  }
  pthread_mutex_unlock(&fn_pool_lock);
  free(fm->fns);
  free(fm);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction f) {
  RT_CALL(__func__, cudaFuncGetName, (const char **, const void *), (name, (const void *)f));
}

/* ---- launches ---- */

#define LAUNCH_PROTO (const void *, dim3, dim3, void **, size_t, cudaStream_t)

DRV_TWINS(cuLaunchKernel, _ptsz,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm,
           CUstream s, void **params, void **extra),
          (void)extra, cudaLaunchKernel, LAUNCH_PROTO,
          ((const void *)f, d3(gx, gy, gz), d3(bx, by, bz), params, shm, (cudaStream_t)s))

DRV_TWINS(cuLaunchKernelEx, _ptsz, (const CUlaunchConfig *c, CUfunction f, void **params, void **extra),
          if (!c) return CUDA_ERROR_INVALID_VALUE; (void)extra, cudaLaunchKernel, LAUNCH_PROTO,
          ((const void *)f, d3(c->gridDimX, c->gridDimY, c->gridDimZ), d3(c->blockDimX, c->blockDimY, c->blockDimZ),
           params, c->sharedMemBytes, (cudaStream_t)c->hStream))

DRV_TWINS(cuLaunchCooperativeKernel, _ptsz,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm,
           CUstream s, void **params),
          (void)0, cudaLaunchCooperativeKernel, LAUNCH_PROTO,
          ((const void *)f, d3(gx, gy, gz), d3(bx, by, bz), params, shm, (cudaStream_t)s))

DRV_TWINS(cuGraphLaunch, _ptsz, (CUgraphExec g, CUstream s), (void)0, cudaGraphLaunch,
          (cudaGraphExec_t, cudaStream_t), ((cudaGraphExec_t)g, (cudaStream_t)s))

/* ---- memory ---- */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  RT_CALL(__func__, cudaMalloc, (void **, size_t), ((void **)p, n));
}

DRV_TWINS(cuMemAllocAsync, _ptsz, (CUdeviceptr * p, size_t n, CUstream s), (void)0, cudaMallocAsync,
          (void **, size_t, cudaStream_t), ((void **)p, n, (cudaStream_t)s))

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  RT_CALL(__func__, cudaFree, (void *), ((void *)p));
}

DRV_TWINS(cuMemFreeAsync, _ptsz, (CUdeviceptr p, CUstream s), (void)0, cudaFreeAsync, (void *, cudaStream_t),
          ((void *)p, (cudaStream_t)s))

/* ---- cuGetProcAddress ---- */

#undef cuGetProcAddress
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);

static char self_anchor; /* not a function: a function's address here could be a preloaded interposer's */

/* This library's `base`, or with the per-thread flag its _ptsz / _ptds twin where there is one. */
static void *lookup(void *self, const char *base, bool per_thread) {
  char twin[300];
  for (int i = 0; per_thread && i < 2; i++) {
    snprintf(twin, sizeof twin, "%s%s", base, i ? "_ptds" : "_ptsz");
    void *f = dlsym(self, twin);
    if (f) return f;
  }
  return dlsym(self, base);
}

/* The names whose _v2 is CUDA 13's new ABI (a CUcontext argument added), handed out only to a caller
 * asking with version 13000 or later; an older version gets the old function, as from NVIDIA's. */
static bool v2_since_13(const char *symbol) {
  return !strcmp(symbol, "cuCtxSynchronize") || !strcmp(symbol, "cuCtxGetDevice");
}

/* As NVIDIA's: the per-thread-default-stream twin with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 * (cuMemcpyHtoD -> cuMemcpyHtoD_v2_ptds, cuLaunchKernel -> cuLaunchKernel_ptsz), the legacy one otherwise
 * (CU_GET_PROC_ADDRESS_DEFAULT is LEGACY_STREAM for the library: cuda.h's per-thread builds add the flag). */
static CUresult proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  static void *self;
  if (!self) {
    Dl_info info;
    if (dladdr(&self_anchor, &info)) self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  char v2[256];
  void *f = NULL;
  if (self && strncmp(symbol, "cu", 2) == 0) {
    snprintf(v2, sizeof v2, "%s_v2", symbol);
    /* the version a current toolkit asks for: cuMemAlloc -> cuMemAlloc_v2 */
    if (version >= 13000 || !v2_since_13(symbol)) f = lookup(self, v2, per_thread);
    if (!f) f = lookup(self, symbol, per_thread);
  }
  *pfn = f;
  if (status) *status = f ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
  return proc_address(symbol, pfn, version, flags, status);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  return proc_address(symbol, pfn, version, flags, NULL);
}
