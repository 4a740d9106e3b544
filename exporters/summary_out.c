/* exporters/summary_out.c — prints a measured and judged summary as text
 * (summary.txt: aligned tables for people) and JSON (summary.json: the same
 * numbers, microseconds with three decimals, for scripts). One metric table
 * drives both, so a column cannot appear in one and be missing in the other. */
#include "summary_int.h"
#include "table.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { U_TIME, U_COUNT, U_PCT, U_BYTES, U_GBPS };

typedef struct metric {
    const char *head, *key;
    size_t off;
    int unit, gpu;
} metric_t;

static const metric_t metrics[] = {
    {"Wall", "wall_us", SUM_FIELD(wall), U_TIME, 0},
    {"Launches", "launches", SUM_FIELD(launches), U_COUNT, 0},
    {"Sync calls", "host_sync_calls", SUM_FIELD(host_syncs), U_COUNT, 0},
    {"Sync time", "host_sync_us", SUM_FIELD(host_sync_time), U_TIME, 0},
    {"D2H blocking", "blocking_d2h_copies", SUM_FIELD(blocking_d2h), U_COUNT, 0},
    {"GPU busy", "gpu_busy_us", SUM_FIELD(busy_p), U_TIME, 1},
    {"GPU idle", "gpu_idle_pct", SUM_FIELD(idle_bp), U_PCT, 1},
    {"Kernels", "kernels", SUM_FIELD(kernels), U_COUNT, 1},
    {"Kernel time", "kernel_us", SUM_FIELD(kernel_time), U_TIME, 1},
    {"Mean kernel", "mean_kernel_us", SUM_FIELD(mean_kernel), U_TIME, 1},
    {"Copies", "copies", SUM_FIELD(copies), U_COUNT, 1},
    {"Copy time", "copy_us", SUM_FIELD(copy_time), U_TIME, 1},
    {"Copy bytes", "copy_bytes", SUM_FIELD(copy_bytes), U_BYTES, 1},
    {"HtoD time", "h2d_us", SUM_FIELD(h2d_time), U_TIME, 1},
    {"HtoD bytes", "h2d_bytes", SUM_FIELD(h2d_bytes), U_BYTES, 1},
    {"HtoD GB/s", "h2d_gbps", SUM_FIELD(h2d_gbps_m), U_GBPS, 1},
    {"DtoH time", "d2h_us", SUM_FIELD(d2h_time), U_TIME, 1},
    {"DtoH bytes", "d2h_bytes", SUM_FIELD(d2h_bytes), U_BYTES, 1},
    {"DtoH GB/s", "d2h_gbps", SUM_FIELD(d2h_gbps_m), U_GBPS, 1},
    {"DtoD time", "d2d_us", SUM_FIELD(d2d_time), U_TIME, 1},
    {"DtoD bytes", "d2d_bytes", SUM_FIELD(d2d_bytes), U_BYTES, 1},
    {"DtoD GB/s", "d2d_gbps", SUM_FIELD(d2d_gbps_m), U_GBPS, 1},
    {"Sets", "sets", SUM_FIELD(sets), U_COUNT, 1},
    {"Set time", "set_us", SUM_FIELD(set_time), U_TIME, 1},
    {"GPU sync", "gpu_sync_us", SUM_FIELD(gpu_sync_time), U_TIME, 1},
};
enum { NMETRICS = sizeof metrics / sizeof metrics[0], COL = 12 };

static int64_t field(const sum_step_t *st, size_t off)
{
    return *(const int64_t *)((const char *)st + off);
}

/* avg: counts keep one decimal in text. */
static void fmt_value(char *buf, size_t len, int unit, double v, int avg)
{
    switch (unit) {
    case U_TIME: sp_rep_fmt_time(buf, len, (int64_t)(v + 0.5)); break;
    case U_PCT: snprintf(buf, len, "%.2f%%", v / 100.0); break;
    case U_BYTES: sp_rep_fmt_bytes(buf, len, (int64_t)(v + 0.5)); break;
    case U_GBPS: snprintf(buf, len, "%.3f", v / 1000.0); break;
    default: avg ? snprintf(buf, len, "%.1f", v) : snprintf(buf, len, "%.0f", v); break;
    }
}

static void json_value(sp_rb_t *b, int unit, double v)
{
    switch (unit) {
    case U_TIME: sp_rb_printf(b, "%.3f", v / 1e3); break;
    case U_PCT: sp_rb_printf(b, "%.2f", v / 100.0); break;
    case U_GBPS: sp_rb_printf(b, "%.3f", v / 1000.0); break;
    default: sp_rb_printf(b, "%.15g", v); break;
    }
}

