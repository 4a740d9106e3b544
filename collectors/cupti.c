/* collectors/cupti.c — the CUPTI activity collector. libcupti is dlopened
 * (CUDA_HOME, the loader path, or beside the loaded libcudart) and every entry
 * point used is looked up by name, so a machine without CUPTI loads us fine.
 * Buffers come from a small free list refilled off the hot path, capped by
 * cupti_buffer_mb; a full cap makes CUPTI drop (and count) records rather than
 * stall a launch. Completed buffers are parsed into sp_gpu_event_t records
 * under one mutex that is never held while calling into CUPTI; those waiting
 * for their window to close are bounded by cupti_buffer_mb's bytes and the
 * cycle cap, past which they are dropped and counted. CUPTI's clock
 * (CLOCK_REALTIME on Linux) is mapped to CLOCK_MONOTONIC by an offset measured
 * with back-to-back reads until a window close measures it on the records
 * (collectors/cupti_window.c, which also decides window membership); no timestamp
 * callback, because CUPTI would call it twice per API call. */
#define _GNU_SOURCE
#include "cupti.h"
#include "cupti_load.h"
#include "cupti_window.h"

#include "clock.h"
#include "events.h"
#include "log.h"
#include "memory.h"
#include "strings.h"

#include <cupti.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_BYTES (4u << 20)

#define api sp_cupti_api   /* collectors/cupti_load.c */

void *sp_real(const char *name); /* inject/lookup.c: also RTLD_LOCAL runtimes */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* want_on, is_on and takes_pending; taken before `lock`, never inside it. */
static pthread_mutex_t kinds_lock = PTHREAD_MUTEX_INITIALIZER;
static int takes_pending;      /* windows closed whose records the exporter has not collected yet */
/* Held while a collect syncs and flushes; at exit the program's thread flushes
 * under it once (sp_cupti_exit_flush) while CUPTI's own threads still run, and
 * later collects only take (the exit holds the program's threads, CUPTI's
 * worker among them: a flush then would wait for it forever). */
static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;
static int exit_flushed;
static int collect_device = -1;   /* set by a collect's cudaSetDevice; -1: never (the runtime's 0) */
static __thread int collector;     /* this is stepprof's collecting thread (sp_cupti_collector_thread) */

void sp_cupti_collector_thread(void)
{
    collector = 1;
}
static uint64_t dropped_base;  /* sp_cupti_dropped() at the last collect */
static int state;              /* 0 not tried, 1 active, -1 degraded, 2 a fork child of an active process,
                                  HANDED_OVER: the program's torch.profiler has CUPTI (sp_cupti_release) */
#define HANDED_OVER (-2)
/* Under kinds_lock. Window closes that collect: every one while CUPTI is
 * active; after a hand-over, only the close of the window it happened in
 * (numbered handover_close; 0 = none), which takes what the hand-over flushed. */
static uint64_t closes, handover_close;
static int last_close_collects;
static int want_on, is_on, with_memory;
static CUpti_SubscriberHandle subscriber;
static int64_t clock_offset;   /* CLOCK_MONOTONIC - CUPTI clock */
static int offset_measured;    /* clock_offset from stepprof's own record (cupti_window.c) */
static size_t buf_cap, buf_live;
static void *free_bufs[8];
static int nfree;
static uint64_t dropped_total;

static sp_gpu_event_t *recs;   /* parsed records not yet taken */
static size_t nrecs, caprecs;
static size_t rec_limit = SIZE_MAX; /* bound on nrecs: cupti_buffer_mb and the cycle cap */
static size_t rec_by_bytes = SIZE_MAX; /* cupti_buffer_mb's part of it */
static uint64_t recs_dropped;  /* parsed records past rec_limit, cumulative */
static uint64_t drops_pending; /* of those, since the last take or window open */
static uint64_t window_begin;  /* CLOCK_MONOTONIC ns when the last window opened */
/* stepprof's own device queries, on CUPTI's clock: their API records are not
 * the program's calls. own_end is UINT64_MAX while the queries run. */
