/* exporters/memory_report.c — see memory_report.h. Every figure comes from
 * the frozen cycle (collectors/memory.h): ops in time order with the slot's
 * level after each, the levels at the window's start, and the blocks live at
 * its end. Bytes print in 1024 steps like the key-average table; times are
 * milliseconds from the window's start. A block's "where" is its stack
 * (with_stack) or else the return address into the code that called CUDA,
 * named like a frame of the stacks files; CUPTI-only records have neither. */
#define _GNU_SOURCE
#include "memory_report.h"

#include "../collectors/clock.h"
#include "../collectors/log.h"
#include "../collectors/strings.h"
#include "outfile.h"
#include "stacks_sym.h"
#include "table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX 20u        /* blocks listed per group / section */
#define STACK_FRAMES 4      /* innermost frames shown for a stack */

static const struct {
    uint64_t below;
    const char *label;
} size_classes[] = {
    {4u << 10, "< 4 KB"},          {64u << 10, "4 KB - 64 KB"},    {1u << 20, "64 KB - 1 MB"},
    {16u << 20, "1 MB - 16 MB"},   {256u << 20, "16 MB - 256 MB"}, {UINT64_MAX, ">= 256 MB"},
};
#define NCLASSES (sizeof size_classes / sizeof size_classes[0])

const char *sp_memrep_slot_name(int slot, char *buf, size_t len)
{
    if (slot == SP_MEM_HOST)
        snprintf(buf, len, "pinned host");
    else
        snprintf(buf, len, "GPU %d", slot);
    return buf;
}

void sp_memrep_peak(const sp_mem_cycle_t *m, int slot, sp_memrep_peak_t *out)
{
    *out = (sp_memrep_peak_t){m->start[slot], m->t_open, m->first_step, -1};
    for (size_t i = 0; i < m->nops; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (op->slot == slot && sp_mem_op_moves(op) && op->total > out->bytes)
            *out = (sp_memrep_peak_t){op->total, op->t, op->step, (long)i};
    }
}

int sp_memrep_write_file(const sp_export_job_t *job, const char *stem, const char *suffix, const sp_rb_t *b)
{
    if (b->oom) {
        sp_log(SP_LOG_ERROR, "out of memory building %s%s; that report is dropped", stem, suffix);
        return -1;
    }
    sp_outfile_t f;
    if (sp_outfile_open(&f, job->output_dir, stem, suffix) != 0)
        return -1;
    if (sp_rb_write_fd(b, f.fd) != 0) {
        sp_outfile_fail(&f, errno); /* one line per problem for the run (outfile.c) */
        return -1;
    }
    return sp_outfile_commit(&f);
}

/* ---- formatting ---- */

static const char *bytes_text(char *buf, size_t len, int64_t v)
{
    sp_rep_fmt_bytes(buf, len, v);
    return buf;
}

static double ms_from(const sp_mem_cycle_t *m, uint64_t t)
{
    return t >= m->t_open ? (double)(t - m->t_open) / 1e6 : -(double)(m->t_open - t) / 1e6;
}

