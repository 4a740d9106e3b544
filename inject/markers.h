/* inject/markers.h — how interposers report step-marker calls (kernel
 * launches, cudaProfilerStart/Stop) to the schedule. Costs one predictable
 * branch on a flag word unless that marker kind is configured. */
#ifndef SP_MARKERS_H
#define SP_MARKERS_H

#include <stdint.h>

enum { SP_MF_KERNEL = 1, SP_MF_PROFILER = 2 };
extern int sp_marker_flags;

void sp_mark_kernel_slow(const void *fn, int is_handle, uint32_t *window);
void sp_mark_profiler_slow(int start, uint32_t *window);

static inline void sp_mark_launch(const void *fn, int is_handle, uint32_t *window)
{
    if (__builtin_expect(sp_marker_flags & SP_MF_KERNEL, 0))
        sp_mark_kernel_slow(fn, is_handle, window);
}

static inline void sp_mark_profiler_api(int start, uint32_t *window)
{
    if (sp_marker_flags & SP_MF_PROFILER)
        sp_mark_profiler_slow(start, window);
}


#endif
