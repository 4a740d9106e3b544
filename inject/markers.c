/* inject/markers.c — step markers seen by the runtime interposers: every N-th
 * launch of a kernel whose demangled name matches a glob, and
 * cudaProfilerStart/Stop. The match result is cached per launch pointer, so
 * each distinct kernel is demangled and matched once; the cache
 * (markers.h sp_mark_cache) is read without a lock (pointer and verdict in one
 * atomic word), inline by the launch interposers, so a launch of a kernel
 * that never matches costs a load and a compare. */
#define _GNU_SOURCE
#include "markers.h"

#include "../collectors/events.h"
#include "../collectors/kernels.h"
#include "../schedule/schedule.h"

#include <fnmatch.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

int sp_marker_flags;

_Atomic uint64_t sp_mark_cache[SP_MARK_CACHE];
static _Atomic unsigned long launches; /* of matching kernels */

/* Matches the full demangled name, or its bare form: without the return type
 * that template kernels carry and without the parameter list. */
static int name_matches(const char *glob, const char *name)
{
    if (fnmatch(glob, name, 0) == 0)
        return 1;
    char bare[1024];
    const char *start = name;
    const char *paren = strchr(name, '(');
    const char *space = strchr(name, ' ');
    const char *angle = strchr(name, '<');
    if (space && paren && space < paren && (!angle || space < angle))
        start = space + 1;
    size_t len = paren ? (size_t)(paren - start) : strlen(start);
    if (len >= sizeof bare)
        len = sizeof bare - 1;
    memcpy(bare, start, len);
    bare[len] = 0;
    return fnmatch(glob, bare, 0) == 0;
}

/* sp_mark_forget calls so far: a verdict worked out while a kernel was
 * renamed is taken back instead of staying cached with the old name's answer. */
static _Atomic unsigned long forgets;

static int matches(const sp_config_t *cfg, const void *fn, int is_handle)
{
    _Atomic uint64_t *slot = &sp_mark_cache[sp_mark_slot(fn)];
    uint64_t v = atomic_load_explicit(slot, memory_order_relaxed), f = (uint64_t)(uintptr_t)fn;
    if (v == f || v == ~f)
        return v != f;
    unsigned long seen = atomic_load_explicit(&forgets, memory_order_seq_cst);
    if (is_handle == SP_MARK_CUFUNCTION) {
        sp_drv_name_function(fn);
        is_handle = 0;  /* named like a stub (driver_api_hooks.c) */
    }
    const char *name = sp_kern_name(fn, is_handle);
    int m = name && name_matches(cfg->marker.name, name);
    uint64_t verdict = m ? ~f : f;
    /* Store, then look for a forget; a forget counts, then looks at the slot
     * (both seq_cst): one of the two sees the other, so a verdict on the old
     * name never outlives the rename. */
    atomic_store_explicit(slot, verdict, memory_order_seq_cst);
    if (atomic_load_explicit(&forgets, memory_order_seq_cst) != seen)
        atomic_compare_exchange_strong(slot, &verdict, 0);
    return m;
}

void sp_mark_forget(const void *fn)
{
    atomic_fetch_add_explicit(&forgets, 1, memory_order_seq_cst);
    _Atomic uint64_t *slot = &sp_mark_cache[sp_mark_slot(fn)];
    uint64_t v = atomic_load_explicit(slot, memory_order_seq_cst), f = (uint64_t)(uintptr_t)fn;
    if (fn && (v == f || v == ~f))
        atomic_compare_exchange_strong_explicit(slot, &v, 0, memory_order_relaxed, memory_order_relaxed);
}

void sp_mark_kernel_slow(const void *fn, int is_handle, uint32_t *window)
{
    const sp_config_t *cfg = sp_sched_config();
    if (!cfg)
        return;
    if (!matches(cfg, fn, is_handle))
        return; /* the common case */
    unsigned long n = atomic_fetch_add_explicit(&launches, 1, memory_order_relaxed);
    int hit = n % (unsigned long)(cfg->marker.every_n > 0 ? cfg->marker.every_n : 1) == 0;
    if (hit) {
        sp_sched_boundary();
        *window = sp_ev_gate_load();
    }
}

void sp_mark_profiler_slow(int start, uint32_t *window)
{
    sp_sched_profiler_api(start);
    *window = sp_ev_gate_load();
}
