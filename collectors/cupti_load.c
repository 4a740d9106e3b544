/* collectors/cupti_load.c — finding and loading libcupti: dlopened (the loader
 * path, CUDA_HOME, /usr/local/cuda, or beside the process's libcudart) with
 * RTLD_LOCAL, every entry point looked up by name, so a machine without CUPTI
 * loads stepprof fine; and CUPTI's words for its error codes. */
#define _GNU_SOURCE
#include "cupti_load.h"
#include "cupti_int.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sp_cupti_api_t sp_cupti_api;

const char *sp_cupti_result_text(CUptiResult r)
{
    const char *s = NULL;
    /* Not after the hand-over (sp_cupti_release): no CUPTI call then. */
    if (__atomic_load_n(&sp_cupti_shared.state, __ATOMIC_ACQUIRE) != SP_CUPTI_HANDED_OVER &&
        sp_cupti_api.result_string && sp_cupti_api.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

int sp_cupti_driver_present(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    int (*version)(int *) = h ? (int (*)(int *))dlsym(h, "cuDriverGetVersion") : NULL;
    int v = 0;
    return version && version(&v) == 0 && v > 0;
}

static int find_cudart_dir(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *n = info->dlpi_name;
    const char *slash = n ? strrchr(n, '/') : NULL;
    if (slash && strstr(slash, "libcudart.so")) {
        snprintf(out, PATH_MAX, "%.*s", (int)(slash - n), n);
        return 1;
    }
    return 0;
}

/* The loader path first (that is where a test stand-in or an LD_LIBRARY_PATH
 * override lives), then the toolkit, then beside the process's libcudart. */
void *sp_cupti_open(void)
{
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    char path[PATH_MAX], dir[PATH_MAX] = "";
    const char *home = getenv("CUDA_HOME");
    const char *roots[] = {home, "/usr/local/cuda"};
    for (size_t i = 0; i < 2 && !h; i++) {
        if (!roots[i])
            continue;
        snprintf(path, sizeof path, "%s/lib64/libcupti.so.13", roots[i]);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(path, sizeof path, "%s/extras/CUPTI/lib64/libcupti.so.13", roots[i]);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!h && dl_iterate_phdr(find_cudart_dir, dir) && dir[0]) {
        snprintf(path, sizeof path, "%s/libcupti.so.13", dir);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    return h;
}

#define LOOKUP(h, field, sym) (*(void **)&sp_cupti_api.field = dlsym(h, sym))

int sp_cupti_load_api(void *h)
{
    return LOOKUP(h, subscribe, "cuptiSubscribe") && LOOKUP(h, unsubscribe, "cuptiUnsubscribe") &&
           LOOKUP(h, register_callbacks, "cuptiActivityRegisterCallbacks") &&
           LOOKUP(h, enable, "cuptiActivityEnable") && LOOKUP(h, disable, "cuptiActivityDisable") &&
           LOOKUP(h, flush_all, "cuptiActivityFlushAll") && LOOKUP(h, next_record, "cuptiActivityGetNextRecord") &&
           LOOKUP(h, dropped, "cuptiActivityGetNumDroppedRecords") && LOOKUP(h, timestamp, "cuptiGetTimestamp") &&
           LOOKUP(h, result_string, "cuptiGetResultString") && (LOOKUP(h, finalize, "cuptiFinalize"), LOOKUP(h, callback_name, "cuptiGetCallbackName"),
            LOOKUP(h, set_thread_id_type, "cuptiSetThreadIdType"), 1);
}
