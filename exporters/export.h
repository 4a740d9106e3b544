/* exporters/export.h — what the schedule hands to the exporters when a
 * recorded window closes: a self-contained job (no pointers into schedule/
 * state), run on the background exporter thread or, at exit, synchronously. */
#ifndef SP_EXPORT_H
#define SP_EXPORT_H

#include <stdint.h>

typedef struct sp_export_job {
    uint32_t window;          /* record window id whose events go in */
    uint64_t t_begin, t_end;  /* window bounds, clock ticks */
    long cycle;               /* 0-based recorded cycle */
    long first_step, last_step; /* recorded steps, -1 when the run has no steps */
    uint64_t dropped;         /* records lost to a full buffer in this window */
    int truncated;            /* cut short (exit or signal during the cycle) */
    int use_gzip;
    int cupti;                /* GPU activity came from CUPTI */
    uint64_t cupti_dropped;   /* records CUPTI dropped in this window */
    char output_dir[4096];
    char worker[256];
} sp_export_job_t;

/* Queue a job for the exporter thread (started on first use). Falls back to
 * running it on the caller when the thread cannot be created. */
void sp_export_submit(const sp_export_job_t *job);

/* Wait until every queued job is written, at most timeout_s seconds;
 * returns 0 when drained. */
int sp_export_drain(double timeout_s);

/* Write one job's files now, on the calling thread; 0 on success. */
int sp_export_run(const sp_export_job_t *job);

/* After fork() in the child: the exporter thread does not exist there. */
void sp_export_after_fork_child(void);

#endif