static void step_text(char *buf, size_t len, long step)
{
    if (step < 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%ld", step);
}

/* "function+0xOFF (module)", "module+0xOFF", or the bare address. */
static void site_text(sp_rb_t *b, uintptr_t pc)
{
    if (!pc)
        sp_rb_puts(b, "(seen by CUPTI only: no call site)");
    else
        sp_stacks_frame_text(b, pc, 0);
}

/* The innermost frames of a stack, innermost first, or the call site. */
static void where_text(sp_rb_t *b, uint32_t stack, uintptr_t site)
{
    const char *s = stack ? sp_stacks_text(stack) : NULL;
    if (!s) {
        site_text(b, site);
        return;
    }
    const char *end = s + strlen(s);
    for (int k = 0; k < STACK_FRAMES && end > s; k++) {
        const char *start = end;
        while (start > s && start[-1] != ';')
            start--;
        sp_rb_printf(b, "%s%.*s", k ? " <- " : "", (int)(end - start), start);
        end = start > s ? start - 1 : s;
    }
    if (end > s)
        sp_rb_puts(b, " <- ...");
}

/* "outer > inner": the NVTX ranges open on thread tid at time t. */
static void nvtx_text(sp_rb_t *b, const sp_event_ref_t *ev, size_t n, int tid, uint64_t t)
{
    size_t before = b->n;
    for (size_t i = 0; i < n && ev[i].ev->t0 <= t; i++) {
        const sp_event_t *e = ev[i].ev;
        if (e->kind == SP_EV_RANGE && e->t1 >= t && sp_ev_owner(ev[i].ev)->tid == tid)
            sp_rb_printf(b, "%s%s", b->n > before ? " > " : "", sp_str_get(e->name));
    }
    if (b->n == before)
        sp_rb_puts(b, "-");
}

static void block_line(sp_rb_t *b, const sp_mem_cycle_t *m, const sp_mem_block_t *k)
{
    char by[32], dev[32], st[32];
    step_text(st, sizeof st, k->step);
    sp_rb_printf(b, "      0x%-14" PRIx64 " %11s  %-11s  %-20s step %-4s stream %-6" PRIu64 " at %+.3f ms\n",
                 k->addr, bytes_text(by, sizeof by, (int64_t)k->bytes), sp_memrep_slot_name(k->slot, dev, sizeof dev),
                 k->api ? k->api : "(CUPTI)", st, k->stream, ms_from(m, k->t));
}

/* ---- sections ---- */

static void per_device(sp_rb_t *b, const sp_mem_cycle_t *m, const sp_event_ref_t *ev, size_t n)
{
    sp_rb_puts(b, "\n== Peak per device (during the cycle) ==\n");
    sp_rb_printf(b, "%-12s %11s %11s %12s %6s %11s %7s %7s %7s  %s\n", "device", "start", "peak", "peak at", "step",
                 "end", "allocs", "frees", "failed", "NVTX range at peak");
    for (int s = 0; s < SP_MEM_SLOTS; s++) {
        if (!(m->used_slots >> s & 1))
            continue;
        sp_memrep_peak_t pk;
        sp_memrep_peak(m, s, &pk);
        unsigned allocs = 0, frees = 0, failed = 0;
        int64_t end = m->start[s];
        for (size_t i = 0; i < m->nops; i++) {
            const sp_mem_op_t *op = &m->ops[i];
            if (op->slot != s)
                continue;
            allocs += sp_mem_op_moves(op) && op->type == SP_MOP_ALLOC;
            frees += sp_mem_op_moves(op) && op->type == SP_MOP_FREE;
            failed += op->type == SP_MOP_OOM;
            if (sp_mem_op_moves(op))
                end = op->total;
        }
        char name[32], a[32], p[32], e[32], st[32], at[32];
        step_text(st, sizeof st, pk.step);
        snprintf(at, sizeof at, "%+.3f ms", ms_from(m, pk.t));
        sp_rb_printf(b, "%-12s %11s %11s %12s %6s %11s %7u %7u %7u  ", sp_memrep_slot_name(s, name, sizeof name),
                     bytes_text(a, sizeof a, m->start[s]), bytes_text(p, sizeof p, pk.bytes), at, st,
                     bytes_text(e, sizeof e, end), allocs, frees, failed);
        if (pk.op >= 0)
            nvtx_text(b, ev, n, m->ops[pk.op].tid, pk.t);
        else
            sp_rb_puts(b, "(the level the window opened at)");
        sp_rb_puts(b, "\n");
    }
    for (int s = 0; s < SP_MEM_SLOTS; s++) {
        char name[32], p[32];
        if (m->used_slots >> s & 1)
            sp_rb_printf(b, "process peak so far on %s: %s\n", sp_memrep_slot_name(s, name, sizeof name),
                         bytes_text(p, sizeof p, m->process_peak[s]));
    }
}

typedef struct step_row {
    long step;
    int64_t start[SP_MEM_SLOTS], peak[SP_MEM_SLOTS], end[SP_MEM_SLOTS];
    unsigned allocs[SP_MEM_SLOTS], frees[SP_MEM_SLOTS];
} step_row_t;

static void per_step(sp_rb_t *b, const sp_mem_cycle_t *m)
{
    sp_rb_puts(b, "\n== Per step ==\n");
    size_t nsteps = 1;
    for (size_t i = 0; i < m->nops; i++)
        nsteps += m->ops[i].type == SP_MOP_STEP;
    if (m->first_step < 0 && nsteps == 1) {
        sp_rb_puts(b, "no steps: this run has no step marker\n");
        return;
    }
    step_row_t *rows = calloc(nsteps, sizeof *rows);
    if (!rows) {
        b->oom = 1;
        return;
    }
    int64_t lv[SP_MEM_SLOTS];
    memcpy(lv, m->start, sizeof lv);
    size_t k = 0;
    rows[0].step = m->first_step;
    memcpy(rows[0].start, lv, sizeof lv);
    memcpy(rows[0].peak, lv, sizeof lv);
    for (size_t i = 0; i < m->nops; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (op->type == SP_MOP_STEP) {
            memcpy(rows[k].end, lv, sizeof lv);
            rows[++k].step = op->step;
            memcpy(rows[k].start, lv, sizeof lv);
            memcpy(rows[k].peak, lv, sizeof lv);
        } else if (sp_mem_op_moves(op)) {
            lv[op->slot] = op->total;
            if (op->total > rows[k].peak[op->slot])
                rows[k].peak[op->slot] = op->total;
            rows[k].allocs[op->slot] += op->type == SP_MOP_ALLOC;
            rows[k].frees[op->slot] += op->type == SP_MOP_FREE;
        }
    }
    memcpy(rows[k].end, lv, sizeof lv);
    sp_rb_printf(b, "%6s  %-12s %11s %11s %11s %11s %7s %7s\n", "step", "device", "start", "peak", "end", "net",
                 "allocs", "frees");
    for (size_t r = 0; r < nsteps; r++) {
        for (int s = 0; s < SP_MEM_SLOTS; s++) {
            if (!(m->used_slots >> s & 1))
                continue;
            char name[32], a[32], p[32], e[32], d[32], st[32];
            step_text(st, sizeof st, rows[r].step);   /* "-": before the first step marker */
            sp_rb_printf(b, "%6s  %-12s %11s %11s %11s %11s %7u %7u\n", st,
                         sp_memrep_slot_name(s, name, sizeof name), bytes_text(a, sizeof a, rows[r].start[s]),
                         bytes_text(p, sizeof p, rows[r].peak[s]), bytes_text(e, sizeof e, rows[r].end[s]),
                         bytes_text(d, sizeof d, rows[r].end[s] - rows[r].start[s]), rows[r].allocs[s],
                         rows[r].frees[s]);
        }
    }
    free(rows);
}

static void by_size_class(sp_rb_t *b, const sp_mem_cycle_t *m)
{
    unsigned count[NCLASSES][2] = {{0}};
    int64_t sum[NCLASSES][2] = {{0}};
    for (size_t i = 0; i < m->nops; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (!sp_mem_op_moves(op) || op->type != SP_MOP_ALLOC)
            continue;
        size_t c = 0;
        while (op->bytes >= size_classes[c].below && c + 1 < NCLASSES)
            c++;
        int host = op->slot == SP_MEM_HOST;
        count[c][host]++;
        sum[c][host] += (int64_t)op->bytes;
    }
    sp_rb_puts(b, "\n== Allocations by size class (made during the cycle) ==\n");
    sp_rb_printf(b, "%-16s %9s %11s %9s %11s\n", "size", "device", "bytes", "pinned", "bytes");
    for (size_t c = 0; c < NCLASSES; c++) {
        char d[32], h[32];
        if (count[c][0] || count[c][1])
            sp_rb_printf(b, "%-16s %9u %11s %9u %11s\n", size_classes[c].label, count[c][0],
                         bytes_text(d, sizeof d, sum[c][0]), count[c][1], bytes_text(h, sizeof h, sum[c][1]));
    }
}

typedef struct group {
    uint32_t stack;
    uintptr_t site;
    int64_t bytes;
    size_t first, count;   /* a run of the sorted block array */
} group_t;

static int cmp_where(const void *a, const void *b)
{
    const sp_mem_block_t *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    return x->bytes != y->bytes ? (x->bytes > y->bytes ? -1 : 1) : 0;
}

static int cmp_group(const void *a, const void *b)
{
    const group_t *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes > y->bytes ? -1 : 1) : 0;
}

