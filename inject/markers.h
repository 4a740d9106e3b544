/* inject/markers.h — how interposers report step-marker calls (kernel
 * launches, cudaProfilerStart/Stop) to the schedule. Costs one predictable
 * branch on a flag word unless that marker kind is configured. With a kernel:
 * marker, the verdict for each launched function (does its name match the
 * glob?) is cached lock-free in sp_mark_cache, which launch interposers read
 * inline (hook.h SP_INTERPOSE_GATED): a kernel known not to match costs a load
 * and a compare, no call. */
#ifndef SP_MARKERS_H
#define SP_MARKERS_H

#include <stdatomic.h>
#include <stdint.h>

enum { SP_MF_KERNEL = 1, SP_MF_PROFILER = 2 };
extern int sp_marker_flags;

/* One word per slot: fn when fn's name is known not to match, ~fn when it
 * is known to match, anything else (0 when empty) unknown; so the launch
 * entries' test is one compare with fn itself. A launch of NULL, which the
 * empty slot "knows", matches no name anyway (the real call fails it). */
#define SP_MARK_CACHE 4096u
extern _Atomic uint64_t sp_mark_cache[SP_MARK_CACHE];

/* Functions and handles are 16-byte aligned; bits 4..15 tell apart the
 * launch stubs of one object and the handles of one heap arena. */
static inline unsigned sp_mark_slot(const void *fn)
{
    return (unsigned)((uintptr_t)fn >> 4) & (SP_MARK_CACHE - 1);
}

/* sp_mark_known_idle(%reg) for the launch entries' assembly (hook.h
 * SP_ENTRY): the same slot ((fn >> 4 & 4095) * 8 bytes in) and word; sets
 * ZF when known idle; clobbers %rax and %r11 only. */
_Static_assert(SP_MARK_CACHE == 4096u, "SP_ASM_MARK_KNOWN_IDLE's mask");
#define SP_ASM_MARK_KNOWN_IDLE(reg)                                                \
    "\tmovq %" #reg ", %rax\n"                                                     \
    "\tshrq $1, %rax\n"                                                           \
    "\tandl $0x7ff8, %eax\n"                                                      \
    "\tleaq sp_mark_cache(%rip), %r11\n"                                          \
    "\tcmpq %" #reg ", (%r11,%rax)\n"

/* The kernel marker already knows fn never matches. */
static inline int sp_mark_known_idle(const void *fn)
{
    return atomic_load_explicit(&sp_mark_cache[sp_mark_slot(fn)], memory_order_relaxed) == (uint64_t)(uintptr_t)fn;
}

/* What a launch's fn is, for its name (collectors/kernels.h): a runtime
 * host stub, a runtime kernel handle, or a driver CUfunction, which is named
 * through cuFuncGetName when the marker first sees it (recorded launches name
 * it too, but a marker must match before any window records). */
enum { SP_MARK_STUB = 0, SP_MARK_HANDLE = 1, SP_MARK_CUFUNCTION = 2 };
void sp_drv_name_function(const void *f);   /* inject/driver_api_hooks.c */

void sp_mark_kernel_slow(const void *fn, int is_handle, uint32_t *window);
/* fn was (re)named (a stub registered, a handle mapped): its verdict, if
 * cached, is forgotten, so its next launch is matched again. */
void sp_mark_forget(const void *fn);
void sp_mark_profiler_slow(int start, uint32_t *window);

/* A launch of fn must be shown to the kernel marker. */
static inline int sp_mark_launch_wanted(const void *fn)
{
    return __builtin_expect(sp_marker_flags & SP_MF_KERNEL, 0) && !sp_mark_known_idle(fn);
}

static inline void sp_mark_launch(const void *fn, int is_handle, uint32_t *window)
{
    if (sp_mark_launch_wanted(fn))
        sp_mark_kernel_slow(fn, is_handle, window);
}

/* cudaProfilerStart/Stop must be shown to the schedule. */
static inline int sp_mark_profiler_wanted(void)
{
    return sp_marker_flags & SP_MF_PROFILER;
}

static inline void sp_mark_profiler_api(int start, uint32_t *window)
{
    if (sp_mark_profiler_wanted())
        sp_mark_profiler_slow(start, window);
}

#endif
