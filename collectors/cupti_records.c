/* collectors/cupti_records.c — the record side of the CUPTI collector:
 * completed activity buffers (collectors/cupti_buffers.c) parsed into
 * sp_gpu_event_t records (API calls into the smaller sp_gpu_api_t) under
 * sp_cupti_shared.lock, which is never held while calling into CUPTI; the
 * records kept for their window, bounded by cupti_buffer_mb's bytes and the
 * cycle cap, past which they are dropped and counted; CUPTI's clock
 * (CLOCK_REALTIME on Linux) mapped to CLOCK_MONOTONIC by an offset from
 * back-to-back reads until a window close measures it on the records
 * (collectors/cupti_window.c); stepprof's own device queries left out; each
 * context's device, learned from the work records, for the sync records that
 * name a context alone. The control side (enable, windows, collect,
 * hand-over) is collectors/cupti.c. */
#define _GNU_SOURCE
#include "cupti.h"
#include "cupti_int.h"
#include "cupti_load.h"
#include "cupti_window.h"

#include "clock.h"
#include "log.h"
#include "memory.h"
#include "strings.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RELEASE_BYTES (256u << 10)

#define api sp_cupti_api   /* collectors/cupti_load.c */
_Static_assert(sizeof(sp_gpu_event_t) == 88, "a parsed CUPTI record of GPU work is 88 bytes");
_Static_assert(sizeof(sp_gpu_api_t) == 40, "a parsed CUPTI record of an API call is 40 bytes");

#define sh sp_cupti_shared

sp_cupti_shared_t sp_cupti_shared = {.lock = PTHREAD_MUTEX_INITIALIZER, .window_end = UINT64_MAX};

static uint64_t dropped_total;
static size_t capqueries;
static size_t rec_limit = SIZE_MAX; /* bound on the records kept, both kinds: cupti_buffer_mb and the cycle cap */
static size_t rec_by_bytes = SIZE_MAX; /* cupti_buffer_mb's part of it */
static uint64_t walk_end;   /* sh.window_end as read once for the buffer being parsed */
/* stepprof's own device queries, one bracket per try, on CUPTI's clock: their
 * API records are not the program's calls. A bracket's end is UINT64_MAX
 * while its queries run; n_own brackets are closed. */
static struct {
    uint32_t tid;
    uint64_t begin, end;
} own_calls[SP_DEVQ_TRIES];
static int n_own;

static size_t buf_cap;   /* cupti_buffer_mb's bytes */

void sp_cupti_set_buffer_cap(long buffer_mb)
{
    buf_cap = (size_t)(buffer_mb > 4 ? buffer_mb : 4) << 20;
    sp_cupti_buf_cap(buf_cap);
    /* Parsed records get the activity buffers' byte budget (no callback yet: no lock). */
    rec_by_bytes = buf_cap / sizeof(sp_gpu_event_t);
    rec_limit = rec_by_bytes < rec_limit ? rec_by_bytes : rec_limit;
}


/* The offset from the narrowest of a few back-to-back reads: one read that
 * the thread was preempted in (a loaded machine) would be off by the whole
 * preemption, and every record of the window drawn that far from its call,
 * on either side of the window's bounds. */
static int read_cupti(void *arg, uint64_t *value)
{
    (void)arg;
    return api.timestamp(value) != CUPTI_SUCCESS;
}

void sp_cupti_calibrate(void)
{
    uint64_t c = 0, mid = sp_clock_bracket(read_cupti, NULL, 8, &c);
    if (mid)
        sh.clock_offset = (int64_t)mid - (int64_t)c;
}

static uint64_t to_mono(uint64_t t)
{
    return t ? (uint64_t)((int64_t)t + sh.clock_offset) : 0;
}

/* A record past rec_limit is counted as dropped only if it is the window's:
 * not when it began before the window opened (CUPTI may deliver a warmup
 * step's records after that: a buffer with work still in flight is held
 * back), as the warmup's kept records are not the window's; nor when it began
 * after the window closed, unless it is GPU work an API call of the window
 * launched (sp_cupti_take_window's rule). Kinds stay on from the close until
 * the exporter's collect, so CUPTI records the calls the program makes
 * meanwhile, and the collect's own: no window's, and as many as the program
 * gets through before the exporter comes to it. */
static int window_drop(uint64_t start_mono, int api_call, uint32_t corr)
{
    if (start_mono < sh.window_begin)
        return 0;
    if (start_mono <= walk_end)
        return 1;
    return !api_call && corr && corr <= sh.window_corr;
}

/* Room for one more record in *v (*n of *cap, each `size` bytes); NULL
 * past rec_limit (counted when the window's) or out of memory. */