static struct {
    uint32_t tid;
    uint64_t begin, end;
} own_calls;

/* The kinds parse() reads (no EXTERNAL_CORRELATION: no external ids are
 * pushed; no OVERHEAD: nothing reads CUPTI's own overhead), with the names a
 * refused enable is reported under. */
static const struct {
    CUpti_ActivityKind kind;
    const char *name;
} base_kinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels"},      {CUPTI_ACTIVITY_KIND_MEMCPY, "copies"},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "peer copies"},            {CUPTI_ACTIVITY_KIND_MEMSET, "memsets"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API calls"},      {CUPTI_ACTIVITY_KIND_DRIVER, "driver API calls"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization"}, {CUPTI_ACTIVITY_KIND_MEMORY2, "memory"},
};
static unsigned refused_reported;   /* bit i: base_kinds[i]'s refusal was reported */

/* The offset from the narrowest of a few back-to-back reads: one read that
 * the thread was preempted in (a loaded machine) would be off by the whole
 * preemption, and every record of the window drawn that far from its call,
 * on either side of the window's bounds. */
static void calibrate(void)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8 && best > 1000; i++) {
        uint64_t c = 0;
        uint64_t a = sp_clock_mono_ns();
        if (api.timestamp(&c) != CUPTI_SUCCESS)
            return;
        uint64_t b = sp_clock_mono_ns();
        if (b - a < best) {
            best = b - a;
            clock_offset = (int64_t)(a + (b - a) / 2) - (int64_t)c;
        }
    }
}

static uint64_t to_mono(uint64_t t)
{
    return t ? (uint64_t)((int64_t)t + clock_offset) : 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    void *b = NULL;
    pthread_mutex_lock(&lock);
    if (nfree)
        b = free_bufs[--nfree];
    else if (buf_live + BUF_BYTES <= buf_cap && posix_memalign(&b, 8, BUF_BYTES) == 0)
        buf_live += BUF_BYTES;
    pthread_mutex_unlock(&lock);
    *buf = b;
    *size = b ? BUF_BYTES : 0;
    *max_records = 0;
}

/* A record past rec_limit is counted as dropped unless it began before the
 * window opened: CUPTI may deliver a warmup step's records after that (a
 * buffer with work still in flight is held back), and those are not the
 * window's, as the warmup's kept records are not. */
static sp_gpu_event_t *new_rec(uint64_t start_mono)
{
    if (nrecs >= rec_limit) {
        if (start_mono >= window_begin) {
            recs_dropped++;
            drops_pending++;
        }
        return NULL;
    }
    if (nrecs == caprecs) {
        size_t n = caprecs ? caprecs * 2 : 4096;
        if (n > rec_limit)
            n = rec_limit;
        sp_gpu_event_t *v = realloc(recs, n * sizeof *v);
        if (!v)
            return NULL;
        recs = v;
        caprecs = n;
    }
    sp_gpu_event_t *e = &recs[nrecs++];
    memset(e, 0, sizeof *e);
    return e;
}

/* A record with the fields every GPU activity kind has; NULL when out of
 * memory or past rec_limit (counted). */
static sp_gpu_event_t *gpu_rec(uint32_t kind, uint64_t start, uint64_t end, uint32_t device, uint32_t context,
                               uint32_t stream, uint32_t corr)
{
    if (!start || !end) {
        /* Incomplete (a forced flush hands over buffers with records still
         * running): no time to draw it at; counted with the drops. */
        recs_dropped++;
        drops_pending++;
        return NULL;
    }
    sp_gpu_event_t *e = new_rec(to_mono(start));
    if (e) {
        e->kind = kind;
        e->start = to_mono(start);
        e->end = to_mono(end);
        e->device = device;
        e->context = context;
        e->stream = stream;
        e->correlation = corr;
    }
    return e;
}

