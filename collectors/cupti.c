/* collectors/cupti.c — the control side of the CUPTI activity collector.
 * libcupti is dlopened (CUDA_HOME, the loader path, or beside the loaded
 * libcudart; collectors/cupti_load.c) and every entry point used is looked up
 * by name, so a machine without CUPTI loads us fine. This file owns the
 * subscription and its failures, the activity kinds on and off, window open
 * and close, the exporter's collect (device sync, forced flush, take), the
 * exit flush and shutdown, and the hand-over to a program's torch.profiler.
 * Parsing and the records kept are collectors/cupti_records.c, the activity
 * buffers collectors/cupti_buffers.c (shared state in
 * collectors/cupti_int.h); window membership and the measured clock offset
 * are collectors/cupti_window.c. No timestamp callback, because CUPTI would
 * call it twice per API call. */
#define _GNU_SOURCE
#include "cupti.h"
#include "cupti_int.h"
#include "cupti_load.h"
#include "cupti_window.h"

#include "clock.h"
#include "events.h"
#include "log.h"
#include "memory.h"

#include <cupti.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define api sp_cupti_api   /* collectors/cupti_load.c */
#define sh sp_cupti_shared  /* collectors/cupti_records.c */

void *sp_real(const char *name); /* inject/lookup.c: also RTLD_LOCAL runtimes */

/* want_on, is_on and takes_pending; taken before sh.lock, never inside it. */
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
/* Under kinds_lock. Window closes that collect: every one while CUPTI is
 * active; after a hand-over, only the close of the window it happened in
 * (numbered handover_close; 0 = none), which takes what the hand-over flushed. */
static uint64_t closes, handover_close;
static int last_close_collects;
static int want_on, is_on, with_memory;
static CUpti_SubscriberHandle subscriber;
static int offset_measured;    /* clock_offset from stepprof's own record (cupti_window.c) */

/* The kinds parse() reads (cupti_records.c; no EXTERNAL_CORRELATION: no external ids are
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

/* collectors/cupti.h: 1 while a runtime launch's end is a second clock read.
 * With launch_end_mode -1 (launch_durations: auto) that is whenever CUPTI is
 * not recording runtime API calls (runtime_kind_on: the RUNTIME kind on and
 * not refused), or the open window's records are being lost (records_lost). Every
 * write is atomic: under kinds_lock, or at set-up, fork and shutdown, or a
 * loss (no lock). A driver launch reads twice but with `start`
 * (sp_drv_launch_end_clock): CUPTI records no DRIVER record of the driver
 * calls a runtime makes, which its interposer cannot tell from the program's
 * own (a statically linked runtime: cuBLAS, cuDNN; H200, 2026-11-27). */
_Atomic int sp_launch_end_clock = 1;
int sp_drv_launch_end_clock = 1;
static int launch_end_mode = -1, runtime_kind_on;
static _Atomic int records_lost;

static void update_launch_end(void)
{
    int v = launch_end_mode >= 0 ? launch_end_mode : !(is_on && runtime_kind_on) || atomic_load(&records_lost);
    atomic_store(&sp_launch_end_clock, v);
    if (!v && launch_end_mode < 0 && atomic_load(&records_lost))
        atomic_store(&sp_launch_end_clock, 1);   /* capped meanwhile: its store may have come first */
}

void sp_cupti_launch_records_lost(void)
{
    if (atomic_exchange(&records_lost, 1) || launch_end_mode >= 0)
        return;
    atomic_store(&sp_launch_end_clock, 1);
}

void sp_cupti_set_launch_durations(int end_clock)
{
    launch_end_mode = end_clock;
    sp_drv_launch_end_clock = end_clock != 0;
    update_launch_end();
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
        if (base_kinds[i].kind == CUPTI_ACTIVITY_KIND_RUNTIME)
            runtime_kind_on = on && r == CUPTI_SUCCESS;
        if (on && r != CUPTI_SUCCESS && !(refused_reported & 1u << i)) {
            refused_reported |= 1u << i;
            sp_log(SP_LOG_WARN, "CUPTI refused to record %s (activity kind %d: %s, CUPTI error %d); the trace has "
                   "none", base_kinds[i].name, (int)base_kinds[i].kind, sp_cupti_result_text(r), (int)r);
        }
    }
    is_on = on;
    update_launch_end();
}

