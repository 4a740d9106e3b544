/* collectors/ranges.c — see ranges.h. The push/pop stack (depth 256; deeper
 * pushes are counted so pops stay paired but are not stored) is a per-thread
 * page mapped at the thread's first push and unmapped at its exit: only a
 * pointer and the depth live in TLS, so the library stays small enough in
 * static TLS to be loaded by dlopen (CUDA / NVTX injection). A range that
 * will not be stored (no record window at its start) reads no clock and
 * gets no name: its push writes the entry's window only, and its pop reads
 * only that (the idle path, kept free of calls and register saves; the rest
 * is out of line). One in a record window names its text with sp_str_defer
 * (copied, interned later off this thread), so a push costs the same with
 * one name or a million; NVTX's plain push (sp_range_push_plain) copies it
 * in the same pass that rules out a PyTorch operator. Its pop writes the
 * record inline, with no call, when the thread's chunk has room.
 * Start/end ranges go through a 4096-slot table indexed by id, each slot
 * claimed with an atomic id so a stale end cannot close a newer range; a
 * range whose slot a newer one takes is lost, counted with the drops. A
 * record not stored gives its text back to the log (sp_str_undefer).
 * A range opened before the first CUDA call (gate SP_GATE_UNINIT, its start
 * read in CLOCK_MONOTONIC ns) belongs to the window a whole-run recording
 * opened at activation (sp_range_adopt_early), if any; its start converted
 * to ticks when it is stored. A range or mark that both begins and ends
 * before activation goes to a fixed ring of EARLY_MAX completed records
 * (claimed with one atomic add, no lock; further ones are counted as
 * dropped) that a whole-run recording adopts at activation, each into a
 * record list aliasing its thread (same tid). With a schedule they belong to
 * no recorded step and are not written. */
#include "ranges.h"

#include "clock.h"
#include "events.h"
#include "strings.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define STACK_MAX 256
#define SLOTS 4096u

typedef struct open_range {
    uint64_t t0;
    uint32_t name;
    uint32_t window;
    sp_range_op_t op; /* PyTorch operator fields, zero for plain ranges */
} open_range_t;

#define STACK_BYTES (STACK_MAX * sizeof(open_range_t))

/* One TLS object: each function then pays one TLS-descriptor call. */
static __thread struct {
    open_range_t *stack;
    int depth;
} me;
static pthread_key_t stack_key;
static pthread_once_t stack_key_once = PTHREAD_ONCE_INIT;

static void unmap_stack(void *p)
{
    munmap(p, STACK_BYTES);
}

static void make_stack_key(void)
{
    pthread_key_create(&stack_key, unmap_stack);
}

/* mmap rather than malloc: an NVTX push may come from a signal handler. */
static __attribute__((noinline, cold)) open_range_t *thread_stack(void)
{
    if (__builtin_expect(me.stack != NULL, 1))
        return me.stack;
    void *p = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    pthread_once(&stack_key_once, make_stack_key);
    pthread_setspecific(stack_key, p);
    return me.stack = p;
}

static struct {
    _Atomic uint64_t id;
    open_range_t r;
} slots[SLOTS];
static _Atomic uint64_t next_id = 1;
#define SLOT_BUSY UINT64_MAX   /* a start is writing the slot's range (ids never get there) */
static _Atomic uint32_t early_window; /* 0: ranges opened before activation are not stored */


static void fill(sp_event_t *e, sp_thread_t *t, const open_range_t *r, uint64_t t1, int kind,
                 uint64_t depth_arg)
{
    (void)t;
    e->t0 = r->t0;
    e->t1 = t1;
    e->name = r->name;
    e->window = r->window;
    e->result = 0;
    e->kind = (uint16_t)kind;
    e->flags = r->op.flags;
    e->aux = 0;
    e->a[0] = depth_arg;
    e->a[1] = r->op.seq;
    e->a[2] = r->op.shapes;
    e->a[3] = e->a[4] = 0;
    e->stack = r->op.stack;
}

