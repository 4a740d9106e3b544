/* inject/nvtx.c — stepprof as the NVTX injection library. NVTX v3 is compiled
 * (hidden) into every DSO that uses it, so the only hook is injection: on its
 * first call each DSO dlopens NVTX_INJECTION64_PATH (set to our own path by
 * the constructor) and calls InitializeInjectionNvtx2, where we fill the slots
 * of the core and domain function tables. ASCII messages go to
 * collectors/ranges.c as text, which names them only while a window records
 * (and then without interning on this thread); registered strings are
 * interned once at registration. A push or start of a range matching the
 * nvtx: step marker is a step boundary, taken before the range is opened so
 * the range belongs to the step it starts; the marker is matched on the text
 * itself (inject/nvtx_glob.c, compiled once after activation), without a
 * lock or a per-name cache. PyTorch's operator ranges go to
 * collectors/ops.c. */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "../collectors/ops.h"
#include "../collectors/ranges.h"
#include "../collectors/strings.h"
#include "../schedule/schedule.h"
#include "hook.h"
#include "nvtx_glob.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Domain handles point at one of these; NULL is NVTX's default domain. */
typedef struct domain {
    uint32_t name;
    int marker;    /* does the marker's @DOMAIN match: 0 not known yet, 1 no, 2 yes */
} domain_t;

/* A message: text, or an id registered with nvtxDomainRegisterString. */
typedef struct msg {
    const char *text;
    uint32_t id;
} msg_t;

/* The nvtx: marker as compiled at the first range after activation (a fork
 * child settles it again): whether a plain or a domain-scoped range can be
 * a step boundary, and the glob. */
enum { MK_UNSETTLED, MK_SETTLING, MK_NONE, MK_PLAIN, MK_SCOPED };
static _Atomic int mk_state;
static sp_glob_t mk_glob;

static void after_fork_child(void)
{
    atomic_store_explicit(&mk_state, MK_UNSETTLED, memory_order_relaxed);
}

static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

static int state_of(const sp_config_t *cfg)
{
    return cfg->marker.kind != SP_MARK_NVTX ? MK_NONE : cfg->marker.scope[0] ? MK_SCOPED : MK_PLAIN;
}

/* Cold: before activation (MK_UNSETTLED kept), or once after it. A thread
 * that finds another compiling the glob compiles its own copy into *local
 * (and points *g at it) rather than wait. */
static int settle_marker(const sp_glob_t **g, sp_glob_t *local)
{
    const sp_config_t *cfg = sp_sched_config();
    if (!cfg)
        return MK_UNSETTLED;
    int expect = MK_UNSETTLED;
    if (!atomic_compare_exchange_strong(&mk_state, &expect, MK_SETTLING)) {
        if (expect != MK_SETTLING)
            return expect;
        sp_glob_compile(local, cfg->marker.name);
        *g = local;
        return state_of(cfg);
    }
    sp_glob_compile(&mk_glob, cfg->marker.name);
    atomic_store_explicit(&mk_state, state_of(cfg), memory_order_release);
    return state_of(cfg);
}

/* Settled once per domain: the glob stays off later pushes. */
static int domain_matches(domain_t *d, const char *glob)
{
    int m = __atomic_load_n(&d->marker, __ATOMIC_RELAXED);
    if (!m) {
        sp_glob_t g;
        sp_glob_compile(&g, glob);
        m = sp_glob_match(&g, sp_str_get(d->name)) ? 2 : 1;
        __atomic_store_n(&d->marker, m, __ATOMIC_RELAXED);
    }
    return m == 2;
}

/* Only when a marker may be an nvtx: one (the common idle case, no such
 * marker, is one load in the caller). */
static __attribute__((noinline)) int marker_matches(msg_t m, const domain_t *dom)
{
    const sp_glob_t *g = &mk_glob;
    sp_glob_t local;
    int st = atomic_load_explicit(&mk_state, memory_order_acquire);
    if (st < MK_NONE)
        st = settle_marker(&g, &local);
    if (st != (dom ? MK_SCOPED : MK_PLAIN))  /* a scoped marker matches domain ranges only, a plain one none */
        return 0;
    if (dom && !domain_matches((domain_t *)dom, sp_sched_config()->marker.scope))
        return 0;
    return sp_glob_match(g, m.text ? m.text : sp_str_get(m.id));
}

