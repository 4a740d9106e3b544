/*
 * fakedriver_int.h - internals shared by the libcuda.so.1 stand-in's files (fakedriver.c: set-up,
 * devices, contexts, modules, launches, device allocations, cuGetProcAddress; fakedriver_xfer.c: copies,
 * sets, host and managed allocations, events, stream waits, host functions): the runtime stand-in each
 * driver call runs on, and the macros that run it under the driver call's name.
 */
#ifndef FAKEDRIVER_INT_H
#define FAKEDRIVER_INT_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

extern void *fd_rt;                       /* the runtime stand-in, dlopened at the first rt_fn */
extern void (*fd_as_driver)(const char *); /* its fakecuda_driver_call */

/* The runtime stand-in's `name` (loading the runtime on first use), NULL without it. */
void *rt_fn(const char *name);

/* The driver's code for a runtime result: the nearest one, CUDA_ERROR_UNKNOWN where none is near. */
CUresult fd_result(cudaError_t r);

/* The device of a context from cuDevicePrimaryCtxRetain, -1 for anything else. */
int fd_ctx_device(CUcontext ctx);

#pragma GCC visibility pop

/* Runs the runtime's `rsym` as the driver call `api`, keeping the runtime's result in *r. */
#define RT_RUN(api, rsym, proto, args, r)                                        \
  do {                                                                           \
    cudaError_t(*f_) proto = (cudaError_t(*) proto)rt_fn(#rsym);                 \
    if (!f_) return CUDA_ERROR_NOT_INITIALIZED;                                  \
    fd_as_driver(api);                                                           \
    r = f_ args;                                                                 \
    fd_as_driver(NULL);                                                          \
  } while (0)

/* Runs the runtime's `rsym` with `args` as the driver call `api` (this function's name). */
#define RT_CALL(api, rsym, proto, args)                                          \
  do {                                                                           \
    cudaError_t r_;                                                              \
    RT_RUN(api, rsym, proto, args, r_);                                          \
    return fd_result(r_);                                                        \
  } while (0)

/* Defines the driver entry point `name`, which runs the runtime's `rsym` after `pre`, and its
 * per-thread-default-stream twin name##sfx (_ptsz / _ptds, exported as NVIDIA's libcuda exports it: what
 * cuda.h calls under CUDA_API_PER_THREAD_DEFAULT_STREAM), which runs the runtime's twin rsym##sfx: the
 * same work, with stream 0 meaning the calling thread's default stream instead of the legacy one. */
#define DRV_TWINS(name, sfx, params, pre, rsym, proto, args)                    \
  EXPORT CUresult name params {                                                  \
    pre;                                                                         \
    RT_CALL(__func__, rsym, proto, args);                                        \
  }                                                                              \
  EXPORT CUresult name##sfx params {                                             \
    pre;                                                                         \
    RT_CALL(__func__, rsym##sfx, proto, args);                                   \
  }

#endif
