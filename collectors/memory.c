/* collectors/memory.c — see memory.h. One mutex guards the live map, the
 * per-slot levels, the open window's log and the CUPTI records waiting to be
 * merged: allocation calls are rare next to launches (a caching allocator
 * calls cudaMalloc a handful of times per run) and the real call costs
 * microseconds, so the lock is not worth avoiding. The map (memory_map.c) is
 * keyed by address; handles (cuMemCreate) and virtual ranges (cuMemMap) carry
 * a tag bit so they never collide with block addresses. Times are
 * CLOCK_MONOTONIC ns read by the interposer, the clock CUPTI's records are
 * already mapped to, so the two sources are matched and merged with no
 * calibration to wait for: when the exporter takes the closed window
 * (sp_mem_cycle_take); the closing thread only freezes the live list. The
 * lock-free parts of that merge (ordering, matching, totals) are in
 * memory_order.c. */
#define _GNU_SOURCE
#include "memory.h"

#include "clock.h"
#include "log.h"
#include "memory_map.h"
#include "memory_order.h"
#include "stacks.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAP_MIN 4096u              /* room for 2048 live blocks before the first rebuild */
#define HANDLE_TAG (1ull << 63)
#define MAPPING_TAG (1ull << 62)
#define FREED_RING 1024u           /* recent frees, to tell a double free from a stray one */
#define OPS_MAX (1u << 18)         /* per window: ~25 MB of log at most */
#define PENDING_MAX (1u << 16)     /* CUPTI records waiting for their window to close */
#define FROZEN_MAX 8u              /* closed windows waiting for the exporter */
#define OOM_SNAPSHOTS 4u           /* per window; later failures are only counted */
#define OOM_BLOCKS 32u
#define OOM_LOG_LINES 3u

int sp_mem_on;
static __thread int cur_device;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sp_memmap_t map;
static int64_t level[SP_MEM_SLOTS], peak[SP_MEM_SLOTS];
static uint64_t freed[FREED_RING];
static unsigned freed_next;
static long cur_step = -1;
static sp_mem_cycle_t *cur;                  /* the open record window */
static sp_mem_cycle_t *frozen[FROZEN_MAX];
static sp_mem_op_t *pending;
static size_t npending, cap_pending;
static unsigned oom_logged;

void sp_mem_set_device(int device)
{
    cur_device = device;
}

int sp_mem_device(void)
{
    return cur_device;
}

static int slot_of(int kind, int device)
{
    if (kind == SP_MEM_PINNED)
        return SP_MEM_HOST;
    if (kind == SP_MEM_MAPPING || device < 0 || device >= SP_MEM_DEVICES)
        return -1;
    return device;
}

static int counts(const sp_mem_block_t *b)
{
    return b->slot >= 0 && b->kind != SP_MEM_MAPPING;
}

/* ---- the open window's log ---- */

static void log_op_to(sp_mem_cycle_t *c, const sp_mem_op_t *op)
{
    if (!c)
        return;
    if (c->nops == c->ops_cap) {
        size_t cap = c->ops_cap ? c->ops_cap * 2 : 1024;
        sp_mem_op_t *v = cap <= OPS_MAX ? realloc(c->ops, cap * sizeof *v) : NULL;
        if (!v) {
            c->dropped_ops++;
            return;
        }
        c->ops = v;
        c->ops_cap = cap;
    }
    c->ops[c->nops++] = *op;
}

static void log_op(const sp_mem_op_t *op)
{
    log_op_to(cur, op);
}

/* The log entry for what call c did to block b. */
static sp_mem_op_t op_of(const sp_mem_block_t *b, int type, const sp_mem_call_t *c)
{
    sp_mem_op_t op = {.t = c->t1, .t0 = c->t0, .addr = b->addr, .bytes = b->bytes, .stream = b->stream,
                      .api = c->api, .site = c->site, .step = cur_step, .stack = b->stack, .slot = b->slot,
                      .tid = c->tid, .result = c->result, .type = (uint8_t)type, .kind = b->kind};
    return op;
}

static void add_level(int slot, int64_t delta)
{
    level[slot] += delta;
    if (level[slot] > peak[slot])
        peak[slot] = level[slot];
}

/* Record a new block under key. A block still there was freed where no
 * interposer could see: it is logged as freed now, when that became known,
 * so the window's totals keep adding up. */