/* profile_memory: what CUPTI saw allocated or released goes to the memory
 * collector, which drops the calls an interposer already reported. */
static void memory_record(const CUpti_ActivityMemory4 *m)
{
    int kind;
    switch (m->memoryKind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
        kind = SP_MEM_DEVICE;
        break;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
        kind = SP_MEM_MANAGED;
        break;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
        kind = SP_MEM_PINNED;
        break;
    default:
        return;   /* pageable memory, and static memory that comes with loaded modules */
    }
    int op = m->memoryOperationType;
    if (op == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION || op == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        sp_mem_cupti_record(op == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, kind, m->address, m->bytes,
                            to_mono(m->timestamp), (int)m->deviceId, m->streamId);
}

/* stepprof's own device queries and the driver calls they make: on the
 * querying thread, between the two reads of CUPTI's clock, with a device
 * query's name (the name too, in case CUPTI's clock and its records' differ). */
static int own_call(int driver, const CUpti_ActivityAPI *a)
{
    const char *name;
    if (!own_calls.begin || a->threadId != own_calls.tid || a->start < own_calls.begin || a->start > own_calls.end ||
        !(name = sp_cupti_callback_name(driver, a->cbid)))
        return 0;
    return driver ? strncmp(name, "cuDevice", 8) == 0
                  : strncmp(name, "cudaGetDeviceCount", 18) == 0 || strncmp(name, "cudaGetDeviceProperties", 23) == 0;
}

/* MEMCPY (CUpti_ActivityMemcpy6) and MEMCPY2 (CUpti_ActivityMemcpyPtoP4)
 * name their common fields alike. */
#define COPY_RECORD(m)                                                                                          \
    do {                                                                                                       \
        if (!(e = gpu_rec(SP_GPU_MEMCPY, (m)->start, (m)->end, (m)->deviceId, (m)->contextId, (m)->streamId,  \
                          (m)->correlationId)))                                                                \
            return;                                                                                            \
        e->bytes = (m)->bytes;                                                                                 \
        e->copy_kind = (m)->copyKind;                                                                          \
        e->src_kind = (m)->srcKind;                                                                            \
        e->dst_kind = (m)->dstKind;                                                                            \
        e->graph_id = (m)->graphId;                                                                            \
    } while (0)

/* Called with `lock` held. */
static void parse(const CUpti_Activity *r)
{
    sp_gpu_event_t *e;
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)r;
        if (!(e = gpu_rec(SP_GPU_KERNEL, k->start, k->end, k->deviceId, k->contextId, k->streamId, k->correlationId)))
            return;
        e->queued = to_mono(k->queued);
        e->name = sp_str_intern(k->name ? k->name : "kernel");
        e->grid[0] = k->gridX, e->grid[1] = k->gridY, e->grid[2] = k->gridZ;
        e->block[0] = k->blockX, e->block[1] = k->blockY, e->block[2] = k->blockZ;
        e->static_smem = k->staticSharedMemory;
        e->dynamic_smem = k->dynamicSharedMemory;
        e->registers = k->registersPerThread;
        e->graph_id = k->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        COPY_RECORD((const CUpti_ActivityMemcpy6 *)(const void *)r);
        break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:   /* a peer-to-peer copy (cudaMemcpyPeer*) */
        COPY_RECORD((const CUpti_ActivityMemcpyPtoP4 *)(const void *)r);
        break;
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)r;
        if (!(e = gpu_rec(SP_GPU_MEMSET, m->start, m->end, m->deviceId, m->contextId, m->streamId, m->correlationId)))
            return;
        e->bytes = m->bytes;
        e->value = m->memoryKind;
        e->graph_id = m->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *a = (const void *)r;
        if (own_call(r->kind == CUPTI_ACTIVITY_KIND_DRIVER, a))
            return;
        uint32_t kind = r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? SP_GPU_RUNTIME : SP_GPU_DRIVER;
        if (!(e = gpu_rec(kind, a->start, a->end, 0, 0, 0, a->correlationId)))
            return;
        e->cbid = a->cbid;
        e->tid = a->threadId;
        e->result = (int32_t)a->returnValue;
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const void *)r;
        if (!(e = gpu_rec(SP_GPU_SYNC, s->start, s->end, 0, s->contextId, s->streamId, s->correlationId)))
            return;
        e->sync_type = (uint8_t)s->type;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        memory_record((const void *)r);
        break;
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&lock);
    while (valid && api.next_record(buf, valid, &r) == CUPTI_SUCCESS)
        parse(r);
    if (nfree < (int)(sizeof free_bufs / sizeof free_bufs[0])) {
        free_bufs[nfree++] = buf;
        buf = NULL;
    } else {
        buf_live -= BUF_BYTES;
    }
    pthread_mutex_unlock(&lock);
    free(buf);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
    (void)ud, (void)d, (void)id, (void)data;
}

