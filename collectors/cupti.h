/* collectors/cupti.h — CUPTI, the truth about GPU activity: dlopened at run
 * time (never linked), set up from the CUDA injection entry point or at the
 * first intercepted call, activity kinds on only while a window is warming up
 * or recording. Every failure (no libcupti, no driver, another subscriber)
 * prints one stepprof: line and leaves stepprof on interposition + NVTX. */
#ifndef SP_CUPTI_H
#define SP_CUPTI_H

#include "gpu.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sp_devprop {
    int valid;
    char name[256];
    uint64_t total_global_mem;
    int major, minor, max_threads_per_block, max_threads_per_sm, regs_per_block, regs_per_sm, warp_size;
    uint64_t shared_mem_per_block, shared_mem_per_sm;
    int num_sms, max_blocks_per_sm;
} sp_devprop_t;

#define SP_MAX_DEVICES 16

int sp_cupti_init(int with_memory, long buffer_mb);  /* 0: active; -1: degraded (said why) */
/* Whether a CUDA driver that answers is here: libcuda.so.1, already loaded
 * or loaded now (CUPTI would load it), whose cuDriverGetVersion succeeds (the
 * toolkit's stub says CUDA_ERROR_STUB_LIBRARY). collectors/cupti_load.c. */
int sp_cupti_driver_present(void);
int sp_cupti_active(void);
void sp_cupti_enable(int on);      /* kinds on (warmup/record) or off; remembered before init */
/* Whether a recorded kernel launch reads the clock a second time at its end
 * (inject/hook.h): 1 = always (launch_durations: host), 0 = never (start:
 * its end is CUPTI's record's when there is one, else it lasts 0), -1 = a
 * runtime launch while CUPTI does not record runtime API calls, a driver
 * launch always (auto). Set before sp_cupti_init. */
void sp_cupti_set_launch_durations(int end_clock);
extern _Atomic int sp_launch_end_clock;   /* runtime launches */
extern int sp_drv_launch_end_clock;       /* driver launches: 0 only with `start` */
void sp_cupti_window_open(void);   /* drops records gathered so far (warmup) */
/* The program's thread closes a window: a counter and its device (*device, as
 * its cudaSetDevice calls left it; 0 by default), no CUDA call, no flush. The exporter then calls
 * sp_cupti_collect for it, once, in the order the windows closed. */
void sp_cupti_window_close(int *device);
/* Called once by stepprof's collecting thread (exporters/worker.c): only there
 * may a collect set the device, and every API record of it is stepprof's.
 * Elsewhere (the fallback on the exporter or a program thread) it syncs the
 * thread's own device. */
void sp_cupti_collector_thread(void);
/* The process ends: one forced flush on the exiting thread before the exit
 * holds the program's threads (CUPTI's among them); collects after it only take. */
void sp_cupti_exit_flush(void);
/* "cudaLaunchKernel"; NULL if unknown. A process-lifetime string: callers may
 * keep it (collectors/cupti_names.c). */
const char *sp_cupti_api_name(int driver, uint32_t cbid);
/* A runtime or driver callback id whose CUPTI-only records are pure queries,
 * left out by cupti_api_filter: queries (as Kineto does): cudaGetDevice,
 * cudaSetDevice, cudaGetLastError; driver calls that do not launch, copy, set,
 * sync, allocate, free, load a module or library, or set up the driver or a
 * context (cuDevicePrimaryCtxGetState, cuCtxGetCurrent, cuKernelGetName...).
 * Never an id collectors/api.h has a row for: such records may pair with an
 * intercepted call. */
int sp_cupti_api_is_query(int driver, uint32_t cbid);

/* The activity buffers whose pages collects numbered up to `upto` gave back
 * are touched again here, on a thread of stepprof's (the exporter's after the
 * export of that collect, with its number; the collecting thread's when asked
 * through the wake below), not by CUPTI's writes on the program's. One buffer
 * at a time; after each, stop() (may be NULL) may end it: 1 when it stopped
 * with such buffers left. */
int sp_cupti_rewarm(uint64_t upto, int (*stop)(void));
/* Called when recording goes on while activity buffers are cold (kinds
 * turned back on, or CUPTI left with one warm buffer), often on a program's
 * thread: it may only wake a thread, never block, and leaves errno alone.
 * upto: the latest collect whose buffers the request may warm, as of when it
 * was made (sp_cupti_rewarm's). Set by the exporters' worker once its
 * collecting thread runs. */
void sp_cupti_set_rewarm_wake(void (*wake)(uint64_t upto));
/* On the exporter's thread, for a closed window [begin_ns, end_ns]: sync the
 * device (when `sync`; not at exit: the runtime may be gone) and flush, so
 * the window's records are all in; then the window's records (runtime/driver
 * records by their start, GPU records by the API call that launched them,
 * else by their own start) moved into malloc'ed arrays (*out, its count
 * returned); older records are dropped, later ones kept. *dropped: records lost since the last collect.
 * *filtered: the window's query records left out (sp_cupti_set_query_filter).
 * *cold_gen: this collect's number, for sp_cupti_rewarm once its export is
 * done (0: it gave no pages back). */
size_t sp_cupti_collect(int sync, int device, uint64_t begin_ns, uint64_t end_ns,
                        sp_gpu_recs_t *out, uint64_t *dropped, uint64_t *filtered, uint64_t *cold_gen);
/* Records lost, cumulative: CUPTI's own drops (full buffers) and parsed
 * records past the bound on those kept (cupti_buffer_mb, the cycle cap). */
uint64_t sp_cupti_dropped(void);
/* Records kept per window at most (0 = only cupti_buffer_mb's bound); set
 * before the first window opens. */
void sp_cupti_set_cycle_cap(uint64_t max_records);
/* cupti_api_filter: queries: query records (sp_cupti_api_is_query) are left
 * out as they are parsed, so that they never count against the cycle cap or
 * cupti_buffer_mb's bound; a collect counts the window's in *filtered. Set
 * before the first window opens. */
void sp_cupti_set_query_filter(int on);
void sp_cupti_shutdown(void);      /* process end: forced flush, kinds off, cuptiFinalize */
const sp_devprop_t *sp_cupti_device(uint32_t dev);   /* NULL when unknown */
/* The device of a CUPTI context id, as the records that carry both (kernels,
 * copies, sets) have shown it so far, on any window; -1 when none has. For
 * synchronization records, which carry the context alone: any thread, no lock. */
int sp_cupti_context_device(uint32_t context);

/* Set when CUPTI becomes active; the interposers then call
 * sp_cupti_query_devices() once, after an intercepted call has returned. */
extern volatile int sp_cupti_devices_pending;
void sp_cupti_query_devices(void);
/* Another try while no device is known (a program whose calls stepprof never
 * intercepts once CUPTI is on: static cudart): the exit calls it before it
 * closes the last window; a collect that syncs calls it too. At most
 * SP_DEVQ_TRIES tries in all, the first included. */
void sp_cupti_query_devices_again(void);
#define SP_DEVQ_TRIES 4
/* Brackets one try of stepprof's own device queries (begin = 1, then 0; at
 * most SP_DEVQ_TRIES, one at a time): CUPTI's records of calls made in
 * between on that thread are dropped. */
void sp_cupti_own_calls(int begin);
void sp_cupti_after_fork_child(void);
/* The program runs torch.profiler: CUPTI is handed over to it for the rest of
 * the process (the records gathered so far go to the current window). 1 if
 * stepprof held CUPTI or would have taken it. */
int sp_cupti_release(void);

#endif