static void track(uint64_t key, const sp_mem_block_t *b, const sp_mem_call_t *c)
{
    sp_memmap_entry_t *e = sp_memmap_insert(&map, key);
    if (!e)
        return;
    if (e->b.bytes && counts(&e->b)) {
        add_level(e->b.slot, -(int64_t)e->b.bytes);
        sp_mem_op_t gone = op_of(&e->b, SP_MOP_FREE, c);
        log_op(&gone);
    }
    e->b = *b;
    e->window = cur ? cur->window : 0;
    if (counts(b))
        add_level(b->slot, (int64_t)b->bytes);
    sp_mem_op_t op = op_of(b, b->kind == SP_MEM_MAPPING ? SP_MOP_MAP : SP_MOP_ALLOC, c);
    log_op(&op);
}

static int recently_freed(uint64_t key)
{
    for (unsigned i = 0; i < FREED_RING; i++)
        if (freed[i] == key)
            return 1;
    return 0;
}

/* Drop the block under key; its size, 0 when unknown or the call failed. */
static uint64_t forget(uint64_t key, uint64_t addr, const sp_mem_call_t *c)
{
    sp_memmap_entry_t *e = sp_memmap_find(&map, key);
    if (e && c->result != 0)
        return 0;   /* CUDA refused (wrong free function): the block lives on */
    if (!e) {
        sp_mem_block_t unknown = {.addr = addr, .slot = -1};
        sp_mem_op_t op = op_of(&unknown, recently_freed(key) ? SP_MOP_DOUBLE_FREE : SP_MOP_BAD_FREE, c);
        log_op(&op);
        return 0;
    }
    uint64_t bytes = e->b.bytes;
    if (counts(&e->b))
        add_level(e->b.slot, -(int64_t)bytes);
    sp_mem_op_t op = op_of(&e->b, e->b.kind == SP_MEM_MAPPING ? SP_MOP_UNMAP : SP_MOP_FREE, c);
    log_op(&op);
    sp_memmap_erase(&map, e);
    freed[freed_next++ % FREED_RING] = key;
    return bytes;
}

static int cmp_block_size(const void *a, const void *b)
{
    const sp_mem_block_t *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

/* Every live block (of one slot, or all with slot < -1), largest first, in
 * a malloc'ed array; *n its length, *sum their bytes. */
static sp_mem_block_t *live_blocks(int slot, size_t *n, int64_t *sum, uint32_t in_window)
{
    sp_mem_block_t *v = malloc((map.live ? map.live : 1) * sizeof *v);
    *n = 0;
    *sum = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < map.cap; i++) {
        const sp_memmap_entry_t *e = &map.v[i];
        if (!sp_memmap_used(e) || !counts(&e->b) || (slot >= -1 && e->b.slot != slot))
            continue;
        v[*n] = e->b;
        v[*n].in_window = in_window && e->window == in_window;
        *sum += (int64_t)e->b.bytes;
        (*n)++;
    }
    qsort(v, *n, sizeof *v, cmp_block_size);
    return v;
}

static void out_of_memory(const sp_mem_call_t *c, uint64_t bytes, uint64_t stream, int kind, int device)
{
    sp_mem_block_t req = {.bytes = bytes, .stream = stream, .slot = slot_of(kind, device), .kind = (uint8_t)kind};
    pthread_mutex_lock(&lock);
    sp_mem_op_t op = op_of(&req, SP_MOP_OOM, c);
    log_op(&op);
    int slot = req.slot < 0 ? 0 : req.slot;
    int64_t live = level[slot];
    size_t nblocks = 0;
    for (size_t i = 0; i < map.cap; i++)
        nblocks += sp_memmap_used(&map.v[i]) && counts(&map.v[i].b) && map.v[i].b.slot == slot;
    if (cur) {
        cur->ooms_total++;
        sp_mem_oom_t *v = cur->nooms < OOM_SNAPSHOTS ? realloc(cur->ooms, (cur->nooms + 1) * sizeof *v) : NULL;
        if (v) {
            cur->ooms = v;
            sp_mem_oom_t *o = &v[cur->nooms++];
            int64_t sum;
            o->op = op;
            o->largest = live_blocks(slot, &o->nlargest, &sum, 0);
            o->live_bytes = sum;
            o->live_blocks = o->nlargest;
            if (o->nlargest > OOM_BLOCKS)
                o->nlargest = OOM_BLOCKS;
        }
    }
    unsigned nth = ++oom_logged;
    int reported = cur != NULL;
    pthread_mutex_unlock(&lock);
    if (nth <= OOM_LOG_LINES)
        sp_log(SP_LOG_INFO, "out of memory: %s of %" PRIu64 " bytes on %s %d failed with %" PRId64
               " bytes live in %zu blocks%s", c->api, bytes, slot == SP_MEM_HOST ? "host" : "GPU",
               slot == SP_MEM_HOST ? -1 : slot, live, nblocks,
               reported ? "; the live blocks are in the memory report" : "");
}

