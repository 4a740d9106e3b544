/* collectors/cupti_names.c — names of CUPTI callback ids as the trace draws
 * them ("cudaLaunchKernel", not CUPTI's "cudaLaunchKernel_v7000"). A name is
 * a process-lifetime interned string (collectors/strings.c), never a buffer:
 * recording threads and any number of exporters may hold several at once.
 * The usual ids are cached per domain so a lookup is one atomic load. Before
 * CUPTI is handed over to a program's torch.profiler every id is looked up
 * once (sp_cupti_names_prefetch): after it, the exporter still names records
 * taken before, but stepprof makes no CUPTI call. Also which ids are pure
 * queries (sp_cupti_api_is_query), decided from the name once per id. */
#include "cupti_window.h"

#include "api.h"
#include "cupti.h"
#include "strings.h"

#include <cupti_runtime_cbid.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CACHED_IDS 2048u

static const char *_Atomic cached[2][CACHED_IDS];

const char *sp_cupti_api_name(int driver, uint32_t cbid)
{
    driver = !!driver;
    if (cbid < CACHED_IDS) {
        const char *c = atomic_load_explicit(&cached[driver][cbid], memory_order_acquire);
        if (c)
            return c;
    }
    const char *name = sp_cupti_callback_name(driver, cbid);
    if (!name)
        return NULL;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", name);
    /* Only the runtime's version suffix ("cudaLaunchKernel_v7000"): a driver
     * name's "_v2" is part of the exported symbol (cuMemAlloc_v2). */
    char *v = strrchr(buf, '_');
    if (v && v[1] == 'v' && strlen(v + 2) >= 4 && strspn(v + 2, "0123456789") == strlen(v + 2))
        *v = 0;
    uint32_t id = sp_str_intern(buf);
    if (!id)
        return NULL;
    const char *s = sp_str_get(id);
    if (cbid < CACHED_IDS)
        atomic_store_explicit(&cached[driver][cbid], s, memory_order_release);
    return s;
}

void sp_cupti_names_prefetch(void)
{
    for (int driver = 0; driver < 2; driver++)
        for (uint32_t cbid = 1; cbid < CACHED_IDS; cbid++)
            sp_cupti_api_name(driver, cbid);
}

/* The driver calls a CUPTI-only record is kept for: launches, copies, sets,
 * syncs, allocations and frees (GPU work and what waits for it), module and
 * library loads (lazy loading's time) and the once-per-process set-up
 * (cuInit, context creation), which is where a first step's time goes. */
static const char *const driver_kept[] = {
    "cuLaunch",            "cuGraphLaunch",    "cuMemcpy",           "cuMemset",
    "cuMemAlloc",          "cuMemHostAlloc",   "cuMemFree",          "cuMemPrefetch",
    "cuMemCreate",         "cuMemRelease",     "cuMemMap",           "cuMemUnmap",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuStreamWaitEvent",
    "cuModuleLoad",        "cuLibraryLoad",    "cuInit",             "cuDevicePrimaryCtxRetain",
    "cuCtxCreate",
};

static int has_row(int driver, uint32_t cbid)
{
    for (size_t i = 0; i < SP_API_COUNT; i++)
        if (sp_api_table[i].driver == driver && (uint32_t)sp_api_table[i].cbid == cbid)
            return 1;
    return 0;
}

static int classify(int driver, uint32_t cbid)
{
    if (has_row(driver, cbid))   /* an intercepted call's twin: pairing decides, never the filter */
        return 0;
    if (!driver)
        return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 ||
               cbid == CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020 ||
               cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020;
    const char *name = sp_cupti_api_name(1, cbid);
    if (!name)   /* unknown to this CUPTI: kept, as nothing says what it is */
        return 0;
    for (size_t i = 0; i < sizeof driver_kept / sizeof driver_kept[0]; i++)
        if (strncmp(name, driver_kept[i], strlen(driver_kept[i])) == 0)
            return 0;
    return 1;
}

/* 0: not yet decided, else 1 + the verdict. */
static _Atomic unsigned char verdict[2][CACHED_IDS];

int sp_cupti_api_is_query(int driver, uint32_t cbid)
{
    driver = !!driver;
    if (cbid >= CACHED_IDS)
        return classify(driver, cbid);
    unsigned char v = atomic_load_explicit(&verdict[driver][cbid], memory_order_relaxed);
    if (!v) {
        v = (unsigned char)(1 + classify(driver, cbid));
        atomic_store_explicit(&verdict[driver][cbid], v, memory_order_relaxed);
    }
    return v - 1;
}
