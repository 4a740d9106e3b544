/* collectors/pystack.h — the Python frames of the calling thread (with_stack
 * in a Python process), as torch.profiler names them: "file.py(42): fn", the
 * file with its sys.path prefix cut and 42 the function's first line. A C
 * profile function (PyEval_SetProfile, found with dlsym: libpython is never
 * linked) keeps a per-thread shadow stack of interned frame-name ids; it is
 * installed on a thread only while that thread records (inject/python/ asks,
 * holding the GIL) and removed after. Reading the shadow stack takes no GIL,
 * no lock and no call into Python, so any hook on that thread (an NVTX
 * operator push with the GIL released, a CUDA call) can copy it. */
#ifndef SP_PYSTACK_H
#define SP_PYSTACK_H

#include <stdint.h>

/* A Python frame in a captured stack (collectors/stacks.h): this bit set,
 * the low 32 bits an interned frame-name id. Never a user-space address. */
#define SP_PYFRAME_BIT ((uintptr_t)1 << 63)

/* Turns the calling thread's profile function on (on = 1, seeding the
 * shadow stack with the frames already running) or off (0); -1 only forgets
 * it (the program has set a profile function of its own, which stays). The
 * caller holds the GIL.
 * prefixes: path prefixes to cut from file names, each ending in '/',
 * separated by '\n'; one written "!dir/" hides the frames of files under dir
 * (stepprof's own Python code), one written "=name" makes the functions of
 * that name in hidden files pass-throughs (what they call is the program's:
 * stepprof's wrapper around the optimizer's step); NULL keeps the last ones. A function entered
 * while on is named by its first line, a frame already running when turned
 * on by its current line (torch.profiler's python tracer does both). Returns 1 when
 * on, 0 when off or impossible (one stepprof: line says why, once). */
int sp_pystack_set(int on, const char *prefixes);

/* python_function records (collectors/events.h SP_EV_PYFUNC), of Python
 * function and C function calls: name = the frame-name id (a C call's
 * "<built-in ...>" name), a[0] = depth (0 = outermost, pass-through frames
 * not counted), flags SP_PYF_CUT when the
 * frame was still open at t1 (a step ended; exporters/py_trace.c drops it when
 * the frame's own record is in the same cycle). An nn.Module call (a frame of
 * torch.nn.Module.__call__, as torch.profiler finds them) is flagged
 * SP_PYF_MODULE: name = "nn.Module: <class name>", a[1] = the module (self)
 * and a[2] = its class, as addresses (the exporter numbers the instances of
 * each class). */
#define SP_PYF_CUT 1u
#define SP_PYF_MODULE 2u

/* A step is about to end on the calling thread (done = 0, the GIL held):
 * its open frames are written as cut records, in case the record window
 * closes; and it has ended (done = 1): if a window opened, frames already
 * running start at the step's end, not later. */
void sp_pystack_step_end(int done);

/* Copies up to max of the calling thread's Python frames, innermost first,
 * each (void *)(SP_PYFRAME_BIT | id), into out; the count (0 when the thread has no
 * profile function on). */
int sp_pystack_copy(void **out, int max);

/* A memo for the caller (collectors/stacks.c): the id last stored with
 * sp_pystack_set_memo while the calling thread's frames are still the same
 * (no call or return since), else 0. Operators called one after another from
 * the same Python line then cost one compare. */
uint32_t sp_pystack_memo(void);
void sp_pystack_set_memo(uint32_t id);

/* Whether the calling thread has stepprof's profile function on. */
int sp_pystack_on(void);

#endif
