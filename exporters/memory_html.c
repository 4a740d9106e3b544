/* exporters/memory_html.c — see memory_html.h. One SVG per used slot: the
 * level is a step line (a horizontal run to each allocation or free, then a
 * vertical jump), so the polyline has 2 + 2 x (the slot's allocations and
 * frees) points; each step start inside the window is a dashed line labelled
 * with the step number; the peak is a red dot (the first time the level
 * reached it). Class and data- attributes name every drawn element, so a
 * test (or a reader's own tooling) can find them in the page. */
#include "memory_html.h"

#include "memory_report.h"
#include "report_buf.h"
#include "table.h"

#include <inttypes.h>
#include <stdio.h>

#define W 960.0
#define H 300.0
#define LEFT 80.0
#define RIGHT 20.0
#define TOP 20.0
#define BOTTOM 40.0
#define YTICKS 4
#define XTICKS 5

typedef struct plot {
    const sp_mem_cycle_t *m;
    double span_ns, ymax;
} plot_t;

static double px(const plot_t *p, uint64_t t)
{
    double d = t <= p->m->t_open ? 0.0 : (double)(t - p->m->t_open);
    if (d > p->span_ns)
        d = p->span_ns;
    return LEFT + d / p->span_ns * (W - LEFT - RIGHT);
}

static double py(const plot_t *p, int64_t bytes)
{
    return H - BOTTOM - (double)bytes / p->ymax * (H - TOP - BOTTOM);
}

static void axes(sp_rb_t *b, const plot_t *p)
{
    sp_rb_printf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", LEFT, H - BOTTOM,
                 W - RIGHT, H - BOTTOM);
    sp_rb_printf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", LEFT, TOP, LEFT,
                 H - BOTTOM);
    for (int i = 0; i <= YTICKS; i++) {
        char label[32];
        int64_t v = (int64_t)(p->ymax * i / YTICKS);
        sp_rep_fmt_bytes(label, sizeof label, v);
        sp_rb_printf(b, "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", LEFT - 6,
                     py(p, v) + 4, label);
    }
    for (int i = 0; i <= XTICKS; i++) {
        double x = LEFT + (W - LEFT - RIGHT) * i / XTICKS;
        sp_rb_printf(b, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.3f ms</text>\n", x,
                     H - BOTTOM + 18, p->span_ns * i / XTICKS / 1e6);
    }
}

static void step_marker(sp_rb_t *b, const plot_t *p, uint64_t t, long step)
{
    double x = px(p, t);
    sp_rb_printf(b, "<line class=\"step\" data-step=\"%ld\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", step,
                 x, TOP, x, H - BOTTOM);
    sp_rb_printf(b, "<text class=\"steplabel\" x=\"%.1f\" y=\"%.1f\">step %ld</text>\n", x + 3, TOP + 10, step);
}

static void slot_plot(sp_rb_t *b, const sp_mem_cycle_t *m, int slot)
{
    char name[32], peak_text[32];
    sp_memrep_peak_t pk;
    sp_memrep_peak(m, slot, &pk);
    plot_t p = {m, m->t_close > m->t_open ? (double)(m->t_close - m->t_open) : 1.0,
                pk.bytes > 0 ? (double)pk.bytes * 1.1 : 1.0};
    sp_rep_fmt_bytes(peak_text, sizeof peak_text, pk.bytes);
    sp_memrep_slot_name(slot, name, sizeof name);
    sp_rb_printf(b, "<h2>%s: peak %s at %.3f ms", name, peak_text, (px(&p, pk.t) - LEFT) / (W - LEFT - RIGHT) *
                                                                      p.span_ns / 1e6);
    if (pk.step >= 0)
        sp_rb_printf(b, " (step %ld)", pk.step);
    sp_rb_printf(b, "</h2>\n<svg class=\"memplot\" data-slot=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                    "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", slot, W, H, W, H);
    axes(b, &p);
    if (m->first_step >= 0)
        step_marker(b, &p, m->t_open, m->first_step);
    for (size_t i = 0; i < m->nops; i++)
        if (m->ops[i].type == SP_MOP_STEP)
            step_marker(b, &p, m->ops[i].t, m->ops[i].step);
    int64_t lv = m->start[slot];
    sp_rb_printf(b, "<polyline class=\"mem\" points=\"%.1f,%.1f", px(&p, m->t_open), py(&p, lv));
    for (size_t i = 0; i < m->nops; i++) {
        const sp_mem_op_t *op = &m->ops[i];
        if (op->slot != slot || !sp_mem_op_moves(op))
            continue;
        sp_rb_printf(b, " %.1f,%.1f %.1f,%.1f", px(&p, op->t), py(&p, lv), px(&p, op->t), py(&p, op->total));
        lv = op->total;
    }
    sp_rb_printf(b, " %.1f,%.1f\"/>\n", px(&p, m->t_close), py(&p, lv));
    sp_rb_printf(b, "<circle class=\"peak\" data-bytes=\"%" PRId64 "\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/>\n", pk.bytes,
                 px(&p, pk.t), py(&p, pk.bytes));
    sp_rb_printf(b, "<text class=\"peaklabel\" x=\"%.1f\" y=\"%.1f\">peak %s</text>\n</svg>\n", px(&p, pk.t) + 8,
                 py(&p, pk.bytes) - 6, peak_text);
}

int sp_memhtml_write(const sp_export_job_t *job, const char *stem, const sp_mem_cycle_t *m)
{
    sp_rb_t b;
    sp_rb_init(&b);
    sp_rb_printf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<title>stepprof memory: %s</title>\n<style>\n"
                     "body { font: 14px sans-serif; margin: 20px; color: #222; }\n"
                     "svg { background: #fff; border: 1px solid #ddd; }\n"
                     ".mem { fill: none; stroke: #1f77b4; stroke-width: 2; }\n"
                     ".axis { stroke: #444; }\n.step { stroke: #999; stroke-dasharray: 4 3; }\n"
                     ".peak { fill: #d62728; }\ntext { font-size: 11px; fill: #444; }\n"
                     "</style>\n</head>\n<body>\n", stem);
    sp_rb_printf(&b, "<h1>GPU memory, cycle %ld", job->cycle);
    if (job->first_step >= 0)
        sp_rb_printf(&b, ", steps %ld-%ld", job->first_step, job->last_step);
    sp_rb_printf(&b, "</h1>\n<p>Allocated bytes over the %.3f ms window (blue), step starts (dashed), the peak (red). "
                     "Details: %s.memory.txt; the same curve is a counter track in %s.pt.trace.json.</p>\n",
                 (double)(m->t_close - m->t_open) / 1e6, stem, stem);
    int any = 0;
    for (int s = 0; s < SP_MEM_SLOTS; s++)
        if (m->used_slots >> s & 1) {
            slot_plot(&b, m, s);
            any = 1;
        }
    if (!any)
        sp_rb_puts(&b, "<p>No device memory was allocated or live during this window.</p>\n");
    sp_rb_puts(&b, "</body>\n</html>\n");
    int rc = sp_memrep_write_file(job, stem, ".memory.html", &b);
    sp_rb_free(&b);
    return rc;
}
