/* exporters/table.c — formats key-average rows exactly as torch's
 * _build_table does: every column right-aligned to its width (12, the name
 * column min(longest + 4, 55), Input Shapes min(longest + 4, 80), Source
 * Location left-aligned to min(longest frame + 4, 75)) and followed by two
 * spaces, dashed separators, names of 52 or more characters cut to 52 + "...",
 * times switching units at 1 ms and 1 s, memory in 1024 steps. Widths count
 * code points, as Python's len() does, so UTF-8 names line up the same. */
#include "table.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#define COL_W 12
#define NAME_MAX_W 55
#define SHAPES_MAX_W 80
#define SRC_MAX_W 75
#define SPACING 2

enum { MAX_COLS = 20 };

typedef struct layout {
    const char *head[MAX_COLS];
    size_t width[MAX_COLS];
    int left[MAX_COLS];
    int ncols;
} layout_t;

static size_t u8len(const char *s, size_t bytes)
{
    size_t n = 0;
    for (size_t i = 0; i < bytes; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Bytes of the first k code points of s. */
static size_t u8prefix(const char *s, size_t k)
{
    size_t i = 0;
    for (size_t cp = 0; s[i]; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80 && cp++ == k)
            break;
    }
    return i;
}

static void cell_n(sp_rb_t *b, const layout_t *l, int col, const char *text, size_t bytes)
{
    size_t len = u8len(text, bytes), pad = len < l->width[col] ? l->width[col] - len : 0;
    if (!l->left[col])
        sp_rb_pad(b, ' ', pad);
    sp_rb_add(b, text, bytes);
    if (l->left[col])
        sp_rb_pad(b, ' ', pad);
    sp_rb_pad(b, ' ', SPACING);
}

static void cell(sp_rb_t *b, const layout_t *l, int col, const char *text)
{
    cell_n(b, l, col, text, strlen(text));
}

static void add_col(layout_t *l, const char *head, size_t width, int left)
{
    l->head[l->ncols] = head;
    l->width[l->ncols] = width;
    l->left[l->ncols] = left;
    l->ncols++;
}

static void separator(sp_rb_t *b, const layout_t *l)
{
    for (int c = 0; c < l->ncols; c++) {
        sp_rb_pad(b, '-', l->width[c]);
        sp_rb_pad(b, ' ', SPACING);
    }
    sp_rb_puts(b, "\n");
}

static void fmt_us(char *buf, size_t len, double us)
{
    if (us >= 1e6)
        snprintf(buf, len, "%.3fs", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, len, "%.3fms", us / 1e3);
    else
        snprintf(buf, len, "%.3fus", us);
}

void sp_rep_fmt_time(char *buf, size_t len, int64_t ns)
{
    fmt_us(buf, len, (double)ns / 1000.0);
}

/* torch divides the microsecond total by the count. */
static void fmt_avg(char *buf, size_t len, int64_t total, long count)
{
    fmt_us(buf, len, count ? (double)total / 1000.0 / (double)count : 0.0);
}

static void fmt_share(char *buf, size_t len, int64_t part, int64_t total)
{
    if (total == 0)
        snprintf(buf, len, "NaN");
    else
        snprintf(buf, len, "%.2f%%", (double)part * 100.0 / (double)total);
}

void sp_rep_fmt_bytes(char *buf, size_t len, int64_t bytes)
{
    int64_t a = bytes < 0 ? -bytes : bytes;
    static const char *const unit[] = {"GB", "MB", "KB"};
    for (int i = 0; i < 3; i++) {
        double scale = (double)(1ull << (10 * (3 - i)));
        if ((double)a >= scale) {
            snprintf(buf, len, "%.2f %s", (double)bytes / scale, unit[i]);
            return;
        }
    }
    snprintf(buf, len, "%" PRId64 " B", bytes);
}

/* torch's trim_path: keep the tail, marking the cut with "...". */
static void src_cell(sp_rb_t *b, const layout_t *l, int col, const char *frame, size_t bytes)
{
    size_t len = u8len(frame, bytes), w = l->width[col];
    if (len <= w) {
        cell_n(b, l, col, frame, bytes);
        return;
    }
    const char *tail = frame + u8prefix(frame, len - w);
    size_t tb = bytes - (size_t)(tail - frame);
    if (w > 3) {
        sp_rb_t t;
        sp_rb_init(&t);
        sp_rb_puts(&t, "...");
        sp_rb_add(&t, tail + u8prefix(tail, 3), tb - u8prefix(tail, 3));
        cell_n(b, l, col, t.oom ? "" : t.s, t.oom ? 0 : t.n);
        sp_rb_free(&t);
    } else {
        cell_n(b, l, col, tail, tb);
    }
}

static void blank_cells(sp_rb_t *b, const layout_t *l, int upto)
{
    for (int c = 0; c < upto; c++)
        cell(b, l, c, "");
}

typedef struct flags {
    int gpu, mem, cuda_mem, shapes, stack;
    int64_t sum_self_cpu, sum_self_cuda;
} flags_t;

static void build_layout(layout_t *l, const flags_t *f, const sp_rep_row_t *rows, long n)
{
    size_t name_w = 0, shape_w = 0, src_w = 0;
    for (long i = 0; i < n; i++) {
        size_t w = u8len(rows[i].name, strlen(rows[i].name));
        name_w = w > name_w ? w : name_w;
        w = u8len(rows[i].shape, strlen(rows[i].shape));
        shape_w = w > shape_w ? w : shape_w;
        for (const char *p = rows[i].stack; p && *p;) {
            size_t fb = strcspn(p, ";");
            w = u8len(p, fb);
            src_w = w > src_w ? w : src_w;
            p += fb + (p[fb] == ';');
        }
    }
    memset(l, 0, sizeof *l);
    add_col(l, "Name", name_w + 4 < NAME_MAX_W ? name_w + 4 : NAME_MAX_W, 0);
    static const char *const cpu[] = {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
    static const char *const gpu[] = {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"};
    static const char *const mem[] = {"CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem"};
    for (int i = 0; i < 5; i++)
        add_col(l, cpu[i], COL_W, 0);
    for (int i = 0; f->gpu && i < 4; i++)
        add_col(l, gpu[i], COL_W, 0);
    for (int i = 0; f->mem && i < (f->cuda_mem ? 4 : 2); i++)
        add_col(l, mem[i], COL_W, 0);
    add_col(l, "# of Calls", COL_W, 0);
    if (f->shapes)
        add_col(l, "Input Shapes", shape_w + 4 < SHAPES_MAX_W ? shape_w + 4 : SHAPES_MAX_W, 0);
    if (f->stack)
        add_col(l, "Source Location", src_w + 4 < SRC_MAX_W ? src_w + 4 : SRC_MAX_W, 1);
}

static void print_row(sp_rb_t *b, const layout_t *l, const flags_t *f, const sp_rep_row_t *r)
{
    char v[64];
    int c = 0;
    size_t nb = strlen(r->name);
    if (u8len(r->name, nb) >= NAME_MAX_W - 3) {
        sp_rb_t t;
        sp_rb_init(&t);
        sp_rb_add(&t, r->name, u8prefix(r->name, NAME_MAX_W - 3));
        sp_rb_puts(&t, "...");
        cell_n(b, l, c++, t.oom ? "" : t.s, t.oom ? 0 : t.n);
        sp_rb_free(&t);
    } else {
        cell(b, l, c++, r->name);
    }
    fmt_share(v, sizeof v, r->self_cpu, f->sum_self_cpu), cell(b, l, c++, v);
    sp_rep_fmt_time(v, sizeof v, r->self_cpu), cell(b, l, c++, v);
    fmt_share(v, sizeof v, r->cpu_total, f->sum_self_cpu), cell(b, l, c++, v);
    sp_rep_fmt_time(v, sizeof v, r->cpu_total), cell(b, l, c++, v);
    fmt_avg(v, sizeof v, r->cpu_total, r->count), cell(b, l, c++, v);
    if (f->gpu) {
        sp_rep_fmt_time(v, sizeof v, r->self_cuda), cell(b, l, c++, v);
        fmt_share(v, sizeof v, r->self_cuda, f->sum_self_cuda), cell(b, l, c++, v);
        sp_rep_fmt_time(v, sizeof v, r->cuda_total), cell(b, l, c++, v);
        fmt_avg(v, sizeof v, r->cuda_total, r->count), cell(b, l, c++, v);
    }
    if (f->mem) {
        sp_rep_fmt_bytes(v, sizeof v, r->cpu_mem), cell(b, l, c++, v);
        sp_rep_fmt_bytes(v, sizeof v, r->self_cpu_mem), cell(b, l, c++, v);
        if (f->cuda_mem) {
            sp_rep_fmt_bytes(v, sizeof v, r->cuda_mem), cell(b, l, c++, v);
            sp_rep_fmt_bytes(v, sizeof v, r->self_cuda_mem), cell(b, l, c++, v);
        }
    }
    snprintf(v, sizeof v, "%ld", r->count), cell(b, l, c++, v);
    if (f->shapes) {
        /* torch: str(input_shapes)[:width], a plain cut */
        cell_n(b, l, c, r->shape, u8prefix(r->shape, l->width[c]));
        c++;
    }
    if (!f->stack) {
        sp_rb_puts(b, "\n");
        return;
    }
    /* torch: the first frame on the row, one line per further frame, then a blank line. */
    const char *p = r->stack ? r->stack : "";
    size_t fb = strcspn(p, ";");
    src_cell(b, l, c, p, fb);
    sp_rb_puts(b, "\n");
    for (p += fb; *p == ';';) {
        p++;
        fb = strcspn(p, ";");
        blank_cells(b, l, c);
        src_cell(b, l, c, p, fb);
        sp_rb_puts(b, "\n");
        p += fb;
    }
    blank_cells(b, l, l->ncols);
    sp_rb_puts(b, "\n");
}

int sp_rep_table(sp_rep_set_t *s, const sp_rep_opts_t *o, sp_rb_t *out)
{
    sp_rep_row_t *rows = NULL;
    long n = sp_rep_rows(s, o, &rows);
    if (n < 0)
        return -1;
    if (n == 0) {
        free(rows);
        return 0;
    }
    flags_t f = {0};
    for (long i = 0; i < n; i++) {
        f.gpu |= rows[i].self_cuda > 0;
        f.cuda_mem |= rows[i].self_cuda_mem > 0;
        f.shapes |= o->group_by_input_shape && strcmp(rows[i].shape, "[]") != 0;
        f.stack |= rows[i].stack && *rows[i].stack;
        f.sum_self_cpu += rows[i].self_cpu;
        if (rows[i].cat >= SP_REP_KERNEL && rows[i].cat <= SP_REP_MEMSET)
            f.sum_self_cuda += rows[i].self_cuda;
    }
    f.mem = s->has_memory;
    const char *sort_by = o->sort_by && *o->sort_by ? o->sort_by
                          : f.gpu                   ? "self_cuda_time_total"
                                                    : "self_cpu_time_total";
    layout_t l;
    build_layout(&l, &f, rows, n);   /* widths from every row, as torch's table */
    if (sp_rep_sort_rows(rows, n, sort_by, o->row_limit) != 0) {
        free(rows);
        return -1;
    }
    separator(out, &l);
    for (int c = 0; c < l.ncols; c++)
        cell(out, &l, c, l.head[c]);
    sp_rb_puts(out, "\n");
    separator(out, &l);
    for (long i = 0; i < n && i != o->row_limit; i++)
        print_row(out, &l, &f, &rows[i]);
    separator(out, &l);
    char v[64];
    sp_rep_fmt_time(v, sizeof v, f.sum_self_cpu);
    sp_rb_printf(out, "Self CPU time total: %s\n", v);
    if (f.gpu) {
        sp_rep_fmt_time(v, sizeof v, f.sum_self_cuda);
        sp_rb_printf(out, "Self CUDA time total: %s\n", v);
    }
    free(rows);
    return out->oom ? -1 : 0;
}