/* A kind CUPTI refuses to enable is reported once per process, by name. */
static void set_kinds(int on)
{
    CUptiResult (*fn)(CUpti_ActivityKind) = on ? api.enable : api.disable;
    size_t n = sizeof base_kinds / sizeof base_kinds[0] - !with_memory;   /* MEMORY2 last */
    for (size_t i = 0; i < n; i++) {
        CUptiResult r = fn(base_kinds[i].kind);
        if (on && r != CUPTI_SUCCESS && !(refused_reported & 1u << i)) {
            refused_reported |= 1u << i;
            sp_log(SP_LOG_WARN, "CUPTI refused to record %s (activity kind %d: %s, CUPTI error %d); the trace has "
                   "none", base_kinds[i].name, (int)base_kinds[i].kind, sp_cupti_result_text(r), (int)r);
        }
    }
    is_on = on;
}

static int degrade(const char *why, CUptiResult r)
{
    if (r)
        sp_log(SP_LOG_WARN, "%s (%s, CUPTI error %d); GPU activity is not recorded, profiling continues on "
               "interposition and NVTX", why, sp_cupti_result_text(r), (int)r);
    else
        sp_log(SP_LOG_WARN, "%s; GPU activity is not recorded, profiling continues on interposition and NVTX", why);
    state = -1;
    return -1;
}

static int owned_by_other_tool(void)
{
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    return getenv("NSYS_PROFILING_SESSION_ID") || (inj && strstr(inj, "ToolsInjection"));
}

int sp_cupti_init(int memory, long buffer_mb)
{
    pthread_mutex_lock(&lock);
    if (state) {
        pthread_mutex_unlock(&lock);
        return state > 0 ? 0 : -1;
    }
    pthread_mutex_unlock(&lock);
    if (state == 2) {
        /* CUPTI's copy of our parent's subscription lives on here, so a new
         * one would fail as if another tool held CUPTI; and CUDA cannot be
         * used in a fork child of a process that initialized it. */
        sp_log(SP_LOG_DEBUG, "a fork child of a process that used CUPTI: GPU activity is not recorded here");
        state = -1;
        return -1;
    }
    with_memory = memory;
    buf_cap = (size_t)(buffer_mb > 4 ? buffer_mb : 4) << 20;
    /* Parsed records get the activity buffers' byte budget (no callback yet: no lock). */
    rec_by_bytes = buf_cap / sizeof(sp_gpu_event_t);
    rec_limit = rec_by_bytes < rec_limit ? rec_by_bytes : rec_limit;
    if (owned_by_other_tool())
        return degrade("Nsight Systems owns CUPTI in this process", 0);
    void *h = sp_cupti_open();
    if (!h)
        return degrade("libcupti.so.13 not found (CUDA_HOME, loader path, beside libcudart)", 0);
    if (!sp_cupti_load_api(h))
        return degrade("libcupti.so.13 lacks an entry point stepprof needs", 0);
    CUptiResult r = api.subscribe(&subscriber, on_callback, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return degrade("another tool (nsys, torch.profiler, compute-sanitizer) already subscribed to CUPTI", r);
    if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED || r == CUPTI_ERROR_INVALID_DEVICE)
        return degrade("CUPTI cannot record activity here (no GPU or driver?)", r);
    if (r != CUPTI_SUCCESS)
        return degrade("cuptiSubscribe failed", r);
    /* API records must carry the OS thread id (gettid) that host records
     * have; CUPTI's default is pthread_self() truncated to 32 bits. */
    if (api.set_thread_id_type)
        api.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    r = api.register_callbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) {
        /* Probe with one kind: without a driver this is where CUPTI says no (999). */
        r = api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (r == CUPTI_SUCCESS)
            api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
    if (r != CUPTI_SUCCESS) {
        api.unsubscribe(subscriber);
        return degrade("CUPTI cannot record activity here (no GPU or driver?)", r);
    }
    calibrate();
    pthread_mutex_lock(&lock);
    int handed = state == HANDED_OVER;   /* released while this was setting up */
    if (!handed)
        state = 1;
    pthread_mutex_unlock(&lock);
    if (handed) {
        api.unsubscribe(subscriber);
        return -1;
    }
    sp_cupti_devices_pending = 1;
    if (want_on)
        set_kinds(1);
    sp_log(SP_LOG_DEBUG, "CUPTI active");
    return 0;
}

