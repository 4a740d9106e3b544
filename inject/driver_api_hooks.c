/* inject/driver_api_hooks.c — the CUDA driver API launch interposers (beside
 * the allocation ones of driver_hooks.c and the copies, sets, waits and host
 * functions of driver_copy_hooks.c): cuLaunchKernel, Ex, Cooperative,
 * cuGraphLaunch, each with its per-thread-default-stream twin, one row each in
 * collectors/api.h's SP_DRIVER_API_LIST, written as cuda_driver events. A
 * launched CUfunction is named once through cuFuncGetName (the registry keeps
 * the name), so the exporter names its kernel like a runtime launch's. A
 * runtime call that the runtime implements with these (NVIDIA's does) is
 * recorded once: the recursion guard taken by the runtime interposer makes
 * the nested driver call pass through unrecorded. */
#include <cuda.h>

#include "../collectors/kernels.h"
#define SP_HOOK_NESTED 1 /* called from inside the runtime's calls: hook.h SP_ASM_OPEN */
#include "hook.h"
#include "markers.h"

#define P(x) SP_U64(x)

typedef CUresult (*func_name_fn)(const char **, CUfunction);

static func_name_fn get_name;
static CUfunction last_named;

/* f's name as the driver has it now, registered; whether that renamed f. */
static int name_now(CUfunction f)
{
    if (!get_name)
        get_name = (func_name_fn)sp_real("cuFuncGetName");
    const char *n = NULL;
    return get_name && get_name(&n, f) == CUDA_SUCCESS && n && sp_kern_register(f, n);
}

/* Registers f's name on its first recorded launch, or when the kernel:
 * marker first sees it (markers.h); the last one named is remembered so a
 * loop over one kernel skips the registry's lock. */
void sp_drv_name_function(const void *fn)
{
    CUfunction f = (CUfunction)fn;
    if (!f || __atomic_load_n(&last_named, __ATOMIC_RELAXED) == f)
        return;
    if (!sp_kern_mangled(f, 0))
        name_now(f);
    __atomic_store_n(&last_named, f, __ATOMIC_RELAXED);
}

/* A CUfunction is named as the program gets it, as a runtime stub is at its
 * registration: a module unloaded frees its functions, and one of a module
 * loaded later may get the same address (Triton, CuPy and numba load and
 * unload modules), which must not keep the old name nor the marker's verdict
 * on it. Like registration, this is no event and works before activation. */
SP_REAL_FN(CUresult, cuModuleGetFunction, (CUfunction * f, CUmodule m, const char *name), (f, m, name))
SP_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    CUresult r = real_cuModuleGetFunction(f, m, name);
    if (r == CUDA_SUCCESS && f && *f && name_now(*f)) {
        sp_mark_forget(*f);
        __atomic_compare_exchange_n(&last_named, &(CUfunction){*f}, NULL, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    return r;
}

static inline void fill_drv_launch(sp_event_t *e, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shm, CUstream s)
{
    sp_drv_name_function(f);
    e->a[0] = P(f);
    e->a[1] = gx | (uint64_t)gy << 32;
    e->a[2] = bx | (uint64_t)by << 32;
    e->a[3] = P(s);
    e->a[4] = gz | (uint64_t)bz << 32;
    e->aux = shm;
}

/* Each entry point with its per-thread-default-stream twin (_ptsz / _ptds:
 * what a program built with CUDA_API_PER_THREAD_DEFAULT_STREAM calls, and
 * what cuGetProcAddress hands out with the per-thread flag), recorded alike
 * under its own row; the trace draws both under the plain name. */
#define LAUNCH_HOOKS(sym)                                                                         \
    SP_INTERPOSE_GATED(CUresult, sym,                                                             \
                       (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
                        unsigned bz, unsigned shm, CUstream s, void **params, void **extra),      \
                       (f, gx, gy, gz, bx, by, bz, shm, s, params, extra), f, SP_MARK_CUFUNCTION, rdi, \
                       sp_drv_launch_end_clock, fill_drv_launch(e, f, gx, gy, gz, bx, by, bz, shm, s))
LAUNCH_HOOKS(cuLaunchKernel)
LAUNCH_HOOKS(cuLaunchKernel_ptsz)
#define COOP_HOOKS(sym)                                                                           \
    SP_INTERPOSE_GATED(CUresult, sym,                                                             \
                       (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
                        unsigned bz, unsigned shm, CUstream s, void **params),                    \
                       (f, gx, gy, gz, bx, by, bz, shm, s, params), f, SP_MARK_CUFUNCTION, rdi,   \
                       sp_drv_launch_end_clock, fill_drv_launch(e, f, gx, gy, gz, bx, by, bz, shm, s))
COOP_HOOKS(cuLaunchCooperativeKernel)
COOP_HOOKS(cuLaunchCooperativeKernel_ptsz)
#define LAUNCH_EX_HOOKS(sym)                                                                      \
    SP_INTERPOSE_GATED(CUresult, sym, (const CUlaunchConfig *c, CUfunction f, void **params, void **extra), \
                       (c, f, params, extra), f, SP_MARK_CUFUNCTION, rsi, sp_drv_launch_end_clock, \
                       c ? fill_drv_launch(e, f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, \
                                           c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream) \
                         : (void)(e->a[0] = P(f)))
LAUNCH_EX_HOOKS(cuLaunchKernelEx)
LAUNCH_EX_HOOKS(cuLaunchKernelEx_ptsz)
#define GRAPH_HOOKS(sym) \
    SP_INTERPOSE(CUresult, sym, (CUgraphExec g, CUstream s), (g, s), sp_fill4(e, P(g), 0, 0, P(s)))
GRAPH_HOOKS(cuGraphLaunch)
GRAPH_HOOKS(cuGraphLaunch_ptsz)