static msg_t attr_msg(const nvtxEventAttributes_t *a)
{
    if (!a)
        return (msg_t){"", 0};
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return (msg_t){a->message.ascii ? a->message.ascii : "", 0};
    case NVTX_MESSAGE_TYPE_REGISTERED:
        return (msg_t){NULL, (uint32_t)(uintptr_t)a->message.registered};
    default:
        return (msg_t){"(unicode NVTX message)", 0};
    }
}

/* No nvtx: marker: one load. A plain one on a plain range's text: the glob
 * directly. */
static inline void check_marker(msg_t m, const domain_t *dom)
{
    int st = atomic_load_explicit(&mk_state, memory_order_acquire);
    if (__builtin_expect(st == MK_NONE, 1))
        return;
    if (st == MK_PLAIN && !dom && m.text ? sp_glob_match(&mk_glob, m.text) : marker_matches(m, dom))
        sp_sched_boundary();
}

static int push_named(msg_t m, const domain_t *dom)
{
    check_marker(m, dom);
    return sp_range_push(m.text, m.id);
}

static nvtxRangeId_t start_named(msg_t m, const domain_t *dom)
{
    check_marker(m, dom);
    return sp_range_start(m.text, m.id);
}

static msg_t ascii(const char *m)
{
    return (msg_t){m ? m : "", 0};
}

/* Without an nvtx: marker, a range that will not be kept is pushed without
 * reading its text (whether it is a PyTorch operator does not matter then),
 * and a recorded one with a single pass over it, which also tells that it is
 * no operator (no ','). */
static int nv_RangePushA(const char *m)
{
    if (atomic_load_explicit(&mk_state, memory_order_relaxed) == MK_NONE) {
        uint32_t w = sp_ev_gate_load();
        if (__builtin_expect(!sp_range_gate_keeps(w), 1))
            return sp_range_push_idle(w);
        if (sp_win_records(w)) {
            int d = sp_range_push_plain(m, w);
            if (__builtin_expect(d != SP_RANGE_NOT_PLAIN, 1))
                return d;
        }
    }
    return sp_ops_push(m) ? 0 : push_named(ascii(m), NULL);
}
static int nv_RangePushEx(const nvtxEventAttributes_t *a) { return push_named(attr_msg(a), NULL); }
static int nv_RangePop(void) { return sp_range_pop(); }
static nvtxRangeId_t nv_RangeStartA(const char *m) { return start_named(ascii(m), NULL); }
static nvtxRangeId_t nv_RangeStartEx(const nvtxEventAttributes_t *a) { return start_named(attr_msg(a), NULL); }
static void nv_RangeEnd(nvtxRangeId_t id) { sp_range_end(id); }
static void nv_MarkA(const char *m) { sp_range_mark(ascii(m).text, 0); }
static void nv_MarkEx(const nvtxEventAttributes_t *a)
{
    msg_t m = attr_msg(a);
    sp_range_mark(m.text, m.id);
}

static int nv_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return push_named(attr_msg(a), (const domain_t *)d);
}
static int nv_DomainRangePop(nvtxDomainHandle_t d) { (void)d; return sp_range_pop(); }
static nvtxRangeId_t nv_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return start_named(attr_msg(a), (const domain_t *)d);
}
static void nv_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; sp_range_end(id); }
static void nv_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    nv_MarkEx(a);
}

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
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    pthread_once(&fork_once, register_fork_handler);
    return fill(cb, NVTX_CB_MODULE_CORE, core_slots, sizeof core_slots / sizeof core_slots[0]) &&
           fill(cb, NVTX_CB_MODULE_CORE2, core2_slots, sizeof core2_slots / sizeof core2_slots[0]);
}