int sp_cupti_active(void)
{
    pthread_mutex_lock(&kinds_lock);
    int r = state > 0 || last_close_collects;   /* read right after a close: is it collected? */
    pthread_mutex_unlock(&kinds_lock);
    return r;
}

/* Kinds go on at warmup: fill the free list then, so CUPTI's first buffer
 * requests in the recorded steps do not allocate 4 MB on a launching thread. */
static void preallocate(void)
{
    pthread_mutex_lock(&lock);
    while (nfree < 2 && buf_live + BUF_BYTES <= buf_cap) {
        void *b = NULL;
        if (posix_memalign(&b, 8, BUF_BYTES) != 0)
            break;
        free_bufs[nfree++] = b;
        buf_live += BUF_BYTES;
    }
    pthread_mutex_unlock(&lock);
}

/* While the exporter has yet to collect a closed window, kinds stay on (its
 * own timed sync needs its RUNTIME record); it applies want_on after. */
void sp_cupti_enable(int on)
{
    pthread_mutex_lock(&kinds_lock);
    want_on = on;
    if (state > 0 && !takes_pending && is_on != on) {
        if (on)
            preallocate();
        set_kinds(on);
    }
    pthread_mutex_unlock(&kinds_lock);
}

void sp_cupti_window_open(void)
{
    if (state <= 0 && state != HANDED_OVER)
        return;
    /* kinds_lock held over the flush: a hand-over (sp_cupti_release) waits for it. */
    pthread_mutex_lock(&kinds_lock);
    int pending = takes_pending;
    /* With a collect pending the records stay: that collect keeps only what
     * started after its window, and the next one only what is its own. */
    if (!pending && state > 0)
        api.flush_all(0);
    if (!pending && state == HANDED_OVER)
        handover_close = 0;   /* what was flushed at the hand-over came before this window */
    pthread_mutex_unlock(&kinds_lock);
    pthread_mutex_lock(&lock);
    window_begin = sp_clock_mono_ns();
    if (!pending) {
        nrecs = 0;
        /* Records past the bound before the window (warmup) were not the
         * window's: no longer counted, as those kept are discarded. */
        recs_dropped -= drops_pending;
        drops_pending = 0;
    }
    pthread_mutex_unlock(&lock);
}

/* stepprof's own device queries (collectors/cupti_devices.c) run between
 * sp_cupti_own_calls(1) and sp_cupti_own_calls(0), on one thread. */
