/* inject/driver_proc.c — driver entry points that never pass through the
 * PLT. Statically linked cudart, Triton and JAX fetch the driver with
 * dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2") and then ask
 * cuGetProcAddress for everything else. So stepprof exports cuGetProcAddress,
 * cuGetProcAddress_v2 and dlsym, and hands back its own interposer wherever
 * the real answer is exactly the function that interposer forwards to (any
 * version or flags: with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the
 * answer is the _ptsz / _ptds twin, and so is stepprof's; a different answer,
 * such as an old-ABI variant stepprof does not interpose, passes through
 * untouched), including for cuGetProcAddress itself. dlsym: only cu[A-Z]*
 * names with a real handle take that path (RTLD_DEFAULT searched in the
 * caller's scope, as glibc does), and any cu* name asked of RTLD_DEFAULT or
 * dlopen(NULL) finds stepprof's own export only where a real definition
 * exists (a program probing for CUDA is told what it is told bare);
 * everything else, RTLD_NEXT included, is a tail call to glibc's dlsym
 * (bootstrapped with dlvsym), so the caller's handle and return address mean
 * what they meant. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "driver_twins.h"
#include "cudacopies.h"
#include "hook.h"

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);

typedef struct {
    const char *name;
    void *ours;
} wrap_t;

#define W(sym) {#sym, (void *)sym}
static const wrap_t wraps[] = {
    W(cuGetProcAddress_v2), W(cuGetProcAddress), W(cuLaunchKernel), W(cuLaunchKernel_ptsz), W(cuLaunchKernelEx),
    W(cuLaunchKernelEx_ptsz), W(cuLaunchCooperativeKernel), W(cuLaunchCooperativeKernel_ptsz), W(cuGraphLaunch),
    W(cuGraphLaunch_ptsz), W(cuMemAlloc_v2), W(cuMemAllocAsync), W(cuMemAllocAsync_ptsz), W(cuMemFree_v2),
    W(cuMemFreeAsync), W(cuMemFreeAsync_ptsz), W(cuMemcpyHtoD_v2), W(cuMemcpyHtoD_v2_ptds), W(cuMemcpyDtoH_v2),
    W(cuMemcpyDtoH_v2_ptds), W(cuMemcpyHtoDAsync_v2), W(cuMemcpyHtoDAsync_v2_ptsz), W(cuMemcpyDtoHAsync_v2),
    W(cuMemcpyDtoHAsync_v2_ptsz), W(cuMemsetD8_v2), W(cuMemsetD8_v2_ptds), W(cuStreamSynchronize),
    W(cuStreamSynchronize_ptsz), W(cuCtxSynchronize), W(cuModuleGetFunction), W(cuMemCreate), W(cuMemRelease),
    W(cuMemMap), W(cuMemUnmap), W(cuMemAllocHost_v2), W(cuMemHostAlloc), W(cuMemFreeHost), W(cuMemAllocManaged),
    W(cuMemAllocPitch_v2), W(cuMemAllocFromPoolAsync), W(cuMemAllocFromPoolAsync_ptsz), W(cuMemcpy),
    W(cuMemcpy_ptds), W(cuMemcpyAsync), W(cuMemcpyAsync_ptsz), W(cuMemcpyDtoD_v2), W(cuMemcpyDtoD_v2_ptds),
    W(cuMemcpyDtoDAsync_v2), W(cuMemcpyDtoDAsync_v2_ptsz), W(cuMemcpyPeer), W(cuMemcpyPeer_ptds),
    W(cuMemcpyPeerAsync), W(cuMemcpyPeerAsync_ptsz), W(cuMemcpy2D_v2), W(cuMemcpy2D_v2_ptds), W(cuMemcpy2DAsync_v2),
    W(cuMemcpy2DAsync_v2_ptsz), W(cuMemcpy3D_v2), W(cuMemcpy3D_v2_ptds), W(cuMemcpy3DAsync_v2),
    W(cuMemcpy3DAsync_v2_ptsz), W(cuMemsetD8Async), W(cuMemsetD8Async_ptsz), W(cuMemsetD16_v2),
    W(cuMemsetD16_v2_ptds), W(cuMemsetD16Async), W(cuMemsetD16Async_ptsz), W(cuMemsetD32_v2), W(cuMemsetD32_v2_ptds),
    W(cuMemsetD32Async), W(cuMemsetD32Async_ptsz), W(cuStreamWaitEvent), W(cuStreamWaitEvent_ptsz),
    W(cuLaunchHostFunc), W(cuLaunchHostFunc_ptsz), W(cuEventSynchronize), W(cuCtxSynchronize_v2),
};
#define NWRAPS (sizeof wraps / sizeof wraps[0])
static void *reals[NWRAPS];

/* Is `name` what a caller asks for when it wants `full` (cuMemAlloc for
 * cuMemAlloc_v2, cuMemcpyHtoD for cuMemcpyHtoD_v2_ptds)? */
static int asks_for(const char *name, const char *full)
{
    size_t n = strlen(name);
    if (strncmp(name, full, n) != 0)
        return 0;
    const char *rest = full + n;
    if (!strncmp(rest, "_v2", 3))
        rest += 3;
    return !*rest || !strcmp(rest, "_ptsz") || !strcmp(rest, "_ptds");
}

static sp_dlsym_fn real_dlsym;   /* glibc's (below) */