/* ---- interposer entry points ---- */

static void alloc_block(const sp_mem_call_t *c, uint64_t key, uint64_t addr, uint64_t bytes, uint64_t stream,
                        int kind, int device)
{
    if (c->result == SP_MEM_OOM_RESULT) {
        out_of_memory(c, bytes, stream, kind, device);
        return;
    }
    if (c->result != 0 || !addr)
        return;   /* a zero-byte request returns NULL and owns nothing */
    sp_mem_block_t b = {.addr = addr, .bytes = bytes, .stream = stream, .t = c->t1, .api = c->api,
                        .site = c->site, .stack = sp_stack_capture_if_on(), .slot = slot_of(kind, device),
                        .tid = c->tid, .kind = (uint8_t)kind};
    pthread_mutex_lock(&lock);
    b.step = cur_step;
    track(key, &b, c);
    pthread_mutex_unlock(&lock);
}

void sp_mem_alloc(const sp_mem_call_t *c, uint64_t ptr, uint64_t bytes, uint64_t stream, int kind, int device)
{
    alloc_block(c, ptr, ptr, bytes, stream, kind, device);
}

uint64_t sp_mem_free(const sp_mem_call_t *c, uint64_t ptr, uint64_t stream)
{
    (void)stream;   /* the block keeps the stream it was allocated on */
    if (!ptr)
        return 0;   /* cudaFree(NULL) is a documented no-op */
    pthread_mutex_lock(&lock);
    uint64_t bytes = forget(ptr, ptr, c);
    pthread_mutex_unlock(&lock);
    return bytes;
}

void sp_mem_handle_create(const sp_mem_call_t *c, uint64_t handle, uint64_t bytes, int device, int host)
{
    alloc_block(c, handle | HANDLE_TAG, handle, bytes, 0, host ? SP_MEM_PINNED : SP_MEM_PHYSICAL, device);
}

void sp_mem_handle_release(const sp_mem_call_t *c, uint64_t handle)
{
    pthread_mutex_lock(&lock);
    forget(handle | HANDLE_TAG, handle, c);
    pthread_mutex_unlock(&lock);
}

void sp_mem_map(const sp_mem_call_t *c, uint64_t va, uint64_t bytes, uint64_t handle)
{
    if (c->result != 0 || !va)
        return;
    pthread_mutex_lock(&lock);
    const sp_memmap_entry_t *h = sp_memmap_find(&map, handle | HANDLE_TAG);
    sp_mem_block_t b = {.addr = va, .bytes = bytes, .t = c->t1, .api = c->api, .site = c->site, .step = cur_step,
                        .slot = h ? h->b.slot : -1, .tid = c->tid, .kind = SP_MEM_MAPPING};
    track(va | MAPPING_TAG, &b, c);
    pthread_mutex_unlock(&lock);
}

void sp_mem_unmap(const sp_mem_call_t *c, uint64_t va)
{
    pthread_mutex_lock(&lock);
    forget(va | MAPPING_TAG, va, c);
    pthread_mutex_unlock(&lock);
}

void sp_mem_cupti_record(int is_alloc, int kind, uint64_t addr, uint64_t bytes, uint64_t ts_ns, int device,
                         uint64_t stream)
{
    pthread_mutex_lock(&lock);
    if (sp_mem_on && npending < PENDING_MAX) {
        if (npending == cap_pending) {
            size_t cap = cap_pending ? cap_pending * 2 : 256;
            sp_mem_op_t *v = realloc(pending, cap * sizeof *v);
            if (v) {
                pending = v;
                cap_pending = cap;
            }
        }
        if (npending < cap_pending)
            pending[npending++] = (sp_mem_op_t){.t = ts_ns, .t0 = ts_ns, .addr = addr, .bytes = bytes,
                                                .stream = stream, .step = -1, .slot = slot_of(kind, device),
                                                .type = is_alloc ? SP_MOP_ALLOC : SP_MOP_FREE,
                                                .kind = (uint8_t)kind, .from_cupti = 1};
    }
    pthread_mutex_unlock(&lock);
}

