/* inject/hook.h — the shape of every interposer. SP_INTERPOSE defines an
 * exported entry (a few instructions of assembly, SP_ENTRY) that, while the
 * gate is closed, costs one load and one predictable branch before a jump to
 * the real function; the real pointer starts at a per-symbol resolver so no
 * NULL check is needed. With the gate open, the slow path records on its hot
 * branch: one TLS load, the recursion guard, two clock reads around the real
 * call (a launch: one while CUPTI's record of it gives its end; SP_TIMED_CALL)
 * and one record, no call out of line, errno untouched; everything rarer
 * (activation, markers, warmup, signals) is its cold branch. The recursion
 * guard keeps a runtime that calls its own exported entry points, or the
 * driver's, from being recorded twice. Cold branches hand the real function
 * the caller's errno and the caller what the real function left (stack
 * capture, chunk allocation and device queries all may set it).
 * SP_INTERPOSE_MEM is the allocation interposers' variant: a second flag
 * (profile_memory) also opens their slow path. */
#ifndef SP_HOOK_H
#define SP_HOOK_H

#include "../collectors/api.h"
#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/stacks.h"
#include "../collectors/memory.h"
#include "../schedule/schedule.h"
#include "markers.h"

#include <errno.h>
#include <stddef.h>

#define SP_EXPORT __attribute__((visibility("default")))
#define SP_LIKELY(x) __builtin_expect(!!(x), 1)
#define SP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The real definition of `name` wherever its library was loaded (RTLD_NEXT,
 * then every loaded object, RTLD_LOCAL ones included; inject/lookup.c), or
 * NULL while none defines it. Callers never cache a NULL. */
void *sp_real(const char *name);

/* Whether p is in stepprof's own object (one of its exported entries): its
 * mapped extent, from the ELF header to the end of its data, as the linker
 * placed them. Two compares, no loader call. */
extern char __ehdr_start[] __attribute__((visibility("hidden")));
extern char _end[] __attribute__((visibility("hidden")));
static inline int sp_is_ours(const void *p)
{
    return (const char *)p >= __ehdr_start && (const char *)p < _end;
}

/* What a call returns while no loaded library defines its function:
 * cudaErrorUnknown / CUDA_ERROR_UNKNOWN. */
#define SP_MISSING_RESULT 999

/* glibc's dlsym, never stepprof's (inject/driver_proc.c exports one). Like
 * that dlsym it may run before any constructor, even inside a sanitizer
 * runtime's own start-up (its shadow memory not mapped yet): neither is
 * instrumented. */
#define SP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))
typedef void *(*sp_dlsym_fn)(void *, const char *);
SP_NO_SANITIZE sp_dlsym_fn sp_glibc_dlsym(void);

/* Says once per process that `name` had no definition; SP_MISSING_RESULT. */
int sp_real_missing(const char *name);

/* Slow path when the gate is open: activates stepprof on first use, returns
 * the calling thread's state with the recursion guard taken, or NULL when this
 * call must not be recorded. *window is refreshed after activation. */
sp_thread_t *sp_hook_enter(uint32_t *window);

static inline void sp_hook_exit(sp_thread_t *t)
{
    /* Device properties for every trace, also those written at exit: first
     * tried after an intercepted call (never inside cuInit), while the
     * recursion guard still holds (later tries: collectors/cupti_devices.c). */
    if (SP_UNLIKELY(sp_cupti_devices_pending)) {
        int saved = errno;
        sp_cupti_query_devices();
        errno = saved;
    }
    t->in_hook = 0;
}

/* A gate value under which a thread that holds no guard records a call on
 * the hot path (SP_SLOW_FN): a record window, no signal to act on. Anything
 * else (activation, warmup, markers only, a signal) takes the cold path. */
static inline int sp_hook_hot(uint32_t w)
{
    return w != 0 && !(w & (SP_WIN_WARMUP | SP_WIN_COUNT)) && !sp_sched_signal_flag;
}