/* dlopen(NULL)'s handle, the main program's link map (the scope it
 * searches is the global one, stepprof's exports included); 0 until the
 * constructor below. */
__attribute__((used, visibility("hidden"))) void *sp_dlsym_main;
__attribute__((constructor(101))) static void find_main_handle(void)
{
    sp_dlsym_main = _r_debug.r_map;
}

/* Our interposer for `real`, which the caller got under `name`, or real. */
static void *wrap(const char *name, void *real)
{
    if (!real || !name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z')
        return real;
    for (size_t i = 0; i < NWRAPS; i++) {
        if (!asks_for(name, wraps[i].name))
            continue;
        void *r = __atomic_load_n(&reals[i], __ATOMIC_RELAXED);
        if (!r) {
            r = sp_real(wraps[i].name);
            __atomic_store_n(&reals[i], r, __ATOMIC_RELAXED);
        }
        if (r == real)
            return wraps[i].ours;
    }
    return real;
}

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t);

SP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status)
{
    gpa2_fn real = (gpa2_fn)sp_real("cuGetProcAddress_v2");
    if (!real)
        return (CUresult)sp_real_missing("cuGetProcAddress_v2");
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = wrap(symbol, *pfn);
    return r;
}

SP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    gpa_fn real = (gpa_fn)sp_real("cuGetProcAddress");
    if (!real)
        return (CUresult)sp_real_missing("cuGetProcAddress");
    CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = wrap(symbol, *pfn);
    return r;
}

/* dlsym: glibc's, found on the first call (the bootstrap is never
 * instrumented: dlsym may run inside a sanitizer's start-up). */
static SP_NO_SANITIZE void *dlsym_bootstrap(void *handle, const char *name);
__attribute__((used)) static sp_dlsym_fn real_dlsym = dlsym_bootstrap;
static SP_NO_SANITIZE void *dlsym_bootstrap(void *handle, const char *name)
{
    sp_dlsym_fn f = sp_glibc_dlsym();
    __atomic_store_n(&real_dlsym, f, __ATOMIC_RELAXED);
    return f(handle, name); /* a sibling call: glibc sees the caller's return address */
}

/* Whether the scope of `map` (a caller's: the global scope, then its own
 * dependencies) defines `name` outside stepprof. */
static SP_NO_SANITIZE int real_outside(void *map, const char *name)
{
    void *q = real_dlsym(map, name);
    return q && !sp_is_ours(q);
}

/* A cu[A-Z]* name, or a cu* name asked of the global scope; RTLD_NEXT
 * passes through (the next object after the caller's, which only glibc can
 * tell). Entered by a jump, so the return
 * address is the caller's. glibc searches RTLD_DEFAULT in the scope of the
 * caller's object: the global scope, then, for an object loaded
 * RTLD_LOCAL (a Python extension), its own dependencies. Asked from here it
 * would see stepprof's scope, the global one only, so a name found only in
 * the caller's dependencies is looked up there (glibc's handle is the
 * object's link map). */
SP_SLOW_ATTRS SP_NO_SANITIZE static void *sp_slow_dlsym(void *handle, const char *name)
{
    if (handle == RTLD_NEXT)
        return real_dlsym(handle, name);
    void *caller = __builtin_return_address(0), *p = real_dlsym(handle, name);
    if (p && !sp_is_ours(p))
        return wrap(name, p);
    Dl_info info;
    void *map = NULL;
    int local = handle == RTLD_DEFAULT && dladdr1(caller, &info, &map, RTLD_DL_LINKMAP) && map;
    if (!p)
        return local ? wrap(name, real_dlsym(map, name)) : NULL;
    /* stepprof's own export (the preload comes before every library in the
     * global scope) only where the caller would find a real definition
     * without stepprof: after stepprof in that scope, or in the caller's own
     * dependencies. Bare, a process that has not loaded CUDA gets NULL, and
     * a program probing for CUDA with dlsym(RTLD_DEFAULT, "cudaMalloc") must
     * not be told it is there. */
    if (!(local && real_outside(map, name)) && !real_dlsym(RTLD_NEXT, name))
        return NULL;   /* dlerror() says what that last, failed lookup said */
    /* A plugin with its own runtime copy gets that copy, as bare. */
    return local ? sp_copies_target(caller, name, p) : p;
}

/* The exported dlsym, in assembly like every interposer entry (hook.h
 * SP_ENTRY): every program and library that looks a symbol up per call (the
 * stand-in's driver does, per launch) pays only the name test before glibc's
 * dlsym, with the caller's return address untouched. */
SP_ENTRY(dlsym, "\tcmpb $0x63, (%rsi)\n"   /* 'c' */
                "\tjne 1f\n"
                "\tcmpb $0x75, 1(%rsi)\n"  /* 'u' */
                "\tjne 1f\n"
                "\tmovzbl 2(%rsi), %eax\n"
                "\tsubl $0x41, %eax\n"     /* 'A'..'Z' */
                "\tcmpl $25, %eax\n"
                "\tjbe sp_slow_dlsym\n"
                "\ttestq %rdi, %rdi\n"     /* other cu* names: RTLD_DEFAULT */
                "\tje sp_slow_dlsym\n"
                "\tcmpq sp_dlsym_main(%rip), %rdi\n"   /* or dlopen(NULL) */
                "\tje sp_slow_dlsym\n"
                "1:\n")