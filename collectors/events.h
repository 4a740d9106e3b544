/* collectors/events.h — the event buffer: fixed-size records in per-thread
 * chunks carved from one bounded pool (buffer_mb). Writing a record is a TLS
 * load, a bounds check and a release store of the chunk's count: no lock, no
 * malloc, no syscall. Chunks are single-writer logs; the exporter reads them
 * concurrently up to the published count. When the pool is exhausted records
 * are dropped and counted per thread.
 *
 * The gate is the global flag every interposer tests first: 0 = not
 * collecting, SP_GATE_UNINIT = stepprof not activated yet, else the id of the
 * current window (SP_WIN_WARMUP set for warmup windows, whose records are
 * timed but not stored). */
#ifndef SP_EVENTS_H
#define SP_EVENTS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SP_GATE_UNINIT 0xFFFFFFFFu
#define SP_WIN_WARMUP 0x80000000u
#define SP_WIN_COUNT 0x40000000u   /* markers only: nothing timed or stored */

enum sp_ev_kind {
    SP_EV_API = 1,    /* name = enum sp_api_id */
    SP_EV_RANGE = 2,  /* name = string id; a[0] = nesting depth */
    SP_EV_MARK = 3,   /* name = string id */
    SP_EV_STEP = 4,   /* ProfilerStep#a[0] */
    SP_EV_PYFUNC = 5, /* a Python function (with_stack): collectors/pystack.h */
};

typedef struct sp_event {
    uint64_t t0, t1;   /* clock ticks (collectors/clock.h) */
    uint64_t a[5];     /* payload; meaning by kind and API shape */
    uint32_t name;
    uint32_t window;
    int32_t result;
    uint16_t kind;
    uint16_t flags;
    uint32_t aux;
    uint32_t stack;    /* with_stack: id from collectors/stacks.h, 0 = none */
} sp_event_t;   /* 80 bytes: a 64 KiB chunk holds 818 */
/* flags of an SP_EV_API record: the call was timed by its start only (t1 =
 * t0); its end is CUPTI's record's (inject/hook.h SP_TIMED_CALL), set at
 * export (exporters/gpu_pair.c), or none: a zero-length call. */
#define SP_EV_END_CUPTI 1u
#define SP_EVENT_HAS_STACK 1

struct sp_thread;

typedef struct sp_chunk {
    _Atomic uint32_t count;    /* records published by the owner */
    uint32_t consumed;         /* exporter's cursor: records before it are done */
    _Atomic int retired;       /* owner has moved on to another chunk */
    /* Set last when a writer takes the chunk (release), cleared by the
     * exporter when it frees it; the pool's writers take chunks without a
     * lock (collectors/events.c). */
    _Atomic(struct sp_thread *) owner;
    _Atomic uint32_t next_free;  /* free stack: next chunk's index + 1 */
    uint32_t pad32;
    uint64_t pad;
    sp_event_t ev[];
} sp_chunk_t;

#define SP_CHUNK_BYTES (64u * 1024u)
#define SP_CHUNK_EVENTS ((uint32_t)((SP_CHUNK_BYTES - sizeof(sp_chunk_t)) / sizeof(sp_event_t)))

typedef struct sp_thread {
    sp_chunk_t *cur;
    uint32_t unused;           /* keeps the offsets inject/hook.h's stubs assert */
    uint32_t slot;             /* registration order, 0-based */
    int in_hook;               /* recursion guard for interposers */
    int tid;
    _Atomic uint64_t dropped;  /* written by the owner only */
    char name[16];
    struct sp_thread *next;
} sp_thread_t;

extern _Atomic uint32_t sp_ev_gate;
extern __thread sp_thread_t *sp_ev_self;

/* A gate value under which calls are timed: a warmup or record window. */
static inline int sp_win_timed(uint32_t w)
{
    return w != 0 && w != SP_GATE_UNINIT && !(w & SP_WIN_COUNT);
}

/* A gate value whose records are stored: a record window. */
static inline int sp_win_records(uint32_t w)
{
    return sp_win_timed(w) && !(w & SP_WIN_WARMUP);
}

static inline uint32_t sp_ev_gate_load(void)
{
    return atomic_load_explicit(&sp_ev_gate, memory_order_relaxed);
}