static void text_row(sp_rb_t *b, const sp_summary_t *m, const char *label, const double *v, int avg)
{
    sp_rb_printf(b, "%-16s", label);
    for (int k = 0; k < NMETRICS; k++) {
        if (metrics[k].gpu && !m->gpu)
            continue;
        char cell[48];
        fmt_value(cell, sizeof cell, metrics[k].unit, v[k], avg);
        sp_rb_printf(b, "  %*s", COL, cell);
    }
    sp_rb_puts(b, "\n");
}

static void text_steps(const sp_summary_t *m, sp_rb_t *b)
{
    sp_rb_printf(b, "%-16s", "Step");
    for (int k = 0; k < NMETRICS; k++)
        if (!metrics[k].gpu || m->gpu)
            sp_rb_printf(b, "  %*s", COL, metrics[k].head);
    sp_rb_puts(b, "\n");
    double v[NMETRICS];
    char label[48];
    for (long i = 0; i < m->nsteps; i++) {
        for (int k = 0; k < NMETRICS; k++)
            v[k] = (double)field(&m->steps[i], metrics[k].off);
        if (m->steps[i].step < 0)
            snprintf(label, sizeof label, "window");
        else
            snprintf(label, sizeof label, "ProfilerStep#%" PRId64, m->steps[i].step);
        text_row(b, m, label, v, 0);
    }
    if (m->nsteps < 2)
        return;
    static const char *const names[] = {"min", "avg", "max"};
    for (int which = 0; which < 3; which++) {
        for (int k = 0; k < NMETRICS; k++) {
            sum_stat_t st = sum_stat(m, metrics[k].off);
            v[k] = which == 0 ? st.min : which == 1 ? st.avg : st.max;
        }
        text_row(b, m, names[which], v, which == 1);
    }
}

static void text_tallies(sp_rb_t *b, const char *title, const sum_list_t *l, int with_bytes)
{
    if (!l->n)
        return;
    sp_rb_printf(b, "\n%s\n", title);
    for (size_t i = 0; i < l->n; i++) {
        const sum_tally_t *t = &l->t[i];
        char tm[32], by[32];
        sp_rep_fmt_time(tm, sizeof tm, t->total);
        sp_rb_printf(b, "  %-28s count %-8" PRId64 "  time %-12s", t->name, t->count, tm);
        if (with_bytes) {
            sp_rep_fmt_bytes(by, sizeof by, t->bytes);
            sp_rb_printf(b, "  bytes %-10s", by);
            if (t->total > 0)
                sp_rb_printf(b, "  %.2f GB/s", (double)t->bytes / (double)t->total);
        }
        sp_rb_puts(b, "\n");
    }
}

/* Ranges come ranked by CPU time (sum_measure). The text lists the first
 * SUM_TEXT_RANGES and counts the rest in one line; a name past the column's
 * cap overflows it rather than being cut. */
#define RANGE_NAME_W 80

/* Count and total of the ranges from `from` on. */
static void rest_of(const sum_list_t *l, size_t from, int64_t *count, int64_t *total)
{
    *count = *total = 0;
    for (size_t i = from; i < l->n; i++) {
        *count += l->t[i].count;
        *total += l->t[i].total;
    }
}

static void text_ranges(const sp_summary_t *m, sp_rb_t *b)
{
    if (!m->ranges.n)
        return;
    size_t shown = m->ranges.n < SUM_TEXT_RANGES ? m->ranges.n : SUM_TEXT_RANGES;
    int w = 4;
    for (size_t i = 0; i < shown; i++) {
        int len = (int)strlen(m->ranges.t[i].name);
        w = len > w ? (len < RANGE_NAME_W ? len : RANGE_NAME_W) : w;
    }
    sp_rb_printf(b, "\nNVTX ranges (CPU time, whole cycle)\n  %-*s  %8s  %12s  %12s  %12s\n", w, "Name", "Count", "Avg",
                 "Max", "Total");
    char avg[32], mx[32], tot[32];
    for (size_t i = 0; i < shown; i++) {
        const sum_tally_t *t = &m->ranges.t[i];
        sp_rep_fmt_time(avg, sizeof avg, t->count ? t->total / t->count : 0);
        sp_rep_fmt_time(mx, sizeof mx, t->max);
        sp_rep_fmt_time(tot, sizeof tot, t->total);
        sp_rb_printf(b, "  %-*s  %8" PRId64 "  %12s  %12s  %12s\n", w, t->name, t->count, avg, mx, tot);
    }
    if (shown < m->ranges.n) {
        int64_t count, total;
        rest_of(&m->ranges, shown, &count, &total);
        sp_rep_fmt_time(tot, sizeof tot, total);
        sp_rb_printf(b, "  ... %zu more ranges: count %" PRId64 ", total %s\n", m->ranges.n - shown, count, tot);
    }
}