static int degrade(const char *why, CUptiResult r)
{
    if (r)
        sp_log(SP_LOG_WARN, "%s (%s, CUPTI error %d); GPU activity is not recorded, profiling continues on "
               "interposition and NVTX", why, sp_cupti_result_text(r), (int)r);
    else
        sp_log(SP_LOG_WARN, "%s; GPU activity is not recorded, profiling continues on interposition and NVTX", why);
    sh.state = -1;
    return -1;
}

static int owned_by_other_tool(void)
{
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    return getenv("NSYS_PROFILING_SESSION_ID") || (inj && strstr(inj, "ToolsInjection"));
}

int sp_cupti_init(int memory, long buffer_mb)
{
    pthread_mutex_lock(&sh.lock);
    int was = sh.state;
    if (was == 2)
        sh.state = -1;
    pthread_mutex_unlock(&sh.lock);
    if (was == 2) {
        /* CUPTI's copy of our parent's subscription lives on here, so a new
         * one would fail as if another tool held CUPTI; and CUDA cannot be
         * used in a fork child of a process that initialized it. */
        sp_log(SP_LOG_DEBUG, "a fork child of a process that used CUPTI: GPU activity is not recorded here");
        return -1;
    }
    if (was)
        return was > 0 ? 0 : -1;
    with_memory = memory;
    sp_cupti_set_buffer_cap(buffer_mb);
    if (owned_by_other_tool())
        return degrade("Nsight Systems owns CUPTI in this process", 0);
    void *h = sp_cupti_open();
    if (!h)
        return degrade("libcupti.so.13 not found (CUDA_HOME, loader path, beside libcudart)", 0);
    if (!sp_cupti_load_api(h))
        return degrade("libcupti.so.13 lacks an entry point stepprof needs", 0);
    /* NVIDIA's CUPTI 13.2 (pip's nvidia-cuda-cupti 13.2.86) overflows the
     * stack in cuptiSubscribe where no working libcuda.so.1 loads (13.0 says
     * 999); CUPTI loads the driver there anyway, so loading it first costs
     * nothing. */
    if (!sp_cupti_driver_present())
        return degrade("CUPTI cannot record activity here (no GPU or driver?): no working libcuda.so.1", 0);
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
    r = api.register_callbacks(sp_cupti_buffer_requested, sp_cupti_buffer_completed);
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
    sp_cupti_calibrate();
    pthread_mutex_lock(&sh.lock);
    int handed = sh.state == SP_CUPTI_HANDED_OVER;   /* released while this was setting up */
    if (!handed)
        sh.state = 1;
    pthread_mutex_unlock(&sh.lock);
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
    int r = sh.state > 0 || last_close_collects;   /* read right after a close: is it collected? */
    pthread_mutex_unlock(&kinds_lock);
    return r;
}


/* While the exporter has yet to collect a closed window, kinds stay on (its
 * own timed sync needs its RUNTIME record); it applies want_on after. */
void sp_cupti_enable(int on)
{
    pthread_mutex_lock(&kinds_lock);
    want_on = on;
    if (sh.state > 0 && !takes_pending && is_on != on) {
        if (on)
            sp_cupti_preallocate(0);
        set_kinds(on);
    }
    pthread_mutex_unlock(&kinds_lock);
}

