/* collectors/cupti_names.c — names of CUPTI callback ids as the trace draws
 * them ("cudaLaunchKernel", not CUPTI's "cudaLaunchKernel_v7000"). A name is
 * a process-lifetime interned string (collectors/strings.c), never a buffer:
 * recording threads and any number of exporters may hold several at once.
 * The usual ids are cached per domain so a lookup is one atomic load. Before
 * CUPTI is handed over to a program's torch.profiler every id is looked up
 * once (sp_cupti_names_prefetch): after it, the exporter still names records
 * taken before, but stepprof makes no CUPTI call. */
#include "cupti_window.h"

#include "cupti.h"
#include "strings.h"

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