/* sp_ev_reserve, keeping errno on its cold branch (a new chunk). */
static inline sp_event_t *sp_hook_reserve(sp_thread_t *t, uint32_t w)
{
    if (w & (SP_WIN_WARMUP | SP_WIN_COUNT))
        return NULL;
    sp_chunk_t *c = t->cur;
    if (SP_LIKELY(c != NULL)) {
        uint32_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
        if (SP_LIKELY(n < SP_CHUNK_EVENTS))
            return &c->ev[n];
    }
    int saved = errno;
    sp_event_t *e = sp_ev_reserve_slow(t);
    errno = saved;
    return e;
}

/* with_stack: the call's stack id (after the real call: its time is not
 * charged to the call), keeping errno. */
static inline uint32_t sp_hook_stack(void)
{
    if (SP_LIKELY(!sp_stack_enabled))
        return 0;
    int saved = errno;
    uint32_t id = sp_stack_capture();
    errno = saved;
    return id;
}

/* Entry for a call the gate does not let through but a collector that must
 * see every call (memory) wants: the thread and the recursion guard only. */
static inline sp_thread_t *sp_hook_enter_idle(void)
{
    sp_thread_t *t = sp_ev_thread();
    if (!t || t->in_hook)
        return NULL;
    t->in_hook = 1;
    return t;
}

/* A record's first four payload words (collectors/api.h says what each shape
 * keeps there). */
static inline void sp_fill4(sp_event_t *e, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3)
{
    e->a[0] = a0;
    e->a[1] = a1;
    e->a[2] = a2;
    e->a[3] = a3;
}

#define SP_U64(x) ((uint64_t)(uintptr_t)(x))

static inline void sp_rec_api(sp_event_t *e, sp_thread_t *t, int api, uint64_t t0, uint64_t t1, int result,
                              uint32_t window, uint16_t flags)
{
    (void)t;
    e->t0 = t0;
    e->t1 = t1;
    e->name = (uint32_t)api;
    e->window = window;
    e->result = result;
    e->kind = SP_EV_API;
    e->flags = flags;
    e->aux = 0;
    e->a[0] = e->a[1] = e->a[2] = e->a[3] = e->a[4] = 0;
}

/* The exported entry `sym` of an interposer, in assembly: `test` (text of
 * x86-64 instructions; the TSC clock ties stepprof to x86-64 already) either
 * jumps to sp_slow_<sym> or falls through to a jump to real_<sym>. C cannot
 * say "go on to another function with exactly the registers and stack I was
 * called with": on a sibling call GCC reloads and re-stores every argument
 * passed on the stack (cuLaunchKernel has five, pushing four registers to do
 * it) and spills struct arguments (dim3), which made the closed-gate path
 * cost several ns. The tests use only %rax and %r11, which carry no argument
 * of a non-variadic function, so whichever function runs next sees the
 * caller's own arguments and return address. sp_slow_<sym> and real_<sym>
 * are file-local; `used`/`noipa` keep them, with their C signature. The CFI
 * lines let an unwinder (a sampling profiler, a debugger) step out of a stub. */