/* The blocks (largest first within a group) grouped by stack or call site,
 * groups largest first. */
static void grouped(sp_rb_t *b, const sp_mem_cycle_t *m, sp_mem_block_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_where);
    group_t *g = malloc((n ? n : 1) * sizeof *g);
    if (!g) {
        b->oom = 1;
        return;
    }
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ng || v[i].stack != g[ng - 1].stack || v[i].site != g[ng - 1].site)
            g[ng++] = (group_t){v[i].stack, v[i].site, 0, i, 0};
        g[ng - 1].bytes += (int64_t)v[i].bytes;
        g[ng - 1].count++;
    }
    qsort(g, ng, sizeof *g, cmp_group);
    sp_rb_printf(b, "%11s %7s  %s\n", "bytes", "blocks", "where");
    for (size_t k = 0; k < ng; k++) {
        char by[32];
        sp_rb_printf(b, "%11s %7zu  ", bytes_text(by, sizeof by, g[k].bytes), g[k].count);
        where_text(b, g[k].stack, g[k].site);
        sp_rb_puts(b, "\n");
        for (size_t i = 0; i < g[k].count && i < LIST_MAX; i++)
            block_line(b, m, &v[g[k].first + i]);
        if (g[k].count > LIST_MAX)
            sp_rb_printf(b, "      ... %zu more\n", g[k].count - LIST_MAX);
    }
    free(g);
}