static void *new_rec(void **v, size_t *n, size_t *cap, size_t size, uint64_t start_mono, int api_call, uint32_t corr)
{
    if (sh.recs.nwork + sh.recs.ncalls >= rec_limit) {
        if (window_drop(start_mono, api_call, corr)) {
            sh.recs_dropped++;
            sh.drops_pending++;
            sp_cupti_launch_records_lost();
        }
        return NULL;
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4096;
        if (c > rec_limit)
            c = rec_limit;
        void *grown = realloc(*v, c * size);
        if (!grown)
            return NULL;
        *v = grown;
        *cap = c;
    }
    void *e = (char *)*v + size * (*n)++;
    memset(e, 0, size);
    return e;
}

/* A query record left out (cupti_api_filter: queries): its start and thread
 * kept apart from the records, in at most cupti_buffer_mb's bytes. */
static void keep_query(uint64_t start_mono, uint32_t tid)
{
    if (sh.nqueries == capqueries) {
        size_t bound = buf_cap ? buf_cap / sizeof(sp_query_rec_t) : SIZE_MAX;
        size_t n = capqueries ? capqueries * 2 : 4096;
        n = n < bound ? n : bound;
        sp_query_rec_t *v = n > capqueries ? realloc(sh.queries, n * sizeof *v) : NULL;
        if (!v) {
            sh.queries_unkept++;
            return;
        }
        sh.queries = v;
        capqueries = n;
    }
    sh.queries[sh.nqueries++] = (sp_query_rec_t){start_mono, tid};
}

void sp_cupti_set_query_filter(int on)
{
    pthread_mutex_lock(&sh.lock);
    sh.filter_queries = on;
    pthread_mutex_unlock(&sh.lock);
}

/* A record's times, or 0 when it is incomplete (a forced flush hands over
 * buffers with records still running): no time to draw it at; counted with
 * the window's drops when one of the window's calls launched it (or its
 * launcher is unknown). GPU work launched after the close is no window's: on
 * an H200, back-to-back windows of a loop that never syncs showed one such
 * record at some closes, with every window's kernels there. */
static int complete(uint64_t start, uint64_t end, uint32_t corr)
{
    if (start && end)
        return 1;
    if (!corr || corr <= sh.window_corr) {
        sh.recs_dropped++;
        sh.drops_pending++;
    }
    return 0;
}

/* Context id -> device id, for CUPTI's synchronization records, which carry
 * a context id and no device (Kineto maps them alike): learned from every
 * record that carries both (kernels, copies, peer copies, sets), whatever its
 * window, kept for the process. A handful of contexts a device: a fixed
 * table, each slot one atomic word, (device + 1) << 32 | context, 0 while
 * free, filled in order and never emptied. Written where records are parsed
 * (CUPTI's completion thread, a collect's or a window open's flush: under
 * sh.lock, but a free slot is claimed by CAS all the same); read by the
 * exporter, with no lock. A full table forgets further contexts (one line
 * says so): their syncs are drawn on GPU 0. */
#define CTX_SLOTS 64
static uint64_t ctx_dev[CTX_SLOTS];