/* Records completed before activation: times in CLOCK_MONOTONIC ns. */
#define EARLY_MAX 1024u
typedef struct early_rec {
    open_range_t r;
    uint64_t t1;
    sp_thread_t *thread;
    uint32_t depth;
    uint16_t kind;
    _Atomic uint16_t ready;
} early_rec_t;
static early_rec_t early_recs[EARLY_MAX];
static _Atomic uint64_t early_claimed;

static void keep_early(const open_range_t *r, uint64_t t1, int kind, uint64_t depth_arg)
{
    sp_thread_t *t = sp_ev_thread();
    if (!t)
        return;
    uint64_t i = atomic_fetch_add_explicit(&early_claimed, 1, memory_order_relaxed);
    if (i >= EARLY_MAX)
        return; /* counted at adoption: early_claimed - EARLY_MAX */
    early_rec_t *x = &early_recs[i];
    x->r = *r;
    x->t1 = t1;
    x->thread = t;
    x->depth = (uint32_t)depth_arg;
    x->kind = (uint16_t)kind;
    atomic_store_explicit(&x->ready, 1, memory_order_release);
}

typedef struct alias_map {
    sp_thread_t *of, *alias;
} alias_map_t;

static sp_thread_t *alias_of(sp_thread_t *of, alias_map_t *map, unsigned *mapped)
{
    for (unsigned k = 0; k < *mapped; k++)
        if (map[k].of == of)
            return map[k].alias;
    sp_thread_t *a = sp_ev_thread_alias(of);
    if (a && *mapped < 64)
        map[(*mapped)++] = (alias_map_t){of, a};
    return a;
}

/* Cold, once, on the activating thread: one alias list per thread seen. */
static void adopt_completed(uint32_t window)
{
    uint64_t n = atomic_load_explicit(&early_claimed, memory_order_acquire);
    alias_map_t map[64];
    unsigned mapped = 0;
    for (uint64_t i = 0; i < n && i < EARLY_MAX; i++) {
        early_rec_t *x = &early_recs[i];
        if (!atomic_load_explicit(&x->ready, memory_order_acquire))
            continue; /* still being written as the gate opened: not kept */
        sp_thread_t *a = alias_of(x->thread, map, &mapped);
        if (!a)
            continue;
        open_range_t r = x->r;
        r.t0 = sp_clock_ticks_of_mono(x->r.t0);
        r.window = window;
        sp_event_t *e = sp_ev_reserve(a, window);
        if (!e)
            continue; /* counted by the pool */
        fill(e, a, &r, sp_clock_ticks_of_mono(x->t1), x->kind, x->depth);
        sp_ev_commit(a);
    }
    if (n > EARLY_MAX) {
        sp_thread_t *t = mapped ? map[0].alias : sp_ev_thread();
        if (t)
            atomic_fetch_add_explicit(&t->dropped, n - EARLY_MAX, memory_order_relaxed);
    }
}

void sp_range_adopt_early(uint32_t window)
{
    atomic_store_explicit(&early_window, window, memory_order_relaxed);
    if (sp_win_records(window))
        adopt_completed(window);
}

/* A record not stored gives its name's text back to the thread's log. Only
 * while its window is open: the log block of a closed window's text may have
 * been reused since. */
static void dropped(const open_range_t *r)
{
    if (r->window == sp_ev_gate_load())
        sp_str_undefer(r->name);
}

/* A record lost before the pool was asked (a signal handler's range inside
 * another NVTX call, a start/end range whose slot a newer one took): counted
 * with the pool's drops (the trace's stepprof_dropped_events), on this
 * thread, which is the only writer of its count. */