void sp_cupti_own_calls(int begin)
{
    uint64_t t = 0;
    if (state <= 0 || api.timestamp(&t) != CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&lock);
    if (begin) {
        own_calls.tid = (uint32_t)gettid();
        own_calls.begin = t;
        own_calls.end = UINT64_MAX;
    } else if (own_calls.begin) {
        own_calls.end = t;
    }
    pthread_mutex_unlock(&lock);
}

/* stepprof's own runtime calls are not the program's: the runtime reaches the
 * driver through cuGetProcAddress, i.e. through our hooks, and the recursion
 * guard keeps those inner calls ours. */
static int own_begin(void)
{
    sp_thread_t *t = sp_ev_thread();
    int held = t ? t->in_hook : 0;
    if (t)
        t->in_hook = 1;
    return held;
}

static void own_end(int held)
{
    sp_thread_t *t = sp_ev_thread();
    if (t)
        t->in_hook = held;
}

void sp_cupti_window_close(int *device)
{
    *device = -1;
    pthread_mutex_lock(&kinds_lock);
    last_close_collects = state > 0 || closes < handover_close;
    if (last_close_collects) {
        closes++;
        takes_pending++;
    }
    pthread_mutex_unlock(&kinds_lock);
    if (!last_close_collects)
        return;
    /* The thread's device as its cudaSetDevice calls left it (inject/runtime_hooks.c),
     * not cudaGetDevice: CUPTI would record that call in the program's window. */
    *device = sp_mem_device();
}

/* The exporter's side of a window close: the device sync (timed: its record
 * fixes CUPTI's offset, cupti_window.c), the flush, the take, the drops. */
size_t sp_cupti_collect(int sync, int device, uint64_t begin, uint64_t end, sp_gpu_event_t **out,
                        uint64_t *dropped)
{
    *out = NULL;
    *dropped = 0;
    if (state <= 0 && state != HANDED_OVER)
        return 0;
    uint64_t h0 = 0, h1 = 0;
    pthread_mutex_lock(&collect_lock);
    int live = state > 0;   /* not handed over (sp_cupti_release holds collect_lock) */
    if (sync && !exit_flushed && live) {
        /* The device the program's thread had current at the close: syncing the
         * exporter thread's default device instead would miss the window's work
         * and create a context on a GPU the process never used. */
        cudaError_t (*dev_sync)(void) = (cudaError_t(*)(void))sp_real("cudaDeviceSynchronize");
        cudaError_t (*set_device)(int) = (cudaError_t(*)(int))sp_real("cudaSetDevice");
        int held = own_begin();
        /* A device is set only when it changes: a one-GPU process never makes the call. */
        if (collector && device >= 0 && device != (collect_device < 0 ? 0 : collect_device) && set_device &&
            set_device(device) == cudaSuccess)
            collect_device = device;
        if (dev_sync && (!collector || device < 0 || device == (collect_device < 0 ? 0 : collect_device))) {
            h0 = sp_clock_mono_ns();
            dev_sync();
            h1 = sp_clock_mono_ns();
        }
        own_end(held);
    }
    /* Forced: the program goes on launching after the close, so the buffer that
     * holds the window's last records also holds later, unfinished ones, and a
     * default flush would hold it back (Kineto flushes forced too). Those later
     * records are kept for the windows they belong to (sp_cupti_take_window). */
    if (!exit_flushed && live)
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&lock);
    uint32_t me = (uint32_t)gettid();
    if (h1 && sp_cupti_marker_fix(recs, &nrecs, me, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, h0, h1,
                                  &clock_offset))
        offset_measured = 1;
    if (collector)   /* its cudaSetDevice, and what the runtime did inside its calls */
        sp_cupti_drop_thread(recs, &nrecs, me);
    size_t n = sp_cupti_take_window(recs, &nrecs, begin, end, out);
    drops_pending = 0;
    pthread_mutex_unlock(&lock);
    if (!offset_measured && !exit_flushed && live)
        calibrate();   /* a measured offset beats back-to-back reads of another clock */
    pthread_mutex_unlock(&collect_lock);
    uint64_t d = sp_cupti_dropped();
    *dropped = d - dropped_base;
    dropped_base = d;
    pthread_mutex_lock(&kinds_lock);
    if (takes_pending > 0 && --takes_pending == 0 && state > 0 && is_on != want_on) {
        if (want_on)
            preallocate();
        set_kinds(want_on);
    }
    pthread_mutex_unlock(&kinds_lock);
    return n;
}

