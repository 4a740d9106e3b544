/* exporters/export.h — what the schedule hands to the exporters when a
 * recorded window closes: a self-contained job (no pointers into schedule/
 * state), run on the background exporter thread or, at exit, synchronously. */
#ifndef SP_EXPORT_H
#define SP_EXPORT_H

#include "../collectors/gpu.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sp_export_job {
    uint32_t window;          /* record window id whose events go in */
    uint64_t t_begin, t_end;  /* window bounds, clock ticks */
    long cycle;               /* 0-based recorded cycle */
    long first_step, last_step; /* recorded steps, -1 when the run has no steps */
    uint64_t dropped;         /* records lost to a full buffer in this window */
    int truncated;            /* SP_TRUNC_* bits; non-zero: "stepprof_truncated": true */
    int use_gzip;
    int gzip_lib;             /* SP_JOB_GZIP_*: which compressor (exporters/gz.c) */
    int record_shapes;        /* written as "record_shapes": 1, as Kineto does */
    int cupti;                /* GPU activity came from CUPTI */
    uint64_t cupti_dropped;   /* records CUPTI dropped in this window */
    uint64_t api_filtered;    /* CUPTI query records of this window left out (cupti_api_filter) */
    uint64_t cupti_cold_gen;  /* the collect that took the window's records: the CUPTI buffers it gave
                                 back are warmed again once the export is done (0: none) */
    int gpu_collect;          /* the exporter collects CUPTI's records of the window first */
    int gpu_sync, gpu_device; /* ... after a device sync (not at exit) of this device (-1: current) */
    sp_gpu_recs_t gpu;        /* CUPTI's records of the window, collected by the exporter in
                                 the order the windows closed; owned */
    char output_dir[4096];
    char worker[256];
    int with_stack;           /* write <stem>.stacks.txt (and .stacks_cuda.txt) */
    struct {                  /* the key-average table (schedule/config.h table.*) */
        char sort_by[32];     /* "" = automatic */
        long row_limit;       /* -1 = all */
        int group_by_input_shape;
        long group_by_stack_n;
        int print;            /* SP_JOB_TABLE_* bits */
    } table;
} sp_export_job_t;

/* use_gzip's compressor (gzip_lib). */
enum { SP_JOB_GZIP_AUTO = 0, SP_JOB_GZIP_ISAL = 1, SP_JOB_GZIP_ZLIB = 2 };

/* Where the key-average table goes; the same bits as SP_TABLE_PRINT_*. */
enum { SP_JOB_TABLE_STDERR = 1, SP_JOB_TABLE_FILE = 2 };

/* Why a cycle's trace is incomplete. */
enum { SP_TRUNC_END = 1, SP_TRUNC_LIMIT = 2 };   /* process ended mid-cycle; a size cap */

/* Bytes one host event is assumed to take in a trace, to turn max_trace_mb
 * into an event budget (measured ~200-330 for runtime calls with args). */
#define SP_EXPORT_EVENT_BYTES 512u

/* Traces written per second on average, past a burst (export.c). */
#define SP_EXPORT_MAX_PER_S 10
#define SP_EXPORT_BURST 100

/* Events kept per trace (0 = all): past it the latest-starting events are
 * left out, counted as dropped, and the job marked SP_TRUNC_LIMIT. */
void sp_export_set_limit(uint64_t max_events);

/* Starts the exporter thread (and with collect the collecting thread) now,
 * when a record window opens: the close that ends the window then only hands
 * its job over (design.md: the close is a handful of stores). Idempotent. */
void sp_export_start(int collect);

/* Runs fn(arg) on the report helper (started by sp_export_start) while the
 * caller goes on: a ticket for sp_export_beside_wait, or 0 when the helper
 * is not running or busy (the caller then runs it itself). */
unsigned long sp_export_beside(void (*fn)(void *), void *arg);
/* Until the task of that ticket has returned. */
void sp_export_beside_wait(unsigned long ticket);

/* Queue a job for the exporter thread (started on first use). Falls back to
 * running it on the caller when the thread cannot be created. */
void sp_export_submit(const sp_export_job_t *job);
/* The job's CUPTI records (gpu_collect): sync, flush and take, once. */
void sp_export_collect_gpu(sp_export_job_t *job);
/* Waits (at most timeout_s) until every closed window's CUPTI records are
 * collected; 0 when they are. */
int sp_export_wait_collects(double timeout_s);

/* Wait until every queued job is written, at most timeout_s seconds;
 * returns 0 when drained. */
int sp_export_drain(double timeout_s);

/* Traces queued or being written (a job whose trace is written, its reports
 * left, is not counted), and the events (host records and GPU records) of
 * the one being written, 0 while it is still collecting. */
unsigned sp_export_pending(uint64_t *running_events);
uint64_t sp_export_running_events(void);
/* The job being exported has written its trace (or is renaming it): only its
 * reports are left. */
int sp_export_running_trace_done(void);

/* Write one job's files now, on the calling thread; 0 on success. */
int sp_export_run(const sp_export_job_t *job);

/* After fork() in the child: the exporter thread does not exist there. */
void sp_export_after_fork_child(void);

#endif