static void lost(sp_thread_t *t, const open_range_t *r)
{
    if (t)
        atomic_store_explicit(&t->dropped, atomic_load_explicit(&t->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    dropped(r);
}

/* t1 == 0: the range ends now (read only when it is stored). */
static void store(const open_range_t *r, uint64_t t1, int kind, uint64_t depth_arg)
{
    open_range_t early;
    if (!sp_win_records(r->window) && r->window != SP_GATE_UNINIT)
        return;
    if (!t1)
        t1 = sp_clock_ticks();
    if (__builtin_expect(r->window == SP_GATE_UNINIT, 0)) {
        uint32_t w = atomic_load_explicit(&early_window, memory_order_relaxed);
        if (w == 0 && sp_ev_gate_load() == SP_GATE_UNINIT) {
            keep_early(r, t1, kind, depth_arg);
            return;
        }
        if (!sp_win_records(w))
            return;
        early = *r;
        early.t0 = sp_clock_ticks_of_mono(r->t0);
        early.window = w;
        r = &early;
    }
    if (!sp_win_records(r->window))
        return;
    sp_thread_t *t = sp_ev_thread();
    /* The interposers' recursion guard: a signal handler's NVTX (or CUDA)
     * call that interrupts this one on the same thread is not stored, rather
     * than writing into the record this call is filling. */
    if (!t || t->in_hook) {
        lost(t, r);
        return;
    }
    t->in_hook = 1;
    sp_event_t *e = sp_ev_reserve(t, r->window);
    if (!e) {
        t->in_hook = 0;
        dropped(r);
        return;
    }
    fill(e, t, r, t1, kind, depth_arg);
    sp_ev_commit(t);
    t->in_hook = 0;
}

/* Ticks for a range opened under gate w: none when it will not be stored. */
static uint64_t stamp(uint32_t w)
{
    return sp_win_records(w) || w == SP_GATE_UNINIT ? sp_clock_ticks() : 0;
}

/* Will a range opened under gate w be stored (or, before activation, maybe)? */
static inline int kept(uint32_t w)
{
    return sp_range_gate_keeps(w);
}

static uint32_t name_in(uint32_t w, const char *text, uint32_t id)
{
    if (!text)
        return id;
    if (sp_win_records(w))
        return sp_str_defer(text, w);
    return w == SP_GATE_UNINIT ? sp_str_intern_cached(text) : 0;
}

static const sp_range_op_t plain;

/* A push that is not the common idle one: the thread's first, past
 * STACK_MAX, or a range that will (or, before activation, may) be stored. */
static __attribute__((noinline)) int push_slow(uint32_t w, uint32_t name, const char *text, const sp_range_op_t *op)
{
    __typeof__(me) *m = &me;
    __asm__("" : "+r"(m));
    open_range_t *s = m->stack;
    int d = m->depth++;
    if (!s)
        s = thread_stack();
    if (d >= STACK_MAX || !s)
        return d;
    open_range_t *r = &s[d];
    r->window = w;
    if (__builtin_expect(sp_win_records(w), 1)) {
        r->t0 = sp_clock_ticks();
        r->name = text ? sp_str_defer(text, w) : name;
        r->op = *op;
    } else if (w == SP_GATE_UNINIT) {
        *r = (open_range_t){stamp(w), name_in(w, text, name), w, *op};
    }
    return d;
}

/* Nothing but the window of an entry that will not be stored is written
 * (neither its name nor its time is taken), nor read at its pop. */
static inline int push(uint32_t w, uint32_t name, const char *text, const sp_range_op_t *op)
{
    __typeof__(me) *m = &me;
    __asm__("" : "+r"(m));      /* one TLS-descriptor call, not one per access */
    open_range_t *s = m->stack;
    int d = m->depth;
    if (__builtin_expect(!s || d >= STACK_MAX || kept(w), 0))
        return push_slow(w, name, text, op);
    m->depth = d + 1;
    s[d].window = w;
    return d;
}

void sp_range_push_op(uint32_t name, const sp_range_op_t *op)
{
    push(sp_ev_gate_load(), name, NULL, op);
}

/* Only an entry that will be stored has its operator fields written. */
sp_range_op_t *sp_range_top_op(uint32_t *name)
{
    int d = me.depth;
    if (d <= 0 || d > STACK_MAX || !me.stack || !kept(me.stack[d - 1].window))
        return NULL;
    *name = me.stack[d - 1].name;
    return &me.stack[d - 1].op;
}

int sp_range_push(const char *text, uint32_t id)
{
    return push(sp_ev_gate_load(), id, text, &plain);
}

int sp_range_push_idle(uint32_t w)
{
    return push(w, 0, NULL, &plain);
}

int sp_range_push_plain(const char *text, uint32_t w)
{
    __typeof__(me) *m = &me;
    __asm__("" : "+r"(m));
    open_range_t *s = m->stack;
    int d = m->depth;
    if (__builtin_expect(!s || d >= STACK_MAX || !sp_clock_tsc, 0))
        return SP_RANGE_NOT_PLAIN;
    uint32_t name = sp_str_defer_plain(text ? text : "", w);
    if (__builtin_expect(!name, 0))
        return SP_RANGE_NOT_PLAIN;
    m->depth = d + 1;
    open_range_t *r = &s[d];
    r->t0 = __rdtsc();          /* after the copy: the range does not include it */
    r->name = name;
    r->window = w;
    r->op = plain;
    return d;
}

static __attribute__((noinline)) int pop_store_slow(const open_range_t *r, int d)
{
    store(r, 0, SP_EV_RANGE, (uint64_t)d);
    return d;
}

/* The common recording pop (the range's window still records, the thread's
 * chunk has room, ticks are the TSC) writes its record here, with no call
 * and so no frame; anything else goes to store(). */
static __attribute__((noinline)) int pop_store(const open_range_t *r, int d)
{
    sp_thread_t *t = sp_ev_self;
    sp_chunk_t *c = t ? t->cur : NULL;
    if (__builtin_expect(c && !t->in_hook && sp_win_records(r->window) && sp_clock_tsc, 1)) {
        uint32_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
        if (__builtin_expect(n < SP_CHUNK_EVENTS, 1)) {
            t->in_hook = 1;     /* as in store(): a signal handler's range is not written over this one */
            fill(&c->ev[n], t, r, __rdtsc(), SP_EV_RANGE, (uint64_t)d);
            atomic_store_explicit(&c->count, n + 1, memory_order_release);
            t->in_hook = 0;
            return d;
        }
    }
    return pop_store_slow(r, d);
}

int sp_range_pop(void)
{
    int d = me.depth;
    if (d == 0)
        return -1;
    me.depth = --d;
    if (d < STACK_MAX && me.stack && kept(me.stack[d].window))
        return pop_store(&me.stack[d], d);
    return d;
}

uint64_t sp_range_start(const char *text, uint32_t id)
{
    uint32_t w = sp_ev_gate_load();
    uint64_t rid = atomic_fetch_add(&next_id, 1);
    unsigned i = (unsigned)(rid & (SLOTS - 1));
    /* The slot is claimed before its range is written: a start SLOTS ids
     * later, or the end of the range it held, must not write or read it
     * meanwhile (the end checks the id before it reads the range). */
    uint64_t had = atomic_exchange(&slots[i].id, SLOT_BUSY);
    if (had == SLOT_BUSY)
        return rid;   /* another start is writing it: this range is lost (its end finds another id) */
    if (had) {
        /* SLOTS ranges started since this one, which never ended: it is lost. */
        open_range_t old = slots[i].r;
        if (sp_win_records(old.window) && old.window == w)
            lost(sp_ev_thread(), &old);
    }
    slots[i].r = (open_range_t){stamp(w), name_in(w, text, id), w, {0, 0, 0, 0}};
    atomic_store_explicit(&slots[i].id, rid, memory_order_release);
    return rid;
}

void sp_range_end(uint64_t id)
{
    unsigned i = (unsigned)(id & (SLOTS - 1));
    uint64_t expect = id;
    if (atomic_load_explicit(&slots[i].id, memory_order_acquire) != id)
        return;
    open_range_t r = slots[i].r;   /* kept only if no start claimed the slot meanwhile */
    if (!atomic_compare_exchange_strong(&slots[i].id, &expect, 0))
        return;
    store(&r, 0, SP_EV_RANGE, 0);
}

void sp_range_mark(const char *text, uint32_t id)
{
    uint32_t w = sp_ev_gate_load();
    if (!sp_win_records(w) && w != SP_GATE_UNINIT)
        return;
    uint64_t now = sp_clock_ticks();
    open_range_t r = {now, name_in(w, text, id), w, {0, 0, 0, 0}};
    store(&r, now, SP_EV_MARK, 0);
}