/* ---- windows ---- */

int sp_mem_init(int enabled)
{
    pthread_mutex_lock(&lock);
    int rc = 0;
    if (enabled && !map.v)
        rc = sp_memmap_init(&map, MAP_MIN);
    sp_mem_on = enabled && map.v;
    pthread_mutex_unlock(&lock);
    if (rc)
        sp_log(SP_LOG_ERROR, "profile_memory: out of memory for the allocation map; memory is not tracked");
    return rc;
}

void sp_mem_step(long step)
{
    pthread_mutex_lock(&lock);
    cur_step = step;
    if (cur) {
        uint64_t now = sp_clock_mono_ns();
        sp_mem_op_t op = {.t = now, .t0 = now, .step = step, .slot = -1, .type = SP_MOP_STEP};
        log_op(&op);
    }
    pthread_mutex_unlock(&lock);
}

void sp_mem_cycle_free(sp_mem_cycle_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nooms; i++)
        free(c->ooms[i].largest);
    free(c->ooms);
    free(c->ops);
    free(c->live);
    free(c);
}

void sp_mem_window_open(uint32_t window, long step)
{
    if (!sp_mem_on)
        return;
    pthread_mutex_lock(&lock);
    sp_mem_cycle_free(cur);
    cur = calloc(1, sizeof *cur);
    cur_step = step;
    if (cur) {
        cur->window = window;
        cur->first_step = step;
        cur->t_open = sp_clock_mono_ns();
        memcpy(cur->start, level, sizeof level);
        /* CUPTI records from before the window (warmup) can never be matched; those of
         * a closed window the exporter has not taken yet still will be (merge_cupti). */
        uint64_t from = cur->t_open;
        for (unsigned i = 0; i < FROZEN_MAX; i++)
            if (frozen[i] && frozen[i]->t_open < from)
                from = frozen[i]->t_open;
        size_t keep = 0;
        for (size_t i = 0; i < npending; i++)
            if (pending[i].t + SP_MEM_MATCH_SLACK_NS >= from)
                pending[keep++] = pending[i];
        npending = keep;
    }
    pthread_mutex_unlock(&lock);
}

/* A CUPTI record of a call no interposer saw: into the map, unless the map
 * already moved past it (the address was reused by an interposed call) or a
 * free names a block never counted. Returns whether the map changed: only
 * such records enter the log, so the window's totals (its opening level plus
 * the logged changes) stay equal to the levels. */