void sp_cupti_window_open(void)
{
    if (sh.state <= 0 && sh.state != SP_CUPTI_HANDED_OVER)
        return;
    /* kinds_lock held over the flush: a hand-over (sp_cupti_release) waits for it. */
    pthread_mutex_lock(&kinds_lock);
    int pending = takes_pending;
    /* With a collect pending the records stay: that collect keeps only what
     * started after its window, and the next one only what is its own. */
    if (!pending && sh.state > 0)
        api.flush_all(0);
    if (!pending && sh.state == SP_CUPTI_HANDED_OVER)
        handover_close = 0;   /* what was flushed at the hand-over came before this window */
    /* A new window: a loss that lasts (no buffer, the cap reached by a
     * pending collect's records) is reported again by the next record. */
    if (atomic_exchange(&records_lost, 0))
        update_launch_end();
    pthread_mutex_unlock(&kinds_lock);
    pthread_mutex_lock(&sh.lock);
    sh.window_begin = sp_clock_mono_ns();
    __atomic_store_n(&sh.window_end, UINT64_MAX, __ATOMIC_RELEASE);
    if (!pending) {
        sh.recs.nwork = sh.recs.ncalls = 0;
        sh.nqueries = 0;
        sh.queries_unkept = 0;
        sh.window_corr = 0;   /* with a collect pending, the closed window's GPU work still counts */
        /* Records past the bound before the window (warmup) were not the
         * window's: no longer counted, as those kept are discarded. */
        sh.recs_dropped -= sh.drops_pending;
        sh.drops_pending = 0;
    }
    pthread_mutex_unlock(&sh.lock);
}

/* stepprof's own runtime calls are not the program's: the runtime reaches the
 * driver through cuGetProcAddress, i.e. through our hooks, and the recursion
 * guard keeps those inner calls ours. */
int sp_cupti_guard_take(void)
{
    sp_thread_t *t = sp_ev_thread();
    int held = t ? t->in_hook : 0;
    if (t)
        t->in_hook = 1;
    return held;
}

void sp_cupti_guard_give(int held)
{
    sp_thread_t *t = sp_ev_thread();
    if (t)
        t->in_hook = held;
}

