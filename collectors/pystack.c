/* collectors/pystack.c — see pystack.h. The profile function runs on the
 * thread that executes Python, holding the GIL: on a call it pushes the
 * callee's frame-name id, on a return it pops (generators: a resume is a call,
 * a yield a return, so the stack stays paired). A C function call (a
 * PyCFunction: CPython reports no other) is pushed and popped the same way,
 * as torch.profiler's tracer records it ("<built-in method relu of type
 * object at 0x..>"), but it is no source location: operators' call stacks
 * leave it out and its push or pop keeps the capture memo. Names come from
 * collectors/pyname.c, cached per code object, nn.Module instance and C
 * method definition (frames already running when recording begins are named
 * afresh, by their current line, as torch names them).
 * The shadow stack has a fixed size (PY_MAX frames, outermost kept); it is
 * written by its own thread only, so a capture on that thread reads it with
 * plain loads. Free-threaded builds (no GIL) are not supported: the name
 * caches rely on the GIL.
 * In a record window each Python function or C call that returns also leaves
 * one fixed-size record in the thread's event buffer (collectors/events.h: no
 * lock, no malloc; a full pool drops and counts): its start (the call's clock
 * read; a frame that began before the window starts at the step boundary that
 * opened it, which the Python side reports, else at the thread's first Python
 * event in the window, as torch.profiler starts such frames at its trace's
 * start), its end and its depth. No clock is read outside record windows.
 * Frames still open when a step ends are written then too, flagged
 * SP_PYF_CUT (torch ends frames still open at its trace's end); when the
 * frame returns inside the same window its own record supersedes the cut one
 * (exporters/py_trace.c). A frame or C call under one of stepprof's own
 * (hidden) frames is not written, nor one deeper than PY_MAX. A pass-through
 * frame (stepprof's wrapper around the optimizer's step, which torch's trace
 * does not have) is not written either, but what it calls is the program's:
 * written one level up, as children of its caller (C functions it calls
 * itself stay hidden).
 * nn.Module calls, as torch.profiler's python tracer finds them: a frame of
 * torch.nn.Module.__call__'s code object (one pointer compare per call) is a
 * module call; its "self" names the record "nn.Module: <class __name__>" and
 * the record carries self and its class, which the exporter numbers per
 * cycle. Its shadow-stack name stays the frame's (the operators' call stacks
 * are unchanged). */
#define _GNU_SOURCE
#include "pystack.h"

#include "clock.h"
#include "events.h"
#include "pyname.h"

#include <pthread.h>
#include <stdlib.h>

#define PY_MAX 256
#define SEED_MAX 4096          /* frames read when turning on; deeper ones are lost */

/* CPython's PyTrace_CALL, PyTrace_RETURN, PyTrace_C_CALL, PyTrace_C_EXCEPTION, PyTrace_C_RETURN */
enum { PY_CALL = 0, PY_RETURN = 3, PY_C_CALL = 4, PY_C_EXCEPTION = 5, PY_C_RETURN = 6 };
enum { K_PY = 0, K_C = 1, K_THROUGH = 2 };   /* what a shadow-stack slot holds */

typedef sp_pyobj pyobj;

typedef struct shadow {
    int on;
    int depth;                 /* frames open since the seed; > PY_MAX: the deepest are not kept */
    int hidden;                /* depth of the outermost open hidden frame (id 0); PY_MAX when none */
    uint32_t win;              /* the gate value at the last event */
    uint64_t win_t;            /* when win began for this thread's frames */
    uint64_t boundary_t;       /* sp_pystack_step_end(0)'s time and gate */
    uint32_t boundary_gate;
    uint64_t gen;              /* bumped by every push and pop of a Python frame */
    uint64_t memo_gen;         /* sp_pystack_memo: the stack id captured at this gen */
    uint32_t memo;
    uint32_t id[PY_MAX];       /* outermost first; 0 for a hidden or pass-through frame */
    uint64_t t0[PY_MAX];       /* when each began */
    uint32_t mod[PY_MAX];      /* an nn.Module call: its "nn.Module: Cls" name id, else 0 */
    pyobj mod_self[PY_MAX], mod_cls[PY_MAX];
    uint32_t from[PY_MAX];     /* the caller's name id ("CallFrom"'s file), 0 = unknown */
    uint32_t from_line[PY_MAX];    /* the caller's current line at the call */
    uint8_t kind[PY_MAX];      /* K_PY, K_C or K_THROUGH */
    uint16_t level[PY_MAX];    /* the depth written: the written frames around it */
} shadow_t;

