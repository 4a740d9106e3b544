/* inject/nvtx.c — stepprof as the NVTX injection library. NVTX v3 is compiled
 * (hidden) into every DSO that uses it, so the only hook is injection: on its
 * first call each DSO dlopens NVTX_INJECTION64_PATH (set to our own path by
 * the constructor) and calls InitializeInjectionNvtx2, where we fill the slots
 * of the core and domain function tables. Messages are interned (ASCII;
 * registered strings are interned once at registration); a push or start of
 * a range matching the nvtx: step marker is a step boundary, taken before the
 * range is opened so the range belongs to the step it starts. PyTorch's
 * operator ranges go to collectors/ops.c. */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "../collectors/ops.h"
#include "../collectors/ranges.h"
#include "../collectors/strings.h"
#include "../schedule/schedule.h"
#include "hook.h"

#include <dlfcn.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Domain handles point at one of these; NULL is NVTX's default domain. */
typedef struct domain {
    uint32_t name;
    int marker;    /* does the marker's @DOMAIN match: 0 not known yet, 1 no, 2 yes */
} domain_t;

/* Per-string-id marker match cache: 0 unknown, 1 no, 2 yes. Grown under a
 * lock; read without one (a stale 0 only costs a re-match). Published with
 * atomics: a grown array before its capacity (release), so a reader that
 * sees the new capacity (acquire) indexes the new array, never past the old. */
static unsigned char *match_cache;
static size_t match_cap;
static pthread_mutex_t match_lock = PTHREAD_MUTEX_INITIALIZER;

/* Settled once per domain: the glob and the string lock stay off later pushes. */
static int domain_matches(domain_t *d, const char *glob)
{
    int m = __atomic_load_n(&d->marker, __ATOMIC_RELAXED);
    if (!m) {
        m = fnmatch(glob, sp_str_get(d->name), 0) == 0 ? 2 : 1;
        __atomic_store_n(&d->marker, m, __ATOMIC_RELAXED);
    }
    return m == 2;
}

static int marker_matches(uint32_t name, const domain_t *dom)
{
    const sp_config_t *cfg = sp_sched_config();
    if (!cfg || cfg->marker.kind != SP_MARK_NVTX)
        return 0;
    const char *want = cfg->marker.scope;
    if (!want[0] != !dom)   /* a scoped marker matches domain ranges only, a plain one none */
        return 0;
    if (dom && !domain_matches((domain_t *)dom, want))
        return 0;
    size_t cap = __atomic_load_n(&match_cap, __ATOMIC_ACQUIRE);
    unsigned char *cache = __atomic_load_n(&match_cache, __ATOMIC_ACQUIRE);
    unsigned char known = name < cap ? __atomic_load_n(&cache[name], __ATOMIC_RELAXED) : 0;
    if (known)
        return known == 2;
    int m = fnmatch(cfg->marker.name, sp_str_get(name), 0) == 0;
    pthread_mutex_lock(&match_lock);
    if (name >= match_cap) {
        size_t ncap = match_cap ? match_cap : 1024;
        while (ncap <= name)
            ncap *= 2;
        unsigned char *nc = calloc(ncap, 1);
        if (nc) {
            if (match_cache)
                memcpy(nc, match_cache, match_cap);
            /* The old array is leaked on purpose: a reader may still hold it. */
            __atomic_store_n(&match_cache, nc, __ATOMIC_RELEASE);
            __atomic_store_n(&match_cap, ncap, __ATOMIC_RELEASE);
        }
    }
    if (name < match_cap)
        __atomic_store_n(&match_cache[name], (unsigned char)(m ? 2 : 1), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&match_lock);
    return m;
}

static uint32_t attr_name(const nvtxEventAttributes_t *a)
{
    if (!a)
        return sp_str_intern_cached("");
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return sp_str_intern_cached(a->message.ascii);
    case NVTX_MESSAGE_TYPE_REGISTERED:
        return (uint32_t)(uintptr_t)a->message.registered;
    default:
        return sp_str_intern_cached("(unicode NVTX message)");
    }
}

static void open_range(uint32_t name, const domain_t *dom)
{
    if (marker_matches(name, dom))
        sp_sched_boundary();
}

static int push_named(uint32_t name, const domain_t *dom)
{
    open_range(name, dom);
    sp_range_push(name);
    return 0;
}

static nvtxRangeId_t start_named(uint32_t name, const domain_t *dom)
{
    open_range(name, dom);
    return sp_range_start(name);
}

