/* collectors/stacks.h — native call stacks of intercepted CUDA calls
 * (with_stack). Capture walks the stack with libunwind's unw_backtrace
 * (dlopened RTLD_LOCAL at init: its .so exports _Unwind_* and backtrace,
 * which must not reach the target's symbol scope) or, where libunwind.so.8
 * is missing or unwinder says so, glibc's backtrace() (libgcc_s's unwinder,
 * slower); Python frames need neither. It stores each distinct
 * stack once in a table; a record keeps only the 32-bit id. Lookup of a
 * known stack takes no lock; a new stack takes a mutex once. Frames inside
 * libstepprof (the interposer, this file) are dropped at capture.
 * Symbolization happens at export (exporters/stacks_sym.c), never here. */
#ifndef SP_STACKS_H
#define SP_STACKS_H

#include <stddef.h>
#include <stdint.h>

/* 1 once sp_stack_init succeeded: the interposer's only test when off. */
extern int sp_stack_enabled;

/* The native unwinder (config key unwinder): auto = libunwind when
 * libunwind.so.8 loads, else glibc's backtrace() (one info line); libunwind
 * = the same with a warning on the fallback; glibc = backtrace() only. */
enum { SP_STACK_UNWIND_AUTO = 0, SP_STACK_UNWIND_LIBUNWIND = 1, SP_STACK_UNWIND_GLIBC = 2 };

/* Allocates the table and picks the native unwinder; depth = frames kept
 * per stack (1..256). 0 ok, also when no native unwinder works (one
 * stepprof: line; stacks then hold Python frames only); -1 with one
 * stepprof: line when the table cannot be allocated (stacks stay off,
 * profiling goes on). Call once, before the gate opens. */
int sp_stack_init(long depth, int unwinder);

/* Id of the calling thread's current stack, 0 when none (disabled, unwind
 * failed, table full): up to depth native frames, then, on a thread running
 * Python with stepprof's profile function on, up to depth Python frames
 * (collectors/pystack.h), innermost first in each part. */
uint32_t sp_stack_capture(void);

/* The same with the Python frames only (no unwind): what PyTorch operators
 * carry, as in torch.profiler. 0 when the thread has none. */
uint32_t sp_stack_capture_py(void);

static inline uint32_t sp_stack_capture_py_if_on(void)
{
    return __builtin_expect(sp_stack_enabled, 0) ? sp_stack_capture_py() : 0;
}

static inline uint32_t sp_stack_capture_if_on(void)
{
    return __builtin_expect(sp_stack_enabled, 0) ? sp_stack_capture() : 0;
}

/* Read API for exporters: the return addresses of stack id, innermost
 * first, then its Python frames (SP_PYFRAME_BIT set); NULL when id is unknown. Valid for the life of the process. */
const uintptr_t *sp_stack_get(uint32_t id, size_t *n);

/* Stacks dropped because the table was full. */
uint64_t sp_stack_overflow_count(void);

#ifdef SP_STACKS_TEST
/* The unit test's build (tests/unit/test_stacks.c): the id of the stack of
 * the n return addresses pc, added when new, and the table slot where its
 * probe starts. */
uint32_t sp_stack_intern_test(void *const *pc, int n);
uint32_t sp_stack_home_test(void *const *pc, int n);
#endif

/* After fork() in the child: the table lock may have been held. */
void sp_stack_after_fork_child(void);

/* The record's stack id, while sp_event_t may not have the field yet. */
#ifdef SP_EVENT_HAS_STACK
#define SP_EV_STACK(e) ((e)->stack)
#else
#define SP_EV_STACK(e) ((void)(e), 0u)
#endif

#endif
