/* exporters/summary_int.h — what summary.c measures, summary_rules.c judges
 * and summary_out.c prints. Every per-step quantity is an int64_t field of
 * sum_step_t so one accessor (by offset) gives min/avg/max of any of them. */
#ifndef SP_SUMMARY_INT_H
#define SP_SUMMARY_INT_H

#include "agg.h"
#include "report_buf.h"

#include <stddef.h>
#include <stdint.h>

#define SUM_MAX_DEV 8
#define SUM_MAX_NAMES 16
#define SUM_MAX_FINDINGS 12
#define SUM_MAX_EVIDENCE 6

#define SUM_CALL_MEMO 256
/* NVTX ranges are ranked by CPU time; the text lists this many, the JSON
 * this many (a program that names a range per step or per item has 100k+
 * distinct names: 1M of them made a 107 MB summary.json.txt). */
#define SUM_TEXT_RANGES 30
#define SUM_JSON_RANGES 1000

typedef struct sum_step {
    int64_t step;                 /* -1: the whole window (no step marker) */
    int64_t t0, wall;
    int64_t busy[SUM_MAX_DEV];    /* union of GPU work inside [t0, t0 + wall), per device */
    int64_t kernels, kernel_time;
    int64_t copies, copy_time, copy_bytes;
    /* The three directions a training step moves data in, and their GB/s
     * (bytes per ns, x1000 so an integer field keeps three decimals). */
    int64_t h2d_time, h2d_bytes, h2d_gbps_m, d2h_time, d2h_bytes, d2h_gbps_m, d2d_time, d2d_bytes, d2d_gbps_m;
    int64_t pageable, pageable_bytes, pageable_time;
    int64_t sets, set_time;
    int64_t gpu_syncs, gpu_sync_time;
    int64_t launches;             /* kernel launch API calls */
    int64_t host_syncs, host_sync_time;
    int64_t blocking_d2h, blocking_d2h_bytes, blocking_d2h_time;
    int64_t busy_p, idle_bp;      /* busy and idle (basis points) on the primary device */
    int64_t mean_kernel;
} sum_step_t;

/* A named tally: copy directions, sync call names, kernels, NVTX ranges. */
typedef struct sum_tally {
    const char *name;
    int64_t count, bytes, total, max;
} sum_tally_t;

/* t in first-seen order; idx: each name's position + 1 by its string id. */
typedef struct sum_list {
    sum_tally_t *t;
    size_t n, cap;
    sp_rep_idmap_t idx;
} sum_list_t;

typedef struct sum_finding {
    const char *id, *title;
    char evidence[640];
    char recommendation[512];
    const char *ev_key[SUM_MAX_EVIDENCE];
    double ev_val[SUM_MAX_EVIDENCE];
    int nev;
} sum_finding_t;

typedef struct sp_summary {
    int gpu;                      /* the trace has GPU activity records */
    int ndev;
    long dev_id[SUM_MAX_DEV];
    int primary;                  /* device index with the most busy time */
    sum_step_t *steps;
    long nsteps;
    long hint;                    /* measuring: the step last found (summary.c step_at) */
    sum_list_t gpu_dirs, host_dirs, sync_calls, kernels, ranges;
    int64_t kernel_total;
    uint64_t dropped;
    sum_finding_t f[SUM_MAX_FINDINGS];
    int nf;
    int rules_skipped;            /* GPU rules not evaluated for want of GPU data */
    struct sum_call_memo {        /* measuring: host calls classified by name */
        sp_rep_str_t name, kind;
        int cls;
    } call_memo[SUM_CALL_MEMO];
    struct sum_copy_memo {        /* measuring: GPU copies classified by name */
        sp_rep_str_t name, dir;   /* dir: "HtoD" of "Memcpy HtoD (Pinned -> Device)", interned */
        uint8_t set, which, pageable;   /* which: enum in summary.c */
    } copy_memo[SUM_CALL_MEMO];
    sp_rep_str_t blocking_d2h;    /* measuring: "cudaMemcpy DtoH (blocking)", interned once */
} sp_summary_t;

typedef struct sum_stat {
    double min, avg, max, stddev;
} sum_stat_t;

/* Statistic over the steps of the int64_t field at offset off. */
sum_stat_t sum_stat(const sp_summary_t *m, size_t off);
/* GPU idle % of step i on device index d. */
double sum_idle_pct(const sum_step_t *st, int d);
/* Steps (of m->nsteps) where the field at off is > 0. */
long sum_steps_with(const sp_summary_t *m, size_t off);

int sum_measure(sp_rep_set_t *s, sp_summary_t *m);
void sum_free(sp_summary_t *m);
void sum_rules(sp_summary_t *m);
void sum_print_text(const sp_summary_t *m, sp_rb_t *b);
void sum_print_json(const sp_summary_t *m, sp_rb_t *b);

#define SUM_FIELD(f) offsetof(sum_step_t, f)

#endif