static void leaks(sp_rb_t *b, const sp_mem_cycle_t *m)
{
    size_t n = 0;
    int64_t total = 0;
    sp_mem_block_t *v = malloc((m->nlive ? m->nlive : 1) * sizeof *v);
    if (!v) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < m->nlive; i++)
        if (m->live[i].in_window) {
            v[n++] = m->live[i];
            total += (int64_t)m->live[i].bytes;
        }
    char by[32];
    sp_rb_printf(b, "\n== Leaks: allocated during the cycle, still live at its end: %zu blocks, %s ==\n", n,
                 bytes_text(by, sizeof by, total));
    if (n)
        grouped(b, m, v, n);
    free(v);
    if (!m->at_exit) {
        sp_rb_puts(b, "\n== Alive at exit ==\nnot known: the process went on after this cycle\n");
        return;
    }
    total = 0;
    for (size_t i = 0; i < m->nlive; i++)
        total += (int64_t)m->live[i].bytes;
    sp_rb_printf(b, "\n== Alive at exit: %zu blocks, %s (largest first) ==\n", m->nlive,
                 bytes_text(by, sizeof by, total));
    for (size_t i = 0; i < m->nlive && i < LIST_MAX; i++)
        block_line(b, m, &m->live[i]);
    if (m->nlive > LIST_MAX)
        sp_rb_printf(b, "      ... %zu more\n", m->nlive - LIST_MAX);
}

static void bad_frees(sp_rb_t *b, const sp_mem_cycle_t *m)
{
    size_t shown = 0, total = 0;
    for (size_t i = 0; i < m->nops; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (op->type != SP_MOP_BAD_FREE && op->type != SP_MOP_DOUBLE_FREE)
            continue;
        if (!total++)
            sp_rb_puts(b, "\n== Frees of blocks stepprof did not see live ==\n");
        if (shown++ >= LIST_MAX)
            continue;
        char st[32];
        step_text(st, sizeof st, op->step);
        sp_rb_printf(b, "  %-12s %s(0x%" PRIx64 ") at %+.3f ms, step %s, returned %d, from ",
                     op->type == SP_MOP_DOUBLE_FREE ? "double free" : "unknown", op->api, op->addr, ms_from(m, op->t),
                     st, op->result);
        site_text(b, op->site);
        sp_rb_puts(b, "\n");
    }
    if (total > LIST_MAX)
        sp_rb_printf(b, "  ... %zu more\n", total - LIST_MAX);
}