sp_thread_t *sp_ev_thread_slow(void);
sp_event_t *sp_ev_reserve_slow(sp_thread_t *t);
/* A second record list for thread `of` (same tid and name), filled only by
 * its creator: ranges that ended before activation are adopted into it. */
sp_thread_t *sp_ev_thread_alias(const sp_thread_t *of);

static inline sp_thread_t *sp_ev_thread(void)
{
    sp_thread_t *t = sp_ev_self;
    if (__builtin_expect(t == NULL, 0))
        t = sp_ev_thread_slow();
    return t;
}

/* A slot for one record, or NULL (warmup window, or dropped and counted). */
static inline sp_event_t *sp_ev_reserve(sp_thread_t *t, uint32_t window)
{
    if (window & (SP_WIN_WARMUP | SP_WIN_COUNT))
        return NULL;
    sp_chunk_t *c = t->cur;
    if (__builtin_expect(c != NULL, 1)) {
        uint32_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
        if (__builtin_expect(n < SP_CHUNK_EVENTS, 1))
            return &c->ev[n];
    }
    return sp_ev_reserve_slow(t);
}

static inline void sp_ev_commit(sp_thread_t *t)
{
    sp_chunk_t *c = t->cur;
    uint32_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
    atomic_store_explicit(&c->count, n + 1, memory_order_release);
}

/* Pool lifetime: create before the gate opens; 0 on success. */
int sp_ev_pool_init(long buffer_mb);
void sp_ev_set_gate(uint32_t value);

/* Read API for exporters. sp_ev_collect finds every stored record of
 * `window` (published so far) and returns, in an array sized exactly
 * (collectors/bigmem.h: freed with sp_big_free), a reference to each (its thread: sp_ev_owner), advancing
 * the chunks' cursors past them. The records stay in place and belong to the
 * caller (which may rewrite their times) until sp_ev_release, which recycles
 * the chunks that are retired and wholly consumed. Collects and releases come
 * from one thread at a time (the exporter). With `names` the NVTX names the
 * program's threads only copied are interned; without (a dropped cycle) their
 * text is just let go, so a dropped cycle adds nothing to the string table. */
typedef struct sp_event_ref {
    sp_event_t *ev;   /* its thread: sp_ev_owner(ev) */
} sp_event_ref_t;     /* 8 bytes: a window's export holds one per record */

/* The thread that wrote a collected record: its chunk's owner, which stays
 * set until sp_ev_release recycles the chunk. */
extern unsigned char *sp_ev_pool_base;
static inline const sp_thread_t *sp_ev_owner(const sp_event_t *e)
{
    size_t i = (size_t)((const unsigned char *)e - sp_ev_pool_base) / SP_CHUNK_BYTES;
    const sp_chunk_t *c = (const sp_chunk_t *)(const void *)(sp_ev_pool_base + i * SP_CHUNK_BYTES);
    return atomic_load_explicit(&c->owner, memory_order_relaxed);
}
size_t sp_ev_collect(uint32_t window, int names, sp_event_ref_t **out);
/* names = SP_EV_NAMES_LATER: neither interned nor let go; sp_ev_settle
 * interns them through the returned references, on any one thread, before
 * the next collect (names are the only field it writes). */
#define SP_EV_NAMES_LATER 2
void sp_ev_settle(uint32_t window, const sp_event_ref_t *refs, size_t n);
void sp_ev_release(void);
uint64_t sp_ev_dropped_total(void);

/* Per-cycle cap (max_events_per_cycle / max_trace_mb): once the current
 * record window holds max_events records in full chunks, further chunk
 * requests in that window fail and their records are dropped and counted like
 * a full pool. Checked on the cold path only (a full chunk); the exporter
 * trims to the exact count. 0 = no cap. Set before the gate opens. */
void sp_ev_set_cycle_cap(uint64_t max_events);
/* Whether the cap stopped recording in `window` (remembered for the last 16
 * capped windows, enough for the exporter's queue). */
int sp_ev_window_capped(uint32_t window);
const sp_thread_t *sp_ev_threads(void);    /* registration list, newest first */
void sp_ev_after_fork_child(void);

#endif
