/* inject/hook.h — the shape of every interposer. SP_INTERPOSE defines an
 * exported function that, while the gate is closed, costs one predictable
 * branch before a tail call to the real function; the real pointer starts at
 * a per-symbol resolver so no NULL check is needed. While collecting it takes
 * two clock reads around the real call and fills one record. The recursion
 * guard keeps a runtime that calls its own exported entry points from being
 * recorded twice. errno is never touched on the fast path; slow paths save and
 * restore it. */
#ifndef SP_HOOK_H
#define SP_HOOK_H

#include "../collectors/api.h"
#include "../collectors/clock.h"
#include "../collectors/events.h"

#define SP_EXPORT __attribute__((visibility("default")))
#define SP_LIKELY(x) __builtin_expect(!!(x), 1)
#define SP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The real definition of `name` further down the search order; never NULL
 * (a missing symbol resolves to a stub returning cudaErrorUnknown). */
void *sp_real(const char *name);

/* Slow path when the gate is open: activates stepprof on first use, returns
 * the calling thread's state with the recursion guard taken, or NULL when this
 * call must not be recorded. *window is refreshed after activation. */
sp_thread_t *sp_hook_enter(uint32_t *window);

static inline void sp_hook_exit(sp_thread_t *t)
{
    t->in_hook = 0;
}

static inline void sp_rec_api(sp_event_t *e, sp_thread_t *t, int api, uint64_t t0, uint64_t t1, int result,
                              uint32_t window)
{
    e->t0 = t0;
    e->t1 = t1;
    e->name = (uint32_t)api;
    e->corr = ++t->corr_seq;
    e->window = window;
    e->result = result;
    e->kind = SP_EV_API;
    e->flags = 0;
    e->aux = 0;
    e->a[0] = e->a[1] = e->a[2] = e->a[3] = e->a[4] = 0;
}

/* ret sym(params): `call` is the parenthesised argument list; `pre` runs
 * before the real call when the gate is open (step markers: it may move the
 * window, so *w is re-read); `fill` fills e->a[] / e->aux from the arguments
 * (and r, the result). A gate with SP_WIN_COUNT open only lets markers see
 * calls; nothing is timed or stored. */
#define SP_INTERPOSE_EX(ret, sym, params, call, pre, fill)                         \
    typedef ret(*sp_fn_##sym) params;                                              \
    static ret sp_resolve_##sym params;                                            \
    static sp_fn_##sym real_##sym = sp_resolve_##sym;                              \
    static ret sp_resolve_##sym params                                             \
    {                                                                              \
        sp_fn_##sym fp_ = (sp_fn_##sym)sp_real(#sym);                              \
        __atomic_store_n(&real_##sym, fp_, __ATOMIC_RELAXED);                      \
        return fp_ call;                                                           \
    }                                                                              \
    __attribute__((noinline)) static ret sp_slow_##sym params                      \
    {                                                                              \
        uint32_t w = sp_ev_gate_load();                                            \
        sp_thread_t *t = sp_hook_enter(&w);                                        \
        if (!t)                                                                    \
            return real_##sym call;                                                \
        pre;                                                                       \
        if (w & SP_WIN_COUNT) {                                                    \
            sp_hook_exit(t);                                                       \
            return real_##sym call;                                                \
        }                                                                          \
        uint64_t t0 = sp_clock_ticks();                                            \
        ret r = real_##sym call;                                                   \
        uint64_t t1 = sp_clock_ticks();                                            \
        sp_event_t *e = sp_ev_reserve(t, w);                                       \
        if (e) {                                                                   \
            sp_rec_api(e, t, SP_API_##sym, t0, t1, (int)r, w);                     \
            fill;                                                                  \
            sp_ev_commit(t);                                                       \
        }                                                                          \
        sp_hook_exit(t);                                                           \
        return r;                                                                  \
    }                                                                              \
    /* Both returns are sibling calls with this function's own arguments, so   \
     * the closed-gate path is a load, a branch and an indirect jump. */        \
    SP_EXPORT ret sym params                                                       \
    {                                                                              \
        if (SP_LIKELY(sp_ev_gate_load() == 0))                                     \
            return real_##sym call;                                                \
        return sp_slow_##sym call;                                                 \
    }

#define SP_INTERPOSE(ret, sym, params, call, fill) SP_INTERPOSE_EX(ret, sym, params, call, (void)0, fill)

#endif