static void out_of_memory(sp_rb_t *b, const sp_mem_cycle_t *m)
{
    if (!m->ooms_total)
        return;
    sp_rb_printf(b, "\n== Out of memory: %" PRIu64 " failed allocations ==\n", m->ooms_total);
    for (size_t k = 0; k < m->nooms; k++) {
        const sp_mem_oom_t *o = &m->ooms[k];
        char by[32], live[32], dev[32], st[32];
        step_text(st, sizeof st, o->op.step);
        sp_rb_printf(b, "%s of %s on %s failed (returned %d) at %+.3f ms, step %s, from ", o->op.api,
                     bytes_text(by, sizeof by, (int64_t)o->op.bytes), sp_memrep_slot_name(o->op.slot, dev, sizeof dev),
                     o->op.result, ms_from(m, o->op.t), st);
        site_text(b, o->op.site);
        sp_rb_printf(b, "\n  live at that moment: %s in %zu blocks, largest first:\n",
                     bytes_text(live, sizeof live, o->live_bytes), o->live_blocks);
        for (size_t i = 0; i < o->nlargest; i++)
            block_line(b, m, &o->largest[i]);
        if (o->live_blocks > o->nlargest)
            sp_rb_printf(b, "      ... %zu more\n", o->live_blocks - o->nlargest);
    }
    if (m->ooms_total > m->nooms)
        sp_rb_printf(b, "(%" PRIu64 " later failures of this cycle are in the trace as [OutOfMemory] events)\n",
                     m->ooms_total - m->nooms);
}

int sp_memreport_write(const sp_export_job_t *job, const char *stem, const sp_mem_cycle_t *m,
                       const sp_event_ref_t *ev, size_t n)
{
    sp_rb_t b;
    sp_rb_init(&b);
    sp_rb_printf(&b, "stepprof memory report: cycle %ld", job->cycle);
    if (job->first_step >= 0)
        sp_rb_printf(&b, ", steps %ld-%ld", job->first_step, job->last_step);
    sp_rb_printf(&b, ", window %.3f ms%s\n", (double)(m->t_close - m->t_open) / 1e6,
                 m->at_exit ? ", closed at exit" : "");
    sp_rb_puts(&b, "Bytes are what CUDA handed out (runtime and driver calls, CUPTI records); reserved = allocated.\n");
    if (m->cupti_merged || m->cupti_duplicates)
        sp_rb_printf(&b, "CUPTI: %" PRIu64 " records matched intercepted calls, %" PRIu64
                         " added for calls no interposer saw.\n", m->cupti_duplicates, m->cupti_merged);
    if (m->dropped_ops)
        sp_rb_printf(&b, "%" PRIu64 " allocation events beyond the window's log cap are missing here.\n",
                     m->dropped_ops);
    per_device(&b, m, ev, n);
    per_step(&b, m);
    by_size_class(&b, m);
    leaks(&b, m);
    bad_frees(&b, m);
    out_of_memory(&b, m);
    int rc = sp_memrep_write_file(job, stem, ".memory.txt", &b);
    sp_rb_free(&b);
    return rc;
}

int sp_memrep_write_exit(const char *output_dir, const char *worker)
{
    size_t n = 0;
    int64_t total = 0;
    sp_mem_block_t *v = sp_mem_live_now(&n, &total);
    if (!v)
        return 0;
    sp_export_job_t job;
    memset(&job, 0, sizeof job);
    snprintf(job.output_dir, sizeof job.output_dir, "%s", output_dir);
    char stem[512], by[32], dev[32], st[32];
    sp_outfile_stem(stem, sizeof stem, worker, sp_clock_mono_ns() + (uint64_t)sp_clock_epoch_offset());
    sp_rb_t b;
    sp_rb_init(&b);
    sp_rb_printf(&b, "== Alive at exit: %zu blocks, %s (largest first) ==\n", n, bytes_text(by, sizeof by, total));
    for (size_t i = 0; i < n && i < LIST_MAX; i++) {
        step_text(st, sizeof st, v[i].step);
        sp_rb_printf(&b, "      0x%-14" PRIx64 " %11s  %-11s  %-20s step %-4s stream %" PRIu64 "\n", v[i].addr,
                     bytes_text(by, sizeof by, (int64_t)v[i].bytes), sp_memrep_slot_name(v[i].slot, dev, sizeof dev),
                     v[i].api ? v[i].api : "(CUPTI)", st, v[i].stream);
    }
    if (n > LIST_MAX)
        sp_rb_printf(&b, "      ... %zu more\n", n - LIST_MAX);
    int rc = sp_memrep_write_file(&job, stem, ".memory_exit.txt", &b);
    sp_rb_free(&b);
    free(v);
    return rc;
}