/* What the summary cannot know, as sentences; shared by text and JSON. */
static int unknowns(const sp_summary_t *m, const char **out)
{
    int n = 0;
    if (!m->gpu)
        out[n++] = "No GPU activity records in this trace (CUPTI was unavailable or off): GPU busy and idle time, "
                   "kernel durations, copy bandwidth, whether host copies use pageable or pinned memory and which "
                   "kernel dominates cannot be known. The rules gpu_idle, short_kernels, pageable_copy and "
                   "dominant_kernel were not evaluated; the host-side numbers are exact.";
    if (m->nsteps && m->steps[0].step < 0)
        out[n++] = "No step marker: the window is reported as one span, so per-step rules (sync_per_step, "
                   "blocking_d2h, step_variance) were not evaluated. Set marker (PROF_MARKER) to get steps.";
    return n;
}

void sum_print_text(const sp_summary_t *m, sp_rb_t *b)
{
    sp_rb_puts(b, "stepprof step summary\n");
    if (!m->nsteps) {
        sp_rb_puts(b, "\nThe window holds no events.\n");
        return;
    }
    if (m->steps[0].step >= 0)
        sp_rb_printf(b, "steps: %ld recorded (ProfilerStep#%" PRId64 " to #%" PRId64 ")\n", m->nsteps, m->steps[0].step,
                     m->steps[m->nsteps - 1].step);
    else
        sp_rb_puts(b, "steps: none marked; the whole window is one span\n");
    sp_rb_printf(b, "GPU activity records: %s", m->gpu ? "yes (device" : "no\n");
    for (int d = 0; m->gpu && d < m->ndev; d++)
        sp_rb_printf(b, "%s%ld%s", d ? ", " : " ", m->dev_id[d], d == m->primary && m->ndev > 1 ? " [shown]" : "");
    if (m->gpu)
        sp_rb_puts(b, ")\n");
    sp_rb_printf(b, "dropped events: %" PRIu64 "\n\n", m->dropped);
    text_steps(m, b);
    text_tallies(b, "GPU copies by direction (whole cycle)", &m->gpu_dirs, 1);
    text_tallies(b, "Copies requested by the host, by direction (runtime calls, whole cycle)", &m->host_dirs, 1);
    text_tallies(b, "Blocking host calls (whole cycle)", &m->sync_calls, 0);
    text_ranges(m, b);
    sp_rb_printf(b, "\nFindings\n");
    if (!m->nf)
        sp_rb_puts(b, "  none: no rule fired\n");
    for (int i = 0; i < m->nf; i++)
        sp_rb_printf(b, "  %d. [%s] %s\n     evidence: %s\n     recommendation: %s\n", i + 1, m->f[i].id, m->f[i].title,
                     m->f[i].evidence, m->f[i].recommendation);
    const char *u[4];
    int nu = unknowns(m, u);
    if (nu)
        sp_rb_puts(b, "\nWhat this trace cannot tell\n");
    for (int i = 0; i < nu; i++)
        sp_rb_printf(b, "  - %s\n", u[i]);
}

static void json_tallies(sp_rb_t *b, const char *key, const sum_list_t *l, const char *name_key, size_t max)
{
    sp_rb_printf(b, ",\n  \"%s\": [", key);
    size_t n = l->n < max ? l->n : max;
    for (size_t i = 0; i < n; i++) {
        const sum_tally_t *t = &l->t[i];
        sp_rb_printf(b, "%s\n    {\"%s\": ", i ? "," : "", name_key);
        sp_rb_json_str(b, t->name);
        sp_rb_printf(b, ", \"count\": %" PRId64 ", \"bytes\": %" PRId64 ", \"total_us\": %.3f, \"avg_us\": %.3f, "
                     "\"max_us\": %.3f}", t->count, t->bytes, (double)t->total / 1e3,
                     t->count ? (double)t->total / 1e3 / (double)t->count : 0.0, (double)t->max / 1e3);
    }
    sp_rb_puts(b, n ? "\n  ]" : "]");
}