void sp_cupti_window_close(int *device)
{
    *device = -1;
    /* No lock: CUPTI's thread may hold sh.lock over a whole buffer, and this is the program's thread. */
    __atomic_store_n(&sh.window_end, sp_clock_mono_ns(), __ATOMIC_RELEASE);
    pthread_mutex_lock(&kinds_lock);
    last_close_collects = sh.state > 0 || closes < handover_close;
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
size_t sp_cupti_collect(int sync, int device, uint64_t begin, uint64_t end, sp_gpu_recs_t *out,
                        uint64_t *dropped, uint64_t *filtered, uint64_t *cold_gen)
{
    memset(out, 0, sizeof *out);
    *dropped = 0;
    *filtered = 0;
    *cold_gen = 0;
    if (sh.state <= 0 && sh.state != SP_CUPTI_HANDED_OVER)
        return 0;
    uint64_t h0 = 0, h1 = 0;
    pthread_mutex_lock(&collect_lock);
    int live = sh.state > 0;   /* not handed over (sp_cupti_release holds collect_lock) */
    if (sync && !exit_flushed && live) {
        /* The device the program's thread had current at the close: syncing the
         * exporter thread's default device instead would miss the window's work
         * and create a context on a GPU the process never used. */
        cudaError_t (*dev_sync)(void) = (cudaError_t(*)(void))sp_real("cudaDeviceSynchronize");
        cudaError_t (*set_device)(int) = (cudaError_t(*)(int))sp_real("cudaSetDevice");
        int held = sp_cupti_guard_take();
        sp_cupti_query_devices_again();   /* does nothing once a device is known */
        /* A device is set only when it changes: a one-GPU process never makes the call. */
        if (collector && device >= 0 && device != (collect_device < 0 ? 0 : collect_device) && set_device &&
            set_device(device) == cudaSuccess)
            collect_device = device;
        if (dev_sync && (!collector || device < 0 || device == (collect_device < 0 ? 0 : collect_device))) {
            h0 = sp_clock_mono_ns();
            dev_sync();
            h1 = sp_clock_mono_ns();
        }
        sp_cupti_guard_give(held);
    }
    /* Forced: the program goes on launching after the close, so the buffer that
     * holds the window's last records also holds later, unfinished ones, and a
     * default flush would hold it back (Kineto flushes forced too). Those later
     * records are kept for the windows they belong to (sp_cupti_take_window). */
    uint64_t gen = 0;
    if (!exit_flushed && live) {
        gen = sp_cupti_release_pages(1);   /* the window's records are parsed here: their buffer pages go back */
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        sp_cupti_release_pages(0);
    }
    pthread_mutex_lock(&sh.lock);
    uint32_t me = (uint32_t)gettid();
    int64_t offset_was = sh.clock_offset;
    if (h1 && sp_cupti_marker_fix(&sh.recs, me, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, h0, h1,
                                  &sh.clock_offset))
        offset_measured = 1;
    if (collector)   /* its cudaSetDevice, and what the runtime did inside its calls */
        sp_cupti_drop_thread(&sh.recs, me);
    size_t n = sp_cupti_take_window(&sh.recs, begin, end, out);
    *cold_gen = gen;
    *filtered = sp_cupti_take_queries(sh.queries, &sh.nqueries, sh.clock_offset - offset_was, begin, end,
                                       collector ? me : 0) + sh.queries_unkept;
    sh.queries_unkept = 0;
    sh.drops_pending = 0;
    pthread_mutex_unlock(&sh.lock);
    if (!offset_measured && !exit_flushed && live)
        sp_cupti_calibrate();   /* a measured offset beats back-to-back reads of another clock */
    pthread_mutex_unlock(&collect_lock);
    uint64_t d = sp_cupti_dropped();
    *dropped = d - dropped_base;
    dropped_base = d;
    pthread_mutex_lock(&kinds_lock);
    if (takes_pending > 0 && --takes_pending == 0 && sh.state > 0 && is_on != want_on) {
        if (want_on)
            sp_cupti_preallocate(gen);
        set_kinds(want_on);
    }
    pthread_mutex_unlock(&kinds_lock);
    return n;
}

void sp_cupti_exit_flush(void)
{
    if (sh.state <= 0)
        return;
    pthread_mutex_lock(&collect_lock);   /* an exporter's sync and flush in progress ends first */
    if (!exit_flushed)
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    exit_flushed = 1;
    pthread_mutex_unlock(&collect_lock);
}



void sp_cupti_shutdown(void)
{
    pthread_mutex_lock(&kinds_lock);
    int busy = takes_pending;
    pthread_mutex_unlock(&kinds_lock);
    if (sh.state <= 0 || busy)
        return;   /* an exporter still collecting (the exit's wait ran out): CUPTI is left alone */
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (is_on)
        set_kinds(0);
    api.unsubscribe(subscriber);
    if (api.finalize)
        api.finalize();
    sh.state = -1;
}

/* The program starts torch.profiler, whose Kineto needs CUPTI to itself (one
 * subscriber; its buffer callbacks replace ours). Called on the program's
 * thread before Kineto touches CUPTI: kinds off, then a forced flush (no
 * device sync: a sync on the program's thread could break a stream capture)
 * so that every buffer of ours comes back, its records kept for the window
 * in progress, then unsubscribe; after that no CUPTI call is made again in
 * this process (not even cuptiFinalize at exit: Kineto's; nor a name lookup:
 * every callback id's name is kept first). GPU work still
 * running at that moment comes back incomplete and is counted as dropped.
 * Returns 1 if stepprof held CUPTI or could still have taken it. */
int sp_cupti_release(void)
{
    if (sh.state == 1)
        sp_cupti_names_prefetch();   /* the exporter names records after the hand-over too */
    pthread_mutex_lock(&collect_lock);
    pthread_mutex_lock(&kinds_lock);
    pthread_mutex_lock(&sh.lock);
    int was = sh.state;
    if (sh.state >= 0)
        sh.state = SP_CUPTI_HANDED_OVER;   /* a later sp_cupti_init does nothing */
    pthread_mutex_unlock(&sh.lock);
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
    pthread_mutex_init(&sh.lock, NULL);
    pthread_mutex_init(&kinds_lock, NULL);
    pthread_mutex_init(&collect_lock, NULL);
    exit_flushed = 0;
    sh.state = sh.state > 0 ? 2 : sh.state == SP_CUPTI_HANDED_OVER ? SP_CUPTI_HANDED_OVER : 0;
    sp_cupti_devices_pending = 0;   /* CUDA is not for a fork child of a process that used it */
    want_on = is_on = takes_pending = last_close_collects = 0;
    atomic_store(&records_lost, 0);
    update_launch_end();
    closes = handover_close = 0;
    dropped_base = 0;
    sh.recs.nwork = sh.recs.ncalls = 0;
    sh.nqueries = 0;
    sh.queries_unkept = 0;
}