void sp_cupti_exit_flush(void)
{
    if (state <= 0)
        return;
    pthread_mutex_lock(&collect_lock);   /* an exporter's sync and flush in progress ends first */
    if (!exit_flushed)
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    exit_flushed = 1;
    pthread_mutex_unlock(&collect_lock);
}

/* CUPTI's own name of a callback id (collectors/cupti_names.c strips and keeps it). */
const char *sp_cupti_callback_name(int driver, uint32_t cbid)
{
    const char *name = NULL;
    if (!api.callback_name ||
        api.callback_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) !=
            CUPTI_SUCCESS)
        return NULL;
    return name;
}

uint64_t sp_cupti_dropped(void)
{
    size_t d = 0;
    if (state > 0 && api.dropped(NULL, 0, &d) == CUPTI_SUCCESS)
        dropped_total += d;
    pthread_mutex_lock(&lock);
    uint64_t mine = recs_dropped;
    pthread_mutex_unlock(&lock);
    return dropped_total + mine;
}

void sp_cupti_set_cycle_cap(uint64_t max_records)
{
    pthread_mutex_lock(&lock);
    rec_limit = max_records && max_records < rec_by_bytes ? (size_t)max_records : rec_by_bytes;
    pthread_mutex_unlock(&lock);
}

void sp_cupti_shutdown(void)
{
    pthread_mutex_lock(&kinds_lock);
    int busy = takes_pending;
    pthread_mutex_unlock(&kinds_lock);
    if (state <= 0 || busy)
        return;   /* an exporter still collecting (the exit's wait ran out): CUPTI is left alone */
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (is_on)
        set_kinds(0);
    api.unsubscribe(subscriber);
    if (api.finalize)
        api.finalize();
    state = -1;
}

/* The program starts torch.profiler, whose Kineto needs CUPTI to itself (one
 * subscriber; its buffer callbacks replace ours). Called on the program's
 * thread before Kineto touches CUPTI: kinds off, then a forced flush (no
 * device sync: a sync on the program's thread could break a stream capture)
 * so that every buffer of ours comes back, its records kept for the window
 * in progress, then unsubscribe; after that no CUPTI call is made again in
 * this process (not even cuptiFinalize at exit: Kineto's). GPU work still
 * running at that moment comes back incomplete and is counted as dropped.
 * Returns 1 if stepprof held CUPTI or could still have taken it. */
int sp_cupti_release(void)
{
    pthread_mutex_lock(&collect_lock);
    pthread_mutex_lock(&kinds_lock);
    pthread_mutex_lock(&lock);
    int was = state;
    if (state >= 0)
        state = HANDED_OVER;   /* a later sp_cupti_init does nothing */
    pthread_mutex_unlock(&lock);
    if (was == 1) {
        if (is_on)
            set_kinds(0);
        if (!exit_flushed)
            api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        api.unsubscribe(subscriber);
        handover_close = closes + 1;
    }
    pthread_mutex_unlock(&kinds_lock);
    pthread_mutex_unlock(&collect_lock);
    return was == 0 || was == 1;
}

void sp_cupti_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_mutex_init(&kinds_lock, NULL);
    pthread_mutex_init(&collect_lock, NULL);
    exit_flushed = 0;
    state = state > 0 ? 2 : state == HANDED_OVER ? HANDED_OVER : 0;
    want_on = is_on = takes_pending = last_close_collects = 0;
    closes = handover_close = 0;
    dropped_base = 0;
    nrecs = 0;
}