static void json_metrics(sp_rb_t *b, const sp_summary_t *m, const sum_step_t *st)
{
    int first = 1;
    for (int k = 0; k < NMETRICS; k++) {
        if (metrics[k].gpu && !m->gpu)
            continue;
        sp_rb_printf(b, "%s\"%s\": ", first ? "" : ", ", metrics[k].key);
        first = 0;
        if (st) {
            json_value(b, metrics[k].unit, (double)field(st, metrics[k].off));
            continue;
        }
        sum_stat_t s = sum_stat(m, metrics[k].off);
        sp_rb_puts(b, "{\"min\": ");
        json_value(b, metrics[k].unit, s.min);
        sp_rb_puts(b, ", \"avg\": ");
        json_value(b, metrics[k].unit, s.avg);
        sp_rb_puts(b, ", \"max\": ");
        json_value(b, metrics[k].unit, s.max);
        sp_rb_puts(b, "}");
    }
}

void sum_print_json(const sp_summary_t *m, sp_rb_t *b)
{
    sp_rb_printf(b, "{\n  \"schema\": \"stepprof.summary/1\",\n  \"gpu_data\": %s,\n  \"devices\": [",
                 m->gpu ? "true" : "false");
    for (int d = 0; d < m->ndev; d++)
        sp_rb_printf(b, "%s%ld", d ? ", " : "", m->dev_id[d]);
    sp_rb_printf(b, "],\n  \"dropped_events\": %" PRIu64 ",\n  \"step_marker\": %s,\n  \"steps\": [", m->dropped,
                 m->nsteps && m->steps[0].step >= 0 ? "true" : "false");
    for (long i = 0; i < m->nsteps; i++) {
        sp_rb_printf(b, "%s\n    {\"step\": ", i ? "," : "");
        if (m->steps[i].step >= 0)
            sp_rb_printf(b, "%" PRId64 ", ", m->steps[i].step);
        else
            sp_rb_puts(b, "null, ");
        json_metrics(b, m, &m->steps[i]);
        sp_rb_puts(b, "}");
    }
    sp_rb_puts(b, m->nsteps ? "\n  ],\n  \"cycle\": {" : "],\n  \"cycle\": {");
    if (m->nsteps)
        json_metrics(b, m, NULL);
    sp_rb_puts(b, "}");
    json_tallies(b, "gpu_copies", &m->gpu_dirs, "direction", SIZE_MAX);
    json_tallies(b, "host_copies", &m->host_dirs, "direction", SIZE_MAX);
    json_tallies(b, "blocking_calls", &m->sync_calls, "name", SIZE_MAX);
    json_tallies(b, "ranges", &m->ranges, "name", SUM_JSON_RANGES);
    size_t listed = m->ranges.n < SUM_JSON_RANGES ? m->ranges.n : SUM_JSON_RANGES;
    int64_t count, total;
    rest_of(&m->ranges, listed, &count, &total);
    sp_rb_printf(b, ",\n  \"ranges_not_listed\": {\"ranges\": %zu, \"count\": %" PRId64 ", \"total_us\": %.3f}",
                 m->ranges.n - listed, count, (double)total / 1e3);
    sp_rb_puts(b, ",\n  \"findings\": [");
    for (int i = 0; i < m->nf; i++) {
        const sum_finding_t *f = &m->f[i];
        sp_rb_printf(b, "%s\n    {\"id\": \"%s\", \"title\": ", i ? "," : "", f->id);
        sp_rb_json_str(b, f->title);
        sp_rb_puts(b, ", \"evidence\": ");
        sp_rb_json_str(b, f->evidence);
        sp_rb_puts(b, ", \"values\": {");
        for (int k = 0; k < f->nev; k++)
            sp_rb_printf(b, "%s\"%s\": %.10g", k ? ", " : "", f->ev_key[k], f->ev_val[k]);
        sp_rb_puts(b, "}, \"recommendation\": ");
        sp_rb_json_str(b, f->recommendation);
        sp_rb_puts(b, "}");
    }
    sp_rb_puts(b, m->nf ? "\n  ],\n  \"rules_not_evaluated\": [" : "],\n  \"rules_not_evaluated\": [");
    if (m->rules_skipped)
        sp_rb_puts(b, "\"gpu_idle\", \"short_kernels\", \"pageable_copy\", \"dominant_kernel\"");
    if (m->nsteps && m->steps[0].step < 0)
        sp_rb_printf(b, "%s\"sync_per_step\", \"blocking_d2h\", \"step_variance\"", m->rules_skipped ? ", " : "");
    sp_rb_puts(b, "],\n  \"cannot_know\": [");
    const char *u[4];
    int nu = unknowns(m, u);
    for (int i = 0; i < nu; i++) {
        sp_rb_puts(b, i ? ", " : "");
        sp_rb_json_str(b, u[i]);
    }
    sp_rb_puts(b, "]\n}\n");
}