static int apply_unseen(const sp_mem_op_t *rec, uint32_t window)
{
    sp_memmap_entry_t *e = sp_memmap_find(&map, rec->addr);
    if (rec->type == SP_MOP_ALLOC && !e && rec->slot >= 0) {
        sp_mem_block_t b = {.addr = rec->addr, .bytes = rec->bytes, .stream = rec->stream, .t = rec->t,
                            .step = rec->step, .slot = rec->slot, .kind = rec->kind};
        if ((e = sp_memmap_insert(&map, rec->addr)) == NULL)
            return 0;
        e->b = b;
        e->window = window;
        add_level(b.slot, (int64_t)b.bytes);
        return 1;
    }
    if (rec->type == SP_MOP_FREE && e && e->b.t <= rec->t && counts(&e->b)) {
        add_level(e->b.slot, -(int64_t)e->b.bytes);
        sp_memmap_erase(&map, e);
        return 1;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The live list was taken when the window closed, before CUPTI's records of
 * the window were merged (on the exporter's side): the blocks only CUPTI saw
 * allocated (and still allocated) join it, those only CUPTI saw freed leave. */
static void live_fixup(sp_mem_cycle_t *c, size_t first_merged)
{
    size_t nfree = 0, nalloc = 0;
    for (size_t i = first_merged; i < c->nops; i++)
        c->ops[i].type == SP_MOP_ALLOC ? nalloc++ : nfree++;
    if (!nalloc && !nfree)
        return;
    uint64_t *gone = malloc((nfree ? nfree : 1) * sizeof *gone);
    sp_mem_block_t *v = realloc(c->live, (c->nlive + nalloc + 1) * sizeof *v);
    if (!gone || !v) {
        free(gone);
        if (v)
            c->live = v;
        return;
    }
    c->live = v;
    nfree = 0;
    for (size_t i = first_merged; i < c->nops; i++) {
        const sp_mem_op_t *op = &c->ops[i];
        const sp_memmap_entry_t *e;
        if (op->type != SP_MOP_ALLOC)
            gone[nfree++] = op->addr;
        else if ((e = sp_memmap_find(&map, op->addr)) && e->b.t == op->t && counts(&e->b)) {
            v[c->nlive] = e->b;
            v[c->nlive++].in_window = 1;
        }
    }
    qsort(gone, nfree, sizeof *gone, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < c->nlive; i++)
        if (!bsearch(&v[i].addr, gone, nfree, sizeof *gone, cmp_u64))
            v[k++] = v[i];
    c->nlive = k;
    free(gone);
    qsort(v, c->nlive, sizeof *v, cmp_block_size);
}

static void merge_cupti(sp_mem_cycle_t *c)
{
    sp_mem_sort_nearly(c->ops, c->nops);
    if (npending)
        qsort(pending, npending, sizeof *pending, sp_mem_cmp_op_time);
    size_t nmine = c->nops, keep = 0;
    unsigned char *used = calloc(nmine ? nmine : 1, 1);
    long step = c->first_step;
    size_t si = 0;
    for (size_t i = 0; i < npending && used; i++) {
        sp_mem_op_t rec = pending[i];
        if (rec.t > c->t_close) {
            pending[keep++] = rec;   /* a later window's */
            continue;
        }
        if (rec.t < c->t_open)
            continue;   /* warmup's: its calls were not logged, so it can be neither matched nor trusted */
        long m = sp_mem_match(c->ops, nmine, used, &rec);
        if (m >= 0) {
            used[m] = 1;
            c->cupti_duplicates++;
            continue;
        }
        for (; si < nmine && c->ops[si].t <= rec.t; si++)
            if (c->ops[si].type == SP_MOP_STEP)
                step = c->ops[si].step;
        rec.step = step;
        if (apply_unseen(&rec, c->window)) {
            log_op_to(c, &rec);
            c->cupti_merged++;
        }
    }
    npending = keep;
    free(used);
    live_fixup(c, nmine);
    sp_mem_merge_runs(c->ops, nmine, c->nops);
}

void sp_mem_window_close(uint32_t window, int at_exit)
{
    pthread_mutex_lock(&lock);
    sp_mem_cycle_t *c = cur;
    if (!c || c->window != window) {
        pthread_mutex_unlock(&lock);
        return;
    }
    /* On the program's thread: O(live blocks), nothing per op of the window.
     * CUPTI's records are merged and the totals filled when the exporter
     * takes the cycle (after its CUPTI flush). */
    c->t_close = sp_clock_mono_ns();
    cur = NULL;
    int64_t sum;
    c->live = live_blocks(-2, &c->nlive, &sum, window);
    c->at_exit = at_exit;
    memcpy(c->process_peak, peak, sizeof peak);
    if (frozen[FROZEN_MAX - 1])
        sp_mem_cycle_free(frozen[FROZEN_MAX - 1]);   /* the exporter fell far behind: oldest first */
    memmove(&frozen[1], &frozen[0], (FROZEN_MAX - 1) * sizeof *frozen);
    frozen[0] = c;
    pthread_mutex_unlock(&lock);
}

sp_mem_block_t *sp_mem_live_now(size_t *n, int64_t *sum)
{
    pthread_mutex_lock(&lock);
    sp_mem_block_t *v = live_blocks(-2, n, sum, 0);
    pthread_mutex_unlock(&lock);
    return v;
}

sp_mem_cycle_t *sp_mem_cycle_take(uint32_t window)
{
    sp_mem_cycle_t *c = NULL;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < FROZEN_MAX; i++) {
        if (frozen[i] && frozen[i]->window == window) {
            c = frozen[i];
            memmove(&frozen[i], &frozen[i + 1], (FROZEN_MAX - 1 - i) * sizeof *frozen);
            frozen[FROZEN_MAX - 1] = NULL;
            merge_cupti(c);
            sp_mem_fill_totals(c);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return c;
}

/* The child of fork() starts with nothing: its parent's blocks are not its
 * own, and it is re-activated at its first CUDA call. */
void sp_mem_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    sp_memmap_free(&map);
    memset(level, 0, sizeof level);
    memset(peak, 0, sizeof peak);
    memset(freed, 0, sizeof freed);
    cur = NULL;
    memset(frozen, 0, sizeof frozen);
    npending = 0;
    cur_step = -1;
    oom_logged = 0;
    sp_mem_on = 0;
}
