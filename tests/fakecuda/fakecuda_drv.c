/*
 * fakecuda_drv.c - how the runtime stand-in reaches the driver, as NVIDIA's libcudart does: at its first
 * need it runs dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2"), and asks cuGetProcAddress_v2 for
 * the driver entry points that implement some runtime calls (fakecuda_int.h's FC_VIA_DRV: cudaMalloc,
 * cudaFree, cudaMemset, cudaMemcpy HtoD/DtoH, cudaLaunchKernel, cudaStreamSynchronize,
 * cudaDeviceSynchronize; README.md lists which spellings). Whatever dlsym and cuGetProcAddress hand out
 * is called, so a profiler that interposes them (stepprof's inject/driver_proc.c) sees these calls.
 *
 * The driver stand-in (fakedriver.c) is still built on this library: its entry point runs the runtime's
 * implementation under fakecuda_driver_call(name). While that is set on a thread the runtime does the
 * work itself (no second trip to the driver), and the inner call's exact cudaError_t is kept in
 * fc_tls.drv_inner so the outer runtime call returns what it would have returned on its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakecuda_int.h"

_Static_assert(CUDA_VERSION >= 13000, "fc_drv's ctx_sync is cuCtxSynchronize_v2(CUcontext), CUDA 13's answer");

static struct fc_drv drv;
static bool drv_ok;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

/* FAKECUDA_LOG_DRIVER=1: one line per entry point saying which object handed it out (tests prove that a
 * profiler's cuGetProcAddress wrappers are what the runtime calls). */
static void log_entry(const char *name, void *f) {
  Dl_info info;
  if (!getenv("FAKECUDA_LOG_DRIVER")) return;
  fprintf(stderr, "fakecuda: %s from %s\n", name, f && dladdr(f, &info) && info.dli_fname ? info.dli_fname : "(none)");
}

static void *proc(CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *),
                  const char *name) {
  void *f = NULL;
  CUdriverProcAddressQueryResult st;
  if (gpa(name, &f, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
      st != CU_GET_PROC_ADDRESS_SUCCESS)
    f = NULL;
  log_entry(name, f);
  return f;
}

static void drv_load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
          h, "cuGetProcAddress_v2");
  if (!gpa) return;
  /* The names a toolkit of this version asks for; the driver hands out the _v2 forms. At 13000 that
   * includes cuCtxSynchronize_v2(CUcontext), a new ABI (older versions get cuCtxSynchronize(void)), which
   * NVIDIA's CUDA 13 runtime calls with NULL, the current context. */
  drv.mem_alloc = (__typeof__(drv.mem_alloc))proc(gpa, "cuMemAlloc");
  drv.mem_free = (__typeof__(drv.mem_free))proc(gpa, "cuMemFree");
  drv.memset_d8 = (__typeof__(drv.memset_d8))proc(gpa, "cuMemsetD8");
  drv.memcpy_htod = (__typeof__(drv.memcpy_htod))proc(gpa, "cuMemcpyHtoD");
  drv.memcpy_dtoh = (__typeof__(drv.memcpy_dtoh))proc(gpa, "cuMemcpyDtoH");
  drv.launch = (__typeof__(drv.launch))proc(gpa, "cuLaunchKernel");
  drv.stream_sync = (__typeof__(drv.stream_sync))proc(gpa, "cuStreamSynchronize");
  drv.ctx_sync = (__typeof__(drv.ctx_sync))proc(gpa, "cuCtxSynchronize");
  drv_ok = drv.mem_alloc && drv.mem_free && drv.memset_d8 && drv.memcpy_htod && drv.memcpy_dtoh && drv.launch &&
           drv.stream_sync && drv.ctx_sync;
}

const struct fc_drv *fc_drv(void) {
  if (fc_tls.driver_api) return NULL; /* the driver is running this call: do the work here */
  pthread_once(&drv_once, drv_load);
  return drv_ok ? &drv : NULL;
}

cudaError_t fc_from_drv(CUresult r) {
  cudaError_t inner = fc_tls.drv_inner;
  fc_tls.drv_inner = cudaSuccess;
  if (r == CUDA_SUCCESS) return cudaSuccess;
  return inner != cudaSuccess ? inner : cudaErrorUnknown;
}