/* One TLS pointer (TLS descriptors, as everywhere: no initial-exec TLS); the
 * stack itself is heap memory, allocated once per thread (when it first turns
 * on) and freed when the thread ends. */
static __thread shadow_t *self;
static pthread_key_t self_key;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static int threads_on;         /* threads with the profile function on; GIL holders only */

static void make_key(void)
{
    pthread_key_create(&self_key, free);
}

/* Slot d holds a frame (or C call) named id, of kind k, beginning at t0. */
static void put(shadow_t *s, int d, uint32_t id, int k, const sp_pymod_t *m, uint64_t t0)
{
    if (id == SP_PYNAME_THROUGH)
        id = 0, k = K_THROUGH;
    s->id[d] = id;
    s->kind[d] = (uint8_t)k;
    s->level[d] = d ? (uint16_t)(s->level[d - 1] + (s->kind[d - 1] != K_THROUGH)) : 0;
    if ((s->mod[d] = m ? m->name : 0))
        s->mod_self[d] = m->self, s->mod_cls[d] = m->cls;
    if (!id && k != K_THROUGH && d < s->hidden)
        s->hidden = d;
    s->t0[d] = t0;
    s->from[d] = 0;
}

/* The slot of the Python frame that called slot d (pass-through frames and
 * C calls, which have no frame, skipped), or -1; *through: the pass-through
 * frames skipped. */
static int caller_slot(const shadow_t *s, int d, int *through)
{
    int j = d - 1;
    *through = 0;
    for (; j >= 0 && s->kind[j] != K_PY; j--)
        *through += s->kind[j] == K_THROUGH;
    return j;
}

/* torch's "CallFrom" of slot d, called from frame (a C call) or from frame's
 * caller (a Python call): the calling frame's file and current line; an
 * outermost frame's own. One line-number lookup per call, in windows only. */
static void call_from(shadow_t *s, int d, pyobj frame, int python)
{
    int through, j = caller_slot(s, d, &through);
    pyobj f = frame, held = NULL;
    for (int k = python ? through + 1 : 0; k > 0 && f; k--) {
        f = sp_py.frame_back(f);
        if (held)
            sp_py.decref(held);
        held = f;
    }
    if (!f)
        f = frame, j = d;
    s->from[d] = j >= 0 ? s->id[j] : 0;
    s->from_line[d] = s->from[d] ? (uint32_t)sp_py.frame_line(f) : 0;
    if (held)
        sp_py.decref(held);
}

/* A frame or C call about to return (slot depth - 1) that began outside a
 * record window (no clock read, no "CallFrom") but is written, as it returns
 * inside one: its "CallFrom" now. Its caller is still at the call's line. */
static void late_from(shadow_t *s, pyobj frame, int python)
{
    int d = s->depth - 1;
    if (d >= 0 && d < PY_MAX && !s->from[d] && s->id[d] && d < s->hidden && s->kind[d] != K_THROUGH &&
        sp_win_records(sp_ev_gate_load()))
        call_from(s, d, frame, python);
}

/* The clock now in a record window, else 0 (no clock read: a frame that
 * began before the window starts at win_t whatever its t0); notes a new
 * window (the start of the frames that began before it). */