static void learn_context(uint32_t context, uint32_t device)
{
    if (device == UINT32_MAX)
        return;
    uint64_t want = (uint64_t)(device + 1) << 32 | context;
    for (int i = 0; i < CTX_SLOTS; i++) {
        uint64_t cur = __atomic_load_n(&ctx_dev[i], __ATOMIC_ACQUIRE);
        if (!cur && __atomic_compare_exchange_n(&ctx_dev[i], &cur, want, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
            return;
        if ((uint32_t)cur == context)   /* known (cur: the slot's word, also when the CAS lost) */
            return;
    }
    static int said;   /* sh.lock held */
    if (!said++)
        sp_log(SP_LOG_WARN, "more than %d CUDA contexts seen: synchronizations on later ones are drawn on GPU 0",
               CTX_SLOTS);
}

int sp_cupti_context_device(uint32_t context)
{
    for (int i = 0; i < CTX_SLOTS; i++) {
        uint64_t cur = __atomic_load_n(&ctx_dev[i], __ATOMIC_ACQUIRE);
        if (!cur)
            return -1;
        if ((uint32_t)cur == context)
            return (int)((cur >> 32) - 1);
    }
    return -1;
}

/* A record with the fields every GPU activity kind has; NULL when out of
 * memory or past rec_limit (counted). */
static sp_gpu_event_t *gpu_rec(uint32_t kind, uint64_t start, uint64_t end, uint32_t device, uint32_t context,
                               uint32_t stream, uint32_t corr)
{
    if (kind != SP_GPU_SYNC)
        learn_context(context, device);   /* also from a record not kept: its context is the same */
    if (!complete(start, end, corr))
        return NULL;
    void *v = sh.recs.work;
    sp_gpu_event_t *e = new_rec(&v, &sh.recs.nwork, &sh.recs.capwork, sizeof *e, to_mono(start), 0, corr);
    sh.recs.work = v;
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

static void api_rec(uint32_t kind, const CUpti_ActivityAPI *a)
{
    if (!complete(a->start, a->end, a->correlationId))
        return;
    void *v = sh.recs.calls;
    sp_gpu_api_t *e = new_rec(&v, &sh.recs.ncalls, &sh.recs.capcalls, sizeof *e, to_mono(a->start), 1, a->correlationId);
    sh.recs.calls = v;
    if (!e)
        return;
    *e = (sp_gpu_api_t){to_mono(a->start), to_mono(a->end), kind, a->correlationId, a->cbid, a->threadId,
                        (int32_t)a->returnValue};
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
    int in = 0;
    for (int i = 0; i <= n_own && i < SP_DEVQ_TRIES && !in; i++)
        in = own_calls[i].begin && a->threadId == own_calls[i].tid && a->start >= own_calls[i].begin &&
             a->start <= own_calls[i].end;
    if (!in || !(name = sp_cupti_api_name(driver, a->cbid)))
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

/* Called with sh.lock held. */
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
        if (sh.filter_queries && sp_cupti_api_is_query(kind == SP_GPU_DRIVER, a->cbid)) {
            if (a->start)
                keep_query(to_mono(a->start), a->threadId);
            return;
        }
        api_rec(kind, a);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const void *)r;
        /* No device in the record: the exporter's view asks sp_cupti_context_device. */
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

static void note_window_call(const CUpti_Activity *r)
{
    if (r->kind != CUPTI_ACTIVITY_KIND_RUNTIME && r->kind != CUPTI_ACTIVITY_KIND_DRIVER)
        return;
    const CUpti_ActivityAPI *a = (const void *)r;
    uint64_t start = to_mono(a->start);
    if (a->start && start >= sh.window_begin && start <= walk_end && a->correlationId > sh.window_corr)
        sh.window_corr = a->correlationId;
}

void CUPTIAPI sp_cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&sh.lock);
    walk_end = __atomic_load_n(&sh.window_end, __ATOMIC_ACQUIRE);
    /* The window's API calls first: a kernel's record may come before its launch's (CUPTI writes an
     * API record when the call returns), and whether its drop is the window's depends on it. */
    while (valid && api.next_record(buf, valid, &r) == CUPTI_SUCCESS)
        note_window_call(r);
    r = NULL;
    /* The pages before `kept` are parsed and given back (in a collect's forced flush only,
     * after a close), behind the cursor every RELEASE_BYTES: a window's records held twice
     * (the buffer's pages that CUPTI filled, and the records parsed from them) made the
     * parse's copy the export's memory. */
    uint8_t *kept = buf;
    int release = sp_cupti_buf_releasing() && walk_end != UINT64_MAX;
    while (valid && api.next_record(buf, valid, &r) == CUPTI_SUCCESS) {
        parse(r);
        if (release && (uint8_t *)r - kept >= RELEASE_BYTES)
            kept = sp_cupti_buf_release(kept, (uint8_t *)r);
    }
    if (release && valid)
        kept = sp_cupti_buf_release(kept, buf + valid);
    void *gone = sp_cupti_buf_return(buf, (size_t)(kept - buf));
    pthread_mutex_unlock(&sh.lock);
    free(gone);
}

/* Each try of stepprof's own device queries (collectors/cupti_devices.c)
 * runs between sp_cupti_own_calls(1) and sp_cupti_own_calls(0), on one thread. */
void sp_cupti_own_calls(int begin)
{
    uint64_t t = 0;
    if (sh.state <= 0 || api.timestamp(&t) != CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&sh.lock);
    if (n_own < SP_DEVQ_TRIES && begin) {
        own_calls[n_own].tid = (uint32_t)gettid();
        own_calls[n_own].begin = t;
        own_calls[n_own].end = UINT64_MAX;
    } else if (n_own < SP_DEVQ_TRIES && own_calls[n_own].begin) {
        own_calls[n_own++].end = t;
    }
    pthread_mutex_unlock(&sh.lock);
}

/* CUPTI's own name of a callback id (collectors/cupti_names.c strips and keeps it).
 * After the hand-over no CUPTI call is made: NULL, and the names cached before
 * it (sp_cupti_names_prefetch) answer. */
const char *sp_cupti_callback_name(int driver, uint32_t cbid)
{
    const char *name = NULL;
    if (__atomic_load_n(&sh.state, __ATOMIC_ACQUIRE) == SP_CUPTI_HANDED_OVER || !api.callback_name ||
        api.callback_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) !=
            CUPTI_SUCCESS)
        return NULL;
    return name;
}

uint64_t sp_cupti_dropped(void)
{
    size_t d = 0;
    if (sh.state > 0 && api.dropped(NULL, 0, &d) == CUPTI_SUCCESS)
        dropped_total += d;
    pthread_mutex_lock(&sh.lock);
    uint64_t mine = sh.recs_dropped;
    pthread_mutex_unlock(&sh.lock);
    return dropped_total + mine;
}

void sp_cupti_set_cycle_cap(uint64_t max_records)
{
    pthread_mutex_lock(&sh.lock);
    rec_limit = max_records && max_records < rec_by_bytes ? (size_t)max_records : rec_by_bytes;
    pthread_mutex_unlock(&sh.lock);
}