static int nv_RangePushA(const char *m)
{
    return sp_ops_push(m) ? 0 : push_named(sp_str_intern_cached(m), NULL);
}
static int nv_RangePushEx(const nvtxEventAttributes_t *a) { return push_named(attr_name(a), NULL); }
static int nv_RangePop(void) { return sp_range_pop(); }
static nvtxRangeId_t nv_RangeStartA(const char *m) { return start_named(sp_str_intern_cached(m), NULL); }
static nvtxRangeId_t nv_RangeStartEx(const nvtxEventAttributes_t *a) { return start_named(attr_name(a), NULL); }
static void nv_RangeEnd(nvtxRangeId_t id) { sp_range_end(id); }
static void nv_MarkA(const char *m) { sp_range_mark(sp_str_intern_cached(m)); }
static void nv_MarkEx(const nvtxEventAttributes_t *a) { sp_range_mark(attr_name(a)); }

static int nv_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return push_named(attr_name(a), (const domain_t *)d);
}
static int nv_DomainRangePop(nvtxDomainHandle_t d) { (void)d; return sp_range_pop(); }
static nvtxRangeId_t nv_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return start_named(attr_name(a), (const domain_t *)d);
}
static void nv_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; sp_range_end(id); }
static void nv_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { (void)d; sp_range_mark(attr_name(a)); }

static nvtxStringHandle_t nv_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)(uintptr_t)sp_str_intern(s);
}

static nvtxDomainHandle_t nv_DomainCreateA(const char *name)
{
    domain_t *d = calloc(1, sizeof *d);
    if (d)
        d->name = sp_str_intern(name);
    return (nvtxDomainHandle_t)d;
}

/* Domains are never freed: records and handles in other threads may still
 * refer to them, and a program creates a handful. */
static void nv_DomainDestroy(nvtxDomainHandle_t d) { (void)d; }

typedef struct slot_fill {
    unsigned id;
    void *fn;
} slot_fill_t;

static const slot_fill_t core_slots[] = {
    {NVTX_CBID_CORE_MarkEx, (void *)nv_MarkEx},
    {NVTX_CBID_CORE_MarkA, (void *)nv_MarkA},
    {NVTX_CBID_CORE_RangeStartEx, (void *)nv_RangeStartEx},
    {NVTX_CBID_CORE_RangeStartA, (void *)nv_RangeStartA},
    {NVTX_CBID_CORE_RangeEnd, (void *)nv_RangeEnd},
    {NVTX_CBID_CORE_RangePushEx, (void *)nv_RangePushEx},
    {NVTX_CBID_CORE_RangePushA, (void *)nv_RangePushA},
    {NVTX_CBID_CORE_RangePop, (void *)nv_RangePop},
};

static const slot_fill_t core2_slots[] = {
    {NVTX_CBID_CORE2_DomainMarkEx, (void *)nv_DomainMarkEx},
    {NVTX_CBID_CORE2_DomainRangeStartEx, (void *)nv_DomainRangeStartEx},
    {NVTX_CBID_CORE2_DomainRangeEnd, (void *)nv_DomainRangeEnd},
    {NVTX_CBID_CORE2_DomainRangePushEx, (void *)nv_DomainRangePushEx},
    {NVTX_CBID_CORE2_DomainRangePop, (void *)nv_DomainRangePop},
    {NVTX_CBID_CORE2_DomainRegisterStringA, (void *)nv_DomainRegisterStringA},
    {NVTX_CBID_CORE2_DomainCreateA, (void *)nv_DomainCreateA},
    {NVTX_CBID_CORE2_DomainDestroy, (void *)nv_DomainDestroy},
};

static int fill(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module, const slot_fill_t *s, size_t n)
{
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].id < size && table[s[i].id])
            *table[s[i].id] = (NvtxFunctionPointer)s[i].fn;
    return 1;
}

/* Called once per DSO that uses NVTX; must be idempotent and re-entrant. */
SP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
    const NvtxExportTableCallbacks *cb = get_table ? get_table(NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || cb->struct_size < sizeof *cb)
        return 0;
    return fill(cb, NVTX_CB_MODULE_CORE, core_slots, sizeof core_slots / sizeof core_slots[0]) &&
           fill(cb, NVTX_CB_MODULE_CORE2, core2_slots, sizeof core2_slots / sizeof core2_slots[0]);
}

/* fork() copies a lock some other thread (often the exporter) may hold; the
 * child has only the forking thread, so the lock starts over there. */
void sp_nvtx_after_fork_child(void)
{
    pthread_mutex_init(&match_lock, NULL);
}