static uint64_t tick(shadow_t *s, uint32_t *gate)
{
    *gate = sp_ev_gate_load();
    uint64_t now = sp_win_records(*gate) ? sp_clock_ticks() : 0;
    if (__builtin_expect(*gate != s->win, 0)) {
        s->win = *gate;
        s->win_t = now;
    }
    return now;
}

/* Slot d as a python_function record of the current record window. */
static void write_frame(shadow_t *s, int d, uint32_t gate, uint64_t now, uint16_t flags)
{
    sp_thread_t *t = sp_ev_thread();
    if (!t || t->in_hook)  /* a signal handler's CUDA/NVTX call would take the same slot */
        return;
    t->in_hook = 1;
    sp_event_t *e = sp_ev_reserve(t, gate);
    if (e) {
        uint32_t mod = s->mod[d];
        *e = (sp_event_t){.t0 = s->t0[d] > s->win_t ? s->t0[d] : s->win_t, .t1 = now, .name = mod ? mod : s->id[d],
                          .window = gate, .kind = SP_EV_PYFUNC, .flags = flags | (mod ? SP_PYF_MODULE : 0),
                          .a = {s->level[d], mod ? (uintptr_t)s->mod_self[d] : 0, mod ? (uintptr_t)s->mod_cls[d] : 0,
                                s->from[d], s->from_line[d]}};
        sp_ev_commit(t);
    }
    t->in_hook = 0;
}

static void push(shadow_t *s, uint32_t id, int k, const sp_pymod_t *m)
{
    uint32_t gate;
    int d = s->depth++;
    if (d < PY_MAX)
        put(s, d, id, k, m, tick(s, &gate));
}

static void pop(shadow_t *s)
{
    int d = --s->depth;
    if (d >= PY_MAX)
        return;
    uint32_t gate;
    uint64_t now = tick(s, &gate);
    if (d < s->hidden && s->id[d] && sp_win_records(gate))
        write_frame(s, d, gate, now, 0);
    else if (d == s->hidden)
        s->hidden = PY_MAX;
}

/* Whether the innermost open slot is a C call (past PY_MAX: unknown). */
static int in_c(const shadow_t *s)
{
    return s->depth > 0 && s->depth <= PY_MAX && s->kind[s->depth - 1] == K_C;
}

static int on_event(pyobj obj, pyobj frame, int what, pyobj arg)
{
    (void)obj;
    shadow_t *s = self;
    if (!s)
        return 0;
    int d = s->depth;
    if (what == PY_CALL) {
        sp_pymod_t m = {0};
        push(s, d < PY_MAX ? sp_pyname_frame(frame, 0, &m) : 0, K_PY, &m);
        if (d < PY_MAX && s->t0[d] && s->id[d] && d < s->hidden)
            call_from(s, d, frame, 1);
        s->gen++;
    } else if (what == PY_C_CALL) {
        /* A C function called under a hidden frame, or by a pass-through one, is not the program's. */
        int mine = d < PY_MAX && d < s->hidden && !(d && s->kind[d - 1] == K_THROUGH);
        push(s, mine ? sp_pyname_cfunc(arg) : 0, K_C, NULL);
        if (mine && s->t0[d] && s->id[d])
            call_from(s, d, frame, 0);
    } else if (what == PY_RETURN) {
        while (in_c(s)) { /* a C call whose return was not seen (it began before the profile function) */
            late_from(s, frame, 0);
            pop(s);
        }
        if (s->depth > 0) {
            late_from(s, frame, 1);
            pop(s);
        }
        s->gen++;
    } else if ((what == PY_C_RETURN || what == PY_C_EXCEPTION) && (s->depth > PY_MAX || in_c(s))) {
        late_from(s, frame, 0);
        pop(s);
    }
    return 0;
}