_Static_assert(SP_WIN_COUNT == 0x40000000u, "SP_INTERPOSE_GATED's compare");
#define SP_SLOW_ATTRS __attribute__((noipa, used))
#define SP_ENTRY(sym, test)                                                        \
    __asm__(".text\n\t.globl " #sym "\n\t.type " #sym ", @function\n\t.p2align 4\n" #sym   \
            ":\n\t.cfi_startproc\n" test "\tjmp *real_" #sym "(%rip)\n\t.cfi_endproc\n"     \
            "\t.size " #sym ", .-" #sym "\n");

/* What a stub does once the gate let a call through: jump to sp_slow_<sym>.
 * Files whose interposers the real runtime calls from inside an intercepted
 * call (the driver's: NVIDIA's runtime launches through cuLaunchKernel)
 * define SP_HOOK_NESTED before including this header: there a thread that
 * holds the recursion guard jumps straight to the real function instead
 * (falls through), after one TLS load: the descriptor call preserves every
 * register but %rax, and the stack is aligned for it as GCC does. */
_Static_assert(offsetof(sp_thread_t, in_hook) == 16, "SP_ASM_OPEN's in_hook offset");
#ifdef SP_HOOK_NESTED
#define SP_ASM_OPEN(sym)                                                           \
    "\tsubq $8, %rsp\n"                                                            \
    "\t.cfi_adjust_cfa_offset 8\n"                                                 \
    "\tleaq sp_ev_self@TLSDESC(%rip), %rax\n"                                      \
    "\tcall *sp_ev_self@TLSCALL(%rax)\n"                                           \
    "\taddq $8, %rsp\n"                                                            \
    "\t.cfi_adjust_cfa_offset -8\n"                                                \
    "\tmovq %fs:(%rax), %rax\n"                                                    \
    "\ttestq %rax, %rax\n"                                                         \
    "\tjz sp_slow_" #sym "\n"                                                      \
    "\tcmpl $0, 16(%rax)\n"                                                        \
    "\tje sp_slow_" #sym "\n"
#else
#define SP_ASM_OPEN(sym) "\tjmp sp_slow_" #sym "\n"
#endif

/* real_##sym: the real function, resolved on its first call; a miss is not
 * stored, so the next call looks again (the library may be loaded later). */
#define SP_REAL_FN(ret, sym, params, call)                                         \
    typedef ret(*sp_fn_##sym) params;                                              \
    static ret sp_resolve_##sym params;                                            \
    __attribute__((used)) static sp_fn_##sym real_##sym = sp_resolve_##sym;        \
    static ret sp_resolve_##sym params                                             \
    {                                                                              \
        sp_fn_##sym fp_ = (sp_fn_##sym)sp_real(#sym);                              \
        if (SP_UNLIKELY(!fp_))                                                     \
            return (ret)sp_real_missing(#sym);                                     \
        __atomic_store_n(&real_##sym, fp_, __ATOMIC_RELAXED);                      \
        return fp_ call;                                                           \
    }

/* Stores the record of a call that ran from t0 to t1 and returned r, on
 * thread t in window w, with event flags `flags`; `fill` sees the record as e
 * (after the zeroing, so the compiler drops the stores it overwrites). Keeps
 * errno. */
#define SP_RECORD_API_F(sym, flags, fill)                                          \
    do {                                                                           \
        sp_event_t *e = sp_hook_reserve(t, w);                                     \
        if (e) {                                                                   \
            sp_rec_api(e, t, SP_API_##sym, t0, t1, (int)r, w, flags);              \
            fill;                                                                  \
            e->stack = sp_hook_stack();                                            \
            sp_ev_commit(t);                                                       \
        }                                                                          \
    } while (0)
#define SP_RECORD_API(sym, fill) SP_RECORD_API_F(sym, 0, fill)

/* The end of a recorded call, guard held: the real call after a clock read,
 * its record, the guard given back; returns what the real call did. `ends`
 * says whether a second clock read ends the call: 1 for every call but the
 * launches, which read sp_launch_end_clock (runtime) or sp_drv_launch_end_clock
 * (driver; collectors/cupti.h): 0 while CUPTI's API records time them, or
 * launch_durations is `start`; their record is then marked SP_EV_END_CUPTI
 * (t1 = t0) and the exporter takes the end from CUPTI's record of the same
 * call (exporters/gpu_pair.c). */
#define SP_TIMED_CALL(ret, sym, call, ends, fill)                                  \
    uint64_t t0 = sp_clock_ticks();                                                \
    ret r = real_##sym call;                                                       \
    int ends_ = (ends);                                                            \
    uint64_t t1 = ends_ ? sp_clock_ticks() : t0;                                   \
    SP_RECORD_API_F(sym, ends_ ? 0 : SP_EV_END_CUPTI, fill);                       \
    sp_hook_exit(t);                                                               \
    return r

/* The slow path of sym, entered with the gate open: `call` is the
 * parenthesised argument list; `fill` fills e->a[] / e->aux from the
 * arguments (and r, the result); `ends` as SP_TIMED_CALL's. Hot when the
 * thread is known, holds no guard and the gate is a record window and
 * `cold_if` is false: guard, the clock read before (and after, `ends`) the
 * real call, one record; errno untouched (the real
 * function's reaches the caller). A call the real function makes itself (the
 * runtime's launch calling the driver's) passes through after one TLS load.
 * Everything else is sp_cold_<sym>: activation, thread registration, the
 * signal poll, `pre` (step markers, wanted when `cold_if`: it may move the
 * window, so w is re-read), warmup windows (timed, not stored) and gates
 * with SP_WIN_COUNT (markers only: nothing timed or stored). */
#define SP_SLOW_FN(ret, sym, params, call, cold_if, pre, ends, fill)               \
    SP_REAL_FN(ret, sym, params, call)                                             \
    __attribute__((noinline, cold)) static ret sp_cold_##sym params                \
    {                                                                              \
        int errno_ = errno;                                                        \
        uint32_t w = sp_ev_gate_load();                                            \
        sp_thread_t *t = sp_hook_enter(&w);                                        \
        if (!t) {                                                                  \
            errno = errno_;                                                        \
            return real_##sym call;                                                \
        }                                                                          \
        pre;                                                                       \
        errno = errno_;                                                            \
        if (w & SP_WIN_COUNT) {                                                    \
            ret r = real_##sym call;                                               \
            sp_hook_exit(t);                                                       \
            return r;                                                              \
        }                                                                          \
        SP_TIMED_CALL(ret, sym, call, ends, fill);                                 \
    }                                                                              \
    SP_SLOW_ATTRS static ret sp_slow_##sym params                                  \
    {                                                                              \
        sp_thread_t *t = sp_ev_self;                                               \
        if (SP_LIKELY(t != NULL) && t->in_hook)                                    \
            return real_##sym call;                                                \
        uint32_t w = sp_ev_gate_load();                                            \
        if (SP_UNLIKELY(t == NULL || !sp_hook_hot(w) || (cold_if)))                \
            return sp_cold_##sym call;                                             \
        t->in_hook = 1;                                                            \
        SP_TIMED_CALL(ret, sym, call, ends, fill);                                 \
    }

/* A stub's closed-gate path: the gate in %eax, and with it 0 a jump to the
 * real function; otherwise on to local label 1. */
#define SP_ASM_CLOSED(sym)                                                         \
    "\tmovl sp_ev_gate(%rip), %eax\n"                                              \
    "\ttestl %eax, %eax\n"                                                         \
    "\tjnz 1f\n"                                                                   \
    "\tjmp *real_" #sym "(%rip)\n"

/* ret sym(params), exported (see SP_ENTRY): the closed-gate path is a load,
 * a branch and an indirect jump; see SP_SLOW_FN for the rest. */
#define SP_INTERPOSE_EX(ret, sym, params, call, cold_if, pre, fill)                \
    SP_SLOW_FN(ret, sym, params, call, cold_if, pre, 1, fill)                      \
    SP_ENTRY(sym, SP_ASM_CLOSED(sym) "1:\n" SP_ASM_OPEN(sym))

/* Kernel launches: SP_INTERPOSE_EX whose `pre` is the kernel marker, for the
 * launched function `fn` (a handle when is_handle). While the gate only
 * counts for markers (SP_WIN_COUNT, no window), a launch of a kernel the
 * markers' verdict cache already knows not to match is a tail call as well:
 * one more load and compare, inline, no frame (inject/markers.h). Any other
 * launch takes the slow path, which asks the marker and fills the cache.
 * `ends` as SP_TIMED_CALL's. */
#define SP_INTERPOSE_GATED(ret, sym, params, call, fn, is_handle, reg, ends, fill) \
    SP_SLOW_FN(ret, sym, params, call, sp_mark_launch_wanted(fn), sp_mark_launch(fn, is_handle, &w), \
               ends, fill)                                                         \
    SP_ENTRY(sym, SP_ASM_CLOSED(sym)                                                \
                  "1:\tcmpl $0x40000000, %eax\n" /* SP_WIN_COUNT */                \
                  "\tjne 2f\n"                                                     \
                  SP_ASM_MARK_KNOWN_IDLE(reg)                                      \
                  "\tjne 2f\n"                                                     \
                  "\tjmp *real_" #sym "(%rip)\n"                                    \
                  "2:\n" SP_ASM_OPEN(sym))

#define SP_INTERPOSE(ret, sym, params, call, fill) SP_INTERPOSE_EX(ret, sym, params, call, 0, (void)0, fill)

/* Allocation interposers. profile_memory must see every allocation and free,
 * also while no window records (the live map), so these open on a second
 * flag, sp_mem_on, beside the gate; launches never read it. `mem` runs after
 * the real call with mc (collectors/memory.h) filled and may leave a value
 * for the record in mem_bytes (a free's size); `record` is
 * SP_RECORD_API(sym, fill) for the entry points of collectors/api.h, (void)0
 * for those without a row (the driver API). Memory times are CLOCK_MONOTONIC
 * ns, read outside the ticks so a recorded slice does not include them; in
 * record windows they are exact and bracket the call, so CUPTI's record of
 * the same call can be matched to it; outside they only date the block. */
#define SP_INTERPOSE_MEM(ret, sym, params, call, mem, record)                      \
    SP_REAL_FN(ret, sym, params, call)                                             \
    SP_SLOW_ATTRS static ret sp_slow_##sym params                                  \
    {                                                                              \
        int errno_ = errno;                                                        \
        uint32_t w = sp_ev_gate_load();                                            \
        sp_thread_t *t = sp_hook_enter(&w);                                        \
        int mem_on_ = sp_mem_on;                                                   \
        if (!t && mem_on_)                                                         \
            t = sp_hook_enter_idle();                                              \
        errno = errno_;                                                            \
        if (!t)                                                                    \
            return real_##sym call;                                                \
        int rec_ = sp_win_timed(w);                                                \
        sp_mem_call_t mc = {#sym, 0, 0, (uintptr_t)__builtin_return_address(0),  \
                            t->tid, 0};                                            \
        mc.t0 = mem_on_ && rec_ ? sp_mem_clock(1) : 0;                             \
        uint64_t t0 = rec_ ? sp_clock_ticks() : 0;                                 \
        ret r = real_##sym call;                                                   \
        uint64_t t1 = rec_ ? sp_clock_ticks() : 0;                                 \
        uint64_t mem_bytes = 0;                                                    \
        errno_ = errno;                                                            \
        if (mem_on_) {                                                             \
            mc.t1 = sp_mem_clock(rec_);                                            \
            mc.t0 = mc.t0 ? mc.t0 : mc.t1;                                         \
            mc.result = (int)r;                                                    \
            mem;                                                                   \
        }                                                                          \
        (void)mem_bytes, (void)t0, (void)t1;                                       \
        if (rec_)                                                                  \
            record;                                                                \
        sp_hook_exit(t);                                                           \
        errno = errno_;                                                            \
        return r;                                                                  \
    }                                                                              \
    SP_ENTRY(sym, "\tmovl sp_ev_gate(%rip), %eax\n"                                 \
                  "\torl sp_mem_on(%rip), %eax\n"                                   \
                  "\tjnz sp_slow_" #sym "\n")

/* The allocation and free interposers of the runtime and the driver (both
 * return 0 for success): the memory collector gets the block (kind: enum
 * sp_mem_kind, on the thread's device) and its record (shape ALLOC / FREE of
 * collectors/api.h) the pointer *pp, bytes, a2 (flags or pitch) and stream s;
 * a free's record the size the collector knew. */
#define SP_OUT_PTR(pp) (r == 0 && (pp) ? SP_U64(*(pp)) : 0)
/* The device an allocation counts on: the thread's cudaSetDevice device, unless the file says
 * otherwise before including this header (the driver's: its current context's). */
#ifndef SP_ALLOC_DEVICE
#define SP_ALLOC_DEVICE() sp_mem_device()
#endif
#define SP_ALLOC_HOOK(ret, sym, params, call, pp, bytes, a2, s, kind)                           \
    SP_INTERPOSE_MEM(ret, sym, params, call,                                                    \
                     sp_mem_alloc(&mc, SP_OUT_PTR(pp), bytes, SP_U64(s), kind, SP_ALLOC_DEVICE()), \
                     SP_RECORD_API(sym, sp_fill4(e, SP_OUT_PTR(pp), bytes, a2, SP_U64(s))))
#define SP_FREE_HOOK(ret, sym, params, call, ptr, s)                                            \
    SP_INTERPOSE_MEM(ret, sym, params, call, mem_bytes = sp_mem_free(&mc, SP_U64(ptr), SP_U64(s)), \
                     SP_RECORD_API(sym, sp_fill4(e, SP_U64(ptr), mem_bytes, 0, SP_U64(s))))

#endif