/* The open frames as records ending now, flagged cut (a step ends); the time. */
static uint64_t cut(shadow_t *s)
{
    uint32_t gate;
    uint64_t now = tick(s, &gate);
    if (!now)
        now = sp_clock_ticks();
    int open = s->depth < s->hidden ? s->depth : s->hidden;
    for (int d = 0; d < open && sp_win_records(gate); d++)
        if (s->id[d])
            write_frame(s, d, gate, now, SP_PYF_CUT);
    return now;
}

/* The frames already running, outermost first. */
static void seed(shadow_t *s)
{
    static uint32_t inner[SEED_MAX], line[SEED_MAX]; /* GIL holders only */
    static sp_pymod_t inner_mod[SEED_MAX];
    int n = 0;
    pyobj f = sp_py.get_frame(), held = NULL;
    while (f && n < SEED_MAX) {
        inner[n] = sp_pyname_frame(f, 1, &inner_mod[n]);
        line[n++] = (uint32_t)sp_py.frame_line(f);
        pyobj back = sp_py.frame_back(f);
        if (held)
            sp_py.decref(held);
        f = held = back;
    }
    if (held)
        sp_py.decref(held);
    s->depth = n;
    s->gen++;
    s->hidden = PY_MAX;
    uint64_t now = tick(s, &(uint32_t){0});
    for (int k = 0; k < n && k < PY_MAX; k++) {
        put(s, k, inner[n - 1 - k], K_PY, &inner_mod[n - 1 - k], now);
        int through, j = k ? caller_slot(s, k, &through) : k;
        s->from[k] = j >= 0 ? s->id[j] : 0;
        s->from_line[k] = j >= 0 ? line[n - 1 - j] : 0;
    }
}

int sp_pystack_set(int on, const char *prefixes)
{
    if (sp_pyname_load() < 0)
        return 0;
    if (prefixes)
        sp_pyname_prefixes(prefixes);
    shadow_t *s = self;
    if (on <= 0) {
        if (s && s->on && on == 0) {
            cut(s);
            sp_py.set_profile(NULL, NULL);
        }
        if (s && s->on && --threads_on == 0)
            sp_pyname_forget();
        if (s)
            s->on = 0;
        return 0;
    }
    if (!s) {
        pthread_once(&self_once, make_key);
        if (!(s = calloc(1, sizeof *s)))
            return 0;
        pthread_setspecific(self_key, s);
        self = s;
    }
    if (s->on)
        return 1;
    sp_pyname_learn_module();
    sp_pyname_reserve();
    seed(s);
    sp_py.set_profile(on_event, NULL);
    s->on = 1;
    threads_on++;
    return 1;
}

void sp_pystack_step_end(int done)
{
    shadow_t *s = self;
    if (!s || !s->on)
        return;
    if (!done) {
        s->boundary_t = cut(s);
        s->boundary_gate = sp_ev_gate_load();
        return;
    }
    uint32_t gate = sp_ev_gate_load();
    if (s->boundary_t && gate != s->boundary_gate) {   /* a window opened here: the open frames start here */
        s->win = gate;
        s->win_t = s->boundary_t;
    }
    s->boundary_t = 0;
}

int sp_pystack_copy(void **out, int max)
{
    const shadow_t *s = self;
    if (!s || !s->on)
        return 0;
    int kept = s->depth < PY_MAX ? s->depth : PY_MAX, n = 0;
    for (int k = kept - 1; k >= 0 && n < max; k--)
        if (s->id[k] && s->kind[k] == K_PY)
            out[n++] = (void *)(SP_PYFRAME_BIT | s->id[k]);
    return n;
}

uint32_t sp_pystack_memo(void)
{
    const shadow_t *s = self;
    return s && s->on && s->memo_gen == s->gen ? s->memo : 0;
}

void sp_pystack_set_memo(uint32_t id)
{
    shadow_t *s = self;
    if (s) {
        s->memo = id;
        s->memo_gen = s->gen;
    }
}

int sp_pystack_on(void)
{
    return self && self->on;
}
